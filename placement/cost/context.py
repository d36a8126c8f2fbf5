"""Ctx: what every cost term reads about K candidates at once, computed once per `estimate` call.

Degrees as float arrays, the micro-batch count, the rows of one rank's GEMMs, the recompute passes, the
GEMM rates of the precision and recipe, and the recipe itself.  Terms take a Ctx and return small typed
results; none of them reads flags or files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from placement.cost import collectives as coll
from placement.cost import constants as C
from placement.cost.batch import RECOMPUTE_MODULES, LayoutBatch
from placement.cost.compute import GemmRate
from placement.errors import InputError
from placement.specs import TrainingSpec
from placement.specs.recipe import CudaGraphs, Fp8Recipe, Recipe, RecomputeModule
from placement.specs.training import Precision
from placement.topology import Topology
from placement.workload import Workload

SELECTIVE, FULL = 1, 2


@dataclass(frozen=True)
class Ctx:
    w: Workload
    train: TrainingSpec
    topo: Topology
    b: LayoutBatch
    recipe: Recipe
    levels: coll.LevelArrays
    tp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    pp: np.ndarray
    vpp: np.ndarray
    dp: np.ndarray
    mbs: np.ndarray
    m: np.ndarray
    """Micro-batches per step."""
    tokens: np.ndarray
    """Tokens of one micro-batch on one rank: the rows of its GEMMs."""
    sp_shard: np.ndarray
    """TP degree where sequence parallelism shards the element-wise work, else 1."""
    full: np.ndarray
    """Full recompute of every layer (bool)."""
    full_layers_share: np.ndarray
    """Share of a stage's layers under full recompute (recompute_num_layers of the recipe, else 1)."""
    gemm: GemmRate
    """Rate of the GEMMs that run at the training precision."""
    gemm_bf16: GemmRate
    """Rate of those that stay 16-bit under FP8 (router, LM head unless recipe.fp8_lm_head, attention core inputs)."""
    fp8: Fp8Recipe | None
    hbm_bw: float
    expert_load: np.ndarray
    """Tokens on the busiest EP rank over the mean, per candidate: the routing imbalance, capped by a capacity
    factor (`expert_load`); 1 without expert parallelism (`rank_expert_load`)."""

    @property
    def overlap_slowdown(self) -> float:
        """Compute slowdown beside overlapped communication: the accelerator's measured value, else the default."""
        s = self.topo.accelerator.overlap_compute_slowdown
        return C.OVERLAP_COMPUTE_SLOWDOWN if s is None else s

    def module(self, mod: RecomputeModule) -> np.ndarray | bool:
        """True where selective recompute includes `mod` (bool per candidate; a plain False when no candidate
        of the batch recomputes it, which keeps the common pass scalar)."""
        bit = 1 << RECOMPUTE_MODULES.index(mod)
        if not self._any_module & bit:
            return False
        return (self.b.recompute == SELECTIVE) & ((self.b.rc_modules & bit) != 0)

    @cached_property
    def _any_module(self) -> int:
        sel = self.b.rc_modules[self.b.recompute == SELECTIVE]
        return int(np.bitwise_or.reduce(sel)) if sel.size else 0

    def checkpoint_chunks(self, layers):
        """Checkpointed chunks of `recipe.checkpoint_interval` layers among a rank's `layers` under full recompute
        (DeepSpeed's activation_checkpoint_interval: a last chunk may be short)."""
        return np.ceil(self.full * self.full_layers_share * layers / self.recipe.checkpoint_interval)

    @property
    def passes(self) -> np.ndarray:
        """Forward, backward (2x) and, under full recompute, the forward again: in forward-pass units."""
        return 1.0 + C.BACKWARD_TO_FORWARD + self.full * self.full_layers_share


