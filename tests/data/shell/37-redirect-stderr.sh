torchrun train.py --micro-batch-size 2 2>/dev/null
