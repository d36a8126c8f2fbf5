ARGS=(--seq-length 4096 --num-layers 32)
torchrun train.py ${ARGS[@]}
