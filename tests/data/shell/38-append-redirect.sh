torchrun train.py --micro-batch-size 2 >> log.txt 2>&1
