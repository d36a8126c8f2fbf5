torchrun train.py --save /tmp/my\ dir --micro-batch-size 1
