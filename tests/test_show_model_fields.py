"""`show model` prints what a reader checks a config against: the attention's head size or MLA ranks, a sliding
window and on how many layers, sinks, the FFN width, the vocabulary and whether the embeddings are tied, and the
multi-token-prediction modules (a user trial could see none of them short of planning, and read the same training
state for DeepSeek-V3's HF config, which brings its MTP module, as for the catalog file, which leaves it out)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main

HF = Path(__file__).parent / "data" / "hf"


def _show(ref: str) -> tuple[str, dict]:
    text = CliRunner().invoke(main, ["show", "model", ref])
    facts = CliRunner().invoke(main, ["show", "model", ref, "--json"])
    assert text.exit_code == 0 and facts.exit_code == 0, text.output
    return text.output, json.loads(facts.stdout)


def test_the_window_head_size_and_tying_are_shown_as_read() -> None:
    ref = str(HF / "mistral-7b-v0.1" / "config.json")
    model = load_model(ref)
    text, facts = _show(ref)
    assert (facts["sliding_window"], facts["sliding_window_layers"]) == (model.sliding_window, model.num_layers)
    assert f"window {model.sliding_window} keys on {model.num_layers} of {model.num_layers} layers" in text
    assert facts["head_dim"] == model.hidden_size // model.num_attention_heads and "(untied)" in text
    _, oss = _show("gpt-oss-120b")
    assert oss["attention_sinks"] and oss["head_dim"] == load_model("gpt-oss-120b").head_dim


def test_mla_and_the_mtp_modules_are_shown_and_said_outside_the_counts() -> None:
    text, facts = _show(str(HF / "deepseek-v3" / "config.json"))
    assert facts["mla"]["kv_lora_rank"] == 512 and facts["head_dim"] is None and "MLA (kv rank 512" in text
    assert facts["mtp_modules"] == 1 and "multi-token-prediction modules" in text and "not in the counts" in text
    catalog_text, catalog = _show("deepseek-v3")
    assert catalog["mtp_modules"] == 0 and "multi-token-prediction modules " not in catalog_text
    assert catalog["total_params"] == facts["total_params"]  # the counts leave the module out, as said
