"""A torchtitan TOML that leaves the global batch to torchtitan (local batch x dp_replicate x dp_shard, v0.2.2
train.py) gets a `training.global_batch_size` change only where the best plan's local batch and data-parallel
degrees would derive another (a QA run: the DeepSeek-V3 671B TOML on 256 H100s, whose best plan changes the expert
degree and checkpointing mode only, added `training.global_batch_size 1024`, the batch it already derives)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import _pre3_derived_batch
from placement.cli import main

TT = Path(__file__).parent / "data" / "audit" / "torchtitan"


def _audit(toml: str, model: str, gpus: str) -> dict:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(TT / toml), "--model", model,
                                       "--cluster", "dgx-h100", "--gpus", gpus, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_plan_that_keeps_local_batch_times_dp_states_no_global_batch() -> None:
    text = (TT / "deepseek_v3_671b.toml").read_text()
    assert "local_batch_size = 4" in text and "global_batch_size" not in text
    out = _audit("deepseek_v3_671b.toml", "deepseek-v3", "256")
    best = out["best"]["layout"]
    assert out["changes"] and best["dp"] * best["micro_batch_size"] == out["estimate"]["global_batch"] == 1024
    assert not [c for c in out["changes"] if c["argument"] == "training.global_batch_size"]


def test_a_plan_that_derives_another_batch_states_it() -> None:
    out = _audit("llama3_70b.toml", "llama3-70b", "64")
    best = out["best"]["layout"]
    assert best["dp"] * best["micro_batch_size"] != out["estimate"]["global_batch"]
    (batch,) = [c for c in out["changes"] if c["argument"] == "training.global_batch_size"]
    assert batch["to"] == str(out["estimate"]["global_batch"])


def test_the_derived_batch_reads_older_key_names() -> None:
    b = {"training.batch_size": ("training.batch_size", "4", None, None),
         "training.data_parallel_replicate_degree": ("training.data_parallel_replicate_degree", "2", None, None),
         "training.data_parallel_shard_degree": ("training.data_parallel_shard_degree", "8", None, None)}
    assert _pre3_derived_batch(b) == "64"
    assert _pre3_derived_batch({k: v for k, v in b.items() if k != "training.batch_size"}) is None
