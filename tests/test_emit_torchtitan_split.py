"""torchtitan 0.3.0 splits pipeline stages its own way (layers per stage, first/last stage less layers): the
emitter picks the flags torchtitan accepts whose split is closest to the plan's, and a split it cannot match
is priced as torchtitan builds it (`make verify` checks `torchtitan_split` against torchtitan's own code)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.emit.torchtitan import split_layout, stage_flags, torchtitan_split


def test_first_and_last_two_short_get_flags_torchtitan_accepts():
    """[7, 9, 9, 7] over pp 4 x vpp 2: the direct flags (chunk 9 // 2, first/last less 2) make 9 stages, which
    torchtitan refuses (not divisible by pp); the search finds flags it accepts with exactly the plan's split."""
    try:
        torchtitan_split(32, 4, 4, 2, 2)
        refused = False
    except ValueError as err:
        refused = "not divisible by pipeline_parallel_degree 4" in str(err)
    assert refused
    (chunk, first_less, last_less), split, per_rank = stage_flags(32, 4, 2, [7, 9, 9, 7])
    assert per_rank == [7, 9, 9, 7] and len(split) == 8
    assert torchtitan_split(32, 4, chunk, first_less, last_less) == split


def test_a_split_torchtitan_cannot_build_is_priced_as_it_builds_it():
    """[10, 22] over pp 2 x vpp 2 is beyond torchtitan's near-even split: the closest it builds is priced through
    the same pipeline layout `evaluate --pipeline-layout` takes."""
    _, split, per_rank = stage_flags(32, 2, 2, [10, 22])
    assert per_rank != [10, 22] and sum(per_rank) == 32
    layout = split_layout(split)
    assert layout.startswith("E") and layout.endswith("L") and layout.count("|") == len(split) - 1
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--pp", "2",
                                       "--vpp", "2", "--mbs", "1", "--global-batch", "64", "--pipeline-layout", layout,
                                       "--json"])
    assert result.exit_code in (0, 1), result.output
    got = json.loads(result.stdout)["layout"]
    assert got["stage_layers"] == per_rank or [got["stage_layers"][0], got["stage_layers"][-1]] == per_rank
    assert re.fullmatch(r"E?t+L?(\|E?t+L?)*", layout)


def test_an_explicit_layout_torchtitan_builds_per_rank_is_priced_as_built_not_as_the_even_default(tmp_path):
    """A plan's --pipeline-layout is no torchtitan flag, but when the flags torchtitan takes build its layers per
    PP rank (7|8|8|9 over pp 2 x vpp 2: 15/17), the file runs that uneven split: its header must price 15/17, as the
    audit of the file does, not the even 16/16 of a plan without a layout."""
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--global-batch", "64"]
    out = tmp_path / "files"
    result = CliRunner().invoke(main, ["evaluate", *job, "--tp", "2", "--pp", "2", "--vpp", "2", "--mbs", "1",
                                       "--zero", "3", "--pipeline-layout", "Et*7|t*8|t*8|t*9L", "--json",
                                       "--emit", "torchtitan", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output[-1500:]
    runs = re.search(r"^# this file runs (.*?): ([\d.]+) s/step \(", (out / "torchtitan.sh").read_text(), re.M)
    assert runs is not None and "pipeline_layout" not in runs.group(1)
    audit = CliRunner().invoke(main, ["audit", *job, "--launch", str(out / "torchtitan.sh"), "--hosts",
                                      str(out / "hosts.txt"), "--json"])
    assert audit.exit_code in (0, 1), audit.output[-1500:]
    est = json.loads(audit.stdout)["estimate"]
    assert est["layout"]["rank_layers"] == [15, 17]
    assert est["step_time_s"] == pytest.approx(float(runs.group(2)), abs=5e-4)
