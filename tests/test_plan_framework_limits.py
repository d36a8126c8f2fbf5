"""Three user trials of a plan against what frameworks start: sequence parallelism at a sequence the TP degree does not
split (llama3-70b at 8191 planned tp 4 with SP: no framework starts it), torchtitan's default pipeline split where no
layers-per-stage flags give the plan's (llama3-70b on 100 GB200, pp 25: the file said "set it yourself" and priced the
plan's split, 39.974 s, where it runs torchtitan's, 38.368 s), and a --framework search that finds nothing told the
generic divisibility rules, which tp 2 x pp 25 x dp 2 meets."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from placement.cli import main


def _cli(*argv: str):
    return CliRunner().invoke(main, list(argv))


def test_the_plan_keeps_sequence_parallelism_to_tp_degrees_that_split_the_sequence():
    result = _cli("plan", "--model", "llama3-70b", "--gpus", "64", "--seq-len", "8191", "--global-batch", "128",
                  "--top-k", "5", "--json")
    assert result.exit_code == 0, result.output
    for p in json.loads(result.stdout)["plans"]:
        lay = p["layout"]
        assert not lay["sequence_parallel"] or 8191 % (lay["cp"] * lay["tp"]) == 0, lay
    refused = _cli("evaluate", "--model", "llama3-70b", "--gpus", "64", "--seq-len", "8191", "--global-batch", "128",
                   "--tp", "4", "--sequence-parallel")
    assert refused.exit_code == 2 and "try --seq-len 8192 or --no-sequence-parallel" in refused.output


def test_a_torchtitan_file_left_to_its_default_split_is_priced_as_that_split(tmp_path):
    job = ["--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "100"]
    result = _cli("plan", *job, "--emit", "torchtitan", "--out", str(tmp_path), "--top-k", "1", "--json")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "pipeline_parallel_layers_per_stage" not in text.split("torchrun", 1)[1]
    assert "leaves it to torchtitan's default" in text
    runs = re.search(r"# this file runs .*?: ([\d.]+) s/step", text)
    assert runs is not None, text[:2000]
    audit = _cli("audit", *job, "--launch", str(tmp_path / "torchtitan.sh"), "--json")
    assert audit.exit_code in (0, 1), audit.output
    assert json.loads(audit.stdout)["estimate"]["step_time_s"] == pytest.approx(float(runs.group(1)), abs=1e-3)


def test_a_framework_search_that_finds_nothing_names_the_framework_rule():
    result = _cli("plan", "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "100", "--framework",
                  "torchtitan")
    assert result.exit_code != 0
    message = result.output.replace("\n", " ")
    assert "runs under --framework torchtitan" in message and "torchtitan 0.3.0 runs none of them" in message
    assert "pipeline_parallel_layers_per_stage" in message and "tp must divide" not in message
