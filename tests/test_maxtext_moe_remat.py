"""MaxText's sparse_matmul expert path tags the second up-projection's output moe_mlpwi_1 only (MaxText 0.2.5
layers/moe.py), which `minimal` (it names mlpwi_1) does not save: a user trial's Mixtral plan priced the experts'
w1 output as kept under the minimal file it wrote, and the audit of such a file said nothing.  The file now names
each tensor (remat_policy custom, moe_mlpwi_1 on the device), and the audit of a minimal file on an MoE model says
what it reruns."""

from __future__ import annotations

import json

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


def test_the_audit_of_minimal_says_the_experts_w1_reruns_on_an_moe_model_only(tmp_path) -> None:
    moe = _minimal(tmp_path, "mixtral-8x7b")["layout"]["ignored"]
    assert any("moe_mlpwi_1" in note and "reruns that GEMM" in note and not note.startswith("[moe]")
               for note in moe)
    dense = _minimal(tmp_path, "llama3-8b")["layout"]["ignored"]
    assert not any("moe_mlpwi_1" in note for note in dense)
