P=/data
torchrun train.py --data-path "$P"/train_text --micro-batch-size 1
