"""Three user trials of a HuggingFace config.json: `rms_norm_eps: NaN` was dropped unsaid (the emitted Megatron file
fell back to 1e-5), a Mistral config (no attention_bias key) left --disable-bias-linear to the user, and a folder named
config.json was reported as "no such file"."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main

MISTRAL = Path(__file__).parent / "data" / "hf" / "mistral-7b-v0.1" / "config.json"


def test_a_norm_epsilon_that_is_not_one_is_refused_with_its_key(tmp_path):
    data = json.loads(MISTRAL.read_text())
    for bad in ("NaN", "2.0", '"1e-5"'):
        text = MISTRAL.read_text().replace(f'"rms_norm_eps": {json.dumps(data["rms_norm_eps"])}',
                                           f'"rms_norm_eps": {bad}')
        assert text != MISTRAL.read_text()
        (tmp_path / "config.json").write_text(text)
        result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "config.json")])
        assert result.exit_code == 2 and "rms_norm_eps" in result.output and "Traceback" not in result.output


def test_mistrals_projections_are_unbiased_and_its_megatron_file_says_so(tmp_path):
    assert load_model(str(MISTRAL)).linear_bias is False
    result = CliRunner().invoke(main, ["evaluate", "--model", str(MISTRAL), "--gpus", "8", "--seq-len", "4096",
                                       "--global-batch", "64", "--tp", "1", "--zero", "1", "--emit", "megatron",
                                       "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "--disable-bias-linear" in shlex.split((tmp_path / "megatron.sh").read_text(), comments=True)


def test_a_folder_named_config_json_is_said_to_be_a_folder(tmp_path):
    (tmp_path / "config.json").mkdir()
    result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "config.json")])
    assert result.exit_code == 2 and "a folder, not a file" in result.output


NEMOTRON = Path(__file__).parent / "data" / "hf" / "nemotron-4-340b" / "config.json"


def test_nemotrons_partial_rope_is_read_and_written_defaulting_to_its_config_classes_half(tmp_path):
    """NemotronConfig rotates partial_rotary_factor of each head (default 0.5, transformers configuration_nemotron.py):
    a user trial found the key dropped, with or without it in the file, and megatron.sh training full RoPE."""
    assert load_model(str(NEMOTRON)).rotary_percent == 0.5
    data = json.loads(NEMOTRON.read_text())
    without = {k: v for k, v in data.items() if k != "partial_rotary_factor"}
    for config, want in ((without, 0.5), ({**data, "partial_rotary_factor": 0.25}, 0.25),
                         ({**data, "partial_rotary_factor": 1.0}, None)):
        (tmp_path / "config.json").write_text(json.dumps(config))
        model = load_model(str(tmp_path / "config.json"))
        assert model.rotary_percent == want
        if "partial_rotary_factor" not in config:  # the default, said as one
            assert "partial_rotary_factor 0.5" in model.source
    (tmp_path / "config.json").write_text(json.dumps({**data, "num_hidden_layers": 4, "hidden_size": 1536,
                                                      "num_attention_heads": 8, "head_dim": 192,
                                                      "intermediate_size": 6144}))
    result = CliRunner().invoke(main, ["evaluate", "--model", str(tmp_path / "config.json"), "--gpus", "8",
                                       "--seq-len", "4096", "--global-batch", "64", "--tp", "1", "--zero", "1",
                                       "--emit", "megatron", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    args = shlex.split((tmp_path / "out" / "megatron.sh").read_text(), comments=True)
    assert args[args.index("--rotary-percent") + 1] == "0.5"


def test_a_partial_rope_in_a_family_that_rotates_whole_heads_is_refused(tmp_path):
    """Llama's apply_rotary_pos_emb multiplies the whole head by cos and sin: a partial_rotary_factor there (top level
    or in transformers 5's rope_parameters) is no model the family's code runs, and was dropped unsaid."""
    data = json.loads(MISTRAL.read_text())
    for config in ({**data, "partial_rotary_factor": 0.5},
                   {**data, "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25}}):
        (tmp_path / "config.json").write_text(json.dumps(config))
        result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "config.json")])
        assert result.exit_code == 2, result.output
        assert "key `partial_rotary_factor`" in result.output and "rotary_percent" in result.output


def test_a_window_the_model_code_must_build_is_said_in_the_files_that_leave_it_to_that_code(tmp_path):
    """Mistral's window is priced (its attention reads 4,096 keys, not the sequence), but torchtitan's and DeepSpeed's
    files leave the model to the user's code: a user trial found neither file naming the window the header priced."""
    result = CliRunner().invoke(main, ["evaluate", "--model", str(MISTRAL), "--gpus", "16", "--seq-len", "8192",
                                       "--global-batch", "32", "--tp", "1", "--zero", "3", "--recompute", "full",
                                       "--emit", "torchtitan,deepspeed", "--out", str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    said = "sliding-window attention (4096 keys on every layer; priced so"
    assert said in (tmp_path / "torchtitan.sh").read_text()
    assert said in (tmp_path / "deepspeed.sh").read_text()


QWEN3_8B = Path(__file__).parent / "data" / "hf" / "qwen3-8b" / "config.json"
QWEN3_30B = Path(__file__).parent / "data" / "hf" / "qwen3-30b-a3b" / "config.json"


def _qwen3(tmp_path: Path, layers: int, hidden: int, ffn: int, heads: int, tied: bool) -> Path:
    """Qwen3-8B's config.json with another published size's dimensions (Qwen/Qwen3-32B, Qwen/Qwen3-0.6B)."""
    data = json.loads(QWEN3_8B.read_text()) | {"num_hidden_layers": layers, "hidden_size": hidden,
                                               "intermediate_size": ffn, "num_attention_heads": heads,
                                               "tie_word_embeddings": tied}
    path = tmp_path / f"qwen3-{layers}-{hidden}" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    return path


def test_a_config_json_of_a_model_torchtitan_ships_runs_as_that_config_and_audits_as_it(tmp_path):
    """torchtitan 0.3.0 ships qwen3_32b and qwen3_0_6b (models/qwen3/config_registry.py), which placement's catalog
    lacks: a user trial's Qwen3-32B and Qwen3-0.6B config.json files got `--module MODULE --config CONFIG` and
    "ships no config".  Now the file names the config, its audit prices the same job, and a config.json of another
    size is told it is not the model the files train."""
    big = _qwen3(tmp_path, 64, 5120, 25600, 64, False)
    small = _qwen3(tmp_path, 28, 1024, 3072, 16, True)
    for path, config in ((big, "qwen3_32b"), (small, "qwen3_0_6b")):
        out = tmp_path / config
        result = CliRunner().invoke(main, ["evaluate", "--model", str(path), "--gpus", "64", "--seq-len", "4096",
                                           "--global-batch", "256", "--tp", "2", "--zero", "3", "--mbs", "2",
                                           "--recompute", "full", "--emit", "torchtitan", "--out", str(out)])
        assert result.exit_code in (0, 1), result.output
        text = (out / "torchtitan.sh").read_text()
        assert f"--module qwen3 --config {config} " in text and "ships no config" not in text
        runs = next(line for line in text.splitlines() if line.startswith("# this file runs "))
        audit = CliRunner().invoke(main, ["audit", "--launch", str(out / "torchtitan.sh"), "--model", str(path),
                                          "--cluster", "dgx-h100", "--gpus", "64"])
        assert audit.exit_code in (0, 1), audit.output
        step = next(line for line in audit.output.splitlines() if line.startswith("step ")).split()[1]
        assert f": {step} s/step (" in runs
    wrong = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "qwen3_32b" / "torchtitan.sh"), "--model",
                                      str(small), "--cluster", "dgx-h100", "--gpus", "64"])
    assert wrong.exit_code == 2
    assert "train torchtitan's qwen3:qwen3_32b (its flavor: 64 layers, hidden 5120, 64 heads) but --model" in (
        wrong.output)


