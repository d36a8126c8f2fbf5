#!/bin/bash
# Megatron-Bridge's examples/models/*/slurm_pretrain.sh: each "TP,PP,EP,CP,SP" config read with IFS=',' read,
# the loop ending in an `if ... continue` that skips nothing
CONFIGS=("2,4,8,1,True" "4, 2 ,x" "1,2,")
for CONFIG in "${CONFIGS[@]}"; do
    IFS=',' read -r TP PP EP REST <<< "$CONFIG"
    torchrun train.py --tp "$TP" --pp "$PP" --ep "$EP" --rest "$REST"
    if [ -f "/nonexistent/$TP" ]; then
        continue
    fi
done
read -r A B <<< "  one   two three  "
torchrun train.py --a "$A" --b "$B"
IFS=: read -r X Y Z <<< "p:q"
torchrun train.py --x "$X" --y "$Y" --z "$Z"
IFS=, read -r F G <<< "1,2,3,"
torchrun train.py --f "$F" --g "$G"
IFS=, read -r F G <<< "1,2,"
torchrun train.py --f "$F" --g "$G"
