"""MaxText's FP8 under Qwix (use_qwix_quantization true) is priced at the scaling its Qwix provider runs: `fp8` and
`fp8_e4m3` are Qwix QtRules with channelwise scales (one per row of each dot_general operand, forward and backward;
layers/quantizations.py:825-836, :851), `fp8_gpu` Flax's per-tensor Fp8DirectDotGeneralOp (:771-779).  A QA run
found `quantization=fp8 use_qwix_quantization=true` priced per tensor, its source naming Flax's op (llama3-8b fsdp 8
on 8 H100: 0.429 s), and `fp8_gpu` under Qwix priced as bf16 matmuls (0.571 s)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from tests.test_maxtext_omegaconf_values import BASE_YML, COMMAND


def _estimate(tmp_path: Path, extra: str) -> dict:
    (tmp_path / "base.yml").write_text(BASE_YML)
    (tmp_path / "train.sh").write_text(f"#!/bin/bash\n{COMMAND} {extra}\n")
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "8", "--cluster",
                                    "dgx-h100", "--launch", str(tmp_path / "train.sh"), "--launch",
                                    str(tmp_path / "base.yml"), "--json"])
    assert got.exit_code in (0, 1), got.output
    return json.loads(got.stdout)["estimate"]


def test_qwix_fp8_is_priced_row_wise(tmp_path: Path) -> None:
    flax = _estimate(tmp_path, "quantization=fp8")
    for quant in ("fp8", "fp8_e4m3"):
        qwix = _estimate(tmp_path, f"quantization={quant} use_qwix_quantization=true")
        assert qwix["precision"] == "fp8" and qwix["recipe"]["fp8_recipe"] == "rowwise", quant
        assert "channelwise" in qwix["recipe_sources"]["fp8_recipe"]
        assert qwix["step_time_s"] != flax["step_time_s"]
    assert flax["recipe"]["fp8_recipe"] == "tensorwise"


def test_qwix_fp8_gpu_is_flaxs_per_tensor_fp8(tmp_path: Path) -> None:
    flax = _estimate(tmp_path, "quantization=fp8")
    gpu = _estimate(tmp_path, "quantization=fp8_gpu use_qwix_quantization=true")
    assert gpu["precision"] == "fp8" and gpu["recipe"]["fp8_recipe"] == "tensorwise"
    assert "NvidaFp8Provider" in gpu["recipe_sources"]["fp8_recipe"]
    assert gpu["step_time_s"] == flax["step_time_s"]
