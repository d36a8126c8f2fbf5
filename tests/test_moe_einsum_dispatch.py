"""recipe moe_einsum_dispatch: DeepSpeed-MoE (sharded_moe.py MOELayer) and MaxText's dense MoE path (sparse_matmul
False) dispatch and combine tokens by one-hot mask GEMMs, 2 s^2 k f h FLOPs each per group of s tokens.  The audit
priced a DeepSpeed-MoE job, and --framework deepspeed an MoE plan, without them (trial t26 noted MaxText's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from tests.test_fp32_weights import _maxtext_launch

JOB = ["evaluate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
       "--global-batch", "256", "--ep", "8", "--recompute", "full", "--json"]


def _step(mbs: int, dispatch: str) -> float:
    result = CliRunner().invoke(main, [*JOB, "--mbs", str(mbs), "--moe-einsum-dispatch", dispatch])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout.splitlines()[0])["step_time_s"]


def test_a_micro_batch_group_costs_in_proportion_to_its_size_a_sequence_group_does_not() -> None:
    """Per step: micro-batches of s = mbs x seq tokens each cost s^2, and there are 1/mbs as many: the added time
    doubles with the micro-batch; per-sequence groups add the same whatever the micro-batch."""
    added = {(mbs, d): _step(mbs, d) - _step(mbs, "none") for mbs in (1, 2) for d in ("micro_batch", "sequence")}
    assert added[(1, "micro_batch")] > 0.05 * _step(1, "none")
    assert added[(2, "micro_batch")] / added[(1, "micro_batch")] == pytest.approx(2.0, rel=0.1)
    assert added[(2, "sequence")] / added[(1, "sequence")] == pytest.approx(1.0, rel=0.1)
    assert added[(1, "sequence")] == pytest.approx(added[(1, "micro_batch")], rel=0.05)


def test_a_dense_model_is_not_changed_and_deepspeed_runs_it_for_moe_only() -> None:
    dense = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--json"]
    steps = [json.loads(CliRunner().invoke(main, [*dense, "--moe-einsum-dispatch", d]).stdout.splitlines()[0])
             ["step_time_s"] for d in ("none", "micro_batch")]
    assert steps[0] == steps[1]
    out = CliRunner().invoke(main, ["evaluate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64",
                                    "--framework", "deepspeed", "--seq-len", "4096", "--global-batch", "256",
                                    "--recompute", "full", "--json"]).stdout
    plan = json.loads(out.splitlines()[0])
    assert plan["recipe"]["moe_einsum_dispatch"] == "micro_batch"
    assert "sharded_moe.py" in plan["recipe_sources"]["moe_einsum_dispatch"]
    out = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                    "--framework", "deepspeed", "--json"]).stdout
    assert json.loads(out.splitlines()[0])["recipe"]["moe_einsum_dispatch"] == "none"


def _maxtext(tmp_path: Path, extra: str):
    return _maxtext_launch(tmp_path, "num_experts: 8\nnum_experts_per_tok: 2\nsparse_matmul: false\n" + extra)


def test_maxtexts_dense_moe_path_is_read(tmp_path: Path) -> None:
    launch = _maxtext(tmp_path, "capacity_factor: 1.25\n")
    assert launch.recipe["moe_einsum_dispatch"] == "sequence"
    assert "cfg.yml:4" in launch.sources["recipe.moe_einsum_dispatch"]
    launch = _maxtext(tmp_path, "")  # dropless: every expert on every token, said, not priced
    assert "moe_einsum_dispatch" not in launch.recipe
    assert any("every one of the 8 experts on every token" in x for x in launch.ignored)
