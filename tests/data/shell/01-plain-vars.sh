GPUS=8
NODES=2
torchrun --nproc_per_node $GPUS --nnodes $NODES train.py --tensor-model-parallel-size 4
