#!/bin/bash
# FastChat docs/training.md QLoRA block: the last line ends in a continuation
deepspeed fastchat/train/train_lora.py \
    --model_name_or_path lmsys/vicuna-7b-v1.5 \
    --q_lora True \
    --deepspeed playground/deepspeed_config_s2.json \
