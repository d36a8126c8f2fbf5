"""Megatron-LM's --fp8-param-gather "Keep[s] the compute param in fp8 ... and perform[s] the param all-gather in fp8"
(megatron/training/arguments.py): the distributed optimizer's weight all-gather moves one byte a weight, not two
(cost.dp.gather_bytes).  Before, recipe fp8_params changed the memory only, and the gather was priced at 16 bits."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--tp", "8", "--pp", "1",
       "--mbs", "1", "--zero", "1", "--recompute", "full", "--global-batch", "64", "--seq-len", "8192",
       "--no-grad-reduce-fp32", "--json"]


def _dp_s(precision: str, params: bool, recipe_file: str | None = None) -> float:
    flags = ["--recipe", recipe_file] if recipe_file else ["--fp8-params" if params else "--no-fp8-params"]
    out = CliRunner().invoke(main, [*JOB, "--precision", precision, *flags])
    assert out.exit_code in (0, 1), out.output[-800:]
    return json.loads(out.stdout)["breakdown"]["dp"]


def test_fp8_params_gather_one_byte_a_weight() -> None:
    # ZeRO-1 with 16-bit gradients: a reduce-scatter and a gather of the same size, the gather halved under FP8
    assert _dp_s("fp8", True) == pytest.approx(0.75 * _dp_s("fp8", False), rel=1e-3)


def test_a_bf16_job_gathers_16_bit_weights_whatever_the_recipe(tmp_path) -> None:
    """A recipe file shared with FP8 jobs may say fp8_params; a bf16 run prices nothing of it (the flag itself is
    refused on a bf16 run: tests/test_fp8_flags.py)."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("fp8_params: true\n")
    assert _dp_s("bf16", True, str(recipe)) == pytest.approx(_dp_s("bf16", False), rel=1e-9)
