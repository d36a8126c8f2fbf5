ARGS=(--tensor-model-parallel-size 8)
ARGS+=(--sequence-parallel)
ARGS+=(--micro-batch-size 1)
torchrun train.py "${ARGS[@]}"
