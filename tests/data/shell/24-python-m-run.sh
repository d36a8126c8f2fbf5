python -u -m torch.distributed.run --nproc_per_node 8 train.py --micro-batch-size 4
