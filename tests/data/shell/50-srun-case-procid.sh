#!/bin/bash
#SBATCH --nodes=2
SIZE=small
case $SIZE in
    small) GPUS=4 ;;
    large) GPUS=8 ;;
esac
srun bash -c "torchrun --nproc_per_node $GPUS --nnodes $SLURM_NNODES --node_rank \$SLURM_PROCID train.py"
