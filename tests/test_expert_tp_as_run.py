"""The expert TP MaxText and torchtitan run without expert parallelism: MaxText shards every expert's MLP over
'tensor' (base.yml rule mlp_moe) whatever ep is, and torchtitan 0.3.0 shards the routed experts over the dense TP axis
where ep is 1 (models/common/moe_sharding.py expert_param_placement_dense) and over the EP ranks alone beside expert
parallelism.  A user trial: DeepSeek-V3 at tp 2, cp 2, ep 1, etp 1 on 256 GB200: maxtext.yml's header priced etp 1
(249.842 s/step, 103.9 GiB), the audit of that file etp 2 (155.412 s, 84.3 GiB); torchtitan.sh of a tp 2, ep 1,
etp 2 plan was priced (and audited) with etp 1, which it does not run."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--global-batch",
       "64"]
LAYOUT = ["--tp", "2", "--ep", "1", "--zero", "3", "--recompute", "full", "--mbs", "2"]
RUNS = re.compile(r"^# this file runs (.*?): ([\d.]+) s/step .*? ([\d.]+) of [\d.]+ GiB per GPU", re.M)


def _run(argv: list[str]):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.output[-1500:]
    return result


def _audit(path) -> dict:
    return json.loads(_run(["audit", *JOB, "--launch", str(path), "--json"]).stdout)["estimate"]


@pytest.mark.parametrize(("fmt", "name"), [("maxtext", "maxtext.yml"), ("torchtitan", "torchtitan.sh")])
def test_a_files_header_prices_the_expert_tp_it_runs_as_its_audit_does(tmp_path, fmt, name):
    out = tmp_path / fmt
    _run(["evaluate", *JOB, *LAYOUT, "--etp", "1", "--out", str(out), "--emit", fmt])
    header = RUNS.search((out / name).read_text())
    assert header and header[1].startswith("etp 2 (not 1"), "the file runs etp 2 and says so"
    audit = _audit(out / name)
    assert audit["layout"]["etp"] == 2
    assert float(header[2]) == pytest.approx(audit["step_time_s"], abs=5e-4)
    assert float(header[3]) == pytest.approx(audit["peak_memory_bytes"] / 2**30, abs=0.05)


def test_torchtitan_runs_the_plans_expert_tp_at_ep_1_and_etp_1_beside_ep(tmp_path):
    out = tmp_path / "tt"
    _run(["evaluate", *JOB, *LAYOUT, "--etp", "2", "--out", str(out), "--emit", "torchtitan"])
    text = (out / "torchtitan.sh").read_text()
    assert "etp 1 (not 2)" not in text and "expert tensor parallelism" not in text
    assert _audit(out / "torchtitan.sh")["layout"]["etp"] == 2
    ep = tmp_path / "ep"
    _run(["evaluate", *JOB, "--tp", "2", "--ep", "2", "--etp", "2", "--zero", "3", "--recompute", "full", "--mbs",
          "2", "--out", str(ep), "--emit", "torchtitan"])
    assert RUNS.search((ep / "torchtitan.sh").read_text())[1].startswith("etp 1 (not 2)")
    assert _audit(ep / "torchtitan.sh")["layout"]["etp"] == 1


@pytest.mark.parametrize(("framework", "degrees", "fix"), [
    ("maxtext", ["--ep", "1", "--etp", "1"], "--etp 2"),
    ("torchtitan", ["--ep", "1", "--etp", "1"], "--etp 2"),
    ("torchtitan", ["--ep", "2", "--etp", "2"], "--etp 1"),
])
def test_evaluate_framework_refuses_another_expert_tp_naming_the_one_it_runs(framework, degrees, fix):
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "2", *degrees, "--zero", "3", "--recompute",
                                       "full", "--mbs", "2", "--framework", framework])
    assert result.exit_code == 2, result.output
    assert "expert TP" in result.stderr and fix in result.stderr


@pytest.mark.parametrize("framework", ["maxtext", "torchtitan"])
def test_plan_framework_proposes_the_expert_tp_the_framework_runs(framework):
    result = _run(["plan", *JOB, "--top-k", "3", "--framework", framework, "--json"])
    for plan in json.loads(result.stdout)["plans"]:
        lay = plan["layout"]
        assert lay["etp"] == (lay["tp"] if framework == "maxtext" or lay["ep"] == 1 else 1), lay


def test_a_dense_model_keeps_tp_under_both():
    for framework in ("maxtext", "torchtitan"):
        result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "4096",
                                           "--global-batch", "64", "--tp", "2", "--zero", "3", "--framework",
                                           framework])
        assert result.exit_code == 0, result.output
