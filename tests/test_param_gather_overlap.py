"""ZeRO-1/2's all-gather of the updated weights hides behind the next forward only where the framework overlaps it
(recipe param_gather_overlap): Megatron-LM with --overlap-param-gather (off by default: arguments.py store_true,
DistributedDataParallelConfig.overlap_param_gather False), never DeepSpeed 0.19.8's ZeRO-1/2, whose step() all-gathers
with a blocking all_gather_into_tensor (runtime/zero/stage_1_and_2.py all_gather_dp_groups).  A user trial: the
DeepSpeed ZeRO-2 plan of qwen3-30b-a3b on 64 H100 hid a 0.29 s gather."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.dp import StageParams, dp_term
from placement.specs import Layout
from placement.specs.recipe import Recipe
from tests.test_audit_framework_defaults import JOB_8B, LLAMA_FP8, _audit, _without
from tests.test_cost_terms import _ctx, _f


@pytest.mark.parametrize("zero", [1, 2])
def test_a_gather_before_the_forward_is_exposed_whole(zero: int) -> None:
    p = StageParams(dense=np.array([8.0e9]), expert=np.array([0.0]), dense_shard=np.array([32.0]),
                    expert_shard=np.array([1.0]), edge_dense=np.array([0.0]), edge_expert=np.array([0.0]))
    def term(overlap: bool):
        ctx = _ctx("llama3-8b", "dgx-h100", 32, Layout(dp=32, zero_stage=zero), Recipe(param_gather_overlap=overlap),
                   global_batch=32)
        return dp_term(ctx, p, np.array([100.0]))  # compute long enough to hide every collective
    hidden, blocking = term(True), term(False)
    assert _f(hidden.total_s) == pytest.approx(_f(blocking.total_s))
    assert _f(hidden.exposed_s) == pytest.approx(0.0, abs=1e-9)
    # the exposed part is the all-gather of the 16-bit weights over the 32 ranks: half the traffic of ZeRO-1
    # (reduce-scatter at 2 bytes, all-gather at 2) and of ZeRO-2 at one micro-batch
    assert _f(blocking.exposed_s) == pytest.approx(_f(blocking.total_s) / 2, rel=0.05)


def test_a_megatron_job_without_overlap_param_gather_gathers_before_the_forward(tmp_path: Path) -> None:
    launched = _audit(LLAMA_FP8, *JOB_8B)
    assert launched["estimate"]["recipe"]["param_gather_overlap"] is True
    plain = _audit(_without(tmp_path, LLAMA_FP8, "--overlap-param-gather"), *JOB_8B)
    est = plain["estimate"]
    assert est["recipe"]["dp_overlap"] is True and est["recipe"]["param_gather_overlap"] is False
    assert "--overlap-param-gather is off unless given" in est["recipe_sources"]["param_gather_overlap"]
    assert est["breakdown"]["exposed"]["dp"] > launched["estimate"]["breakdown"]["exposed"]["dp"]
    finding = next(f for f in plain["findings"] if f["kind"] == "param_gather_not_overlapped")
    assert finding["cost_s"] == pytest.approx(est["step_time_s"] - launched["estimate"]["step_time_s"], abs=2e-3)
    assert finding["cost_s"] > 0 and "--overlap-param-gather" in finding["message"]


def test_emitted_megatron_flags_follow_the_recipe(tmp_path: Path) -> None:
    def args(*extra: str) -> str:
        out = tmp_path / "-".join(extra or ("on",))
        res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "4096",
                                        "--global-batch", "64", "--zero", "1", "--top-k", "1", "--out", str(out),
                                        "--emit", "megatron", *extra])
        assert res.exit_code == 0, res.output
        return (out / "megatron.sh").read_text()
    assert "--overlap-param-gather" in args() and "--overlap-grad-reduce" in args()
    off = args("--no-param-gather-overlap")
    assert "--overlap-grad-reduce" in off and "--overlap-param-gather" not in off


def test_deepspeed_plans_price_the_gather_in_step() -> None:
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "4096",
                                    "--global-batch", "64", "--framework", "deepspeed", "--top-k", "1", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)["plans"][0]
    assert plan["recipe"]["param_gather_overlap"] is False
    assert "all_gather_dp_groups" in plan["recipe_sources"]["param_gather_overlap"]


@pytest.mark.parametrize("fsdp", [
    "--use-torch-fsdp2 --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights",
    "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads --ckpt-format fsdp_dtensor"])
def test_megatron_fsdp_files_gather_behind_compute(tmp_path: Path, fsdp: str) -> None:
    """FSDP2 and Megatron-FSDP prefetch their gathers: not Megatron-LM's distributed-optimizer default."""
    script = tmp_path / "fsdp.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
                      "--pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 "
                      f"--seq-length 4096 --micro-batch-size 1 --global-batch-size 256 --bf16 {fsdp}\n")
    est = _audit(script, *JOB_8B)["estimate"]
    assert est["recipe"]["param_gather_overlap"] is True
    assert "FSDP" in est["recipe_sources"]["param_gather_overlap"]
