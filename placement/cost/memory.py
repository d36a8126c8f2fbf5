"""Memory term: peak bytes on the busiest pipeline rank.

Weights, gradients and optimizer state after ZeRO sharding (16 bytes/param for mixed-precision Adam,
ZeRO §3; 12 with BF16 moments), activations per Korthikanti et al. Table 2 with fused attention, per
recomputed module (Megatron-Core `--recompute-modules`), times the micro-batches in flight on that rank
(1F1B: pp - rank; interleaved: Megatron's warm-up count), logits on the loss stage (and MTP's), FP8
weight copies, ZeRO-3 gather buffers, CUDA-graph pools, and a reserve for the CUDA context and
communication buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost import constants as C
from placement.cost.context import SELECTIVE, Ctx, expert_w1_rerun, over_replicas, priced_zero
from placement.cost.pipeline import StageKinds
from placement.specs.recipe import CudaGraphs, Dispatcher, GradAccumulation, PipelineSchedule
from placement.specs.recipe import RecomputeModule as M
from placement.specs.training import AttentionKernel

MASK_BUILD_BYTES_PER_ELEMENT = 4.0
"""GPT-NeoX builds each micro-batch's causal mask as torch.tril(torch.ones(1, s, s)) in float32 (megatron/utils.py
get_attn_mask): the ones and their lower triangle, 4 bytes each, are alive together."""


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one layer keeps for backward per micro-batch on one rank."""

    dense: np.ndarray
    moe: np.ndarray
    layer_input: np.ndarray
    """What full recompute keeps: the layer's input."""


def loss_head_params(x: Ctx, st: StageKinds) -> np.ndarray:
    """LM-head elements each kind of rank holds: the head on the rank with the loss, and under a tied embedding
    (Workload.tied_head_params) the last pipeline rank's own copy of it, where the embedding is on another rank."""
    return st.loss * (x.w.head_params + x.w.tied_head_params * (1.0 - st.embed)) / x.tp


