"""Build a ModelSpec from a HuggingFace ``config.json``.

Key names and their defaults follow the transformers configuration classes of each family
(``LlamaConfig``, ``MistralConfig``, ``MixtralConfig``, ``Qwen2Config``, ``Qwen2MoeConfig``,
``Qwen3Config``, ``Qwen3MoeConfig``, ``DeepseekV2Config``, ``DeepseekV3Config``, ``GPT2Config``,
``NemotronConfig``, ``GPTNeoXConfig``, ``GPTJConfig``, ``GptOssConfig``).  Which layers carry experts follows the
families' modeling code:

- Qwen2-MoE / Qwen3-MoE (``modeling_qwen2_moe.py``, ``modeling_qwen3_moe.py``): layer ``i`` is sparse
  when ``i`` is not in ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``.
- DeepSeek-V2 / V3 (``modeling_deepseek.py`` shipped with the checkpoints): layer ``i`` is sparse when
  ``n_routed_experts`` is set, ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``.

ModelSpec can describe dense layers only as a leading block (``moe.num_dense_layers``); any other
pattern is an InputError rather than a silent approximation.  Every failure is an InputError whose one
paragraph names the file, the key, the value and the fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, overload

from pydantic import ValidationError

from placement.errors import InputError
from placement.loaders.errors import format_validation_error
from placement.loaders.files import parse_json, read_bytes
from placement.specs.model import MAX_LAYERS, FfnKind, ModelSpec

DEFAULT_SEQ_LEN_CAP: Final = 8192
"""Cap on the default sequence length taken from ``max_position_embeddings``.

That key is the longest context a checkpoint supports (131072 for Llama 3.1, whose pre-training ran at
8192 per arXiv:2407.21783 §3.4), not a training length; it only seeds ``ModelSpec.default_seq_len``,
which a job's own sequence length overrides.
"""

_DECODER_REQUIRED: Final = MappingProxyType(
    {
        # ModelSpec field: config.json key (LlamaConfig naming, shared by every family below but GPT-2)
        "num_layers": "num_hidden_layers",
        "hidden_size": "hidden_size",
        "ffn_hidden_size": "intermediate_size",
        "num_attention_heads": "num_attention_heads",
        "vocab_size": "vocab_size",
    }
)
_DECODER_OPTIONAL: Final = MappingProxyType({"num_kv_heads": "num_key_value_heads", "head_dim": "head_dim"})
_DECODER_OTHER: Final = MappingProxyType(
    {"tied_embeddings": "tie_word_embeddings", "default_seq_len": "max_position_embeddings"}
)

_MIXTRAL_MOE: Final = MappingProxyType(
    {
        "moe.num_experts": "num_local_experts",
        "moe.top_k": "num_experts_per_tok",
        "moe.expert_ffn_hidden_size": "intermediate_size",
    }
)
_QWEN_MOE: Final = MappingProxyType(
    {
        "moe.num_experts": "num_experts",
        "moe.top_k": "num_experts_per_tok",
        "moe.expert_ffn_hidden_size": "moe_intermediate_size",
    }
)
_QWEN2_SHARED: Final = MappingProxyType({"moe.shared_expert_ffn_hidden_size": "shared_expert_intermediate_size"})
_DEEPSEEK_MOE: Final = MappingProxyType(
    {
        "moe.num_experts": "n_routed_experts",
        "moe.top_k": "num_experts_per_tok",
        "moe.expert_ffn_hidden_size": "moe_intermediate_size",
        "moe.num_shared_experts": "n_shared_experts",
        "moe.num_dense_layers": "first_k_dense_replace",
    }
)
_MLA_KEYS: Final = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_GPT2_KEYS: Final = MappingProxyType(
    {
        "num_layers": "n_layer",
        "hidden_size": "n_embd",
        "ffn_hidden_size": "n_inner",
        "num_attention_heads": "n_head",
        "vocab_size": "vocab_size",
        "default_seq_len": "n_positions",
        "ffn_kind": "activation_function",
        "dropout": "resid_pdrop",
    }
)

GATED_SILU: Final = frozenset({"silu", "swish"})
"""transformers' names of the activation a Llama-style gated MLP (SwiGLU) applies."""
_ACTIVATIONS: Final = MappingProxyType(
    {
        # Names of transformers' ACT2CLS (activations.py) that a non-gated MLP (GPT-2, Nemotron) may use.
        "gelu": FfnKind.GELU,
        "gelu_new": FfnKind.GELU,
        "gelu_fast": FfnKind.GELU,
        "gelu_pytorch_tanh": FfnKind.GELU,
        "gelu_python": FfnKind.GELU,
        "relu": FfnKind.RELU,
        "relu2": FfnKind.SQUARED_RELU,
    }
)


