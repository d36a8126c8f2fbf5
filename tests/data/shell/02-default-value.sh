TP=${TP:-2}
torchrun --nproc_per_node=8 train.py --tensor-model-parallel-size ${TP}
