"""Layout and recipe orderings that published MoE runs fix, pinned: a user who follows `plan` must not pick
the slower of two published configurations.  Each case cites where the numbers come from; the recipes are
those of placement/calibration/runs-moe.yaml."""

from __future__ import annotations

import itertools
import json

import pytest
from click.testing import CliRunner

import placement.cost.constants as C
from placement.calibration.validate import load_runs
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cli import main
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.specs import Layout, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology
from placement.workload import workload

RUNS = {r.id: r for r in load_runs()}


def price(model: str, cluster: str, gpus: int, train: TrainingSpec, layouts: list[Layout], recipe: Recipe,
          segment: int | None = None) -> list[float]:
    c = load_cluster(cluster)
    topo = Topology(c, load_accelerator(c.accelerator), num_gpus=gpus, segment_nodes=segment)
    est = estimate(workload(load_model(model)), train, topo, LayoutBatch.from_layouts(layouts, recipe), recipe)
    assert est.valid.all() and est.fits.all()
    return [float(t) for t in est.step_time_s]


def _no_ep_overlap(recipe: Recipe) -> Recipe:
    return recipe.model_copy(update={"ep_comm_overlap": False, "delay_wgrad": False})


# -- the Megatron-Core DeepSeek-V3 GB200 optimisation ladder -------------------------------------------------

LADDER = [
    # (rung, published TFLOP/s/GPU, recipe change): Megatron-LM docs/discussions/deepseek-v3-gb200-optimization,
    # §3 table; rungs with no recipe input (DeepEP tuning, PDL, fused norm quantisation) are left out
    ("baseline", 494.46, {}),
    ("MoE fusions: scale allocation, permute, router", 540.00, {"moe_fusions": True}),
    ("DeepEP", 566.07, {"moe_dispatcher": "deepep"}),
    ("no up_proj recompute", 610.71, {"recompute_modules": ["mlp"]}),
    ("CUDA graphs (attn, moe_router, moe_preprocess)", 663.27, {"cuda_graphs": "partial"}),
    ("CPU binding (bindpcie)", 762.12, {"cpu_affinity": True}),
    ("HybridEP", 943.56, {"moe_dispatcher": "hybridep"}),
]
GFLOP_PER_TOKEN = 250.4
"""Megatron's FLOP count of DeepSeek-V3 without MTP at seq 4096 (calibration-moe.yaml, derived)."""


def test_gb200_deepseek_v3_ladder_each_recipe_feature_speeds_up_the_same_layout():
    """Same layout (tp1 pp8 vpp4 ep32, 256 GB200, Et|(tt|)*30L), recipe features switched on one by one as the
    write-up did: every rung is faster than the one before, as published, and both ends land near it."""
    base = RUNS["mcore-gb200-deepseek-v3-256gpu-mxfp8-baseline"]
    train = TrainingSpec(seq_len=4096, global_batch=2048, precision="fp8")
    layout = Layout(pp=8, vpp=4, ep=32, dp=32, recompute="selective")
    recipe = base.recipe.model_dump()
    predicted, published = [], []
    for _, tflops, change in LADDER:
        recipe |= change
        r = Recipe.model_validate(recipe)
        predicted += price("deepseek-v3", "gb200-nvl72", 256, train, [layout], r, base.segment_nodes)
        published.append(2048 * 4096 / (tflops * 1e12 / (GFLOP_PER_TOKEN * 1e9)) / 256)
    assert all(a > b for a, b in itertools.pairwise(predicted)), predicted
    assert predicted[0] == pytest.approx(published[0], rel=0.15)
    assert predicted[-1] == pytest.approx(published[-1], rel=0.15)
    assert predicted[0] / predicted[-1] > 1.6  # published 1.91 over these rungs


def test_ladder_is_host_bound_before_graphs_and_not_after():
    """The baseline's loss is host time (write-up §2: kernel gaps, "CPU overhead"); CUDA graphs remove most."""
    base = RUNS["mcore-gb200-deepseek-v3-256gpu-mxfp8-baseline"]
    final = RUNS["mcore-gb200-deepseek-v3-256gpu-mxfp8-final"]
    c = load_cluster("gb200-nvl72")
    topo = Topology(c, load_accelerator(c.accelerator), num_gpus=256, segment_nodes=8)
    train = TrainingSpec(seq_len=4096, global_batch=2048, precision="fp8")
    layout = Layout(pp=8, vpp=4, ep=32, dp=32, recompute="selective")
    w = workload(load_model("deepseek-v3"))
    before = estimate(w, train, topo, LayoutBatch.from_layouts([layout], base.recipe), base.recipe)
    after = estimate(w, train, topo, LayoutBatch.from_layouts([layout], final.recipe), final.recipe)
    assert before.host_s[0] > 0.2 * before.step_time_s[0]
    assert after.host_s[0] < 0.25 * before.host_s[0]


# -- B200 DeepSeek-V3: pp16 x ep8 against pp8 x vpp2 x ep32 -----------------------------------------------------

