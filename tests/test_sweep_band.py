"""A sweep cell's error band: runs of the cell's precision within its family, and a slow end no faster than the best
published run of its kind where the plan is priced above all of them (a trial found searched plans 19-68 % above
published runs behind a +-9-17 % band, and a dense Blackwell band made of FP8 rows on BF16 cells)."""

from __future__ import annotations

import pytest

from placement.sweep.band import band
from placement.sweep.run import anchored_band

ROWS = (
    {"id": "h-bf16-a", "moe": False, "accelerator": "h100-sxm", "precision": "bf16", "error": -0.20},
    {"id": "h-bf16-b", "moe": False, "accelerator": "h100-sxm", "precision": "bf16", "error": 0.05},
    {"id": "h-fp8", "moe": False, "accelerator": "h100-sxm", "precision": "fp8", "error": 0.09},
    {"id": "b-fp8", "moe": False, "accelerator": "b200", "precision": "fp8", "error": -0.04},
)


def test_a_cell_takes_the_runs_of_its_own_precision_in_its_family():
    bf16 = band(ROWS, False, "h100-sxm", "d", "bf16")
    assert (bf16["num_rows"], bf16["error_low"], bf16["error_high"], bf16["note"]) == (2, -0.20, 0.05, "")
    fp8 = band(ROWS, False, "h200", "d", "fp8")
    assert (fp8["num_rows"], fp8["error_low"], fp8["error_high"]) == (1, 0.0, 0.09)


def test_a_family_with_runs_at_another_precision_only_says_so():
    """The dense Blackwell rows are FP8: a BF16 B200 cell's band is theirs together with the BF16 dense Hopper rows
    (a user trial: a -5/+4 % band from FP8 rows alone, narrower than the BF16 H100 cell's, decided H100 vs B200), and
    its note says it.  An FP8 B200 cell keeps its family's FP8 rows alone."""
    got = band(ROWS, False, "b200", "d", "bf16")
    assert got["num_rows"] == 3 and got["group"] == "dense / Blackwell"
    assert (got["error_low"], got["error_high"]) == (-0.20, 0.05)  # the BF16 Hopper rows' extremes
    assert got["note"] == "no bf16 dense Blackwell runs in validate; its fp8 runs, with the bf16 dense Hopper runs"
    fp8 = band(ROWS, False, "b200", "d", "fp8")
    assert (fp8["num_rows"], fp8["error_low"], fp8["error_high"], fp8["note"]) == (1, -0.04, 0.0, "")
    # no run at the cell's precision anywhere: the family's own runs, as before
    alone = band(ROWS[2:], False, "b200", "d", "bf16")
    assert alone["num_rows"] == 1 and alone["note"] == "no bf16 dense Blackwell runs in validate; its fp8 runs"


def test_a_plan_above_every_published_run_of_its_kind_gets_a_slow_end_at_the_best_one():
    base = band(ROWS, False, "h100-sxm", "d", "fp8")  # error_low 0.0
    best = {"above": True, "ratio": 1.3, "best_run": "h-fp8", "best_mfu": 0.40, "group": "dense / h100-sxm / fp8"}
    got = anchored_band(base, best)
    assert got["error_low"] == pytest.approx(1 / 1.3 - 1)  # the step at the best published MFU: predicted x 1.3
    assert got["published_anchor"] == {"run": "h-fp8", "mfu": 0.40, "ratio": 1.3} and "h-fp8" in got["note"]
    assert got["error_high"] == base["error_high"]
    # below every published run, or a band already wider, stays as it is
    assert anchored_band(base, {**best, "above": False, "ratio": 0.9}) == base
    wide = band(ROWS, False, "h100-sxm", "d", "bf16")  # error_low -0.20, wider than 1/1.1 - 1
    assert anchored_band(wide, {**best, "ratio": 1.1}) == wide


