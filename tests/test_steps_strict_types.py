"""A step file (`calibrate --steps`, `validate --runs`) takes integers and flags as written, as a model or cluster YAML
does (README "Input limits"): a QA trial found `num_gpus: "8"`, `seq_len: "8192"` and `recipe: {tp_comm_overlap:
"no"}` coerced (the last to False) while its own `layout: {tp: "8"}` was refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

ENTRY = """- id: quoted
  model: llama3-8b
  num_gpus: {num_gpus}
  seq_len: {seq_len}
  global_batch: 64
  precision: bf16
  layout: {{tp: 1, pp: 1, cp: 1, zero_stage: 1, micro_batch_size: 1}}
  step_time_s: {step}
  recipe: {{tp_comm_overlap: {overlap}, mtp_layers: 0}}
"""
GOOD = {"num_gpus": "8", "seq_len": "8192", "step": "10.5", "overlap": "false"}


@pytest.mark.parametrize(("change", "message"), [
    ({"num_gpus": '"8"'}, "field `num_gpus` = '8': an integer expected, not a string: write it without quotes."),
    ({"seq_len": '"8192"'}, "field `seq_len` = '8192': an integer expected, not a string: write it without quotes."),
    ({"overlap": '"no"'}, "field `recipe.tp_comm_overlap` = 'no': true or false expected, not a string"),
    ({"overlap": "1"}, "field `recipe.tp_comm_overlap` = 1: true or false expected, not a number."),
])
@pytest.mark.parametrize("command", [["validate", "--runs"], ["calibrate", "--steps"]])
def test_a_quoted_number_or_flag_in_a_step_file_is_an_error(tmp_path: Path, change: dict, message: str,
                                                            command: list[str]) -> None:
    path = tmp_path / "steps.yaml"
    path.write_text(ENTRY.format(**{**GOOD, **change}), encoding="utf-8")
    args = [*command, str(path), "--cluster", "dgx-h100"]
    if command[0] == "calibrate":
        args += ["--out", str(tmp_path / "p.yaml")]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2, out.output
    assert message in out.output
    assert "Traceback" not in out.output


def test_a_step_file_as_written_still_reads(tmp_path: Path) -> None:
    """The rule takes nothing away: numbers as written read, and a step in seconds written as text is a decimal, as a
    model YAML's fractional fields take one (PyYAML leaves `1e1` as text)."""
    path = tmp_path / "steps.yaml"
    path.write_text(ENTRY.format(**{**GOOD, "step": '"10.5"'}), encoding="utf-8")
    out = CliRunner().invoke(main, ["validate", "--runs", str(path), "--cluster", "dgx-h100"])
    assert out.exit_code == 0, out.output
    assert "quoted" in out.output and "10.500" in out.output
