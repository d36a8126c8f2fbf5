"""Step time and memory of K candidate layouts at once: the cost model assembled.

Per micro-batch, each pipeline stage runs forward + backward (+ a recompute forward) of its layers:
GEMMs, attention core, element-wise work, and the collectives that sit in the critical path (TP/SP,
CP, EP, PP point-to-point).  The pipeline runs m micro-batches plus a bubble of (pp - 1)/vpp
micro-batch times (PTD-P §2.2).  Data-parallel gradient reduction runs once per step and hides
behind the last micro-batch's backward (ZeRO-1, Megatron's distributed optimizer); ZeRO-2
reduce-scatters every micro-batch; ZeRO-3/FSDP also gathers weights every micro-batch and hides behind
its compute.  The optimizer step is memory-bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost import collectives as coll
from placement.cost import constants as C
from placement.cost.batch import LayoutBatch
from placement.cost.compute import (
    GemmRate,
    attention_core_time,
    cross_entropy_time,
    elementwise_time,
    gemm_time,
    unfused_attention_time,
)
from placement.cost.stages import stage_layers
from placement.errors import InputError
from placement.specs import TrainingSpec
from placement.specs.training import AttentionKernel, Precision
from placement.topology import Topology
from placement.workload import Workload

SELECTIVE, FULL = 1, 2


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
    dp_s: np.ndarray
    dp_exposed_s: np.ndarray
    bubble_s: np.ndarray
    optimizer_s: np.ndarray
    overlap_slowdown_s: np.ndarray
    """Compute lost to communication running beside it (OVERLAP_COMPUTE_SLOWDOWN)."""
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


def gemm_peak(topo: Topology, precision: Precision) -> GemmRate:
    acc = topo.accelerator
    return GemmRate(_gemm_flops(topo, precision), acc.gemm_half_efficiency_dim)


def _gemm_flops(topo: Topology, precision: Precision) -> float:
    acc = topo.accelerator
    if precision is Precision.FP8:
        if acc.peak_flops_fp8 is None:
            raise InputError(
                f"--precision fp8: accelerator {acc.name!r} has no FP8 tensor cores (peak_flops_fp8 unset); "
                f"use --precision bf16"
            )
        return acc.peak_flops_fp8 * (acc.matmul_efficiency_fp8 or acc.matmul_efficiency_bf16)
    return acc.peak_flops_bf16 * acc.matmul_efficiency_bf16


def peak_flops(topo: Topology, precision: Precision) -> float:
    """MFU denominator: dense peak at the training precision."""
    acc = topo.accelerator
    return acc.peak_flops_fp8 if precision is Precision.FP8 and acc.peak_flops_fp8 else acc.peak_flops_bf16


def estimate(w: Workload, train: TrainingSpec, topo: Topology, b: LayoutBatch) -> Estimates:
    f64 = np.float64
    s = train.seq_len
    h = w.hidden
    tp, cp, ep, etp, pp, vpp, dp = (x.astype(f64) for x in (b.tp, b.cp, b.ep, b.etp, b.pp, b.vpp, b.dp))
    mbs, shard_dp = b.mbs.astype(f64), b.dp_shard.astype(f64)
    sp = b.sp.astype(bool)
    full = b.recompute == FULL
    recompute_core = b.recompute >= SELECTIVE
    levels = coll.LevelArrays(topo)
    acc = topo.accelerator
    peak_gemm = gemm_peak(topo, train.precision)
    peak_core = acc.peak_flops_bf16 * acc.matmul_efficiency_bf16
    hbm_bw = acc.hbm_bandwidth_bytes_per_s

    m = train.global_batch / (dp * mbs)  # micro-batches per step
    tokens = mbs * s / cp  # tokens in one micro-batch on one rank (rows of its GEMMs)
    sp_shard = np.where(sp, tp, 1.0)
    passes = 1.0 + C.BACKWARD_TO_FORWARD + full  # forward, backward, recompute forward

    # --- compute of one layer, one micro-batch, forward+backward (+recompute) ------------------
    out_dim = w.out_dim
    qkv_width = w.attn_params / h - out_dim  # q + k + v output width (MLA: all its projections)
    attn_gemm = gemm_time(tokens, qkv_width / tp, h, 1, peak_gemm) + gemm_time(tokens, h, out_dim / tp, 1, peak_gemm)
    unfused = train.attention_kernel is AttentionKernel.UNFUSED
    if unfused:
        core = unfused_attention_time(tokens, s, w.num_heads / tp, w.qk_head_dim, w.v_head_dim, peak_gemm, hbm_bw)
    else:
        core = attention_core_time(tokens, s, w.attn_core_dim / tp, peak_core)
    elem = elementwise_time(tokens, h, sp_shard, hbm_bw)
    core_passes = 1.0 + C.BACKWARD_TO_FORWARD + recompute_core
    attn_t = attn_gemm * passes + core * core_passes + elem * passes

    def mlp_time(ffn: float) -> np.ndarray:
        if ffn == 0:
            return np.zeros_like(tokens)
        return (gemm_time(tokens, w.mlp_up * ffn / tp, h, 1, peak_gemm)
                + gemm_time(tokens, h, ffn / tp, 1, peak_gemm)) * passes

    dense_layer_t = attn_t + mlp_time(w.dense_ffn)
    if w.num_experts:
        local_experts = w.num_experts / ep
        pairs = tokens * w.top_k * etp / tp  # token-expert pairs one rank computes
        per_expert = pairs / local_experts
        routed = (gemm_time(per_expert, w.mlp_up * w.expert_ffn / etp, h, local_experts, peak_gemm)
                  + gemm_time(per_expert, h, w.expert_ffn / etp, local_experts, peak_gemm)) * passes
        router = gemm_time(tokens / sp_shard, w.num_experts, h, 1, peak_gemm) * passes
        moe_layer_t = attn_t + mlp_time(w.shared_ffn_total) + routed + router
    else:
        moe_layer_t = dense_layer_t
    vocab = w.embed_params / h
    head_t = (gemm_time(tokens, vocab / tp, h, 1, peak_gemm) * (1.0 + C.BACKWARD_TO_FORWARD)
              + cross_entropy_time(tokens, vocab / tp, hbm_bw))

    # --- communication in the critical path, per layer per micro-batch ---------------------------
    act = tokens * h * C.BYTES_PER_ACTIVATION
    tp_group = coll.Groups(levels, np.ones_like(b.tp), b.tp)
    tp_ops = 4.0 + 2.0 * full  # 2 fwd + 2 bwd all-reduce equivalents (PTD-P §3.2; SP: AG+RS pairs)
    tp_layer = tp_group.all_reduce(act) * tp_ops * (1.0 - C.TP_COMM_OVERLAP)

    cp_group = coll.Groups(levels, b.tp, b.cp)
    # gathered K and V of the sequence; KV heads are replicated across TP ranks beyond their count
    kv_full = tokens * cp * w.kv_dim / np.minimum(tp, w.kv_heads) * C.BYTES_PER_ACTIVATION
    cp_fwd = cp_group.reduce_scatter(kv_full)
    cp_layer = (np.maximum(cp_fwd - core, 0.0) * (1.0 + recompute_core)  # ring attention overlaps the core
                + np.maximum(2.0 * cp_fwd - C.BACKWARD_TO_FORWARD * core, 0.0))  # dK/dV back: gather + RS
    cp_layer_total = cp_fwd * (3.0 + recompute_core)

    if w.num_experts:
        ep_group = coll.Groups(levels, b.etp, b.ep)
        # dispatch + combine, forward and backward (+ forward again under full recompute); under FP8 the
        # forward dispatch moves FP8 activations, combine and backward stay 16-bit (DeepSeek-V3 §3.3)
        dispatch = tokens / tp * w.top_k * h * C.BYTES_PER_ACTIVATION
        fwd_dispatch = 0.5 if train.precision is Precision.FP8 else 1.0
        ep_ops = (fwd_dispatch + 1.0) * (1.0 + full) + 2.0
        # group-limited routing (DeepSeek-V3): when each node holds whole expert groups, a token crosses
        # the network once per target node (at most groups_per_token), not once per expert
        experts_per_domain = (w.num_experts / ep) * ep_group.within[ep_group.inverse, 0]
        whole_groups = experts_per_domain >= w.num_experts / w.num_expert_groups
        dedup = np.where(whole_groups & (w.num_expert_groups > 1),
                         min(w.groups_per_token, w.top_k) / w.top_k, 1.0)
        ep_layer = ep_group.all_to_all(dispatch, dedup) * ep_ops * (1.0 - C.EP_COMM_OVERLAP)
    else:
        ep_layer = dispatch = ep_ops = np.zeros_like(tokens)

    # --- per stage --------------------------------------------------------------------------------
    st = stage_layers(w.num_layers, b.pp, b.vpp)
    n_dense, n_moe = w.num_dense_layers, w.num_moe_layers
    first_dense = np.minimum(st.first, n_dense)
    first_moe = st.first - first_dense
    mid_moe = np.where(n_moe >= st.middle, st.middle, 0)
    mid_dense = st.middle - mid_moe
    last_moe = np.where(n_moe >= st.last, st.last, 0)
    last_dense = st.last - last_moe
    single = b.pp == 1

    def stage_time(nd, nm, head):
        comp = nd * dense_layer_t + nm * moe_layer_t + head * head_t
        comm_tp = (nd + nm * moe_tp_share) * tp_layer
        comm_cp = (nd + nm) * cp_layer
        comm_ep = nm * ep_layer
        return comp, comm_tp, comm_cp, comm_ep, (nd + nm) * cp_layer_total, nd + nm, nm

    # with etp = 1 the experts run unsharded after an all-to-all: only attention keeps its TP collectives
    moe_tp_share = np.where(b.etp > 1, 1.0, 0.5)
    stages = [stage_time(first_dense, first_moe, single.astype(f64)),
              stage_time(mid_dense, mid_moe, 0.0),
              stage_time(last_dense, last_moe, 1.0)]
    totals = np.stack([sum(parts[:4]) for parts in stages])
    worst = np.argmax(totals, axis=0)
    pick = lambda i: _choose(worst, [stg[i] for stg in stages])  # noqa: E731
    comp_mb, tp_mb, cp_mb, ep_mb, cp_mb_total = pick(0), pick(1), pick(2), pick(3), pick(4)
    layers_mb, moe_layers_mb = pick(5), pick(6)

    pp_pair = coll.Groups(levels, b.tp * b.cp * b.dp, b.pp, pair=True)
    p2p = pp_pair.p2p(act / tp)  # scatter/gather across TP ranks (PTD-P §4.1)
    pp_mb = np.where(b.pp > 1, 2.0 * vpp * p2p, 0.0)

    t_mb = comp_mb + tp_mb + cp_mb + ep_mb + pp_mb
    bubble = (pp - 1.0) / vpp * t_mb

    # --- parameters held by one rank (worst stage) ------------------------------------------------
    dense_layer_p = (w.attn_params + w.dense_mlp_params) / tp
    moe_dense_p = (w.attn_params + w.shared_params) / tp + w.router_params
    moe_expert_p = w.num_experts * w.expert_params / (ep * etp)
    embed_p = w.embed_params / tp
    head_p = w.head_params / tp

    def stage_params(nd, nm, has_embed, has_head):
        dense = nd * dense_layer_p + nm * moe_dense_p + has_embed * embed_p + has_head * head_p
        return dense, nm * moe_expert_p

    first_p = stage_params(first_dense, first_moe, 1.0, single.astype(f64))
    mid_p = stage_params(mid_dense, mid_moe, 0.0, 0.0)
    last_p = stage_params(last_dense, last_moe, 0.0, 1.0)

    # --- data parallelism -------------------------------------------------------------------------
    dense_repl = cp * dp  # ranks holding the same dense weights: CP ranks share them
    zero3 = b.zero == 3
    shard_dense = np.where(zero3, cp * shard_dp, dense_repl)
    edp = tp * cp * dp / (ep * etp)
    dense_group = coll.Groups(levels, b.tp, np.where(zero3, b.cp * b.dp_shard, b.cp * b.dp))
    expert_group = coll.Groups(levels, b.ep * b.etp, np.rint(edp).astype(np.int64))
    grad_b = C.BYTES_GRAD
    pd = np.maximum(np.maximum(first_p[0], mid_p[0]), last_p[0])  # the stage with most dense params sets the pace
    pe = np.maximum(np.maximum(first_p[1], mid_p[1]), last_p[1])
    rs_once = dense_group.reduce_scatter(pd * grad_b) + expert_group.reduce_scatter(pe * grad_b)
    ag_once = dense_group.reduce_scatter(pd * C.BYTES_WEIGHT) + expert_group.reduce_scatter(pe * C.BYTES_WEIGHT)
    # ZeRO-3 / FSDP: gather weights for forward and backward, reduce-scatter grads, every micro-batch
    z3_mb = 3.0 * (dense_group.reduce_scatter(pd * C.BYTES_WEIGHT) + expert_group.reduce_scatter(pe * C.BYTES_WEIGHT))
    replicas = coll.Groups(levels, b.tp * b.cp * b.dp_shard, b.dp // b.dp_shard)
    hsdp_once = replicas.all_reduce(pd * grad_b / shard_dense)
    # Gradients: DDP all-reduces them (reduce-scatter + all-gather) during the last backward.  ZeRO-1
    # (Megatron's distributed optimizer) reduce-scatters them during the last backward and all-gathers
    # the updated weights during the next forward (overlap-param-gather).  ZeRO-2 keeps only its
    # gradient shard, so it reduce-scatters after every micro-batch's backward (DeepSpeed ZeRO-2, FSDP
    # SHARD_GRAD_OP), then all-gathers the weights as ZeRO-1 does.
    zero2 = b.zero == 2
    dp_total = np.where(zero3, z3_mb * m + hsdp_once, np.where(zero2, rs_once * m + ag_once, rs_once + ag_once))
    bwd_share = C.BACKWARD_TO_FORWARD / (1.0 + C.BACKWARD_TO_FORWARD)
    hide = C.DP_OVERLAP_FRACTION * bwd_share * comp_mb
    hide_fwd = C.DP_OVERLAP_FRACTION * (1.0 - bwd_share) * comp_mb
    gather_exposed = np.maximum(ag_once - hide_fwd, 0.0)
    dp_exposed = np.where(
        zero3, m * np.maximum(z3_mb - comp_mb, 0.0) + np.maximum(hsdp_once - hide, 0.0),
        np.where(zero2, m * np.maximum(rs_once - hide, 0.0) + gather_exposed,
                 np.where(b.zero == 1, np.maximum(rs_once - hide, 0.0) + gather_exposed,
                          np.maximum(rs_once + ag_once - hide, 0.0))))

    # --- optimizer step (memory-bound) ------------------------------------------------------------
    opt_shard_dense = np.where(b.zero >= 1, shard_dense, 1.0)
    opt_shard_exp = np.where(b.zero >= 1, edp, 1.0)
    opt_params = pd / opt_shard_dense + pe / opt_shard_exp
    optimizer_s = opt_params * C.OPTIMIZER_BYTES_PER_PARAM_STEP / hbm_bw

    # hidden communication is not free: its kernels take SMs and HBM bandwidth from the compute it hides
    # behind, so that compute runs slower for as long as they overlap
    overlapped = np.maximum(dp_total - dp_exposed, 0.0) + m * np.maximum(cp_mb_total - cp_mb, 0.0)
    overlap_slowdown = C.OVERLAP_COMPUTE_SLOWDOWN * np.minimum(overlapped, m * comp_mb)
    step = m * t_mb + bubble + dp_exposed + optimizer_s + overlap_slowdown

    # --- memory -----------------------------------------------------------------------------------
    def state_bytes(p_dense, p_exp):
        p = p_dense + p_exp
        sharded = p_dense / shard_dense + p_exp / edp
        weights = np.where(zero3, sharded * C.BYTES_WEIGHT, p * C.BYTES_WEIGHT)
        grads = np.where(b.zero >= 2, sharded * C.BYTES_GRAD, p * C.BYTES_GRAD)
        opt = np.where(b.zero >= 1, sharded, p) * C.BYTES_OPTIMIZER
        return weights, grads, opt

    act_layer_dense, act_layer_moe, act_input = _activation_bytes_per_layer(w, tokens, tp, etp, sp_shard)
    if unfused:  # scores, softmax output and dropout mask: 5 a s^2 b / t (Korthikanti Table 2), not kept
        scores = tokens * s * w.num_heads / tp * 5.0 * (b.recompute == 0)  # under selective/full recompute
        act_layer_dense = act_layer_dense + scores
        act_layer_moe = act_layer_moe + scores
    in_flight_first = np.minimum(m, pp) * np.where(b.vpp > 1, 1.0 + (pp - 1.0) / (pp * vpp), 1.0)
    in_flight_mid = np.minimum(m, np.maximum(pp - 1.0, 1.0))

    def stage_acts(nd, nm, in_flight):
        stored_full = (nd + nm) * act_input
        stored = np.where(full, stored_full, nd * act_layer_dense + nm * act_layer_moe)
        working = np.where(full, np.maximum(np.where(nm > 0, act_layer_moe, act_layer_dense), 0.0), 0.0)
        return stored * in_flight + working

    logits = tokens * (w.embed_params / h) / tp * C.LOGITS_BYTES_PER_ELEMENT
    z3_buffer = np.where(zero3, 2.0 * np.maximum(dense_layer_p, moe_dense_p + moe_expert_p) * C.BYTES_WEIGHT, 0.0)

    cands = []
    for p_pair, nd, nm, in_flight, has_logits in (
        (first_p, first_dense, first_moe, in_flight_first, single.astype(f64)),
        (mid_p, mid_dense, mid_moe, in_flight_mid, 0.0),
        (last_p, last_dense, last_moe, np.ones_like(m), 1.0),
    ):
        wts, grd, opt = state_bytes(*p_pair)
        acts = stage_acts(nd, nm, in_flight)
        other = has_logits * logits + z3_buffer + C.MEMORY_RESERVE_BYTES
        cands.append((wts, grd, opt, acts, other))
    stage_totals = np.stack([sum(x) for x in cands])
    mem_worst = np.argmax(stage_totals, axis=0)
    pick_m = lambda i: _choose(mem_worst, [c[i] for c in cands])  # noqa: E731
    weights_b, grads_b, opt_b, acts_b, other_b = (pick_m(i) for i in range(5))
    peak_mem = weights_b + grads_b + opt_b + acts_b + other_b
    capacity = acc.hbm_bytes * (1.0 - C.ALLOCATOR_FRAGMENTATION)
    fits = peak_mem <= capacity

    # --- throughput -------------------------------------------------------------------------------
    num_gpus = tp * cp * pp * dp
    tokens_step = train.tokens_per_step
    model_flops = w.model_flops_per_token(s) * tokens_step
    hw_per_token = w.forward_flops_per_token(s) * (3.0 + full) + np.where(
        b.recompute == SELECTIVE, 2.0 * s * w.attn_core_dim * w.num_layers, 0.0)
    peak = peak_flops(topo, train.precision)
    mfu = model_flops / (step * num_gpus * peak)
    hfu = hw_per_token * tokens_step / (step * num_gpus * peak)

    valid = st.valid & (np.abs(m - np.rint(m)) < 1e-9) & (m >= 1)
    dense_grad_bytes = np.where(zero3, 3.0 * pd * C.BYTES_WEIGHT * m, np.where(zero2, pd * grad_b * (m + 1.0),
                                                                               2.0 * pd * grad_b))
    expert_grad_bytes = np.where(zero3, 3.0 * pe * C.BYTES_WEIGHT * m, np.where(zero2, pe * grad_b * (m + 1.0),
                                                                                2.0 * pe * grad_b))
    traffic = {
        "tp": np.where(b.tp > 1, 2.0 * act * tp_ops * layers_mb * m, 0.0),
        "cp": np.where(b.cp > 1, kv_full * (3.0 + full) * layers_mb * m, 0.0),
        "ep": np.where(b.ep > 1, dispatch * ep_ops * moe_layers_mb * m, 0.0),
        "pp": np.where(b.pp > 1, act / tp * 2.0 * vpp * m, 0.0),
        "dp": np.where(np.where(zero3, cp * shard_dp, dense_repl) > 1, dense_grad_bytes, 0.0),
        "dp_replica": np.where(zero3 & (b.dp_shard < b.dp), 2.0 * pd * grad_b / shard_dense, 0.0),
        "edp": np.where(edp > 1, expert_grad_bytes, 0.0),
    }
    return Estimates(
        valid=valid, step_time_s=step, compute_s=m * comp_mb, tp_s=m * tp_mb, cp_s=m * cp_mb,
        cp_total_s=m * cp_mb_total, ep_s=m * ep_mb,
        pp_s=m * pp_mb, dp_s=dp_total, dp_exposed_s=dp_exposed, bubble_s=bubble, optimizer_s=optimizer_s,
        overlap_slowdown_s=overlap_slowdown,
        num_microbatches=np.rint(m).astype(np.int64), mfu=mfu, hfu=hfu, tokens_per_s=tokens_step / step,
        weights_bytes=weights_b, grads_bytes=grads_b, optimizer_bytes=opt_b, activations_bytes=acts_b,
        other_bytes=other_b, peak_memory_bytes=peak_mem, memory_capacity_bytes=capacity, fits=fits,
        traffic_bytes=traffic,
    )


def _choose(which: np.ndarray, options: list) -> np.ndarray:
    """options[which[k]][k]: np.choose without stacking the options into one (n x K) array first."""
    out = options[-1]
    for i in range(len(options) - 2, -1, -1):
        out = np.where(which == i, options[i], out)
    return np.broadcast_to(out, which.shape)


def _activation_bytes_per_layer(w: Workload, tokens, tp, etp, sp_shard):
    """Korthikanti et al. Table 2 per-layer activations, with fused (flash) attention: no s x s tensor.

    Replicated across TP unless sequence parallel: the inputs of both norms, of the QKV and of the first
    MLP GEMM (8 sbh bytes), plus two 1-byte dropout masks when dropout is on (2 sbh).  Sharded by TP:
    Q, K, V and the attention output (2 bytes x widths), the MLP up-projection outputs and the
    activation output.  MoE: every token-expert pair keeps its permuted input and expert activations.
    Full recompute keeps only the layer input.
    """
    h = w.hidden
    rep = (8.0 + (2.0 if w.dropout else 0.0)) * h
    attn = 2.0 * w.attn_act_width  # inputs of the attention core and the output projection, 2 bytes each
    dense_mlp = 2.0 * (w.mlp_up + 1) * w.dense_ffn
    dense = tokens * (rep / sp_shard + (attn + dense_mlp) / tp)
    if w.num_experts:
        shared = 2.0 * (w.mlp_up + 1) * w.shared_ffn_total
        pairs = tokens * w.top_k * etp / tp
        routed = pairs * (2.0 * h + 2.0 * (w.mlp_up + 1) * w.expert_ffn / etp)
        moe = tokens * (rep / sp_shard + (attn + shared) / tp) + routed
    else:
        moe = dense
    layer_input = tokens * 2.0 * h / sp_shard
    return dense, moe, layer_input
