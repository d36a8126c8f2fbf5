#!/bin/bash
TP=2
MODEL_ARGS=( \
    --num-layers 32 \
    --hidden-size 4096 \
    # a comment between the elements
    --tensor-model-parallel-size $TP \
    "--seq-length" \
        8192
)
MODEL_ARGS+=(
    --micro-batch-size 1  # and a comment after one
    --global-batch-size $((TP * 64))
)
torchrun --nproc_per_node 8 \
    pretrain_gpt.py \
    "${MODEL_ARGS[@]}"
