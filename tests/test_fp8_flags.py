"""An FP8 recipe flag on a 16-bit run prices nothing: `evaluate` and `plan` refuse it, naming the flag and the fix
(a user trial: `--fp8-recipe blockwise` without `--precision fp8` printed an FP8 recipe line over a bf16 step)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "64"]
LAYOUT = ["--tp", "1", "--cp", "1", "--ep", "1", "--etp", "1", "--pp", "1", "--vpp", "1", "--mbs", "1", "--zero", "3",
          "--recompute", "full"]


@pytest.mark.parametrize("flag", [["--fp8-recipe", "blockwise"], ["--fp8-params"]])
@pytest.mark.parametrize("command", [["evaluate", *JOB, *LAYOUT], ["plan", *JOB, "--top-k", "1"]])
def test_an_fp8_flag_on_a_bf16_run_is_refused(command: list[str], flag: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, *flag])
    assert result.exit_code == 2
    assert f"{flag[0]}: the run is bf16" in result.output and "--precision fp8" in result.output
    assert "Traceback" not in result.output


def test_the_same_flag_with_fp8_prices_fp8() -> None:
    bf16 = CliRunner().invoke(main, ["evaluate", *JOB, *LAYOUT, "--json"])
    fp8 = CliRunner().invoke(main, ["evaluate", *JOB, *LAYOUT, "--precision", "fp8", "--fp8-recipe", "blockwise",
                                    "--json"])
    assert bf16.exit_code == 0 and fp8.exit_code == 0, fp8.output
    assert '"fp8_recipe": "blockwise"' in fp8.stdout and '"fp8_recipe": null' in bf16.stdout


def test_turning_an_fp8_flag_off_on_a_bf16_run_is_no_error() -> None:
    result = CliRunner().invoke(main, ["evaluate", *JOB, *LAYOUT, "--no-fp8-params", "--json"])
    assert result.exit_code == 0, result.output


def test_blockwise_plan_says_tp_overlap_is_forced_off_not_searched() -> None:
    """Blockwise FP8 forces TP overlap off (Transformer Engine's userbuffers refuse its quantizers:
    cost.step._no_userbuffers_under_blockwise); a QA run's plan said "tp overlap off (searched)", as if it had lost on
    time.  The text line and the JSON's recipe_sources say why; a tensor-wise plan still searches it."""
    job = ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--top-k", "1", "--precision",
           "fp8"]
    text = CliRunner().invoke(main, [*job, "--fp8-recipe", "blockwise"])
    assert text.exit_code == 0, text.output
    assert "tp overlap off (forced by fp8 blockwise" in text.output
    assert "tp overlap off (searched)" not in text.output
    out = CliRunner().invoke(main, [*job, "--fp8-recipe", "blockwise", "--json"])
    plan = json.loads(out.stdout)["plans"][0]
    assert plan["recipe"]["tp_comm_overlap"] is False
    assert plan["recipe_sources"]["tp_comm_overlap"].startswith("forced off by fp8 blockwise")
    assert "Unsupported quantizer for Userbuffers" in plan["recipe_sources"]["tp_comm_overlap"]
    tensorwise = CliRunner().invoke(main, [*job, "--fp8-recipe", "tensorwise", "--json"])
    assert json.loads(tensorwise.stdout)["plans"][0]["recipe_sources"]["tp_comm_overlap"] == "searched"


def test_evaluate_says_it_under_tp_only() -> None:
    """evaluate's default (off) says why under tp above 1, and nothing at tp 1, where no TP collective runs."""
    job = ["evaluate", "--cluster", "dgx-h100", "--precision", "fp8", "--fp8-recipe", "blockwise", "--json"]
    tp4 = CliRunner().invoke(main, [*job, "--model", "llama3-70b", "--gpus", "64", "--tp", "4", "--pp", "4",
                                    "--sequence-parallel"])
    tp1 = CliRunner().invoke(main, [*job, "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--zero", "1"])
    assert tp4.exit_code in (0, 1) and tp1.exit_code in (0, 1), tp4.output + tp1.output
    assert json.loads(tp4.stdout)["recipe_sources"]["tp_comm_overlap"].startswith("forced off by fp8 blockwise")
    assert json.loads(tp1.stdout)["recipe_sources"]["tp_comm_overlap"] == "default"
