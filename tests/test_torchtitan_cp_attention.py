"""Context parallelism as torchtitan 0.3.0's own attention runs it, not Transformer Engine's: a torchtitan file is
re-priced without TE's context-parallel refusals (its attention is FlexAttention or PyTorch's varlen)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

OSS = ["--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "32768", "--global-batch",
       "64", "--tp", "1", "--ep", "8", "--zero", "3", "--recompute", "full"]


def _evaluate(*argv: str):
    return CliRunner().invoke(main, ["evaluate", *OSS, *argv, "--json"])


def test_a_torchtitan_file_is_not_refused_for_transformer_engines_cp_rules(tmp_path: Path) -> None:
    """GPT-OSS at cp 2 under --cp-comm-type a2a (Megatron's plan, which TE runs beside the sinks): the torchtitan file
    is re-priced under torchtitan's all-gather, which TE's sinks rule does not govern (a user trial was refused, exit 2,
    told to pass the --cp-comm-type a2a it had passed, and got no file)."""
    result = _evaluate("--cp", "2", "--cp-comm-type", "a2a", "--emit", "torchtitan", "--out", str(tmp_path))
    assert result.exit_code != 2, result.output
    assert "Transformer Engine runs context parallelism" not in result.output
    assert json.loads(result.stdout)["layout"]["cp"] == 2
    assert (tmp_path / "torchtitan.sh").exists()
