"""Compute term: GPU seconds of one layer for one micro-batch on one rank, forward + backward (+ the
forwards recompute adds), by kind of layer.

GEMMs at their sharded shapes (roofline at MAMF times shape efficiency, cost.compute), the attention
core, memory-bound element-wise work, and under FP8 the quantisation traffic of every FP8 GEMM input.
Router, attention core, LM head and embedding stay 16-bit under FP8 (Megatron-Core DeepSeek-V3 GB200
write-up §1 item 1); the LM head runs FP8 where the recipe converts it (fp8_lm_head).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost import constants as C
from placement.cost.compute import (
    attention_core_time,
    cross_entropy_time,
    elementwise_time,
    gemm_time,
    unfused_attention_time,
)
from placement.cost.constants import NORM_BYTES_PER_HIDDEN
from placement.cost.context import Ctx, expert_load, expert_w1_rerun
from placement.cost.memory import norms_recomputed
from placement.specs.recipe import CpCommType, EinsumDispatch, Fp8Recipe
from placement.specs.recipe import RecomputeModule as M
from placement.specs.training import AttentionKernel

ACTIVATION_BYTES_PER_ELEMENT = 6.0
"""SwiGLU/GELU forward per output element: read gate and up (2 + 2), write 2: what `moe_act` reruns."""


# Eager element-wise ops a framework runs for some models' extras (HBM bytes per element, 16-bit), read from
# Megatron-Core 0.15 (commit 0d8e0714, the 25.11 container) as the GPT-OSS recipes run it; each op reads
# its inputs and writes its output once.  The fused path of each is already in ELEMENTWISE_BYTES_PER_HIDDEN
# or the GEMM epilogue; these are the bytes on top.
CLAMP_FORWARD_BYTES = 8.0
"""Per up-projection output element: `x_glu.clamp(max=c)` and `x_linear.clamp(-c, c)` read and write half of it
each, `torch.cat` reads and writes all of it, before the fused activation
(`fusions/fused_bias_geglu.py` `weighted_bias_quick_geglu_impl`): 2 + 2 + 4 bytes."""
CLAMP_BACKWARD_BYTES = 10.0
"""Backward of the same: each clamp reads the gradient and its input and writes a gradient (6), the chunk's
backward concatenates the two halves (4)."""
EXPERT_BIAS_FORWARD_BYTES = 12.0
"""Per down-projection output element of a routed expert: `t + b * p` per local expert writes b*p (2), reads t
and it and writes the sum (6), then `torch.cat` over the experts reads and writes it (4)
(`transformer/moe/experts.py` `TEGroupedMLP._apply_bias`, a Python loop over the local experts)."""
EXPERT_BIAS_BACKWARD_BYTES = 16.0
"""Its backward: grad * p and its sum for the bias (6), grad * b and its row sum for the probability (6), the
split's backward concatenating the expert gradients (4)."""
ROPE_UNFUSED_BYTES = 20.0
"""Per query/key element, forward and again backward: `t * cos`, `rotate_half` (negate half, cat), `* sin` and
the sum (`models/common/embeddings/rope_utils.py` `_apply_rotary_pos_emb_bshd`): 4 + 2 + 4 + 4 + 6 bytes,
where the fused kernel reads and writes once (4, counted with YaRN off as ordinary RoPE is)."""
PARTIAL_ROPE_FORWARD_BYTES = 4.0
"""Per query/key element, forward, when RoPE rotates only part of each head (GPT-NeoX `rotary_pct` < 1): the
rotated and the passed-through slices are concatenated back into one tensor, reading and writing all of it
(EleutherAI/gpt-neox megatron/model/transformer.py ParallelSelfAttention, `torch.cat((query_layer, query_pass),
dim=-1)`, and the same for the key)."""
PARTIAL_ROPE_BACKWARD_BYTES = 14.0
"""Its backward: each of the two slices' gradient is a zero-filled full-size tensor with the slice copied in
(PyTorch `slice_backward`: 2 + 2 per element for the two fills, 4 for the copies) and autograd sums the two
(read 2 + 2, write 2)."""
BDA_UNFUSED_BYTES = 4.0
"""Per hidden element, forward and backward: the projection bias added on its own before the residual add
(`bias_dropout_fusion=False`, which TEGroupedMLP requires with biased experts)."""
KERNELS_PER_EXPERT_BIAS = 2
"""Kernels the bias loop launches per local expert in a forward (multiply, add)."""


