"""torchtitan's pipeline is torch.distributed.pipelining's, whose micro-batch rules are not Megatron's: Schedule1F1B
raises with fewer micro-batches than stages (torch 2.13 schedules.py:1020-1024)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main
from placement.cost import rules
from placement.specs import TrainingSpec

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--zero", "3", "--mbs", "1"]


def _evaluate(*argv: str, out: Path | None = None):
    extra = ["--out", str(out)] if out is not None else []
    return CliRunner().invoke(main, ["evaluate", *JOB, *argv, "--json", *extra])


def _broken(global_batch: int, torch_pipeline: bool, **layout) -> str | None:
    model = load_model("llama3-8b")
    train = TrainingSpec(seq_len=8192, global_batch=global_batch)
    facts = rules.Facts.of(model, train, framework="torchtitan" if torch_pipeline else "megatron")
    rule = rules.first_broken(facts, {"tp": 1, "cp": 1, "ep": 1, "etp": 1, "vpp": 1, "mbs": 1} | layout)
    return None if rule is None else rule.name


def test_plain_1f1b_needs_as_many_microbatches_as_stages_under_torch_only():
    assert _broken(4, True, pp=4, dp=2) == "pp_microbatches"  # 2 micro-batches on 4 stages
    assert _broken(4, False, pp=4, dp=2) is None  # Megatron's 1F1B warms up min(pp - rank - 1, m)
    assert _broken(8, True, pp=4, dp=2) is None


def test_evaluate_framework_torchtitan_refuses_1f1b_with_fewer_microbatches_than_stages():
    result = _evaluate("--pp", "4", "--global-batch", "8", "--framework", "torchtitan")
    assert result.exit_code == 2, result.output
    assert "Schedule1F1B" in result.output and "fewer micro-batches (2) than stages (4)" in result.output


def test_a_torchtitan_file_of_1f1b_with_fewer_microbatches_than_stages_does_not_start(tmp_path):
    """Without --framework the plan is Megatron's, which runs it; the torchtitan file says torch refuses it."""
    result = _evaluate("--pp", "4", "--global-batch", "8", "--emit", "torchtitan", out=tmp_path)
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["files_not_starting"] == ["torchtitan.sh"]
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "# this file does not start" in text and "Schedule1F1B" in text
