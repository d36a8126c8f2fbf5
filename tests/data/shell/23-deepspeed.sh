deepspeed --num_gpus 8 --num_nodes 2 train.py --deepspeed --deepspeed_config ds.json
