"""`--memory-headroom-gib`: HBM per GPU a plan keeps free beyond the modelled reserve.  A layout fits when its
peak is at most the GPU's capacity less the headroom; the plan says so, and so do the errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.constants import GiB
from placement.sweep.run import run_sweep
from placement.sweep.spec import SweepSpec

JOB = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192", "--global-batch", "64"]


def _run(*args: str) -> tuple[int, dict | None, str]:
    result = CliRunner().invoke(main, list(args))
    try:
        out = json.loads(result.stdout)
    except ValueError:
        out = None
    return result.exit_code, out, result.stderr


def test_a_plan_keeps_the_headroom_free_and_pays_for_it_in_step_time() -> None:
    code, free, _ = _run("plan", *JOB, "--json")
    assert code == 0
    best = free["plans"][0]
    usable = best["memory_capacity_bytes"]
    assert best["memory_headroom_bytes"] == 0
    # keep free a little more than the best plan leaves: it no longer fits, so another plan wins
    headroom_gib = round((usable - best["peak_memory_bytes"]) / GiB + 1.0, 3)
    code, kept, _ = _run("plan", *JOB, "--memory-headroom-gib", str(headroom_gib), "--json")
    assert code == 0
    other = kept["plans"][0]
    assert other["memory_headroom_bytes"] == pytest.approx(headroom_gib * GiB, rel=1e-6)
    assert other["memory_capacity_bytes"] == pytest.approx(usable - headroom_gib * GiB, rel=1e-6)
    for p in kept["plans"]:
        assert p["fits"] and p["peak_memory_bytes"] <= p["memory_capacity_bytes"]
    assert other["peak_memory_bytes"] < best["peak_memory_bytes"]
    assert other["step_time_s"] >= best["step_time_s"]
    result = CliRunner().invoke(main, ["plan", *JOB, "--memory-headroom-gib", str(headroom_gib)])
    assert f"({headroom_gib:.1f} GiB more kept free)" in result.stdout.splitlines()[2]
    assert "kept free (--memory-headroom-gib)" in result.stdout


def test_evaluate_says_a_layout_that_fits_only_without_the_headroom_does_not_fit() -> None:
    layout = ["--tp", "8", "--pp", "2", "--mbs", "1", "--zero", "1"]
    code, free, _ = _run("evaluate", *JOB, *layout, "--json")
    assert code == 0 and free["fits"]
    spare_gib = (free["memory_capacity_bytes"] - free["peak_memory_bytes"]) / GiB
    code, tight, _ = _run("evaluate", *JOB, *layout, "--memory-headroom-gib", f"{spare_gib + 0.5:.3f}", "--json")
    assert code == 1 and not tight["fits"]
    assert tight["step_time_s"] == free["step_time_s"] and tight["peak_memory_bytes"] == free["peak_memory_bytes"]


def test_an_infeasible_headroom_names_the_most_that_fits() -> None:
    job = ["--model", "llama3-8b", "--gpus", "8"]
    code, _, err = _run("plan", *job, "--memory-headroom-gib", "70")
    assert code == 1
    assert "(after the 70.0 GiB --memory-headroom-gib keeps free)" in err
    most = float(err.rsplit("--memory-headroom-gib ", 1)[1].split()[0])
    assert 50 < most < 70
    assert _run("plan", *job, "--memory-headroom-gib", str(most), "--json")[0] == 0
    assert _run("plan", *job, "--memory-headroom-gib", str(most + 0.2), "--json")[0] == 1


@pytest.mark.parametrize(("value", "message"), [
    ("-1", "--memory-headroom-gib -1.0: give the GiB per GPU to keep free, 0 or more"),
    ("nan", "--memory-headroom-gib nan: give the GiB per GPU to keep free, 0 or more"),
    ("100", "--memory-headroom-gib 100: each h100-sxm holds 78.1 GiB for the job"),
])
def test_a_headroom_that_is_not_a_share_of_the_gpu_is_refused(value: str, message: str) -> None:
    code, _, err = _run("evaluate", "--model", "llama3-8b", "--gpus", "8", "--memory-headroom-gib", value)
    assert code == 2 and err.startswith(f"placement: {message}") and "Traceback" not in err


def test_a_sweep_workload_keeps_its_headroom_in_every_cell(tmp_path) -> None:
    base = {"name": "h", "designs": [{"name": "h100x8", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0}],
            "workloads": [{"name": "8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1e9}]}
    free = run_sweep(SweepSpec.model_validate(base), tmp_path / "cache", "local", workers=1).rows[0]
    spare_gib = (free["plan"]["memory_capacity_bytes"] - free["plan"]["peak_memory_bytes"]) / GiB
    kept_spec = dict(base, workloads=[dict(base["workloads"][0], memory_headroom_gib=round(spare_gib + 1.0, 3))])
    kept = run_sweep(SweepSpec.model_validate(kept_spec), tmp_path / "cache", "local", workers=1)
    assert kept.computed == 1  # a new cell: the headroom is part of what its plans depend on
    plan = kept.rows[0]["plan"]
    assert plan["memory_headroom_bytes"] == pytest.approx(round(spare_gib + 1.0, 3) * GiB)
    assert plan["peak_memory_bytes"] <= plan["memory_capacity_bytes"] < free["plan"]["memory_capacity_bytes"]


def test_an_audited_job_in_the_headroom_is_a_warning_that_it_runs_in_the_margin(tmp_path) -> None:
    """Over the capacity less the headroom but under the GPU's: the job runs, in the margin kept free (a warning);
    over the GPU's: it runs out of memory (an error)."""
    from tests.test_audit import MEGATRON_TP16

    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16)
    job = ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", "--json"]
    code, free, err = _run(*job)
    assert code in (0, 1), err
    est = free["estimate"]
    assert est["fits"] and not [f for f in free["findings"] if f["kind"] == "memory_over_capacity"]
    spare_gib = (est["memory_capacity_bytes"] - est["peak_memory_bytes"]) / GiB
    code, tight, err = _run(*job, "--memory-headroom-gib", f"{spare_gib + 1.0:.3f}")
    assert code in (0, 1), err
    [over] = [f for f in tight["findings"] if f["kind"] == "memory_over_capacity"]
    assert over["severity"] == "warning" and "it runs, in 1.0 GiB of the margin" in over["message"]
    assert f"after the {spare_gib + 1.0:.1f} GiB --memory-headroom-gib keeps free" in over["message"]


