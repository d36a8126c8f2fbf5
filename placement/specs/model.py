"""ModelSpec: the architecture of a decoder-only transformer, dense or MoE; nothing about training."""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal

from pydantic import Field, model_validator

from placement.specs._base import StrictScalars
from placement.specs.training import MAX_GLOBAL_BATCH, MAX_SEQ_LEN

MAX_LAYERS: Final = 1 << 16
"""Deepest model planned (65,536 layers; published LLMs have a few hundred at most): a larger count is a typo, and
the bound keeps the pipeline arithmetic inside numpy's int64."""


class FfnKind(StrEnum):
    """The MLP's activation; gated kinds (SwiGLU, quick-GeGLU) carry two up-projections."""

    SWIGLU = "swiglu"
    """silu(x W1) * (x W3) (Llama; Megatron-LM --swiglu)."""
    QUICK_GEGLU = "quick_geglu"
    """Gated quick-GELU, g * sigmoid(1.702 g) * (u + glu_linear_offset), g and u the two up-projections (GPT-OSS:
    HF modeling_gpt_oss.py GptOssExperts, alpha 1.702; Megatron-LM --quick-geglu, fused_bias_geglu.py quick_gelu).
    Two up-projections like SwiGLU: the same FLOPs, bytes and memory."""
    GELU = "gelu"
    SQUARED_RELU = "squared_relu"
    RELU = "relu"

    @property
    def gated(self) -> bool:
        return self in (FfnKind.SWIGLU, FfnKind.QUICK_GEGLU)

    @property
    def num_up_projections(self) -> int:
        return 2 if self.gated else 1


class Normalization(StrEnum):
    RMSNORM = "rmsnorm"
    LAYERNORM = "layernorm"


class PositionEmbedding(StrEnum):
    ROPE = "rope"
    LEARNED = "learned"
    """Learned absolute positions (GPT-2/3)."""
    ALIBI = "alibi"
    """Attention biases by distance (BLOOM); Megatron-Core has no such position embedding."""


class RopeScaling(StrEnum):
    YARN = "yarn"
    """YaRN (HF `rope_scaling.rope_type: yarn`, GPT-OSS; its factors in `ModelSpec.yarn_rope`): cos and sin scaled
    by mscale; Megatron-Core's fused RoPE kernel takes only plain `rope`, so YaRN runs as eager ops (Megatron-Bridge
    `utils/fusions.py` `validate_rope_fusion_compatibility`)."""
    LLAMA3 = "llama3"
    """Llama 3.1's frequency rescaling (HF `rope_scaling.rope_type: llama3`; its factors in `ModelSpec.llama3_rope`):
    the rotary frequencies are computed once with the long wavelengths divided by a factor, then RoPE runs as plain
    RoPE, fused kernel and all, so it changes the numerics and not the cost."""


class Llama3RopeSpec(StrictScalars):
    """The four numbers of Llama 3.1's RoPE scaling (HF `rope_scaling` with `rope_type: llama3`, transformers
    `_compute_llama3_parameters`): a frequency whose wavelength exceeds `original_max_position_embeddings /
    low_freq_factor` tokens is divided by `factor`, one shorter than `original_max_position_embeddings /
    high_freq_factor` tokens is kept, and those between are interpolated.  Llama 3.1 (every size): 8, 1, 4, 8192
    (HF meta-llama/Llama-3.1-8B, -70B, -405B config.json).  The names are HF's, which Megatron-Core
    (`RotaryEmbedding._apply_scaling`) and torchtitan (`RoPE.Config`) share."""

    factor: float = Field(gt=0)
    """The long wavelengths' frequencies are divided by this (Megatron `--rope-scaling-factor`)."""
    low_freq_factor: float = Field(gt=0)
    """Wavelengths above original_max_position_embeddings / low_freq_factor tokens are scaled by `factor`."""
    high_freq_factor: float = Field(gt=0)
    """Wavelengths below original_max_position_embeddings / high_freq_factor tokens are kept."""
    original_max_position_embeddings: int = Field(ge=1)
    """The context length in tokens the model was first trained at (Llama 3.1: 8192)."""

    @model_validator(mode="after")
    def _check(self) -> Llama3RopeSpec:
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"llama3_rope.high_freq_factor ({self.high_freq_factor:g}) must exceed llama3_rope.low_freq_factor "
                f"({self.low_freq_factor:g}): the interpolation between them divides by their difference; Llama "
                f"3.1's are 4 and 1"
            )
        return self


