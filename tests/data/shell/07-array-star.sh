ARGS=(--tensor-model-parallel-size 2)
torchrun train.py "${ARGS[*]}"
