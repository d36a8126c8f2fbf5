"""MaxText 0.2.5 ships configs/models/gpt-oss-120b.yml: a gpt-oss-120b plan's maxtext.yml names it (a QA run: the
file named model_name "default", base.yml's own model, and warned that MaxText ships no matching config while the
next warning cited that very file), and the file starts on GPUs, where that config's attention sinks need cuDNN's
attention."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main
from placement.emit import common, maxtext
from placement.specs.recipe import Recipe
from tests.maxtext_wheel import wheel_config
from tests.verify.helpers import plan_context


def test_the_qa_command_names_maxtexts_gpt_oss_120b_config(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "gpt-oss-120b", "--cluster", "dgx-b200",
                                       "--gpus", "64", "--global-batch", "512", "--framework", "maxtext", "--emit",
                                       "maxtext", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "maxtext.yml").read_text()
    cfg = yaml.safe_load(text)
    assert cfg["model_name"] == "gpt-oss-120b"
    # the config runs GPT-OSS's MLP, sinks and YaRN: nothing is "another model", and the header prices the file
    assert "ships no model config" not in result.stderr and "trains another model" not in text
    assert "does not run" not in text and "quick-GELU" not in text
    # the sinks run only under cuDNN's attention on GPUs: written, and the plan --framework maxtext priced with it
    assert cfg["attention"] == "cudnn_flash_te" and cfg["max_segments_per_seq"] == 32
    assert "# this file runs" not in text


def test_a_gpt_oss_plan_without_cudnns_attention_says_its_maxtext_file_runs_it(tmp_path: Path) -> None:
    """A plan priced with another kernel (here flash2, asked for) gets cuDNN's in its maxtext.yml, priced in the
    header."""
    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "gpt-oss-120b", "--cluster", "dgx-b200",
                                       "--gpus", "64", "--global-batch", "512", "--attention-kernel", "flash2",
                                       "--emit", "maxtext", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    text = (out / "maxtext.yml").read_text()
    assert yaml.safe_load(text)["attention"] == "cudnn_flash_te"
    line = next(x for x in text.splitlines() if x.startswith("# this file runs "))
    assert "cuDNN's attention (attention: cudnn_flash_te, not flash2" in line
    assert "s/step" in line and "layers/attention_op.py:153-157" in line


def test_plan_framework_maxtext_prices_gpt_oss_with_the_cudnn_attention_its_file_runs(tmp_path: Path) -> None:
    """MaxText runs attention sinks on GPUs only under attention: cudnn_flash_te, which the files write, so `plan
    --framework maxtext` prices cuDNN's attention, not base.yml's Triton kernel (a QA run: gpt-oss-120b on 128 H100
    was planned with flash2 at 2.707 s/step while its own maxtext.yml ran cuDNN's at 2.654 s, listed in files_run),
    and the file runs the plan."""
    import json

    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "gpt-oss-120b", "--cluster", "dgx-h100",
                                       "--gpus", "64", "--seq-len", "4096", "--global-batch", "256", "--top-k", "1",
                                       "--framework", "maxtext", "--emit", "maxtext", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["plans"][0]["recipe"]["attention_kernel"] == "flash"
    assert "cudnn_flash_te" in got["plans"][0]["recipe_sources"]["attention_kernel"]
    assert got["files_run"] == []
    assert yaml.safe_load((out / "maxtext.yml").read_text())["attention"] == "cudnn_flash_te"
    # a model MaxText runs without sinks keeps the Triton kernel's price
    dense = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "llama3-8b", "--gpus", "16", "--top-k", "1",
                                      "--framework", "maxtext", "--json"])
    assert json.loads(dense.stdout)["plans"][0]["recipe"]["attention_kernel"] == "flash2"


def test_maxtexts_gpt_oss_120b_config_has_every_number_of_the_catalog_model() -> None:
    """Every field of configs/models/gpt-oss-120b.yml that the catalog's models/gpt-oss-120b.yaml states: the emitter
    names the config with no override and no warning, so they must be the same."""
    cfg, m = wheel_config("gpt-oss-120b"), load_model("gpt-oss-120b")
    y = m.yarn_rope
    assert (cfg["base_num_decoder_layers"], cfg["base_emb_dim"], cfg["base_num_query_heads"], cfg["base_num_kv_heads"],
            cfg["head_dim"]) == (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.head_dim)
    assert (cfg["num_experts"], cfg["num_experts_per_tok"], cfg["base_moe_mlp_dim"], cfg["base_mlp_dim"]) == (
        m.moe.num_experts, m.moe.top_k, m.moe.expert_ffn_hidden_size, m.ffn_hidden_size)
    assert (cfg["vocab_size"], cfg["logits_via_embedding"], cfg["normalization_layer_epsilon"]) == (
        m.vocab_size, m.tied_embeddings, m.norm_epsilon)
    # a 128-key window (MaxText keeps keys under 128 back, the query's own included) on every other layer
    assert cfg["sliding_window_size"] == m.sliding_window
    assert m.num_layers // cfg["inhomogeneous_layer_cycle_interval"] == m.sliding_window_layers
    assert cfg["attention_sink"] is m.attention_sinks is True
    assert cfg["attention_bias"] and cfg["mlp_bias"] and m.linear_bias
    assert cfg["mlp_activations"] == ["sigmoid", "linear"] and cfg["mlp_activations_limit"] == m.swiglu_clamp
    assert cfg["decoder_block"] == "gpt_oss" and cfg.get("norm_topk_prob", False) is False  # softmax over the top 4
    assert (cfg["rope_type"], cfg["rope_max_timescale"], cfg["rope_factor"], cfg["original_max_position_embeddings"],
            cfg["beta_fast"], cfg["beta_slow"], cfg["rope_truncate"]) == (
        "yarn", m.rope_base, y.factor, y.original_max_position_embeddings, y.beta_fast, y.beta_slow, y.truncate)
    # what the emitter says the config runs is the catalog model's own list of GPT-OSS features
    assert maxtext.GPT_OSS_RUNS == tuple(common.gpt_oss_features(m, mla_yarn=False))


def test_with_context_parallelism_the_sinks_file_does_not_start() -> None:
    """cuDNN's attention, the only one that runs sinks on GPUs, refuses context parallelism over packed sequences
    unless the ring load-balances; the file keeps base.yml's all-gather, so it says it does not start."""
    # placement prices CP beside sinks as Transformer Engine's all-to-all only (frameworks.py)
    ctx, _ = plan_context("gpt-oss-120b", "dgx-b200", 64, 4096, 512, {"cp": 2, "tp": 1, "pp": 1},
                          recipe=Recipe(cp_comm_type="a2a"))
    text, warnings, _ = maxtext.render(ctx)
    assert any(w.startswith("does not start: model_name gpt-oss-120b trains attention sinks") for w in warnings)
    assert "# this file does not start:" in text
    assert 'attention: "cudnn_flash_te"' not in text


def test_a_model_of_gpt_oss_shape_with_other_numbers_is_warned() -> None:
    """Under model_name gpt-oss-120b a model with another clamp trains the config's: its keys are the model
    config's, which maxtext.yml cannot override."""
    ctx, model = plan_context("gpt-oss-120b", "dgx-b200", 64, 4096, 512, {"cp": 1, "tp": 1, "pp": 1})
    other = model.model_copy(update={"swiglu_clamp": 10.0})
    _, warnings, _ = maxtext.render(dataclasses.replace(ctx, model=other))
    assert any("the model has the MLP's inputs clamped at 10, but model_name gpt-oss-120b trains" in w
               for w in warnings)
