NNODES=4
GPUS=8
WORLD=$((NNODES*GPUS))
torchrun train.py --global-batch-size $((WORLD * 4))
