"""`--emit` given several times adds each one's formats: a QA trial's `plan ... --out DIR --emit megatron --emit
torchtitan --emit deepspeed --emit maxtext` wrote maxtext's files alone (click kept the last value), with no word
about the others, and searched for the plans maxtext's files run as priced only."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--global-batch", "256"]


@pytest.mark.parametrize("command", [["plan", "--top-k", "1"], ["evaluate", "--tp", "2", "--pp", "1"]])
def test_each_emit_adds_its_formats(tmp_path: Path, command: list[str]) -> None:
    out = CliRunner().invoke(main, [*command, *JOB, "--out", str(tmp_path / "o"), "--emit", "megatron",
                                    "--emit", "torchtitan,deepspeed"])
    assert out.exit_code == 0, out.output
    written = {p.name for p in (tmp_path / "o").iterdir()}
    assert {"megatron.sh", "torchtitan.sh", "deepspeed.sh"} <= written, written


def test_all_beside_another_is_every_format(tmp_path: Path) -> None:
    from placement.emit.writer import FORMATS, parse_formats

    assert parse_formats("all,megatron") == list(FORMATS)
    with pytest.raises(Exception, match="unknown format"):
        parse_formats("all,megatrn")