def test_b200_deepseek_v3_wide_ep_beats_deep_pipeline():
    """Megatron-Bridge performance summary (archive), DGX-B200, 256 GPUs, MXFP8, GBS 4096: 26.04 container
    pp16 x ep8 at 2815 tokens/s/GPU (23.3 s), 26.04.01 pp8 x vpp2 x ep32 at 3328 (19.7 s).  Thirty-two local
    experts per rank leave the pp16 layout host-bound (per-expert MXFP8 kernels); priced with one recipe."""
    run = RUNS["megatron-bridge-26.04.01-b200-deepseek-v3-256gpu-mxfp8-pp8vp2ep32"]
    train = TrainingSpec(seq_len=4096, global_batch=4096, precision="fp8")
    wide = Layout(pp=8, vpp=2, ep=32, dp=32, recompute="selective")
    deep = Layout(pp=16, vpp=1, ep=8, dp=16, recompute="selective")
    (t_wide,) = price("deepseek-v3", "dgx-b200", 256, train, [wide], run.recipe)
    # without virtual stages Megatron-Core refuses the EP all-to-all overlap (transformer_config.py): pp16 ran without
    (t_deep,) = price("deepseek-v3", "dgx-b200", 256, train, [deep], _no_ep_overlap(run.recipe))
    assert t_wide < t_deep
    assert t_deep / t_wide == pytest.approx(23.28 / 19.69, rel=0.12)


# -- host cost decides: a larger micro-batch wins -----------------------------------------------------------------

def test_larger_micro_batch_wins_only_because_of_host_cost(monkeypatch):
    """Megatron-Core MoE README (CPU overhead): "smaller TP or larger MBS" for a host-bound MoE job.  Qwen3-235B
    in MXFP8 on 64 B200 (16 local experts per rank, the Bridge 25.11 recipe without graphs): micro-batch 2 is
    faster than 1 with the host term, and slower without it (its bubble is larger)."""
    run = RUNS["megatron-bridge-25.11-b200-qwen3-235b-a22b-64gpu-mxfp8"]
    train = TrainingSpec(seq_len=4096, global_batch=1024, precision="fp8")
    lays = [Layout(pp=8, ep=8, dp=8, micro_batch_size=1), Layout(pp=8, ep=8, dp=8, micro_batch_size=2)]
    recipe = _no_ep_overlap(run.recipe)  # pp 8 without virtual stages: Megatron-Core runs no EP overlap there
    one, two = price("qwen3-235b-a22b", "dgx-b200", 64, train, lays, recipe)
    assert two < 0.9 * one
    monkeypatch.setattr(C, "HOST_S_PER_KERNEL", 1e-12)
    monkeypatch.setattr(C, "HOST_SYNC_S", 0.0)
    one_gpu, two_gpu = price("qwen3-235b-a22b", "dgx-b200", 64, train, lays, recipe)
    assert one_gpu < two_gpu


def test_lower_tp_wins_more_with_host_cost(monkeypatch):
    """TP 2 halves each rank's GEMMs but not its kernel launches: with the host term TP 2 costs far more than
    without it (Megatron-Core MoE README: smaller TP for CPU overhead)."""
    run = RUNS["megatron-bridge-25.11-b200-qwen3-235b-a22b-64gpu-mxfp8"]
    train = TrainingSpec(seq_len=4096, global_batch=1024, precision="fp8")
    lays = [Layout(pp=8, ep=8, dp=8), Layout(tp=2, pp=8, ep=8, dp=4, sequence_parallel=True)]
    recipe = _no_ep_overlap(run.recipe)
    tp1, tp2 = price("qwen3-235b-a22b", "dgx-b200", 64, train, lays, recipe)
    monkeypatch.setattr(C, "HOST_S_PER_KERNEL", 1e-12)
    monkeypatch.setattr(C, "HOST_SYNC_S", 0.0)
    tp1_gpu, tp2_gpu = price("qwen3-235b-a22b", "dgx-b200", 64, train, lays, recipe)
    assert tp1 < tp2 and tp2 / tp1 > 1.3 * (tp2_gpu / tp1_gpu)


# -- Qwen3-235B: 94 layers on pp 32 x vpp 3 with embedding-only and loss-only stages ------------------------

def test_evaluate_prices_qwen3_235b_on_pp32_vpp3_with_embedding_and_loss_stages():
    """Megatron runs 94 layers on 96 virtual stages with an embedding-only first and a loss-only last stage
    (--pipeline-model-parallel-layout 'E|(t|)*94L'); the default split cannot, so evaluate refuses it plainly."""
    job = ["--model", "qwen3-235b-a22b", "--cluster", "gb200-nvl72", "--gpus", "256", "--seq-len", "4096",
           "--global-batch", "4096", "--tp", "1", "--pp", "32", "--vpp", "3", "--ep", "8", "--json"]
    runner = CliRunner()
    res = runner.invoke(main, ["evaluate", *job, "--pipeline-layout", "E|(t|)*94L"])
    assert res.exit_code in (0, 1), res.output
    plan = json.loads(res.stdout)
    assert plan["recipe"]["pipeline_layout"] == "E|(t|)*94L" and plan["step_time_s"] > 0
    assert plan["layout"]["pp"] == 32 and plan["layout"]["vpp"] == 3
    refused = runner.invoke(main, ["evaluate", *job])
    assert refused.exit_code == 2 and "--pipeline-layout" in refused.stderr
