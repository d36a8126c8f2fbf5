"""Step time and memory of K candidate layouts at once: the cost model assembled from its terms.

Per micro-batch, each kind of pipeline rank runs forward + backward (+ recompute forwards) of what it
holds (cost.pipeline): GPU time is the compute term (cost.layer) plus the communication left exposed
(cost.comm), and the host term (cost.host) adds where the CPU cannot keep the GPU fed.  The busiest
rank sets the pace.  The pipeline runs m micro-batches plus a bubble of (pp - 1)/vpp micro-batch times
(PTD-P §2.2; a third of it under zero-bubble, less under DualPipe).  Data-parallel communication and
the optimizer step come once per step (cost.dp); memory is the busiest rank's (cost.memory).

Recipe choices (dispatcher, EP and TP overlap, CUDA graphs) are resolved per candidate, exactly: TP
overlap and the dispatcher change only their own term, so the cheaper option wins; CUDA graphs only
lower host time and add memory, so the fastest that fits wins; EP overlap trades GPU time for host
time, so the stage is priced both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from statistics import NormalDist

import numpy as np

from placement.cost import constants as C
from placement.cost.batch import RECOMPUTE_MODULES, LayoutBatch
from placement.cost.comm import cp_term, ep_exposed, ep_term, pp_exposed_per_microbatch, pp_ramp_s, pp_term, tp_term
from placement.cost.context import Ctx, context, expert_w1_rerun, over_replicas
from placement.cost.dp import StageParams, dp_term, optimizer_term, tail_bucket_params
from placement.cost.host import host_term
from placement.cost.layer import layer_compute, per_op_recompute_flops
from placement.cost.memory import loss_head_params, memory_term, norms_recomputed
from placement.cost.pipeline import StageKinds, stage_kinds
from placement.errors import InputError
from placement.specs import TrainingSpec
from placement.specs.recipe import (
    CudaGraphs,
    Dispatcher,
    Fp8Recipe,
    GradAccumulation,
    PipelineSchedule,
    Recipe,
    RecomputeModule,
)
from placement.specs.training import Precision
from placement.topology import Topology
from placement.workload import Workload

DISPATCHERS = tuple(Dispatcher)
GRAPHS = (CudaGraphs.NONE, CudaGraphs.PARTIAL, CudaGraphs.FULL)


@dataclass(frozen=True)
class RecipeChoices:
    """The recipe options the search may choose between, per field (one value = pinned)."""

    dispatchers: tuple[Dispatcher, ...] = (Dispatcher.ALLTOALL,)
    cuda_graphs: tuple[CudaGraphs, ...] = (CudaGraphs.NONE,)
    tp_comm_overlap: tuple[bool, ...] = (False,)
    ep_comm_overlap: tuple[bool, ...] = (False,)
    full_graphs_without_pp_ep: bool = False
    """Full-iteration graphs only for candidates with pp 1 and ep 1, the leanest allowed scope elsewhere: torchtitan
    0.3.0 captures its one graph of forward and backward (trainer.py:613-614) but refuses it with pipeline or expert
    parallelism (trainer.py:179-210 _validate_cuda_graphs)."""

    @classmethod
    def pinned(cls, recipe: Recipe) -> RecipeChoices:
        return cls((recipe.moe_dispatcher,), (recipe.cuda_graphs,), (recipe.tp_comm_overlap,),
                   (recipe.ep_comm_overlap,))


@dataclass(frozen=True)
class Estimates:
    """Per-candidate arrays (seconds, bytes) of the cost model's terms."""

    valid: np.ndarray
    step_time_s: np.ndarray
    compute_s: np.ndarray
    tp_s: np.ndarray
    cp_s: np.ndarray
    cp_total_s: np.ndarray
    """CP traffic before overlap with the attention core."""
    ep_s: np.ndarray
    pp_s: np.ndarray
    """Pipeline transfers that add to the step (all of them unless overlapped: `pp_comm_overlap`)."""
    pp_total_s: np.ndarray
    dp_s: np.ndarray
    dp_exposed_s: np.ndarray
    bubble_s: np.ndarray
    optimizer_s: np.ndarray
    overlap_slowdown_s: np.ndarray
    """Compute lost to communication running beside it (OVERLAP_COMPUTE_SLOWDOWN, dispatcher SMs)."""
    num_microbatches: np.ndarray
    mfu: np.ndarray
    hfu: np.ndarray
    tokens_per_s: np.ndarray
    weights_bytes: np.ndarray
    grads_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    activations_bytes: np.ndarray
    other_bytes: np.ndarray
    peak_memory_bytes: np.ndarray
    memory_capacity_bytes: float
    fits: np.ndarray
    traffic_bytes: dict[str, np.ndarray]
    """Bytes one member of each kind of group sends per step (tp, cp, ep, pp, dp, edp): what the
    mapper weighs when it decides which groups to keep inside a block."""
    host_s: np.ndarray = field(default=None)
    """Host time (launch, Python, MoE and checkpoint syncs) that adds to the step on the critical rank."""
    grad_accumulation_s: np.ndarray = field(default=None)
    """Weight-gradient accumulation outside the GEMMs on the critical rank (recipe grad_accumulation)."""
    variability_s: np.ndarray = field(default=None)
    """What waiting for the job's slowest GPU adds (`variability_s`, AcceleratorSpec.speed_variability)."""
    tp_total_s: np.ndarray = field(default=None)
    ep_total_s: np.ndarray = field(default=None)
    dispatcher: np.ndarray = field(default=None)
    """Index into DISPATCHERS of the dispatcher priced."""
    cuda_graphs: np.ndarray = field(default=None)
    """Index into GRAPHS."""
    tp_comm_overlap: np.ndarray = field(default=None)
    ep_comm_overlap: np.ndarray = field(default=None)
    recipe: Recipe = field(default_factory=Recipe)
    """The recipe's fixed fields (the per-candidate choices above override its choice fields)."""
    pipe_policy: np.ndarray = field(default=None)
    """The pipeline split priced (LayoutBatch.pipe_policy): 1 counts the embedding and loss as a layer each."""
    optimizer_over_replicas: np.ndarray = field(default=None)
    """Whether each layout's optimizer is priced over its HSDP replicas too (cost.context.over_replicas), where the
    recipe asks for it and the layout does not run it (MaxText's HSDP with fsdp ranks); None: the recipe's value."""
    logits_bytes: np.ndarray = field(default=None)
    """Of other_bytes, the logits the loss holds on the peak rank (cost.memory)."""
    microbatch_s: np.ndarray = field(default=None)
    """The busiest pipeline rank's time per micro-batch (under DualPipe, the mean of its two stages'): the
    pace of the steady state and of the bubble."""

    def recipe_of(self, i: int) -> Recipe:
        """The whole recipe candidate i is priced with."""
        split = {}
        if self.pipe_policy is not None and int(self.pipe_policy[i]) == 1 and self.recipe.pipeline_layout is None:
            split = {"account_for_embedding": True, "account_for_loss": True}
        if (self.optimizer_over_replicas is not None and self.recipe.optimizer_over_replicas
                and not self.optimizer_over_replicas[i]):  # the layout runs plain HSDP (cost.context.over_replicas)
            split["optimizer_over_replicas"] = False
        return self.recipe.model_copy(update={
            **split,
            "moe_dispatcher": DISPATCHERS[int(self.dispatcher[i])],
            "cuda_graphs": GRAPHS[int(self.cuda_graphs[i])],
            "tp_comm_overlap": bool(self.tp_comm_overlap[i]),
            "ep_comm_overlap": bool(self.ep_comm_overlap[i]),
        })


def peak_flops(topo: Topology, precision: Precision) -> float:
    """MFU denominator: dense peak at the training precision."""
    acc = topo.accelerator
    return acc.peak_flops_fp8 if precision is Precision.FP8 and acc.peak_flops_fp8 else acc.peak_flops_bf16


