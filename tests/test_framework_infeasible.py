"""An infeasible job under --framework names the framework's limits among the fixes.  A user trial:
qwen3-235b-a22b on 256 H100 with --framework deepspeed (ep 1 as placement prices DeepSpeed) was told "try a
smaller model: no GPU count from 256 to 16,384 holds a layout of it", though without the flag it fits."""

from __future__ import annotations

from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "4096",
       "--global-batch", "1024"]


def test_the_framework_is_named_as_the_binding_limit() -> None:
    res = CliRunner().invoke(main, ["plan", *JOB, "--framework", "deepspeed", "--top-k", "1"])
    assert res.exit_code == 1, res.output
    assert "try dropping --framework deepspeed (DeepSpeed 0.19.8 as placement prices it runs" in res.output
    assert "(placement plans ep 1)" in res.output
    assert "a smaller model" not in res.output
    assert CliRunner().invoke(main, ["plan", *JOB, "--top-k", "1"]).exit_code == 0  # and without it, it fits
