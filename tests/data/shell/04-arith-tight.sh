A=4
B=2
torchrun train.py --global-batch-size $((A*B*16))
