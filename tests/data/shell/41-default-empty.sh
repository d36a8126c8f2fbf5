EXTRA=""
torchrun train.py $EXTRA --micro-batch-size 1
