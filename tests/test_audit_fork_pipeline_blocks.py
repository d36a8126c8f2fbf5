"""Trial t26, finding 5: Yuan-2.0's fork states its uneven pipeline split, `--pipeline-model-parallel-method block
--pipeline-model-parallel-blocks 2,2,...,3`, and checks only that the counts sum to the layers and number the stages
(IEIT-Yuan/Yuan-2.0 megatron/arguments.py:117-121).  The audit refused its 42 layers on 16 stages by stock
Megatron-LM's even-split rule; it now prices the split the fork builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

SCRIPT = """#!/bin/bash
torchrun --nproc_per_node 8 --nnodes 5 pretrain_yuan.py --num-layers 36 --hidden-size 4096 --num-attention-heads 32 \\
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 \\
  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 5 --pipeline-model-parallel-method block \\
  --pipeline-model-parallel-blocks {blocks}
"""


def _audit(tmp_path: Path, blocks: str):
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT.format(blocks=blocks))
    return CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "megatron-gpt-7.5b", "--cluster",
                                     "dgx-a100-80g", "--gpus", "40", "--json"])


def test_the_forks_explicit_split_is_priced(tmp_path: Path) -> None:
    result = _audit(tmp_path, "7,7,8,7,7")
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert data["estimate"]["recipe"]["pipeline_layout"] == "E" + "|".join("t" * n for n in (7, 7, 8, 7, 7)) + "L"
    assert "Yuan-2.0" in data["estimate"]["recipe_sources"]["pipeline_layout"]
    assert not any(f["kind"] == "unknown_config_key" and "blocks" in f["message"] for f in data["findings"])


@pytest.mark.parametrize(("blocks", "said"), [("7,7,8,7,8", "5 stages of 37 layers"), ("12,12,12", "3 stages of 36"),
                                              ("7,7,x,7,7", "layer counts per stage")])
def test_a_split_the_fork_refuses_is_an_error(tmp_path: Path, blocks: str, said: str) -> None:
    result = _audit(tmp_path, blocks)
    assert result.exit_code == 2 and said in result.stderr and "Traceback" not in result.output
