ARGS="--tensor-model-parallel-size 2 --micro-batch-size 4"
eval torchrun train.py $ARGS
