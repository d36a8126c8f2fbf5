#!/bin/bash
# llama3-70b on four 8-GPU nodes, TP spanning two nodes: the audit example of the HTML report
# (tests/test_html_report.py, benchmarks/report_screenshots.py)
GPUS_PER_NODE=8
NNODES=4
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK"
torchrun $DISTRIBUTED_ARGS pretrain_gpt.py \
    --num-layers 80 --hidden-size 8192 --num-attention-heads 64 \
    --swiglu --ffn-hidden-size 28672 --group-query-attention --num-query-groups 8 \
    --seq-length 8192 --max-position-embeddings 8192 \
    --tensor-model-parallel-size 16 --sequence-parallel \
    --pipeline-model-parallel-size 2 \
    --micro-batch-size 1 --global-batch-size 64 \
    --use-distributed-optimizer --bf16
