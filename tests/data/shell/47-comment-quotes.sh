#!/bin/bash
# don't launch yet: "the quote in this comment" is not a string
GPUS=8 # it's 8 GPUs per node, isn't it?
ARGS="--micro-batch-size 1" # "unbalanced quote in a comment: '
#torchrun --this-line-is-a-comment
torchrun --nproc_per_node $GPUS train.py $ARGS # trailing comment with 'quotes" and $(cmd)
