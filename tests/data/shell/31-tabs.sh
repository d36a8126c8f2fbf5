torchrun	train.py	--micro-batch-size	2
