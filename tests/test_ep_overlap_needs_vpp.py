"""Megatron-Core runs the MoE all-to-all overlap (--overlap-moe-expert-parallel-comm) under a pipeline only with
virtual stages: it asserts virtual_pipeline_model_parallel_size when pp > 1 (core_v0.19.0
transformer/transformer_config.py:2674-2678).  A user trial's deepseek-v3 plan on 1152 GB200 chose it at pp 9,
vpp 1 (3.949 s); that job does not start, and the layout without the overlap is what runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", "1152", "--seq-len", "4096",
       "--global-batch", "4096", "--precision", "fp8"]


def test_plan_never_picks_the_overlap_at_pp_without_virtual_stages() -> None:
    result = CliRunner().invoke(main, ["plan", *JOB, "--framework", "megatron", "--top-k", "5", "--json"])
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert plans
    for p in plans:
        lay = p["layout"]
        assert p["step_time_s"] < 1e6
        assert not (p["recipe"]["ep_comm_overlap"] and lay["pp"] > 1 and lay["vpp"] == 1), lay


def test_evaluate_refuses_the_overlap_at_pp_without_virtual_stages_and_says_the_fix() -> None:
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "1", "--ep", "64", "--pp", "9", "--mbs", "1",
                                       "--zero", "1", "--ep-comm-overlap"])
    assert result.exit_code == 2
    assert "with pp 9 without virtual stages" in result.output and "--no-ep-comm-overlap" in result.output
    assert "--num-virtual-stages-per-pipeline-rank" in result.output


def test_a_plans_own_megatron_files_audit_to_its_step(tmp_path: Path) -> None:
    """EP groups that do not tile the 72-GPU NVLink domains: the plan (arithmetic spans) and the audit (spans of the
    listed groups) price them alike (tests/test_span_paths.py), so the files audit to the plan's step, speed-up 1."""
    out = tmp_path / "out"
    planned = CliRunner().invoke(main, ["plan", *JOB, "--framework", "megatron", "--top-k", "1", "--emit",
                                        "megatron", "--out", str(out), "--json"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)["plans"][0]
    audited = CliRunner().invoke(main, ["audit", "--launch", str(out / "megatron.sh"), "--hosts",
                                        str(out / "hosts.txt"), "--model", "deepseek-v3", "--cluster",
                                        "gb200-nvl72", "--gpus", "1152", "--json"])
    assert audited.exit_code == 0, audited.output
    got = json.loads(audited.stdout)
    assert got["estimate"]["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-6)
    assert got["speedup"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(("extra", "says"), [
    (["--ep", "1", "--pp", "1"], "ep 1 (it needs expert parallelism)"),
    (["--ep", "64", "--pp", "1", "--recompute", "full"], "full recompute"),
    (["--ep", "64", "--pp", "1", "--moe-dispatcher", "allgather"], "the allgather dispatcher"),
    (["--ep", "64", "--pp", "1", "--recompute", "selective", "--recompute-modules", "moe"],
     "moe among the recompute modules"),
])
def test_every_megatron_assertion_on_the_overlap_is_said(extra: list[str], says: str) -> None:
    """transformer_config.py:2669-2700 asserts ep > 1, alltoall/flex, no full recompute and no `moe` recompute."""
    job = [*JOB[:-4], "--global-batch", "4608", "--precision", "fp8"]  # dp 1152 at pp 1
    result = CliRunner().invoke(main, ["evaluate", *job, "--tp", "1", "--mbs", "1", "--zero", "1",
                                       "--ep-comm-overlap", *extra])
    assert result.exit_code == 2, result.output
    assert says in result.output and "would not start" in result.output


def test_the_search_takes_the_overlap_only_where_it_runs() -> None:
    result = CliRunner().invoke(main, ["plan", *JOB, "--top-k", "20", "--json"])
    assert result.exit_code == 0, result.output
    for p in json.loads(result.stdout)["plans"]:
        lay, r = p["layout"], p["recipe"]
        if r["ep_comm_overlap"]:
            assert lay["ep"] > 1 and lay["recompute"] != "full" and (lay["pp"] == 1 or lay["vpp"] > 1), lay
            assert r["moe_dispatcher"] != "allgather" and "moe" not in r["recompute_modules"]


def test_more_than_one_mtp_layer_beside_the_overlap_is_refused_and_never_searched() -> None:
    """Megatron-Core core_v0.19.0 asserts at most one MTP layer beside --overlap-moe-expert-parallel-comm
    (transformer_config.py:2709-2713); a user trial's deepseek-v3 with --mtp-layers 2 and the overlap was priced and
    written with both flags.  The layout of Megatron-Bridge 25.09's DeepSeek-V3 on 1,024 H100 (which ran the
    overlap with one MTP layer)."""
    job = ["--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "1024", "--seq-len", "4096", "--global-batch",
           "8192", "--precision", "fp8"]
    layout = ["--tp", "2", "--ep", "64", "--pp", "8", "--vpp", "4", "--mbs", "1", "--zero", "1", "--recompute",
              "selective"]
    refused = CliRunner().invoke(main, ["evaluate", *job, *layout, "--ep-comm-overlap", "--mtp-layers", "2"])
    assert refused.exit_code == 2, refused.output
    assert "2 MTP layers" in refused.output and "--mtp-layers 1" in refused.output
    one = CliRunner().invoke(main, ["evaluate", *job, *layout, "--ep-comm-overlap", "--mtp-layers", "1", "--json"])
    assert one.exit_code in (0, 1), one.output
    searched = CliRunner().invoke(main, ["plan", *job, "--mtp-layers", "2", "--framework", "megatron", "--top-k", "3",
                                         "--json"])
    assert searched.exit_code == 0, searched.output
    plans = json.loads(searched.stdout)["plans"]
    assert plans and not any(p["recipe"]["ep_comm_overlap"] for p in plans)
