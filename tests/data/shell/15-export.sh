export MASTER_PORT=6000
export TP=4
torchrun --master_port $MASTER_PORT train.py --tensor-model-parallel-size $TP
