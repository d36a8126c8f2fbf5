"""`validate --runs FILE --json`: each of the user's runs says what it was priced as (the layout, the recipe, the
layout fields the search filled because the file left them open) and the command that reproduces the prediction, as
the published runs do (a user trial could not see which ZeRO stage and recompute its run was priced with)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

STEPS = """- model: llama3-8b
  num_gpus: 8
  seq_len: 8192
  global_batch: 128
  precision: bf16
  layout: {tp: 1, pp: 1, cp: 1, micro_batch_size: 1}
  step_time_s: 12.0
"""


def test_each_run_carries_its_layout_search_and_command(tmp_path: Path) -> None:
    path = tmp_path / "steps.yaml"
    path.write_text(STEPS, encoding="utf-8")
    out = CliRunner().invoke(main, ["validate", "--runs", str(path), "--cluster", "dgx-h100", "--json"])
    assert out.exit_code == 0, out.output
    (run,) = json.loads(out.stdout)["runs"]
    assert run["layout"]["tp"] == 1 and run["layout"]["micro_batch_size"] == 1
    # the file leaves ZeRO and recompute open: the search's choices are named
    assert {"zero_stage", "recompute"} <= set(run["searched"])
    assert run["searched"]["zero_stage"] == run["layout"]["zero_stage"]
    again = CliRunner().invoke(main, [*shlex.split(run["command"])[1:], "--json"])
    assert again.exit_code in (0, 1), again.output
    assert json.loads(again.stdout)["step_time_s"] == pytest.approx(run["predicted_step_time_s"], rel=1e-3)


def test_the_json_carries_the_summary_the_text_prints(tmp_path: Path) -> None:
    """A user trial: `validate --runs --json` had each run's error but not the mean and max the text prints."""
    path = tmp_path / "steps.yaml"
    path.write_text(STEPS + STEPS.replace("step_time_s: 12.0", "step_time_s: 15.0"), encoding="utf-8")
    args = ["validate", "--runs", str(path), "--cluster", "dgx-h100"]
    data = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    errors = [abs(r["error"]) for r in data["runs"]]
    assert data["summary"]["default"] == {"mean_abs_error": pytest.approx(sum(errors) / 2),
                                          "max_abs_error": pytest.approx(max(errors)), "runs": 2, "left_out": []}
    assert data["summary"]["calibrated"] is None  # no profile given
    text = CliRunner().invoke(main, args).stdout
    assert f"default: mean |error| {sum(errors) / 2:.1%}, max {max(errors):.1%} over 2 runs" in text


def test_the_text_names_what_the_search_filled_and_a_run_over_capacity(tmp_path: Path) -> None:
    """The table said nothing of the ZeRO stage, recompute and micro-batch the search chose for a run whose file left
    them open (only --json named them), nor that the memory model puts a stated layout over capacity, which the
    published runs' table marks "over"."""
    over = """- id: seventy-on-eight
  model: llama3-70b
  num_gpus: 8
  seq_len: 8192
  global_batch: 128
  precision: bf16
  layout: {tp: 8, cp: 1, pp: 1, micro_batch_size: 1, zero_stage: 1, recompute: none, sequence_parallel: true}
  step_time_s: 90.0
"""
    path = tmp_path / "steps.yaml"
    path.write_text(STEPS.replace("- model:", "- id: open-knobs\n  model:") + over, encoding="utf-8")
    args = ["validate", "--runs", str(path), "--cluster", "dgx-h100"]
    runs = {r["id"]: r for r in json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)["runs"]}
    text = CliRunner().invoke(main, args).stdout
    searched = runs["open-knobs"]["searched"]
    line = next(x for x in text.splitlines() if x.startswith("searched: open-knobs: "))
    assert f"z{searched['zero_stage']}" in line and f"rc {searched['recompute']}" in line
    assert runs["seventy-on-eight"]["searched"] == {} or not runs["seventy-on-eight"]["searched"]
    assert not any(x.startswith("searched: seventy-on-eight") for x in text.splitlines())
    assert runs["seventy-on-eight"]["fits"] is False and runs["open-knobs"]["fits"] is True
    assert "over capacity: seventy-on-eight: the memory model puts it at " in text
    assert "over capacity: open-knobs" not in text


def test_an_unstated_micro_batch_of_a_run_over_capacity_is_the_least_memory_not_the_fastest(tmp_path: Path) -> None:
    """A QA trial: Llama 3 70B at tp 4 with no recompute, which no micro-batch fits, left its micro-batch open and was
    priced at mbs 4 (253 GiB a GPU, the fastest the re-pricing's roomy memory allows) while the table said "priced at
    the fastest legal value" and "priced at its stated layout": the run ran, so it ran the micro-batch nearest fitting.
    """
    tight = """- id: tight
  model: llama3-70b
  num_gpus: 64
  seq_len: 8192
  global_batch: 64
  precision: bf16
  layout: {tp: 4, pp: 1, cp: 1, zero_stage: 1, recompute: none, sequence_parallel: true}
  step_time_s: 20.0
"""
    path = tmp_path / "steps.yaml"
    path.write_text(tight, encoding="utf-8")
    args = ["validate", "--runs", str(path), "--cluster", "dgx-h100"]
    (run,) = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)["runs"]
    assert run["fits"] is False
    assert run["layout"]["micro_batch_size"] == 1 and run["searched_least_memory"] == {"micro_batch_size": 1}
    # every larger micro-batch needs more memory: 1 is the nearest fitting
    def peak(mbs: int) -> float:
        out = CliRunner().invoke(main, ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64",
                                        "--seq-len", "8192", "--global-batch", "64", "--tp", "4", "--pp", "1",
                                        "--cp", "1", "--zero", "1", "--recompute", "none", "--sequence-parallel",
                                        "--mbs", str(mbs), "--json"])
        return json.loads(out.stdout)["peak_memory_bytes"]
    assert peak(1) < peak(2) < peak(4)
    text = CliRunner().invoke(main, args).stdout
    assert ("searched: tight: mbs 1 (not stated by the run; no value fits the memory model, so priced at the one it "
            "puts lowest, not the fastest)") in text
    assert "searched: tight: mbs 1 (not stated by the run; priced at the fastest" not in text
