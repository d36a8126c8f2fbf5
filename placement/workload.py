"""Per-layer parameter counts, FLOPs and activation sizes of a ModelSpec (pure arithmetic, no hardware).

Counts follow Narayanan et al. 2021 (PTD-P, arXiv:2104.04473) eq. 2 for dense GPT layers, generalised
to GQA, gated MLPs, MoE and MLA the way Megatron-LM's `num_floating_point_operations`
(megatron/training/training.py) does.  Norm and bias parameters are left out (under 0.1 %).
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.cost.constants import CAUSAL_EXECUTED_FRACTION
from placement.specs import ModelSpec
from placement.specs.model import Normalization, PositionEmbedding, RopeScaling


@dataclass(frozen=True)
class Workload:
    """Per-layer sizes, in elements (parameters, activations per token) and FLOPs per token."""

    hidden: int
    attn_params: int
    """Q, K, V and output projections of one layer."""
    dense_mlp_params: int
    """MLP of one dense layer."""
    router_params: int
    expert_params: int
    """One routed expert."""
    shared_params: int
    """All shared experts of one MoE layer."""
    num_experts: int
    top_k: int
    embed_params: int
    head_params: int
    """LM head (0 when tied: the embedding matrix is reused, its gradient summed)."""
    num_layers: int
    num_dense_layers: int
    q_dim: int
    """Query width (heads x query head dim)."""
    kv_dim: int
    """Key plus value width held per token (what context parallelism exchanges)."""
    out_dim: int
    """Attention output width (heads x value head dim)."""
    attn_core_dim: int
    """heads x (qk head dim + v head dim): attention-core FLOPs per (query, key) pair / 2."""
    num_heads: int
    kv_heads: int
    """Key/value heads (what TP can split K and V into; MLA: every head has its own K and V)."""
    attn_act_width: int
    """Width of the attention activations one token keeps for backward: Q, K, V, the attention output,
    and MLA's compressed latents."""
    qk_head_dim: int
    v_head_dim: int
    mlp_up: int
    """Up-projections in the MLP (2 for SwiGLU)."""
    dense_ffn: int
    expert_ffn: int
    shared_ffn_total: int
    dropout: bool
    num_expert_groups: int
    """Expert groups of group-limited routing (1: routing is not limited)."""
    groups_per_token: int
    """Hidden dropout on: 1-byte masks are stored (Korthikanti §4)."""
    sliding_window: int | None = None
    """Keys a sliding-window layer attends to (None: no layer is windowed)."""
    num_window_layers: int = 0
    """Layers that attend to `sliding_window` keys instead of the whole sequence."""
    attn_gemms: tuple[tuple[int, int, int], ...] = ()
    """The attention block's projection GEMMs as (output width N, input width K, TP split): split 0 runs
    whole on every TP rank (MLA's down-projections, Megatron `parallel_mode="duplicated"`), 1 splits N
    (column-parallel), 2 splits K (row-parallel).  MLA: real shapes, K = q_lora_rank / kv_lora_rank for
    the up-projections (arXiv:2405.04434 §2.1), not one lumped GEMM."""
    mla_up_width: int = 0
    """Output width of MLA's up-projections (q and k/v per head): what `mla_up_proj` recompute drops."""
    yarn_rope: bool = False
    """RoPE with YaRN scaling (eager in Megatron-Core: no fused kernel takes it)."""
    rope_share: float = 0.0
    """Share of each query and key head's dimensions RoPE rotates (GPT-NeoX `rotary_pct`); 0 without RoPE."""
    swiglu_clamp: bool = False
    """The gated MLP clamps its inputs before the activation (GPT-OSS)."""
    linear_bias: bool = False
    """Biased projections (expert output biases, bias-dropout-add with a bias)."""
    parallel_residual: bool = False
    """Attention and MLP outputs summed before one TP all-reduce (ModelSpec.parallel_residual)."""
    vector_params: int = 0
    """One layer's parameters outside its matmuls, dense or MoE: norm weights (and LayerNorm biases), the attention
    projections' biases, attention sinks.  Held, reduced and updated as weights are; no matmul FLOPs."""
    dense_mlp_bias_params: int = 0
    """A dense layer's MLP biases."""
    router_bias_params: int = 0
    """An MoE layer's router bias (GPT-OSS's router is a biased linear)."""
    expert_bias_params: int = 0
    """One routed expert's biases (GPT-OSS: gate, up and down, 2 x 2880 + 2880)."""
    final_norm_params: int = 0
    """The norm before the LM head."""
    tied_head_params: int = 0
    """The tied embedding's elements (vocab x hidden; 0 untied): where a pipeline puts the embedding and the LM head
    on different ranks, the last keeps its own copy of them as its head and the two all-reduce its gradient after
    every step (Megatron-Core LanguageModule.setup_embeddings_and_output_layer and finalize_model_grads
    `_allreduce_word_embedding_grads`; DeepSpeed's TiedLayerSpec and ReduceTiedGrads)."""

    # -- parameters -------------------------------------------------------------------------------

    @property
    def moe_layer_params(self) -> int:
        experts = self.num_experts * (self.expert_params + self.expert_bias_params)
        return self.attn_params + self.router_params + experts + self.shared_params + self.vector_params + (
            self.router_bias_params)

    @property
    def dense_layer_params(self) -> int:
        return self.attn_params + self.dense_mlp_params + self.vector_params + self.dense_mlp_bias_params

    def dense_layer_shard(self, tp):
        """A dense layer's parameters on one TP rank (numbers or arrays): its matmuls split over `tp`, its norms,
        biases and sinks (vector_params) whole on every rank (the norms and row-parallel biases are replicated, the
        column-parallel biases' split is under 0.01 % of a layer)."""
        return (self.attn_params + self.dense_mlp_params) / tp + self.vector_params + self.dense_mlp_bias_params

    def moe_layer_dense_shard(self, tp):
        """An MoE layer's parameters outside its routed experts on one TP rank (as dense_layer_shard)."""
        return ((self.attn_params + self.shared_params) / tp + self.router_params + self.vector_params
                + self.router_bias_params)

    def moe_layer_expert_shard(self, ep_etp):
        """An MoE layer's routed experts (and their biases) on one rank of `ep_etp` expert ranks."""
        return self.num_experts * (self.expert_params + self.expert_bias_params) / ep_etp

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers

    @property
    def total_params(self) -> int:
        return (self.num_dense_layers * self.dense_layer_params + self.num_moe_layers * self.moe_layer_params
                + self.embed_params + self.head_params + self.final_norm_params)

    @property
    def active_params_per_token(self) -> int:
        """Parameters one token multiplies through (routed top-k, shared, dense), embeddings included."""
        moe = (self.attn_params + self.router_params + self.top_k * (self.expert_params + self.expert_bias_params)
               + self.shared_params + self.vector_params + self.router_bias_params)
        return (self.num_dense_layers * self.dense_layer_params + self.num_moe_layers * moe
                + self.embed_params + self.head_params + self.final_norm_params)

    # -- FLOPs ------------------------------------------------------------------------------------

    def attended_keys(self, seq_len: int) -> float:
        """Keys one query meets per layer, averaged over the layers, counted the full-s x s way: `seq_len`
        for full attention, min(seq_len, window) for a sliding-window layer (GPT-OSS: 128 on every other
        layer).  Use it wherever `seq_len` multiplies `attn_core_dim`."""
        if self.num_window_layers == 0:
            return seq_len
        full = self.num_layers - self.num_window_layers
        windowed = min(seq_len, self.sliding_window)
        return (full * seq_len + self.num_window_layers * windowed) / self.num_layers

    def causal_keys(self, seq_len: int) -> float:
        """`attended_keys` as a fused causal kernel executes them, in the same full-s units (the kernel runs
        CAUSAL_EXECUTED_FRACTION of them): a full causal layer's query meets (s + 1) / 2 keys on average, counted s;
        a sliding-window layer's meets its whole window but for the first w - 1 queries, s w - w (w - 1) / 2 pairs
        in all (causal window of w keys, the query's own included), so it executes about twice the half of w that
        the full layer's fraction would give it (a window as long as the sequence is full attention)."""
        if self.num_window_layers == 0:
            return seq_len
        full = self.num_layers - self.num_window_layers
        w = min(seq_len, self.sliding_window)
        per_query = w - w * (w - 1) / (2.0 * seq_len) if w < seq_len else seq_len / 2.0
        windowed = per_query / CAUSAL_EXECUTED_FRACTION
        return (full * seq_len + self.num_window_layers * windowed) / self.num_layers

    def attn_core_flops_per_token(self, seq_len: int) -> float:
        """Forward attention-core FLOPs of one token over all layers: 2 * keys * heads * (d_qk + d_v) per layer."""
        if self.num_window_layers == 0:
            return 2.0 * seq_len * self.attn_core_dim * self.num_layers  # unchanged expression: bit-identical
        full = self.num_layers - self.num_window_layers
        keys = full * seq_len + self.num_window_layers * min(seq_len, self.sliding_window)
        return 2.0 * keys * self.attn_core_dim

    def forward_flops_per_token(self, seq_len: int) -> float:
        """Forward FLOPs of one token: 2 per matmul weight it meets (layers and LM head; the embedding
        lookup is free) plus the attention core 2 * s * heads * (d_qk + d_v), full s x s as Megatron and
        PaLM count it (PaLM App. B: 6N + 12 L H Q T for fwd + bwd); a sliding-window layer meets
        min(s, window) keys instead of s."""
        moe = self.router_params + self.top_k * self.expert_params + self.shared_params
        matmul = (self.num_layers * self.attn_params + self.num_dense_layers * self.dense_mlp_params
                  + self.num_moe_layers * moe + self.embed_params)  # LM head: V x h, tied or not
        attn_core = self.attn_core_flops_per_token(seq_len)
        return 2.0 * matmul + attn_core

    def model_flops_per_token(self, seq_len: int) -> float:
        """Model FLOPs (MFU numerator, PaLM's definition): forward + backward (2x forward), no recompute."""
        return 3.0 * self.forward_flops_per_token(seq_len)


