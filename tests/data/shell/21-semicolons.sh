TP=2; PP=2; torchrun train.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP
