"""Communication terms in the critical path, per layer per micro-batch: TP/SP, CP, EP, and PP per
micro-batch.  Each returns its full time and what stays exposed under each overlap option, so the
recipe choice can be made per candidate (cost.step)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost import collectives as coll
from placement.cost import constants as C
from placement.cost.compute import gemm_time
from placement.cost.context import Ctx
from placement.cost.layer import LayerCompute, core_backward_factor
from placement.specs.recipe import CpCommType, Dispatcher, Fp8Recipe, PipelineSchedule
from placement.specs.recipe import RecomputeModule as M


@dataclass(frozen=True)
class TpTerm:
    """TP/SP collectives of one layer per micro-batch: all-gather + reduce-scatter pairs, 2 forward and 2
    backward all-reduce equivalents (PTD-P §3.2; Korthikanti §4: SP moves the same bytes); 1 forward under a
    parallel residual."""

    dense_s: np.ndarray
    moe_s: np.ndarray
    """An MoE layer: with etp = 1 the routed experts run unsharded after the all-to-all, so attention keeps its
    TP collectives and so does a shared expert, which is a tensor-parallel MLP with its own sequence-parallel
    all-gather and reduce-scatter (Megatron-Core `moe/shared_experts.py` SharedExpertMLP)."""
    bytes_per_layer: np.ndarray
    """Bytes one rank sends per layer per micro-batch (what the mapper weighs)."""
    column_backward_s: np.ndarray | float = 0.0
    """Of dense_s, the collectives of the column-parallel linears' backward (their input gradients' all-reduce or
    reduce-scatter, and under sequence parallelism the re-gather of their saved input), each launched beside a GEMM
    of its own linear (`column_backward`)."""
    column_hidden_s: np.ndarray | float = 0.0
    column_hidden_moe_s: np.ndarray | float = 0.0
    """What of them those GEMMs cover, per dense and per MoE layer."""
    async_backward: bool = False
    """Recipe `tp_async_backward`: without --tp-comm-overlap they run beside their GEMMs too (never under blocking
    launches, which overlap nothing)."""

    def exposed(self, overlap: bool, gemm_s: np.ndarray,
                slowdown: float = C.OVERLAP_COMPUTE_SLOWDOWN) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dense, moe, slowdown per dense layer): --tp-comm-overlap pipelines the forward's and the row-parallel
        backward's collectives with their GEMMs in chunks (a share hidden) and runs the column-parallel backward's
        beside their GEMMs in bulk (Transformer Engine's bulk dgrad/wgrad overlap, on in Megatron-Core's
        userbuffers config); without it, the asynchronous backward (`async_backward`) runs those beside their GEMMs
        alone.  Hidden communication costs the SM/HBM share of running beside compute."""
        bulk = np.broadcast_to(self.column_hidden_s, self.dense_s.shape)
        if not overlap:
            if not self.async_backward:
                return self.dense_s, self.moe_s, np.zeros_like(self.dense_s)
            return self.dense_s - bulk, self.moe_s - self.column_hidden_moe_s, slowdown * bulk
        pipelined = self.dense_s - self.column_backward_s
        hidden = np.minimum(C.TP_OVERLAP_HIDDEN * pipelined, gemm_s) + bulk
        share = np.where(self.dense_s > 0, hidden / np.maximum(self.dense_s, 1e-30), 0.0)
        return (self.dense_s - hidden, self.moe_s * (1.0 - share), slowdown * hidden)


