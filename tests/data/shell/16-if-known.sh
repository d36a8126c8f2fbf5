MODE=big
if [ "$MODE" == "big" ]; then
  TP=8
else
  TP=1
fi
torchrun train.py --tensor-model-parallel-size $TP
