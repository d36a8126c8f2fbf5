#!/bin/bash
# a user trial's pattern (NVIDIA examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh): an array quoted inside a string
ARGS=(
    --num-layers 32
    --hidden-size 4096
    --seq-length 4096
)
CMD="torchrun --nproc_per_node 8 pretrain_gpt.py ${ARGS[@]} --bf16"
srun bash -c "${CMD}"
