"""A Megatron-LM pipeline size the files leave to a variable they do not set (`--pipeline-model-parallel-size $PP`,
PP in an env file the script sources) is unknown, not Megatron's default 1: the validate_args refusals that need it
wait, and the reader names the variable (a trial: such a script with interleaving was refused as 'an interleaved
schedule without pipeline parallelism', a job it is not)."""

from __future__ import annotations

from click.testing import CliRunner

from placement.cli import main

SCRIPT = """#!/bin/bash
source ./env.sh
ARGS="--tensor-model-parallel-size 8 --pipeline-model-parallel-size $PP \\
  --num-layers-per-virtual-pipeline-stage 4 --sequence-parallel"
torchrun --nproc_per_node 8 --nnodes 32 pretrain_gpt.py $ARGS \\
  --num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 --group-query-attention \\
  --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 --swiglu --normalization RMSNorm \\
  --position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights \\
  --micro-batch-size 1 --global-batch-size 128 --bf16
"""


def test_a_pipeline_size_from_an_unset_variable_is_named_not_taken_as_one(tmp_path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-70b", "--cluster",
                                       "dgx-h100", "--gpus", "256"])
    assert result.exit_code == 2, result.output
    assert "--pipeline-model-parallel-size depends on $PP, which the files do not set" in result.output
    assert "without pipeline parallelism" not in result.output
