"""The --report pages in a real browser: Debian's headless Chromium loads each kind of page (plan, audit,
sweep) with no console error, and the key numbers are in the text it renders.  A page that throws proves the
check sees errors.

Chromium comes from Debian's package (`.ci/run` installs it where apt-get is available).  Without it these tests
skip, naming the fix, unless PLACEMENT_REQUIRE_CHROMIUM is set (as `.ci/run` sets it once the install
succeeded): then a missing browser fails.  `-m "not chromium"` leaves them out of a quick run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.html.chromium import find_chromium, load_page
from placement.sweep.output import _down, _up, days_band_format

pytestmark = pytest.mark.chromium
DATA = Path(__file__).parent / "data"
REPORT = DATA / "report"


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        why = "no Chromium (Debian: apt-get install chromium; or set PLACEMENT_CHROMIUM to a binary)"
        if os.environ.get("PLACEMENT_REQUIRE_CHROMIUM"):
            pytest.fail(f"PLACEMENT_REQUIRE_CHROMIUM is set but there is {why}")
        pytest.skip(why)
    return binary


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def rendered(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_a_page_that_throws_or_fetches_fails_the_check(chromium, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title>'
                   '<script src="https://cdn.invalid/lib.js"></script></head><body><p>step 1.234 s</p>'
                   '<script>throw new Error("the report broke")</script></body></html>')
    page = load_page(bad, chromium=chromium)
    assert "step 1.234 s" in page.text
    assert any("uncaught exception: Error: the report broke" in e for e in page.errors), page.errors
    assert any("cdn.invalid" in e for e in page.errors), page.errors  # a fetched resource is an error too
    good = tmp_path / "good.html"
    good.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head>'
                    '<body><p>fine</p></body></html>')
    assert load_page(good, chromium=chromium).errors == []


def test_plan_page_renders_with_its_numbers(chromium, tmp_path):
    report = tmp_path / "plan.html"
    args = ("plan", "--model", "mixtral-8x7b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
            "--nodelist", f"@{REPORT / 'hosts-3leaves.txt'}", "--node-type", "dgx-h100", "--oversubscription", "2",
            "--seq-len", "4096", "--global-batch", "160", "--top-k", "3", "--no-pp-comm-overlap")
    code, js, err = run(*args, "--json", "--report", str(report))
    assert code == 0, err
    best = json.loads(js)["plans"][0]
    lay = best["layout"]
    page = load_page(report, chromium=chromium, screenshot=True)
    assert page.errors == []
    text = rendered(page.text)
    assert f"step {best['step_time_s']:.3f} s" in text
    assert f"tp{lay['tp']} cp{lay['cp']} ep{lay['ep']}/etp{lay['etp']} pp{lay['pp']} dp{lay['dp']}" in text
    assert f"MFU {best['mfu']:.1%}" in text
    assert "Where the groups land" in text and "Mapping against the baselines" in text
    assert page.screenshot_png[:8] == b"\x89PNG\r\n\x1a\n"


def test_audit_page_renders_with_its_findings(chromium, tmp_path):
    report = tmp_path / "audit.html"
    code, js, err = run("audit", "--launch", str(REPORT / "megatron_tp16.sh"), "--model", "llama3-70b",
                        "--cluster", "dgx-h100", "--json", "--report", str(report))
    assert code == 1, err
    data = json.loads(js)
    page = load_page(report, chromium=chromium)
    assert page.errors == []
    text = rendered(page.text)
    assert f"step {data['estimate']['step_time_s']:.3f} s" in text
    assert f"speed-up x{data['speedup']:.3f}" in text
    for f in data["findings"]:
        assert f["kind"] in text and (f["cost_s"] is None or f"{f['cost_s']:.3f} s/step" in text)
    assert "- --tensor-model-parallel-size 16" in text


def test_sweep_page_renders_with_its_cells(chromium, tmp_path):
    report = tmp_path / "sweep.html"
    code, js, err = run("sweep", str(REPORT / "small_sweep.yaml"), "--out", str(tmp_path / "out"), "--json",
                        "--workers", "1", "--report", str(report))
    assert code == 0, err
    page = load_page(report, chromium=chromium)
    assert page.errors == []
    text = rendered(page.text)
    for r in json.loads(js)["rows"]:
        # bands rounded outward, as the text, to its decimals: whole days around a point of 20 days or more
        spec = days_band_format(r["time_to_train_days"]).lstrip(",")
        assert (f"{r['design']} ok {r['num_gpus_bought']} {r['num_gpus']} {r['num_gpus_idle']} "
                f"{r['time_to_train_days']:,.1f} {_down(r['time_to_train_days_low'], spec):,{spec}} - "
                f"{_up(r['time_to_train_days_high'], spec):,{spec}}") in text
        assert f"{r['cost']:,.0f}" in text


# the widest element's right edge against the page's: what a printer cuts off
OVERFLOW = ("[...document.querySelectorAll('table, figure, pre, ul, p')].map(e => e.getBoundingClientRect().right)"
            ".reduce((a, b) => Math.max(a, b), 0) - document.documentElement.clientWidth")


def test_the_sweep_page_prints_every_column_on_a_landscape_page(chromium, tmp_path):
    """A QA run: printed, the sweep table of a bought study (capex, energy, error bands, published checks: 24
    columns) ran past the page's edge, its last 13 columns (layout and frontier among them) cut off; on screen its
    words wrapped a word a line beside the numbers.  Laid out for print at the width of a landscape Letter page less
    its 10 mm margins (the narrowest of A4 and Letter), nothing is wider than the page."""
    from placement.html import sweep_html

    report = tmp_path / "sweep.html"
    code, js, err = run("sweep", str(REPORT / "small_sweep.yaml"), "--out", str(tmp_path / "out"), "--json",
                        "--workers", "1")
    assert code == 0, err
    rows = json.loads(js)["rows"]
    for r in rows:  # the columns of a bought design, as the budget study's rows carry them
        r.update(capex_total=399_960_000.0, capex_amortized=25_827_856.0, energy_mwh=37_909.8,
                 energy_cost=3_790_978.0, facility_mw=16.75, idle_cost=2_319_387.0, outlay=403_750_978.0,
                 deadline_met=True, deadline_at_risk=False,
                 error_band={"group": "dense / Hopper", "published_anchor": {"run": "llama3-2024-table4-8192gpu"}})
    report.write_text(sweep_html(rows, {"name": "print", "currency": "USD"}))
    page = load_page(report, chromium=chromium, width=979, media="print", evaluate=OVERFLOW)
    assert page.errors == []
    assert page.value <= 0, f"{page.value} px past the printed page's edge"
