torchrun train.py --extra '"a b"' --micro-batch-size 1
