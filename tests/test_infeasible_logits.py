"""Where the loss's logits bind the memory, the infeasible messages name them and the fixes that split them (a user
trial at 1M tokens: 95.9 GiB called "buffers", and evaluate's advice of more --pp, which leaves every logit on the
last stage, without --cp, which the plan itself chose)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--gpus", "64", "--seq-len", "1048576", "--global-batch", "64", "--recompute", "full"]


def _evaluate(*layout: str) -> tuple[int, dict | None, str]:
    got = CliRunner().invoke(main, ["evaluate", *JOB, *layout, "--json"])
    return got.exit_code, (json.loads(got.stdout) if got.stdout.strip().startswith("{") else None), got.output


def test_logits_are_named_and_the_fixes_offered_are_the_ones_that_split_them() -> None:
    code, over, text = _evaluate("--tp", "8", "--cp", "1")
    assert code == 1 and over is not None
    logits = over["memory"]["logits_bytes"] / 2**30
    assert f"logits held for the loss {logits:.1f}" in text
    assert "more --tp or --cp" in text and "more --tp/--pp" not in text
    # the advice holds: more --pp leaves the logits (still over), more --cp fits
    _, piped, _ = _evaluate("--tp", "8", "--pp", "8")
    assert piped["memory"]["logits_bytes"] == over["memory"]["logits_bytes"] and not piped["fits"]
    code, split, _ = _evaluate("--tp", "8", "--cp", "8")
    assert code == 0 and split["fits"]


def test_the_plans_refusal_names_the_logits() -> None:
    got = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "1048576",
                                    "--global-batch", "8"])
    assert got.exit_code == 1
    assert "logits held for the loss" in got.output and ", buffers" not in got.output
