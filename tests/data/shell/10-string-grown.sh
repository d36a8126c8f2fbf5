OPTS="--bf16"
OPTS="$OPTS --tensor-model-parallel-size 2"
OPTS="${OPTS} --use-distributed-optimizer"
torchrun train.py $OPTS
