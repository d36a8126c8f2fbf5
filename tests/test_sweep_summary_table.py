"""The sweep summary's table: its rows in the order of the study objective, and its columns as wide as their cells.

QA trials: under `objective: cost` (the lowest outlay) the rows were listed by the cost column, which amortizes the
capex, so a B200 row of outlay 443,341 USD stood above an H100 row of 324,748; and a JPY study's costs
(`911.5M (889.5-1,095.4)`) and a 10,000-day run's days pushed the columns right of their headers."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main
from placement.sweep.output import WIDTH, summary
from placement.sweep.spec import SweepSpec

STUDY = {
    "name": "order", "budget": 20_000_000, "objective": "cost",
    "designs": [{"name": "H100", "cluster": "dgx-h100", "capex_per_gpu": 40000, "power_per_gpu_w": 1400},
                {"name": "B200", "cluster": "dgx-b200", "capex_per_gpu": 55000, "power_per_gpu_w": 1850},
                {"name": "H100 rent", "cluster": "dgx-h100", "price_per_gpu_hour": 2.5, "gpus": 256}],
    "workloads": [{"name": "8b", "model": "llama3-8b", "seq_len": 8192, "global_batch": 512, "tokens": 1.0e12}],
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("order")
    path = tmp / "s.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    res = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp / "o"), "--no-plots", "--workers", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp / "o" / "sweep.json").read_text())
    return res.stdout, doc


def _table_designs(text: str, names) -> list[str]:
    return [m.group(1) for line in text.splitlines()
            if (m := re.match(r"  (\S.*?)\s{2,}\d[\d,]*/", line)) and m.group(1) in names]


def test_cost_objective_rows_are_in_outlay_order_and_the_head_says_so(study):
    text, doc = study
    rows = [r for r in doc["rows"] if r["status"] == "ok"]
    by_outlay = [r["design"] for r in sorted(rows, key=lambda r: r["outlay"])]
    by_cost = [r["design"] for r in sorted(rows, key=lambda r: r["cost"])]
    assert by_outlay != by_cost  # the study is one where the two orders differ
    assert _table_designs(text, set(by_outlay)) == by_outlay
    assert "rows: in order of the objective, the lowest outlay first" in " ".join(text.split())


def test_time_objective_rows_are_in_time_order(study):
    _, doc = study
    rows = [dict(r, objective="time") for r in doc["rows"]]
    spec = SweepSpec.model_validate(STUDY | {"objective": "time"})
    text = summary(rows, spec.currency, spec)
    by_time = [r["design"] for r in sorted(rows, key=lambda r: r["time_to_train_s"])]
    assert _table_designs(text, set(by_time)) == by_time
    assert "the shortest time to train first" in " ".join(text.split())


def _columns_line_up(text: str) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    header = next(line for line in lines if "per Mtok" in line)
    ends = {h: header.index(h) + len(h) for h in ("per Mtok", "front")}
    for line in lines:
        m = re.match(r"  \S.*?\s+[\d,]+/[\d,]+ .* (\d[\d.,]*)\s+(\*?)$", line)
        if m and "no plan" not in line:
            assert m.end(1) == ends["per Mtok"], (header, line)


def test_wide_costs_and_days_keep_the_columns_under_their_headers(study):
    _, doc = study
    spec = SweepSpec.model_validate(STUDY)
    rows = []
    for k, r in enumerate(doc["rows"]):  # a yen study's magnitudes: a billion-yen cost, a 10,000-day run
        scale, slow = 300.0 * (10 ** k), 80.0
        rows.append(r | {f: r[f] * scale for f in ("cost", "cost_low", "cost_high", "outlay")}
                    | {f: r[f] * slow for f in ("time_to_train_s", "time_to_train_days", "time_to_train_days_low",
                                                "time_to_train_days_high")})
    text = summary(rows, "JPY", spec)
    dearest = max(rows, key=lambda r: r["cost"])
    assert dearest["cost"] >= 1e9 and f"{dearest['cost'] / 1e6:,.1f}M (" in text  # past a billion, with its band
    _columns_line_up(text)
    assert "error band:" not in text  # the bands still fit on the row


def test_bands_too_wide_for_the_row_get_a_line_of_their_own(study):
    _, doc = study
    spec = SweepSpec.model_validate(STUDY)
    rows = [r | {f: r[f] * 1e7 for f in ("cost", "cost_low", "cost_high", "outlay")}
            | {f: r[f] * 1e3 for f in ("time_to_train_s", "time_to_train_days", "time_to_train_days_low",
                                       "time_to_train_days_high")} for r in doc["rows"]]
    text = summary(rows, "JPY", spec)
    _columns_line_up(text)
    flat = " ".join(text.split())
    for r in rows:
        days = f"{r['time_to_train_days']:,.1f}"
        assert f" {days} " in text and f"{r['cost'] / 1e6:,.1f}M" in text
    assert len(re.findall(r"error band: days \([\d,]+-[\d,]+\), cost \([\d.,]+-[\d.,]+\) M JPY", flat)) == len(rows)


def test_a_run_under_a_tenth_of_a_day_keeps_two_significant_figures(study):
    """A 2e9-token what-if: 256 rented H100 train it in about 12 minutes, printed `0.0 (0.0-0.1)` days."""
    from placement.html import sweep_html

    _, doc = study
    spec = SweepSpec.model_validate(STUDY)
    short = 2e9 / 1e12  # the study's 1e12 tokens cut to 2e9
    rows = [r | {f: r[f] * short for f in ("time_to_train_s", "time_to_train_days", "time_to_train_days_low",
                                           "time_to_train_days_high", "cost", "cost_low", "cost_high")}
            for r in doc["rows"]]
    rented = next(r for r in rows if r["design"] == "H100 rent")
    assert rented["time_to_train_days"] < 0.01
    text = summary(rows, "USD", spec)
    line = next(ln for ln in text.splitlines() if ln.startswith("  H100 rent "))
    days = re.search(r" (0\.\d+) \((0\.\d+)-(0\.\d+)\)", line)
    assert days, line
    point, low, high = (float(g) for g in days.groups())
    assert point == pytest.approx(rented["time_to_train_days"], rel=0.06)  # two significant figures
    assert low <= rented["time_to_train_days_low"] and high >= rented["time_to_train_days_high"]
    assert low > 0 and " 0.0 (" not in line
    page = sweep_html(rows, {"name": "s", "currency": "USD"})
    assert f"{rented['time_to_train_days']:.{len(days.group(1)) - 2}f}" in page


def test_the_page_prints_a_small_facility_and_energy_as_the_text_does(study):
    """An 8-GPU design's facility of 0.0146 MW was `0.01` on the page beside the text's `0.015 MW` (and its energy
    to one decimal, 0.1 for 0.095 MWh): both now keep the text's figures."""
    from placement.html import sweep_html

    text, doc = study
    page = " ".join(re.sub(r"<[^>]+>", " ", sweep_html(doc["rows"], {"name": "s", "currency": "USD"})).split())
    flat = " ".join(text.split())
    small = [r for r in doc["rows"] if r.get("facility_mw") is not None and r["facility_mw"] < 0.1]
    assert small
    for r in small:
        mw = f"{r['facility_mw']:.2g}"
        assert f"{mw} MW" in flat and f" {mw} " in page, (mw, r["design"])
        energy = f"{r['energy_mwh']:,.1f}" if r["energy_mwh"] >= 1 else f"{r['energy_mwh']:.2g}"
        assert f"energy {energy} MWh" in flat and f" {energy} " in page, (energy, r["design"])