@dataclass(frozen=True)
class EagerOps:
    """Seconds per layer per micro-batch of the model's eager extras (0 when `fused_model_ops`)."""

    attn_s: np.ndarray
    """YaRN RoPE, a partial RoPE's concatenation and the attention's unfused bias add, forward and backward (and a
    full recompute's forward)."""
    mlp_s: np.ndarray
    """A dense MLP's clamp and its output's unfused bias add, forward and backward."""
    experts_s: np.ndarray
    """The routed experts' clamp and output-bias loop, forward and backward."""
    act_forward_s: np.ndarray
    """The clamp's forward alone (what `moe_act` recompute reruns)."""
    mlp_forward_s: np.ndarray
    """A dense MLP's clamp forward alone (what `mlp` recompute reruns)."""


def eager_model_ops(x: Ctx, pairs: np.ndarray | float = 0.0) -> EagerOps:
    """The HBM time of the element-wise ops a framework runs unfused for the model's extras (YaRN RoPE, a partial
    RoPE's concatenation, clamped SwiGLU, expert biases, bias-dropout-add), priced when the recipe says they are not
    fused.  Plain RoPE's rotation counts as fused: Megatron-Core and Transformer Engine fuse it, and GPT-NeoX's fp16
    path runs it as one TorchScript kernel (megatron/model/positional_embeddings.py `apply_rotary_pos_emb` under
    the GPU fuser transformer.py turns on).  `pairs` is the token-expert pairs the busiest rank computes."""
    w, tokens, tp = x.w, x.tokens, x.tp
    zero = np.zeros_like(tokens)
    if x.recipe.fused_model_ops:
        return EagerOps(zero, zero, zero, zero, zero)
    full = x.full * x.full_layers_share  # full recompute reruns every forward
    # MLA's YaRN has its own fused kernel (Megatron-Core fusions/fused_mla_yarn_rope_apply.py): nothing added
    qk = (w.q_dim + w.kv_dim / 2) / tp if w.rope_share and not w.mla_up_width else 0.0  # query + key per token
    rotation = ROPE_UNFUSED_BYTES * w.rope_share if w.yarn_rope else 0.0
    partial = w.rope_share < 1.0
    rope_fwd = qk * (rotation + (PARTIAL_ROPE_FORWARD_BYTES if partial else 0.0))
    rope_bwd = qk * (rotation + (PARTIAL_ROPE_BACKWARD_BYTES if partial else 0.0))
    bda = w.hidden / x.sp_shard * BDA_UNFUSED_BYTES if w.linear_bias else 0.0
    attn = tokens * ((rope_fwd + bda) * (1.0 + full) + rope_bwd + bda) / x.hbm_bw
    # a dense MLP's output bias goes through its own bias-dropout-add too (GPT-NeoX transformer.py: one after the
    # attention, one after the MLP)
    dense_bda = tokens * bda * (2.0 + full) / x.hbm_bw
    clamp_fwd = CLAMP_FORWARD_BYTES if w.swiglu_clamp else 0.0
    clamp_bwd = CLAMP_BACKWARD_BYTES if w.swiglu_clamp else 0.0
    mlp_elems = tokens * w.mlp_up * w.dense_ffn / tp
    mlp_fwd = mlp_elems * clamp_fwd / x.hbm_bw
    mlp = mlp_fwd * (1.0 + full) + mlp_elems * clamp_bwd / x.hbm_bw + dense_bda
    up_elems = pairs * w.mlp_up * w.expert_ffn / x.etp
    act_fwd = up_elems * clamp_fwd / x.hbm_bw
    bias_fwd = pairs * w.hidden * EXPERT_BIAS_FORWARD_BYTES / x.hbm_bw if w.linear_bias else 0.0
    bias_bwd = pairs * w.hidden * EXPERT_BIAS_BACKWARD_BYTES / x.hbm_bw if w.linear_bias else 0.0
    experts = (act_fwd + bias_fwd) * (1.0 + full) + up_elems * clamp_bwd / x.hbm_bw + bias_bwd
    b = np.broadcast_to
    return EagerOps(b(attn, tokens.shape), b(mlp, tokens.shape), b(experts, tokens.shape),
                    b(act_fwd, tokens.shape), b(mlp_fwd, tokens.shape))


