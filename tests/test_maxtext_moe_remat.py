"""MaxText's sparse_matmul expert path tags the second up-projection's output moe_mlpwi_1 only (MaxText 0.2.5
layers/moe.py), which `minimal` (it names mlpwi_1) does not save: a user trial's Mixtral plan priced the experts'
w1 output as kept under the minimal file it wrote, and the audit of such a file said nothing.  The file now names
each tensor (remat_policy custom, moe_mlpwi_1 on the device), and the audit of a minimal file on an MoE model says
what it reruns."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "mixtral-8x7b", "--gpus", "64"]


def test_an_moe_plans_selective_file_keeps_the_experts_w1_and_audits_to_its_price(tmp_path) -> None:
    got = CliRunner().invoke(main, ["--reproducible", "plan", *JOB, "--framework", "maxtext", "--recompute",
                                    "selective", "--top-k", "1", "--out", str(tmp_path), "--emit", "maxtext", "--json"])
    assert got.exit_code == 0, got.output
    plan = json.loads(got.stdout)["plans"][0]
    keys = yaml.safe_load((tmp_path / "maxtext.yml").read_text())
    assert keys["remat_policy"] == "custom"
    assert keys["moe_mlpwi_1"] == "device" and keys["mlpwi_1"] == "device"
    audit = CliRunner().invoke(main, ["--reproducible", "audit", *JOB, "--launch", str(tmp_path / "maxtext.yml"),
                                      "--json"])
    assert audit.exit_code in (0, 1), audit.output
    report = json.loads(audit.stdout)
    assert abs(report["estimate"]["step_time_s"] / plan["step_time_s"] - 1) < 1e-6
    assert not any("moe_mlpwi_1" in note for note in report["layout"]["ignored"])


def _minimal(tmp_path, model: str) -> dict:
    launch = tmp_path / f"{model}.yml"
    launch.write_text(f'base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "{model}"\nici_fsdp_parallelism: 8\n'
                      f'remat_policy: "minimal"\nper_device_batch_size: 1\n')
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", model, "--gpus", "64", "--launch",
                                    str(launch), "--json"])
    assert got.exit_code in (0, 1), got.output
    return json.loads(got.stdout)


def test_the_audit_of_minimal_prices_the_experts_w1_rerun_on_an_moe_model(tmp_path) -> None:
    """A QA pass: the rerun was an ignored line, the GEMM priced as saved.  Now priced (recipe expert_w1_rerun): one
    more expert GEMM forward a MoE layer in the step and in HFU, the output's bytes off the activations, against the
    same file priced with moe_mlpwi_1 kept (remat_policy custom)."""
    got = _minimal(tmp_path, "mixtral-8x7b")
    moe = got["layout"]["ignored"]
    assert not any("moe_mlpwi_1" in note for note in moe)
    est = got["estimate"]
    assert est["recipe"]["expert_w1_rerun"] is True
    assert "reruns that GEMM" in est["recipe_sources"]["expert_w1_rerun"]
    # the best plan is priced as placement's files run it: they keep moe_mlpwi_1 (remat_policy custom)
    assert got["best"]["recipe"]["expert_w1_rerun"] is False
    kept = _custom_w1_kept(tmp_path)["estimate"]
    assert kept["recipe"]["expert_w1_rerun"] is False
    # compute, not the step: more backward work hides more of this job's exposed data-parallel traffic
    assert est["breakdown"]["compute"] > kept["breakdown"]["compute"] and est["hfu"] > kept["hfu"]
    # the routed pairs' w1 output: 32 layers x 2048 tokens (base.yml max_target_length) x top-2 x 14336 x 2 bytes
    freed = kept["memory"]["activations_bytes"] - est["memory"]["activations_bytes"]
    assert freed == pytest.approx(32 * 2048 * 2 * 14336 * 2, rel=1e-6)
    dense = _minimal(tmp_path, "llama3-8b")
    assert not any("moe_mlpwi_1" in note for note in dense["layout"]["ignored"])
    assert dense["estimate"]["recipe"]["expert_w1_rerun"] is False


def _custom_w1_kept(tmp_path) -> dict:
    """The minimal file's tensors, each named (remat_policy custom), moe_mlpwi_1 among them on the device."""
    launch = tmp_path / "custom.yml"
    names = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo", "moe_mlpwi_0",
             "moe_mlpwi_1", "moe_mlpwo")
    launch.write_text('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "mixtral-8x7b"\nici_fsdp_parallelism: 8\n'
                      'remat_policy: "custom"\nper_device_batch_size: 1\n'
                      + "".join(f'{n}: "device"\n' for n in names))
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "mixtral-8x7b", "--gpus", "64", "--launch",
                                    str(launch), "--json"])
    assert got.exit_code in (0, 1), got.output
    return json.loads(got.stdout)


