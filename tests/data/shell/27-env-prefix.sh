CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun train.py --tensor-model-parallel-size 2
