torchrun \
  --nproc_per_node 8 \
  --nnodes 4 \
  train.py \
  --tensor-model-parallel-size 8 \
  --pipeline-model-parallel-size 4