@dataclass(frozen=True)
class _Config:
    """A config.json mapping with typed reads whose errors name the source, the key and the family."""

    data: Mapping[str, Any]
    source: str
    family: str
    defaulted: list[str] = field(default_factory=list)
    """`key value` for each consequential key the config lacks, with the value transformers' class gives it (said in
    the model's source: a user trial's trimmed Qwen3 config priced 30.5 B where Qwen3Config's head_dim makes 32.8 B)."""

    def note_defaults(self, *pairs: tuple[str, object]) -> None:
        """Record each (key, value used) whose key the config lacks or leaves null."""
        for key, value in pairs:
            if self.data.get(key) is None:
                shown = str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) \
                    else str(value)
                self.defaulted.append(f"{key} {shown}")

    def require(self, key: str) -> None:
        """The key must be present (its value may be null where the family gives null a meaning)."""
        if key not in self.data:
            raise InputError(
                f"{self.source}: key `{key}` is missing; the `{self.family}` family needs it to describe the "
                f"model; add it with the value from the model's published config.json"
            )

    def required_int(self, key: str) -> int:
        self.require(key)
        value = self.optional_int(key)
        if value is None:
            raise InputError(
                f"{self.source}: key `{key}` is null; the `{self.family}` family needs a whole number there; "
                f"set it to the value from the model's published config.json"
            )
        return value

    @overload
    def optional_int(self, key: str, default: int) -> int: ...
    @overload
    def optional_int(self, key: str, default: int | None = None) -> int | None: ...
    def optional_int(self, key: str, default: int | None = None) -> int | None:
        """The integer at `key`, or `default` when the key is absent or null."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(
                f"{self.source}: key `{key}` = {value!r} is not a whole number; the `{self.family}` family reads "
                f"it as an integer; write it as a JSON integer"
            )
        return value

    def int_list(self, key: str) -> list[int]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise InputError(
                f"{self.source}: key `{key}` = {value!r} is not a list of layer indices; write it as a JSON "
                f"list of integers, e.g. [0, 1]"
            )
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InputError(
                f"{self.source}: key `{key}` = {value!r} is not a boolean; write JSON true or false"
            )
        return value

    def number(self, key: str, default: float) -> float:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{self.source}: key `{key}` = {value!r} is not a number; write a JSON number")
        if not math.isfinite(value):  # Python's json reads NaN and Infinity; no comparison with them means anything
            raise InputError(f"{self.source}: key `{key}` = {value!r} is not a finite number; write the value the "
                             f"model was trained with")
        return float(value)

    def text(self, key: str, default: str) -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise InputError(f"{self.source}: key `{key}` = {value!r} is not a string; write a JSON string")
        return value


def _seq_len(cfg: _Config, key: str, default: int | None = None) -> dict[str, int | str]:
    """``default_seq_len`` from the context-length key, capped at DEFAULT_SEQ_LEN_CAP (and the cap said:
    `default_seq_len_note`); absent if unknown."""
    value = cfg.optional_int(key, default)
    if value is None:
        return {}
    if value <= DEFAULT_SEQ_LEN_CAP:
        return {"default_seq_len": value}
    return {"default_seq_len": DEFAULT_SEQ_LEN_CAP,
            "default_seq_len_note": f"placement's cap of {DEFAULT_SEQ_LEN_CAP} on the config's {key} {value} (the "
                                    f"context it supports, not a training length)"}


def _activation(cfg: _Config, key: str, default: str) -> FfnKind:
    """The FfnKind of a non-gated MLP from its activation name."""
    name = cfg.text(key, default)
    kind = _ACTIVATIONS.get(name)
    if kind is None:
        known = ", ".join(sorted(_ACTIVATIONS))
        raise InputError(
            f"{cfg.source}: key `{key}` = {name!r} is not an activation this loader maps for the "
            f"`{cfg.family}` family; known: {known}; describe the model as a models/*.yaml file with an "
            f"explicit ffn_kind instead"
        )
    return kind


def _read_decoder(cfg: _Config) -> dict[str, Any]:
    """The fields every Llama-style family spells the same way (gated SwiGLU MLP, untied by default)."""
    fields: dict[str, Any] = {field: cfg.required_int(key) for field, key in _DECODER_REQUIRED.items()}
    fields |= _attention_shape(cfg, fields)
    fields["ffn_kind"] = FfnKind.SWIGLU
    act = cfg.text("hidden_act", "silu")
    if cfg.family != "nemotron" and act not in GATED_SILU:  # Nemotron reads its own non-gated activation
        raise InputError(
            f"{cfg.source}: key `hidden_act` = {act!r}: the `{cfg.family}` family's gated MLP is priced as SwiGLU "
            f"(SiLU: {', '.join(sorted(GATED_SILU))}), and a gated MLP with another activation is no kind ModelSpec "
            f"has; describe the model as a models/*.yaml file with the nearest ffn_kind instead")
    fields["tied_embeddings"] = cfg.flag("tie_word_embeddings", default=False)
    factor = _partial_rotary(cfg)
    if cfg.family != "nemotron" and factor is not None and factor != 1.0:  # Nemotron reads its own
        raise InputError(
            f"{cfg.source}: key `partial_rotary_factor` = {factor:g}: the `{cfg.family}` family's attention rotates "
            f"every dimension of each head (transformers apply_rotary_pos_emb multiplies the whole head by cos and "
            f"sin), so the launch files would train full RoPE; describe the model as a models/*.yaml file with "
            f"rotary_percent: {factor:g} (Megatron-LM --rotary-percent), or drop the key if the model rotates whole "
            f"heads")
    window = cfg.optional_int("sliding_window")
    if window is not None and cfg.family in ("mistral", "mixtral"):
        # Mistral's and Mixtral's window applies to every layer (transformers MistralAttention, MixtralAttention:
        # one sliding_window for all)
        fields |= {"sliding_window": window, "sliding_window_layers": fields["num_layers"]}
    elif window is not None and cfg.flag("use_sliding_window", default=cfg.family not in ("qwen2", "qwen2_moe",
                                                                                          "qwen3", "qwen3_moe")):
        raise InputError(
            f"{cfg.source}: key `sliding_window` = {window} with sliding-window attention on: the `{cfg.family}` "
            f"loader does not read which layers use it; describe the model as a models/*.yaml file with "
            f"sliding_window and sliding_window_layers, or set `use_sliding_window` false if the model does not use it")
    return fields | _seq_len(cfg, "max_position_embeddings")


KV_HEADS_DEFAULT: Final = MappingProxyType({"mistral": 8, "mixtral": 8, "qwen2": 32, "qwen2_moe": 16, "qwen3": 32,
                                             "qwen3_moe": 4, "gpt_oss": 8})
"""`num_key_value_heads` where a config.json lacks it, as the family's transformers config class defaults it (a class
constant, not the config's own head count: a Qwen2 config of 28 heads without the key gets 32); the families not
listed (Llama, Nemotron) take the query heads' count (multi-head attention).  transformers 5.25.0 and 4.57.6
configuration_<family>.py agree (MistralConfig 8, MixtralConfig 8, Qwen2Config 32, Qwen2MoeConfig 16, Qwen3Config 32,
Qwen3MoeConfig 4, GptOssConfig 8, LlamaConfig None -> num_attention_heads)."""
HEAD_DIM_DEFAULT: Final = MappingProxyType({"qwen3": 128, "gpt_oss": 64})
"""`head_dim` where a config.json lacks it, as the family's transformers config class defaults it (Qwen3Config 128,
GptOssConfig 64, in 5.25.0 and 4.57.6); the families not listed take hidden_size / num_attention_heads (Qwen3MoeConfig
has no head_dim: its attention falls back to hidden // heads)."""


def _attention_shape(cfg: _Config, fields: dict[str, Any]) -> dict[str, Any]:
    """num_kv_heads and head_dim from the config, else the family's transformers default (said in the source)."""
    kv = cfg.optional_int("num_key_value_heads", KV_HEADS_DEFAULT.get(cfg.family))
    head_dim = cfg.optional_int("head_dim", HEAD_DIM_DEFAULT.get(cfg.family))
    heads, hidden = fields["num_attention_heads"], fields["hidden_size"]
    if cfg.family.startswith("deepseek"):  # MLA sets its own per-head sizes (_read_deepseek)
        return {"num_kv_heads": kv, "head_dim": head_dim}
    cfg.note_defaults(("num_key_value_heads", kv if kv is not None else f"{heads} (the query heads)"))
    if cfg.family in HEAD_DIM_DEFAULT:  # elsewhere hidden_size / num_attention_heads, what every such config means
        derived = hidden / heads if heads else 0
        cfg.note_defaults(("head_dim", f"{head_dim}" if head_dim == derived else
                           f"{head_dim} (not hidden_size / num_attention_heads = {derived:g})"))
    return {"num_kv_heads": kv, "head_dim": head_dim}


def _brief(layers: list[int]) -> str:
    """A layer list short enough for a one-paragraph message."""
    if len(layers) <= 8:
        return str(layers)
    return f"[{', '.join(map(str, layers[:6]))}, ..., {layers[-1]}] ({len(layers)} layers)"


def _with_moe(
    cfg: _Config, fields: dict[str, Any], moe: dict[str, Any], dense_layers: list[int], pattern: str
) -> dict[str, Any]:
    """Attach `moe` when the dense layers form a leading block; all-dense configs stay dense models."""
    num_layers = fields["num_layers"]
    if len(dense_layers) >= num_layers:
        return fields
    if dense_layers != list(range(len(dense_layers))):
        raise InputError(
            f"{cfg.source}: the dense (non-MoE) layers are {_brief(dense_layers)} of {num_layers}, from "
            f"{pattern}; ModelSpec describes dense layers only as a leading block (moe.num_dense_layers), so "
            f"this pattern cannot be represented exactly; describe the model as a models/*.yaml file with "
            f"the nearest leading block instead"
        )
    return fields | {"moe": moe | {"num_dense_layers": len(dense_layers)}}


def _layer_indices(cfg: _Config, num_layers: int) -> range:
    """The layers a MoE reader walks to find the dense ones; a count past ModelSpec's bound is refused before
    the walk (a billion layers took minutes and gigabytes)."""
    if num_layers > MAX_LAYERS:
        raise InputError(
            f"{cfg.source}: key `num_hidden_layers` = {num_layers} is more than the {MAX_LAYERS:,} layers "
            f"placement plans (published models have a few hundred at most); check the value"
        )
    return range(num_layers)


def _read_dense(cfg: _Config) -> dict[str, Any]:
    """llama, mistral, qwen2, qwen3: the decoder fields and nothing else."""
    return _read_decoder(cfg)


def _read_mixtral(cfg: _Config) -> dict[str, Any]:
    """Mixtral: every layer is MoE and each expert has the full ``intermediate_size``."""
    fields = _read_decoder(cfg)
    moe = {
        "num_experts": cfg.required_int("num_local_experts"),
        "top_k": cfg.required_int("num_experts_per_tok"),
        "expert_ffn_hidden_size": fields["ffn_hidden_size"],
    } | _SOFTMAX_AFTER_TOPK
    return fields | {"moe": moe}


def _read_qwen_moe(cfg: _Config, *, shared_expert: bool) -> dict[str, Any]:
    """Qwen2-MoE (one shared expert of ``shared_expert_intermediate_size``) and Qwen3-MoE (none)."""
    fields = _read_decoder(cfg)
    moe: dict[str, Any] = {field.removeprefix("moe."): cfg.required_int(key) for field, key in _QWEN_MOE.items()}
    # softmax over all experts, then the top-k, renormalized where `norm_topk_prob` (Qwen2MoeConfig and Qwen3MoeConfig
    # default false: modeling_qwen2_moe.py / modeling_qwen3_moe.py SparseMoeBlock); no bias, no scaling
    moe |= {"router_score_function": "softmax", "router_topk_normalized": cfg.flag("norm_topk_prob", default=False),
            "router_expert_bias": False, "router_topk_scaling_factor": 1.0}
    cfg.note_defaults(("norm_topk_prob", False))
    if shared_expert:
        width = cfg.optional_int("shared_expert_intermediate_size", default=0)
        if width:
            moe |= {"num_shared_experts": 1, "shared_expert_ffn_hidden_size": width}
    step = cfg.optional_int("decoder_sparse_step", default=1)
    if step < 1:
        raise InputError(
            f"{cfg.source}: key `decoder_sparse_step` = {step} must be at least 1 (every step-th layer is "
            f"MoE); use 1 for an all-MoE stack"
        )
    dense_only = set(cfg.int_list("mlp_only_layers"))
    dense = [i for i in _layer_indices(cfg, fields["num_layers"]) if i in dense_only or (i + 1) % step != 0]
    pattern = f"`decoder_sparse_step` = {step} and `mlp_only_layers` = {sorted(dense_only)}"
    return _with_moe(cfg, fields, moe, dense, pattern)


def _read_deepseek(cfg: _Config) -> dict[str, Any]:
    """DeepSeek-V2/V3: multi-head latent attention and fine-grained MoE after a dense block."""
    fields = _read_decoder(cfg)
    fields |= {"num_kv_heads": None, "head_dim": None}  # MLA sets the per-head sizes itself
    for key in _MLA_KEYS:
        cfg.require(key)
    fields["mla"] = {key: cfg.optional_int(key) if key == "q_lora_rank" else cfg.required_int(key) for key in _MLA_KEYS}
    # DeepSeek-V3's multi-token-prediction module (its checkpoint's layer 61): the recipe's mtp_layers by default
    mtp = cfg.optional_int("num_nextn_predict_layers", 0)
    if not 0 <= mtp <= 8:
        raise InputError(f"{cfg.source}: key `num_nextn_predict_layers` = {mtp}: placement prices 0 to 8 "
                         f"multi-token-prediction modules (DeepSeek-V3 has 1); write the model's own count")
    fields["mtp_modules"] = mtp
    num_experts = cfg.optional_int("n_routed_experts")
    if num_experts is None:  # modeling_deepseek.py: no routed experts means a dense model
        return fields
    cfg.require("n_shared_experts")  # null is allowed and means none
    first_dense = cfg.required_int("first_k_dense_replace")
    if not 0 <= first_dense < fields["num_layers"]:
        raise InputError(
            f"{cfg.source}: key `first_k_dense_replace` = {first_dense}: the dense layers before the MoE ones must "
            f"number 0 to num_hidden_layers - 1 = {fields['num_layers'] - 1}, or the model has no MoE layer; "
            f"fix the number (or drop n_routed_experts for a dense model)"
        )
    moe = {
        "num_experts": num_experts,
        "top_k": cfg.required_int("num_experts_per_tok"),
        "expert_ffn_hidden_size": cfg.required_int("moe_intermediate_size"),
        "num_shared_experts": cfg.optional_int("n_shared_experts", default=0),
    }
    moe |= _deepseek_router(cfg)
    groups, per_token = cfg.optional_int("n_group"), cfg.optional_int("topk_group")
    if groups is not None and per_token is not None and groups > 1:  # group-limited routing
        moe |= {"num_expert_groups": groups, "groups_per_token": per_token}
    freq = cfg.optional_int("moe_layer_freq", default=1)
    if freq < 1:
        raise InputError(
            f"{cfg.source}: key `moe_layer_freq` = {freq} must be at least 1 (every freq-th layer is MoE); "
            f"use 1 for MoE in every layer after the dense block"
        )
    dense = [i for i in _layer_indices(cfg, fields["num_layers"]) if i < first_dense or i % freq != 0]
    pattern = f"`first_k_dense_replace` = {first_dense} and `moe_layer_freq` = {freq}"
    return _with_moe(cfg, fields, moe, dense, pattern)


_SOFTMAX_AFTER_TOPK: Final = MappingProxyType({"router_score_function": "softmax", "router_topk_normalized": True,
                                               "router_expert_bias": False, "router_topk_scaling_factor": 1.0})
"""Mixtral's and GPT-OSS's router: the top-k of the logits, softmax over those k (renormalized weights), no bias and
no scaling (modeling_mixtral.py MixtralSparseMoeBlock, modeling_gpt_oss.py GptOssTopKRouter)."""
DEEPSEEK_ROUTER_DEFAULTS: Final = MappingProxyType({
    # transformers' defaults where a DeepSeek config.json lacks the key (5.25.0 and 4.57.6): V2 scores by softmax
    # (modeling_deepseek_v2.py), keeps the raw top-k weights, topk_method greedy, scales by 1; V3 scores by sigmoid
    # with the e_score_correction_bias (modeling_deepseek_v3.py), renormalizes and scales by 2.5
    "deepseek_v2": {"scoring_func": "softmax", "norm_topk_prob": False, "topk_method": "greedy",
                    "routed_scaling_factor": 1.0},
    "deepseek_v3": {"scoring_func": "sigmoid", "norm_topk_prob": True, "topk_method": "noaux_tc",
                    "routed_scaling_factor": 2.5},
})
_DEEPSEEK_SCORES: Final = ("softmax", "sigmoid")
_DEEPSEEK_TOPK_METHODS: Final = ("greedy", "group_limited_greedy", "noaux_tc")


def _deepseek_router(cfg: _Config) -> dict[str, Any]:
    """How a DeepSeek router scores and weighs its experts (the checkpoints' modeling_deepseek.py MoEGate):
    `scoring_func`, `norm_topk_prob`, `routed_scaling_factor`, and an expert bias for `topk_method` noaux_tc (the
    e_score_correction_bias); keys the config lacks take DEEPSEEK_ROUTER_DEFAULTS, said in the model's source."""
    default = DEEPSEEK_ROUTER_DEFAULTS[cfg.family]
    score = cfg.text("scoring_func", default["scoring_func"])
    if score not in _DEEPSEEK_SCORES:
        raise InputError(f"{cfg.source}: key `scoring_func` = {score!r}: DeepSeek routers score by "
                         f"{' or '.join(_DEEPSEEK_SCORES)}, the score functions the launch files can state; write the "
                         f"model's own value")
    method = cfg.text("topk_method", default["topk_method"])
    if method not in _DEEPSEEK_TOPK_METHODS:
        raise InputError(f"{cfg.source}: key `topk_method` = {method!r} is not one of "
                         f"{', '.join(_DEEPSEEK_TOPK_METHODS)} (modeling_deepseek.py MoEGate); write the model's own "
                         f"value")
    scaling = cfg.number("routed_scaling_factor", default["routed_scaling_factor"])
    if scaling <= 0:
        raise InputError(f"{cfg.source}: key `routed_scaling_factor` = {scaling:g} must be positive (it multiplies "
                         f"the routed experts' weights); write the model's own value")
    cfg.note_defaults(("scoring_func", score), ("topk_method", method), ("norm_topk_prob", default["norm_topk_prob"]),
                      ("routed_scaling_factor", scaling))
    return {"router_score_function": score,
            "router_topk_normalized": cfg.flag("norm_topk_prob", default=default["norm_topk_prob"]),
            "router_expert_bias": method == "noaux_tc", "router_topk_scaling_factor": scaling}


def _read_gpt2(cfg: _Config) -> dict[str, Any]:
    """GPT-2 naming, also used to describe GPT-3-style models (GPT2Config defaults: 4h MLP, gelu_new,
    tied embeddings, residual dropout 0.1, 1024 positions)."""
    hidden = cfg.required_int("n_embd")
    return {
        "num_layers": cfg.required_int("n_layer"),
        "hidden_size": hidden,
        "ffn_hidden_size": cfg.optional_int("n_inner", default=4 * hidden),
        "num_attention_heads": cfg.required_int("n_head"),
        "vocab_size": cfg.required_int("vocab_size"),
        "ffn_kind": _activation(cfg, "activation_function", default="gelu_new"),
        "tied_embeddings": cfg.flag("tie_word_embeddings", default=True),
        "dropout": cfg.number("resid_pdrop", default=0.1) > 0,
    } | _seq_len(cfg, "n_positions", default=1024)


def _read_gpt_neox(cfg: _Config) -> dict[str, Any]:
    """GPT-NeoX / Pythia: Llama-style sizes, a non-gated MLP (``hidden_act``), biased projections, and a parallel
    residual unless ``use_parallel_residual`` is false, RoPE on ``rotary_pct`` of each head (``rope_parameters``
    ``partial_rotary_factor`` in transformers 5; GPTNeoXConfig defaults: gelu, true, 0.25, untied, 2048 positions,
    dropout 0)."""
    fields: dict[str, Any] = {field: cfg.required_int(key) for field, key in _DECODER_REQUIRED.items()}
    return fields | {
        "ffn_kind": _activation(cfg, "hidden_act", default="gelu"),
        "tied_embeddings": cfg.flag("tie_word_embeddings", default=False),
        "dropout": max(cfg.number("hidden_dropout", default=0.0), cfg.number("attention_dropout", default=0.0)) > 0,
        "parallel_residual": cfg.flag("use_parallel_residual", default=True),
        "rotary_percent": _rope_parameter(cfg.data, "partial_rotary_factor") or cfg.number("rotary_pct", default=0.25),
    } | _seq_len(cfg, "max_position_embeddings", default=2048)


def _read_gptj(cfg: _Config) -> dict[str, Any]:
    """GPT-J: GPT-2 key names, and attention and MLP side by side on one LayerNorm's output (a parallel residual,
    always: modeling_gptj.py GPTJBlock), RoPE on the first ``rotary_dim`` of each head's dimensions (GPTJConfig
    defaults: 4h MLP, gelu_new, rotary_dim 64, untied, 2048 positions, dropout 0)."""
    hidden, heads = cfg.required_int("n_embd"), cfg.required_int("n_head")
    rotary = cfg.optional_int("rotary_dim", default=64)
    head_dim = hidden // heads if heads and hidden % heads == 0 else None
    return {
        "num_layers": cfg.required_int("n_layer"),
        "hidden_size": hidden,
        "ffn_hidden_size": cfg.optional_int("n_inner", default=4 * hidden),
        "num_attention_heads": heads,
        "vocab_size": cfg.required_int("vocab_size"),
        "ffn_kind": _activation(cfg, "activation_function", default="gelu_new"),
        "tied_embeddings": cfg.flag("tie_word_embeddings", default=False),
        "dropout": max(cfg.number("resid_pdrop", default=0.0), cfg.number("attn_pdrop", default=0.0)) > 0,
        "parallel_residual": True,
        "rotary_percent": min(rotary / head_dim, 1.0) if head_dim and rotary else None,
    } | _seq_len(cfg, "n_positions", default=2048)


def _rope_parameter(data: Mapping[str, Any], key: str) -> float | None:
    """A number from `rope_parameters` (transformers 5's spelling of rope_theta, partial_rotary_factor and the
    scaling), else None."""
    params = data.get("rope_parameters")
    value = params.get(key) if isinstance(params, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


GPT_OSS_ALPHA: Final = 1.702
"""The sigmoid gain of GPT-OSS's gated quick-GELU (HF GptOssConfig `swiglu_alpha`, modeling_gpt_oss.py
GptOssExperts); Megatron-Core's quick_gelu fixes it (fused_bias_geglu.py: `y * torch.sigmoid(1.702 * y)`)."""
GPT_OSS_YARN: Final = MappingProxyType({"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                        "truncate": False, "original_max_position_embeddings": 4096})
"""GptOssConfig's RoPE scaling when a config states none (transformers configuration_gpt_oss.py __post_init__;
openai/gpt-oss-120b's config.json states the same)."""
_GPT_OSS_KEYS: Final = MappingProxyType({**_DECODER_REQUIRED, **_DECODER_OPTIONAL, **_DECODER_OTHER,
                                         **_MIXTRAL_MOE, "sliding_window_layers": "layer_types",
                                         "swiglu_clamp": "swiglu_limit"})


def _read_gpt_oss(cfg: _Config) -> dict[str, Any]:
    """GPT-OSS (transformers GptOssConfig, modeling_gpt_oss.py): every layer MoE with experts of
    ``intermediate_size``; each expert's MLP is gate * sigmoid(swiglu_alpha * gate) * (up + 1) with the gate clamped
    at most ``swiglu_limit`` and up within +-it (quick-GeGLU, offset 1; ``hidden_act`` is not read by that code);
    every attention head has a learnable sink logit; ``layer_types`` says which layers attend within
    ``sliding_window`` (GptOssConfig's default: every other one from the first)."""
    fields: dict[str, Any] = {field: cfg.required_int(key) for field, key in _DECODER_REQUIRED.items()}
    fields |= _attention_shape(cfg, fields)
    alpha = cfg.number("swiglu_alpha", GPT_OSS_ALPHA)
    if alpha != GPT_OSS_ALPHA:
        raise InputError(
            f"{cfg.source}: key `swiglu_alpha` = {alpha:g}: Megatron-LM's --quick-geglu fixes the sigmoid's gain at "
            f"{GPT_OSS_ALPHA} (fused_bias_geglu.py quick_gelu), so the launch files would train another activation; "
            f"use GPT-OSS's {GPT_OSS_ALPHA}, or describe the model as a models/*.yaml file and change the gain in "
            f"your framework yourself")
    fields |= {"ffn_kind": FfnKind.QUICK_GEGLU, "glu_linear_offset": 1.0, "attention_sinks": True,
               "tied_embeddings": cfg.flag("tie_word_embeddings", default=False),
               "moe": {"num_experts": cfg.required_int("num_local_experts"),
                       "top_k": cfg.required_int("num_experts_per_tok"),
                       "expert_ffn_hidden_size": fields["ffn_hidden_size"]} | _SOFTMAX_AFTER_TOPK}
    window = cfg.optional_int("sliding_window")
    types = cfg.data.get("layer_types")
    if types is None:  # GptOssConfig.__post_init__: sliding on layers 0, 2, 4, ...
        windowed = (fields["num_layers"] + 1) // 2
    elif isinstance(types, list) and all(t in ("sliding_attention", "full_attention") for t in types) \
            and len(types) == fields["num_layers"]:
        windowed = types.count("sliding_attention")
    else:
        raise InputError(
            f"{cfg.source}: key `layer_types` = {types!r} is not a list of {fields['num_layers']} "
            f"'sliding_attention' / 'full_attention' entries (one per layer of `num_hidden_layers`); write the "
            f"model's published list")
    if window is not None and windowed:
        fields |= {"sliding_window": window, "sliding_window_layers": windowed}
    return fields | _seq_len(cfg, "max_position_embeddings")


NEMOTRON_PARTIAL_ROTARY: Final = 0.5
"""NemotronConfig's `partial_rotary_factor` default (transformers configuration_nemotron.py): RoPE on half of each
head, the rest passed through (modeling_nemotron.py apply_rotary_pos_emb splits `rot_dim`)."""


def _read_nemotron(cfg: _Config) -> dict[str, Any]:
    """Nemotron-4: Llama-style keys, but a non-gated MLP whose activation is ``hidden_act`` (relu2), and RoPE on
    ``partial_rotary_factor`` of each head (NemotronConfig's default 0.5)."""
    fields = _read_decoder(cfg) | {"ffn_kind": _activation(cfg, "hidden_act", default="relu2")}
    factor = _partial_rotary(cfg)
    if factor is None:
        factor = NEMOTRON_PARTIAL_ROTARY
        cfg.note_defaults(("partial_rotary_factor", f"{NEMOTRON_PARTIAL_ROTARY}"))
    if not 0.0 < factor <= 1.0:
        raise InputError(f"{cfg.source}: key `partial_rotary_factor` = {factor:g} is not a share of a head in (0, 1]; "
                         f"write the model's published value (Nemotron-4: 0.5)")
    return fields | ({"rotary_percent": factor} if factor < 1.0 else {})


def _partial_rotary(cfg: _Config) -> float | None:
    """`partial_rotary_factor`, top-level or in transformers 5's `rope_parameters`; None where the config has none."""
    return _rope_parameter(cfg.data, "partial_rotary_factor") or cfg.number("partial_rotary_factor", None)


@dataclass(frozen=True)
class _Family:
    """How one ``model_type`` is read, and which config key each ModelSpec field comes from."""

    read: Callable[[_Config], dict[str, Any]]
    keys: Mapping[str, str]


_DECODER_KEYS: Final = {**_DECODER_REQUIRED, **_DECODER_OPTIONAL, **_DECODER_OTHER}

FAMILIES: Final[Mapping[str, _Family]] = MappingProxyType(
    {
        "llama": _Family(_read_dense, _DECODER_KEYS),
        "mistral": _Family(_read_dense, _DECODER_KEYS),
        "mixtral": _Family(_read_mixtral, {**_DECODER_KEYS, **_MIXTRAL_MOE}),
        "qwen2": _Family(_read_dense, _DECODER_KEYS),
        "qwen2_moe": _Family(
            lambda cfg: _read_qwen_moe(cfg, shared_expert=True), {**_DECODER_KEYS, **_QWEN_MOE, **_QWEN2_SHARED}
        ),
        "qwen3": _Family(_read_dense, _DECODER_KEYS),
        "qwen3_moe": _Family(lambda cfg: _read_qwen_moe(cfg, shared_expert=False), {**_DECODER_KEYS, **_QWEN_MOE}),
        "deepseek_v2": _Family(_read_deepseek, {**_DECODER_KEYS, **_DEEPSEEK_MOE}),
        "deepseek_v3": _Family(_read_deepseek, {**_DECODER_KEYS, **_DEEPSEEK_MOE}),
        "gpt2": _Family(_read_gpt2, _GPT2_KEYS),
        "nemotron": _Family(_read_nemotron, {**_DECODER_KEYS, "ffn_kind": "hidden_act"}),
        "gptj": _Family(_read_gptj, {**_GPT2_KEYS, "dropout": "resid_pdrop", "rotary_percent": "rotary_dim"}),
        "gpt_neox": _Family(_read_gpt_neox, {**_DECODER_REQUIRED, "ffn_kind": "hidden_act",
                                             "tied_embeddings": "tie_word_embeddings",
                                             "default_seq_len": "max_position_embeddings",
                                             "parallel_residual": "use_parallel_residual",
                                             "rotary_percent": "rotary_pct"}),
        "gpt_oss": _Family(_read_gpt_oss, _GPT_OSS_KEYS),
    }
)
"""Supported ``model_type`` values."""

ARCHITECTURES: Final[Mapping[str, str]] = MappingProxyType(
    {
        # The `architectures` entry transformers writes -> model_type; used when model_type is absent or unknown.
        "LlamaForCausalLM": "llama",
        "MistralForCausalLM": "mistral",
        "MixtralForCausalLM": "mixtral",
        "Qwen2ForCausalLM": "qwen2",
        "Qwen2MoeForCausalLM": "qwen2_moe",
        "Qwen3ForCausalLM": "qwen3",
        "Qwen3MoeForCausalLM": "qwen3_moe",
        "DeepseekV2ForCausalLM": "deepseek_v2",
        "DeepseekV3ForCausalLM": "deepseek_v3",
        "GPT2LMHeadModel": "gpt2",
        "NemotronForCausalLM": "nemotron",
        "GPTNeoXForCausalLM": "gpt_neox",
        "GPTJForCausalLM": "gptj",
        "GptOssForCausalLM": "gpt_oss",
    }
)


def _family_of(data: Mapping[str, Any], source: str) -> tuple[str, str | None]:
    """The family by ``model_type``, else by the first known ``architectures`` entry, with a note saying so (a
    remote-code `model_type` often means a modified block, and a user trial's `llama_custom` was printed as llama)."""
    model_type = data.get("model_type")
    if isinstance(model_type, str) and model_type in FAMILIES:
        return model_type, None
    architectures = data.get("architectures")
    names = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    for name in names:
        if name in ARCHITECTURES:
            said = "no `model_type`" if model_type is None else f"`model_type` {model_type!r} is not a family " \
                                                                  f"placement reads"
            return ARCHITECTURES[name], (f"{said}; read as {ARCHITECTURES[name]} from `architectures` {name}, the "
                                         f"stock block of that family (a modified block is priced as the stock one)")
    _not_a_config(data, source)
    arch = f"`architectures` = {names!r}" if names else "no `architectures`"
    said = (f"no `model_type`, and {arch}, name a family this loader reads" if model_type is None
            else f"`model_type` = {model_type!r} (with {arch}) is not a family this loader reads")
    raise InputError(
        f"{source}: {said}; supported model_type values: "
        f"{', '.join(sorted(FAMILIES))}; set `model_type` to the family the model follows (placement then prices "
        f"that family's stock block: what the model adds, extra norms or another MLP, is not priced), or describe "
        f"the model as a models/*.yaml file with the fields of ModelSpec"
    )


_OTHER_HF_FILES: Final = (
    # (a key only that file has, what it is) for the JSON files a Hub folder holds beside config.json
    ("weight_map", "a safetensors weights index (model.safetensors.index.json)"),
    ("tokenizer_class", "a tokenizer config (tokenizer_config.json)"),
    ("added_tokens_decoder", "a tokenizer config (tokenizer_config.json)"),
    ("do_sample", "a generation config (generation_config.json)"),
    ("max_new_tokens", "a generation config (generation_config.json)"),
)


def _not_a_config(data: Mapping[str, Any], source: str) -> None:
    """The InputError for a JSON file that is not a model config this loader reads, where it can say what the file
    is: another of a Hub folder's JSON files, or a multimodal wrapper whose language model is nested."""
    for key, what in _OTHER_HF_FILES:
        if key in data and "num_hidden_layers" not in data:
            raise InputError(f"{source}: this is {what}, not the model's config.json (it has `{key}`, and no "
                             f"model sizes); give the config.json beside it")
    text = data.get("text_config")
    if isinstance(text, Mapping):
        inner = text.get("model_type")
        readable = isinstance(inner, str) and inner in FAMILIES
        fix = (f"its model_type {inner!r} is a family placement reads: save the `text_config` object as a "
               f"config.json of its own to plan the language model" if readable else
               f"its model_type {inner!r} is not a family placement reads either; describe the language model as a "
               f"models/*.yaml file with the fields of ModelSpec")
        raise InputError(f"{source}: a multimodal wrapper (model_type {data.get('model_type')!r}): the language model "
                         f"is nested in `text_config`, which placement does not read in place; {fix}")


def _key_hint(message: str, keys: Mapping[str, str]) -> str:
    """Name the config.json key behind each ModelSpec field the message mentions, where they differ."""
    named = [
        f"`{field}` is `{key}`"
        for field, key in keys.items()
        if field != key and re.search(rf"(?<![\w.]){re.escape(field)}\b", message)
    ]
    return f" (In config.json terms: {', '.join(named)}.)" if named else ""


CONFIG_CLASSES: Final = MappingProxyType({
    "llama": "LlamaConfig", "mistral": "MistralConfig", "mixtral": "MixtralConfig", "qwen2": "Qwen2Config",
    "qwen2_moe": "Qwen2MoeConfig", "qwen3": "Qwen3Config", "qwen3_moe": "Qwen3MoeConfig",
    "deepseek_v2": "DeepseekV2Config", "deepseek_v3": "DeepseekV3Config", "gpt2": "GPT2Config",
    "nemotron": "NemotronConfig", "gptj": "GPTJConfig", "gpt_neox": "GPTNeoXConfig", "gpt_oss": "GptOssConfig"})
"""The transformers configuration class of each family, whose defaults fill keys a config.json lacks."""


def model_from_hf_config(data: Mapping[str, Any], name: str, *, source: str | None = None) -> ModelSpec:
    """The ModelSpec described by a parsed HuggingFace config.json.

    `name` becomes ``ModelSpec.name``; `source` (a file path, say) prefixes every error message and is
    recorded in ``ModelSpec.source``.
    """
    where = source or f"HuggingFace config of {name!r}"
    model_type, fallback = _family_of(data, where)
    family = FAMILIES[model_type]
    if model_type == "gpt_oss" and data.get("rope_scaling") is None and data.get("rope_parameters") is None:
        data = {**data, "rope_scaling": GPT_OSS_YARN}  # what GptOssConfig runs without one
    cfg = _Config(data, where, model_type)
    fields = family.read(cfg) | _architecture(data, model_type, cfg.source)
    fields |= _rope_scaling(data, where)
    said = [fallback] if fallback else []
    if cfg.defaulted:
        said.append(f"keys it lacks, as transformers' {CONFIG_CLASSES[model_type]} defaults them: "
                    f"{', '.join(cfg.defaulted)}")
    source_text = f"HuggingFace config.json (model_type {model_type}): {where}" + "".join(f"; {s}" for s in said)
    try:
        return ModelSpec.model_validate({"name": name, **fields, "source": source_text})
    except ValidationError as err:
        message = format_validation_error(err, where)
        raise InputError(message + _key_hint(message, {**family.keys, "llama3_rope": "rope_scaling",
                                                        "yarn_rope": "rope_scaling"})) from None


ROPE_SCALING_READ: Final = ("yarn", "llama3")
"""The `rope_scaling` types this loader carries into the model spec; any other is refused (a scaling the launch files
cannot be told would be trained as plain RoPE)."""
_LLAMA3_ROPE_KEYS: Final = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
"""transformers `_compute_llama3_parameters` reads all four (modeling_rope_utils.py); Llama3RopeSpec has the same
names."""
_YARN_OPTIONAL: Final = ("beta_fast", "beta_slow", "mscale", "mscale_all_dim")
"""YaRN keys transformers `_compute_yarn_parameters` reads beside `factor` and `original_max_position_embeddings`
(betas default 32 and 1, `truncate` true); YarnRopeSpec has the same names."""


def _scaling_number(where: str, key: str, name: str, value: object, needs: str) -> float:
    """`value` of `key.name` if it is a finite JSON number, else the InputError saying what the scaling `needs`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{where}: key `{key}.{name}` = {value!r}: {needs}")
    return value


def _rope_scaling(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`rope_scaling` (transformers 4; transformers 5 spells it `rope_parameters`, with rope_theta beside it) as
    ModelSpec's rope_scaling and llama3_rope: yarn, llama3 (Llama 3.1) or none; any other type is an InputError
    rather than plain RoPE in the files."""
    key, scaling = "rope_scaling", data.get("rope_scaling")
    params = data.get("rope_parameters")
    if scaling is None and isinstance(params, Mapping):
        key, scaling = "rope_parameters", params
    if scaling is None:
        return {}
    if not isinstance(scaling, Mapping):
        raise InputError(f"{where}: key `{key}` = {scaling!r} is not a JSON object; write the model's published "
                         f"`{key}` object (or null for plain RoPE)")
    type_key = "rope_type" if "rope_type" in scaling else "type"
    kind = scaling.get(type_key, "default" if key == "rope_parameters" else None)
    if kind == "default":  # transformers' name for plain RoPE
        return {}
    if kind == "yarn":
        return {"rope_scaling": "yarn", "yarn_rope": _yarn_factors(data, key, scaling, where)}
    if kind != "llama3":
        raise InputError(
            f"{where}: key `{key}.{type_key}` = {kind!r}: placement reads the RoPE scaling types "
            f"{', '.join(ROPE_SCALING_READ)}, and writes only those into the launch files; a scaling they cannot be "
            f"told would be trained as plain RoPE, another positional encoding than this config's; to plan it as plain "
            f"RoPE (the same cost: the scaling changes the frequencies, not the FLOPs), remove `{key}` from a copy of "
            f"config.json and set the scaling in your framework yourself, or describe the model as a models/*.yaml "
            f"file")
    needs = (f"Llama 3.1's RoPE scaling (`{type_key}` llama3) needs {', '.join(_LLAMA3_ROPE_KEYS)} as numbers; write "
             f"the model's published value (Llama 3.1: factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0, "
             f"original_max_position_embeddings 8192)")
    factors = {name: _scaling_number(where, key, name, scaling.get(name), needs) for name in _LLAMA3_ROPE_KEYS}
    return {"rope_scaling": "llama3", "llama3_rope": factors, "position_embedding": "rope"}


def _yarn_factors(data: Mapping[str, Any], key: str, scaling: Mapping[str, Any], where: str) -> dict[str, Any]:
    """YaRN's numbers as transformers reads them (`_compute_yarn_parameters`): `factor`, the original context
    (`original_max_position_embeddings`, else the config's `max_position_embeddings`, as transformers 4 falls back),
    the betas and mscales where stated, `truncate` (default true); `attention_factor`, which no launch file can
    state, is refused."""
    def number(name: str, value: object) -> float:
        return _scaling_number(where, key, name, value, "YaRN's RoPE scaling needs it as a number; write the model's "
                               "published value (GPT-OSS: factor 32.0, original_max_position_embeddings 4096, "
                               "beta_fast 32.0, beta_slow 1.0)")

    if "attention_factor" in scaling:
        raise InputError(
            f"{where}: key `{key}.attention_factor` = {scaling['attention_factor']!r}: no launch file placement writes "
            f"can set YaRN's cos/sin scale directly (Megatron-LM derives it from the factor and the mscales); remove "
            f"it from a copy of config.json to plan with the derived scale, or set it in your framework yourself")
    original = scaling.get("original_max_position_embeddings", data.get("max_position_embeddings"))
    out: dict[str, Any] = {"factor": number("factor", scaling.get("factor")),
                           "original_max_position_embeddings": number("original_max_position_embeddings", original)}
    out |= {name: number(name, scaling[name]) for name in _YARN_OPTIONAL if scaling.get(name) is not None}
    truncate = scaling.get("truncate", True)
    if not isinstance(truncate, bool):
        raise InputError(f"{where}: key `{key}.truncate` = {truncate!r} is not a boolean; write JSON true or false")
    return out | {"truncate": truncate}


_LAYERNORM_KEYS = ("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon", "norm_eps")
_UNBIASED_FAMILIES = frozenset({"llama", "mistral", "mixtral", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3"})
"""Families whose projections have no bias where the config.json states no attention_bias / mlp_bias: transformers'
LlamaConfig, Qwen3Config, Qwen3MoeConfig, DeepseekV2Config and DeepseekV3Config default attention_bias (and Llama's
mlp_bias) to False, and MistralAttention / MistralMLP and Mixtral's build every linear with bias=False."""


def _architecture(data: Mapping[str, Any], model_type: str, where: str = "config.json") -> dict[str, Any]:
    """The architecture fields only the emitted model arguments use, from the keys HF configs spell the same
    way in every family; a key the config lacks leaves its field unstated (None), never guessed."""
    out: dict[str, Any] = {}
    if "rms_norm_eps" in data or model_type == "gpt_oss":  # GptOssRMSNorm whatever the config says
        out["normalization"] = "rmsnorm"
    elif any(k in data for k in _LAYERNORM_KEYS) or model_type == "gpt2":
        out["normalization"] = "layernorm"
    key = next((k for k in ("rms_norm_eps", *_LAYERNORM_KEYS) if k in data), None)
    eps = data.get(key) if key is not None else None
    if isinstance(eps, int | float) and not isinstance(eps, bool) and 0 < eps < 1:
        out["norm_epsilon"] = float(eps)
    elif key is not None and eps is not None:
        # a user trial: `rms_norm_eps: NaN` was dropped unsaid and the emitted file fell back to Megatron's 1e-5
        raise InputError(f"{where}: key `{key}` = {eps!r} is not a norm epsilon (a number between 0 and 1); "
                         f"write the value the model was trained with")
    theta = data.get("rope_theta", _rope_parameter(data, "rope_theta"))
    if theta is None and model_type == "gpt_neox":
        theta = data.get("rotary_emb_base", 10000)  # GPTNeoXConfig's own name and default
    if theta is None and model_type == "gptj":
        theta = 10000  # modeling_gptj.py create_sinusoidal_positions: a fixed base
    if theta is None and model_type == "gpt_oss":
        theta = 150000.0  # GptOssConfig default_theta
    if isinstance(theta, int | float) and not isinstance(theta, bool):
        out |= {"position_embedding": "rope", "rope_base": theta}
    elif model_type == "gpt2":
        out["position_embedding"] = "learned"
    biases = [data[k] for k in ("attention_bias", "mlp_bias") if isinstance(data.get(k), bool)]
    if biases and model_type in (*_UNBIASED_FAMILIES, "nemotron"):
        # the attention's and the MLP's biases as the family's code builds them, each False unless the config says
        attention, mlp = (data.get(k) is True for k in ("attention_bias", "mlp_bias"))
        if attention != mlp:  # a user trial: attention_bias alone gave the Megatron file biased MLPs too
            raise InputError(
                f"{where}: key `attention_bias` = {str(attention).lower()} with `mlp_bias` "
                f"{str(mlp).lower()}{'' if 'mlp_bias' in data else ' (its default)'}: the `{model_type}` code biases "
                f"the {'q, k, v and o projections' if attention else 'MLP'} only, which Megatron-LM cannot state "
                f"(every projection biased, none with --disable-bias-linear, or q, k and v alone with "
                f"--add-qkv-bias); describe the model as a models/*.yaml file with the linear_bias / qkv_bias you "
                f"accept")
        out["linear_bias"] = attention
    elif biases:
        out["linear_bias"] = any(biases)
    elif model_type == "gpt2":
        out["linear_bias"] = True
    elif model_type in ("qwen2", "qwen2_moe"):  # Qwen2Attention / Qwen2MoeAttention: q, k, v biased, o and MLP not
        out |= {"linear_bias": False, "qkv_bias": True}
    elif model_type == "gpt_neox":  # GPTNeoXConfig attention_bias defaults to true; its MLP always has biases
        out["linear_bias"] = data.get("attention_bias", True) is not False
    elif model_type == "gpt_oss":  # GptOssConfig attention_bias defaults to true; its experts and router have biases
        out["linear_bias"] = True
    elif model_type in _UNBIASED_FAMILIES:
        # a user trial: a Mistral config.json (no attention_bias key) left the Megatron file's --disable-bias-linear
        # to the user, and Megatron builds biased projections without it
        out["linear_bias"] = False
    limit = data.get("swiglu_limit", 7.0 if model_type == "gpt_oss" else None)  # GptOssConfig's default
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
        out["swiglu_clamp"] = float(limit)
    if model_type in ("qwen3", "qwen3_moe"):  # Qwen3 normalizes q and k per head (its modeling code)
        out["qk_layernorm"] = True
    return out


def _json_kind(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _read_json_object(file: Path) -> dict[str, Any]:
    """The JSON object in `file`, or an InputError naming the file (and line and column for bad JSON)."""
    try:
        raw = read_bytes(file, "HuggingFace config", "a config.json is a few kB: give the model's config.json")
    except OSError as err:
        raise InputError(
            f"cannot read HuggingFace config {file}: {err.strerror}; give the path of a config.json file or "
            f"of the folder holding it"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{file}: byte {err.start} is not UTF-8 text; a config.json is a UTF-8 JSON file"
        ) from None
    data = parse_json(text, file, "a config.json is a flat object of settings", lambda err: (
        f"{file}: line {err.lineno}, column {err.colno}: invalid JSON: {err.msg}; fix the syntax there"))
    if not isinstance(data, dict):
        raise InputError(
            f"{file}: a config.json holds one JSON object of settings, but this file holds a JSON "
            f"{_json_kind(data)}; give the model's config.json"
        )
    return data


def load_hf_config(path: Path) -> ModelSpec:
    """Read a HuggingFace config.json (or a folder holding one) into a ModelSpec.

    The model is named by the config's own `_name_or_path` where it holds one (transformers writes it on save), else
    after the Hub cache's repository for ``models--ORG--NAME/snapshots/HASH/config.json`` (ORG/NAME), after the folder
    for ``.../NAME/config.json``, and after the file stem otherwise (``NAME.json``).  A user trial's ``in/config.json``
    printed "in on 1024 x h100-sxm".
    """
    file = path / "config.json" if path.is_dir() else path
    data = _read_json_object(file)
    return model_from_hf_config(data, _model_name(file, data), source=str(file))


def _model_name(file: Path, data: dict) -> str:
    """What a config.json's model is called (load_hf_config)."""
    named = data.get("_name_or_path")
    if isinstance(named, str) and named.strip() and not named.strip().startswith(("/", ".")):
        return named.strip()
    if file.name != "config.json":
        return file.stem
    folder = file.resolve().parent
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    return folder.name
