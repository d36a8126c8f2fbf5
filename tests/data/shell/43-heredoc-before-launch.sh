#!/bin/bash
# a DeepSpeed config written by a here-document; its body is data, not commands
ZERO_STAGE=2
cat <<EOT > ds_config.json
{
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": { "stage": $ZERO_STAGE },
  "note": "torchrun --not-a-command 'quoted"
}
EOT
cat > hostfile <<-'EOF'
	worker-0 slots=8
	worker-1 slots=8
	EOF
deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config ds_config.json --zero-stage $ZERO_STAGE
