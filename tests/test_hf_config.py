"""HuggingFace config.json -> ModelSpec: one real config per family, and the bad inputs a user can give.

The fixtures in tests/data/hf/ are the published configs (see the README there); the expected specs
are the architectures those configs describe, written out field by field.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from placement.errors import InputError
from placement.loaders.errors import format_validation_error
from placement.loaders.hf_config import FAMILIES, load_hf_config, model_from_hf_config
from placement.specs.model import FfnKind, MLASpec, ModelSpec, MoESpec

DATA = Path(__file__).parent / "data" / "hf"

AFTER_TOPK: dict[str, Any] = dict(router_score_function="softmax", router_topk_normalized=True,
                                  router_expert_bias=False, router_topk_scaling_factor=1.0)
"""A softmax over the top-k (Mixtral, GPT-OSS, Qwen3-MoE with norm_topk_prob): renormalized, unbiased, unscaled."""
SOFTMAX_RAW: dict[str, Any] = AFTER_TOPK | dict(router_topk_normalized=False)
"""A softmax over every expert, the top-k weights kept raw (norm_topk_prob false)."""

EXPECTED: dict[str, dict[str, Any]] = {
    "llama-3.1-8b": dict(
        num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_kv_heads=8,
        vocab_size=128256, default_seq_len=8192,
    ),
    "mistral-7b-v0.1": dict(
        num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_kv_heads=8,
        vocab_size=32000, default_seq_len=8192, sliding_window=4096, sliding_window_layers=32,
    ),
    "mixtral-8x7b-v0.1": dict(
        num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_kv_heads=8,
        vocab_size=32000, default_seq_len=8192,
        moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=14336, **AFTER_TOPK),
    ),
    "qwen2-7b": dict(
        num_layers=28, hidden_size=3584, ffn_hidden_size=18944, num_attention_heads=28, num_kv_heads=4,
        vocab_size=152064, default_seq_len=8192, qkv_bias=True,  # Qwen2Attention: q, k, v biased
    ),
    "qwen1.5-moe-a2.7b": dict(
        num_layers=24, hidden_size=2048, ffn_hidden_size=5632, num_attention_heads=16, num_kv_heads=16,
        vocab_size=151936, default_seq_len=8192, qkv_bias=True,
        moe=MoESpec(
            num_experts=60, top_k=4, expert_ffn_hidden_size=1408, num_shared_experts=1,
            shared_expert_ffn_hidden_size=5632, **SOFTMAX_RAW,  # norm_topk_prob false
        ),
    ),
    "qwen3-8b": dict(
        num_layers=36, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32, num_kv_heads=8,
        head_dim=128, vocab_size=151936, default_seq_len=8192,
    ),
    "qwen3-30b-a3b": dict(
        num_layers=48, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_kv_heads=4,
        head_dim=128, vocab_size=151936, default_seq_len=8192,
        moe=MoESpec(num_experts=128, top_k=8, expert_ffn_hidden_size=768, **AFTER_TOPK),  # norm_topk_prob true
    ),
    "deepseek-v2-lite": dict(
        num_layers=27, hidden_size=2048, ffn_hidden_size=10944, num_attention_heads=16, vocab_size=102400,
        default_seq_len=8192,
        moe=MoESpec(num_experts=64, top_k=6, expert_ffn_hidden_size=1408, num_shared_experts=2, num_dense_layers=1,
                    **SOFTMAX_RAW),  # scoring_func softmax, norm_topk_prob false, topk_method greedy, scaling 1.0
        mla=MLASpec(q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    ),
    "deepseek-v3": dict(
        num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, vocab_size=129280,
        default_seq_len=8192,
        moe=MoESpec(num_experts=256, top_k=8, expert_ffn_hidden_size=2048, num_shared_experts=1, num_dense_layers=3,
                    num_expert_groups=8, groups_per_token=4,  # n_group / topk_group: node-limited routing
                    # scoring_func sigmoid, norm_topk_prob true, topk_method noaux_tc, routed_scaling_factor 2.5
                    router_score_function="sigmoid", router_topk_normalized=True, router_expert_bias=True,
                    router_topk_scaling_factor=2.5),
        mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
        mtp_modules=1,  # num_nextn_predict_layers: the recipe's mtp_layers by default
    ),
    "gpt2-xl": dict(
        num_layers=48, hidden_size=1600, ffn_hidden_size=6400, ffn_kind=FfnKind.GELU, num_attention_heads=25,
        vocab_size=50257, tied_embeddings=True, dropout=True, default_seq_len=1024,
    ),
    "gpt-j-6b": dict(
        num_layers=28, hidden_size=4096, ffn_hidden_size=16384, ffn_kind=FfnKind.GELU, num_attention_heads=16,
        vocab_size=50400, default_seq_len=2048, parallel_residual=True, rotary_percent=0.25,
    ),
    "pythia-1b": dict(
        num_layers=16, hidden_size=2048, ffn_hidden_size=8192, ffn_kind=FfnKind.GELU, num_attention_heads=8,
        vocab_size=50304, default_seq_len=2048, parallel_residual=True, rotary_percent=0.25,
    ),
    "gpt-oss-120b": dict(
        num_layers=36, hidden_size=2880, ffn_hidden_size=2880, ffn_kind=FfnKind.QUICK_GEGLU, num_attention_heads=64,
        num_kv_heads=8, head_dim=64, vocab_size=201088, default_seq_len=8192, sliding_window=128,
        sliding_window_layers=18, moe=MoESpec(num_experts=128, top_k=4, expert_ffn_hidden_size=2880, **AFTER_TOPK),
        swiglu_clamp=7.0, glu_linear_offset=1.0, attention_sinks=True,
    ),
    "nemotron-4-340b": dict(
        num_layers=96, hidden_size=18432, ffn_hidden_size=73728, ffn_kind=FfnKind.SQUARED_RELU,
        num_attention_heads=96, num_kv_heads=8, head_dim=192, vocab_size=256000, default_seq_len=4096,
        rotary_percent=0.5,  # partial_rotary_factor (a user trial found it dropped: megatron.sh trained full RoPE)
    ),
}


R, L = "rmsnorm", "layernorm"
ARCH: dict[str, tuple] = {  # (normalization, position_embedding, rope_base, linear_bias, qk_layernorm) per config
    "deepseek-v2-lite": (R, "rope", 1e4, False, None), "deepseek-v3": (R, "rope", 1e4, False, None),
    "gpt2-xl": (L, "learned", None, True, None), "llama-3.1-8b": (R, "rope", 5e5, False, None),
    # Mistral and Mixtral build every projection unbiased (no config key): transformers' modeling code
    "mistral-7b-v0.1": (R, "rope", 1e4, False, None), "mixtral-8x7b-v0.1": (R, "rope", 1e6, False, None),
    "nemotron-4-340b": (L, "rope", 1e4, False, None), "qwen1.5-moe-a2.7b": (R, "rope", 1e6, False, None),
    "pythia-1b": (L, "rope", 1e4, True, None),
    "gpt-j-6b": (L, "rope", 1e4, None, None),  # unbiased attention, biased MLP: not one value
    "qwen2-7b": (R, "rope", 1e6, False, None),  # Qwen2's q/k/v biases are not a config key: qkv_bias, below
    "qwen3-30b-a3b": (R, "rope", 1e6, False, True), "qwen3-8b": (R, "rope", 1e6, False, True),
    "gpt-oss-120b": (R, "rope", 1.5e5, True, None),
}
"""What the emitted model arguments need beyond the dimensions, from rms_norm_eps / layer_norm_epsilon,
rope_theta, attention_bias / mlp_bias and model_type."""
_ARCH_FIELDS = ("normalization", "position_embedding", "rope_base", "linear_bias", "qk_layernorm")
NORM_EPSILON = {"deepseek-v2-lite": 1e-6, "deepseek-v3": 1e-6, "qwen1.5-moe-a2.7b": 1e-6, "qwen2-7b": 1e-6,
                "qwen3-30b-a3b": 1e-6, "qwen3-8b": 1e-6}
"""The configs' norm epsilon where it is not 1e-5 (rms_norm_eps, layer_norm_epsilon, norm_eps: every other one here
is 1e-5, Megatron's default): a user trial's DeepSeek-V3 file left its 1e-6 to Megatron's 1e-5."""
YARN = {"deepseek-v2-lite": {"factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                              "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707},
        "deepseek-v3": {"factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                        "mscale": 1.0, "mscale_all_dim": 1.0},
        "gpt-oss-120b": {"factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False}}
"""Configs whose `rope_scaling` is YaRN (`"type": "yarn"` or `"rope_type": "yarn"`), with the numbers the model spec
keeps (the launch files write them)."""
LLAMA3_ROPE = {"llama-3.1-8b": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}}
"""Configs whose `rope_scaling` is Llama 3.1's (`rope_type: llama3`): the model spec keeps its four numbers, which the
launch files write (it rescales the frequencies only, so it prices nothing)."""


def _rope(folder: str) -> dict[str, Any]:
    if folder in LLAMA3_ROPE:
        return {"rope_scaling": "llama3", "llama3_rope": LLAMA3_ROPE[folder]}
    if folder in YARN:
        return {"rope_scaling": "yarn", "yarn_rope": YARN[folder]}
    return {"rope_scaling": None}


def _config(folder: str) -> dict[str, Any]:
    return json.loads((DATA / folder / "config.json").read_text())


def _write(tmp_path: Path, data: object, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_every_fixture_has_an_expectation_and_every_family_a_fixture() -> None:
    folders = {p.name for p in DATA.iterdir() if p.is_dir()}
    assert folders == set(EXPECTED) == set(ARCH)
    assert {_config(f)["model_type"] for f in folders} == set(FAMILIES)


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_real_config_parses_to_the_published_architecture(folder: str) -> None:
    path = DATA / folder / "config.json"
    spec = load_hf_config(path)
    # the planning default's note (a capped context) is the loader's word, as its source is
    assert spec == ModelSpec(name=folder, source=spec.source, default_seq_len_note=spec.default_seq_len_note,
                             **EXPECTED[folder],
                             **dict(zip(_ARCH_FIELDS, ARCH[folder], strict=True)), **_rope(folder),
                             norm_epsilon=NORM_EPSILON.get(folder, 1e-5))
    assert str(path) in spec.source


def test_folder_path_reads_its_config_json() -> None:
    assert load_hf_config(DATA / "qwen3-8b") == load_hf_config(DATA / "qwen3-8b" / "config.json")


def test_other_file_names_give_the_model_their_stem(tmp_path: Path) -> None:
    path = _write(tmp_path, _config("llama-3.1-8b"), "my-llama.json")
    assert load_hf_config(path).name == "my-llama"


def test_architectures_is_the_fallback_when_model_type_is_absent() -> None:
    data = _config("mixtral-8x7b-v0.1")
    del data["model_type"]
    spec = model_from_hf_config(data, "mixtral")
    assert spec.moe == MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=14336, **AFTER_TOPK)
    assert "no `model_type`; read as mixtral from `architectures` MixtralForCausalLM" in spec.source


def test_an_unknown_model_type_read_by_its_architectures_says_so() -> None:
    """A remote-code `model_type` with a stock `architectures` entry is read as that family, and the source says so
    (a user trial's `llama_custom` was printed as `model_type llama`)."""
    spec = model_from_hf_config(_config("llama-3.1-8b") | {"model_type": "llama_custom"}, "l")
    assert spec.source.startswith("HuggingFace config.json (model_type llama): HuggingFace config of 'l'; "
                                  "`model_type` 'llama_custom' is not a family placement reads; read as llama from "
                                  "`architectures` LlamaForCausalLM")


def test_default_seq_len_is_capped_but_shorter_contexts_are_kept() -> None:
    llama = _config("llama-3.1-8b")
    assert llama["max_position_embeddings"] == 131072
    assert model_from_hf_config(llama, "l").default_seq_len == 8192
    assert "cap of 8192 on the config's max_position_embeddings 131072" in model_from_hf_config(
        llama, "l").default_seq_len_note
    assert model_from_hf_config(llama | {"max_position_embeddings": 2048}, "l").default_seq_len == 2048
    assert model_from_hf_config(llama | {"max_position_embeddings": 2048}, "l").default_seq_len_note == ""


def test_qwen3_moe_leading_mlp_only_layers_become_dense_layers() -> None:
    data = _config("qwen3-30b-a3b") | {"mlp_only_layers": [0, 1]}
    spec = model_from_hf_config(data, "q")
    assert spec.moe is not None and spec.moe.num_dense_layers == 2
    assert spec.num_moe_layers == 46


def test_deepseek_without_routed_experts_is_dense() -> None:
    data = _config("deepseek-v2-lite") | {"n_routed_experts": None}
    spec = model_from_hf_config(data, "d")
    assert spec.moe is None and spec.mla is not None


def test_gpt2_explicit_inner_size_and_relu() -> None:
    data = _config("gpt2-xl") | {"n_inner": 4096, "activation_function": "relu", "resid_pdrop": 0.0}
    spec = model_from_hf_config(data, "g")
    assert (spec.ffn_hidden_size, spec.ffn_kind, spec.dropout) == (4096, FfnKind.RELU, False)


def test_gpt_neox_runs_a_parallel_residual_unless_the_config_turns_it_off() -> None:
    """GPTNeoXConfig's use_parallel_residual defaults to true (Pythia and GPT-NeoX-20B state it); false runs the
    layers in sequence, and the TP all-reduces of a layer go from 4 back to 6 (cost.comm.tp_term)."""
    data = _config("pythia-1b")
    assert model_from_hf_config(data, "p").parallel_residual
    assert model_from_hf_config({k: v for k, v in data.items() if k != "use_parallel_residual"}, "p").parallel_residual
    assert not model_from_hf_config(data | {"use_parallel_residual": False}, "p").parallel_residual


def test_transformers_5_rope_parameters_are_read_before_the_old_keys() -> None:
    """transformers 5 writes `rope_parameters` {rope_theta, partial_rotary_factor} instead of rope_theta /
    rotary_emb_base / rotary_pct: the emitted --rotary-base and --rotary-percent follow it."""
    data = {k: v for k, v in _config("pythia-1b").items() if k not in ("rotary_pct", "rotary_emb_base")}
    spec = model_from_hf_config(data | {"rope_parameters": {"rope_type": "default", "rope_theta": 50000.0,
                                                            "partial_rotary_factor": 0.5}}, "p")
    assert (spec.rope_base, spec.rotary_percent) == (50000.0, 0.5)
    llama = {k: v for k, v in _config("llama-3.1-8b").items() if k != "rope_theta"}
    assert model_from_hf_config(llama | {"rope_parameters": {"rope_theta": 500000.0}}, "l").rope_base == 500000.0
    assert model_from_hf_config(data | {"attention_dropout": 0.1}, "p").dropout


# --- bad inputs: every one is an InputError whose paragraph names the source, the key, the value and the fix.


def test_unknown_model_type_lists_the_supported_families(tmp_path: Path) -> None:
    path = _write(tmp_path, {"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 4544})
    with pytest.raises(InputError) as err:
        load_hf_config(path)
    assert str(err.value) == (
        f"{path}: `model_type` = 'falcon' (with `architectures` = ['FalconForCausalLM']) is not a family this "
        "loader reads; supported model_type values: deepseek_v2, deepseek_v3, gpt2, gpt_neox, gpt_oss, gptj, llama, "
        "mistral, mixtral, nemotron, qwen2, qwen2_moe, qwen3, qwen3_moe; set `model_type` to the family the model "
        "follows (placement then prices that family's stock block: what the model adds, extra norms or another MLP, "
        "is not priced), or describe the model as a models/*.yaml file with the fields of ModelSpec"
    )


def test_missing_model_type_and_architectures() -> None:
    said = "HuggingFace config of 'x': no `model_type`, and no `architectures`, name a family this loader reads"
    with pytest.raises(InputError, match=re.escape(said)):
        model_from_hf_config({"hidden_size": 8}, "x")


def test_missing_required_key_names_the_key_and_the_family(tmp_path: Path) -> None:
    data = _config("llama-3.1-8b")
    del data["intermediate_size"]
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load_hf_config(path)
    assert str(err.value) == (
        f"{path}: key `intermediate_size` is missing; the `llama` family needs it to describe the model; "
        "add it with the value from the model's published config.json"
    )


@pytest.mark.parametrize(
    ("folder", "key", "family"),
    [
        ("mixtral-8x7b-v0.1", "num_local_experts", "mixtral"),
        ("qwen3-30b-a3b", "moe_intermediate_size", "qwen3_moe"),
        ("deepseek-v3", "kv_lora_rank", "deepseek_v3"),
        ("deepseek-v3", "first_k_dense_replace", "deepseek_v3"),
        ("gpt2-xl", "n_embd", "gpt2"),
        ("pythia-1b", "intermediate_size", "gpt_neox"),
        ("gpt-j-6b", "n_embd", "gptj"),
    ],
)
def test_missing_family_specific_key(folder: str, key: str, family: str) -> None:
    data = _config(folder)
    del data[key]
    with pytest.raises(InputError, match=re.escape(f"key `{key}` is missing; the `{family}` family needs it")):
        model_from_hf_config(data, folder)


def test_invalid_json_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "llama",\n  "hidden_size": 4096,\n}\n')
    pattern = rf"^{re.escape(str(path))}: line 4, column 1: invalid JSON: .+; fix the syntax there$"
    with pytest.raises(InputError, match=pattern):
        load_hf_config(path)


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    path = _write(tmp_path, [1, 2])
    with pytest.raises(InputError) as err:
        load_hf_config(path)
    assert str(err.value) == (
        f"{path}: a config.json holds one JSON object of settings, but this file holds a JSON array; "
        "give the model's config.json"
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "config.json"
    with pytest.raises(InputError, match=re.escape(f"cannot read HuggingFace config {path}: No such file")):
        load_hf_config(path)


def test_heads_not_divisible_by_kv_heads_names_both_spellings(tmp_path: Path) -> None:
    path = _write(tmp_path, _config("llama-3.1-8b") | {"num_key_value_heads": 5})
    with pytest.raises(InputError) as err:
        load_hf_config(path)
    assert str(err.value) == (
        f"{path}: num_attention_heads (32) is not divisible by num_kv_heads (5): grouped-query attention needs "
        "whole groups; use a num_kv_heads that divides 32. "
        "(In config.json terms: `num_kv_heads` is `num_key_value_heads`.)"
    )


def test_out_of_range_value_names_the_field_and_the_config_key() -> None:
    with pytest.raises(InputError) as err:
        model_from_hf_config(_config("qwen2-7b") | {"num_hidden_layers": 0}, "q", source="q.json")
    assert str(err.value) == (
        "q.json: field `num_layers` = 0: Input should be greater than or equal to 1. "
        "(In config.json terms: `num_layers` is `num_hidden_layers`.)"
    )


def test_moe_top_k_above_experts_names_the_config_keys() -> None:
    with pytest.raises(InputError) as err:
        model_from_hf_config(_config("mixtral-8x7b-v0.1") | {"num_experts_per_tok": 9}, "m", source="m.json")
    assert str(err.value) == (
        "m.json: field `moe`: moe.top_k (9) > moe.num_experts (8): a token cannot visit more experts than "
        "exist; set top_k <= 8. "
        "(In config.json terms: `moe.num_experts` is `num_local_experts`, `moe.top_k` is `num_experts_per_tok`.)"
    )


@pytest.mark.parametrize("value", ["4096", 4096.0, True])
def test_non_integer_value(value: object) -> None:
    with pytest.raises(InputError) as err:
        model_from_hf_config(_config("llama-3.1-8b") | {"hidden_size": value}, "l", source="l.json")
    assert str(err.value) == (
        f"l.json: key `hidden_size` = {value!r} is not a whole number; the `llama` family reads it as an "
        "integer; write it as a JSON integer"
    )


def test_null_required_value() -> None:
    with pytest.raises(InputError, match=re.escape("l.json: key `vocab_size` is null; the `llama` family needs")):
        model_from_hf_config(_config("llama-3.1-8b") | {"vocab_size": None}, "l", source="l.json")


def test_dense_layers_that_do_not_lead_are_refused() -> None:
    data = _config("qwen1.5-moe-a2.7b") | {"decoder_sparse_step": 2}
    with pytest.raises(InputError) as err:
        model_from_hf_config(data, "q", source="q.json")
    assert str(err.value) == (
        "q.json: the dense (non-MoE) layers are [0, 2, 4, 6, 8, 10, ..., 22] (12 layers) of 24, from "
        "`decoder_sparse_step` = 2 and `mlp_only_layers` = []; ModelSpec describes dense layers only as a "
        "leading block (moe.num_dense_layers), so this pattern cannot be represented exactly; describe the "
        "model as a models/*.yaml file with the nearest leading block instead"
    )


def test_deepseek_moe_layer_freq_other_than_one_is_refused() -> None:
    data = _config("deepseek-v2-lite") | {"moe_layer_freq": 2}
    with pytest.raises(InputError, match=re.escape("from `first_k_dense_replace` = 1 and `moe_layer_freq` = 2")):
        model_from_hf_config(data, "d")


def test_zero_sparse_step_is_refused() -> None:
    with pytest.raises(InputError, match=re.escape("key `decoder_sparse_step` = 0 must be at least 1")):
        model_from_hf_config(_config("qwen3-30b-a3b") | {"decoder_sparse_step": 0}, "q")


def test_unknown_activation_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as err:
        model_from_hf_config(_config("nemotron-4-340b") | {"hidden_act": "swish"}, "n", source="n.json")
    assert str(err.value) == (
        "n.json: key `hidden_act` = 'swish' is not an activation this loader maps for the `nemotron` family; "
        "known: gelu, gelu_fast, gelu_new, gelu_python, gelu_pytorch_tanh, relu, relu2; describe the model as a "
        "models/*.yaml file with an explicit ffn_kind instead"
    )


def test_wrong_type_for_flag_and_list() -> None:
    with pytest.raises(InputError, match=re.escape("key `tie_word_embeddings` = 'no' is not a boolean")):
        model_from_hf_config(_config("qwen2-7b") | {"tie_word_embeddings": "no"}, "q")
    with pytest.raises(InputError, match=re.escape("key `mlp_only_layers` = '0' is not a list of layer indices")):
        model_from_hf_config(_config("qwen3-30b-a3b") | {"mlp_only_layers": "0"}, "q")


def test_loader_does_not_change_the_input_mapping() -> None:
    data = _config("deepseek-v3")
    before = copy.deepcopy(data)
    model_from_hf_config(data, "d")
    assert data == before


def test_format_validation_error_one_line_per_failure() -> None:
    with pytest.raises(ValidationError) as err:
        ModelSpec.model_validate(
            {"name": "m", "num_layers": -1, "hidden_size": 8, "ffn_hidden_size": 8, "num_attention_heads": 2,
             "vocab_size": 8, "moe": {"num_experts": 8, "top_k": 2}, "typo": 1}
        )
    assert format_validation_error(err.value, "m.yaml") == (
        "m.yaml: field `num_layers` = -1: Input should be greater than or equal to 1. "
        "m.yaml: field `moe.expert_ffn_hidden_size` is missing: Field required (add it). "
        "m.yaml: field `typo` = 1: Extra inputs are not permitted (it is not a field of this schema: remove it "
        "or correct its spelling)."
    )


def test_a_config_without_those_keys_leaves_them_unstated():
    from placement.loaders.hf_config import model_from_hf_config

    cfg = json.loads((Path(__file__).parent / "data" / "hf" / "llama-3.1-8b" / "config.json").read_text())
    for key in ("rms_norm_eps", "rope_theta", "rope_scaling", "attention_bias", "mlp_bias"):
        cfg.pop(key, None)
    m = model_from_hf_config(cfg, "bare")
    assert (m.normalization, m.position_embedding, m.rope_base) == (None, None, None)
    # ...but the biases a family's config class defaults: LlamaConfig's attention_bias and mlp_bias are False
    assert m.linear_bias is False
    gptj = json.loads((Path(__file__).parent / "data" / "hf" / "gpt-j-6b" / "config.json").read_text())
    assert model_from_hf_config(gptj, "gptj").linear_bias is None  # unbiased attention, biased MLP: no one value


def test_gpt_oss_style_clamp_and_yarn_are_read(tmp_path: Path) -> None:
    """GPT-OSS's `swiglu_limit` (7.0) and `rope_scaling.rope_type: yarn` become swiglu_clamp and rope_scaling,
    which price its eager ops when a recipe runs them unfused; a config without them leaves both unset."""
    data = _config("qwen3-30b-a3b") | {"swiglu_limit": 7.0, "rope_scaling": {"rope_type": "yarn", "factor": 32.0}}
    spec = load_hf_config(_write(tmp_path, data))
    assert spec.swiglu_clamp == 7.0 and spec.rope_scaling == "yarn"
    plain = load_hf_config(DATA / "qwen3-30b-a3b" / "config.json")
    assert plain.swiglu_clamp is None and plain.rope_scaling is None


def test_mistral_sliding_window_is_priced_not_dropped() -> None:
    """Mistral 7B v0.1's `sliding_window: 4096` covers every layer; it was read as full attention."""
    spec = model_from_hf_config(_config("mistral-7b-v0.1"), "m", source="m.json")
    assert (spec.sliding_window, spec.sliding_window_layers) == (4096, 32)
    full = model_from_hf_config(_config("mistral-7b-v0.1") | {"sliding_window": None}, "m", source="m.json")
    assert full.sliding_window is None


def test_a_mixtral_sliding_window_covers_every_layer_as_mistrals() -> None:
    """transformers' MixtralAttention applies one sliding_window to all layers, as Mistral's does."""
    spec = model_from_hf_config(_config("mixtral-8x7b-v0.1") | {"sliding_window": 4096}, "m", source="m.json")
    assert (spec.sliding_window, spec.sliding_window_layers) == (4096, spec.num_layers)


def test_a_qwen_sliding_window_in_use_is_refused_not_dropped() -> None:
    cfg = _config("qwen2-7b") | {"sliding_window": 4096, "use_sliding_window": True}
    with pytest.raises(InputError, match=re.escape("key `sliding_window` = 4096 with sliding-window attention on")):
        model_from_hf_config(cfg, "q", source="q.json")
    assert model_from_hf_config(cfg | {"use_sliding_window": False}, "q", source="q.json").sliding_window is None


def test_a_gated_mlp_that_is_not_silu_is_refused() -> None:
    """`hidden_act: gelu` on a Llama config was emitted as SwiGLU."""
    with pytest.raises(InputError, match=re.escape("q.json: key `hidden_act` = 'gelu': the `llama` family's gated "
                                                   "MLP is priced as SwiGLU")):
        model_from_hf_config(_config("llama-3.1-8b") | {"hidden_act": "gelu"}, "q", source="q.json")


def test_a_nan_number_is_refused(tmp_path: Path) -> None:
    """GPT-2 `"resid_pdrop": NaN` (Python's json reads it) was read as dropout off."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("gpt2-xl")).replace('"resid_pdrop": 0.1', '"resid_pdrop": NaN'))
    assert "NaN" in path.read_text()
    with pytest.raises(InputError, match=re.escape("key `resid_pdrop` = nan is not a finite number")):
        load_hf_config(path)
