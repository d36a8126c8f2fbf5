#!/bin/bash
ARGS=(--num-layers 32 --hidden-size 4096)
S="${ARGS[@]}"
T=("${ARGS[@]}")
T[2]="${ARGS[@]}"
python pretrain_gpt.py $S ${T[@]}
