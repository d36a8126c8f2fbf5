"""An FP8 recipe flag on a 16-bit run prices nothing: `evaluate` and `plan` refuse it, naming the flag and the fix
(a user trial: `--fp8-recipe blockwise` without `--precision fp8` printed an FP8 recipe line over a bf16 step)."""

from __future__ import annotations

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
