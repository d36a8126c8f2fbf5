#!/bin/bash
NP=4
[ -z "$NP" ] && NP=8
[[ -n "$NP" ]] && EXTRA=--bf16
[[ "$NP" == 8 ]] && EXTRA="$EXTRA --bogus"
[ "$NP" -eq 4 ] || NP=16
( cd /tmp && echo "in a subshell" ; SUB=1 )
torchrun --nproc_per_node $NP train.py $EXTRA --sub "${SUB:-none}"