def tp_term(x: Ctx) -> TpTerm:
    act = x.tokens * x.w.hidden * C.BYTES_PER_ACTIVATION
    group = coll.Groups(x.levels, np.ones_like(x.b.tp), x.b.tp)
    # all-reduces of one layer: 2 forward (after attention, after the MLP), each again in a full recompute's
    # forward, and 2 backward (the column-parallel inputs' gradients).  A parallel residual sums attention and
    # MLP outputs before one forward all-reduce; its backward still reduces each column-parallel input's
    # gradient (ModelSpec.parallel_residual, GPT-NeoX's gpt_j_residual).  As GPT-NeoX runs it: without sequence
    # parallelism (with it, the forward would gather both norms' outputs, 1.5 all-reduces, the same 3 in all) and
    # dense (an MoE layer keeps `moe_share` of the sequential count)
    forward = 1.0 if x.w.parallel_residual else 2.0
    # torchtitan's per-op checkpointing saves reduce-scatter outputs but not all-gathers or all-reduces, and reruns
    # the whole block but its saved ops (early_stop False): with sequence parallelism the recompute gathers the
    # attention's and the MLP's inputs again (two all-gathers, one all-reduce's time), without it all-reduces both
    # row-parallel outputs again (two; models/common/decoder_sharding.py rowwise_config)
    redo = np.where(x.sp_shard > 1, 1.0, 2.0)
    ops = forward * (1.0 + x.full * x.full_layers_share) + 2.0 + redo * x.module(M.PER_OP)
    # MaxText's named-save policies: a rerun column-parallel projection gathers its sequence-parallel input again
    # (half an all-reduce), a rerun output projection reduces again (a reduce-scatter, or an all-reduce without SP)
    sp = x.sp_shard > 1
    ops = ops + np.where(sp, 0.5, 0.0) * (x.module(M.QKV_PROJ) + x.module(M.MLP_UP)) + np.where(sp, 0.5, 1.0) * (
        x.module(M.OUT_PROJ))
    one = group.all_reduce(act)
    # under FP8 with sequence parallelism Transformer Engine gathers quantised values (recipe tp_gathers_16bit off):
    # each all-reduce's worth is an FP8 all-gather and a 16-bit reduce-scatter, a backward re-gather FP8; the two
    # backward pairs' gathers are the row-parallel linears' output gradients, which a block-scaled recipe gathers
    # twice over (`grad_gather_bytes_share`)
    share, grad_share = gather_bytes_share(x), grad_gather_bytes_share(x)
    gather, grad_gather = tp_gather_shares(group, act, share, grad_share)
    backward = 2.0  # the backward's all-reduce equivalents (counted in ops above)
    comm, hidden_dense, hidden_moe, regathers = column_backward(x, one, one * gather)
    dense = one * (0.5 * ops + gather * (ops - backward) + grad_gather * backward) + one * gather * 2.0 * regathers
    ops = ops + regathers
    moe_share = np.where((x.b.etp > 1) | (x.w.shared_ffn_total > 0), 1.0, 0.5)
    # bytes a rank sends: a reduce-scatter's act and an all-gather's act x share per all-reduce's worth, two
    # all-gathers per re-gather's
    pairs = ops - regathers
    sent = act * (pairs + (pairs - backward) * share + backward * grad_share + 2.0 * regathers * share)
    return TpTerm(dense_s=dense, moe_s=dense * moe_share,
                  bytes_per_layer=np.where(x.b.tp > 1, sent, 0.0),
                  column_backward_s=comm, column_hidden_s=hidden_dense, column_hidden_moe_s=hidden_moe,
                  async_backward=bool(x.recipe.tp_async_backward and not x.recipe.cuda_launch_blocking))


BLOCK_SCALED = (Fp8Recipe.MXFP8, Fp8Recipe.BLOCKWISE)
"""FP8 recipes with a scale per block of values, which Transformer Engine gathers beside the data."""


def _quantised_gathers(x: Ctx) -> np.ndarray:
    """Where the TP all-gathers move quantised values: FP8 under sequence parallelism with a framework that
    quantises before it gathers (recipe tp_gathers_16bit off)."""
    return (x.sp_shard > 1) & (x.fp8 is not None and not x.recipe.tp_gathers_16bit)


def gather_bytes_share(x: Ctx) -> np.ndarray:
    """Bytes of a TP all-gather of activations (the column-parallel inputs, forward and the backward re-gather)
    over those of its reduce-scatter partner, per candidate: 1/2 where the gathers move FP8 (`_quantised_gathers`;
    one copy, row-wise forward, column-wise for the re-gather: Transformer Engine v2.9 module/layernorm_linear.py:
    252, linear.py:640-646), plus the block scales under MXFP8 or blockwise FP8; else 1."""
    scales = C.FP8_BLOCK_SCALE_BYTES_PER_ELEMENT if x.fp8 in BLOCK_SCALED else 0.0
    return np.where(_quantised_gathers(x), (C.FP8_WEIGHT_COPY_BYTES + scales) / C.BYTES_PER_ACTIVATION, 1.0)


