N=2
torchrun --nnodes $(( N * 2 )) train.py --micro-batch-size $(( 8 / N ))
