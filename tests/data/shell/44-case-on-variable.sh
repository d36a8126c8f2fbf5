#!/bin/bash
MODEL_SIZE=70b
case "$MODEL_SIZE" in
    8b)
        TP=1; PP=1 ;;
    70b|65b)
        TP=8
        PP=4
        ;;
    4*)
        TP=8; PP=16 ;;
    *)
        echo "unknown size $MODEL_SIZE"; exit 1 ;;
esac
case $TP in
    [0-4]) SP="" ;;
    *) SP=--sequence-parallel ;;
esac
torchrun --nproc_per_node 8 train.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP $SP
