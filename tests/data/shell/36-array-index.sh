TPS=(1 2 4 8)
torchrun train.py --tensor-model-parallel-size ${TPS[2]}
