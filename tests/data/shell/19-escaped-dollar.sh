torchrun train.py --name "cost \$5" --micro-batch-size 1
