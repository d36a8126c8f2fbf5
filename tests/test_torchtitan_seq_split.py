"""torchtitan 0.3.0 raises at start-up unless the sequence divides by tp (under sequence parallelism) x 2cp
(trainer.py:306-315).  A user trial: seq 4100 at tp 2 (SP) x cp 2 was priced and its torchtitan.sh written with a
step time, exit 0; seq 131,073 under --framework torchtitan planned tp 8 with sequence parallelism."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "64"]
LAYOUT = ["--tp", "2", "--cp", "2", "--zero", "3", "--recompute", "full", "--mbs", "1"]


def test_framework_torchtitan_refuses_a_sequence_its_split_does_not_divide() -> None:
    res = CliRunner().invoke(main, ["evaluate", *JOB, "--seq-len", "4100", *LAYOUT, "--framework", "torchtitan"])
    assert res.exit_code == 2
    assert "sequence 4100 with tp 2 (sequence parallel) and cp 2" in res.output and "--seq-len 4096" in res.output
    ok = CliRunner().invoke(main, ["evaluate", *JOB, "--seq-len", "4096", *LAYOUT, "--framework", "torchtitan"])
    assert ok.exit_code in (0, 1), ok.output
    # an odd sequence within llama3_8b's RoPE length (131,073 is past it: torchtitan stops at start-up whatever the
    # layout, test_emit_torchtitan_run.py)
    plan = json.loads(CliRunner().invoke(main, ["plan", *JOB, "--seq-len", "65537", "--framework", "torchtitan",
                                                "--top-k", "5", "--json"]).stdout)["plans"]
    assert plan
    for p in plan:
        lay = p["layout"]
        divisor = (lay["tp"] if lay["sequence_parallel"] else 1) * (2 * lay["cp"] if lay["cp"] > 1 else 1)
        assert 65537 % divisor == 0, lay


def test_its_file_says_it_does_not_start_and_exits_1(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["evaluate", *JOB, "--seq-len", "4100", *LAYOUT, "--emit", "torchtitan", "--out",
                                    str(tmp_path), "--json"])
    assert res.exit_code == 1
    assert json.loads(res.stdout)["files_not_starting"] == ["torchtitan.sh"]
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "this file does not start: torchtitan refuses it at start-up" in " ".join(text.replace("#", " ").split())


def test_zero_1_as_zero_2_under_a_pipeline_is_said_as_the_pipeline_runs_it(tmp_path: Path) -> None:
    """A user trial: the header said FSDP2 gathers the weights again every micro-batch and listed
    reshard_after_backward True, where torch's PipelineStage turns the reshard off until the last backward."""
    job = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "512", "--tp", "8", "--zero", "1",
           "--mbs", "1", "--recompute", "full", "--emit", "torchtitan"]
    piped = CliRunner().invoke(main, [*job, "--pp", "4", "--vpp", "5", "--out", str(tmp_path / "pp")])
    assert "keeps each stage's weights gathered" in piped.stderr and "reshard_after_backward" not in piped.stderr
    flat = CliRunner().invoke(main, [*job, "--pp", "1", "--out", str(tmp_path / "flat")])
    assert "reshard_after_backward True (not False)" in flat.stderr