DEEPSEEK = ["--model", "deepseek-v2", "--cluster", "dgx-h100", "--gpus", "128", "--tp", "1", "--ep", "8", "--etp", "1",
            "--pp", "1", "--dp-shard", "8", "--zero", "3", "--mbs", "1", "--recompute", "selective", "--global-batch",
            "512", "--seq-len", "4096"]


def test_an_mla_models_minimal_file_prices_the_experts_w1_rerun_and_its_audit_agrees(tmp_path) -> None:
    """An MLA model's file keeps remat_policy minimal (custom cannot name kv_proj), whose sparse experts rerun w1: a
    QA pass found the file warning 'which the prediction does not price' and the plan priced as saved.  Now `plan
    --framework maxtext` prices the rerun (its model_name's row), a file of a plan without it re-prices it in its
    'this file runs' line, and the audit of that file gives the same step."""
    got = CliRunner().invoke(main, ["evaluate", *DEEPSEEK, "--framework", "maxtext", "--json"])
    assert got.exit_code in (0, 1), got.output
    framework = json.loads(got.stdout)
    assert framework["recipe"]["expert_w1_rerun"] is True
    assert "deepseek2-236b" in framework["recipe_sources"]["expert_w1_rerun"]
    out = tmp_path / "out"
    got = CliRunner().invoke(main, ["evaluate", *DEEPSEEK, "--recompute-modules", "core_attn,layernorm", "--out",
                                    str(out), "--emit", "maxtext", "--json"])
    assert got.exit_code in (0, 1), got.output
    assert json.loads(got.stdout)["recipe"]["expert_w1_rerun"] is False
    text = (out / "maxtext.yml").read_text()
    assert 'remat_policy: "minimal"' in text
    runs = next(line for line in text.splitlines() if line.startswith("# this file runs "))
    assert "the routed experts' second up-projection rerun in backward" in runs
    audit = CliRunner().invoke(main, ["audit", "--model", "deepseek-v2", "--cluster", "dgx-h100", "--gpus", "128",
                                      "--global-batch", "512", "--launch", str(out / "maxtext.yml"), "--json"])
    assert audit.exit_code in (0, 1), audit.output
    est = json.loads(audit.stdout)["estimate"]
    assert est["recipe"]["expert_w1_rerun"] is True
    assert f": {est['step_time_s']:.3f} s/step (" in runs


def test_a_full_recompute_mla_file_says_nothing_of_the_w1_rerun(tmp_path) -> None:
    """Under full recompute the experts' w1 rerun prices nothing: a QA roundtrip found deepseek-v2's `plan --framework
    maxtext` file (rc full) saying 'this file runs expert_w1_rerun False (not True)' at the plan's own step."""
    full = [a if a != "selective" else "full" for a in DEEPSEEK]
    got = CliRunner().invoke(main, ["evaluate", *full, "--framework", "maxtext", "--out", str(tmp_path), "--emit",
                                    "maxtext"])
    assert got.exit_code in (0, 1), got.output
    text = (tmp_path / "maxtext.yml").read_text()
    assert "expert_w1_rerun" not in text


def test_prefused_expert_weights_rerun_the_fused_gemm_and_say_so(tmp_path) -> None:
    """prefuse_moe_weights true runs w0 and w1 as one grouped GEMM whose w1 half the rerun needs, so the rerun
    recomputes both halves (layers/moe.py:1946-1952 at e591f30cb); a QA pass found the key not read.  The price keeps
    one GEMM (recipe expert_w1_rerun), and a line says the step holds one more; without the rerun it prices alike."""
    plain = _minimal(tmp_path, "mixtral-8x7b")
    launch = tmp_path / "fused.yml"
    launch.write_text('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "mixtral-8x7b"\nici_fsdp_parallelism: 8\n'
                      'remat_policy: "minimal"\nper_device_batch_size: 1\nprefuse_moe_weights: true\n')
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "mixtral-8x7b", "--gpus", "64", "--launch",
                                    str(launch), "--json"])
    assert got.exit_code in (0, 1), got.output
    fused = json.loads(got.stdout)
    notes = [n for n in fused["layout"]["ignored"] if n.startswith("prefuse_moe_weights true")]
    assert len(notes) == 1 and "fused.yml:7" in notes[0] and "recomputes it whole" in notes[0]
    assert fused["estimate"]["step_time_s"] == plain["estimate"]["step_time_s"]
    assert not any("prefuse_moe_weights" in n for n in plain["layout"]["ignored"])