def estimate(w: Workload, train: TrainingSpec, topo: Topology, b: LayoutBatch, recipe: Recipe | None = None,
             choices: RecipeChoices | None = None) -> Estimates:
    recipe = recipe or Recipe()
    choices = choices or RecipeChoices.pinned(recipe)
    if recipe.cuda_launch_blocking:  # a launch returns when its kernel ends: no communication overlaps compute
        choices = replace(choices, tp_comm_overlap=(False,), ep_comm_overlap=(False,))
    x = context(w, train, topo, b, recipe)
    if x.fp8 is Fp8Recipe.BLOCKWISE:
        choices = _no_userbuffers_under_blockwise(choices, b)
    st = _stage_kinds(w, b, recipe)
    # the per-layer terms depend on a few columns only: price each distinct row once and gather
    rows, inverse = _layer_rows(x)
    u = context(w, train, topo, b.take(rows), recipe) if rows is not None else x
    lc, tp, cp = (_gather(t, inverse) for t in _layer_terms(u))
    pp = pp_term(x)
    tpx = _tp_overlap(x, tp, lc, choices)
    ep_options = _ep_options(x, u, inverse, lc, choices)

    # memory first: the CUDA-graph scope that fits decides the host term
    params = _stage_params(x, st)
    base_mem = memory_term(x, st, params.dense_kinds, params.expert_kinds, params.dense_shard,
                           params.expert_shard, 0.0)
    capacity = _capacity(topo, train)
    # TP overlap's userbuffers where it is on; off where they would not fit and the choice is open
    ub = tp_overlap_buffer_bytes(x)
    if False in choices.tp_comm_overlap and True in choices.tp_comm_overlap:
        over = tpx.on & (base_mem.peak_bytes + ub > capacity)
        if over.any():
            off = _tp_overlap(x, tp, lc, replace(choices, tp_comm_overlap=(False,)))
            tpx = _TpExposed(*(np.where(over, a, b) for a, b in ((off.dense_s, tpx.dense_s), (off.moe_s, tpx.moe_s),
                                                                 (off.slow_s, tpx.slow_s), (off.on, tpx.on))))
    ub_mem = np.where(tpx.on, ub, 0.0)
    # the MoE pre-MLP norm priced as recomputed (layernorm) keeps that only beside alltoall under partial graphs
    # (memory.norms_recomputed): where the dispatcher cannot be alltoall, no partial graphs; where it can, partial
    # graphs take it
    norm_freed = np.asarray(norms_recomputed(x)[2], dtype=bool) & bool(w.num_experts)
    alltoall_open = Dispatcher.ALLTOALL in choices.dispatchers
    # per-layer graphs do not start beside full recompute, nor beside `moe` recompute in an MoE model, whose graphs
    # capture the router (evaluate.graphs_recompute_error)
    graphs_refused = (x.full > 0) | (np.asarray(x.module(RecomputeModule.MOE), dtype=bool) & bool(w.num_experts))
    graph_pick, extra_mem = _cuda_graphs(base_mem.peak_bytes + ub_mem, capacity, choices,
                                         (x.pp == 1) & (x.ep == 1) if choices.full_graphs_without_pp_ep else True,
                                         (True if alltoall_open else ~norm_freed) & ~graphs_refused)
    partial = graph_pick == GRAPHS.index(CudaGraphs.PARTIAL)
    # ...and Megatron-FSDP refuses the EP overlap beside per-layer CUDA graphs (ep_overlap_broken): where the scope
    # that fits is partial, neither another dispatcher (under a freed norm) nor the overlap (under FSDP) is an option
    norm_kept, fsdp_partial = partial & norm_freed, (x.b.zero >= 2) & partial
    # (a candidate left with refused per-layer graphs alone, where they are the only scope allowed, does not run)
    # ...and a dropless MoE model's full graphs capture only behind HybridEP's expert-rank budget
    # (evaluate.full_graph_moe_error): under full graphs no other dispatcher runs
    dropless_full = ((graph_pick == GRAPHS.index(CudaGraphs.FULL)) & bool(w.num_experts)
                     & (x.recipe.moe_capacity_factor is None))
    ep_options = [replace(o, exposed_s=np.where(((DISPATCHERS[o.code] is not Dispatcher.ALLTOALL) & norm_kept)
                                                | (o.overlap & fsdp_partial) | (partial & graphs_refused)
                                                | (dropless_full & (DISPATCHERS[o.code] is not Dispatcher.HYBRIDEP)),
                                                NOT_RUN_S, o.exposed_s))
                  for o in ep_options]
    host_for = _host_terms(x, choices, {o.overlap for o in ep_options}, graph_pick)

    accumulate = _grad_accumulation_s(x, params)
    mean_layer_s = _mean_layer_s(w, lc)
    pp_mb = pp_exposed_per_microbatch(x, pp, mean_layer_s)
    pp_ramp = pp_ramp_s(x, pp, mean_layer_s)
    crit = _critical_rank(x, st, lc, tpx, cp.exposed_s, pp_mb, ep_options, host_for, accumulate)
    nd, n_moe = crit.dense, crit.moe + crit.mtp
    layers_mb = nd + n_moe
    comp_mb = nd * lc.dense_s + crit.moe * lc.moe_s + crit.mtp * lc.mtp_s + crit.loss * lc.head_s
    tp_mb = nd * tpx.dense_s + n_moe * tpx.moe_s
    cp_mb = layers_mb * cp.exposed_s
    slow_mb = nd * tpx.slow_s + n_moe * (tpx.slow_s + crit.ep_slow)

    t_mb = np.where(np.isfinite(crit.t_mb), crit.t_mb, np.inf)  # a split with no rank (invalid) costs infinitely
    bubble = _bubble_s(x, t_mb, pp.bubble_credit_s)
    dp = dp_term(x, params.as_stage(_first_rank_tail(x, st)), comp_mb)
    optimizer_s = optimizer_term(x, params.as_stage())
    m = x.m
    cp_total_mb = layers_mb * cp.total_s
    # DP and CP traffic hidden behind compute slows that compute (TP and EP slowdowns are in t_mb already)
    overlapped = (np.maximum(dp.total_s - dp.exposed_s, 0.0) + m * np.maximum(cp_total_mb - cp_mb, 0.0)
                  + np.maximum(m * (pp.per_microbatch_s - pp_mb) - pp_ramp, 0.0))
    hidden_slowdown = x.overlap_slowdown * np.minimum(overlapped, m * comp_mb)
    num_gpus = x.tp * x.cp * x.pp * x.dp
    # the step waits for its slowest GPU: the compute, and the bubble its pace sets, run at that GPU's speed
    with np.errstate(invalid="ignore", divide="ignore"):
        paced = m * comp_mb + np.where(np.isfinite(t_mb) & (t_mb > 0), bubble * comp_mb / t_mb, 0.0)
    variability = variability_s(topo.accelerator.speed_variability, num_gpus, paced)
    step = m * t_mb + bubble + pp_ramp + dp.exposed_s + optimizer_s + hidden_slowdown + variability
    # a candidate whose only EP option is one the framework does not run (the A2A overlap under a pipeline without
    # virtual stages, pinned) has no step (its memory is priced, and `valid` stays the split's, as memory_floor's)
    allgather = crit.dispatcher == DISPATCHERS.index(Dispatcher.ALLGATHER)
    runs = ~(crit.ep_overlap & (allgather | ~_ep_overlap_runs_x(x, partial_graphs=partial))) if w.num_experts \
        else np.True_
    step = np.where(runs, step, np.inf)
    extra_mem = extra_mem + ub_mem
    peak_mem = base_mem.peak_bytes + extra_mem

    tokens_step = train.tokens_per_step
    s = train.seq_len
    model_flops = w.model_flops_per_token(s) * tokens_step
    hw_per_token = (w.forward_flops_per_token(s) * (3.0 + x.full * x.full_layers_share)
                    + _selective_redo_flops(w, b, s)
                    # the routed experts' second up-projection a named-save policy reruns (recipe expert_w1_rerun)
                    + expert_w1_rerun(x) * 2.0 * w.top_k * w.expert_ffn * w.hidden * w.num_moe_layers)
    peak = peak_flops(topo, train.precision)
    ep_total, ep_bytes = _chosen_ep(ep_options, crit.dispatcher, x.tokens)
    traffic = {
        "tp": tp.bytes_per_layer * layers_mb * m,
        "cp": cp.bytes_per_layer * layers_mb * m,
        "ep": ep_bytes * n_moe * m,
        "pp": pp.bytes_per_step,
        "dp": dp.dense_bytes,
        "dp_replica": dp.replica_bytes,
        "edp": dp.expert_bytes,
    }
    return Estimates(
        valid=_valid(st, m), step_time_s=step, compute_s=m * comp_mb,
        tp_s=m * tp_mb, cp_s=m * cp_mb, cp_total_s=m * cp_total_mb, ep_s=m * n_moe * crit.ep_exposed,
        pp_s=m * pp_mb + pp_ramp, pp_total_s=m * pp.per_microbatch_s, dp_s=dp.total_s, dp_exposed_s=dp.exposed_s,
        bubble_s=bubble,
        optimizer_s=optimizer_s, overlap_slowdown_s=hidden_slowdown + m * slow_mb,
        num_microbatches=np.rint(m).astype(np.int64),
        mfu=model_flops / (step * num_gpus * peak), hfu=hw_per_token * tokens_step / (step * num_gpus * peak),
        tokens_per_s=tokens_step / step,
        weights_bytes=base_mem.weights_bytes, grads_bytes=base_mem.grads_bytes,
        optimizer_bytes=base_mem.optimizer_bytes, activations_bytes=base_mem.activations_bytes,
        other_bytes=base_mem.other_bytes + extra_mem, peak_memory_bytes=peak_mem, logits_bytes=base_mem.logits_bytes,
        memory_capacity_bytes=capacity, fits=peak_mem <= capacity, traffic_bytes=traffic,
        host_s=m * crit.host_mb, grad_accumulation_s=m * crit.accumulate_mb, variability_s=variability,
        tp_total_s=m * (nd * tp.dense_s + n_moe * tp.moe_s), ep_total_s=m * n_moe * ep_total,
        dispatcher=crit.dispatcher, cuda_graphs=graph_pick, tp_comm_overlap=tpx.on, ep_comm_overlap=crit.ep_overlap,
        recipe=recipe, pipe_policy=b.pipe_policy, microbatch_s=t_mb,
        optimizer_over_replicas=None if recipe.optimizer_over_replicas_beside_fsdp else plain_hsdp_off(x),
    )


