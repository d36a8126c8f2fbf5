"""Megatron-FSDP's hybrid mode: `--use-megatron-fsdp --num-distributed-optimizer-instances N` shards within dp / N
ranks and replicates over N (megatron/core/distributed/fsdp/mcore_fsdp_adapter.py _init_dist_index, enable_hsdp).  A
QA trial: Megatron-LM's own example with 4 instances on 32 H100s was audited as ZeRO-3 over all 32 (36.8 GiB a GPU,
weights, gradients and optimizer state a quarter of what each GPU holds), the flag listed as not modelled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

SCRIPT = Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_fsdp_h100_fp8.sh"


def _script(tmp_path: Path, instances: int | None, outer: str | None = None) -> Path:
    text = SCRIPT.read_text().replace("NUM_NODES=1", "NUM_NODES=4")
    if instances is not None:
        text = text.replace("        # --num-distributed-optimizer-instances 2",
                            f"        --num-distributed-optimizer-instances {instances}")
    if outer is not None:
        text = text.replace("        # --outer-dp-sharding-strategy ${OUTER_SHARDING_STRATEGY}",
                            f"        --outer-dp-sharding-strategy {outer}")
    path = tmp_path / "train.sh"
    path.write_text(text)
    return path


def _audit(path: Path, *extra: str) -> tuple[dict, str]:
    args = ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100", *extra]
    data = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    return data, CliRunner().invoke(main, args).stdout


def test_the_hybrid_mode_is_priced_as_hsdp(tmp_path: Path) -> None:
    whole, _ = _audit(_script(tmp_path, None))
    hybrid, text = _audit(_script(tmp_path, 4))
    lay = hybrid["layout"]
    assert lay["dp"] == 32 and lay["zero_stage"] == 3 and lay["dp_shard"] == 8
    assert whole["layout"]["dp_shard"] in (None, 32)
    # each GPU holds a shard of 1/8 of the weights, gradients and optimizer state, not 1/32: 4x what ZeRO-3 over all
    # 32 holds (the activations the same)
    mem_whole, mem_hybrid = whole["estimate"]["memory"], hybrid["estimate"]["memory"]
    for part in ("weights_bytes", "grads_bytes", "optimizer_bytes"):
        assert mem_hybrid[part] == pytest.approx(4 * mem_whole[part], rel=0.02), part
    assert "--num-distributed-optimizer-instances: partial distributed optimizer" not in text
    assert "dp_replicate 4: " in text and "--num-distributed-optimizer-instances 4" in text


def test_the_outer_optimizer_sharding_is_read(tmp_path: Path) -> None:
    data, _ = _audit(_script(tmp_path, 4, "optim"))
    assert data["estimate"]["recipe"]["optimizer_over_replicas"] is True


def test_a_best_plan_over_the_whole_group_drops_the_flag(tmp_path: Path) -> None:
    data, _ = _audit(_script(tmp_path, 4))
    best = data["best"]["layout"]
    if best["zero_stage"] == 3 and best["dp_shard"] not in (None, best["dp"]):
        pytest.skip("the best plan is HSDP")
    assert any(c["argument"] == "--num-distributed-optimizer-instances" and c["from"] == "4" and c["to"] is None
               for c in data["changes"])
