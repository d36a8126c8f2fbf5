torchrun train.py --num-layers 80 &> out.log