def plain_hsdp_off(x: Ctx) -> np.ndarray:
    """Per candidate, False where the recipe's optimizer_over_replicas does not hold on its layout (an HSDP layout
    with fsdp ranks under optimizer_over_replicas_beside_fsdp off: cost.context.over_replicas), True elsewhere."""
    hsdp = (x.b.zero == 3) & (x.b.dp_shard < x.b.dp)
    return ~hsdp | over_replicas(x.recipe, x.b)


def expected_slowest(num_gpus) -> np.ndarray:
    """The expected largest of `num_gpus` standard normal draws, by Blom's approximation to the normal order
    statistics, Phi^-1((n - 0.375) / (n + 0.25)) (Blom 1958): 0 for one GPU, 0.59 for two (exactly 0.56), 1.43 for 8
    (1.42), 3.23 for 1,024, 3.96 for 16,384."""
    n = np.asarray(num_gpus, dtype=np.float64)
    unique, inverse = np.unique(n, return_inverse=True)
    values = np.array([NormalDist().inv_cdf((k - 0.375) / (k + 0.25)) if k > 1 else 0.0 for k in unique])
    return values[inverse].reshape(n.shape)


def variability_s(sigma: float, num_gpus, paced_s) -> np.ndarray:
    """Seconds a synchronous step loses to its slowest GPU: each collective and pipeline transfer waits for the last
    member to arrive, so the job runs at the pace of the slowest of its GPUs, `sigma` x E[max of N normals] slower
    than the mean on the work the GPUs' speed sets (`paced_s`: compute and the bubble it paces).  GPUs of one SKU
    differ in sustained speed under power and thermal management (AcceleratorSpec.speed_variability)."""
    paced_s = np.asarray(paced_s, dtype=np.float64)
    if sigma == 0:
        return np.zeros_like(paced_s)
    slowest = expected_slowest(num_gpus)
    # (one GPU waits for none: 0, also beside an invalid split's infinite pace, which stays the step's own inf)
    with np.errstate(invalid="ignore"):
        return np.where(slowest > 0, sigma * slowest * paced_s, 0.0)


def _mean_layer_s(w: Workload, lc) -> np.ndarray:
    """A layer's time per micro-batch, the dense and MoE layers' mean: what an overlapped pipeline transfer hides
    behind (cost.comm.pp_exposed_per_microbatch)."""
    return (w.num_dense_layers * lc.dense_s + w.num_moe_layers * lc.moe_s) / w.num_layers


def _selective_redo_flops(w: Workload, b: LayoutBatch, seq_len: int) -> np.ndarray:
    """(K,) FLOPs per token, whole model, that selective recompute reruns (the HFU numerator beside full
    recompute's forward): the attention core (`core_attn`), the dense MLP (`mlp`), the shared experts
    (`shared_experts`, and within `moe`), the routed experts and router (`moe`), MLA's up-projections
    (`mla_up_proj`), torchtitan's per-op policy its unsaved matmuls and experts (`per_op`), and MaxText's
    projections and up-projections (`qkv_proj`, `out_proj`, `mlp_up`); `moe_act` and `layernorm` rerun element-wise
    work only."""
    M = RecomputeModule

    def on(mod: RecomputeModule) -> np.ndarray:
        return (b.recompute == 1) & ((b.rc_modules & (1 << RECOMPUTE_MODULES.index(mod))) != 0)

    core = 2.0 * w.attended_keys(seq_len) * w.attn_core_dim * w.num_layers
    dense_redo, moe_redo = per_op_recompute_flops(w)
    per_op = w.num_dense_layers * dense_redo + w.num_moe_layers * moe_redo

    h, up = w.hidden, w.mlp_up + 1
    mlp = 2.0 * up * w.dense_ffn * h * w.num_dense_layers
    shared = 2.0 * up * w.shared_ffn_total * h * w.num_moe_layers
    routed = 2.0 * (w.top_k * up * w.expert_ffn * h + w.num_experts * h) * w.num_moe_layers
    mla = w.num_layers * sum(2.0 * n * k for n, k, split in w.attn_gemms if split == 1 and k < h) \
        if w.mla_up_width else 0.0
    # MaxText's named-save policies: the input and output projections, the MLPs' up-projections (all of them)
    proj_in = w.num_layers * sum(2.0 * n * k for n, k, split in w.attn_gemms if split != 2)
    proj_out = w.num_layers * sum(2.0 * n * k for n, k, split in w.attn_gemms if split == 2)
    ups = 2.0 * w.mlp_up * h * (w.dense_ffn * w.num_dense_layers
                                + (w.top_k * w.expert_ffn + w.shared_ffn_total) * w.num_moe_layers)
    return (on(M.CORE_ATTN) * core + on(M.MLP) * mlp + (on(M.SHARED_EXPERTS) | on(M.MOE)) * shared
            + on(M.MOE) * routed + on(M.MLA_UP_PROJ) * mla + on(M.PER_OP) * per_op
            + on(M.QKV_PROJ) * proj_in + on(M.OUT_PROJ) * proj_out + on(M.MLP_UP) * ups)


