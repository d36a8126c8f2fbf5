"""An MoE model's megatron.sh says that its router's scoring is the user's to add: the model spec prices the routing,
not the score function, expert bias or top-k scaling, and Megatron-LM's defaults (softmax, none, none) train another
router than DeepSeek-V3's (sigmoid with an expert bias, scaled 2.5): a user trial read the file as complete."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main


@pytest.mark.parametrize(("model", "moe"), [("qwen3-30b-a3b", True), ("llama3-8b", False)])
def test_the_router_flags_are_named_as_the_users(tmp_path: Path, model: str, moe: bool) -> None:
    out = CliRunner().invoke(main, ["plan", "--model", model, "--gpus", "16", "--seq-len", "4096", "--global-batch",
                                    "64", "--framework", "megatron", "--emit", "megatron", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    yours = next(line for line in (tmp_path / "megatron.sh").read_text().splitlines()
                 if line.startswith("# yours to add"))
    assert ("--moe-router-score-function" in yours) == moe
