"""GPT-OSS's architecture reaches the launch files (user trial: megatron.sh wrote --swiglu, said the clamp had "no
Megatron-LM argument" and left YaRN's factors unstated, training another model): its gated quick-GELU with the +1
offset and clamp 7, its learnable attention sinks and its YaRN numbers, from the catalog and from a HuggingFace
config.json; any YaRN config's numbers; the audit reads the same arguments; none of it changes a cost."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from placement.catalog import load_model
from placement.cli import main
from placement.errors import InputError
from placement.loaders.hf_config import model_from_hf_config
from placement.specs.model import FfnKind, ModelSpec

DATA = Path(__file__).parent / "data" / "hf"
OSS_JSON = DATA / "gpt-oss-120b" / "config.json"
OSS_ARGS = ("--quick-geglu --glu-linear-offset 1 --activation-func-clamp-value 7 ")
OSS_YARN = ("--position-embedding-type yarn --rotary-base 150000 --rotary-scaling-factor 32 "
            "--yarn-original-max-position-embeddings 4096 --yarn-beta-fast 32 --yarn-beta-slow 1 "
            "--no-yarn-correction-range-round-to-int --softmax-type learnable ")
"""megatron.sh's GPT-OSS arguments (Megatron-Bridge GPTOSSProvider's values as Megatron-LM core_v0.19.0 arguments)."""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _megatron(tmp_path: Path, model: str, cluster: str = "dgx-b200", gpus: str = "64", framework: str = "megatron",
              *extra: str) -> Path:
    out = tmp_path / "out"
    code, _, err = run("plan", "--model", model, "--cluster", cluster, "--gpus", gpus, "--top-k", "1",
                       "--emit", framework, "--out", str(out), *extra)
    assert code == 0, err
    return out


def _hf(tmp_path: Path, data: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# --- the spec --------------------------------------------------------------------------------------------------

def test_the_catalog_model_is_gpt_oss() -> None:
    m = load_model("gpt-oss-120b")
    assert (m.ffn_kind, m.glu_linear_offset, m.swiglu_clamp, m.attention_sinks) == (FfnKind.QUICK_GEGLU, 1.0, 7.0,
                                                                                     True)
    assert m.yarn_rope.model_dump() == {"factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                                        "beta_slow": 1.0, "truncate": False, "mscale": None, "mscale_all_dim": None}


def test_quick_geglu_costs_what_swiglu_costs() -> None:
    assert FfnKind.QUICK_GEGLU.num_up_projections == FfnKind.SWIGLU.num_up_projections == 2


def test_the_spec_names_field_value_and_fix() -> None:
    base = load_model("llama3-8b").model_dump()
    with pytest.raises(ValidationError, match=re.escape(
            "glu_linear_offset (1) acts on a gated MLP's two branches, but ffn_kind is gelu; set ffn_kind: "
            "quick_geglu or swiglu, or drop it")):
        ModelSpec(**base | {"ffn_kind": "gelu", "glu_linear_offset": 1.0})
    with pytest.raises(ValidationError, match=re.escape("yarn_rope is set but rope_scaling is llama3")):
        ModelSpec(**base | {"yarn_rope": {"factor": 32.0, "original_max_position_embeddings": 4096}})
    oss = load_model("gpt-oss-120b").model_dump()
    with pytest.raises(ValidationError, match=re.escape("yarn_rope.beta_fast (1) must exceed yarn_rope.beta_slow "
                                                        "(32)")):
        ModelSpec(**oss | {"yarn_rope": oss["yarn_rope"] | {"beta_fast": 1.0, "beta_slow": 32.0}})


# --- the HF loader ---------------------------------------------------------------------------------------------

def test_gpt_oss_config_json_is_the_catalog_model() -> None:
    """The same architecture from config.json as from models/gpt-oss-120b.yaml (the planning defaults aside)."""
    spec = model_from_hf_config(json.loads(OSS_JSON.read_text()), "gpt-oss-120b")
    skip = {"name", "source", "default_seq_len", "default_seq_len_note", "default_global_batch",
            "default_global_batch_note"}
    assert spec.model_dump(exclude=skip) == load_model("gpt-oss-120b").model_dump(exclude=skip)


def test_a_gpt_oss_config_without_rope_scaling_runs_gptossconfigs_yarn() -> None:
    data = {k: v for k, v in json.loads(OSS_JSON.read_text()).items() if k not in ("rope_scaling", "rope_theta")}
    spec = model_from_hf_config(data, "oss")
    assert (spec.rope_base, spec.yarn_rope.factor, spec.yarn_rope.truncate) == (150000.0, 32.0, False)


def test_a_gain_megatron_cannot_state_is_refused() -> None:
    data = json.loads(OSS_JSON.read_text()) | {"swiglu_alpha": 1.5}
    with pytest.raises(InputError, match=re.escape("o.json: key `swiglu_alpha` = 1.5: Megatron-LM's --quick-geglu "
                                                   "fixes the sigmoid's gain at 1.702")):
        model_from_hf_config(data, "o", source="o.json")


def test_any_yarn_config_keeps_its_numbers() -> None:
    qwen = json.loads((DATA / "qwen3-8b" / "config.json").read_text())
    spec = model_from_hf_config(qwen | {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                         "original_max_position_embeddings": 32768}}, "q")
    assert spec.yarn_rope.model_dump() == {"factor": 4.0, "original_max_position_embeddings": 32768,
                                           "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True, "mscale": None,
                                           "mscale_all_dim": None}
    with pytest.raises(InputError, match=re.escape("q.json: key `rope_scaling.factor` = None: YaRN's RoPE scaling "
                                                   "needs it as a number")):
        model_from_hf_config(qwen | {"rope_scaling": {"rope_type": "yarn"}}, "q", source="q.json")
    with pytest.raises(InputError, match=re.escape("key `rope_scaling.attention_factor` = 1.2: no launch file")):
        model_from_hf_config(qwen | {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.2}},
                             "q", source="q.json")


# --- megatron.sh -----------------------------------------------------------------------------------------------

def test_the_user_trial_writes_gpt_oss_not_swiglu(tmp_path: Path) -> None:
    out = _megatron(tmp_path, "gpt-oss-120b", "dgx-b200", "64", "megatron", "--seq-len", "4096", "--global-batch",
                    "1280", "--precision", "fp8", "--framework", "megatron")
    text = (out / "megatron.sh").read_text()
    assert OSS_ARGS in text and OSS_YARN in text
    assert "--swiglu" not in text
    assert "no Megatron-LM argument" not in text and "YaRN factors" not in text


def test_gpt_oss_config_json_writes_the_same_arguments(tmp_path: Path) -> None:
    text = (_megatron(tmp_path, str(OSS_JSON)) / "megatron.sh").read_text()
    assert OSS_ARGS in text and OSS_YARN in text


def test_a_non_mla_yarn_config_writes_its_numbers(tmp_path: Path) -> None:
    qwen = json.loads((DATA / "qwen3-8b" / "config.json").read_text())
    path = _hf(tmp_path, qwen | {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                  "original_max_position_embeddings": 32768}}, "qwen-yarn.json")
    text = (_megatron(tmp_path, str(path), "dgx-h100", "8") / "megatron.sh").read_text()
    assert "--swiglu --untie" in text
    assert ("--position-embedding-type yarn --rotary-base 1000000 --rotary-scaling-factor 4 "
            "--yarn-original-max-position-embeddings 32768 --yarn-beta-fast 32 --yarn-beta-slow 1 " in text)
    assert "round-to-int" not in text  # HF's truncate default is Megatron-LM's rounding default


def test_mla_yarn_writes_the_factor_its_argument_default_would_drop(tmp_path: Path) -> None:
    """DeepSeek-V3: MLA runs YaRN by its rope_type, but --rotary-scaling-factor's default 1.0 replaces
    MLATransformerConfig's 40; the mscale pair differs from the arguments' 1.0 / 0.0 in mscale_all_dim."""
    text = (_megatron(tmp_path, str(DATA / "deepseek-v3" / "config.json"), "dgx-h100", "256")
            / "megatron.sh").read_text()
    assert "--position-embedding-type rope --rotary-base 10000 --rotary-scaling-factor 40 --mscale-all-dim 1 " in text
    assert "--yarn-beta-fast" not in text and "WARNING: the model's YaRN" not in text


def test_mla_yarn_numbers_megatron_fixes_are_warned(tmp_path: Path) -> None:
    """Under MLA, Megatron-LM fixes YaRN's original context and betas (MLATransformerConfig; no argument sets
    them): a model whose numbers differ gets a warning that names the model's and Megatron's."""
    ds = json.loads((DATA / "deepseek-v3" / "config.json").read_text())
    path = _hf(tmp_path, ds | {"rope_scaling": ds["rope_scaling"] | {"beta_fast": 16,
                                                                      "original_max_position_embeddings": 8192}},
               "ds-yarn.json")
    text = (_megatron(tmp_path, str(path), "dgx-h100", "256") / "megatron.sh").read_text()
    assert ("WARNING: the model's YaRN has original_max_position_embeddings 8192, beta_fast 16, but Megatron-LM "
            "(megatron-core 0.19.2)'s multi-latent attention fixes original_max_position_embeddings 4096, beta_fast 32 "
            "(MLATransformerConfig" in text)


def test_other_frameworks_say_what_they_cannot_run(tmp_path: Path) -> None:
    """torchtitan's gpt_oss configs run GPT-OSS's MLP, sinks and YaRN (no flag changes them), MaxText's named
    configs do not, DeepSpeed leaves them to the model code: each says so where the model needs it."""
    oss = json.loads(OSS_JSON.read_text())
    shallow = _hf(tmp_path, oss | {"num_hidden_layers": 24, "layer_types": oss["layer_types"][:24]}, "oss-24.json")
    out = _megatron(tmp_path, str(shallow), "dgx-b200", "64", "all")
    assert "torchtitan 0.3.0 ships no config for oss-24" in (out / "torchtitan.sh").read_text()
    assert "your config must build them" in (out / "torchtitan.sh").read_text()
    maxtext = (out / "maxtext.yml").read_text()
    assert "which model_name default does not run" in maxtext
    # MaxText 0.2.5 runs attention sinks on GPUs only with cuDNN's kernel (validate_gpu_flash_attention): the file
    # writes it for the plan's cuDNN attention, and no longer asks for it
    assert re.search(r'^attention: "cudnn_flash_te"$', maxtext, re.M)
    assert "runs only attention: cudnn_flash_te" not in maxtext
    assert "# architecture (a gated quick-GELU MLP (gate * sigmoid(1.702 gate) * (up + 1))" in (
        out / "deepspeed.sh").read_text()
    catalog = _megatron(tmp_path / "c", "gpt-oss-120b", "dgx-b200", "64", "torchtitan")
    assert "quick-GELU" not in (catalog / "torchtitan.sh").read_text()  # torchtitan's gpt_oss_120b runs all of it
    longer = _hf(tmp_path, oss | {"rope_scaling": oss["rope_scaling"] | {"factor": 16.0}}, "oss-16.json")
    titan = (_megatron(tmp_path / "d", str(longer), "dgx-b200", "64", "torchtitan") / "torchtitan.sh").read_text()
    assert "--config gpt_oss_120b" in titan
    assert re.search(r"WARNING: the model has YaRN RoPE \(factor 16, .*\), but torchtitan 0\.3\.0's gpt_oss "
                     r"configs run .*: this file trains another model", titan)


# --- the audit -------------------------------------------------------------------------------------------------

def _audit_notes(script: Path) -> list[str]:
    code, out, err = run("audit", "--launch", str(script), "--model", "gpt-oss-120b", "--cluster", "dgx-b200",
                         "--gpus", "64", "--json")
    assert code in (0, 1), err
    return json.loads(out)["layout"]["ignored"]


def test_the_audit_reads_the_arguments_and_notes_another_model(tmp_path: Path) -> None:
    script = _megatron(tmp_path, "gpt-oss-120b") / "megatron.sh"
    # read, none unknown, none differing; the NCCL setting Megatron-LM asserts beside per-layer graphs
    # (NCCL_GRAPH_REGISTER=0, which the file exports) is listed as an NCCL setting not modelled, as every such one is
    assert [n for n in _audit_notes(script) if not n.startswith("NCCL_GRAPH_REGISTER=0: an NCCL setting")] == []
    wrong = tmp_path / "swiglu.sh"
    wrong.write_text(script.read_text().replace("--quick-geglu --glu-linear-offset 1 ", "--swiglu ")
                     .replace("--rotary-scaling-factor 32", "--rotary-scaling-factor 40"))
    notes = " ".join(_audit_notes(wrong))
    assert "--swiglu (" in notes and "trains another MLP than model gpt-oss-120b's quick_geglu" in notes
    assert "no --glu-linear-offset (Megatron's 0;" in notes
    assert "--rotary-scaling-factor 40 (" in notes and "differs from model gpt-oss-120b's YaRN 32" in notes


# --- the cost --------------------------------------------------------------------------------------------------

def test_the_architecture_changes_no_step_time(tmp_path: Path) -> None:
    """The same model written as clamped SwiGLU without the offset, sinks and YaRN numbers prices alike."""
    text = (Path(__file__).parents[1] / "models" / "gpt-oss-120b.yaml").read_text()
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join("ffn_kind: swiglu" if x.startswith("ffn_kind") else x for x in text.splitlines()
                               if not x.startswith(("glu_linear_offset", "yarn_rope", "attention_sinks"))))
    assert load_model(str(plain)).ffn_kind is FfnKind.SWIGLU

    def step(model: str) -> float:
        code, out, err = run("evaluate", "--model", model, "--cluster", "dgx-h100", "--gpus", "64", "--ep", "8",
                             "--json")
        assert code in (0, 1), err  # 1: the layout does not fit, priced all the same
        return json.loads(out)["step_time_s"]

    assert step("gpt-oss-120b") == step(str(plain))


def test_the_sliding_window_is_megatrons_tokens_to_the_left(tmp_path: Path) -> None:
    """HF's sliding_window W counts the query's own token; Megatron's window_size (left, right) counts the tokens
    beside it: (W - 1, 0), as Megatron-Bridge #2656 fixed its off-by-one for GPT-OSS, Gemma and Mistral."""
    text = (_megatron(tmp_path, "gpt-oss-120b") / "megatron.sh").read_text()
    window = load_model("gpt-oss-120b").sliding_window
    assert f"--window-size {window - 1},0 " in text and f"--window-size {window},0" not in text