@dataclass(frozen=True)
class LayerCompute:
    """Seconds per layer per micro-batch (fwd + bwd + recompute) on one rank, per candidate."""

    dense_s: np.ndarray
    """A dense layer: attention block and dense MLP."""
    moe_s: np.ndarray
    """An MoE layer: attention block, router, routed experts (at the busiest rank's load), shared experts."""
    head_s: np.ndarray
    """LM head and cross-entropy (forward and backward, 16-bit)."""
    mtp_s: np.ndarray
    """One MTP layer: its projection, one transformer layer and its own LM head and loss."""
    attn_s: np.ndarray
    """The attention block alone (part of both layer kinds)."""
    experts_s: np.ndarray
    """Routed expert GEMMs and their quantisation alone (part of moe_s)."""
    moe_forward_s: np.ndarray
    """One MoE layer's forward alone (what `moe` recompute reruns and what hides an A2A)."""
    core_forward_s: np.ndarray
    """The attention core's forward alone (what ring attention's KV exchange hides behind)."""


def _gemm(x: Ctx, m, n, k, count=1.0):
    """GEMM time at the training precision plus, under FP8, quantising its activation input (m x k).
    Weights are cast once per step and cached across micro-batches (Transformer Engine
    `is_first_microbatch`), so they add nothing per micro-batch."""
    t = gemm_time(m, n, k, count, x.gemm)
    if x.fp8 is not None:
        t = t + count * np.asarray(m) * k * quant_bytes_per_element(x) / x.hbm_bw
    return t


def fp8_weight_recasts(x: Ctx, weight_elements, recompute) -> np.ndarray | float:
    """Seconds per micro-batch of casting a block's 16-bit weights (`weight_elements` on this rank) to FP8 where
    the recipe recasts them every pass (fp8_recasts_weights: torchao's Float8Linear and MXFP8Linear keep no FP8
    copy across micro-batches): once for each forward (`recompute` more under recompute) and once for the
    backward's input gradient (constants.FP8_WEIGHT_CAST_BYTES_PER_ELEMENT).  Nothing under Transformer Engine,
    which casts once a step (`_gemm`)."""
    if x.fp8 is None or not x.recipe.fp8_recasts_weights:
        return 0.0
    casts = 2.0 + recompute
    return weight_elements * C.FP8_WEIGHT_CAST_BYTES_PER_ELEMENT[x.fp8.value] * casts / x.hbm_bw


def quant_bytes_per_element(x: Ctx) -> float:
    """HBM bytes of quantising one element of an FP8 GEMM's input (FP8_QUANT_BYTES_PER_ELEMENT).  MXFP8 that keeps
    the 16-bit input for backward (recipe fp8_saves_16bit_inputs: torchao's MXFP8Linear) casts it twice, along its
    rows in forward and its columns in backward, reading it each time (MXFP8_REQUANTISED_BYTES_PER_ELEMENT), where
    Transformer Engine casts both ways in one pass."""
    if x.fp8 is Fp8Recipe.MXFP8 and x.recipe.fp8_saves_16bit_inputs:
        return C.MXFP8_REQUANTISED_BYTES_PER_ELEMENT
    return C.FP8_QUANT_BYTES_PER_ELEMENT[x.fp8.value]


