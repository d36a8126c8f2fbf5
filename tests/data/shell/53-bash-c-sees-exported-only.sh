#!/bin/bash
#SBATCH --nodes=2
# a child shell (`bash -c`, `sh -c`, `srun bash -c`) sees the exported variables, the ones on its own command line
# and SLURM's, not the rest (bash(1) ENVIRONMENT); what it sets ends with it
TP=4
PP=2
export PP
export CP=2
declare -x EP=8
set -a
VPP=3
set +a
MBS=4
set -o allexport
GBS=64
set +o allexport
SEQ=4096
bash -c 'torchrun t1.py --tp ${TP:-1} --pp ${PP:-1} --cp ${CP:-1} --ep ${EP:-1} --vpp ${VPP:-1} --mbs ${MBS:-1} --gbs ${GBS:-1} --seq ${SEQ:-2048}'
srun --jobid 1 bash -c 'torchrun t2.py --tp ${TP:-1} --nnodes $SLURM_NNODES'
TP=8 sh -c 'torchrun t3.py --tp ${TP:-1}'
bash -c "torchrun t4.py --tp $TP --pp \${TP:-6}"
export -n PP
unset CP
CP=4
bash -c 'DP=16; torchrun t5.py --pp ${PP:-1} --cp ${CP:-1} --dp $DP'
torchrun t6.py --dp ${DP:-1}
run() { local -x LTP=2; bash -c 'torchrun t7.py --tp ${LTP:-1}'; }
run
