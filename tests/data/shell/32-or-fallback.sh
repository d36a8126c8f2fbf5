torchrun train.py --micro-batch-size 2 || echo failed