def grad_gather_bytes_share(x: Ctx) -> np.ndarray:
    """Bytes of a TP all-gather of a row-parallel linear's output gradient over its reduce-scatter partner's.
    Per-tensor FP8 gathers the row-wise copy and transposes after (Float8Quantizer supports_only_rowwise_all_gather;
    v1.8 module/base.py grad_output_preprocess): 1/2.  MXFP8 and blockwise FP8 cannot transpose a gathered copy, so
    the dgrad GEMM's row-wise and the wgrad GEMM's column-wise copies are both gathered, with their scales (v2.9
    module/linear.py:567-573 sets both usages, distributed.py _all_gather_mxfp8 and _all_gather_fp8_blockwise gather
    each; under userbuffers the column-wise copy in a second all-gather, linear.py:777-805): 2 bytes and 2/32 an
    element, a little over the 16-bit gather's."""
    if x.fp8 not in BLOCK_SCALED:
        return gather_bytes_share(x)
    both = 2.0 * (C.FP8_WEIGHT_COPY_BYTES + C.FP8_BLOCK_SCALE_BYTES_PER_ELEMENT) / C.BYTES_PER_ACTIVATION
    return np.where(_quantised_gathers(x), both, 1.0)


def tp_gather_shares(group: coll.Groups, act: np.ndarray, *shares: np.ndarray) -> tuple[np.ndarray, ...]:
    """Seconds of one TP all-gather of `act` x share bytes, for each of `shares` (`gather_bytes_share`,
    `grad_gather_bytes_share`), as a share of a 16-bit all-reduce of `act`: 1/2 at 16 bits, nearer 1/4 where it
    gathers FP8; bandwidth and latency both priced by the group's collectives, the 16-bit reduce-scatter once."""
    if not any(np.any(share != 1.0) for share in shares):
        return tuple(np.full_like(np.asarray(act, dtype=np.float64), 0.5) for _ in shares)
    rs = np.maximum(group.reduce_scatter(act), 1e-30)
    return tuple(np.where(share != 1.0, 0.5 * group.reduce_scatter(act * share) / rs, 0.5) for share in shares)