def workload(model: ModelSpec) -> Workload:
    h = model.hidden_size
    a = model.num_attention_heads
    if model.mla is not None:
        mla = model.mla
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        q_proj = h * a * qk if mla.q_lora_rank is None else h * mla.q_lora_rank + mla.q_lora_rank * a * qk
        kv_proj = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank * a * (mla.qk_nope_head_dim
                                                                                          + mla.v_head_dim)
        attn = q_proj + kv_proj + a * mla.v_head_dim * h
        q_dim, kv_dim, out_dim = a * qk, a * (qk + mla.v_head_dim), a * mla.v_head_dim
        core = a * (qk + mla.v_head_dim)
        qk_head, v_head = qk, mla.v_head_dim
        kv_heads = a
        latents = (mla.q_lora_rank or 0) + mla.kv_lora_rank + mla.qk_rope_head_dim
        act_width = latents + q_dim + kv_dim + out_dim  # c_q, c_kv + k_rope, q, k, v, o
    else:
        d = model.dim_per_head
        kv = model.kv_heads
        attn = h * d * (2 * a + 2 * kv)
        q_dim, kv_dim, out_dim = a * d, 2 * kv * d, a * d
        core = 2 * a * d
        qk_head, v_head = d, d
        kv_heads = kv
        act_width = q_dim + kv_dim + out_dim
    up = model.ffn_kind.num_up_projections
    moe = model.moe
    expert_ffn = moe.expert_ffn_hidden_size if moe else 0
    shared_total = moe.num_shared_experts * moe.shared_ffn_size if moe else 0
    return Workload(
        hidden=h,
        attn_params=attn,
        dense_mlp_params=(up + 1) * h * model.ffn_hidden_size,
        router_params=h * moe.num_experts if moe else 0,
        expert_params=(up + 1) * h * expert_ffn,
        shared_params=(up + 1) * h * shared_total,
        num_experts=moe.num_experts if moe else 0,
        top_k=moe.top_k if moe else 0,
        embed_params=model.vocab_size * h,
        head_params=0 if model.tied_embeddings else model.vocab_size * h,
        tied_head_params=model.vocab_size * h if model.tied_embeddings else 0,
        num_layers=model.num_layers,
        num_dense_layers=model.num_layers - model.num_moe_layers,
        q_dim=q_dim,
        kv_dim=kv_dim,
        out_dim=out_dim,
        attn_core_dim=core,
        num_heads=a,
        kv_heads=kv_heads,
        attn_act_width=act_width,
        qk_head_dim=qk_head,
        v_head_dim=v_head,
        mlp_up=up,
        dense_ffn=model.ffn_hidden_size,
        expert_ffn=expert_ffn,
        shared_ffn_total=shared_total,
        dropout=model.dropout,
        num_expert_groups=(moe.num_expert_groups or 1) if moe else 1,
        groups_per_token=(moe.groups_per_token or moe.top_k) if moe else 1,
        sliding_window=model.sliding_window,
        num_window_layers=model.sliding_window_layers,
        attn_gemms=_attn_gemms(model, h, a, q_dim, kv_dim, out_dim),
        mla_up_width=(q_dim + a * (model.mla.qk_nope_head_dim + model.mla.v_head_dim)) if model.mla else 0,
        yarn_rope=model.rope_scaling is RopeScaling.YARN,
        rope_share=(model.rotary_percent or 1.0) if (model.position_embedding is PositionEmbedding.ROPE
                                                     or model.rope_scaling is RopeScaling.YARN) else 0.0,
        swiglu_clamp=model.swiglu_clamp is not None,
        linear_bias=bool(model.linear_bias),
        parallel_residual=model.parallel_residual,
        vector_params=_vector_params(model, h, a, q_dim, kv_dim, qk_head),
        dense_mlp_bias_params=(up * model.ffn_hidden_size + h) if model.linear_bias else 0,
        router_bias_params=moe.num_experts if moe and model.linear_bias else 0,
        expert_bias_params=(up * expert_ffn + h) if moe and model.linear_bias else 0,
        final_norm_params=_norm_params(model, h),
    )


