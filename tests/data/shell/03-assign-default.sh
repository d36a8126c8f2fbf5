: ${PP:=4}
torchrun train.py --pipeline-model-parallel-size $PP