def test_a_config_json_of_a_model_maxtext_ships_names_its_model_config(tmp_path):
    """MaxText matched its model configs by catalog name only: Qwen3-30B-A3B's own config.json, the catalog model's
    dimensions, got model_name "default" (base.yml's model) and "ships no model config"."""
    path = tmp_path / "Qwen3-30B-A3B-Instruct-2507" / "config.json"  # a name the catalog does not have
    path.parent.mkdir()
    path.write_text(QWEN3_30B.read_text())
    result = CliRunner().invoke(main, ["evaluate", "--model", str(path), "--gpus", "64", "--seq-len", "4096",
                                       "--global-batch", "256", "--ep", "8", "--zero", "1", "--mbs", "1",
                                       "--recompute", "full", "--emit", "maxtext", "--out", str(tmp_path / "o")])
    assert result.exit_code in (0, 1), result.output
    text = (tmp_path / "o" / "maxtext.yml").read_text()
    # the fixture's rope_theta is Qwen3-30B-A3B's 1e6: qwen3-30b-a3b-base.yml's (tests/test_rope_config_mismatch.py)
    assert 'model_name: "qwen3-30b-a3b-base"' in text and "ships no model config" not in text


def test_attention_biases_without_mlp_biases_are_refused_not_given_to_the_mlp(tmp_path):
    """LlamaConfig biases q, k, v and o under attention_bias and the MLP only under mlp_bias (default false): a user
    trial's attention_bias true got a Megatron file biasing the MLPs too.  Megatron-LM states all, none, or q, k and v
    alone, so the mix is refused; both true (or both false) still read."""
    data = json.loads((Path(__file__).parent / "data" / "hf" / "llama-3.1-8b" / "config.json").read_text())
    for config, refused in (({**data, "attention_bias": True}, True),
                            ({**data, "attention_bias": True, "mlp_bias": False}, True),
                            ({**data, "attention_bias": True, "mlp_bias": True}, False),
                            ({**data, "attention_bias": False, "mlp_bias": False}, False)):
        (tmp_path / "config.json").write_text(json.dumps(config))
        result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "config.json")])
        assert (result.exit_code == 2) == refused, result.output
        if refused:
            assert "key `attention_bias` = true with `mlp_bias` false" in result.output
        else:
            assert load_model(str(tmp_path / "config.json")).linear_bias is config["attention_bias"]


def test_a_config_json_key_in_a_model_yaml_is_told_the_yaml_field(tmp_path):
    """A user trial's model YAML with num_key_value_heads and rope_theta was told only to remove them (and without
    rope_theta Megatron's base of 10000 trains)."""
    (tmp_path / "m.yaml").write_text("name: x\nnum_layers: 2\nhidden_size: 1024\nffn_hidden_size: 4096\n"
                                     "num_attention_heads: 8\nnum_key_value_heads: 8\nrope_theta: 500000\n"
                                     "num_local_experts: 8\nvocab_size: 32000\n")
    result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "m.yaml")])
    assert result.exit_code == 2
    for said in ("did you mean `num_kv_heads`? (`num_key_value_heads` is config.json's name for it)",
                 "did you mean `rope_base`? (`rope_theta` is config.json's name for it)",
                 "did you mean `num_experts` under `moe:`?"):
        assert said in result.output, result.output
