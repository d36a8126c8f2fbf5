"""A Megatron file with the old `--checkpoint-activations` starts only on a Megatron-LM before 3e71ad9c62 (2023-04-26),
which exits on it, or on Megatron-DeepSpeed: both run the unfused attention core unless a --use-flash-attn* flag says
otherwise.  A user trial's Megatron-DeepSpeed script without --deepspeed was priced with FlashAttention by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

SCRIPT = """#!/bin/bash
GPT_ARGS="--num-layers 24 --hidden-size 2304 --num-attention-heads 24 --seq-length 2048 \\
  --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 64 --bf16 {extra}"
torchrun --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS --tensor-model-parallel-size 1
"""


def _audit(tmp_path: Path, extra: str) -> dict:
    path = tmp_path / "pretrain.sh"
    path.write_text(SCRIPT.format(extra=extra))
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "megatron-gpt-1.7b", "--cluster",
                                       "dgx-a100-80g", "--gpus", "8", "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("extra", "kernel"), [
    ("--checkpoint-activations", "unfused"),
    ("--checkpoint-activations --use-flash-attn", "flash"),
    ("--recompute-activations", "flash"),  # today's flag: Megatron-LM's default attention
])
def test_the_old_checkpoint_flag_prices_the_attention_of_the_megatron_that_starts_the_file(tmp_path, extra, kernel):
    data = _audit(tmp_path, extra)
    assert data["estimate"]["recipe"]["attention_kernel"] == kernel
    if kernel == "unfused":
        source = data["estimate"]["recipe_sources"]["attention_kernel"]
        assert "--checkpoint-activations" in source and "3e71ad9c62" in source


def test_the_unfused_core_costs_time(tmp_path):
    old, new = _audit(tmp_path, "--checkpoint-activations"), _audit(tmp_path, "--recompute-granularity full "
                                                                              "--recompute-method uniform")
    assert old["estimate"]["layout"]["recompute"] == new["estimate"]["layout"]["recompute"] == "full"
    assert old["estimate"]["step_time_s"] > new["estimate"]["step_time_s"]


@pytest.mark.parametrize("extra", ["--use-flash-attn-v2", "--checkpoint-activations --use-flash-attn-v2"])
def test_megatron_deepspeeds_flash_attention_2_flag_is_read_without_deepspeed(tmp_path, extra):
    """Trial t26: `--use-flash-attn-v2`, a flag only Megatron-DeepSpeed defines, went unread in a file without
    --deepspeed (Megatron-DeepSpeed runs without its engine too) and the job was priced with the default kernel."""
    data = _audit(tmp_path, extra)
    assert data["estimate"]["recipe"]["attention_kernel"] == "flash2"
    assert "--use-flash-attn-v2" in data["estimate"]["recipe_sources"]["attention_kernel"]