def memory_floor(w: Workload, train: TrainingSpec, topo: Topology, b: LayoutBatch,
                 recipe: Recipe | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """(valid, peak bytes, capacity) per candidate from `estimate`'s memory term alone: the peak without the
    CUDA-graph pools a recipe may add, so a lower bound of `estimate`'s, at a fraction of its work.  A candidate
    whose floor is over capacity cannot fit."""
    recipe = recipe or Recipe()
    x = context(w, train, topo, b, recipe)
    st = _stage_kinds(w, b, recipe)
    params = _stage_params(x, st)
    mem = memory_term(x, st, params.dense_kinds, params.expert_kinds, params.dense_shard, params.expert_shard, 0.0)
    return _valid(st, x.m), mem.peak_bytes, _capacity(topo, train)


def _valid(st: StageKinds, m: np.ndarray) -> np.ndarray:
    """Candidates with a pipeline split and a whole number of micro-batches (at least one)."""
    return st.valid & (np.abs(m - np.rint(m)) < 1e-9) & (m >= 1)


def _capacity(topo: Topology, train: TrainingSpec) -> float:
    """Bytes a GPU can hold for the job: its HBM less the allocator's fragmentation and the headroom the user
    keeps free; where the launch caps the framework's own pool (TrainingSpec.memory_pool_bytes), no more than that
    pool and the reserve outside it."""
    cap = usable_hbm_bytes(topo) - train.memory_headroom_bytes
    if train.memory_pool_bytes is not None:
        cap = min(cap, train.memory_pool_bytes + C.MEMORY_RESERVE_BYTES)
    return cap


def usable_hbm_bytes(topo: Topology) -> float:
    """A GPU's HBM less the allocator's fragmentation: what a job may fill before any headroom."""
    return topo.accelerator.hbm_bytes * (1.0 - C.ALLOCATOR_FRAGMENTATION)


def step_lower_bound(w: Workload, train: TrainingSpec, topo: Topology, b: LayoutBatch,
                     recipe: Recipe | None = None, choices: RecipeChoices | None = None) -> np.ndarray:
    """(K,) seconds no candidate's step can be below, for a fraction of `estimate`'s work: the micro-batches
    and the bubble at the pace of the busiest kind of rank's GPU time (compute, exposed TP/CP, the cheapest
    EP option's exposed time and slowdown, pipeline sends), without the host, DP and optimizer terms.  A kind
    of rank takes at least its GPU time per micro-batch under any EP option (host time only adds, `_overlapped`
    is at least the larger of the two), so the critical pace, a minimum over options of a maximum over kinds,
    is at least the maximum over kinds of each kind's least GPU time; every term left out is non-negative.
    The search prices a candidate only where this bound is below the k-th best step already found."""
    recipe = recipe or Recipe()
    x = context(w, train, topo, b, recipe)
    st = _stage_kinds(w, b, recipe)
    choices = RecipeChoices.pinned(recipe) if choices is None else choices
    rows, inverse = _layer_rows(x)
    u = context(w, train, topo, b.take(rows), recipe) if rows is not None else x
    lc, tp, cp = (_gather(t, inverse) for t in _layer_terms(u))
    tpx = _tp_overlap(x, tp, lc, choices)
    # per MoE layer, the least exposed-plus-slowdown of any (dispatcher, overlap) the candidate may pick
    ep = np.min(np.stack([np.broadcast_to(o.exposed_s + o.slow_s, x.tp.shape)
                          for o in _ep_options(x, u, inverse, lc, choices)]), axis=0)
    k = _Counts.of(st, recipe)
    pp = pp_term(x)
    pp_mb = pp_exposed_per_microbatch(x, pp, _mean_layer_s(w, lc))
    per_kind = _kind_gpu_s(k, *_layer_gpu_s(x, lc, tpx, cp.exposed_s, ep), lc.head_s, pp_mb)
    pace = np.max(np.where(st.num_ranks > 0, per_kind, 0.0), axis=0)
    return np.where(st.valid, x.m * pace + _bubble_s(x, pace, pp.bubble_credit_s), np.inf)


@dataclass(frozen=True)
class _TpExposed:
    """TP time left per layer under the chosen overlap, and the slowdown its hidden part costs."""

    dense_s: np.ndarray
    moe_s: np.ndarray
    slow_s: np.ndarray
    on: np.ndarray


def tp_overlap_buffer_bytes(x: Ctx) -> np.ndarray:
    """Bytes Transformer Engine's TP comm overlap allocates per GPU: one userbuffer of the layer's whole-sequence
    activation ([seq x micro-batch / cp, hidden], Megatron-LM training/initialize.py _initialize_tp_communicators) for
    each overlapped GEMM (constants.TP_OVERLAP_BUFFERS_AG / _RS), the all-gather ones in FP8 under FP8, and its cuBLAS
    workspace grown threefold."""
    ag_bytes = 1.0 if x.fp8 is not None else float(C.BYTES_PER_ACTIVATION)
    per_element = C.TP_OVERLAP_BUFFERS_AG * ag_bytes + C.TP_OVERLAP_BUFFERS_RS * C.BYTES_PER_ACTIVATION
    return np.where(x.b.tp > 1, x.mbs * x.train.seq_len / x.cp * x.w.hidden * per_element
                    + C.TP_OVERLAP_WORKSPACE_BYTES, 0.0)


def _tp_overlap(x: Ctx, tp, lc, choices: RecipeChoices) -> _TpExposed:
    """TP overlap moves only its own term, and overlapping never costs more than it hides: on where allowed."""
    dense, moe, slow = tp.exposed(False, lc.dense_s, x.overlap_slowdown)
    on = np.zeros(len(x.b), dtype=bool)
    if True in choices.tp_comm_overlap:
        d1, m1, s1 = tp.exposed(True, lc.dense_s, x.overlap_slowdown)
        forced = False not in choices.tp_comm_overlap
        on = (x.b.tp > 1) & (forced | (d1 + s1 < dense))
        dense, moe, slow = (np.where(on, a, c) for a, c in ((d1, dense), (m1, moe), (s1, slow)))
    return _TpExposed(dense_s=dense, moe_s=moe, slow_s=slow, on=on)


@dataclass(frozen=True)
class _EpOption:
    """One (dispatcher, EP overlap) pair priced: its EP term and what of it stays exposed per MoE layer."""

    code: int
    overlap: bool
    term: object
    exposed_s: np.ndarray
    slow_s: np.ndarray


NOT_RUN_S = 1.0e12
"""Seconds standing in for an EP option the framework does not run (or per-layer CUDA graphs it refuses beside the
candidate's recompute), so the choice between options never takes it; the search drops a candidate left with one."""


def ep_overlap_runs(pp, vpp, recipe: Recipe, ep=2, full_recompute=False, moe_recomputed=False,
                    dispatcher: Dispatcher | None = None, zero=0, partial_graphs=False) -> np.ndarray:
    """Where `--overlap-moe-expert-parallel-comm` can run (DualPipe's own overlap always).  Megatron-Core asserts, for
    it (core_v0.19.0 transformer/transformer_config.py:2669-2700): virtual pipeline stages when pp > 1, expert
    parallelism (ep > 1), the alltoall or flex dispatcher, no full recompute (nor recompute_num_layers), `moe` not
    among the recompute modules and at most one MTP layer ("MTP supports at most one layer when enabling
    overlap_moe_expert_parallel_comm", :2709-2713); and under Megatron-FSDP (ZeRO-2/3) no pipeline and no per-layer
    CUDA graphs (ep_overlap_broken); a job that breaks one does not start."""
    broken = ep_overlap_broken(pp, vpp, recipe, ep, full_recompute, moe_recomputed, dispatcher, zero, partial_graphs)
    hit = np.False_
    for b in broken.values():
        hit = hit | np.asarray(b, dtype=bool)
    return ~hit


def ep_overlap_broken(pp, vpp, recipe: Recipe, ep=2, full_recompute=False, moe_recomputed=False,
                      dispatcher: Dispatcher | None = None, zero=0,
                      partial_graphs=False) -> dict[str, np.ndarray | bool]:
    """Each Megatron-Core condition of the EP all-to-all overlap (ep_overlap_runs), by name -> where it is broken
    (`dispatcher` None: not checked); empty under DualPipe, whose own overlap prices it.

    Megatron-FSDP (ZeRO-2/3, `--use-megatron-fsdp`) adds two: the combined 1F1B schedule refuses it interleaved
    ("EP overlap 1F1B with FSDP is not supported for interleaved pipeline parallelism", megatron-core 0.19.2
    pipeline_parallel/combined_1f1b.py:205-214), and a pipeline without virtual stages is refused above, so only
    pp 1; and its adapter refuses per-layer CUDA graphs beside it ("1F1B overlap with FSDP does not support
    per-layer CUDA graphs", distributed/fsdp/mcore_fsdp_adapter.py:168-178: cuda_graph_impl none or
    full_iteration).  Both pass validate_args and fail as the model is wrapped (a user trial's best plans)."""
    if recipe.pipeline_schedule is PipelineSchedule.DUALPIPE:
        return {}
    fsdp = np.asarray(zero) >= 2
    return {"pipeline": (np.asarray(pp) > 1) & (np.asarray(vpp) == 1), "ep": np.asarray(ep) == 1,
            "full_recompute": np.asarray(full_recompute, dtype=bool) | (recipe.recompute_num_layers is not None),
            "moe_recompute": np.asarray(moe_recomputed, dtype=bool),
            "dispatcher": dispatcher is Dispatcher.ALLGATHER,
            "fsdp_pipeline": fsdp & (np.asarray(pp) > 1),
            "fsdp_graphs": fsdp & np.asarray(partial_graphs, dtype=bool),
            "mtp": recipe.mtp_layers > 1}


def _ep_overlap_runs_x(x: Ctx, dispatcher: Dispatcher | None = None, partial_graphs=False) -> np.ndarray:
    return ep_overlap_runs(x.pp, x.vpp, x.recipe, x.b.ep, x.full > 0, x.module(RecomputeModule.MOE), dispatcher,
                           x.b.zero, partial_graphs)


def _ep_options(x: Ctx, u: Ctx, inverse, lc, choices: RecipeChoices) -> list[_EpOption]:
    """Every allowed (dispatcher, EP overlap) pair; a dense model prices one (all zero)."""
    moe = bool(x.w.num_experts)
    out = []
    for d in choices.dispatchers if moe else choices.dispatchers[:1]:
        term = _gather(ep_term(u, d), inverse)
        for ov in choices.ep_comm_overlap if moe else choices.ep_comm_overlap[:1]:
            exposed, slow = ep_exposed(x, term, lc, ov)
            if ov:  # Megatron-Core runs the 1F1B A2A overlap only interleaved under a pipeline (ep_overlap_runs):
                # never the cheaper option there (a finite stand-in: an infinity would turn the pace's sums into NaN),
                # and a candidate left with it alone is invalid (`estimate`)
                exposed = np.where(_ep_overlap_runs_x(x, d), exposed, NOT_RUN_S)
            out.append(_EpOption(DISPATCHERS.index(d), ov, term, exposed, slow))
    return out


_GRAPH_BYTES = {CudaGraphs.NONE: 0.0, CudaGraphs.PARTIAL: C.CUDA_GRAPH_PARTIAL_BYTES,
                CudaGraphs.FULL: C.CUDA_GRAPH_FULL_BYTES}


def _cuda_graphs(peak_bytes: np.ndarray, capacity: float, choices: RecipeChoices,
                 full_ok: np.ndarray | bool = True,
                 partial_ok: np.ndarray | bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(index into GRAPHS, bytes) per candidate: host time falls and memory rises from none to full, so the
    widest scope that fits is the fastest; where none fits, the leanest allowed.  `full_ok`: the candidates whose
    framework captures full graphs (RecipeChoices.full_graphs_without_pp_ep); `partial_ok`: those that may take
    partial ones."""
    allowed = [g for g in GRAPHS if g in choices.cuda_graphs]
    pick = np.full(peak_bytes.shape, GRAPHS.index(allowed[0]), dtype=np.int64)
    for g in allowed:
        ok = ((peak_bytes + _GRAPH_BYTES[g] <= capacity) & (full_ok if g is CudaGraphs.FULL else True)
              & (partial_ok if g is CudaGraphs.PARTIAL else True))
        pick = np.where(ok, GRAPHS.index(g), pick)
    return pick, np.choose(pick, [_GRAPH_BYTES[g] for g in GRAPHS])


def _host_terms(x: Ctx, choices: RecipeChoices, overlaps: set[bool], graph_pick: np.ndarray):
    """overlap -> (dense, moe, forward share, syncs) host arrays under each candidate's graph scope."""
    allowed = [g for g in GRAPHS if g in choices.cuda_graphs]
    hosts = {(g, ov): host_term(x, g, ov) for g in allowed for ov in overlaps}

    def host_for(ov: bool):
        parts = [hosts.get((g, ov)) for g in GRAPHS]
        have = [p for p in parts if p is not None]
        if len(have) == 1:
            h = have[0]
            return h.dense_s, h.moe_s, h.forward_share, h.syncs_per_moe_layer

        def sel(attr):
            return np.choose(graph_pick, [getattr(p if p is not None else have[0], attr) for p in parts])

        return sel("dense_s"), sel("moe_s"), have[0].forward_share, sel("syncs_per_moe_layer")

    return host_for


@dataclass(frozen=True)
class _Critical:
    """The busiest pipeline rank under the cheapest (dispatcher, EP overlap) per candidate: its time per
    micro-batch, host share, what it holds, and the EP choice."""

    t_mb: np.ndarray
    host_mb: np.ndarray
    accumulate_mb: np.ndarray
    """Gradient accumulation of the critical kind of rank per micro-batch (_grad_accumulation_s)."""
    dense: np.ndarray
    moe: np.ndarray
    mtp: np.ndarray
    loss: np.ndarray
    dispatcher: np.ndarray
    ep_overlap: np.ndarray
    ep_exposed: np.ndarray
    ep_slow: np.ndarray


def _critical_rank(x: Ctx, st: StageKinds, lc, tpx: _TpExposed, cp_exposed, pp_mb, ep_options: list[_EpOption],
                   host_for, accumulate=0.0) -> _Critical:
    n = len(x.b)
    cols = np.arange(n)
    counts = _Counts.of(st, x.recipe)
    idle = st.num_ranks == 0
    priced = []
    for o in ep_options:
        g_dense, g_moe, g_mtp = _layer_gpu_s(x, lc, tpx, cp_exposed, o.exposed_s + o.slow_s)
        h_dense, h_moe, h_fwd, syncs = host_for(o.overlap)
        t_kind, g_kind = _stage_times(x, counts, g_dense, g_moe, g_mtp, lc.head_s, pp_mb + accumulate, h_dense,
                                      h_moe, h_fwd, syncs)
        t_kind[idle] = -np.inf
        worst = np.argmax(t_kind, axis=0)
        priced.append((worst, t_kind[worst, cols], g_kind[worst, cols]))
    if len(priced) == 1:
        worst, t_mb, g_mb = priced[0]
        pick = np.zeros(n, dtype=np.int64)
    else:  # per candidate, the cheapest option; ties keep the earlier one
        per_option = np.stack([t for _, t, _ in priced])
        pick = np.argmin(per_option, axis=0)
        t_mb = per_option[pick, cols]
        worst = np.choose(pick, [wo for wo, _, _ in priced])
        g_mb = np.choose(pick, [g for _, _, g in priced])

    def chosen(values):
        return np.asarray(values[0]) if len(values) == 1 else np.choose(pick, values)

    accumulate = np.broadcast_to(np.asarray(accumulate, dtype=np.float64), (len(st.dense), n))
    return _Critical(
        t_mb=t_mb, host_mb=t_mb - g_mb, accumulate_mb=accumulate[worst, cols],
        dense=counts.dense[worst, cols], moe=counts.moe[worst, cols], mtp=counts.mtp[worst, cols],
        loss=counts.loss[worst, cols],
        dispatcher=np.array([o.code for o in ep_options], dtype=np.int64)[pick],
        ep_overlap=np.array([o.overlap for o in ep_options], dtype=bool)[pick],
        ep_exposed=np.broadcast_to(chosen([np.broadcast_to(o.exposed_s, (n,)) for o in ep_options]), (n,)),
        ep_slow=np.broadcast_to(chosen([np.broadcast_to(o.slow_s, (n,)) for o in ep_options]), (n,)),
    )


def _chosen_ep(ep_options: list[_EpOption], dispatcher: np.ndarray, like: np.ndarray):
    """(EP seconds per MoE layer, bytes per MoE layer) of each candidate's chosen dispatcher."""
    terms = {o.code: o.term for o in ep_options}
    if len(terms) == 1:
        only = next(iter(terms.values()))
        return only.total_s, only.bytes_per_layer
    total = bytes_ = np.zeros_like(like)
    for code, term in terms.items():
        total = np.where(dispatcher == code, term.total_s, total)
        bytes_ = np.where(dispatcher == code, term.bytes_per_layer, bytes_)
    return total, bytes_


def _layer_rows(x: Ctx) -> tuple[np.ndarray | None, np.ndarray | None]:
    """One candidate per distinct set of the columns the per-layer terms read (tp, cp, ep, etp, micro-batch,
    sequence parallelism, recompute and its modules; pp and vpp too where recompute_num_layers makes the
    recompute share depend on them), and the map back; (None, None) where that saves nothing."""
    b = x.b
    cols = [b.tp, b.cp, b.ep, b.etp, b.mbs, b.sp, b.recompute, b.rc_modules]
    if x.recipe.recompute_num_layers is not None:
        cols += [b.pp, b.vpp]
    key = np.zeros(len(b), dtype=np.int64)
    for c in cols:
        span = int(c.max(initial=0)) + 1
        if key.max(initial=0) > (np.iinfo(np.int64).max // max(span, 1)) // 2:
            return None, None  # too wide for one int64 key: price every row
        key = key * span + c
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if uniq.size * 2 > len(b):
        return None, None
    return first, inverse.reshape(-1)


def _layer_terms(u: Ctx):
    lc = layer_compute(u)
    return lc, tp_term(u), cp_term(u, lc.core_forward_s)


def _gather(term, inverse: np.ndarray | None):
    """A term's per-candidate arrays taken back from the distinct rows to every candidate."""
    if inverse is None:
        return term
    out = {}
    for f in fields(term):
        v = getattr(term, f.name)
        out[f.name] = v[inverse] if isinstance(v, np.ndarray) and v.ndim == 1 and v.shape[0] > 0 else v
    return type(term)(**out)


def _bubble_share(x: Ctx) -> float | np.ndarray:
    """Bubble relative to 1F1B's (p - 1)/v micro-batch times: zero-bubble ZB-H1 leaves a third (Qi et al.
    2023 §3); DualPipe (PP/2 - 1)(F&B + B - 3W) against 1F1B's (PP - 1)(F + B) (DeepSeek-V3 Table 2),
    with B = 2F and W = B/2: (pp/2 - 1) * (2/3) / (pp - 1)."""
    sched = x.recipe.pipeline_schedule
    if sched is PipelineSchedule.ZERO_BUBBLE:
        return C.ZERO_BUBBLE_FRACTION
    if sched is PipelineSchedule.DUALPIPE:
        return np.where(x.pp > 1, np.maximum(x.pp / 2.0 - 1.0, 0.0) * (2.0 / 3.0) / np.maximum(x.pp - 1.0, 1.0), 0.0)
    return 1.0


def _stage_times(x: Ctx, k: _Counts, g_dense, g_moe, g_mtp, head, pp_mb, h_dense, h_moe, h_fwd, syncs):
    """(S, K) seconds per micro-batch of each kind of rank, and its GPU-only part.

    GPU time: its layers' compute and exposed communication, its head, and the pipeline sends.  The
    host runs ahead of the GPU except at an MoE layer's sync: each synced MoE forward costs its GPU and host
    forward time overlapped, plus the sync; everything else overlaps as a whole (cost.host, _overlapped).
    DeepSpeed's checkpoint-boundary synchronize (recipe.checkpoint_sync) adds its gaps per pass over the stage's
    checkpointed chunks of `checkpoint_interval` layers (constants.CHECKPOINT_SYNC_PASSES); the GPU work between
    two of them (a chunk's forward or backward) is taken to outlast its host work, as on the dense runs that use
    it.  Under CUDA_LAUNCH_BLOCKING the queue is empty at every launch anyway: the syncs add nothing."""
    boundary = 0.0
    if x.recipe.checkpoint_sync:
        chunks = x.checkpoint_chunks(k.dense + k.n_moe)
        boundary = C.HOST_SYNC_S * C.CHECKPOINT_SYNC_PASSES * np.where(chunks > 0, chunks + 1.0, 0.0)
    synced = (np.asarray(syncs) > 0).astype(np.float64)
    g_fwd = g_moe / x.passes * synced  # per synced MoE layer, per candidate
    h_sync = h_moe * h_fwd * synced
    gpu = _kind_gpu_s(k, g_dense, g_moe, g_mtp, head, pp_mb)
    host = k.dense * h_dense + k.n_moe * h_moe
    if x.recipe.cuda_launch_blocking:  # every launch waits for its kernel: host and GPU time add, kernel by kernel
        return gpu + host + C.HOST_SYNC_S * k.n_moe * syncs, gpu
    per_sync_layer = _overlapped(g_fwd, h_sync) + C.HOST_SYNC_S * syncs
    t = k.n_moe * per_sync_layer + _overlapped(gpu - k.n_moe * g_fwd, host - k.n_moe * h_sync) + boundary
    return t, gpu


def _layer_gpu_s(x: Ctx, lc, tpx: _TpExposed, cp_exposed, ep_s) -> tuple:
    """(dense, MoE, MTP) GPU seconds of one layer per micro-batch: its compute, exposed TP and CP, TP overlap's
    compute slowdown, and on MoE layers `ep_s` (an EP option's exposed time and slowdown).  The step model and
    its lower bound (`step_lower_bound`) both read it."""
    dense = lc.dense_s + tpx.dense_s + cp_exposed + tpx.slow_s
    moe = lc.moe_s + tpx.moe_s + cp_exposed + tpx.slow_s + ep_s
    mtp = lc.mtp_s - lc.moe_s + moe if x.w.num_experts else lc.mtp_s + tpx.dense_s + cp_exposed
    return dense, moe, mtp


def _grad_accumulation_s(x: Ctx, params: _Params) -> np.ndarray | float:
    """(S, K) seconds per micro-batch each kind of rank spends accumulating its weight gradients outside the
    GEMMs (recipe grad_accumulation, constants.GRAD_ACCUMULATION_BYTES_PER_PARAM): its parameters' bytes at HBM
    speed; on the gradient shard where ZeRO-2/3 reduce-scatter every micro-batch; autograd's `+=` skips a step's
    first micro-batch; a DualPipe micro-batch passes one of a rank's two stages.  Under bf16 autocast over float32
    weights (recipe fp32_weights_autocast) it holds each micro-batch's cast of the weights too, the same kind of
    work beside the GEMMs."""
    mode = x.recipe.grad_accumulation
    per_param = C.GRAD_ACCUMULATION_BYTES_PER_PARAM[mode.value]
    per_microbatch = 0.5 if _bidirectional(x.recipe) else 1.0
    m = np.maximum(x.m, 1.0)
    # FSDP2 under torch pipelining (pipeline_unsharded_grads) accumulates each micro-batch's gradient unsharded, in
    # its reduce width, whatever the recipe's accumulation (constants.UNSHARDED_ACCUMULATION_BYTES_PER_PARAM)
    deferred = x.recipe.pipeline_unsharded_grads & (x.b.pp > 1) & (x.b.zero >= 2)
    first, later = C.UNSHARDED_ACCUMULATION_BYTES_PER_PARAM[bool(x.recipe.grad_reduce_fp32)]
    unsharded = np.where(deferred, (params.dense_kinds + params.expert_kinds) * (first + later * (m - 1.0)) / m, 0.0)
    # ...and under bf16 autocast over float32 weights (recipe fp32_weights_autocast) each micro-batch's forward casts
    # every weight the rank holds, whole below ZeRO-3 (constants.AUTOCAST_WEIGHT_CAST_BYTES_PER_PARAM)
    if x.recipe.fp32_weights_autocast and x.recipe.fp32_weights:
        unsharded = unsharded + np.where(x.b.zero < 3, (params.dense_kinds + params.expert_kinds)
                                         * C.AUTOCAST_WEIGHT_CAST_BYTES_PER_PARAM, 0.0)
    if per_param == 0.0:
        return unsharded * per_microbatch / x.hbm_bw
    sharded = (x.b.zero >= 2) & ~deferred
    dense = params.dense_kinds / np.where(sharded, params.dense_shard, 1.0)
    expert = params.expert_kinds / np.where(sharded, params.expert_shard, 1.0)
    share = np.maximum(x.m - 1.0, 0.0) / m if mode is GradAccumulation.AUTOGRAD else 1.0
    own = np.where(deferred, 0.0, (dense + expert) * per_param * share)
    return (own + unsharded) * per_microbatch / x.hbm_bw


def _kind_gpu_s(k: _Counts, g_dense, g_moe, g_mtp, head, pp_mb):
    """(S, K) GPU seconds per micro-batch of each kind of rank: its layers, its head, the pipeline sends."""
    return k.dense * g_dense + k.moe * g_moe + k.mtp * g_mtp + k.loss * head + pp_mb


@dataclass(frozen=True)
class _Counts:
    """What each kind of rank holds, as float (S, K) arrays (StageKinds' counts are int64)."""

    dense: np.ndarray
    moe: np.ndarray
    mtp: np.ndarray
    loss: np.ndarray
    n_moe: np.ndarray

    @classmethod
    def of(cls, st: StageKinds, recipe: Recipe) -> _Counts:
        """Per micro-batch: under DualPipe a rank holds two stages and sends half the micro-batches through
        each, so one micro-batch passes half its counts."""
        per_microbatch = 0.5 if _bidirectional(recipe) else 1.0
        f = np.float64
        moe, mtp = st.moe.astype(f) * per_microbatch, st.mtp.astype(f) * per_microbatch
        return cls(dense=st.dense.astype(f) * per_microbatch, moe=moe, mtp=mtp,
                   loss=st.loss.astype(f) * per_microbatch, n_moe=moe + mtp)


def _stage_kinds(w: Workload, b: LayoutBatch, recipe: Recipe) -> StageKinds:
    """The kinds of pipeline rank of the candidates under the recipe's pipeline layout and schedule."""
    layouts = (recipe.pipeline_layout,) if recipe.pipeline_layout else ()
    return stage_kinds(w.num_layers, w.num_dense_layers, recipe.mtp_layers, b.pp, b.vpp, b.pipe_policy, layouts,
                       bidirectional=_bidirectional(recipe))


def _bubble_s(x: Ctx, pace: np.ndarray, transfer_credit_s: np.ndarray | float = 0.0) -> np.ndarray:
    """Pipeline bubble of a step at `pace` seconds per micro-batch: (pp - 1) / vpp micro-batch times under 1F1B
    (PTD-P §2.2), times the schedule's share (`_bubble_share`), less the transfers a lock-step schedule does not
    run at that pace (`PpTerm.bubble_credit_s`); none without a pipeline.  An interleaved schedule with fewer
    micro-batches m than stages (torch's ScheduleInterleaved1F1B runs them as one round, torchtitan's; Megatron
    refuses them, cost.rules vpp_microbatches) runs every chunk's m forwards before the next chunk's, each micro-batch
    crossing all pp x vpp virtual stages in turn: (pp - m) + (m - 1) / vpp micro-batch times, (pp - m)(1 - 1/vpp)
    more than 1F1B's formula (`_interleaved_shortfall`)."""
    share = np.where(x.pp > 1, _bubble_share(x), 0.0)
    times = (x.pp - 1.0) / x.vpp + _interleaved_shortfall(x)
    with np.errstate(invalid="ignore"):  # an invalid split's infinite pace with no bubble (DualPipe at pp 2)
        return np.where(share > 0, np.maximum(times * pace * share - transfer_credit_s, 0.0), 0.0)


def _interleaved_shortfall(x: Ctx) -> np.ndarray:
    """Micro-batch times an interleaved schedule idles beyond (pp - 1) / vpp where m < pp: (pp - m)(1 - 1/vpp), the
    bubble of torch's ScheduleInterleaved1F1B on one round of m micro-batches (torch 2.13
    distributed/pipelining/schedules.py:2931-2933 number_of_rounds = max(1, m // pp), microbatches_per_round m);
    0 wherever m >= pp or vpp is 1 (every Megatron layout)."""
    return np.maximum(x.pp - x.m, 0.0) * (1.0 - 1.0 / x.vpp)


def _bidirectional(recipe: Recipe) -> bool:
    """DualPipe feeds micro-batches from both ends: each rank holds two stages (cost.pipeline.stage_kinds)."""
    return recipe.pipeline_schedule is PipelineSchedule.DUALPIPE


def _overlapped(gpu, host):
    """Time of GPU work and the host work that feeds it, running side by side: the larger of the two when
    one clearly dominates, more than it when they are close, because launch gaps then leave the GPU idle
    between kernels (a soft maximum, (g^p + h^p)^(1/p) with p = HOST_GPU_OVERLAP_SHARPNESS)."""
    p = C.HOST_GPU_OVERLAP_SHARPNESS
    big = np.maximum(np.maximum(gpu, host), 1e-30)
    g, h = gpu / big, host / big
    if p == 3.0:  # the fitted value: cubes and a cube root are far cheaper than pow
        return big * np.cbrt(g * g * g + h * h * h)
    return big * (g ** p + h ** p) ** (1.0 / p)


@dataclass(frozen=True)
class _Params:
    dense_kinds: np.ndarray
    expert_kinds: np.ndarray
    dense_shard: np.ndarray
    expert_shard: np.ndarray
    edge_dense_kinds: np.ndarray
    edge_expert_kinds: np.ndarray
    embed_kinds: np.ndarray

    def as_stage(self, tail: np.ndarray | float = 0.0) -> StageParams:
        """The stage with the most dense and the one with the most expert parameters set the DP pace; `tail`: the
        first rank's parameters reduced after its last backward (`_first_rank_tail`), where the DP term prices
        them."""
        return StageParams(dense=self.dense_kinds.max(axis=0), expert=self.expert_kinds.max(axis=0),
                           dense_shard=self.dense_shard, expert_shard=self.expert_shard,
                           edge_dense=self.edge_dense_kinds.max(axis=0), edge_expert=self.edge_expert_kinds.max(axis=0),
                           embed=self.embed_kinds.max(axis=0), tail=tail)


def _mtp_params(x: Ctx) -> np.ndarray:
    """One MTP module's dense parameters on a TP rank: a decoder layer (an MoE one's dense part) and its 2h -> h
    projection."""
    w = x.w
    layer = w.moe_layer_dense_shard(x.tp) if w.num_experts else w.dense_layer_shard(x.tp)
    return layer + 2.0 * w.hidden * w.hidden / x.tp


def _first_rank_tail(x: Ctx, st: StageKinds) -> np.ndarray:
    """(K,) the first rank's dense parameters reduced after its last backward (dp.tail_bucket_params), where it holds
    the embedding: its bucketed chunk is the whole rank without interleaving; under it each chunk's reduction goes
    whole after the chunk's last backward (dp_term's floor), and the embedding's bucket is the edge as before.
    Only the step's DP term reads it, not memory_floor."""
    w = x.w
    embed_p = st.embed[0] * (w.embed_params / x.tp)
    mtp_p = st.mtp[0] * _mtp_params(x) if x.recipe.mtp_layers else 0.0
    head = loss_head_params(x, st)[0] + st.loss[0] * w.final_norm_params + mtp_p
    tail = np.where(x.vpp == 1, tail_bucket_params(x, st.dense[0], st.moe[0] if w.num_experts else 0.0, head,
                                                   embed_p), embed_p)
    return np.where(st.embed[0] > 0, tail, 0.0)


def _stage_params(x: Ctx, st: StageKinds) -> _Params:
    w = x.w
    dense_layer_p = w.dense_layer_shard(x.tp)
    moe_dense_p = w.moe_layer_dense_shard(x.tp)
    moe_expert_p = w.moe_layer_expert_shard(x.ep * x.etp)
    head_p = loss_head_params(x, st)
    embed_p = st.embed * (w.embed_params / x.tp)
    dense = st.dense * dense_layer_p + embed_p + head_p
    if w.num_experts:
        dense += st.moe * moe_dense_p
    if x.recipe.mtp_layers:
        dense += st.mtp * _mtp_params(x)
    expert = (st.moe + st.mtp) * moe_expert_p if w.num_experts else np.zeros_like(dense)
    # ZeRO-2/3's first gathered and last reduced units (dp.shard_edges_s): the rank's first layer, dense where it
    # holds one, and its embedding and head
    has_dense = st.dense > 0
    # ...the head not where the loss is chunked (torchtitan 0.3.0 wraps [norm, lm_head] as a unit of its own and
    # reduce-scatters it at the loss's last chunk, at the start of backward: components/loss.py ChunkedLossWrapper)
    head_edge = head_p if x.recipe.loss_chunks == 1 else 0.0
    edge_dense = (np.where(has_dense, dense_layer_p, np.where(st.moe > 0, moe_dense_p if w.num_experts else 0.0, 0.0))
                  + embed_p + head_edge)
    edge_expert = np.where(~has_dense & (st.moe > 0), moe_expert_p, 0.0) if w.num_experts else np.zeros_like(dense)
    zero3 = x.b.zero == 3
    return _Params(dense_kinds=dense, expert_kinds=expert,
                   dense_shard=np.where(zero3, x.cp * x.b.dp_shard, x.cp * x.dp),
                   # HSDP shards the experts as it shards the dense weights, over the stage's tp x cp x dp_shard
                   # ranks (ep x etp of them hold different experts) and replicates them over dp / dp_shard:
                   # torchtitan's sparse mesh (pp, dp_replicate, efsdp, ep), efsdp = dp_shard x cp x tp / ep
                   # (0.3.0 distributed/parallel_dims.py build_mesh), MaxText's expert weights over expert, fsdp
                   # and context but not data (base.yml logical_axis_rules)
                   expert_shard=np.where(zero3, x.tp * x.cp * x.b.dp_shard, x.tp * x.cp * x.dp) / (x.ep * x.etp),
                   edge_dense_kinds=edge_dense * np.ones_like(dense),
                   edge_expert_kinds=edge_expert * np.ones_like(dense),
                   embed_kinds=embed_p * np.ones_like(dense))


def concat_estimates(first: Estimates, second: Estimates) -> Estimates:
    """The estimates of two batches priced under the same job and recipe, as one."""
    out = {}
    for f in fields(Estimates):
        a, b = getattr(first, f.name), getattr(second, f.name)
        if a is None or b is None:
            out[f.name] = None
        elif isinstance(a, np.ndarray):
            out[f.name] = np.concatenate([a, b])
        elif isinstance(a, dict):
            out[f.name] = {k: np.concatenate([a[k], b[k]]) for k in a}
        else:
            out[f.name] = a
    return Estimates(**out)


BLOCKWISE_USERBUFFERS = ("Transformer Engine's userbuffers gather FP8 per-tensor and MXFP8 values only and raise "
                         "\"Unsupported quantizer for Userbuffers\" for blockwise FP8 (v2.9 module/base.py:634-635, "
                         "v2.18 :730, fill_userbuffers_buffer_for_all_gather), and Megatron-Core passes "
                         "--tp-comm-overlap on unchecked")
"""Why blockwise FP8 runs no TP communication overlap."""
BLOCKWISE_TP_OVERLAP_OFF = f"forced off by fp8 blockwise, whatever the search tries: {BLOCKWISE_USERBUFFERS}"
"""A plan's recipe source of tp_comm_overlap under blockwise FP8 (plan.make_plan), where the search's "searched" would
say it chose: estimate prices every candidate off (_no_userbuffers_under_blockwise)."""


def _no_userbuffers_under_blockwise(choices: RecipeChoices, b: LayoutBatch) -> RecipeChoices:
    """Blockwise FP8 with tensor parallelism runs without TP overlap (BLOCKWISE_USERBUFFERS): `plan` does not choose
    it, and a pinned --tp-comm-overlap is refused where a candidate has tp above 1 (its first step would raise)."""
    if choices.tp_comm_overlap == (True,) and bool(np.any(np.asarray(b.tp) > 1)):
        raise InputError(f"--tp-comm-overlap with --fp8-recipe blockwise and tp {int(np.max(b.tp))}: the job stops at "
                         f"its first TP all-gather: {BLOCKWISE_USERBUFFERS}; drop --tp-comm-overlap (the TP "
                         f"collectives then run beside the GEMMs only as --tp-async-backward allows), or use "
                         f"--fp8-recipe tensorwise (Hopper) or mxfp8 (Blackwell)")
    return replace(choices, tp_comm_overlap=(False,))


def default_choices(is_moe: bool, topo: Topology, recipe: Recipe,
                    pinned: frozenset[str] = frozenset()) -> RecipeChoices:
    """What `plan` chooses between where the user pinned nothing: the dispatchers and CUDA-graph scopes
    this machine runs, and each overlap on or off.  A field named in `pinned` keeps the recipe's value.

    The flex dispatcher is HybridEP where the NVLink domain spans several hosts (GB200/GB300 NVL72: it
    "fully supports MNNVL", Megatron-Core MoE README), DeepEP elsewhere.  Full-iteration CUDA graphs
    need static shapes (write-up §2.3: "not feasible for MoE" otherwise): an MoE model gets them only pinned
    (`--cuda-graphs full`), with a capacity factor padded to capacity or HybridEP's expert-rank budget
    (evaluate.full_graph_moe_error)."""
    multi_host_nvlink = topo.cluster.scale_up.size > topo.cluster.gpus_per_node
    flex = Dispatcher.HYBRIDEP if multi_host_nvlink else Dispatcher.DEEPEP
    dispatchers = (Dispatcher.ALLTOALL, flex) if is_moe else (recipe.moe_dispatcher,)
    # an MoE model's full graphs only where the user pins them: their static shapes change what runs (the capacity
    # padded, or HybridEP's expert-rank budget with paged stash: full_graph_moe_error), which pinned recipes price
    graphs = (CudaGraphs.NONE, CudaGraphs.PARTIAL) if is_moe else (CudaGraphs.NONE, CudaGraphs.PARTIAL, CudaGraphs.FULL)
    return RecipeChoices(
        dispatchers=(recipe.moe_dispatcher,) if "moe_dispatcher" in pinned else dispatchers,
        cuda_graphs=(recipe.cuda_graphs,) if "cuda_graphs" in pinned else graphs,
        tp_comm_overlap=(recipe.tp_comm_overlap,) if "tp_comm_overlap" in pinned else (False, True),
        ep_comm_overlap=(recipe.ep_comm_overlap,) if "ep_comm_overlap" in pinned or not is_moe else (False, True),
    )


def take_estimates(est: Estimates, index: np.ndarray) -> Estimates:
    """The estimates of the candidates `index` only."""
    out = {}
    for f in fields(Estimates):
        a = getattr(est, f.name)
        if isinstance(a, np.ndarray) and a.ndim == 1:
            out[f.name] = a[index]
        elif isinstance(a, dict):
            out[f.name] = {k: v[index] for k, v in a.items()}
        else:
            out[f.name] = a
    return Estimates(**out)
