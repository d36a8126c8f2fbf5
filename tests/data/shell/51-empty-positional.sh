#!/bin/bash
# torchtitan's run_train.sh ends in "$@": started with no arguments bash passes no word for it (the reader passed
# one empty word, and the torchtitan reader refused the file); an empty array's "${A[@]}" is no word either, while
# "" and an array of one empty element are one empty word each
CONFIG_FILE=${CONFIG_FILE:-"./torchtitan/models/llama3/train_configs/debug_model.toml"}
EXTRA=()
ONE=("")
torchrun --nproc_per_node=8 -m torchtitan.train --job.config_file ${CONFIG_FILE} "$@" "${EXTRA[@]}"
torchrun --nproc_per_node=8 -m torchtitan.train "" "${ONE[@]}" "x$@" "${EXTRA[@]}y"