class YarnRopeSpec(StrictScalars):
    """The numbers of YaRN RoPE scaling (arXiv:2309.00071; HF `rope_scaling` with `rope_type: yarn`, transformers
    `_compute_yarn_parameters`): rotary dimensions that turn fewer than `beta_slow` times over
    `original_max_position_embeddings` tokens have their frequency divided by `factor`, those turning more than
    `beta_fast` times keep it, and those between are interpolated; cos and sin are scaled by 0.1 ln(factor) + 1
    (or by the ratio of the two mscales when both are set).  GPT-OSS: factor 32, original 4096, beta_fast 32,
    beta_slow 1, truncate false (HF openai/gpt-oss-120b config.json; Megatron-Bridge GPTOSSProvider).  The names are
    HF's; Megatron-LM's arguments are --rotary-scaling-factor, --yarn-original-max-position-embeddings,
    --yarn-beta-fast, --yarn-beta-slow and --[no-]yarn-correction-range-round-to-int (MLA: --rotary-scaling-factor,
    --mscale, --mscale-all-dim; the rest fixed by MLATransformerConfig)."""

    factor: float = Field(gt=0)
    """Context extension: the low frequencies are divided by this (Megatron `--rotary-scaling-factor`)."""
    original_max_position_embeddings: int = Field(ge=1)
    """The context length in tokens the unscaled RoPE was trained at (GPT-OSS, DeepSeek-V3: 4096)."""
    beta_fast: float = Field(default=32.0, gt=0)
    """Rotations over the original context above which a dimension is kept (extrapolated); HF's default 32."""
    beta_slow: float = Field(default=1.0, gt=0)
    """Rotations over the original context below which a dimension is scaled (interpolated); HF's default 1."""
    truncate: bool = True
    """The ramp's ends are rounded to whole dimensions (HF `truncate`, default true; Megatron
    `yarn_correction_range_round_to_int`); GPT-OSS: false."""
    mscale: float | None = Field(default=None, gt=0)
    """HF `mscale` (DeepSeek: 1.0); with `mscale_all_dim` it sets the cos/sin scale 0.1 mscale ln(factor) + 1 over
    0.1 mscale_all_dim ln(factor) + 1; None: not stated."""
    mscale_all_dim: float | None = Field(default=None, ge=0)
    """HF `mscale_all_dim` (DeepSeek-V3: 1.0; MLA also scales the softmax by its mscale squared)."""

    @model_validator(mode="after")
    def _check(self) -> YarnRopeSpec:
        if self.beta_fast <= self.beta_slow:
            raise ValueError(
                f"yarn_rope.beta_fast ({self.beta_fast:g}) must exceed yarn_rope.beta_slow ({self.beta_slow:g}): the "
                f"ramp runs from the dimension turning beta_fast times to the one turning beta_slow times; YaRN's "
                f"(and GPT-OSS's) are 32 and 1"
            )
        return self


