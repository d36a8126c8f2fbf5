"""MaxText reads its config files and the train command's key=value overrides with OmegaConf's YAML loader, then
pyconfig turns the text none into None before its pydantic config (omegaconf v2.3.0 _utils.py get_yaml_loader,
basecontainer.py merge_with_dotlist; MaxText pyconfig.py _prepare_for_pydantic), and the audit reads them so: QA runs
found `max_target_length=8e3` (OmegaConf's float 8000.0, which MaxText trains at) refused as "must be a whole
number, got '8e3'", `remat_policy=null` and `remat_policy=` priced as a selective policy (0.542 s) where MaxText runs
no policy, as "none" (full recompute under scan_layers, 0.571 s), and `remat_policy=None` refused as a policy MaxText
asserts against."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

BASE_YML = ("model_name: default\nbase_emb_dim: 2048\nbase_num_query_heads: 16\nbase_num_kv_heads: 16\n"
            "base_mlp_dim: 7168\nbase_num_decoder_layers: 16\nici_fsdp_parallelism: -1\nici_tensor_parallelism: 1\n"
            "dcn_data_parallelism: -1\ndcn_fsdp_parallelism: 1\n")
COMMAND = ("python3 -m maxtext.trainers.pre_train.train configs/base.yml model_name=llama3-8b hardware=gpu "
           "ici_fsdp_parallelism=8 per_device_batch_size=1 max_target_length=4096")


def maxtext_audit(tmp_path: Path, name: str, text: str):
    """`audit --json` of a MaxText launch file `name` (its text) beside BASE_YML as base.yml: llama3-8b on 8 H100."""
    (tmp_path / "base.yml").write_text(BASE_YML)
    (tmp_path / name).write_text(text)
    return CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "8", "--cluster",
                                     "dgx-h100", "--launch", str(tmp_path / name), "--launch",
                                     str(tmp_path / "base.yml"), "--json"])


def audited(result) -> dict:
    """The audit's JSON, where it ran (exit 0 or 1)."""
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _audit(tmp_path: Path, extra: str):
    return maxtext_audit(tmp_path, "train.sh", f"#!/bin/bash\n{COMMAND} {extra}\n")


def _layout(tmp_path: Path, extra: str) -> dict:
    """The audited layout, with the estimate's sequence and the recipe's recompute modules beside it."""
    out = audited(_audit(tmp_path, extra))
    return {**out["layout"], "seq_len": out["estimate"]["seq_len"],
            "recompute_modules": out["estimate"]["recipe"]["recompute_modules"]}


def test_an_exponent_without_a_dot_is_omegaconfs_float(tmp_path: Path) -> None:
    assert _layout(tmp_path, "max_target_length=8e3")["seq_len"] == 8000
    assert _layout(tmp_path, "per_device_batch_size=2e0")["micro_batch_size"] == 2


@pytest.mark.parametrize("value", ["null", "", "None", "NONE"])
def test_no_remat_policy_is_none(tmp_path: Path, value: str) -> None:
    for scan, recompute in (("true", "full"), ("false", "none")):
        none = _layout(tmp_path, f"remat_policy=none scan_layers={scan}")
        layout = _layout(tmp_path, f"remat_policy={value} scan_layers={scan}")
        assert none["recompute"] == layout["recompute"] == recompute, (value, scan)
        assert layout["recompute_modules"] == none["recompute_modules"]


def test_yaml_11_words_stay_booleans_as_omegaconf_reads_them(tmp_path: Path) -> None:
    assert _layout(tmp_path, "remat_policy=none scan_layers=off")["recompute"] == "none"
    assert _layout(tmp_path, "remat_policy=none scan_layers=yes")["recompute"] == "full"


def test_a_key_stated_twice_in_a_config_does_not_start(tmp_path: Path) -> None:
    (tmp_path / "base.yml").write_text(BASE_YML)
    job = tmp_path / "job.yml"
    job.write_text('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "llama3-8b"\nici_fsdp_parallelism: 8\n'
                   "per_device_batch_size: 1\nper_device_batch_size: 2\n")
    got = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--cluster", "dgx-h100",
                                    "--launch", str(job), "--launch", str(tmp_path / "base.yml")])
    assert got.exit_code == 2, got.output
    assert "'per_device_batch_size' is stated again (first at line 5)" in got.output
    assert "OmegaConf refuses" in got.output and "Traceback" not in got.output