def layer_activations(x: Ctx) -> LayerActivations:
    """Korthikanti et al. Table 2 per-layer activations; fused (flash) attention keeps no s x s tensor, unfused
    attention keeps its scores unless the attention core is recomputed.

    Replicated across TP unless sequence parallel: the inputs of both norms (4 sbh bytes) and the norm
    outputs feeding the QKV and first MLP GEMMs (4 sbh), plus two 1-byte dropout masks when dropout is
    on.  Sharded by TP: the attention activations (Q, K, V, output; MLA's latents), the MLP
    up-projection outputs and the activation output.  MoE: every token-expert pair keeps its permuted
    input and expert activations.  Under FP8 the saved GEMM inputs are the 1-byte quantised copies
    (Transformer Engine; Megatron-Core MoE README: FP8 halves activation memory); the up-projection
    outputs are 1 byte under `activation_func_fp8_input_store`.  Recomputed modules
    keep nothing of their own.
    """
    w, tokens, tp, h = x.w, x.tokens, x.tp, x.w.hidden
    # bytes of a saved GEMM input, relative to 16-bit: Transformer Engine keeps the FP8 copy, torchao the 16-bit one
    q = 0.5 if x.fp8 is not None and not x.recipe.fp8_saves_16bit_inputs else 1.0
    # the two norms' inputs: the layer's and the residual after the attention, which is not kept where the output
    # projection reruns (`out_proj`: it and the residual add are recomputed)
    norm_in = 4.0 * h - np.where(x.module(M.OUT_PROJ), 2.0 * h, 0.0)
    norm_out_attn, norm_out_mlp, norm_out_moe = (np.where(freed, 0.0, 2.0 * h * q) for freed in norms_recomputed(x))
    dropout = 2.0 * h if w.dropout else 0.0
    # the norms' outputs feed the projections: kept as the sequence shard (Megatron), or gathered whole where the
    # framework saves the projections' gathered inputs (sp_saves_gathered_inputs, torchtitan)
    out_shard = 1.0 if x.recipe.sp_saves_gathered_inputs else x.sp_shard
    rep = (norm_in + dropout) / x.sp_shard + (norm_out_attn + norm_out_mlp) / out_shard
    rep_moe = (norm_in + dropout) / x.sp_shard + (norm_out_attn + norm_out_moe) / out_shard
    attn = (2.0 * w.attn_act_width - np.where(x.module(M.MLA_UP_PROJ), 2.0 * w.mla_up_width, 0.0)
            - np.where(x.module(M.QKV_PROJ), 2.0 * (w.attn_act_width - w.out_dim), 0.0))  # `qkv_proj`: Q, K, V rerun
    if x.recipe.attention_kernel is AttentionKernel.UNFUSED:
        # the s x s scores per head: softmax output (2 bytes), and with dropout its mask (1) and output (2):
        # Korthikanti Table 2's 5 a s^2 b; recomputing the attention core keeps none of them
        per_score = 5.0 if w.dropout else 2.0
        attn = attn + np.where(x.module(M.CORE_ATTN), 0.0, w.num_heads * x.train.seq_len * per_score)
    up_rerun = x.module(M.MLP_UP)  # the up-projections' and the activation's outputs rerun
    mlp_kept = np.where(x.module(M.MLP) | up_rerun, 0.0, 1.0)
    up_b = 1.0 if x.recipe.activation_func_fp8_input_store else 2.0  # bytes of a kept up-projection output
    dense_mlp = (up_b * w.mlp_up + 2.0 * q) * w.dense_ffn * mlp_kept
    dense = tokens * (rep + (attn + dense_mlp) / tp)
    if w.num_experts:
        whole_moe = x.module(M.MOE)
        shared_kept = np.where(x.module(M.SHARED_EXPERTS) | whole_moe | up_rerun, 0, 1)
        shared = (up_b * w.mlp_up + 2.0 * q) * w.shared_ffn_total * shared_kept
        load = x.expert_load
        pairs = tokens * w.top_k * x.etp / tp * load
        ffn = w.expert_ffn / x.etp
        act_out = np.where(x.module(M.MOE_ACT) | up_rerun, 0.0, 2.0 * q * ffn)
        up_out = np.where(up_rerun, 0.0, up_b * w.mlp_up * ffn)
        routed = pairs * (2.0 * q * h + up_out + act_out) * np.where(whole_moe, 0.0, 1.0)
        moe = tokens * (rep_moe + (attn + shared) / tp) + routed
    else:
        moe = dense
    per_op = x.module(M.PER_OP)
    if per_op is not False:
        op_dense, op_moe = _per_op_kept(x)
        dense, moe = np.where(per_op, op_dense, dense), np.where(per_op, op_moe, moe)
    if x.recipe.remat_saves_named_only:
        named = np.asarray(x.b.recompute) == SELECTIVE
        if named.any():
            jax_dense, jax_moe = _named_kept(x)
            dense, moe = np.where(named, jax_dense, dense), np.where(named, jax_moe, moe)
    return LayerActivations(dense=dense, moe=moe, layer_input=tokens * 2.0 * h / x.sp_shard)


def _named_kept(x: Ctx) -> tuple[np.ndarray, np.ndarray]:
    """(dense, MoE) bytes a layer keeps per micro-batch under JAX rematerialization with a named-save policy
    (recipe.remat_saves_named_only, MaxText's remat_policy): the layer's input, which jax.checkpoint keeps as its
    argument, and the named outputs of each module the recompute does not rerun (AI-Hypercomputer/maxtext
    e591f30cb): query_proj, key_proj and value_proj (layers/attentions.py:1323-1325) without `qkv_proj`; the
    attention output and its float32 log-sum-exp, both named context (layers/attention_op.py:2407-2408), without
    `core_attn`; out_proj (attentions.py:1366) without `out_proj`; mlpwi_0 and mlpwi_1 and the down-projection's
    output mlpwo (layers/linears.py:602-624; the routed experts' moe_mlpwi_0, moe_mlpwi_1 and moe_mlpwo, per
    token-expert pair, layers/moe.py:1958-1985, :2243) without `mlp_up`.  Nothing unnamed is kept: the norms'
    inputs and outputs, the residual sums, the routed tokens' permuted copies and the activation's output are rerun
    from these (a QA trial: MaxText's configs/gpu/models/mixtral_8x7b.yml at per_device_batch_size 12 was priced at
    385 GiB of activations a GPU, what Megatron-Core's layer keeps, where JAX keeps 160)."""
    w, tokens, tp, h = x.w, x.tokens, x.tp, x.w.hidden
    between = 2.0 * h / x.sp_shard  # a tensor of the residual stream, sharded over tensor between layers
    qkv = np.where(x.module(M.QKV_PROJ), 0.0, 2.0 * (w.attn_act_width - w.out_dim) / tp)
    context = np.where(x.module(M.CORE_ATTN), 0.0, (2.0 * w.out_dim + 4.0 * w.num_heads) / tp)
    out = np.where(x.module(M.OUT_PROJ), 0.0, between)
    up_kept = np.where(x.module(M.MLP_UP), 0.0, 1.0)
    attention = between + qkv + context + out
    dense = tokens * (attention + up_kept * (2.0 * w.mlp_up * w.dense_ffn / tp + between))
    if not w.num_experts:
        return dense, dense
    shared = up_kept * 2.0 * w.mlp_up * w.shared_ffn_total / tp + np.where(w.shared_ffn_total > 0, up_kept * between,
                                                                           0.0)
    pairs = tokens * w.top_k * x.etp / tp * x.expert_load
    routed = pairs * up_kept * (2.0 * w.mlp_up * w.expert_ffn / x.etp + 2.0 * h)
    # ...less the second up-projection's output where the policy leaves it unnamed (recipe expert_w1_rerun)
    routed = routed - pairs * expert_w1_rerun(x) * 2.0 * w.expert_ffn / x.etp
    return dense, tokens * (attention + shared) + routed


