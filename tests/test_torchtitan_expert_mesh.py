"""torchtitan 0.3.0's expert mesh takes expert_parallel_degree of the dp_shard x cp x tp ranks (efsdp = dp_shard x cp x
tp // ep, distributed/parallel_dims.py:278-279), and DeviceMesh refuses it at start where ep does not divide them.  Its
ZeRO-0 is data_parallel_shard_degree 1, so ZeRO-0 beside ep wider than tp x cp never starts: --framework torchtitan
does not plan it, evaluate refuses it, a file written for it says so and the audit refuses it.
(tests/verify/test_torchtitan.py builds the mesh with torchtitan's own ParallelDims.)"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-b200", "--gpus", "64", "--seq-len", "4096", "--global-batch",
       "256"]


def _run(*argv: str):
    return CliRunner().invoke(main, list(argv))


def test_plan_framework_torchtitan_keeps_zero0_experts_within_tp_and_cp() -> None:
    """A user trial: --zero 0 planned tp1 ep4 (and ep8) at dp 32, which torchtitan's mesh refuses."""
    result = _run("plan", *JOB, "--framework", "torchtitan", "--zero", "0", "--top-k", "10", "--json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert plans
    for p in plans:
        lay = p["layout"]
        assert (lay["tp"] * lay["cp"]) % lay["ep"] == 0, lay


def test_evaluate_framework_torchtitan_refuses_zero0_with_ep_over_tp_and_cp() -> None:
    result = _run("evaluate", *JOB, "--framework", "torchtitan", "--ep", "8", "--zero", "0", "--recompute", "full")
    assert result.exit_code == 2, result.output
    assert "ZeRO-0 with ep 8 over tp 1 x cp 1" in result.output and "parallel_dims.py:278-279" in result.output
    inside = _run("evaluate", *JOB, "--framework", "torchtitan", "--tp", "4", "--ep", "4", "--zero", "0",
                  "--recompute", "full")
    assert inside.exit_code in (0, 1), inside.output  # ep within tp: the mesh builds


def test_a_torchtitan_file_of_zero0_with_ep_does_not_start_and_its_audit_refuses_it(tmp_path: Path) -> None:
    """Without --framework the plan is Megatron's, whose ZeRO-0 runs any ep; the torchtitan file states
    data_parallel_shard_degree 1 beside expert_parallel_degree 8."""
    out = tmp_path / "files"
    result = _run("evaluate", *JOB, "--ep", "8", "--zero", "0", "--recompute", "full", "--emit", "torchtitan",
                  "--out", str(out), "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["files_not_starting"] == ["torchtitan.sh"]
    text = (out / "torchtitan.sh").read_text()
    assert "# this file does not start" in text and "expert_parallel_degree 8" in text
    audit = _run("audit", "--launch", str(out / "torchtitan.sh"), "--model", "qwen3-30b-a3b", "--cluster",
                 "dgx-b200", "--gpus", "64")
    assert audit.exit_code == 2, audit.output
    assert "expert_parallel_degree 8 does not divide" in audit.output and "so this job does not start" in audit.output
