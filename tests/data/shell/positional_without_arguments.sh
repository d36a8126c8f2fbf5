#!/bin/bash
# DeepSpeed-Chat run_llama2_7b.sh style: arguments with defaults when the script is started without them
OUTPUT=$1
ZERO_STAGE=$2
if [ "$OUTPUT" == "" ]; then
    OUTPUT=./output_step1
fi
if [ "$ZERO_STAGE" = "" ]; then
    ZERO_STAGE=3
fi
echo "args: $# ${3}x"
deepspeed main.py --zero_stage $ZERO_STAGE --output_dir $OUTPUT --count "$#" --third "x${3}x" --last "${9:-none}"