def test_a_published_run_of_the_same_workload_at_other_degrees_is_the_slow_end_at_least():
    """A user trial: the shipped sweep's llama3-405b on 8,192 H100 (seq 8192, batch 2048) was priced 9.72 s with a
    98-121 day band, while Llama 3's run of that workload (Table 4, tp8 pp16 dp64) measured 12.50 s, 129 days. The
    plan now names that run and the band's slow end reaches its measured step."""
    from placement.calibration.published import job_key, published_best, published_line

    job = job_key("llama3-405b", "h100-sxm", 8192, 8192, 2048, "bf16", {"tp": 8, "cp": 2, "pp": 8})
    best = published_best(False, "h100-sxm", "bf16", 0.50, job, 9.72, {}, {})
    got = best["same_workload"]
    assert got["run"] == "llama3-2024-table4-8192gpu" and got["degrees"]["pp"] == 16
    assert got["plan_speedup"] == pytest.approx(12.50 / 9.72, rel=1e-3)
    assert "published run of this workload at other degrees: llama3-2024-table4-8192gpu" in published_line(best)
    base = {"group": "dense / Hopper", "error_low": -0.1, "error_high": 0.05, "note": ""}
    band_ = anchored_band(base, best)
    assert band_["error_low"] == pytest.approx(9.72 / 12.50 - 1, rel=1e-3)
    assert band_["published_anchor"]["run"] == "llama3-2024-table4-8192gpu"
    same = job_key("llama3-405b", "h100-sxm", 8192, 8192, 2048, "bf16", {"tp": 8, "pp": 16})
    assert published_best(False, "h100-sxm", "bf16", 0.43, same, 12.5, {}, {})["same_workload"] is None


@pytest.mark.parametrize("point, lo, hi, fmt", [(159.5, 159.5, 168.2, ",.0f"), (65.8, 65.8, 69.1, ",.0f"),
                                                (3.26, 3.26, 4.01, ",.1f")])
def test_a_printed_band_holds_the_value_it_brackets(point, lo, hi, fmt):
    """A user trial: `159.5 (160-168)`, the band's low end rounded to whole days above the point it brackets."""
    from placement.sweep.output import _band

    low, high = (float(x.replace(",", "")) for x in _band(lo, hi, 1.0, fmt).strip("()").split("-"))
    assert low <= point <= high and low <= lo and high >= hi


def _sweep(tmp_path, study_text: str, *extra: str):
    """`placement --reproducible sweep` of a study written from `study_text` (no plots, no cache; `extra` paths are
    under tmp_path): the result and the output folder."""
    from click.testing import CliRunner

    from placement.cli import main

    study = tmp_path / "s.yaml"
    study.write_text(study_text)
    out = tmp_path / "out"
    args = [str(tmp_path / a) if a.endswith(".html") else a for a in extra]
    return CliRunner().invoke(main, ["--reproducible", "sweep", str(study), "--out", str(out), "--no-plots",
                                     "--no-cache", *args]), out


def test_the_summary_names_each_workloads_job_and_its_defaults(tmp_path):
    """A user trial: the sweep summary never said the precision (bf16 by default), and a winning plan 0.27 GiB from
    its capacity said nothing. The workload line marks defaulted values; sweep.json lists them."""
    import json

    res, out = _sweep(tmp_path, "name: t\ndesigns:\n  - {name: h, cluster: dgx-h100, gpus: 64, capex_per_gpu: 30000, "
                      "power_per_gpu_w: 1400}\nworkloads:\n  - {name: w, model: llama3-8b, seq_len: 8192, "
                      "global_batch: 128, tokens: 1.0e11, memory_headroom_gib: 2}\n")
    assert res.exit_code == 0, res.output
    assert "llama3-8b, seq 8,192, batch 128, 1e+11 tokens, bf16 (default), headroom 2 GiB\n" in res.stdout
    assert json.loads((out / "sweep.json").read_text())["workload_defaults"] == {"w": ["precision"]}


def test_a_row_whose_plan_fills_its_gpus_says_so():
    from placement.sweep.output import _tight_memory

    tight = {"memory_capacity_bytes": 182.28 * 2**30, "peak_memory_bytes": 182.01 * 2**30, "memory_headroom_bytes": 0}
    assert _tight_memory(tight).startswith(", memory 182.0 of 182.3 GiB: within 0.3 GiB, an estimate")
    assert _tight_memory({**tight, "peak_memory_bytes": 150 * 2**30}) == ""
    assert _tight_memory({**tight, "memory_headroom_bytes": 2 * 2**30}) == ""


