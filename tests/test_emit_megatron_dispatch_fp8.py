"""Megatron-Core 0.19.2 has no FP8 token dispatch: DeepEP's fused_dispatch sends the hidden states as given, HybridEP
builds its buffer with fp8_dispatch = False (transformer/moe/fused_a2a.py:401, :326) and NCCL-EP's receive buffers
are bfloat16.  A plan priced with --dispatch-fp8 therefore gets a megatron.sh that dispatches bf16; its header must
price that, and the audit of the file must agree with the header (issue: launch files that run exactly what was
priced)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
       "--global-batch", "64", "--precision", "fp8"]


def test_a_megatron_file_of_an_fp8_dispatch_plan_prices_the_bf16_dispatch_it_runs(tmp_path):
    out = tmp_path / "files"
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "1", "--ep", "8", "--mbs", "1",
                                       "--moe-dispatcher", "alltoall", "--dispatch-fp8", "--json",
                                       "--out", str(out), "--emit", "megatron"])
    assert result.exit_code in (0, 1), result.output[-1500:]
    planned = json.loads(result.stdout)["step_time_s"]
    text = (out / "megatron.sh").read_text()
    runs = re.search(r"^# this file runs (.*?): ([\d.]+) s/step \(", text, re.MULTILINE)
    assert runs is not None and runs.group(1) == "dispatch_fp8 False (not True)", text[:2000]
    assert float(runs.group(2)) > planned  # a 16-bit dispatch moves twice the bytes forward
    audit = CliRunner().invoke(main, ["audit", *JOB, "--launch", str(out / "megatron.sh"),
                                      "--hosts", str(out / "hosts.txt"), "--json"])
    assert audit.exit_code in (0, 1), audit.output[-1500:]
    got = json.loads(audit.stdout)["estimate"]
    assert got["layout"]["ep"] == 8
    assert got["step_time_s"] == pytest.approx(float(runs.group(2)), abs=5e-4)  # the header prints 3 decimals
