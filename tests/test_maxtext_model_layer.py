"""MaxText as a user trial ran its own Mixtral test (tests/end_to_end/gpu/mixtral/test_8x7b.sh: base.yml with
model_name=mixtral-8x7b, ici_expert_parallelism=-1, weight_dtype=bfloat16): the model file the command's model_name
loads is merged over base.yml (it was refused as base.yml's 16 layers, or as contradictory beside it), an expert axis
shards the other weights as fsdp does (priced replicated), and 16-bit weights keep no float32 master and bf16 AdamW
moments (priced as float32 weights and moments, "does not fit" at 110 GiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

BASE = ("model_name: default\nbase_emb_dim: 2048\nbase_num_query_heads: 16\nbase_num_kv_heads: 16\n"
        "base_mlp_dim: 7168\nbase_num_decoder_layers: 16\nweight_dtype: float32\n")
MODEL = ("base_emb_dim: 4096\nbase_num_query_heads: 32\nbase_num_kv_heads: 8\nbase_mlp_dim: 14336\n"
         "base_num_decoder_layers: 32\nnum_experts: 8\nnum_experts_per_tok: 2\ndecoder_block: mistral\n")
COMMAND = ("#!/bin/bash\npython3 -m maxtext.trainers.pre_train.train configs/base.yml model_name=mixtral-8x7b "
           "hardware=gpu ici_expert_parallelism=-1 ici_fsdp_parallelism=1 max_target_length=1024 "
           "per_device_batch_size=1{extra}\n")


def _audit(tmp_path: Path, *files: str, extra: str = "") -> tuple[dict, str]:
    (tmp_path / "base.yml").write_text(BASE)
    (tmp_path / "mixtral-8x7b.yml").write_text(MODEL)
    (tmp_path / "train.sh").write_text(COMMAND.format(extra=extra))
    argv = ["audit", *[a for f in files for a in ("--launch", str(tmp_path / f))], "--model", "mixtral-8x7b",
            "--gpus", "8"]
    result = CliRunner().invoke(main, [*argv, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout), CliRunner().invoke(main, argv).output


@pytest.mark.parametrize(("files", "by"), [
    (("train.sh", "base.yml"), "configs/models/mixtral-8x7b.yml, which model_name mixtral-8x7b"),
    (("train.sh", "base.yml", "mixtral-8x7b.yml"), "mixtral-8x7b.yml, the model file model_name mixtral-8x7b"),
])
def test_the_model_file_replaces_base_ymls_dimensions(tmp_path, files, by):
    data, text = _audit(tmp_path, *files)
    sources = data["layout"]["sources"]
    assert "base.yml" not in sources.get("num_layers", "") and "base.yml" not in sources.get("hidden_size", "")
    if "mixtral-8x7b.yml" in files:
        assert sources["num_layers"].endswith("base_num_decoder_layers: 32")
    line = next(x for x in text.splitlines() if "base.yml: its base_emb_dim" in x)
    assert by in line


def test_an_expert_axis_alone_shards_the_other_weights(tmp_path):
    data, _ = _audit(tmp_path, "train.sh")
    lay = data["estimate"]["layout"]
    assert (lay["ep"], lay["zero_stage"], lay["dp_shard"]) == (8, 3, 8)


def test_16bit_weights_keep_no_master_and_bf16_moments(tmp_path):
    f32, _ = _audit(tmp_path, "train.sh")
    bf16, text = _audit(tmp_path, "train.sh", extra=" weight_dtype=bfloat16")
    recipe = bf16["estimate"]["recipe"]
    assert (recipe["fp32_weights"], recipe["optimizer_master_weights"], recipe["optimizer_state_bf16"]) == (
        False, False, True)
    assert f32["estimate"]["recipe"]["fp32_weights"] is True
    # float32 weights: 8 bytes of moments a parameter in the optimizer row; bf16 ones: 4, and no master
    optimizer = f32["estimate"]["memory"]["optimizer_bytes"]
    assert bf16["estimate"]["memory"]["optimizer_bytes"] == pytest.approx(optimizer / 2)
    assert "optimizer state (Adam: bf16 moments, no master copy)" in text


def test_no_master_copy_takes_4_bytes_a_parameter_off_the_optimizer_state():
    argv = ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--pp", "1", "--zero", "1", "--mbs", "1",
            "--seq-len", "4096", "--global-batch", "8", "--json"]
    with_master = json.loads(CliRunner().invoke(main, argv).stdout)["memory"]["optimizer_bytes"]
    without = json.loads(CliRunner().invoke(main, [*argv, "--no-optimizer-master-weights"]).stdout)
    assert without["memory"]["optimizer_bytes"] == pytest.approx(with_master * 8 / 12)


def test_framework_maxtext_refuses_zero1_beside_an_expert_axis():
    result = CliRunner().invoke(main, ["evaluate", "--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--tp", "1",
                                       "--zero", "1", "--mbs", "1", "--seq-len", "1024", "--global-batch", "8",
                                       "--framework", "maxtext"])
    assert result.exit_code == 2 and "its expert axis shards the other weights' embed dimension" in result.output
