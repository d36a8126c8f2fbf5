#!/bin/bash
#SBATCH --nodes=2
LAUNCHER="torchrun --nproc_per_node 8 --nnodes $SLURM_NNODES"
CMD="train.py --tensor-model-parallel-size 4"
srun --jobid 1 bash -c "$LAUNCHER --node_rank \$SLURM_PROCID $CMD" 2>&1 | tee log
