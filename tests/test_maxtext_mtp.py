"""MaxText 0.2.5 trains multi-token prediction (base.yml:235 mtp_num_layers; models/models.py builds
MultiTokenPredictionBlock), except on a batch its context-parallel load balancing reordered
(layers/multi_token_prediction.py:504-509).  A user trial: DeepSeek-V3 with --mtp-layers 1 on 256 GB200 got a
maxtext.yml saying MaxText "cannot be told" MTP and priced without it (91.357 s/step), and the audit of a maxtext.yml
that sets mtp_num_layers: 1 priced it without the module too (91.357 s; with it, 93.981 s)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", "256"]
LAYOUT = ["--tp", "2", "--etp", "2", "--zero", "3", "--recompute", "full"]
RUNS = re.compile(r"^# (?:this file runs .*?|predicted): ([\d.]+) s/step.*? ([\d.]+) of [\d.]+ GiB per GPU", re.M)


def _run(argv: list[str]):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.output[-1500:]
    return result


def _header(text: str) -> tuple[float, float]:
    runs = [m for m in RUNS.finditer(text) if m[0].startswith("# this file runs")]
    m = runs[0] if runs else RUNS.search(text)
    return float(m[1]), float(m[2])


def _audit(path) -> dict:
    return json.loads(_run(["audit", *JOB, "--launch", str(path), "--json"]).stdout)["estimate"]


def test_the_file_states_the_plans_mtp_and_its_audit_prices_it(tmp_path):
    out = tmp_path / "mtp"
    _run(["evaluate", *JOB, *LAYOUT, "--mbs", "20", "--mtp-layers", "1", "--out", str(out), "--emit", "maxtext"])
    text = (out / "maxtext.yml").read_text()
    assert yaml.safe_load(text)["mtp_num_layers"] == 1
    assert "mtp_layers" not in text.split("\nbase_config")[0], "no MTP substitute said in the header"
    step, mem = _header(text)
    audit = _audit(out / "maxtext.yml")
    assert audit["recipe"]["mtp_layers"] == 1
    # the header prints 3 decimals, the audit's JSON 4: the same price read within both roundings (93.98449... is
    # "93.984" in the header and 93.9845 in the JSON)
    assert audit["step_time_s"] == pytest.approx(step, abs=5e-4 + 5e-5)
    assert audit["peak_memory_bytes"] / 2**30 == pytest.approx(mem, abs=0.05)
    # the same file without the key trains no MTP module, and is priced so
    bare = tmp_path / "bare.yml"
    bare.write_text(text.replace("mtp_num_layers: 1\n", ""))
    without = _audit(bare)
    assert without["recipe"]["mtp_layers"] == 0 and without["step_time_s"] < audit["step_time_s"]


def test_under_context_parallelism_the_file_runs_without_mtp_and_the_audit_refuses_a_file_with_it(tmp_path):
    out = tmp_path / "cp"
    _run(["evaluate", *JOB, *LAYOUT, "--cp", "2", "--mbs", "10", "--mtp-layers", "1", "--out", str(out), "--emit",
          "maxtext"])
    text = (out / "maxtext.yml").read_text()
    assert "mtp_num_layers" not in yaml.safe_load(text)
    assert "# this file runs mtp_layers 0 (not 1)" in text and "context_parallel_load_balance" in text
    assert _audit(out / "maxtext.yml")["step_time_s"] == pytest.approx(_header(text)[0], abs=5e-4)
    with_mtp = tmp_path / "with_mtp.yml"
    with_mtp.write_text(text + "mtp_num_layers: 1\n")
    refused = CliRunner().invoke(main, ["audit", *JOB, "--launch", str(with_mtp)])
    assert refused.exit_code == 2, refused.output
    assert "MTP does not support context_parallel_load_balance" in refused.stderr
    assert "mtp_num_layers: 0" in refused.stderr and "context 2" in refused.stderr
