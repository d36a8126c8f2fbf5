#!/bin/bash
ARGS=(--num-layers 32 --hidden-size "4096")
MORE=(--seq-length 4096)
CMD="python pretrain_gpt.py ${ARGS[@]} ${MORE[@]}"
eval $CMD