def test_the_report_draws_the_headroom_beside_the_capacity(tmp_path) -> None:
    from placement.html.charts import memory_chart
    from placement.plan import Plan

    page = tmp_path / "plan.html"
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--memory-headroom-gib",
                                       "20", "--json"])
    plan = Plan.model_validate({k: v for k, v in json.loads(result.stdout).items() if k != "calibration"})
    svg = memory_chart(plan)
    assert "20.0 GiB" in svg and "kept free" in svg
    assert "kept free" not in memory_chart(plan.model_copy(update={"memory_headroom_bytes": 0.0}))
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "8", "--memory-headroom-gib", "20",
                                       "--report", str(page)])
    assert result.exit_code == 0 and "(20.0 GiB more kept free)" in page.read_text()


def test_a_sweep_headroom_of_the_whole_gpu_names_the_headroom_not_more_gpus(tmp_path) -> None:
    """The CLI refuses a headroom of all a GPU holds; a sweep workload can ask for it (its designs differ): no GPU
    count helps then, so the infeasible message names only the headroom that fits."""
    spec = {"name": "h", "designs": [{"name": "h100x8", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0}],
            "workloads": [{"name": "8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1e9,
                           "memory_headroom_gib": 100}]}
    [row] = run_sweep(SweepSpec.model_validate(spec), tmp_path / "cache", "local", workers=1).rows
    assert row["status"] == "infeasible"
    assert ("the 100.0 GiB the workload's memory_headroom_gib keeps free is more than the 78.1 GiB each GPU holds "
            "for the job; try `memory_headroom_gib: " in row["message"])
    assert "gpus" not in row["message"].split("; try ")[-1]
