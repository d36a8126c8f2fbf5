mkdir -p /tmp/ck && cd /tmp && torchrun train.py --micro-batch-size 8 && echo ok
