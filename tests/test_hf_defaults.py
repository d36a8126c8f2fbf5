"""What a HuggingFace config.json leaves out is filled as transformers fills it, and said; files that are not a
model's config.json are named for what they are (user trial t22, findings 4-8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.errors import InputError
from placement.loaders.hf_config import load_hf_config, model_from_hf_config
from placement.workload import workload

HF = Path(__file__).parent / "data" / "hf"


def _config(folder: str) -> dict:
    return json.loads((HF / folder / "config.json").read_text())


def test_a_mistral_config_without_kv_heads_is_read_with_mistralconfigs_eight() -> None:
    data = _config("mistral-7b-v0.1")
    del data["num_key_value_heads"]
    spec = model_from_hf_config(data, "m")
    assert spec.num_kv_heads == 8  # MistralConfig(num_key_value_heads=8); multi-head attention would be 8.05 B
    assert workload(spec).total_params == workload(model_from_hf_config(_config("mistral-7b-v0.1"), "m")).total_params
    assert "as transformers' MistralConfig defaults them: num_key_value_heads 8" in spec.source


def test_a_llama_config_without_kv_heads_is_multi_head_and_says_so() -> None:
    data = _config("llama-3.1-8b")
    del data["num_key_value_heads"]
    spec = model_from_hf_config(data, "l")
    assert spec.num_kv_heads is None  # LlamaConfig: None means the query heads' count
    assert "LlamaConfig defaults them: num_key_value_heads 32 (the query heads)" in spec.source


def test_a_qwen3_config_without_head_dim_takes_qwen3configs_128() -> None:
    # Qwen3-32B's shape: hidden 5120 over 64 heads is 80, but Qwen3Config's head_dim is 128 (32.8 B, not 30.5 B)
    data = _config("qwen3-8b") | {"hidden_size": 5120, "num_attention_heads": 64, "num_hidden_layers": 64,
                                  "intermediate_size": 25600}
    del data["head_dim"]
    spec = model_from_hf_config(data, "q")
    assert spec.head_dim == 128
    assert "Qwen3Config defaults them: head_dim 128 (not hidden_size / num_attention_heads = 80)" in spec.source
    assert 32.5e9 < workload(spec).total_params < 33e9


def test_a_stated_shape_is_not_reported_as_a_default() -> None:
    for folder in ("llama-3.1-8b", "qwen3-8b", "mistral-7b-v0.1", "gpt-oss-120b"):
        assert "defaults them" not in load_hf_config(HF / folder / "config.json").source


def test_deepseek_router_keys_a_config_lacks_take_the_family_defaults_and_are_said() -> None:
    data = _config("deepseek-v3")
    for key in ("scoring_func", "topk_method", "routed_scaling_factor"):
        del data[key]
    spec = model_from_hf_config(data, "d")
    assert (spec.moe.router_score_function, spec.moe.router_expert_bias, spec.moe.router_topk_scaling_factor) == \
        ("sigmoid", True, 2.5)
    assert "DeepseekV3Config defaults them: scoring_func sigmoid, topk_method noaux_tc, routed_scaling_factor 2.5" \
        in spec.source


@pytest.mark.parametrize(("key", "value"), [("scoring_func", "tanh"), ("topk_method", "random"),
                                            ("routed_scaling_factor", 0)])
def test_a_router_value_no_launch_file_can_state_is_refused_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(InputError, match=f"key `{key}` = "):
        model_from_hf_config(_config("deepseek-v3") | {key: value}, "d")


def test_qwen2s_qkv_bias_reaches_megatron(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["plan", "--model", str(HF / "qwen2-7b"), "--gpus", "8", "--seq-len", "4096",
                                    "--global-batch", "32", "--framework", "megatron", "--emit", "megatron", "--out",
                                    str(tmp_path)])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "megatron.sh").read_text()
    assert "--disable-bias-linear --add-qkv-bias" in text
    assert "--disable-bias-linear or not" not in text


@pytest.mark.parametrize(("name", "data", "said"), [
    ("model.safetensors.index.json", {"metadata": {"total_size": 1}, "weight_map": {"a": "b"}},
     "this is a safetensors weights index (model.safetensors.index.json), not the model's config.json"),
    ("tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>"},
     "this is a tokenizer config (tokenizer_config.json), not the model's config.json"),
    ("generation_config.json", {"_from_model_config": True, "bos_token_id": 1, "do_sample": True},
     "this is a generation config (generation_config.json), not the model's config.json"),
    ("config.json", {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
                     "text_config": {"model_type": "gemma3_text", "hidden_size": 3840}},
     "a multimodal wrapper (model_type 'gemma3'): the language model is nested in `text_config`, which placement does "
     "not read in place; its model_type 'gemma3_text' is not a family placement reads either"),
    ("config.json", {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
                     "text_config": {"model_type": "llama", "hidden_size": 4096}},
     "its model_type 'llama' is a family placement reads: save the `text_config` object as a config.json of its own"),
])
def test_a_json_that_is_not_a_models_config_is_named_for_what_it_is(tmp_path: Path, name: str, data: dict,
                                                                    said: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    out = CliRunner().invoke(main, ["show", "model", str(path)])
    assert out.exit_code == 2
    assert said in out.output and "Traceback" not in out.output


def test_a_folder_without_config_json_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(main, ["show", "model", str(tmp_path / "empty")])
    assert out.exit_code == 2
    assert "holds config.json, and this one holds none" in out.output


def test_show_model_states_the_router_as_read() -> None:
    out = CliRunner().invoke(main, ["show", "model", str(HF / "deepseek-v3")])
    assert out.exit_code == 0
    assert "router (score, top-k weights, expert bias, scaling)" in out.output
    assert "sigmoid, renormalized, bias, x2.5" in out.output


def test_qkv_bias_without_linear_bias_leaves_the_other_biases_to_the_user(tmp_path: Path) -> None:
    import yaml

    data = yaml.safe_load((Path(__file__).parents[1] / "models" / "llama3-8b.yaml").read_text())
    data.pop("linear_bias", None)
    data["qkv_bias"] = True
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    out = CliRunner().invoke(main, ["plan", "--model", str(path), "--gpus", "8", "--seq-len", "4096",
                                    "--global-batch", "32", "--framework", "megatron", "--emit", "megatron", "--out",
                                    str(tmp_path / "out")])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "out" / "megatron.sh").read_text()
    assert "--add-qkv-bias" in text and "--disable-bias-linear or not" in text


def test_a_qwen_moe_config_without_norm_topk_prob_keeps_raw_weights_and_says_so() -> None:
    data = _config("qwen3-30b-a3b")
    del data["norm_topk_prob"]
    spec = model_from_hf_config(data, "q")
    assert spec.moe.router_topk_normalized is False  # Qwen3MoeConfig(norm_topk_prob=False)
    assert "Qwen3MoeConfig defaults them: norm_topk_prob false" in spec.source
