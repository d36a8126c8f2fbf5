"""Shared by the framework checks: plans to emit, and the groups placement intends for them."""

from __future__ import annotations

import shlex

import numpy as np

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.emit import devicemesh, torchtitan
from placement.emit.common import EmitContext
from placement.mapping.report import rank_coords
from placement.planner import plan_job
from placement.search import SearchConfig
from placement.specs import Layout, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology

CASES = {
    # id: (model, cluster, gpus, seq, global batch, pinned degrees)
    "llama3-70b-1024": ("llama3-70b", "dgx-h100", 1024, 8192, 512, {"tp": 8, "pp": 8, "cp": 2}),
    "llama3-70b-4096-hsdp": ("llama3-70b", "dgx-h100", 4096, 8192, 4096,
                             {"tp": 4, "pp": 1, "cp": 1, "zero_stage": 3, "dp_shard": 64}),
    "llama3-8b-2048-ddp": ("llama3-8b", "dgx-h100", 2048, 4096, 2048, {"tp": 2, "pp": 1, "cp": 1, "zero_stage": 0}),
    "deepseek-v3-2048-moe": ("deepseek-v3", "hgx-h800", 2048, 4096, 2048, {"tp": 2, "pp": 8, "ep": 16, "etp": 1}),
}


def planned(case: str, recipe: Recipe | None = None):
    return plan_context(*CASES[case], recipe=recipe)


def plan_context(model_name: str, cluster_name: str, gpus: int, seq: int, gbs: int, fixed: dict,
                 precision: str = "bf16", recipe: Recipe | None = None):
    """The best plan of the job (under `recipe`, default the default recipe) as an emitter's context."""
    cluster = load_cluster(cluster_name)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus)
    model = load_model(model_name)
    train = TrainingSpec(seq_len=seq, global_batch=gbs, precision=precision)
    cfg = SearchConfig(top_k=1, fixed=fixed, recipe=recipe or Recipe())
    result = plan_job(model, train, topo, cfg, None, with_rank_table=False)
    return EmitContext.of(result.plans[0], topo, result.gpu_of_rank[0], model, train), model


def layout_of(ctx: EmitContext) -> Layout:
    return ctx.plan.layout_spec()


def group_of(ctx: EmitContext, rank: int, axes: tuple[str, ...]) -> list[int]:
    """Ranks that share every mesh coordinate with `rank` except `axes` (placement's intended group).
    Dense axes: tp, cp, dp (or shard/replicate for HSDP), pp.  Expert axes: etp, ep, edp, pp."""
    lay = layout_of(ctx)
    c = rank_coords(lay, ctx.plan.num_gpus, moe=True)
    if set(axes) & {"etp", "ep", "edp"}:
        coords = {k: c[k] for k in ("etp", "ep", "edp", "pp")}
    else:
        coords = {k: c[k] for k in ("tp", "cp", "dp", "pp")}
        if set(axes) & {"shard", "replicate"}:  # HSDP: dp = (replicate, shard), shard inner
            dp = coords.pop("dp")
            coords |= {"shard": dp % lay.shard_degree, "replicate": dp // lay.shard_degree}
    keep = np.ones(ctx.plan.num_gpus, dtype=bool)
    for name, values in coords.items():
        if name not in axes:
            keep &= values == values[rank]
    return sorted(np.flatnonzero(keep).tolist())


def torchtitan_args(ctx: EmitContext) -> list[str]:
    text, _ = torchtitan.render(ctx)
    line = next(x for x in text.splitlines() if x.startswith("torchrun"))
    return shlex.split(line.split("-m torchtitan.train", 1)[1])


def devicemesh_source(ctx: EmitContext) -> str:
    text, _ = devicemesh.render(ctx)
    return text
