#!/bin/bash
ARGS=()
for flag in tensor-model-parallel-size pipeline-model-parallel-size; do
    ARGS+=("--$flag" 2)
done
LAYERS=""
for n in 1 2 3; do
    LAYERS="$LAYERS$n,"
done
for f in --bf16 "--use-flash-attn"
do
    ARGS+=($f)
done
torchrun --nproc_per_node 4 train.py "${ARGS[@]}" --layers "${LAYERS}x" --tag $n
