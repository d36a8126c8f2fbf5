#!/bin/bash
#SBATCH --nodes=2
# `bash -c STRING NAME ARG...`: NAME is the string's $0 and the ARGs its $1 ... $@, not the script's arguments;
# a child shell sees the functions `export -f` (`declare -fx`) marked, not the others (bash(1) OPTIONS, ENVIRONMENT)
export SEQ=4096
bash -c 'torchrun t1.py --tp $1 --pp ${2:-1} --cp ${3:-1} --seq $SEQ --n $# --all "$@"' launch 4 2
srun bash -c 'torchrun t2.py --tp ${1:-8} --nnodes $SLURM_NNODES'
launch() { torchrun t3.py --tp "$1" --pp "${PP:-1}"; }
export -f launch
PP=2 bash -c 'launch 2'
train() { torchrun t4.py --cp "$1"; }
declare -fx train
bash -c 'f() { train "$@"; }; f 4'
declare -f +x train
bash -c 'type train >/dev/null 2>&1 || torchrun t5.py --no-train'
run() { bash -c 'torchrun t6.py --ep $1 --first $0' first "$1"; }
run 8
