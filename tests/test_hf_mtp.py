"""A HuggingFace config's `num_nextn_predict_layers` is the recipe's MTP layers by default (a user trial: DeepSeek-V3's
config declares one MTP module; the loader dropped the key, priced and wrote the model without it, and said the value
was the default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.loaders.hf_config import load_hf_config

CONFIG = Path(__file__).parent / "data" / "hf" / "deepseek-v3" / "config.json"
JOB = ["--cluster", "hgx-h800", "--gpus", "2048", "--seq-len", "4096", "--global-batch", "15360", "--precision", "fp8",
       "--tp", "1", "--ep", "64", "--pp", "16", "--mbs", "1", "--zero", "1", "--recompute", "full", "--json"]


def _evaluate(model: str, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", model, *JOB, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[0])


def test_the_config_declares_one_mtp_module():
    assert json.loads(CONFIG.read_text())["num_nextn_predict_layers"] == 1
    assert load_hf_config(CONFIG).mtp_modules == 1


def test_the_declared_module_is_priced_and_sourced_to_the_config():
    declared = _evaluate(str(CONFIG))
    assert declared["recipe"]["mtp_layers"] == 1
    assert "num_nextn_predict_layers = 1" in declared["recipe_sources"]["mtp_layers"]
    left_out = _evaluate(str(CONFIG), "--mtp-layers", "0")
    assert left_out["recipe"]["mtp_layers"] == 0 and left_out["recipe_sources"]["mtp_layers"] == "flag"
    # the MTP module is a whole extra MoE layer on the last stage: the step and that stage's memory grow
    assert declared["step_time_s"] > left_out["step_time_s"] * 1.02
    assert declared["peak_memory_bytes"] > left_out["peak_memory_bytes"]


@pytest.mark.parametrize("flag", [[], ["--mtp-layers", "2"]])
def test_the_catalog_model_and_a_flag_keep_their_own(flag):
    d = _evaluate("deepseek-v3", *flag)
    assert d["recipe"]["mtp_layers"] == (int(flag[1]) if flag else 0)
    assert d["recipe_sources"]["mtp_layers"] == ("flag" if flag else "default")


def test_a_hub_config_keeps_the_published_runs_of_the_catalog_model_it_prices_as(tmp_path):
    """The published comparisons matched on the model's name alone: DeepSeek-V3 given as its Hub config
    (deepseek-ai/DeepSeek-V3) lost "priced 1.16x the measured 19.91 s run" (a user trial).  A config that prices as a
    catalog model (the same workload, RoPE scaling aside) is compared with that model's runs."""
    from placement.calibration.published import published_model_name

    data = json.loads(CONFIG.read_text())
    data["_name_or_path"] = "deepseek-ai/DeepSeek-V3"
    hub = tmp_path / "config.json"
    hub.write_text(json.dumps(data))
    assert published_model_name(load_hf_config(hub)) == "deepseek-v3"
    d = _evaluate(str(hub), "--mtp-layers", "1")
    assert d["model"] == "deepseek-ai/DeepSeek-V3"
    assert d["published_best"]["similar_job"]["run"] == "deepseek-v3-tech-report-2048xh800"
    data["num_hidden_layers"] = 60  # another model: no run of it was published
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    assert published_model_name(load_hf_config(other)) == "deepseek-ai/DeepSeek-V3"  # its own name


def test_the_active_parameter_count_says_it_includes_the_embeddings():
    """GPT-OSS-120B showed 5.71 B active against the official 5.13 B, unlabelled: the count includes the input
    embedding and the LM head (a user trial)."""
    from placement.catalog import load_model
    from placement.workload import workload

    text = CliRunner().invoke(main, ["show", "model", "gpt-oss-120b"]).output
    w = workload(load_model("gpt-oss-120b"))
    row = next(line for line in text.splitlines() if line.startswith("parameters (active per token"))
    assert "input embedding and LM head included" in row
    assert f"{w.active_params_per_token / 1e9:,.2f} B" in row
    assert (w.active_params_per_token - w.embed_params) / 1e9 == pytest.approx(5.13, abs=0.05)


def test_a_framework_without_mtp_prices_the_model_without_it_and_says_so():
    """torchtitan trains without MTP modules (its files say so): the plan prices what it runs, and the source says the
    config's module is left out rather than "default"."""
    result = CliRunner().invoke(main, ["plan", "--model", str(CONFIG), "--cluster", "hgx-h800", "--gpus", "256",
                                       "--seq-len", "4096", "--global-batch", "512", "--framework", "torchtitan",
                                       "--top-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plans"][0]
    assert plan["recipe"]["mtp_layers"] == 0
    assert "left out: --framework torchtitan" in plan["recipe_sources"]["mtp_layers"]


def test_an_mtp_count_out_of_range_is_refused_naming_the_key(tmp_path):
    data = json.loads(CONFIG.read_text())
    data["num_nextn_predict_layers"] = 20
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["evaluate", "--model", str(bad), *JOB])
    assert result.exit_code == 2
    assert "`num_nextn_predict_layers` = 20" in result.output and "Traceback" not in result.output


def test_a_sweep_cell_prices_the_declared_module_as_plan_does(tmp_path):
    """A sweep cell searched the recipe's defaults alone, so a config's MTP module was priced by `plan` and
    `evaluate` but not by `sweep` (the same model, two prices)."""
    from placement.catalog import load_accelerator, load_cluster
    from placement.specs.training import TrainingSpec
    from placement.sweep.counts import plan_count

    data = json.loads((CONFIG.parent.parent / "deepseek-v2-lite" / "config.json").read_text())
    cluster = load_cluster("dgx-h100")
    acc = load_accelerator(cluster.accelerator)
    train = TrainingSpec(seq_len=4096, global_batch=64)
    plans = {}
    for mtp in (0, 1):
        path = tmp_path / f"mtp{mtp}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data | {"num_nextn_predict_layers": mtp}))
        entry = plan_count(load_hf_config(path), train, cluster, acc, 16)
        assert entry["status"] == "ok", entry["message"]
        plans[mtp] = entry["plan"]
    assert plans[1]["recipe"]["mtp_layers"] == 1 and plans[0]["recipe"]["mtp_layers"] == 0
    assert "num_nextn_predict_layers = 1" in plans[1]["recipe_sources"]["mtp_layers"]
    assert plans[1]["step_time_s"] > plans[0]["step_time_s"]


def test_maxtext_keeps_the_config_s_module_where_its_files_write_it(tmp_path):
    """MaxText trains the MTP modules at cp 1 (its files write mtp_num_layers), but the config's module was left out
    for --framework maxtext at every cp: DeepSeek-V3's config.json on 1,024 H100s was priced without it (13.492 s) and
    maxtext.yml had no mtp_num_layers, while its source said "these files write [it] at cp 1" (a QA trial)."""
    out = tmp_path / "out"
    args = ["plan", "--model", str(CONFIG), "--cluster", "dgx-h100", "--gpus", "1024", "--framework", "maxtext",
            "--top-k", "1"]
    result = CliRunner().invoke(main, [*args, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    plan = data["plans"][0]
    assert plan["layout"]["cp"] == 1
    assert plan["recipe"]["mtp_layers"] == 1 and data["files_run"] == []
    assert "num_nextn_predict_layers = 1, the model's own MTP modules" in plan["recipe_sources"]["mtp_layers"]
    assert "mtp_num_layers: 1" in (out / "maxtext.yml").read_text().splitlines()
    without = CliRunner().invoke(main, [*args, "--mtp-layers", "0", "--json"])
    assert json.loads(without.stdout)["plans"][0]["step_time_s"] < plan["step_time_s"]