def test_every_surface_of_a_sweep_row_says_when_its_plan_is_above_every_published_run(tmp_path):
    """A user trial: a purchase study ranked 1,024 H100 ahead of 512 B200 on BF16 plans priced 1.15-1.19x the MFU of
    every published H100 BF16 run placement validates, which `plan` prints but the sweep said only deep in its JSON.
    The summary prints `plan`'s line under the row, the CSV gives the ratio, the report a column; a row whose plan is
    not above them says nothing."""
    import csv
    import json

    res, out = _sweep(tmp_path, "name: t\ndesigns:\n"
                      "  - {name: h, cluster: dgx-h100, gpus: 64, price_per_gpu_hour: 2.5}\n"
                      "  - {name: b, cluster: dgx-b200, gpus: 32, price_per_gpu_hour: 5.0}\nworkloads:\n"
                      "  - {name: w, model: llama3-8b, seq_len: 8192, global_batch: 512, tokens: 1.0e12}\n",
                      "--report", "r.html")
    assert res.exit_code == 0, res.output
    rows = {r["design"]: r for r in json.loads((out / "sweep.json").read_text())["rows"]}
    best = rows["h"]["plan"]["published_best"]
    assert best["above"] and best["ratio"] > 1.0  # the H100 BF16 plan is above every published H100 BF16 run
    assert not (rows["b"]["plan"]["published_best"] or {}).get("above")  # no B200 BF16 dense run to be above
    text = res.stdout.replace("\n      ", " ")
    assert f"above published: MFU {best['plan_mfu']:.1%} is {best['ratio']:.2f}x the best of the" in text
    assert text.count("above published:") == 1
    table = {r["design"]: r for r in csv.DictReader((out / "sweep.csv").open())}
    assert float(table["h"]["above_published_ratio"]) == pytest.approx(best["ratio"])
    assert table["b"]["above_published_ratio"] == ""
    page = (tmp_path / "r.html").read_text()
    assert "vs published runs" in page and f"above published: MFU {best['ratio']:.2f}x the best" in page


def test_a_plan_with_a_similar_published_run_still_says_it_is_above_every_one():
    """A review: `published_line` returned at a published run with the plan's degrees (that ran otherwise), so the
    sweep's summary never said "above published" while its CSV and report did.  All three read one rule; a published
    run of this very job is the statement instead (its error), on every surface."""
    from placement.calibration.published import above_ratio, published_line
    from placement.html.pages import _published_check

    best = {"group": "dense / h100-sxm / bf16", "runs": 12, "best_run": "x", "best_mfu": 0.495, "plan_mfu": 0.58,
            "ratio": 1.17, "above": True, "same_job": None, "same_workload": None,
            "similar_job": {"run": "r", "citation": "c", "published_step_time_s": 6.72, "differences": ["fp8"]}}
    line = published_line(best)
    assert line.startswith("published run with these degrees: r measured 6.72 s/step")
    assert "\nabove published: MFU 58.0% is 1.17x the best of the 12" in line
    assert above_ratio(best) == 1.17 and _published_check(best).startswith("above published: MFU 1.17x")
    same = {**best, "same_job": {"run": "s", "citation": "c", "published_step_time_s": 7.0, "error": -0.05}}
    assert "above published" not in published_line(same) and above_ratio(same) is None
    assert _published_check(same) == "published run of this job: priced -5.0% (s)"