def fp8_recipe(topo: Topology, recipe: Recipe, precision: Precision) -> Fp8Recipe | None:
    """The FP8 scaling recipe that runs: the recipe's, else MXFP8 where the tensor cores dequantise block
    scales (Blackwell), else per-tensor scaling (Megatron-Core write-up §1)."""
    if precision is not Precision.FP8:
        return None
    if recipe.fp8_recipe is not None:
        if recipe.fp8_recipe is Fp8Recipe.MXFP8 and not topo.accelerator.mxfp8:
            raise InputError(
                f"fp8_recipe mxfp8: {topo.accelerator.name} has no MXFP8 tensor cores (Blackwell and later); "
                f"use tensorwise or blockwise"
            )
        return recipe.fp8_recipe
    return Fp8Recipe.MXFP8 if topo.accelerator.mxfp8 else Fp8Recipe.TENSORWISE


def gemm_rates(topo: Topology, precision: Precision, fp8: Fp8Recipe | None) -> tuple[GemmRate, GemmRate]:
    acc = topo.accelerator
    bf16 = GemmRate(acc.peak_flops_bf16 * acc.matmul_efficiency_bf16, acc.gemm_half_efficiency_dim)
    if precision is not Precision.FP8:
        return bf16, bf16
    if acc.peak_flops_fp8 is None:
        raise InputError(
            f"--precision fp8: accelerator {acc.name!r} has no FP8 tensor cores (peak_flops_fp8 unset); "
            f"use --precision bf16"
        )
    eff = acc.matmul_efficiency_fp8 or acc.matmul_efficiency_bf16
    if fp8 is Fp8Recipe.BLOCKWISE and not acc.mxfp8:
        eff *= C.BLOCKWISE_FP8_HOPPER_EFFICIENCY
    if fp8 is Fp8Recipe.ROWWISE:
        eff *= C.ROWWISE_FP8_EFFICIENCY
    if fp8 is Fp8Recipe.MXFP8:
        eff *= C.MXFP8_GEMM_EFFICIENCY
    return GemmRate(acc.peak_flops_fp8 * eff, acc.gemm_half_efficiency_dim), bf16


def priced_batch(b: LayoutBatch, recipe: Recipe) -> LayoutBatch:
    """The layouts as the cost model prices them: a ZeRO-0 that runs as FSDP2 over one-rank shards (recipe
    zero0_as_fsdp, torchtitan 0.3.0) is ZeRO-3 with a shard degree of 1, its data-parallel ranks HSDP replicas."""
    if not recipe.zero0_as_fsdp:
        return b
    # (where the expert ranks fit inside one replica's tp x cp ranks: torchtitan shards experts over dp_shard x cp x tp,
    # which a shard of one leaves no room for beyond them; such a layout is not torchtitan's, frameworks.Capability)
    z0 = (b.zero == 0) & ((b.tp * b.cp) % (b.ep * b.etp) == 0)
    if not z0.any():
        return b
    return replace(b, zero=np.where(z0, 3, b.zero), dp_shard=np.where(z0, 1, b.dp_shard))


def priced_zero(recipe: Recipe, zero: int) -> int:
    """One layout's ZeRO stage as priced (`priced_batch`)."""
    return 3 if zero == 0 and recipe.zero0_as_fsdp else zero


def expert_w1_rerun(x: Ctx) -> np.ndarray | float:
    """1.0 for each candidate whose routed experts rerun their second up-projection (recipe expert_w1_rerun beside
    remat_saves_named_only: a selective, named-save recompute that does not already rerun `mlp_up`), else 0."""
    if not (x.recipe.expert_w1_rerun and x.recipe.remat_saves_named_only):  # named saves only: JAX's
        return 0.0
    up = np.asarray(x.module(RecomputeModule.MLP_UP), dtype=bool)
    return ((np.asarray(x.b.recompute) == SELECTIVE) & ~up).astype(np.float64)


