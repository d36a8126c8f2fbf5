"""`loss_chunks`: torchtitan 0.3.0 runs the LM head and cross-entropy in ChunkedLossWrapper (components/loss.py,
num_chunks 8 in every config), one eighth of the sequence at a time, each chunk's backward before the next, so the
logits and their float32 copy held at once are one chunk's.  Before 0.3.0 (v0.2.2 has no ChunkedLossWrapper) the loss
took the whole micro-batch's logits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost import constants as C

JOB = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "32768",
       "--global-batch", "8", "--zero", "3", "--recompute", "full", "--json"]
V022 = Path(__file__).parent / "data" / "audit" / "torchtitan" / "llama3_8b_v0.2.2.toml"


def _memory(*extra: str) -> dict:
    out = CliRunner().invoke(main, [*JOB, *extra])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.stdout)


def test_eight_chunks_hold_an_eighth_of_the_logits() -> None:
    """The 32K-token micro-batch's logits (128,256 vocabulary, bf16 plus the float32 copy) at once, or an eighth."""
    whole, chunked = _memory("--loss-chunks", "1"), _memory("--loss-chunks", "8")
    logits = 32768 * 128256 * C.LOGITS_BYTES_PER_ELEMENT
    saved = whole["peak_memory_bytes"] - chunked["peak_memory_bytes"]
    assert saved == pytest.approx(logits * 7 / 8, rel=1e-6)
    # the same FLOPs and bytes, in pieces; only FSDP's step edges lose the head, which a chunked loss reduces early
    assert chunked["step_time_s"] == pytest.approx(whole["step_time_s"], rel=2e-3)


def test_torchtitan_runs_eight() -> None:
    out = _memory("--framework", "torchtitan")
    assert out["recipe"]["loss_chunks"] == 8
    refused = CliRunner().invoke(main, [*JOB, "--framework", "torchtitan", "--loss-chunks", "1"])
    assert refused.exit_code == 2 and "ChunkedLossWrapper" in refused.output


def test_a_megatron_file_of_a_chunked_plan_runs_the_whole_loss(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, [*JOB, "--loss-chunks", "8", "--emit", "megatron", "--out", str(tmp_path)])
    assert out.exit_code in (0, 1), out.output
    text = (tmp_path / "megatron.sh").read_text()
    assert "loss_chunks 1 (not 8)" in text and "its LM head and loss run on the whole micro-batch at once" in text


def test_a_torchtitan_0_2_toml_is_audited_with_the_whole_loss() -> None:
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(V022), "--cluster", "dgx-h100",
                                    "--model", "llama3-8b", "--gpus", "8", "--json"], catch_exceptions=False)
    assert out.exit_code in (0, 1), out.stderr
    data = json.loads(out.stdout)
    assert data["estimate"]["recipe"]["loss_chunks"] == 1
    assert "no ChunkedLossWrapper" in data["layout"]["sources"]["recipe.loss_chunks"]
