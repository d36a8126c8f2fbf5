SIZE=70b
torchrun train.py --load "/ckpt/llama-${SIZE}/latest" --micro-batch-size 1
