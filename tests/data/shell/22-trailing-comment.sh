TP=2  # tensor parallel
torchrun train.py --tensor-model-parallel-size $TP  # launch
