"""Megatron-Core keeps Adam's moments in bf16 only with the distributed optimizer: OptimizerConfig.__post_init__
asserts '--use-precision-aware-optimizer only supported with distributed optimizer' (core_v0.19.0
megatron/core/optimizer/optimizer_config.py:430-436; validate_args lets it through).  A ZeRO-0 (DDP) plan with
--optimizer-state-bf16 writes a megatron.sh that does not start: its header promises no step time, and the audit of
that file refuses it as well, while Megatron-FSDP (which turns the distributed optimizer on itself) and ZeRO-1 run."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--global-batch", "64"]


def _emit(tmp_path, zero: str):
    out = tmp_path / f"z{zero}"
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "2", "--mbs", "1", "--zero", zero,
                                       "--optimizer-state-bf16", "--json", "--emit", "megatron", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output[-1500:]
    return out, json.loads(result.stdout), result.exit_code


def _audit(out):
    return CliRunner().invoke(main, ["audit", *JOB, "--launch", str(out / "megatron.sh"), "--hosts",
                                     str(out / "hosts.txt"), "--json"])


def test_a_ddp_plan_with_bf16_adam_moments_writes_a_file_that_does_not_start_and_the_audit_agrees(tmp_path):
    out, data, code = _emit(tmp_path, "0")
    assert code == 1 and data["files_not_starting"] == ["megatron.sh"]
    text = (out / "megatron.sh").read_text()
    assert "--use-precision-aware-optimizer" in text and "--use-distributed-optimizer" not in text
    assert "# this file does not start" in text and "only supported with distributed optimizer" in text
    audit = _audit(out)
    assert audit.exit_code == 2
    assert "--use-precision-aware-optimizer without --use-distributed-optimizer" in audit.output
    assert "this job does not start" in audit.output


@pytest.mark.parametrize("zero", ["1", "3"])
def test_bf16_adam_moments_under_the_distributed_optimizer_or_megatron_fsdp_start(tmp_path, zero):
    out, data, _ = _emit(tmp_path, zero)
    assert data["files_not_starting"] == []
    assert "does not start" not in (out / "megatron.sh").read_text()
    audit = _audit(out)
    assert audit.exit_code in (0, 1), audit.output[-1500:]
    assert json.loads(audit.stdout)["estimate"]["step_time_s"] == pytest.approx(data["step_time_s"], rel=1e-6)
