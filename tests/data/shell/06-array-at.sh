ARGS=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4)
torchrun train.py "${ARGS[@]}"
