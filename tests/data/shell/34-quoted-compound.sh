ID=7
torchrun train.py --name="run_$ID" --micro-batch-size 1