def over_replicas(recipe: Recipe, b: LayoutBatch) -> np.ndarray:
    """Per layout of `b` (as priced: `priced_batch`), whether its optimizer state is sharded over the HSDP replicas
    too (recipe optimizer_over_replicas): an HSDP layout (ZeRO-3, dp_shard below dp) under that recipe, and, where
    optimizer_over_replicas_beside_fsdp is off (MaxText 0.2.5), only one whose shard group is the expert ranks alone
    (dp_shard <= ep: no fsdp ranks), since MaxText refuses shard_optimizer_over_data beside an fsdp axis."""
    hsdp = (np.asarray(b.zero) == 3) & (np.asarray(b.dp_shard) < np.asarray(b.dp))
    no_fsdp = np.asarray(b.dp_shard) <= np.asarray(b.ep)
    return recipe.optimizer_over_replicas & hsdp & (recipe.optimizer_over_replicas_beside_fsdp | no_fsdp)


def context(w: Workload, train: TrainingSpec, topo: Topology, b: LayoutBatch, recipe: Recipe) -> Ctx:
    f64 = np.float64
    b = priced_batch(b, recipe)
    tp, cp, ep, etp, pp, vpp, dp = (x.astype(f64) for x in (b.tp, b.cp, b.ep, b.etp, b.pp, b.vpp, b.dp))
    mbs = b.mbs.astype(f64)
    fp8 = fp8_recipe(topo, recipe, train.precision)
    gemm, gemm_bf16 = gemm_rates(topo, train.precision, fp8)
    full = b.recompute == FULL
    # --recompute-num-layers N (block method): N of each virtual stage's layers recompute fully
    per_chunk = np.maximum(w.num_layers / (pp * vpp), 1.0)
    share = 1.0 if recipe.recompute_num_layers is None else np.minimum(recipe.recompute_num_layers / per_chunk, 1.0)
    return Ctx(
        w=w, train=train, topo=topo, b=b, recipe=recipe, levels=coll.LevelArrays(topo),
        tp=tp, cp=cp, ep=ep, etp=etp, pp=pp, vpp=vpp, dp=dp, mbs=mbs,
        m=train.global_batch / (dp * mbs), tokens=mbs * train.seq_len / cp,
        sp_shard=np.where(b.sp.astype(bool), tp, 1.0), full=full.astype(f64),
        full_layers_share=np.broadcast_to(np.asarray(share, dtype=f64), tp.shape),
        gemm=gemm, gemm_bf16=gemm_bf16, fp8=fp8, hbm_bw=topo.accelerator.hbm_bandwidth_bytes_per_s,
        expert_load=rank_expert_load(recipe, ep),
    )


def rank_expert_load(recipe: Recipe, ep: np.ndarray) -> np.ndarray:
    """`expert_load` on the busiest rank of each candidate: at ep 1 every rank holds every expert and computes its
    tokens' top-k pairs exactly, however unevenly they fall among the experts, so the imbalance costs nothing (a
    user trial: Mixtral 8x7B on 8 H100 at ep 1 was priced 10.245 s at the 1.2 imbalance, 9.348 s balanced); only
    full-iteration CUDA graphs' padding to the capacity factor is paid there too."""
    load = expert_load(recipe)
    padded = recipe.moe_capacity_factor is not None and recipe.cuda_graphs is CudaGraphs.FULL
    return np.where(ep > 1, load, load if padded else 1.0)


def expert_load(recipe: Recipe) -> float:
    """Tokens on the busiest expert rank over the mean: the routing imbalance, capped by a capacity factor (tokens
    past it are dropped), or the capacity itself where full-iteration CUDA graphs pad every expert's input to it
    (`--moe-pad-expert-input-to-capacity`, which their static shapes need: evaluate.full_graph_moe_error)."""
    load = C.REAL_ROUTING_IMBALANCE if recipe.routing_imbalance is None else recipe.routing_imbalance
    if recipe.moe_capacity_factor is not None:
        cap = max(recipe.moe_capacity_factor, 1.0)
        load = cap if recipe.cuda_graphs is CudaGraphs.FULL else min(load, cap)
    return load
