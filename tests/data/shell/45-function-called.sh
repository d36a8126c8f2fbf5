#!/bin/bash
NNODES=2
TP=4

launch() {
    local script=$1
    shift
    local extra="--micro-batch-size 2"
    torchrun --nnodes "$NNODES" --nproc_per_node 8 "$script" --tensor-model-parallel-size "$TP" $extra "$@"
}

function log_and_run {
    echo "running: $*"
    launch "$@"
}

TP=2
log_and_run pretrain_gpt.py --seq-length 4096 "--name run one"