def attention_forward(x: Ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(projection GEMMs, attention core, element-wise) of one attention block's forward."""
    w, tokens, tp = x.w, x.tokens, x.tp
    proj = 0.0
    for n, k, split in w.attn_gemms:
        n_loc = n / tp if split == 1 else n
        k_loc = k / tp if split == 2 else k
        proj = proj + _gemm(x, tokens, n_loc, k_loc)
    keys = w.attended_keys(x.train.seq_len)
    if x.recipe.attention_kernel is AttentionKernel.UNFUSED:
        core = unfused_attention_time(tokens, keys, w.num_heads / tp, w.qk_head_dim, w.v_head_dim,
                                      x.gemm_bf16, x.hbm_bw, dropout=w.dropout)
    else:
        acc = x.topo.accelerator
        efficiency = acc.attention_core_efficiency
        if x.recipe.attention_kernel is AttentionKernel.FLASH2 and acc.flash2_attention_efficiency is not None:
            efficiency = acc.flash2_attention_efficiency  # FlashAttention-2 on Hopper (specs.training.AttentionKernel)
        # a fused causal kernel skips the keys above the diagonal, a window's below it too (Workload.causal_keys)
        core = attention_core_time(tokens, w.causal_keys(x.train.seq_len), w.attn_core_dim / tp,
                                   x.gemm_bf16.peak_flops, efficiency)
    elem = elementwise_time(tokens, w.hidden, x.sp_shard, tp, x.hbm_bw, w.dropout)
    return proj, core, elem


def cp_ring_copies(x: Ctx) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds of ring attention's eager copies per layer per micro-batch: zero without
    context parallelism or with the all-gather exchange (constants.CP_RING_COPY_PASSES_*)."""
    w = x.w
    ring = (x.cp > 1) & (x.recipe.cp_comm_type is CpCommType.P2P)
    q_bytes = x.tokens * w.q_dim / x.tp * C.BYTES_PER_ACTIVATION
    kv_bytes = x.tokens * w.kv_dim / np.minimum(x.tp, w.kv_heads) * C.BYTES_PER_ACTIVATION

    def seconds(passes: tuple[float, float]) -> np.ndarray:
        return np.where(ring, x.cp * (passes[0] * q_bytes + passes[1] * kv_bytes) / x.hbm_bw, 0.0)

    return seconds(C.CP_RING_COPY_PASSES_FORWARD), seconds(C.CP_RING_COPY_PASSES_BACKWARD)


def core_backward_factor(x: Ctx) -> float:
    """The attention core's backward in units of its forward: 2.5 for a fused kernel, which recomputes the
    scores (constants.FUSED_ATTENTION_BACKWARD_TO_FORWARD), 2 for an unfused one."""
    if x.recipe.attention_kernel is AttentionKernel.UNFUSED:
        return C.BACKWARD_TO_FORWARD
    return C.FUSED_ATTENTION_BACKWARD_TO_FORWARD


@dataclass(frozen=True)
class PerOpGemm:
    """One projection GEMM of a block as torchtitan runs it, at its local shape."""

    n: np.ndarray | float
    """Output width on this rank (a row-parallel GEMM's is the whole hidden: the partial sums before the
    reduction)."""
    k: np.ndarray | float
    row_parallel: bool
    saved: bool
    """Its output is kept for backward (odd position in the block's count); else it is recomputed."""


def per_op_gemms(x: Ctx) -> tuple[tuple[PerOpGemm, ...], tuple[PerOpGemm, ...], tuple[PerOpGemm, ...]]:
    """(attention, dense MLP, shared experts) projection GEMMs of one block in the order torchtitan's models run
    them, each marked saved or recomputed by torchtitan 0.3.0's per-op policy (RecomputeModule.PER_OP): it counts
    the block's matmuls from 1 and recomputes the even ones.  Attention: one fused wqkv, then wo (every 0.3.0
    model builds its attention with fuse_qkv True: models/common/attention.py FusedQKVLinear), or MLA's down- and
    up-projections then wo (Workload.attn_gemms' order, models/deepseek_v3); the MLP: w1, w3, w2
    (models/common/feed_forward.py `w2(silu(w1(x)) * w3(x))`), or w1, w2 ungated.  A dense block counts its MLP
    after its attention, an MoE block its shared experts (the router's gate is forced to recompute and not
    counted; the routed experts' grouped GEMMs are not matmuls to it).  A biased projection runs as addmm, which
    the policy saves whatever its count and does not count (PyTorch's compute-intensive ops): a model with biased
    linears keeps every projection's output."""
    return _per_op_sequence(x.w, x.tp)


def _per_op_sequence(w, tp) -> tuple[tuple[PerOpGemm, ...], tuple[PerOpGemm, ...], tuple[PerOpGemm, ...]]:
    """`per_op_gemms` at TP degree `tp` (an array per candidate, or 1 for the whole model's FLOPs)."""

    def gemm(n, k, split) -> tuple:
        return (n / tp if split == 1 else (w.hidden if split == 2 else n), k / tp if split == 2 else k, split == 2)

    attn = [gemm(n, k, split) for n, k, split in w.attn_gemms]  # fused QKV and wo, or MLA's in order

    def mlp(ffn: float) -> list[tuple]:
        if not ffn:
            return []
        ups = [gemm(ffn, w.hidden, 1)] * w.mlp_up
        return [*ups, gemm(w.hidden, ffn, 2)]

    def marked(seq: list[tuple], start: int) -> tuple[PerOpGemm, ...]:
        return tuple(PerOpGemm(n, k, row, w.linear_bias or (start + i) % 2 == 1) for i, (n, k, row) in enumerate(seq))

    first = len(attn) + 1
    return marked(attn, 1), marked(mlp(w.dense_ffn), first), marked(mlp(w.shared_ffn_total), first)


def per_op_recompute_flops(w) -> tuple[float, float]:
    """(dense, MoE) layer FLOPs per token that torchtitan's per-op checkpointing recomputes, whole model (the HFU
    numerator): the unsaved projection matmuls, and in an MoE layer the router and the routed experts."""
    attn, mlp, shared = _per_op_sequence(w, 1)

    def redone(gemms) -> float:
        return sum(2.0 * g.n * g.k for g in gemms if not g.saved)

    experts = 2.0 * w.top_k * (w.mlp_up + 1) * w.expert_ffn * w.hidden + 2.0 * w.num_experts * w.hidden
    return redone(attn) + redone(mlp), redone(attn) + redone(shared) + (experts if w.num_experts else 0.0)


def _per_op_recompute(x: Ctx, gemms: tuple[PerOpGemm, ...]) -> np.ndarray | float:
    """Forward seconds of the GEMMs per-op checkpointing recomputes among `gemms`."""
    return sum((_gemm(x, x.tokens, g.n, g.k) for g in gemms if not g.saved), 0.0)


def _projections_forward(x: Ctx, splits: tuple[int, ...]) -> np.ndarray | float:
    """Forward seconds of the attention's projection GEMMs of the given TP splits (Workload.attn_gemms: 0 whole,
    1 column-parallel, 2 row-parallel)."""
    t = 0.0
    for n, k, split in x.w.attn_gemms:
        if split in splits:
            t = t + _gemm(x, x.tokens, n / x.tp if split == 1 else n, k / x.tp if split == 2 else k)
    return t


def _mla_up_forward(x: Ctx) -> np.ndarray:
    """MLA's up-projection GEMMs (column-parallel, K = a LoRA rank): what mla_up_proj recompute reruns."""
    t = 0.0
    if x.w.mla_up_width:
        for n, k, split in x.w.attn_gemms:
            if split == 1 and k < x.w.hidden:
                t = t + _gemm(x, x.tokens, n / x.tp, k)
    return t


def einsum_dispatch_forward(x: Ctx) -> np.ndarray | float:
    """Seconds of one MoE layer's forward dispatch and combine GEMMs where the recipe applies one-hot masks
    (recipe.moe_einsum_dispatch): per group of s tokens, an (E C x s) @ (s x h) and an (s x E C) @ (E C x h) product
    with E C = s k f, f the capacity factor (the routing load where none is set: the fullest expert's share), 16-bit
    (DeepSpeed-MoE `einsum("sec,sm->ecm")`, `einsum("sec,ecm->sm")`, deepspeed/moe/sharded_moe.py; MaxText
    `BSM,BSEC -> EBCM`, layers/moe.py dense_matmul).  The group is the rank's micro-batch or one sequence."""
    mode = x.recipe.moe_einsum_dispatch
    if not x.w.num_experts or mode is EinsumDispatch.NONE:
        return 0.0
    group = x.tokens if mode is EinsumDispatch.MICRO_BATCH else x.tokens / x.mbs
    # (the fullest expert sizes the einsum's capacity at any ep: the recipe's load, not the busiest rank's)
    factor = x.recipe.moe_capacity_factor if x.recipe.moe_capacity_factor is not None else expert_load(x.recipe)
    return gemm_time(group * x.w.top_k * factor, x.w.hidden, group, 2.0 * x.tokens / group, x.gemm_bf16)


def layer_compute(x: Ctx) -> LayerCompute:
    w, tokens, tp, passes = x.w, x.tokens, x.tp, x.passes
    bwd = C.BACKWARD_TO_FORWARD
    proj, core, elem = attention_forward(x)
    core_forwards = 1.0 + np.maximum(x.module(M.CORE_ATTN), x.full * x.full_layers_share)  # with its recompute
    core_passes = core_forwards + core_backward_factor(x)
    norm = tokens * w.hidden * NORM_BYTES_PER_HIDDEN / x.sp_shard / x.hbm_bw
    # `layernorm` recompute reruns only a norm that is a module of its own: MLA's input norm, an MoE layer's pre-MLP
    # norm, every norm where they run unfused; a fused norm-linear keeps its output
    attn_norm_rerun, mlp_norm_rerun, moe_norm_rerun = (norm / 2.0 * rerun for rerun in norms_recomputed(x))
    copies_fwd, copies_bwd = cp_ring_copies(x)
    attn = (proj * passes + core * core_passes + elem * passes
            + _mla_up_forward(x) * x.module(M.MLA_UP_PROJ) + attn_norm_rerun
            + copies_fwd * core_forwards + copies_bwd)
    local = w.num_experts / x.ep if w.num_experts else 1.0
    pairs = tokens * w.top_k * x.etp / tp * x.expert_load if w.num_experts else 0.0
    eager = eager_model_ops(x, pairs)
    attn = attn + eager.attn_s
    per_op = x.module(M.PER_OP)
    op_attn, op_mlp, op_shared = per_op_gemms(x) if per_op is not False else ((), (), ())
    # torchtitan's per-op policy reruns the unsaved matmuls and every element-wise op of the block once
    attn = attn + per_op * (_per_op_recompute(x, op_attn) + elem)
    # MaxText's named-save remat policies: the input or the output projections rerun where their outputs are not
    # saved (JAX reruns what backward needs of the unsaved values)
    attn = attn + _projections_forward(x, (0, 1)) * x.module(M.QKV_PROJ) + _projections_forward(x, (2,)) * x.module(
        M.OUT_PROJ)

    def mlp_forward(ffn: float) -> np.ndarray:
        if ffn == 0:
            return np.zeros_like(tokens)
        return _gemm(x, tokens, w.mlp_up * ffn / tp, w.hidden) + _gemm(x, tokens, w.hidden, ffn / tp)

    # torchao's FP8 layers cast their weights again every pass (fp8_recasts_weights): per-op recompute reruns
    # every other matmul of a block, full recompute all of them
    redo = np.maximum(x.full * x.full_layers_share, 0.5 * per_op)
    attn_weights = sum((n / tp if split == 1 else n) * (k / tp if split == 2 else k) for n, k, split in w.attn_gemms)
    attn = attn + fp8_weight_recasts(x, attn_weights, redo)

    def mlp_weights(ffn: float) -> float:
        return (w.mlp_up + 1.0) * ffn / tp * w.hidden

    def mlp_up_forward(width: float, ffn, rows, count=1.0) -> np.ndarray:
        """The up-projection(s) and the activation function of `count` MLPs of `rows` tokens each, `ffn` wide on
        this rank, of a model whose MLP is `width` wide (0: none): what `mlp_up` reruns."""
        if not width:
            return np.zeros_like(tokens)
        return (_gemm(x, rows, w.mlp_up * ffn, w.hidden, count)
                + count * rows * ffn * ACTIVATION_BYTES_PER_ELEMENT / x.hbm_bw)

    mlp_up = x.module(M.MLP_UP)
    dense_mlp = mlp_forward(w.dense_ffn)
    dense = (attn + mlp_norm_rerun + dense_mlp * (passes + x.module(M.MLP)) + eager.mlp_s
             + (mlp_up_forward(w.dense_ffn, w.dense_ffn / tp, tokens) + eager.mlp_forward_s) * mlp_up
             + eager.mlp_forward_s * x.module(M.MLP)
             + per_op * (_per_op_recompute(x, op_mlp) + eager.mlp_forward_s)
             + fp8_weight_recasts(x, mlp_weights(w.dense_ffn), redo))
    if w.num_experts:
        # `pairs`: the token-expert pairs the busiest rank computes
        per_expert = pairs / local
        ffn = w.expert_ffn / x.etp
        experts_fwd = (_gemm(x, per_expert, w.mlp_up * ffn, w.hidden, local)
                       + _gemm(x, per_expert, w.hidden, ffn, local))
        act_fwd = pairs * ffn * ACTIVATION_BYTES_PER_ELEMENT / x.hbm_bw
        router_fwd = gemm_time(tokens / x.sp_shard, w.num_experts, w.hidden, 1, x.gemm_bf16)
        shared_fwd = mlp_forward(w.shared_ffn_total)
        moe_fwd = experts_fwd + act_fwd + router_fwd + shared_fwd
        moe_block = (moe_fwd * passes
                     + (act_fwd + eager.act_forward_s) * x.module(M.MOE_ACT) + moe_norm_rerun
                     + shared_fwd * x.module(M.SHARED_EXPERTS)
                     + (mlp_up_forward(w.expert_ffn, ffn, per_expert, local) + eager.act_forward_s
                        + mlp_up_forward(w.shared_ffn_total, w.shared_ffn_total / tp, tokens)) * mlp_up
                     + moe_fwd * x.module(M.MOE)
                     # the second up-projection alone where a named-save policy leaves it unnamed (MaxText's
                     # sparse_matmul path: recipe expert_w1_rerun)
                     + _gemm(x, per_expert, ffn, w.hidden, local) * expert_w1_rerun(x)
                     + eager.experts_s
                     # per-op: the router and the routed experts rerun whole, the shared experts' unsaved matmuls
                     + per_op * (experts_fwd + act_fwd + eager.act_forward_s + router_fwd
                                 + _per_op_recompute(x, op_shared))
                     + fp8_weight_recasts(x, local * (w.mlp_up + 1.0) * ffn * w.hidden
                                          + mlp_weights(w.shared_ffn_total),
                                          np.maximum(redo, np.maximum(x.module(M.MOE), per_op))))
        # one-hot dispatch and combine GEMMs (recipe moe_einsum_dispatch): forward one each; backward the dispatch's
        # input gradient, the combine's expert-output and combine-weight gradients; a recompute reruns the forward two
        einsum = einsum_dispatch_forward(x)
        moe_block = moe_block + einsum * (2.5 + x.full * x.full_layers_share + x.module(M.MOE))
        moe_fwd = moe_fwd + einsum
        moe = attn + moe_block
        experts = (experts_fwd + act_fwd) * passes + eager.experts_s
    else:
        moe = dense
        experts = moe_fwd = np.zeros_like(tokens)
    vocab = w.embed_params / w.hidden
    # the head's GEMMs stay 16-bit under FP8 unless the recipe converts it (fp8_lm_head: torchtitan's MXFP8 config)
    head_gemm = (_gemm(x, tokens, vocab / tp, w.hidden) if x.fp8 is not None and x.recipe.fp8_lm_head
                 else gemm_time(tokens, vocab / tp, w.hidden, 1, x.gemm_bf16))
    head = head_gemm * (1.0 + bwd) + cross_entropy_time(tokens, vocab / tp, x.hbm_bw, x.recipe.cross_entropy_fusion)
    if x.recipe.fp8_lm_head:
        head = head + fp8_weight_recasts(x, vocab / tp * w.hidden, 0.0)
    # an MTP module: concat-projection 2h -> h, one transformer layer, its own head and loss (DeepSeek-V3 §2.2)
    mtp_layer = moe if w.num_experts else dense
    mtp = mtp_layer + head + gemm_time(tokens, w.hidden / tp, 2 * w.hidden, 1, x.gemm_bf16) * (1.0 + bwd)
    return LayerCompute(dense_s=dense, moe_s=moe, head_s=head, mtp_s=mtp, attn_s=attn, experts_s=experts,
                        moe_forward_s=attn / passes + moe_fwd, core_forward_s=core)
