#!/bin/bash
# bash options before and after -c (t26: NVIDIA's sbatch_mfsdp_deepseek_v3.sh runs `bash -x -c "${TRAINING_CMD}"`)
ARGS=(
    --num-layers 32
    --hidden-size 4096
)
CMD="torchrun --nproc_per_node 8 pretrain_gpt.py ${ARGS[*]}"
srun bash -x -c "${CMD} --bf16"
srun bash -eo pipefail -c "${CMD} --fp16"
bash -ec -u "${CMD} --tensor-model-parallel-size 2"
bash --norc -c "${CMD} --tensor-model-parallel-size 4"