def norms_recomputed(x: Ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where `layernorm` recompute reruns, and so frees the output of, the attention's input norm, a dense MLP's and
    an MoE layer's pre-MLP norm (all three where the norms run unfused: recipe norms_fused False); the step time
    (cost.layer) prices the reruns, the memory the outputs kept.  Megatron-Core's Transformer Engine layer spec fuses a
    norm into the projection after it (TELayerNormColumnParallelLinear, whose layer keeps IdentityOp in the norm's
    place; core_v0.19.0 models/gpt/gpt_layer_specs.py:145, :157), and `--recompute-modules layernorm` recomputes only
    a norm that is a module of its own (transformer/transformer_layer.py:451, :499): the attention's input norm under
    MLA (gpt_layer_specs.py:295, its down projections take the normed input) and the pre-MLP norm of an MoE layer,
    whose router reads it (:157, :282).  A fused norm's output stays saved for its GEMM's backward.

    Megatron-Core does not recompute the MoE pre-MLP norm where per-layer CUDA graphs capture the router and the
    dispatcher is not alltoall (transformer_layer.py:456-498 can_recompute_pre_mlp_layernorm_for_cudagraph, "Disabling
    pre_mlp_layernorm recompute": the norm's output leaves the graph in a static buffer): with the recipe's partial
    graphs and another dispatcher it is kept (`moe_norm_recompute_lost`; estimate keeps the search's choices off
    that pair where the norm is priced freed)."""
    rerun = np.asarray(x.module(M.LAYERNORM), dtype=bool)
    unfused = not x.recipe.norms_fused
    moe = rerun & ~moe_norm_recompute_lost(x.recipe.cuda_graphs, x.recipe.moe_dispatcher)
    return rerun & (x.w.mla_up_width > 0 or unfused), rerun & unfused, moe


def moe_norm_recompute_lost(graphs, dispatcher) -> np.ndarray:
    """Where Megatron-Core drops `layernorm` recompute of an MoE layer's pre-MLP norm (norms_recomputed): partial
    CUDA graphs (attention, router and preprocess) with a dispatcher other than alltoall."""
    return (np.asarray(graphs) == CudaGraphs.PARTIAL) & (np.asarray(dispatcher) != Dispatcher.ALLTOALL)


def _per_op_kept(x: Ctx) -> tuple[np.ndarray, np.ndarray]:
    """(dense, MoE) bytes a block keeps per micro-batch under torchtitan's per-op checkpointing
    (RecomputeModule.PER_OP): its input (the checkpoint's), the outputs of the matmuls it saves (a row-parallel
    one's whole-width partial sums, before the reduction), the attention kernel's output and log-sum-exp, the
    reduce-scatter outputs of sequence parallelism and, with experts on other ranks, the all-to-all outputs;
    every other activation is recomputed."""
    from placement.cost.layer import per_op_gemms

    w, tokens, tp, h = x.w, x.tokens, x.tp, x.w.hidden
    attn, mlp, shared = per_op_gemms(x)

    def saved(gemms) -> np.ndarray | float:
        return sum((2.0 * g.n for g in gemms if g.saved), 0.0)

    core = (2.0 * w.out_dim + 4.0 * w.num_heads) / tp  # attention output and its fp32 log-sum-exp per head
    scattered = np.where(x.sp_shard > 1, 2.0 * 2.0 * h / tp, 0.0)  # wo's and w2's reduce-scattered outputs
    block = 2.0 * h / x.sp_shard + saved(attn) + core + scattered
    dense = tokens * (block + saved(mlp))
    if not w.num_experts:
        return dense, dense
    pairs = tokens * w.top_k * x.etp / tp * x.expert_load
    exchanged = np.where(x.b.ep > 1, 2.0 * 2.0 * h * pairs, 0.0)  # dispatch and combine all-to-all outputs
    return dense, tokens * (block + saved(shared)) + exchanged


def in_flight(x: Ctx, rank: np.ndarray) -> np.ndarray:
    """Micro-batches whose activations a pipeline rank holds at its peak.  1F1B: pp - rank, at most m
    (Megatron schedules: warm-up p - rank - 1, plus one).  Interleaved: ((pp - rank - 1) * 2 + (vpp - 1) *
    pp + 1) chunk-micro-batches of 1/vpp of the rank's layers (Megatron's interleaved warm-up), which for
    rank 0 is pp * (1 + (pp - 1)/(pp vpp)) (MLM-mem interleaved_schedule_memory_penalty)."""
    pp, vpp = x.pp, x.vpp
    if x.recipe.pipeline_schedule is PipelineSchedule.DUALPIPE:
        # PP + 1 micro-batches of one stage on every rank (DeepSeek-V3 Table 2); a DualPipe rank's counts are
        # its two stages' (cost.pipeline.stage_kinds), so half of them
        return np.minimum((pp + 1.0) / 2.0, x.m) + 0.0 * rank
    plain = np.minimum(x.m, pp - rank)
    if not (x.b.vpp > 1).any():
        return plain
    # torch's ScheduleInterleaved1F1B warms up (vpp - 1) rounds of m // max(1, m // pp) micro-batches, not pp
    # (schedules.py:2884 _get_warmup_ops; torchtitan, where m is no multiple of pp): pp wherever pp divides m
    per_round = np.floor(x.m / np.maximum(np.floor(x.m / pp), 1.0))
    interleaved = ((pp - rank - 1.0) * 2.0 + (vpp - 1.0) * per_round + 1.0) / vpp
    return np.where(x.b.vpp > 1, np.minimum(interleaved, x.m), plain)


def gradient_dtype(recipe, zero: int, pp: int) -> str:
    """The width memory_term holds a candidate's gradients in, in words (its grad_b), at its priced ZeRO stage
    (context.priced_zero: a ZeRO-0 run as FSDP2 holds them as ZeRO-3 does)."""
    fp32 = bool(recipe.grad_reduce_fp32)
    zero = priced_zero(recipe, zero)
    if recipe.pipeline_unsharded_grads and pp > 1 and zero >= 2:
        return ("fp32" if fp32 else "bf16") + ", unsharded through the step"
    if recipe.fp32_weights:
        return "fp32" if fp32 else "bf16"
    if recipe.grad_accumulation is GradAccumulation.FP32_COPY and zero < 3:
        return "bf16 and an fp32 copy"
    if recipe.grad_accumulation is GradAccumulation.BF16_COPY and zero < 3:
        return "bf16 and a bf16 copy"
    return "fp32" if fp32 and zero < 3 else "bf16"


@dataclass(frozen=True)
class MemoryTerm:
    weights_bytes: np.ndarray
    grads_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    activations_bytes: np.ndarray
    other_bytes: np.ndarray
    """Logits, the reserve, and the buffers (ZeRO-3 prefetch, CUDA-graph pools, pipeline masks)."""
    peak_bytes: np.ndarray
    logits_bytes: np.ndarray
    """Of other_bytes, the logits the loss holds (logits_bytes_per_element a logit)."""


def logits_bytes_per_element(recipe) -> float:
    """Bytes a logit of the loss's micro-batch (or chunk) holds at the loss's peak: the 16-bit logits alone under a
    fused loss, an eager float32 loss's three float32 tensors (and, in a chunk loop, the chunk's 16-bit logits), else
    the 16-bit logits and Megatron's in-place float32 copy."""
    if recipe.cross_entropy_fusion:
        return C.BYTES_PER_ACTIVATION
    if recipe.loss_eager_float32:
        return C.LOGITS_BYTES_EAGER_FLOAT32 + (C.LOGITS_BYTES_CHUNK_LOOP_HELD if recipe.loss_chunks > 1 else 0)
    return C.LOGITS_BYTES_PER_ELEMENT


def memory_term(x: Ctx, st: StageKinds, dense_p: np.ndarray, expert_p: np.ndarray, dense_shard: np.ndarray,
                expert_shard: np.ndarray, extra_bytes: np.ndarray | float) -> MemoryTerm:
    """Peak over the kinds of pipeline rank (S, K inputs: params per kind); `extra_bytes` (K,) is what the
    recipe adds on every rank (CUDA-graph pools).

    Every part is linear in what a rank holds (its dense and expert parameters, layers, MTP layers, loss),
    with per-candidate coefficients: the totals are priced for every kind to find the peak rank, and the
    parts only for that rank."""
    b = x.b
    zero3 = b.zero == 3
    # bytes per parameter of each part, replicated (1) or sharded (1 / shard) per ZeRO stage
    weight_b = float(C.BYTES_WEIGHT)
    if x.fp8 is not None:  # the quantised copy beside the 16-bit weight, or FP8 primary weights alone
        # (no copy where each pass casts the weight again: fp8_recasts_weights, torchao)
        weight_b = (weight_b * 0.5 if x.recipe.fp8_params else
                    weight_b if x.recipe.fp8_recasts_weights else weight_b + C.FP8_WEIGHT_COPY_BYTES)
    # fp32 gradients take 4 bytes where a full-size grad buffer is kept (DDP, Megatron's distributed optimizer);
    # under ZeRO-3/FSDP2 the sharded fp32 parameter is itself the master copy, so 2 + 4 + 8 = 16 bytes as before
    grad_b = np.where((b.zero < 3) & x.recipe.grad_reduce_fp32, 4.0, C.BYTES_GRAD)
    if x.recipe.grad_accumulation is GradAccumulation.FP32_COPY:
        # DeepSpeed's BF16_Optimizer keeps a full-size fp32 gradient beside the bf16 .grad (bf16_optimizer.py
        # fp32_groups_gradients_flat, zeros_like the flat bf16 parameters), whatever width it reduces in
        grad_b = np.where(b.zero < 3, C.BYTES_GRAD + 4.0, grad_b)
    elif x.recipe.grad_accumulation is GradAccumulation.BF16_COPY:  # the same buffer at the model's width
        grad_b = np.where(b.zero < 3, C.BYTES_GRAD + 2.0, grad_b)
    state_b = C.BYTES_OPTIMIZER_BF16_MOMENTS if x.recipe.optimizer_state_bf16 else C.BYTES_OPTIMIZER
    if not x.recipe.optimizer_master_weights and not x.recipe.fp32_weights:
        state_b -= 4.0  # no float32 master copy: the moments alone
    gathered, weights_sharded = 0.0, zero3
    if x.recipe.fp32_weights:
        # float32 weights are the master copy (MaxText): 2 bytes more a weight, 4 fewer of optimizer state, the
        # gradients in their reduce width at every stage.  Under ZeRO-1/2 (shard_optimizer_over_data) the stored
        # weights are sharded as the optimizer state is and gathered for the step: in bf16 before the accumulation
        # loop, in float32 without one (MaxText 0.2.5 utils/sharding.py maybe_update_params_sharding_with_opt,
        # utils/gradient_accumulation.py, trainers/pre_train/train.py)
        weight_b += 4.0 - C.BYTES_WEIGHT
        state_b -= 4.0
        grad_b = np.full_like(np.asarray(b.zero, dtype=np.float64), 4.0 if x.recipe.grad_reduce_fp32 else 2.0)
        zero1 = (b.zero == 1) | (b.zero == 2)
        weights_sharded = zero3 | zero1
        gathered = np.where(zero1, np.where(x.m > 1, float(C.BYTES_WEIGHT), 4.0), 0.0)
        if x.recipe.fp32_weights_autocast:
            # ...where torch's ZeroRedundancyOptimizer keeps them whole on every rank and broadcasts each updated
            # shard into them (zero_redundancy_optimizer.py _sync_params), and bf16 autocast holds each GEMM's cast of
            # its weight from forward to backward (flash_attn FusedDenseFunc save_for_backward): 2 bytes a weight
            # beside them below ZeRO-3
            weights_sharded = zero3
            gathered = np.where(zero3, 0.0, float(C.BYTES_WEIGHT))

    # torch pipelining with FSDP2 (recipe pipeline_unsharded_grads) keeps the stage's unsharded gradient in the reduce
    # width and its unsharded parameters through the step (no reshard after backward)
    deferred = x.recipe.pipeline_unsharded_grads & (b.pp > 1) & (b.zero >= 2)
    grad_b = np.where(deferred, 4.0 if x.recipe.grad_reduce_fp32 else C.BYTES_GRAD, grad_b)

    # the optimizer state sharded over the HSDP replicas too (recipe optimizer_over_replicas: MaxText's
    # shard_optimizer_over_data beside ZeRO-3); float32 weights, the master copy, are stored so too and gathered
    # back to the shard group's sharding once a step (bf16 before an accumulation loop, float32 without), that copy
    # held through the step
    # (per layout: a MaxText layout with fsdp ranks runs without it, `over_replicas`)
    over = over_replicas(x.recipe, b)
    replicas = np.where(over, b.dp / np.maximum(b.dp_shard, 1), 1.0)
    weight_replicas = replicas if x.recipe.fp32_weights else 1.0
    step_copy = np.where(over & x.recipe.fp32_weights, np.where(x.m > 1, float(C.BYTES_WEIGHT), weight_b), 0.0)

    def per_param(shard):
        w_ = (weight_b * np.where(weights_sharded & ~deferred, 1.0 / (shard * weight_replicas), 1.0) + gathered
              + step_copy / shard)
        g_ = grad_b * np.where((b.zero >= 2) & ~deferred, 1.0 / shard, 1.0)
        o_ = state_b * np.where(b.zero >= 1, 1.0 / (shard * replicas), 1.0)
        return w_, g_, o_

    wd, gd, od = per_param(dense_shard)
    we, ge, oe = per_param(expert_shard)
    # ...but a chunked loss (torchtitan 0.3.0's ChunkedLossWrapper) turns the head's gradient sync and resharding back
    # on at each micro-batch's last chunk (components/loss.py:725-771): under the deferral the head's gradient and,
    # under ZeRO-3, its weights are sharded as without it.  `head_fix`: bytes a head parameter holds less.
    head_p = loss_head_params(x, st)
    chunked = deferred & (x.recipe.loss_chunks > 1)
    head_fix = np.where(chunked, grad_b * (1.0 - 1.0 / dense_shard)
                        + np.where(zero3, weight_b * (1.0 - 1.0 / dense_shard), 0.0), 0.0)

    acts = layer_activations(x)
    share = x.full * x.full_layers_share
    per_dense = share * acts.layer_input + (1.0 - share) * acts.dense
    per_moe = share * acts.layer_input + (1.0 - share) * acts.moe
    working_moe = np.where(x.full > 0, acts.moe, 0.0)
    working_dense = np.where(x.full > 0, acts.dense, 0.0)

    w = x.w
    vocab = w.embed_params / w.hidden
    logit_bytes = logits_bytes_per_element(x.recipe)
    # a chunked loss (recipe loss_chunks) holds one chunk's logits at a time
    logits = x.tokens * vocab / x.tp * logit_bytes / x.recipe.loss_chunks
    dense_layer_p = w.dense_layer_shard(x.tp)
    moe_layer_p = w.moe_layer_dense_shard(x.tp) + w.moe_layer_expert_shard(x.ep * x.etp)
    # FSDP's prefetch buffer: two layers gathered; none beside weights that stay gathered (pipeline_unsharded_grads)
    z3_buffer = np.where(zero3 & ~deferred, 2.0 * np.maximum(dense_layer_p, moe_layer_p) * C.BYTES_WEIGHT, 0.0)
    fixed = z3_buffer + C.MEMORY_RESERVE_BYTES + extra_bytes

    k = x.recipe.checkpoint_interval
    mask = np.where(x.b.pp > 1, float(x.train.seq_len) ** 2, 0.0) if x.recipe.pipeline_sends_mask else 0.0

    def mask_bytes(rank, flight):
        """`pipeline_sends_mask`: the bool [1, 1, s, s] masks a rank holds (DeepSpeed runtime/pipe/engine.py, the same
        at DeeperSpeed eb7f5cff).  The first stage loads each micro-batch's mask into a pipeline buffer it never frees
        (it sends no gradient), min(pp + 1, m) of them (pipe/schedule.py TrainSchedule.num_pipe_buffers), and the
        forward pass clones it again for each micro-batch in flight; a receiving stage keeps one clone per micro-batch
        in flight (two where activations are not partitioned, tp 1: the received one stays in the buffer beside the
        forward's clone) and the 16-bit receive buffer; every stage holds a 16-bit copy around each send or receive,
        and the first and last stages, which load each micro-batch, build its mask from a float32 tensor of ones and
        its float32 lower triangle (GPT-NeoX megatron/utils.py get_attn_mask: 8 bytes per element at once) before
        the bool result."""
        first = np.minimum(x.pp + 1.0, x.m) + flight
        later = flight * np.where(x.b.tp > 1, 1.0, 2.0) + C.BYTES_PER_ACTIVATION
        loads = (rank == 0) | (rank == x.pp - 1)
        transient = np.where(loads, 2 * MASK_BUILD_BYTES_PER_ELEMENT + 1.0, C.BYTES_PER_ACTIVATION)
        return mask * (np.where(rank == 0, first, later) + transient)

    def stored_of(nd, nmoe):
        """Bytes a rank keeps per micro-batch in flight: its recomputed layers' inputs (one per checkpointed chunk
        of `checkpoint_interval` layers, DeepSpeed's activation_checkpoint_interval) and the rest's activations."""
        if k == 1:
            return nd * per_dense + nmoe * per_moe
        return x.checkpoint_chunks(nd + nmoe) * acts.layer_input + (1.0 - share) * (nd * acts.dense + nmoe * acts.moe)

    def working_of(nd, nmoe):
        """Full recompute rebuilds one chunk at a time in backward: `checkpoint_interval` layers' activations (at
        most the rank's layers), one layer's by default."""
        one = np.where(nmoe > 0, working_moe, working_dense)
        return one if k == 1 else one * np.minimum(k, np.maximum(nd + nmoe, 1.0))

    def parts(nd, nmoe, heads, dp_, ep_, rank, active, hp):
        stored = stored_of(nd, nmoe)
        working = working_of(nd, nmoe)
        flight = in_flight(x, rank)
        activations = stored * flight + working * active
        weight_fix = hp * np.where(chunked & zero3, weight_b * (1.0 - 1.0 / dense_shard), 0.0)
        return (dp_ * wd + ep_ * we - weight_fix, dp_ * gd + ep_ * ge - (hp * head_fix - weight_fix),
                dp_ * od + ep_ * oe, activations, heads * logits + fixed + mask_bytes(rank, flight), heads * logits)

    n_moe = st.moe + st.mtp
    heads = st.loss + st.mtp
    active = st.num_ranks > 0
    # the totals of every kind, summed in as few (S, K) passes as the parts allow
    flight = in_flight(x, st.rank)
    total = (dense_p * (wd + gd + od) - head_p * head_fix + stored_of(st.dense, n_moe) * flight + heads * logits
             + fixed + mask_bytes(st.rank, flight))
    if x.w.num_experts:
        total += expert_p * (we + ge + oe)
    if (x.full > 0).any():  # full recompute keeps one chunk's working set besides the stored inputs
        total += working_of(st.dense, n_moe)
    worst = np.argmax(np.where(active, total, 0.0), axis=0)
    cols = np.arange(total.shape[1])

    def at(a):
        return np.broadcast_to(a, total.shape)[worst, cols]

    weights, grads, opt, activations, other, logit = parts(at(st.dense), at(n_moe), at(heads), at(dense_p),
                                                           at(expert_p), at(st.rank), at(active), at(head_p))
    return MemoryTerm(weights_bytes=weights, grads_bytes=grads, optimizer_bytes=opt, activations_bytes=activations,
                      other_bytes=other, peak_bytes=weights + grads + opt + activations + other,
                      logits_bytes=np.broadcast_to(logit, np.shape(other)).astype(np.float64))
