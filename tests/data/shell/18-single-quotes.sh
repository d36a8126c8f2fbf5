torchrun train.py --name 'run $X literal' --micro-batch-size 1
