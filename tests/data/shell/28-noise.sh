set -x
echo "starting"
mkdir -p /tmp/x
torchrun train.py --micro-batch-size 2
echo done
