"""CUDA_DEVICE_MAX_CONNECTIONS in megatron.sh: Megatron-LM asserts 1 with TP/CP > 1 on Hopper and older unless
Megatron-FSDP or the EP all-to-all overlap runs, which want more, and Blackwell has no such requirement
(core_v0.19.0 training/arguments.py:1413-1438); beyond that Megatron-Bridge's launcher values (32, 8).  A user
trial found =1 exported on GB200 beside --overlap-moe-expert-parallel-comm, which hampers the overlap priced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main


def _exported(tmp_path: Path, *args: str) -> str | None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", *args, "--emit", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    found = re.findall(r"^export CUDA_DEVICE_MAX_CONNECTIONS=(\S+)$", (out / "megatron.sh").read_text(), re.M)
    return found[0] if found else None


def dense(cluster: str = "dgx-h100", zero: str = "1") -> list[str]:
    return ["--model", "llama3-8b", "--cluster", cluster, "--gpus", "16", "--seq-len", "4096", "--global-batch", "64",
            "--mbs", "1", "--recompute", "full", "--zero", zero]
MOE = ["--model", "qwen3-30b-a3b", "--gpus", "64", "--seq-len", "4096", "--global-batch", "256", "--tp", "2",
       "--ep", "8", "--pp", "1", "--mbs", "1", "--zero", "1", "--recompute", "none", "--sequence-parallel"]


def test_hopper_tp_needs_one_and_fsdp_none(tmp_path: Path) -> None:
    assert _exported(tmp_path / "a", *dense(), "--tp", "2", "--pp", "1") == "1"
    assert _exported(tmp_path / "b", *dense(), "--tp", "1", "--pp", "1") is None
    assert _exported(tmp_path / "c", *dense(zero="3"), "--tp", "2", "--pp", "1") is None


@pytest.mark.parametrize(("cluster", "dispatcher", "want"), [
    ("dgx-h100", "alltoall", "8"), ("dgx-h100", "deepep", "32"), ("gb200-nvl72", "hybridep", "32"),
])
def test_the_a2a_overlap_and_blackwell_get_more_connections(tmp_path: Path, cluster, dispatcher, want) -> None:
    assert _exported(tmp_path, *MOE, "--cluster", cluster, "--moe-dispatcher", dispatcher, "--ep-comm-overlap") == want


def test_blackwell_without_the_overlap_keeps_no_one(tmp_path: Path) -> None:
    assert _exported(tmp_path, *dense("dgx-b200"), "--tp", "2", "--pp", "1") == "32"
