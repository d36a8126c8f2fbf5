"""`plan --out DIR --plan-index K`: the files realize plan K, and stdout says so with plan K's own headline (a user
trial read plan 1's headline, breakdown and mapping as the files'); --json names the index (`files_plan_index`)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

ARGS = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
        "--global-batch", "64", "--top-k", "3"]


def test_stdout_shows_the_plan_the_files_realize(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, [*ARGS, "--json"])
    assert res.exit_code == 0, res.output
    second = json.loads(res.stdout)["plans"][1]
    out = CliRunner().invoke(main, [*ARGS, "--out", str(tmp_path / "f"), "--emit", "megatron", "--plan-index", "2"])
    assert out.exit_code == 0, out.output
    after = out.stdout.split("realize plan 2 of the table above, not plan 1:", 1)
    assert len(after) == 2, out.stdout
    assert f"step {second['step_time_s']:.3f} s" in after[1]
    first_headline = out.stdout.split("\n")[2]
    assert first_headline.startswith("step ") and first_headline not in after[1]


def test_json_names_the_index_of_the_files(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, [*ARGS, "--json", "--out", str(tmp_path / "f"), "--emit", "megatron",
                                    "--plan-index", "3"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["files_plan_index"] == 3
    res = CliRunner().invoke(main, [*ARGS, "--json"])
    assert json.loads(res.stdout)["files_plan_index"] is None
