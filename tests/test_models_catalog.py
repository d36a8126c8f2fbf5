"""The model catalog: every models/*.yaml is a valid ModelSpec named after its file, and typos are errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from placement.loaders.errors import format_validation_error
from placement.specs.model import FfnKind, MLASpec, ModelSpec, MoESpec

MODELS = Path(__file__).resolve().parent.parent / "models"
CATALOG = sorted(MODELS.glob("*.yaml"))


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (plain YAML keeps the last one silently)."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    keys = [loader.construct_object(key) for key, _ in node.value]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {duplicates}", node.start_mark)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def _load(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_StrictLoader)


def test_catalog_holds_the_planned_models() -> None:
    names = {p.stem for p in CATALOG}
    assert names >= {
        "gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3",
        "qwen3-235b-a22b", "megatron-gpt-1.7b", "megatron-gpt-3.6b", "megatron-gpt-7.5b", "megatron-gpt-18.4b",
        "megatron-gpt-39.1b", "megatron-gpt-76.1b", "megatron-gpt-145.6b", "megatron-gpt-310.1b",
        "megatron-gpt-529.6b", "megatron-gpt-1t", "megatron-gpt-175b", "gpt-22b", "gpt-530b", "bloom-176b",
        "gpt-neox-20b", "nemotron-4-340b",
    }


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_catalog_entry_is_a_valid_model_named_after_its_file(path: Path) -> None:
    spec = ModelSpec.model_validate(_load(path))
    assert spec.name == path.stem
    assert spec.source.strip(), f"{path.name} must cite where its dimensions come from"


ROUTER = {
    # how the routers of the catalog's MoE models score and weigh their experts (their HF config.json)
    "after-topk": dict(router_score_function="softmax", router_topk_normalized=True, router_expert_bias=False,
                       router_topk_scaling_factor=1.0),
    "sigmoid-bias": dict(router_score_function="sigmoid", router_topk_normalized=True, router_expert_bias=True),
}

PUBLISHED = {
    # Headline dimensions as the sources state them (a guard against a slipped digit when editing).
    "gpt3-175b": dict(num_layers=96, hidden_size=12288, num_attention_heads=96, vocab_size=50257),
    "llama3-405b": dict(
        num_layers=126, hidden_size=16384, ffn_hidden_size=53248, num_attention_heads=128, num_kv_heads=8,
        vocab_size=128256, default_seq_len=8192, default_global_batch=2048,
    ),
    "deepseek-v3": dict(
        num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, vocab_size=129280,
        moe=MoESpec(num_experts=256, top_k=8, expert_ffn_hidden_size=2048, num_shared_experts=1, num_dense_layers=3,
                    num_expert_groups=8, groups_per_token=4,  # at most 4 nodes per token (§2.1.2)
                    **ROUTER["sigmoid-bias"], router_topk_scaling_factor=2.5),
        mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
        default_seq_len=4096, default_global_batch=15360,
    ),
    "qwen3-235b-a22b": dict(
        num_layers=94, hidden_size=4096, num_attention_heads=64, num_kv_heads=4, head_dim=128, vocab_size=151936,
        moe=MoESpec(num_experts=128, top_k=8, expert_ffn_hidden_size=1536, **ROUTER["after-topk"]),
    ),
    "megatron-gpt-1t": dict(
        num_layers=128, hidden_size=25600, ffn_hidden_size=102400, num_attention_heads=160, vocab_size=51200,
        ffn_kind=FfnKind.GELU, tied_embeddings=True, dropout=True, default_seq_len=2048,
    ),
    "nemotron-4-340b": dict(
        num_layers=96, hidden_size=18432, ffn_hidden_size=73728, ffn_kind=FfnKind.SQUARED_RELU,
        num_attention_heads=96, num_kv_heads=8, vocab_size=256000, tied_embeddings=False,
    ),
    "qwen3-30b-a3b": dict(
        num_layers=48, hidden_size=2048, num_attention_heads=32, num_kv_heads=4, head_dim=128, vocab_size=151936,
        moe=MoESpec(num_experts=128, top_k=8, expert_ffn_hidden_size=768, **ROUTER["after-topk"]),
    ),
    "gpt-oss-120b": dict(
        num_layers=36, hidden_size=2880, num_attention_heads=64, num_kv_heads=8, head_dim=64, vocab_size=201088,
        moe=MoESpec(num_experts=128, top_k=4, expert_ffn_hidden_size=2880, **ROUTER["after-topk"]),
        sliding_window=128, sliding_window_layers=18,
    ),
    "kimi-k2": dict(
        num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=64, vocab_size=163840,
        moe=MoESpec(num_experts=384, top_k=8, expert_ffn_hidden_size=2048, num_shared_experts=1, num_dense_layers=1,
                    **ROUTER["sigmoid-bias"], router_topk_scaling_factor=2.827),
        mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    ),
    "deepseek-v2": dict(
        num_layers=60, hidden_size=5120, ffn_hidden_size=12288, num_attention_heads=128, vocab_size=102400,
        moe=MoESpec(num_experts=160, top_k=6, expert_ffn_hidden_size=1536, num_shared_experts=2, num_dense_layers=1,
                    num_expert_groups=8, groups_per_token=3,  # device-limited routing, M = 3 (§2.2.2)
                    **ROUTER["after-topk"] | dict(router_topk_normalized=False, router_topk_scaling_factor=16.0)),
        mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    ),
}

TOTAL_PARAMS_B = {
    # Published totals (billions): a slipped digit in a width shows here.
    "qwen3-30b-a3b": 30.5,   # Qwen3 model card "30.5B"
    "gpt-oss-120b": 117.0,   # OpenAI gpt-oss model card "117B"
    "kimi-k2": 1040.0,       # Kimi-K2 model card "1T" (1.04T)
    "deepseek-v2": 236.0,    # arXiv:2405.04434 abstract "236B"
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_headline_dimensions_match_the_sources(name: str) -> None:
    spec = ModelSpec.model_validate(_load(MODELS / f"{name}.yaml"))
    assert {field: getattr(spec, field) for field in PUBLISHED[name]} == PUBLISHED[name]


def test_unknown_top_level_key_is_rejected(tmp_path: Path) -> None:
    text = (MODELS / "llama3-8b.yaml").read_text() + "num_expert: 8\n"
    path = tmp_path / "llama3-8b.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError) as err:
        ModelSpec.model_validate(_load(path))
    assert format_validation_error(err.value, str(path)) == (
        f"{path}: field `num_expert` = 8: Extra inputs are not permitted (it is not a field of this schema: "
        "remove it or correct its spelling)."
    )


def test_unknown_nested_key_is_rejected(tmp_path: Path) -> None:
    text = (MODELS / "mixtral-8x7b.yaml").read_text().replace("  top_k: 2\n", "  topk: 2\n")
    path = tmp_path / "mixtral.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError) as err:
        ModelSpec.model_validate(_load(path))
    assert format_validation_error(err.value, "mixtral.yaml") == (
        "mixtral.yaml: field `moe.top_k` is missing: Field required (add it). "
        "mixtral.yaml: field `moe.topk` = 2: Extra inputs are not permitted (it is not a field of this schema: "
        "remove it or correct its spelling); did you mean `top_k`?"
    )


def test_duplicate_key_is_caught_by_the_strict_loader(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text((MODELS / "llama3-8b.yaml").read_text() + "num_layers: 33\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate keys"):
        _load(path)


@pytest.mark.parametrize("name", sorted(TOTAL_PARAMS_B))
def test_total_parameters_match_the_published_size(name: str) -> None:
    from placement.workload import workload

    total = workload(ModelSpec.model_validate(_load(MODELS / f"{name}.yaml"))).total_params / 1e9
    assert total == pytest.approx(TOTAL_PARAMS_B[name], rel=0.02)


EXACT_PARAMS = {
    # Every parameter of the released checkpoints, norms, biases and sinks included: a count that leaves out a
    # layer's vectors misses these by 0.02-0.04 % (GPT-OSS-120B: 116.79 B of the model card's 116.83 B).
    "gpt-oss-120b": 116_829_156_672,  # OpenAI arXiv:2508.10925 Table 1: 116.83 B
    "gpt-neox-20b": 20_554_567_680,   # the N of GPT-NeoX's own FLOP logger (runs.yaml gpt-neox-20b-96xa100)
    "llama3-8b": 8_030_261_248,       # meta-llama/Meta-Llama-3-8B safetensors
    "qwen3-30b-a3b": 30_532_122_624,  # Qwen/Qwen3-30B-A3B safetensors
}


@pytest.mark.parametrize("name", sorted(EXACT_PARAMS))
def test_norms_biases_and_sinks_are_counted(name: str) -> None:
    from placement.workload import workload

    assert workload(ModelSpec.model_validate(_load(MODELS / f"{name}.yaml"))).total_params == EXACT_PARAMS[name]


def _gpt_oss(**update: Any) -> ModelSpec:
    return ModelSpec.model_validate({**_load(MODELS / "gpt-oss-120b.yaml"), **update})


def test_sliding_window_layers_attend_to_the_window_only() -> None:
    """GPT-OSS at s = 4096: 18 full layers meet 4096 keys, 18 windowed layers 128 keys."""
    from placement.workload import workload

    windowed, full = workload(_gpt_oss()), workload(_gpt_oss(sliding_window=None, sliding_window_layers=0))
    s = 4096
    core_full = 2.0 * s * full.attn_core_dim * 36
    core_windowed = 2.0 * (18 * s + 18 * 128) * windowed.attn_core_dim
    assert full.forward_flops_per_token(s) - windowed.forward_flops_per_token(s) == pytest.approx(
        core_full - core_windowed)
    assert windowed.attended_keys(s) == (18 * s + 18 * 128) / 36
    assert windowed.attended_keys(64) == 64  # shorter than the window: the window changes nothing
    assert windowed.forward_flops_per_token(64) == full.forward_flops_per_token(64)


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_models_without_a_window_keep_the_full_attention_count(path: Path) -> None:
    from placement.workload import workload

    spec = ModelSpec.model_validate(_load(path))
    if spec.sliding_window is not None:
        return
    w = workload(spec)
    s = spec.default_seq_len
    assert w.attended_keys(s) == s
    assert w.attn_core_flops_per_token(s) == 2.0 * s * w.attn_core_dim * w.num_layers  # bit-identical


def test_sliding_window_layers_beyond_the_model_are_refused() -> None:
    with pytest.raises(ValidationError, match=re.escape(
            "sliding_window_layers (37) > num_layers (36); set it to at most 36")):
        _gpt_oss(sliding_window_layers=37)


def test_sliding_window_and_its_layer_count_go_together() -> None:
    with pytest.raises(ValidationError, match=re.escape(
            "sliding_window (128) and sliding_window_layers (0) go together: set the window and how many layers "
            "use it, or neither")):
        _gpt_oss(sliding_window_layers=0)
    with pytest.raises(ValidationError, match=re.escape("sliding_window (None) and sliding_window_layers (18)")):
        _gpt_oss(sliding_window=None)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        _gpt_oss(sliding_window=0)
