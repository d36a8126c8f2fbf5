"""Auditing a pipelined MaxText file: the schedule MaxText runs (every forward before the backward, the stage forward
recomputed) is said beside the 1F1B price, and each degree's source names the axes that set it, not all 24 mesh
keys (a user trial: "no findings" under a price of a schedule MaxText does not run, and 2 KB source lines)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from placement.cli import main


def test_a_pipelined_maxtext_audit_says_the_schedule_is_not_priced_and_cites_only_the_axes_set(tmp_path) -> None:
    job = ["--model", "llama3-70b", "--gpus", "256"]
    plan = CliRunner().invoke(main, ["--reproducible", "plan", *job, "--out", str(tmp_path), "--emit", "maxtext"])
    assert plan.exit_code == 0, plan.output
    text = (tmp_path / "maxtext.yml").read_text()
    stages = int(re.search(r"^dcn_pipeline_parallelism: (\d+)", text, re.M).group(1)) * int(
        re.search(r"^ici_pipeline_parallelism: (\d+)", text, re.M).group(1))
    assert stages > 1  # the trial's file: a pipeline
    got = CliRunner().invoke(main, ["--reproducible", "audit", *job, "--launch", str(tmp_path / "maxtext.yml")])
    assert got.exit_code in (0, 1), got.output
    assert "MaxText's pipeline" in got.output and "step time above the estimate" in got.output
    tp_line = next(x for x in got.output.splitlines() if x.startswith("  tp "))
    assert "ici_tensor_parallelism" in tp_line and "ici_diloco_parallelism" not in tp_line
    assert "every other ici_*/dcn_* parallelism 1" in tp_line