class MoESpec(StrictScalars):
    num_experts: int = Field(ge=1)
    """Routed experts per MoE layer."""
    top_k: int = Field(ge=1)
    """Routed experts each token visits."""
    expert_ffn_hidden_size: int = Field(ge=1)
    """FFN width of one routed expert."""
    num_shared_experts: int = Field(default=0, ge=0)
    """Experts every token visits (DeepSeek, Qwen2-MoE)."""
    shared_expert_ffn_hidden_size: int | None = Field(default=None, ge=1)
    """FFN width of one shared expert; defaults to the routed expert width."""
    num_dense_layers: int = Field(default=0, ge=0)
    """Leading layers that use the dense FFN instead of experts (DeepSeek-V3: 3)."""
    num_expert_groups: int | None = Field(default=None, ge=1)
    """Group-limited routing: experts split into this many groups (DeepSeek-V3 `n_group` = 8, one per
    node of its EP-64 layout)."""
    groups_per_token: int | None = Field(default=None, ge=1)
    """Each token's top-k experts come from at most this many groups (`topk_group`; DeepSeek-V3: 4 =
    "each token will be sent to at most M = 4 nodes", arXiv:2412.19437 §2.1.2)."""
    router_score_function: Literal["softmax", "sigmoid"] | None = None
    """How the router scores the experts (HF `scoring_func`; Megatron-LM --moe-router-score-function, default
    softmax). None: the model file does not say, and the launch files leave the framework's default."""
    router_topk_normalized: bool | None = None
    """The top-k weights are renormalized to sum to one (HF `norm_topk_prob`; Mixtral and GPT-OSS always do).
    Megatron-Core softmax-scores after the top-k for this and before it (--moe-router-pre-softmax) for raw weights;
    its sigmoid router always renormalizes (moe_utils.py topk_routing_with_score_function, core_v0.19.0)."""
    router_expert_bias: bool | None = None
    """Aux-loss-free balancing: a per-expert bias added to the scores for the top-k choice only (DeepSeek-V3 and
    Kimi K2 `topk_method` noaux_tc; Megatron-LM --moe-router-enable-expert-bias, which needs the sigmoid score)."""
    router_topk_scaling_factor: float | None = Field(default=None, gt=0)
    """Factor on the routed experts' weights (HF `routed_scaling_factor`: DeepSeek-V3 2.5, DeepSeek-V2 16; Megatron-LM
    --moe-router-topk-scaling-factor, the mapping Megatron-Bridge's CONFIG_MAPPING makes)."""

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise ValueError(
                f"moe.top_k ({self.top_k}) > moe.num_experts ({self.num_experts}): a token cannot visit more "
                f"experts than exist; set top_k <= {self.num_experts}"
            )
        if (self.num_expert_groups is None) != (self.groups_per_token is None):
            raise ValueError("moe.num_expert_groups and moe.groups_per_token go together: set both or neither")
        if self.num_expert_groups is not None:
            if self.num_experts % self.num_expert_groups:
                raise ValueError(
                    f"moe.num_expert_groups ({self.num_expert_groups}) must divide moe.num_experts "
                    f"({self.num_experts})"
                )
            if self.groups_per_token > self.num_expert_groups:
                raise ValueError(
                    f"moe.groups_per_token ({self.groups_per_token}) > moe.num_expert_groups "
                    f"({self.num_expert_groups}); a token cannot use more groups than exist"
                )
        return self

    @property
    def shared_ffn_size(self) -> int:
        return self.shared_expert_ffn_hidden_size or self.expert_ffn_hidden_size


class MLASpec(StrictScalars):
    """DeepSeek multi-head latent attention (arXiv:2405.04434 §2.1)."""

    q_lora_rank: int | None = Field(default=None, ge=1)
    """Query compression rank; None means queries are projected directly."""
    kv_lora_rank: int = Field(ge=1)
    qk_nope_head_dim: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=1)
    v_head_dim: int = Field(ge=1)


