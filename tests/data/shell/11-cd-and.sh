cd /tmp && torchrun --nproc_per_node 8 train.py --micro-batch-size 2
