"""`--framework maxtext --no-optimizer-over-replicas`: MaxText runs any HSDP mesh with the optimizer over its shard
ranks alone (a file that leaves shard_optimizer_over_data out: base.yml's embed rule shards nothing over data), so
the flag is a choice of the files, not a limit.  A QA run found `plan --framework maxtext --no-optimizer-over-replicas`
refused ('always runs optimizer_over_replicas = True'), and an evaluate of a data x expert HSDP plan priced without
it wrote shard_optimizer_over_data: true, a file that ran another recipe than the priced one."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

HSDP_EP = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "64", "--zero", "3", "--ep", "8",
           "--dp-shard", "8", "--mbs", "1", "--recompute", "full"]


def _run(args: list[str]) -> str:
    res = CliRunner().invoke(main, ["--reproducible", *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_plan_takes_the_flag_and_prices_every_hsdp_plan_without_it() -> None:
    plans = json.loads(_run(["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64",
                             "--framework", "maxtext", "--no-optimizer-over-replicas", "--zero", "3", "--top-k", "8",
                             "--json"]))["plans"]
    assert plans and all(p["recipe"]["optimizer_over_replicas"] is False for p in plans)


def test_a_data_x_expert_file_leaves_the_key_out_and_runs_as_priced(tmp_path: Path) -> None:
    plain = json.loads(_run(["evaluate", *HSDP_EP, "--framework", "maxtext", "--no-optimizer-over-replicas",
                             "--emit", "maxtext", "--out", str(tmp_path / "plain"), "--json"]))
    over = json.loads(_run(["evaluate", *HSDP_EP, "--framework", "maxtext", "--emit", "maxtext", "--out",
                            str(tmp_path / "over"), "--json"]))
    assert plain["recipe"]["optimizer_over_replicas"] is False and over["recipe"]["optimizer_over_replicas"] is True
    assert plain["memory"]["optimizer_bytes"] > over["memory"]["optimizer_bytes"]
    keys = [x for x in (tmp_path / "plain" / "maxtext.yml").read_text().splitlines() if not x.startswith("#")]
    assert not [k for k in keys if k.startswith("shard_optimizer_over_data")]
    assert "shard_optimizer_over_data: true" in (tmp_path / "over" / "maxtext.yml").read_text()
    assert not [x for x in plain["files_run"] if x.startswith("maxtext.yml")]  # no "this file runs": as priced
    audit = json.loads(CliRunner().invoke(main, ["--reproducible", "audit", "--launch",
                                                 str(tmp_path / "plain" / "maxtext.yml"), "--model", "qwen3-30b-a3b",
                                                 "--cluster", "dgx-h100", "--gpus", "64", "--json"]).stdout)
    assert audit["estimate"]["recipe"]["optimizer_over_replicas"] is False
    assert audit["estimate"]["step_time_s"] == plain["step_time_s"]
    assert audit["estimate"]["memory"]["optimizer_bytes"] == plain["memory"]["optimizer_bytes"]