def test_a_published_run_of_the_same_model_at_another_batch_is_the_slow_end_at_least():
    """A user trial: GPT-OSS-120B on 64 B200 at batch 1,280 was priced at 2.4x the MFU Megatron-Bridge measured for the
    model on that hardware at batch 512, with no word and no anchor: no run had that very batch, and the best MoE run
    on B200 (another model) has a higher MFU still.  The plan now names the model's best published run and the band's
    slow end reaches its MFU."""
    from placement.calibration.published import job_key, published_best, published_line, published_runs

    run = next(r for r in published_runs() if r.run_id == "megatron-bridge-25.11-b200-gpt-oss-120b-64gpu")
    job = job_key("gpt-oss-120b", "b200", 64, 4096, 1280, "bf16", {"ep": 8})
    best = published_best(True, "b200", "bf16", 2.0 * run.mfu, job, 1.0, {}, {})
    assert best["same_workload"] is None and best["same_job"] is None
    got = best["same_model"]
    assert got["run"] == run.run_id and got["above"] and got["ratio"] == pytest.approx(2.0, rel=1e-3)
    assert got["global_batch"] == 512 and got["num_gpus"] == 64
    assert f"published runs of this model on this accelerator at bf16: the best of 1, {run.run_id}" in \
        published_line(best)
    base = {"group": "moe / Blackwell", "error_low": -0.1, "error_high": 0.05, "note": ""}
    band_ = anchored_band(base, best)
    assert band_["error_low"] == pytest.approx(1 / 2.0 - 1, rel=1e-3)
    assert band_["published_anchor"]["run"] == run.run_id
    # at or below the model's best published MFU: no line, the band as it was
    slower = published_best(True, "b200", "bf16", 0.9 * run.mfu, job, 1.0, {}, {})
    assert slower["same_model"]["above"] is False
    assert "published runs of this model" not in published_line(slower)
    assert anchored_band(base, slower) == base
    # on an accelerator or at a precision the model has no published run of, none
    assert published_best(True, "b200", "fp8", 0.5, job_key("gpt-oss-120b", "b200", 64, 4096, 1280, "fp8", {}),
                          1.0, {}, {})["same_model"] is None
    # on another accelerator of its family (H800, a Hopper), the family's run, its accelerator said; outside any
    # family, none
    kin = published_best(True, "h800-sxm", "bf16", 0.5, job_key("gpt-oss-120b", "h800-sxm", 64, 4096, 1280, "bf16",
                                                                {}), 1.0, {}, {})["same_model"]
    assert kin is not None and kin["run_accelerator"] != "h800-sxm" and kin["run_accelerator"].startswith("h")
    assert (published_best(True, "mi300x", "bf16", 0.5, job_key("gpt-oss-120b", "mi300x", 64, 4096, 1280, "bf16",
                                                                {}), 1.0, {}, {}) or {}).get("same_model") is None


def test_a_deadline_met_only_at_the_predicted_step_is_flagged_at_risk(tmp_path):
    """A user trial: 9.7 (9.4-11.7) days against a 10-day deadline read "deadline met" in JSON and HTML with no word
    that the error band's slow end misses it."""
    import json

    import yaml
    from click.testing import CliRunner

    from placement.cli import main

    def row_for(deadline_days: float) -> dict:
        study = {"name": "d", "deadline_days": deadline_days, "designs": [
            {"name": "H100 rent", "cluster": "dgx-h100", "gpus": 240, "price_per_gpu_hour": 2.5}],
            "workloads": [{"name": "dense70b", "model": "llama3-70b", "seq_len": 8192, "global_batch": 256,
                           "tokens": 2.0e11}]}
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(study))
        result = CliRunner().invoke(main, ["--reproducible", "sweep", str(path), "--out", str(tmp_path / "o"),
                                           "--no-plots", "--workers", "1", "--json"])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["rows"]
        return row

    # a deadline between the predicted days and the band's slow end
    first = row_for(1000)
    assert first["time_to_train_days"] < first["time_to_train_days_high"]
    row = row_for(round((first["time_to_train_days"] + first["time_to_train_days_high"]) / 2, 1))
    assert row["deadline_met"] is True
    assert row["time_to_train_days"] <= row["deadline_days"] < row["time_to_train_days_high"]
    assert row["deadline_at_risk"] is True and "slow end of the error band" in row["message"]


def test_a_plan_of_a_kind_no_published_run_checks_says_so_in_its_band():
    """`plan` says "published runs: none of this kind" for, e.g., dense BF16 on GB200; a sweep row of that plan
    carried its group's band alone (a user trial).  The band keeps its numbers and says it."""
    from placement.sweep.run import unbounded_band

    base = band(ROWS, False, "b200", "d", "bf16")
    got = unbounded_band(base, "dense / gb200 / bf16")
    assert (got["error_low"], got["error_high"]) == (base["error_low"], base["error_high"])
    assert got["note"].startswith(base["note"] + "; no published run of this kind (dense / gb200 / bf16")
    assert unbounded_band(base, None) == base