def _norm_params(model: ModelSpec, width: int) -> int:
    """One norm's parameters: a weight, and a bias for LayerNorm (RMSNorm where the model does not say)."""
    return 2 * width if model.normalization is Normalization.LAYERNORM else width


def _vector_params(model: ModelSpec, h: int, a: int, q_dim: int, kv_dim: int, qk_head: int) -> int:
    """One layer's non-matmul parameters besides its MLP's and router's biases (Workload.vector_params).  With those,
    the expert biases and the final norm, GPT-OSS-120B's parameters add up to the 116.83 B of its model card
    (OpenAI, arXiv:2508.10925; placement counted 116.79 B without them)."""
    norms = 2 * _norm_params(model, h)  # before attention and before the MLP
    if model.qk_layernorm:
        norms += 2 * _norm_params(model, qk_head)  # per-head query and key norms (Qwen3)
    if model.mla is not None:  # DeepSeek's q_a_layernorm and kv_a_layernorm
        norms += _norm_params(model, model.mla.kv_lora_rank) + (
            _norm_params(model, model.mla.q_lora_rank) if model.mla.q_lora_rank else 0)
    if model.linear_bias:
        biases = q_dim + kv_dim + h  # q, k, v and the output projection
    elif model.qkv_bias:
        biases = q_dim + kv_dim
    else:
        biases = 0
    return norms + biases + (a if model.attention_sinks else 0)


def _attn_gemms(model: ModelSpec, h: int, a: int, q_dim: int, kv_dim: int, out_dim: int):
    out = ((h, out_dim, 2),)  # output projection, row-parallel
    mla = model.mla
    if mla is None:
        return ((q_dim + kv_dim, h, 1), *out)
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank is None:
        q = ((a * qk, h, 1),)
    else:
        q = ((mla.q_lora_rank, h, 0), (a * qk, mla.q_lora_rank, 1))
    kv = ((mla.kv_lora_rank + mla.qk_rope_head_dim, h, 0),
          (a * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank, 1))
    return (*q, *kv, *out)
