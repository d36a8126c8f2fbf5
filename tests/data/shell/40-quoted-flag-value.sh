torchrun train.py "--fp8-format" "hybrid" --micro-batch-size 1
