"""MXFP8 on a GPU without MXFP8 tensor cores stops at Transformer Engine's first FP8 autocast (quantization.py:761-763,
"Device compute capability 10.0 or higher required for MXFP8 execution."): the audit refuses it naming the launch
files' own setting (a QA run: Hydra overrides with mixed_precision=bf16_with_mxfp8_mixed on H100 were told
"fp8_recipe mxfp8: h100-sxm has no MXFP8 tensor cores ...", naming no line)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

LAUNCHES = {
    "bridge": "torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "
              "mixed_precision=bf16_with_mxfp8_mixed\n",
    "megatron": "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 1 --num-layers 32 "
                "--hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 --group-query-attention "
                "--num-query-groups 8 --seq-length 8192 --micro-batch-size 1 --global-batch-size 8 --bf16 "
                "--fp8-format e4m3 --fp8-recipe mxfp8 --untie-embeddings-and-output-weights\n",
}


@pytest.mark.parametrize("kind", sorted(LAUNCHES))
def test_mxfp8_on_hopper_is_refused_with_the_files_line(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "train.sh"
    script.write_text(LAUNCHES[kind])
    job = ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch", str(script)]
    result = CliRunner().invoke(main, [*job, "--cluster", "dgx-h100"])
    assert result.exit_code == 2, result.output
    assert f"{script}:1:" in result.output and "Traceback" not in result.output
    assert "compute capability 10.0 or higher required for MXFP8" in result.output
    assert ("bf16_with_mxfp8_mixed" if kind == "bridge" else "--fp8-recipe mxfp8") in result.output
    assert CliRunner().invoke(main, [*job, "--cluster", "dgx-b200"]).exit_code in (0, 1)