def column_backward(x: Ctx, all_reduce_s: np.ndarray, gather_s: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per micro-batch: (seconds of the column-parallel linears' backward collectives per dense layer, what of them
    their own GEMMs cover per dense and per MoE layer, and the all-reduces' worth of sequence-parallel re-gathers
    among them, 1 or 0 per layer).

    Megatron's column-parallel linear launches its input gradient's collective and then computes its weight
    gradient (Megatron-LM megatron/mpu/layers.py at 2755bcb8, 2022-06: `LinearWithGradAccumulationAndAsyncCommunication
    .backward`; Megatron-Core tensor_parallel/layers.py `allreduce_dgrad`; Transformer Engine's Linear likewise):
    without sequence parallelism the all-reduce, up to the seconds of its wgrad GEMM (the forward GEMM's shape).
    With it, the linear first gathers its saved input shard again beside its input-gradient GEMM (Korthikanti et
    al. 2022 §4.2.2: the shard is what it keeps), then reduce-scatters the input gradient beside its weight-gradient
    GEMM: two half all-reduces, each up to one GEMM; `sp_saves_gathered_inputs` keeps the gathered input and has no
    re-gather.  Two such linears per dense layer (the attention's column-parallel projections, the MLP's
    up-projection); an MoE layer keeps the attention's and, where it has one, its shared expert's."""
    zero = np.zeros_like(x.tokens)
    w, tokens, tp = x.w, x.tokens, x.tp
    sp = x.sp_shard > 1
    half = all_reduce_s * 0.5
    regather = half if gather_s is None else gather_s  # an all-gather: 1 byte an element under FP8 (tp_term)
    regathers = sp & (not x.recipe.sp_saves_gathered_inputs)
    # under SP: the reduce-scatter, and the re-gather where the shard is kept
    per_linear = np.where(sp, half + np.where(regathers, regather, 0.0), all_reduce_s)

    def hidden(gemm_s):
        return np.where(sp, np.minimum(half, gemm_s) + np.where(regathers, np.minimum(regather, gemm_s), 0.0),
                        np.minimum(all_reduce_s, gemm_s))

    attn = hidden(sum((gemm_time(tokens, n / tp, k, 1, x.gemm) for n, k, split in w.attn_gemms if split == 1), zero))

    def up_projection(ffn: float):
        return hidden(gemm_time(tokens, w.mlp_up * ffn / tp, w.hidden, 1, x.gemm)) if ffn else zero

    live = x.b.tp > 1
    return (np.where(live, 2.0 * per_linear, 0.0),
            np.where(live, attn + up_projection(w.dense_ffn), 0.0),
            np.where(live, attn + up_projection(w.shared_ffn_total), 0.0),
            np.where(live & regathers, 1.0, 0.0))


@dataclass(frozen=True)
class CpTerm:
    """Context parallelism: K and V of the whole sequence gathered (around the ring, overlapped with the
    attention core; or in one exposed all-gather, Llama 3 §3.3.2), dK/dV reduce-scattered back; or Ulysses'
    all-to-alls over heads, exposed (ulysses_bytes)."""

    exposed_s: np.ndarray
    total_s: np.ndarray
    bytes_per_layer: np.ndarray


def ulysses_bytes(x: Ctx) -> np.ndarray:
    """Bytes one rank's Ulysses all-to-alls carry per layer per direction: its sequence shard of Q and of the
    attention output (heads / tp wide) and of K and V: kv_dim / tp per token, or, where the K/V heads are fewer than
    tp x cp ranks, the K/V heads each rank ends with replicated, cp x kv_dim / kv_heads (Arctic Long Sequence
    Training repeats them, deepspeed/runtime/sequence_parallel/ulysses_sp.py; Transformer Engine's a2a refuses that
    count: cost.rules cp_a2a_heads)."""
    w = x.w
    kv = x.cp * w.kv_dim / np.minimum(x.tp * x.cp, w.kv_heads)
    return x.tokens * ((w.q_dim + w.out_dim) / x.tp + kv) * C.BYTES_PER_ACTIVATION


def cp_term(x: Ctx, core_fwd_s: np.ndarray) -> CpTerm:
    recompute_core = np.maximum(x.module(M.CORE_ATTN), x.full)
    group = coll.Groups(x.levels, x.b.tp, x.b.cp)
    if x.recipe.cp_comm_type is CpCommType.A2A:
        # Q, K, V to head shards before the core and the output back after, in the forward, the backward (their
        # gradients the other way) and each recomputed forward (on the share of layers fully recomputed), none of it
        # beside compute (Jacobs 2023 §3); four calls a pass, one per tensor (deepspeed/sequence/layer.py
        # DistributedAttention), so four latencies
        passes = 2.0 + np.maximum(x.module(M.CORE_ATTN), x.full * x.full_layers_share)
        sent = ulysses_bytes(x)
        net = C.NETWORK_A2A_EFFICIENCY["alltoall"]
        one = group.all_to_all(sent, 1.0 / net, 1.0 / C.CP_A2A_EFFICIENCY)
        one = one + 3.0 * group.all_to_all(np.zeros_like(sent))  # the latency of the three other calls
        total = one * passes
        return CpTerm(exposed_s=total, total_s=total, bytes_per_layer=np.where(x.b.cp > 1, sent * passes, 0.0))
    # gathered K and V of the sequence; KV heads are replicated across TP ranks beyond their count
    kv_full = x.tokens * x.cp * x.w.kv_dim / np.minimum(x.tp, x.w.kv_heads) * C.BYTES_PER_ACTIVATION
    fwd = group.reduce_scatter(kv_full)
    # torchtitan's per-op checkpointing keeps the attention output but reruns the K/V all-gather (flex attention's
    # cplib::flex_cp_allgather is not among the ops it saves), with no attention core to hide behind
    regather = fwd * x.module(M.PER_OP)
    total = fwd * (3.0 + recompute_core) + regather
    if x.recipe.cp_comm_type is CpCommType.ALL_GATHER or x.recipe.cuda_launch_blocking:
        # gathered before the core starts, reduce-scattered after it ends: nothing hides it (Llama 3 §3.3.2);
        # under blocking launches no exchange runs beside the core either
        exposed = total
    else:  # ring: each hop hides behind the attention of the block before
        exposed = (np.maximum(fwd - core_fwd_s, 0.0) * (1.0 + recompute_core)
                   + np.maximum(2.0 * fwd - core_backward_factor(x) * core_fwd_s, 0.0) + regather)
    return CpTerm(exposed_s=exposed, total_s=total,
                  bytes_per_layer=np.where(x.b.cp > 1, kv_full * (3.0 + x.full + x.module(M.PER_OP)), 0.0))


@dataclass(frozen=True)
class EpTerm:
    """MoE dispatch and combine of one MoE layer per micro-batch under one dispatcher."""

    total_s: np.ndarray
    """All-to-all time (forward and backward, and recompute forwards) plus the explicit permutes."""
    forward_s: np.ndarray
    """The forward dispatch + combine alone."""
    sms: int
    """SMs its kernels hold while they run."""
    bytes_per_layer: np.ndarray


def distinct_targets(bins: np.ndarray | float, draws: float) -> np.ndarray:
    """Expected distinct bins hit by `draws` uniform picks among `bins` (top-k routing over ranks or
    nodes): bins * (1 - (1 - 1/bins)^draws)."""
    bins = np.maximum(np.asarray(bins, dtype=np.float64), 1.0)
    return bins * (1.0 - (1.0 - 1.0 / bins) ** draws)


def ep_term(x: Ctx, dispatcher: Dispatcher) -> EpTerm:
    w = x.w
    zero = np.zeros_like(x.tokens)
    if not w.num_experts:
        return EpTerm(zero, zero, 0, zero)
    group = coll.Groups(x.levels, x.b.etp, x.b.ep)
    load = x.expert_load
    k = float(w.top_k)
    copies = x.tokens / x.tp * k * w.hidden * C.BYTES_PER_ACTIVATION * load  # one copy per routed expert
    fwd_dispatch = 0.5 if x.recipe.dispatch_fp8 and x.fp8 is not None else 1.0  # FP8 dispatch needs an FP8 recipe
    recompute_fwd = x.full * x.full_layers_share + x.module(M.MOE)
    ops = (fwd_dispatch + 1.0) * (1.0 + recompute_fwd) + 2.0
    ranks_per_domain = group.within[group.inverse, 0]
    domains = x.ep / np.maximum(ranks_per_domain, 1.0)
    # group-limited routing (DeepSeek-V3 §2.1.2): whole expert groups per node -> at most M nodes per token
    experts_per_domain = (w.num_experts / x.ep) * ranks_per_domain
    whole_groups = (experts_per_domain >= w.num_experts / w.num_expert_groups) & (w.num_expert_groups > 1)
    # a token picks its experts inside its groups_per_token groups, so it reaches at most that many domains
    nodes_per_token = np.where(whole_groups, distinct_targets(np.minimum(w.groups_per_token, domains), k),
                               distinct_targets(domains, k))
    if dispatcher is Dispatcher.ALLTOALL:
        # NCCL all-to-all sends a copy per routed expert: group-limited routing bounds the nodes a token
        # reaches, not its copies, so nothing is saved
        beyond = inside = 1.0
        permute = x.tokens / x.tp * k * w.hidden * C.PERMUTE_BYTES_PER_ELEMENT * load / x.hbm_bw
        if not x.recipe.moe_fusions:  # the unfused permute kernel (TE PR 1927: up to 10x, write-up §2.1.1)
            permute = permute * C.UNFUSED_PERMUTE_SLOWDOWN
    elif dispatcher is Dispatcher.ALLGATHER:
        # every rank gathers every token of the group and keeps its own: ep copies of the tokens, not k
        beyond = inside = x.ep / k
        permute = zero
    else:
        # DeepEP / HybridEP: once per destination domain over the network, once per destination GPU inside
        # (DeepEP normal kernels; DeepSeek-V3 §3.2.2); their kernels fuse the global permute
        beyond = nodes_per_token / k
        inside = distinct_targets(np.minimum(x.ep, ranks_per_domain), k) / k
        permute = zero
    eff = C.A2A_EFFICIENCY[dispatcher.value]
    if x.topo.cluster.scale_up.size > x.topo.cluster.gpus_per_node:  # NVLink across hosts (GB200 NVL72)
        eff = C.MULTI_HOST_NVLINK_A2A_EFFICIENCY.get(dispatcher.value, eff)
    # the bytes that leave the scale-up domain go at the network's own all-to-all efficiency
    net_eff = C.NETWORK_A2A_EFFICIENCY.get(dispatcher.value, C.A2A_EFFICIENCY[dispatcher.value])
    one = group.all_to_all(copies, beyond / net_eff, inside / eff)
    total = one * ops + permute * (1.0 + recompute_fwd / 2.0)
    forward = one * (fwd_dispatch + 1.0)
    sent = copies * np.maximum(beyond, inside) if dispatcher is not Dispatcher.ALLTOALL else copies
    return EpTerm(total_s=np.where(x.b.ep > 1, total, 0.0), forward_s=np.where(x.b.ep > 1, forward, 0.0),
                  sms=C.DISPATCHER_SMS[dispatcher.value],
                  bytes_per_layer=np.where(x.b.ep > 1, sent * ops, 0.0))


def ep_exposed(x: Ctx, ep: EpTerm, lc: LayerCompute, overlap: bool) -> tuple[np.ndarray, np.ndarray]:
    """(exposed seconds, compute slowdown seconds) of one MoE layer's all-to-alls per micro-batch.

    With 1F1B A2A overlap (`--overlap-moe-expert-parallel-comm`) one micro-batch's dispatch/combine runs
    beside another's compute: a share hides, bounded by that compute; DualPipe hides all of it behind
    the paired chunk (DeepSeek-V3 §3.2.1).  Hidden communication slows the compute beside it by the SMs
    its kernels hold (DeepEP/HybridEP) or by the generic overlap slowdown (NCCL)."""
    dualpipe = x.recipe.pipeline_schedule is PipelineSchedule.DUALPIPE
    if dualpipe:
        share = 1.0
    elif overlap:
        share = C.EP_OVERLAP_HIDDEN * (1.0 - unpaired_share(x))
    else:
        return ep.total_s, np.zeros_like(ep.total_s)
    hidden = np.minimum(share * ep.total_s, lc.moe_s)
    sms = x.topo.accelerator.num_sms
    if dualpipe and ep.sms:
        # DualPipe gives the dispatch kernels their SMs for the whole overlapped forward-and-backward chunk
        # (DeepSeek-V3 §3.2.2: 20 of 132 SMs set aside for communication), so the MoE layer's compute runs on
        # the rest: t * sms / (num_sms - sms) more, whether or not bytes are moving
        return ep.total_s - hidden, lc.moe_s * ep.sms / (sms - ep.sms)
    slow = ep.sms / sms if ep.sms else x.overlap_slowdown
    return ep.total_s - hidden, slow * hidden


def unpaired_share(x: Ctx) -> np.ndarray:
    """Share of a step's MoE passes (forward or backward of one micro-batch's model chunk) that the 1F1B A2A overlap
    has no other pass to pair with, on the pipeline's first rank (the one with the longest warm-up).  Megatron-Core's
    combined 1F1B runs one micro-batch's forward beside another's backward (pipeline_parallel/combined_1f1b.py: "The
    forward step for the first microbatch is executed alone, no a2a overlapping", and the last backward likewise),
    so the warm-up forwards and the cool-down backwards run theirs exposed: without a pipeline the first forward and
    the last backward, 2 of 2 m passes; under 1F1B the pp - 1 warm-up forwards and as many cool-down backwards; under
    interleaving the (pp - 1) x 2 + (vpp - 1) x pp warm-up chunk forwards (schedules.py
    get_pp_rank_microbatches) and as many backwards, of m x vpp each."""
    pp, vpp, m = x.pp, x.vpp, np.maximum(x.m, 1.0)
    warmup = np.where(vpp > 1, (pp - 1) * 2 + (vpp - 1) * pp, np.maximum(pp - 1, 1))
    return np.minimum(warmup / (m * vpp), 1.0)


@dataclass(frozen=True)
class PpTerm:
    """Point-to-point activations between stages: b s h / t per boundary with TP scatter/gather
    (PTD-P §4.1), forward and backward, v times under interleaving (PTD-P §2.2.2).  Megatron pairs each send
    with a receive (two transfer times per micro-batch); blocking sends and receives one after another
    (`pipeline_p2p_blocking`) take four on a stage with neighbours on both sides.  The pace is a middle stage's;
    a two-stage pipeline without interleaving has none, and each of its stages makes one paired call per
    micro-batch (Megatron's 1F1B: the first stage `send_forward_recv_backward`, the last
    `send_backward_recv_forward`), the two directions at once: one transfer time, the longer one's.  Under
    `pipeline_sends_mask` each activation transfer carries GPT-NeoX's s x s mask too."""

    per_microbatch_s: np.ndarray
    bytes_per_step: np.ndarray
    bubble_credit_s: np.ndarray
    """Transfer seconds the bubble does not run at the micro-batch pace: DeepSpeed's lock-step `TrainSchedule`
    with blocking sends (no interleaving) takes 4 m + 2 (p - 4) transfers in all, not the 4 (m + p - 1) that
    (p - 1) micro-batch times of a middle stage's pace hold, so (2 p + 4) transfers less; at p = 2, 2 m, not
    2 (m + 1) (the schedule simulated in tests/test_deepspeed_schedule.py, at every forward:backward ratio);
    0 otherwise."""
    forward_transfer_s: np.ndarray
    """One activation transfer between neighbouring stages (with its mask, where sent)."""
    backward_transfer_s: np.ndarray
    """One gradient transfer."""


def pp_term(x: Ctx) -> PpTerm:
    act = x.tokens * x.w.hidden * C.BYTES_PER_ACTIVATION
    # each TP rank sends its 1/tp share: the sequence-parallel shard, or a scatter-gather / partitioned send
    # (DeepSpeed's engine, Megatron-LM before Megatron-Core); without either the whole tensor.  Told whole, a rank
    # sends the tensor it holds, unpartitioned: the whole activation, or under sequence parallelism its own shard
    r = x.recipe
    sp = x.b.sp.astype(bool)
    share = np.where(sp | r.pipeline_p2p_scatter, x.tp, 1.0)
    held = act / np.where(sp, x.tp, 1.0)
    forward = held if r.pipeline_p2p_whole else act / share
    backward = held if (r.pipeline_p2p_whole or r.pipeline_grads_whole) else act / share
    pair = coll.Groups(x.levels, x.b.tp * x.b.cp * x.b.dp, x.b.pp, pair=True)
    # a middle stage receives the activation, sends it on, receives the gradient and sends it back: paired,
    # each receive runs beside a send; blocking, all four run in turn (an end stage has one neighbour: two)
    turns = np.where(r.pipeline_p2p_blocking & (x.b.pp > 2), 2.0, 1.0)
    # interleaving (vpp > 1) sends from the last stage's chunk back to the first stage's next chunk: a ring;
    # DualPipe's two directions run along the chain
    wrap = (x.vpp > 1) & (r.pipeline_schedule is not PipelineSchedule.DUALPIPE)
    fwd_s, bwd_s = pair.p2p(forward, wrap), pair.p2p(backward, wrap)
    # a scattered share is all-gathered over the TP group on arrival, before the stage computes on it (a
    # sequence-parallel shard is the tensor the layer takes): Megatron-LM gathers each received activation and
    # gradient after `_communicate` (6985e58938 megatron/p2p_communication.py:132-141); DeepSpeed's engine gathers
    # the received activation (0.19.8 runtime/pipe/engine.py:708-715), and before the backward its own output,
    # whose data it dropped after sending the share (:1166-1175, or :812-820 with partitioned gradients), and a
    # partitioned gradient (:827-833): one gather forward, one or two backward
    if not r.pipeline_p2p_whole:
        scattered = r.pipeline_p2p_scatter & ~sp & (x.b.tp > 1)
        if np.any(scattered):
            gather = np.where(scattered, coll.Groups(x.levels, np.ones_like(x.b.tp), x.b.tp).reduce_scatter(act), 0.0)
            engine_restores = 1.0 if r.pipeline_p2p_blocking else 0.0  # DeepSpeed's PipelineEngine
            fwd_s = fwd_s + gather
            bwd_s = bwd_s + gather * ((0.0 if r.pipeline_grads_whole else 1.0) + engine_restores)
    mask = 0.0
    if r.pipeline_sends_mask:
        # GPT-NeoX's [1, 1, s, s] mask, cast to 16 bits, goes whole from every TP rank with each activation, a
        # blocking send of its own, with its casts and copies on either side
        mask = float(x.train.seq_len) ** 2
        fwd_s = fwd_s + pair.p2p(np.full_like(fwd_s, mask * C.BYTES_PER_ACTIVATION), wrap) \
            + mask * C.MASK_COPY_BYTES_PER_TRANSFER / x.hbm_bw
    # two end stages and no chunks between them: one paired exchange, each direction on its own half of the link
    ends_only = (x.b.pp == 2) & (x.vpp == 1) & (not r.pipeline_p2p_blocking)
    per_mb = np.where(x.b.pp > 1, np.where(ends_only, np.maximum(fwd_s, bwd_s), turns * x.vpp * (fwd_s + bwd_s)),
                      0.0)
    # in pairs of one activation and one gradient transfer: (p + 2) of them, one at p = 2
    lock_step = r.pipeline_p2p_blocking & (x.b.pp > 1) & (x.vpp == 1)
    credit = np.where(lock_step, np.where(x.b.pp > 2, x.b.pp + 2.0, 1.0) * (fwd_s + bwd_s), 0.0)
    return PpTerm(per_microbatch_s=per_mb,
                  bytes_per_step=np.where(x.b.pp > 1, (forward + mask * C.BYTES_PER_ACTIVATION + backward) * x.vpp
                                          * x.m, 0.0),
                  bubble_credit_s=credit, forward_transfer_s=np.broadcast_to(fwd_s, per_mb.shape),
                  backward_transfer_s=np.broadcast_to(bwd_s, per_mb.shape))


def pp_exposed_per_microbatch(x: Ctx, pp: PpTerm, layer_s: np.ndarray) -> np.ndarray:
    """Pipeline transfer seconds per micro-batch that add to a stage's time.  Under `pp_comm_overlap` and an
    interleaved schedule, each activation transfer runs beside one chunk's forward and each gradient transfer beside
    one chunk's backward (Megatron's `overlap_p2p_comm`: a chunk's send and the next receive are posted after its
    forward and waited before the pass that needs them, core_r0.8.0 schedules.py:932-1009), so in the steady state
    only what outlasts that chunk shows (the warm-up and cool-down: `pp_ramp_s`); a chunk's forward is a third of its
    time (backward twice the forward), a quarter under full recompute (the backward reruns it).  `layer_s`: one
    layer's forward, backward and recompute per micro-batch."""
    overlap = _p2p_overlapped(x)
    if not np.any(overlap):
        return pp.per_microbatch_s
    return np.where(overlap, np.minimum(x.vpp * _left_per_chunk(x, pp, layer_s), pp.per_microbatch_s),
                    pp.per_microbatch_s)


def pp_ramp_s(x: Ctx, pp: PpTerm, layer_s: np.ndarray) -> np.ndarray:
    """Step seconds of overlapped pipeline transfers that the interleaved schedule's warm-up and cool-down put on
    the critical path, beyond what `pp_exposed_per_microbatch` charges every chunk.

    Megatron-Core's interleaved 1F1B runs micro-batches in groups of pp (schedules.py `get_model_chunk_id`: chunk
    (k mod pp v) // pp), so a micro-batch's next chunk on the first rank waits for it to pass all pp ranks: pp
    chunk forwards and pp transfers, the wrap from the last rank included, while the first rank has only the
    group's pp chunk forwards to run.  In the 1F1B steady state a backward runs between forwards and hides the
    transfer; in the warm-up (the first rank's (pp - 1) x 2 + (vpp - 1) x pp chunk forwards, all of them where m is
    pp: `unpaired_share`) nothing does, so each warm-up forward waits one activation transfer, and each cool-down
    backward one gradient transfer.  Checked against a step-by-step simulation of that schedule
    (tests/test_interleaved_schedule.py).  Megatron's interleaved schedule only: zero-bubble, DualPipe, and
    blocking sends are priced as before."""
    overlap = _p2p_overlapped(x) & (x.recipe.pipeline_schedule is PipelineSchedule.ONE_F_ONE_B)
    if not np.any(overlap):
        return np.zeros_like(pp.per_microbatch_s)
    ramp_chunks = unpaired_share(x) * np.maximum(x.m, 1.0) * x.vpp
    waited = pp.forward_transfer_s + pp.backward_transfer_s - _left_per_chunk(x, pp, layer_s)
    return np.where(overlap, ramp_chunks * waited, 0.0)


def _p2p_overlapped(x: Ctx) -> np.ndarray:
    """Candidates whose pipeline transfers run beside chunk compute (Megatron's `overlap_p2p_comm`, interleaved)."""
    # (blocking sends, DeepSpeed's PipelineEngine, and DualPipe's own schedule are not Megatron's overlapped pairs)
    return (x.recipe.pp_comm_overlap and not x.recipe.pipeline_p2p_blocking
            and x.recipe.pipeline_schedule is not PipelineSchedule.DUALPIPE) & (x.b.pp > 1) & (x.vpp > 1)


def _left_per_chunk(x: Ctx, pp: PpTerm, layer_s: np.ndarray) -> np.ndarray:
    """Transfer seconds per chunk (one activation, one gradient) that outlast the chunk's forward and backward."""
    chunk_s = layer_s * np.maximum(x.w.num_layers / (x.pp * x.vpp), 1.0)
    forward_s = chunk_s / (3.0 + x.full * x.full_layers_share)  # a full recompute adds one forward to the backward
    return (np.maximum(pp.forward_transfer_s - forward_s, 0.0)
            + np.maximum(pp.backward_transfer_s - (chunk_s - forward_s), 0.0))