class ModelSpec(StrictScalars):
    name: str = Field(min_length=1)
    num_layers: int = Field(ge=1, le=MAX_LAYERS)
    hidden_size: int = Field(ge=1)
    ffn_hidden_size: int = Field(ge=1)
    """FFN width of the dense layers (for MoE models: the leading dense layers)."""
    ffn_kind: FfnKind = FfnKind.SWIGLU
    num_attention_heads: int = Field(ge=1)
    num_kv_heads: int | None = Field(default=None, ge=1)
    """Key/value heads (GQA/MQA); None means equal to num_attention_heads (MHA)."""
    head_dim: int | None = Field(default=None, ge=1)
    """Per-head dimension; None means hidden_size / num_attention_heads."""
    vocab_size: int = Field(ge=1)
    tied_embeddings: bool = False
    """Input embedding and LM head share one matrix."""
    dropout: bool = False
    """Hidden and attention dropout are on (GPT-3-era models): a 1-byte mask per activation and per attention score
    is stored (Korthikanti §4), and an unfused attention core moves the scores' dropout mask and output."""
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    sliding_window: int | None = Field(default=None, ge=1)
    """Keys a sliding-window layer attends to (the query's own token included); None: every layer attends
    to the whole sequence.  GPT-OSS: 128 (HF openai/gpt-oss-120b config.json `sliding_window`)."""
    sliding_window_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """How many of the layers use `sliding_window`; the rest attend to the whole sequence.  GPT-OSS: half
    of them, alternating (`layer_types`); only the count matters to the FLOPs."""
    normalization: Normalization | None = None
    """The layers' norm; these five fields only shape the emitted model arguments (None: not stated, the file
    leaves that argument to the user and says so)."""
    position_embedding: PositionEmbedding | None = None
    rope_base: float | None = Field(default=None, gt=0, le=1e12)
    """RoPE theta (HF `rope_theta`)."""
    rotary_percent: float | None = Field(default=None, gt=0, le=1)
    """Share of each head's dimensions RoPE rotates (GPT-NeoX `rotary_pct`, Megatron `--rotary-percent`); None: all
    of them."""
    linear_bias: bool | None = None
    """The attention and MLP projections carry biases (GPT-2/3, BLOOM, GPT-OSS); Llama-style models have none."""
    qkv_bias: bool | None = None
    """Only the query, key and value projections carry biases (Qwen2 and Qwen2-MoE: transformers Qwen2Attention builds
    q/k/v with bias=True, o_proj and the MLP without; Megatron-LM --add-qkv-bias beside --disable-bias-linear)."""
    norm_epsilon: float | None = Field(default=None, gt=0, lt=1)
    """The norms' epsilon (HF `rms_norm_eps`, Megatron `--norm-epsilon`, whose default is 1e-5); None: not stated, and
    the emitted Megatron file says it leaves it to Megatron's default."""
    qk_layernorm: bool | None = None
    """Queries and keys are normalized per head before RoPE (Qwen3).  An MLA model's norms of its compressed query and
    key-value (DeepSeek's q_a_layernorm, kv_a_layernorm) come with `mla`: Megatron spells both --qk-layernorm."""
    parallel_residual: bool = False
    """Attention and MLP read the same layer input and their outputs are added to it together, x + attn(ln1(x)) +
    mlp(ln2(x)) (GPT-J; GPT-NeoX `gpt_j_residual`): under TP the two row-parallel outputs are summed before one
    all-reduce, one forward TP all-reduce per layer instead of two (EleutherAI/gpt-neox eb02115b, 2021-09-29,
    megatron/model/transformer.py ParallelTransformerLayer); the backward keeps one per column-parallel input."""
    rope_scaling: RopeScaling | None = None
    """RoPE frequency scaling: YaRN (changes the kernel) or llama3 (Llama 3.1's rescaled frequencies, with
    `llama3_rope`; changes the numerics, not the cost); None: plain RoPE or not stated."""
    llama3_rope: Llama3RopeSpec | None = None
    """The factors of `rope_scaling: llama3` (required with it, refused without it)."""
    yarn_rope: YarnRopeSpec | None = None
    """The factors of `rope_scaling: yarn`; None: YaRN whose factors are not stated (the launch files say so), and
    refused without `rope_scaling: yarn`."""
    swiglu_clamp: float | None = Field(default=None, gt=0)
    """The gated MLP's inputs are clamped at this value before the activation: the gate at most it, the linear branch
    within +-it (GPT-OSS: 7.0, HF `swiglu_limit`, Megatron-Core `activation_func_clamp_value`)."""
    glu_linear_offset: float = Field(default=0.0, allow_inf_nan=False)
    """Added to the gated MLP's linear branch before the product, act(g) * (u + offset) (GPT-OSS: 1.0, HF
    modeling_gpt_oss.py `(up + 1) * glu`; Megatron-Core `glu_linear_offset`); 0 for plain GLUs.  Numerics only."""
    attention_sinks: bool = False
    """Each attention head has one learnable logit added to every softmax's denominator (GPT-OSS `sinks`, HF
    modeling_gpt_oss.py; Megatron-Core `softmax_type: learnable`).  Priced as plain attention (one scalar per head
    and query)."""
    mtp_modules: int = Field(default=0, ge=0, le=8)
    """Multi-token-prediction modules the model file declares (a HuggingFace config's `num_nextn_predict_layers`,
    DeepSeek-V3's 1): recipe mtp_layers where no flag or recipe file sets it, with the file as its source (a user
    trial: the key was dropped without a word, and the plan priced and wrote a model without its MTP layer)."""
    default_seq_len: int = Field(default=4096, ge=1, le=MAX_SEQ_LEN)
    default_seq_len_note: str = ""
    """Where default_seq_len comes from when it is not the file's own value (a HuggingFace context length capped
    by placement): said with the plan, as a default is."""
    default_global_batch: int = Field(default=1024, ge=1, le=MAX_GLOBAL_BATCH)
    """Global batch in sequences used when the job does not say."""
    default_global_batch_note: str = ""
    """Where default_global_batch comes from when no source gives it (a catalog file's planning default): said with
    the plan, as a default is (a buyer's trial: llama3-70b planned at its file's 1,024 sequences, not said)."""
    source: str = ""
    """Where the dimensions come from."""

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        kv = self.kv_heads
        if self.num_attention_heads % kv:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not divisible by num_kv_heads ({kv}): "
                f"grouped-query attention needs whole groups; use a num_kv_heads that divides "
                f"{self.num_attention_heads}"
            )
        if self.head_dim is None and self.mla is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}); set head_dim explicitly"
            )
        if self.sliding_window_layers > self.num_layers:
            raise ValueError(
                f"sliding_window_layers ({self.sliding_window_layers}) > num_layers ({self.num_layers}); "
                f"set it to at most {self.num_layers}"
            )
        if (self.sliding_window is None) != (self.sliding_window_layers == 0):
            raise ValueError(
                f"sliding_window ({self.sliding_window}) and sliding_window_layers ({self.sliding_window_layers}) "
                f"go together: set the window and how many layers use it, or neither"
            )
        if self.rotary_percent is not None and self.position_embedding not in (PositionEmbedding.ROPE, None):
            raise ValueError(
                f"rotary_percent ({self.rotary_percent}) is the share of each head RoPE rotates, but "
                f"position_embedding is {self.position_embedding.value}; set position_embedding: rope or drop "
                f"rotary_percent"
            )
        if (self.rope_scaling is RopeScaling.LLAMA3) != (self.llama3_rope is not None):
            raise ValueError(
                f"rope_scaling ({self.rope_scaling.value if self.rope_scaling else None}) and llama3_rope "
                f"({'set' if self.llama3_rope else None}) go together: Llama 3.1's scaling is `rope_scaling: llama3` "
                f"with `llama3_rope: {{factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, "
                f"original_max_position_embeddings: 8192}}` (its values); set both or neither"
            )
        if self.rope_scaling is RopeScaling.LLAMA3 and self.position_embedding is not PositionEmbedding.ROPE:
            raise ValueError(
                f"rope_scaling ({self.rope_scaling.value}) scales RoPE's frequencies, but position_embedding is "
                f"{self.position_embedding.value if self.position_embedding else None}; set position_embedding: rope "
                f"or drop rope_scaling"
            )
        if self.yarn_rope is not None and self.rope_scaling is not RopeScaling.YARN:
            raise ValueError(
                f"yarn_rope is set but rope_scaling is {self.rope_scaling.value if self.rope_scaling else None}: "
                f"YaRN's factors go with `rope_scaling: yarn`; set it or drop yarn_rope"
            )
        if not self.ffn_kind.gated and (self.glu_linear_offset or self.swiglu_clamp is not None):
            said = (f"glu_linear_offset ({self.glu_linear_offset:g})" if self.glu_linear_offset else
                    f"swiglu_clamp ({self.swiglu_clamp:g})")
            raise ValueError(
                f"{said} acts on a gated MLP's two branches, but ffn_kind is {self.ffn_kind.value}; set ffn_kind: "
                f"quick_geglu or swiglu, or drop it"
            )
        if self.moe is not None and self.moe.num_dense_layers > self.num_layers:
            raise ValueError(
                f"moe.num_dense_layers ({self.moe.num_dense_layers}) > num_layers ({self.num_layers}); "
                f"set it to at most {self.num_layers}"
            )
        return self

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.moe.num_dense_layers

    @property
    def is_moe(self) -> bool:
        return self.moe is not None
