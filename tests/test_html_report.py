"""`--report FILE.html` on plan, audit and sweep: the page shows the numbers the command prints, is the same bytes
for the same input, fetches nothing, escapes what it shows; bad --report values are bad input.  (The pages
rendered in a browser: tests/test_html_chromium.py.)"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.catalog import load_accelerator, load_cluster
from placement.cli import main
from placement.html import sweep_html
from placement.html.topology_view import MAX_HOSTS, topology_view
from placement.mapping.report import rank_coords
from placement.specs import Layout
from placement.sweep.output import _down, _up
from placement.sweep.run import run_sweep
from placement.sweep.spec import SweepSpec
from placement.topology import Topology

DATA = Path(__file__).parent / "data"
REPORT = DATA / "report"
PLAN_ARGS = ("plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192",
             "--global-batch", "128")
AUDIT_ARGS = ("audit", "--launch", str(REPORT / "megatron_tp16.sh"), "--model", "llama3-70b", "--cluster",
              "dgx-h100")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


class _Page(HTMLParser):
    """The page's visible text (script, style and SVG <title> tooltips aside) and every URL it references."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("style", "script", "title"):
            self._skip += 1
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "data", "poster") and value is not None:
                self.urls.append((tag, name, value))

    def handle_endtag(self, tag):
        if tag in ("style", "script", "title"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


def visible(page: str) -> str:
    return re.sub(r"\s+", " ", " ".join(parse(page).text))


@pytest.fixture(scope="module")
def plan_pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    code, text, err = run(*PLAN_ARGS, "--report", str(out / "plan.html"))
    assert code == 0, err
    code, js, err = run(*PLAN_ARGS, "--json")
    assert code == 0, err
    return (out / "plan.html").read_text(), text, json.loads(js)


def test_plan_page_shows_the_numbers_the_text_prints(plan_pages):
    page, text, data = plan_pages
    shown = visible(page)
    best = data["plans"][0]
    lay = best["layout"]
    # the headline, word for word, and the top-k table row by row (the same plan the text and JSON describe)
    for line in text.splitlines()[:3]:
        assert line in shown, line
    assert f"step {best['step_time_s']:.3f} s" in shown
    for k, p in enumerate(data["plans"]):
        assert re.search(rf"{k + 1} tp{p['layout']['tp']} cp{p['layout']['cp']} pp{p['layout']['pp']}\S* "
                         rf"dp{p['layout']['dp']} .*? {p['step_time_s']:.3f} {p['mfu']:.1%}", shown), k
    # every cell of the step and memory tables as printed
    table = text[text.index("term (s/step)"):text.index("peak / capacity")]
    for number in re.findall(r"\d+\.\d{1,3}", table):
        assert number in shown, number
    # the mapping against the baselines and the crossings
    for order, step in (("planned mapping", best["step_time_s"]),
                        *((k.replace("_", " "), v["step_time_s"]) for k, v in best["baselines"].items())):
        assert f"{order} {step:.3f}" in shown
    for kind, c in best["crossings"].items():
        assert f"{kind} {c['groups']} x {c['group_size']}" in shown
    # the topology strips: one per axis of size > 1, the job drawn whole (8 hosts)
    assert "the whole job: 64 GPUs on 8 hosts" in shown
    for axis in ("tp", "cp", "dp", "pp"):
        if lay[axis] > 1:
            assert f"{axis.upper()} groups {lay[axis]} GPUs each" in shown


def test_plan_page_says_which_plan_the_files_realize_and_which_run_otherwise(tmp_path):
    """A QA run: under `--out DIR --plan-index 2` the page showed plan 1 alone (its step, its charts), and none of the
    files that run slower than the plan; nor the job's defaulted batch, the search --emit narrowed, what the capacity
    assumes or the network priced, all of which the text says."""
    report = tmp_path / "plan.html"
    args = ("plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--top-k",
            "2", "--emit", "megatron,torchtitan", "--plan-index", "2")
    code, js, err = run(*args, "--out", str(tmp_path / "files"), "--json", "--report", str(report))
    assert code == 0, err
    data = json.loads(js)
    shown = visible(report.read_text())
    second = data["plans"][1]
    assert data["files_plan_index"] == 2 and data["files_run"], "the example's torchtitan.sh runs otherwise"
    assert "realize plan 2 of the table above, not plan 1" in shown
    assert f"step {second['step_time_s']:.3f} s" in shown  # plan 2's headline and charts, as the text prints them
    for line in data["files_run"]:
        assert line in shown, line
    # the text output's notes and assumptions (stderr's notes, the capacity and fabric lines)
    code, text, err = run(*args, "--out", str(tmp_path / "again"))
    assert code == 0, err
    for field, why in data["job_defaults"].items():
        assert f"note: {field.replace('_', ' ')} {why}" in shown
    narrowed = next(line for line in err.splitlines() if "the search kept only" in line)
    assert narrowed.removeprefix("placement: note: ") in shown
    said = [line for line in text.splitlines() if line.startswith(("capacity: ", "fabric: "))]
    assert len(said) == 3  # plan 1's capacity, the fabric, plan 2's capacity
    for line in said:
        assert re.sub(r"\s+", " ", line) in shown, line


def test_an_exhaustive_plan_page_says_what_the_search_leaves_untried(tmp_path):
    """A QA run: `plan --exhaustive` prints under its table what the search still bounds (pipeline splits, module
    lists, HSDP shards...); the page left them out."""
    report = tmp_path / "plan.html"
    args = ("plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
            "--global-batch", "256", "--top-k", "2", "--exhaustive")
    code, text, err = run(*args, "--report", str(report))
    assert code == 0, err
    bounds = [line.strip() for line in text.splitlines() if line.startswith("  bound: ")]
    assert bounds
    shown = visible(report.read_text())
    for line in bounds:
        assert line in shown, line


def test_plan_page_is_self_contained_and_deterministic(plan_pages, tmp_path):
    page = plan_pages[0]
    parsed = parse(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags and "iframe" not in parsed.tags
    assert [u for u in parsed.urls if not u[2].startswith(("#", "data:"))] == []
    assert "@import" not in page and "url(" not in page.replace("url(#", "")
    assert page.count("<svg") >= 3  # step chart, memory chart, topology
    code, _, err = run(*PLAN_ARGS, "--report", str(tmp_path / "again.html"))
    assert code == 0, err
    assert (tmp_path / "again.html").read_text() == page


def test_plan_page_of_a_mapped_allocation_draws_its_switches_and_compares_orders(tmp_path):
    report = tmp_path / "moe.html"
    args = ("plan", "--model", "mixtral-8x7b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
            "--nodelist", f"@{REPORT / 'hosts-3leaves.txt'}", "--node-type", "dgx-h100", "--oversubscription", "2",
            "--seq-len", "4096", "--global-batch", "160", "--top-k", "2")
    code, js, err = run(*args, "--json", "--report", str(report))
    assert code == 0, err
    best = json.loads(js)["plans"][0]
    shown = visible(report.read_text())
    assert "mapping: " in shown and f"CP-SAT {best['mapping_solver']['status']}" in shown
    for host in ("gpu0040", "gpu0002", "gpu0110"):
        assert host in shown
    for box in ("leaf 0", "leaf 1", "leaf 2", "spine 0"):
        assert box in report.read_text()
    assert f"EP groups {best['layout']['ep']} GPUs each" in shown


def test_audit_page_shows_findings_costs_and_the_argument_diff(tmp_path):
    report = tmp_path / "audit.html"
    code, js, err = run(*AUDIT_ARGS, "--json", "--report", str(report))
    assert code == 1, err  # an error-level finding, as without --report
    code, text, _ = run(*AUDIT_ARGS)
    data = json.loads(js)
    shown = visible(report.read_text())
    assert data["findings"], "the example launch has findings"
    for f in data["findings"]:
        cost = "cannot run" if f["cost_s"] is None else f"{f['cost_s']:.3f} s/step"
        assert f"{f['severity']} {f['kind']} {cost}" in shown
    for c in data["changes"]:
        if c["from"] is not None:
            assert f"- {c['argument']}" in shown
        if c["to"] is not None:
            assert f"+ {c['argument']}" in shown
    best_line = next(line for line in text.splitlines() if line.startswith("step ") and "speed-up" in line)
    assert best_line in shown
    assert f"step {data['estimate']['step_time_s']:.3f} s" in shown and f"x{data['speedup']:.3f}" in shown
    assert "As launched: the whole job: 32 GPUs on 4 hosts" in shown


def test_audit_page_states_the_capacity_assumption_and_where_the_groups_traffic_goes(tmp_path):
    """A QA run: the text's capacity line (who sets the expandable segments: here the launch files do not) and its
    table of the groups' traffic by network tier (GB per member, exposed seconds) were not on the audit page."""
    report = tmp_path / "audit.html"
    code, text, err = run(*AUDIT_ARGS, "--report", str(report))
    assert code == 1, err
    shown = visible(report.read_text())
    capacity = next(line for line in text.splitlines() if line.startswith("capacity: "))
    assert "the launch files do not set" in capacity and capacity in shown
    block = text[text.index("where the groups' traffic goes"):].split("\n\n")[0].splitlines()
    assert " ".join(block[1].split()) in shown  # the header: groups, count x size, up to each tier, ... exposed s
    rows = block[3:]
    assert rows, "the example's groups cross the network"
    for row in rows:
        assert " ".join(row.split()) in shown, row


def test_audit_page_lists_each_source_and_unmodelled_setting_once_without_the_texts_dash(tmp_path):
    """A QA run: the page's list of what the files set and placement does not model read "- - NAME ..." (the text
    block's dash inside the page's bullet)."""
    script = tmp_path / "train.sh"
    script.write_text("export NVTE_DEBUG=1\n" + (REPORT / "megatron_tp16.sh").read_text())
    report = tmp_path / "audit.html"
    args = [str(script) if a == str(REPORT / "megatron_tp16.sh") else a for a in AUDIT_ARGS]
    _, js, _ = run(*args, "--json", "--report", str(report))
    ignored = json.loads(js)["layout"]["ignored"]
    assert ignored, "the example launch has settings placement does not model"
    page = report.read_text()
    for item in ignored:
        assert f"<li>{html.escape(item)}</li>" in page, item
    assert "<li>- " not in page


def test_audit_page_says_which_written_files_run_other_than_the_best_plan(tmp_path):
    """A QA run: `audit --out DIR --report` wrote the page before the files, so a written file that runs other than
    the best plan (torchtitan 0.3.0 chunks the loss the 0.2.x job's TOML runs whole) said so in the text and the JSON
    (files_run) but not on the page."""
    report = tmp_path / "audit.html"
    job = ("audit", "--model", "llama3-8b", "--gpus", "8", "--launch", str(DATA / "audit" / "torchtitan" /
                                                                        "llama3_8b.toml"))
    code, js, err = run(*job, "--out", str(tmp_path / "files"), "--json", "--report", str(report))
    assert code == 0, err
    files_run = json.loads(js)["files_run"]
    assert files_run, "the example's torchtitan.sh runs otherwise"
    shown = visible(report.read_text())
    assert "run other than the best plan" in shown
    for line in files_run:
        assert line in shown, line


def test_the_best_plan_of_an_fp16_launch_runs_fp16_where_no_change_moves_it(tmp_path):
    """A QA run (Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh, --fp16): the job as launched read "fp16
    (priced as bf16 ...)", the best plan below it "bf16", though the argument diff kept --fp16 (and the JSON's
    best.precision_as_run was null)."""
    script = tmp_path / "fp16.sh"
    script.write_text((REPORT / "megatron_tp16.sh").read_text().replace("--bf16", "--fp16"))
    report = tmp_path / "audit.html"
    code, js, err = run("audit", "--launch", str(script), "--model", "llama3-70b", "--cluster", "dgx-h100", "--json",
                        "--report", str(report))
    assert code == 1, err
    data = json.loads(js)
    assert data["changes"] and not any(c["argument"] in ("--fp16", "--bf16") for c in data["changes"])
    assert data["estimate"]["precision_as_run"] == "fp16"
    assert data["best"]["precision_as_run"] == "fp16" and data["best"]["precision"] == "bf16"
    shown = visible(report.read_text())
    best = shown[shown.index("The best plan llama3-70b"):]
    assert "global batch 64, fp16 (priced as bf16: the same tensor-core rate)" in best
    assert "dgx-h100, seq 8192, global batch 64, fp16 (priced as bf16) The job as launched" in shown  # the subtitle


def test_no_two_labels_of_the_memory_chart_overlap_where_the_job_does_not_fit(tmp_path, monkeypatch):
    """A QA run: an audited launch over its memory (122.7 of 78.1 GiB) drew "capacity 78.1 GiB" beside its line,
    mid-axis, on top of the chart's title; each label's box on the drawn figure is now clear of every other's."""
    import matplotlib.text

    from placement.html import charts
    from placement.plan import Plan

    script = tmp_path / "oom.sh"
    script.write_text((REPORT / "megatron_tp16.sh").read_text().replace("--micro-batch-size 1", "--micro-batch-size 8")
                      .replace("--use-distributed-optimizer ", ""))
    code, js, err = run("audit", "--launch", str(script), "--model", "llama3-70b", "--cluster", "dgx-h100", "--json")
    assert code == 1, err
    plan = Plan.model_validate(json.loads(js)["estimate"])
    assert not plan.fits
    boxes = []
    drawn = charts.svg

    def measure(fig):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes.extend((t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(matplotlib.text.Text)
                     if t.get_visible() and t.get_text().strip())
        return drawn(fig)

    monkeypatch.setattr(charts, "svg", measure)
    chart = charts.memory_chart(plan)
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            assert not box_a.overlaps(box_b), (a, b)
    capacity = f"capacity {plan.memory_capacity_bytes / 2**30:.1f} GiB"
    assert capacity in chart and "does not fit" in chart


@pytest.mark.parametrize("name, message", [
    ("plan.txt", "--report {path}: the report is an HTML page; give a file name ending in .html (or .htm)"),
    ("folder.html", "--report {path}: is a folder; give a file name"),
])
def test_bad_report_path_is_bad_input_before_any_work(tmp_path, name, message):
    path = tmp_path / name
    if name == "folder.html":
        path.mkdir()
    for args in (PLAN_ARGS, AUDIT_ARGS):
        code, out, err = run(*args, "--report", str(path))
        assert code == 2 and out == ""
        assert err.strip() == "placement: " + message.format(path=path)
    code, _, err = run("sweep", str(REPORT / "small_sweep.yaml"), "--out", str(tmp_path / "sw"), "--report", str(path))
    assert code == 2 and err.strip() == "placement: " + message.format(path=path)
    assert not (tmp_path / "sw" / "sweep.json").exists()  # refused before any cell ran


def test_report_folder_is_created(tmp_path):
    report = tmp_path / "new" / "deeper" / "plan.html"
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", "8", "--top-k", "1", "--report", str(report))
    assert code == 0, err
    assert report.read_text().startswith("<!DOCTYPE html>") and f"wrote {report}" in err


# -- the topology slice -------------------------------------------------------------------------------------

def _view(num_gpus: int, layout: Layout):
    topo = Topology(load_cluster("dgx-h100"), load_accelerator("h100-sxm"), num_gpus=num_gpus)
    coords = rank_coords(layout, num_gpus, moe=False)
    sizes = {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp}
    return topo, topology_view(topo, np.arange(num_gpus), coords, sizes)


def test_a_large_job_draws_a_slice_and_says_which():
    _, view = _view(16384, Layout(tp=8, pp=16, dp=128))
    assert view.caption == ("a slice: the first 32 hosts (in rank order) of pipeline stage 1 of 16, 256 of the job's "
                            "16,384 GPUs on 2,048 hosts; DP groups continue past it")
    host_labels = [t.text for t in view.texts if t.rotate]
    assert host_labels == [f"host{h}" for h in range(MAX_HOSTS)]
    assert len(view.cells) == 3 * MAX_HOSTS * 8  # TP, DP and PP strips, every GPU of the slice
    assert view.legend[0] == "TP: 32 of the job's 2,048 groups of 8 GPUs shown (colours repeat every 12 groups; " \
                             "the numbers do not)"
    # a TP group is one host: its 8 cells share a number
    tp = [c for c in view.cells if c.title.endswith("pp 0") and "tp " in c.title][:8]
    assert len({c.label for c in tp}) == 1


def test_a_stage_that_fits_is_drawn_whole():
    _, view = _view(1024, Layout(tp=8, pp=8, dp=16))
    assert view.caption == ("a slice: the 16 hosts of pipeline stage 1 of 8 (128 of 1,024 GPUs); the other stages "
                            "repeat it on other hosts")


# -- the sweep page ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep_rows(tmp_path_factory):
    import yaml

    spec = SweepSpec.model_validate(yaml.safe_load((REPORT / "small_sweep.yaml").read_text()))
    return spec, run_sweep(spec, tmp_path_factory.mktemp("cache"), "local", workers=1).rows


def test_sweep_page_shows_each_cell_as_the_sweep_priced_it_and_leaves_out_absent_columns(sweep_rows):
    spec, rows = sweep_rows
    page = sweep_html(rows, {"name": spec.name, "currency": "USD"})
    shown = visible(page)
    from placement.sweep.output import days_text

    for r in rows:
        # the days and their band as the text summary prints them (`32.6 (30-43)`: whole days from 20 days on)
        point, band = days_text(r).split(" ", 1)
        assert re.search(
            rf"{r['design']} ok {r['num_gpus_bought']} {r['num_gpus']} {r['num_gpus_idle']} "
            rf"{re.escape(point)} {re.escape(band.strip('()').replace('-', ' - '))} "
            rf"{r['step_time_s']:.3f} {r['plan']['mfu']:.1%} {r['gpu_hours']:,.0f} {r['cost']:,.0f} "
            rf"{_down(r['cost_low'], '.0f'):,.0f} - {_up(r['cost_high'], '.0f'):,.0f}", shown), r["design"]
    # the study rents its GPUs (price_per_gpu_hour): no row has capex or energy, so no such column
    assert all(r["capex_total"] is None and r["energy_mwh"] is None for r in rows)
    assert "capex total (USD)" not in shown and "energy MWh" not in shown
    assert "placement sweep: report-example" in shown
    assert page.count("<svg") == 2  # frontier, breakdown


def test_sweep_page_shows_the_new_fields_where_present_and_a_dash_where_not(sweep_rows):
    _, rows = sweep_rows
    extra = [dict(r) for r in rows]
    first = extra[0]
    days = first["time_to_train_s"] / 86400
    first.update(num_gpus_idle=0, idle_cost=0.0, capex_total=1_234_567.0, capex_amortized=4321.0, energy_mwh=12.34,
                 energy_cost=1500.5, facility_mw=0.0456, cost_per_million_tokens=0.0471, time_to_train_days=days,
                 time_to_train_days_low=days * 0.8, time_to_train_days_high=days * 1.3, cost_low=first["cost"] * 0.8,
                 cost_high=first["cost"] * 1.3, error_band_source="dense, h100 (validate: mean |error| 5.9 %)")
    meta = {"name": "study <b>bold</b>", "currency": "EUR", "date": "2026-12-01", "placement_version": "0.1.0",
            "assumptions": {"pue": 1.3, "energy_price_per_kwh": 0.1}, "inputs": {"sweep_file": "s.yaml"}}
    page = sweep_html(extra, meta)
    shown = visible(page)
    # the table lists the rows in the text summary's order (summary_order), each row up to the next one's design
    from placement.sweep.output import summary_order

    ordered = [r["design"] for r in summary_order(extra)]

    def page_row(design: str) -> str:
        after = ordered[ordered.index(design) + 1:]
        return re.search(rf"{design} ok .*?(?= {after[0]} ok)" if after else rf"{design} ok .*", shown).group(0)

    row = page_row(first["design"])
    for cell in ("1,234,567", "4,321", "12.3", "1,500", "0.0471",
                 f"{_down(days * 0.8, '.1f'):,.1f} - {_up(days * 1.3, '.1f'):,.1f}",
                 f"{_down(first['cost'] * 0.8, '.0f'):,.0f} - {_up(first['cost'] * 1.3, '.0f'):,.0f}", "dense, h100"):
        assert cell in row, cell
    second = next(r for r in extra if r["design"] not in (first["design"], ordered[-1]))
    other = page_row(second["design"])
    # the 5 capex and energy columns a rented row lacks, the separators of its two ranges, and "vs published runs"
    # where its plan has no check against a published run (the column then reads "-": the check depends on the runs
    # validate holds, not on this page)
    from placement.html.pages import _published_check

    unchecked = _published_check((second.get("plan") or {}).get("published_best")) is None
    assert other.split().count("-") == 7 + unchecked
    assert "capex total (EUR)" in shown and "energy MWh" in shown and "error band from" in shown
    # the document's metadata, escaped
    assert "2026-12-01" in shown and "energy price per kwh 0.1" in shown and "sweep file s.yaml" in shown
    assert "<b>bold</b>" not in page and html.escape("<b>bold</b>") in page
    assert "bars: the error band" in shown


def test_sweep_page_says_what_the_summary_says_under_each_row_and_no_deadline_read_missed_when_met(sweep_rows):
    """A QA run: every row that met its deadline read "MISSED" under "deadline at risk" (the yes/no format of "deadline
    met"), and the messages the text summary prints under a row (the missed deadline, the one at risk, why GPUs sit
    idle, a plan within 0.1 GiB of its memory) were not on the page; its per-M-token column rounded 0.0503 to 0.05."""
    from placement.sweep.output import summary

    _, rows = sweep_rows
    rows = [dict(r) for r in rows]
    safe, risky, missed = rows
    safe.update(deadline_days=400, deadline_met=True, deadline_at_risk=False, cost_per_million_tokens=0.0503)
    risky.update(deadline_days=400, deadline_met=True, deadline_at_risk=True,
                 message="meets the 400-day deadline at the predicted 390.0 days, but not at the slow end of the error "
                         "band (410.0 days)")
    missed.update(deadline_days=400, deadline_met=False, deadline_at_risk=False,
                  message="no GPU count trains within the 400-day deadline; the fastest (16 GPUs) is shown",
                  num_gpus_bought=4 * missed["num_gpus"], num_gpus_idle=3 * missed["num_gpus"],
                  idle_reason="48 of 64 GPUs idle: no layout on more")
    shown = visible(sweep_html(rows, {"name": "s", "currency": "USD"}))

    def cells(r: dict) -> str:
        return re.search(rf"{re.escape(r['design'])} ok .*? tp\d", shown).group(0)

    # deadline met, deadline at risk
    assert " yes no " in cells(safe) and "MISSED" not in cells(safe)
    assert " yes at risk " in cells(risky)
    assert " MISSED - " in cells(missed)
    assert " 0.0503 " in cells(safe)
    # every line the text summary prints under a priced row, on the page under the table
    text = summary(rows, "USD")
    for r in rows:
        block = text[text.index(f"  {r['design']} "):].split("\n")[1:]
        notes = " ".join(line.strip() for line in block[:next(
            (k for k, line in enumerate(block) if not line.startswith("      ")), len(block))])
        lines = [r["message"]] if r.get("message") else []
        lines += [r["idle_reason"]] if r is missed else []
        assert lines or r is safe
        for line in lines:
            assert line in notes, line  # the text says it...
            assert f"{r['design']}: {line}" in shown, line  # ...and so does the page


def test_sweep_frontier_numbers_its_points_and_keys_them_so_that_designs_priced_alike_stay_readable(sweep_rows):
    """A QA run of hardware/sweeps/h100-h200-b200-gb200-budget.yaml: three designs priced within 2 % of each other drew
    their whole labels ("H100 DGX (8-GPU nodes) 8,192 GPUs", ...) on top of each other, unreadable.  Each point is now
    its number, keyed under the chart as frontier.png is (sweep.output.write_plots): design, GPUs, days and cost."""
    _, rows = sweep_rows
    rows = [dict(r) for r in rows]
    for r in rows[1:]:  # all three at (nearly) the first one's cost and time
        r.update(cost=rows[0]["cost"] * 1.01, time_to_train_days=rows[0]["time_to_train_days"] * 1.01)
    page = sweep_html(rows, {"name": "s", "currency": "USD"})
    frontier = page[page.index("<figure>"):page.index("</figure>")]
    chart = frontier[frontier.index("<svg"):frontier.index("</svg>")]
    for r in rows:
        assert r["design"] not in chart  # no whole label drawn over another
    ranked = sorted(rows, key=lambda r: (r["cost"], r["design"]))
    key = re.findall(r"<li>(.*?)</li>", frontier[frontier.index("</svg>"):])
    assert key == [html.escape(f"{r['design']}: {r['num_gpus']:,} GPUs, {r['time_to_train_days']:,.1f} days, "
                               f"{r['cost']:,.0f} USD" + (" (frontier)" if r["pareto"] else "")) for r in ranked]
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", chart)
    for k in range(1, len(rows) + 1):
        assert str(k) in labels, k


def test_sweep_page_lists_no_unused_cost_input_of_a_rented_design(tmp_path):
    """A QA run: a rented design (price_per_gpu_hour) was listed on the page with "amortization_years 4,
    energy_price_per_kwh 0.1, pue 1.3", defaults its price does not read, as if given; the text names none."""
    report = tmp_path / "sweep.html"
    code, _, err = run("sweep", str(REPORT / "small_sweep.yaml"), "--out", str(tmp_path / "out"), "--workers", "1",
                        "--report", str(report))
    assert code == 0, err
    shown = visible(report.read_text())
    line = re.search(r"h100x16: cluster dgx-h100.*?(?= h100x32:)", shown).group(0)
    assert "price_per_gpu_hour 2" in line
    for unused in ("amortization_years", "energy_price_per_kwh", "pue", "capex_per_gpu", "power_per_gpu_w"):
        assert unused not in line, unused


def test_sweep_page_without_any_plan():
    rows = [{"design": "d", "workload": "w", "status": "infeasible", "message": "8 GPUs: needs 900 GiB",
             "num_gpus": 8, "num_gpus_bought": 8, "cost": None, "time_to_train_s": None, "plan": None}]
    shown = visible(sweep_html(rows, {}))
    assert "d infeasible 8 8" in shown and "d: 8 GPUs: needs 900 GiB" in shown
    assert "placement sweep: sweep" in shown


def test_an_empty_list_of_the_study_is_no_heading():
    """A QA note: a study without overrides showed an empty "overrides" heading."""
    rows = [{"design": "d", "workload": "w", "status": "infeasible", "message": "8 GPUs: needs 900 GiB",
             "num_gpus": 8, "num_gpus_bought": 8, "cost": None, "time_to_train_s": None, "plan": None}]
    page = sweep_html(rows, {"overrides": [], "networks": ["network of d: leaf 1:1"]})
    assert "<h3>networks</h3>" in page and "<h3>overrides</h3>" not in page


def test_sweep_cli_writes_the_page(tmp_path):
    report = tmp_path / "sweep.html"
    code, js, err = run("sweep", str(REPORT / "small_sweep.yaml"), "--out", str(tmp_path / "out"), "--json",
                        "--workers", "1", "--report", str(report))
    assert code == 0, err
    shown = visible(report.read_text())
    for r in json.loads(js)["rows"]:
        assert f"{r['time_to_train_s'] / 86400:,.1f}" in shown and f"{r['cost']:,.0f}" in shown
    assert "designs" in shown and "dgx-a100-80g" in shown


def test_the_page_writes_a_budget_in_full_and_per_mtok_costs_tell_apart():
    """A user trial: the page showed the budget as 1.2e+07 (the text: 12,000,000 USD), and the text's per-Mtok column
    printed 0.0260, 0.0271 and 0.0317 all as 0.03."""
    from placement.html.pages import _plain
    from placement.sweep.output import _per_mtok

    assert _plain(12_000_000.0) == "12,000,000" and _plain(0.1) == "0.1"
    assert [_per_mtok(x) for x in (0.0260, 0.0271, 0.0317)] == ["0.026", "0.0271", "0.0317"]
    assert [_per_mtok(x) for x in (2.345, 1234.5)] == ["2.35", "1,234"]


def test_the_sweep_page_states_the_frontier_rule_its_rows_follow(sweep_rows):
    """A QA trial: the page's caption read "no other design is both cheaper and faster" beside two red points, one
    0.5 % cheaper and faster than the other: the rows' `pareto` counts a lead under PARETO_TIE_REL as a tie."""
    from placement.sweep.run import PARETO_TIE_REL, mark_pareto

    _, rows = sweep_rows
    rows = [dict(r) for r in rows[:2]]
    rows[1].update(workload=rows[0]["workload"], cost=rows[0]["cost"] * 0.995,
                   time_to_train_s=rows[0]["time_to_train_s"] * 0.995,
                   time_to_train_days=rows[0]["time_to_train_days"] * 0.995)
    mark_pareto(rows)
    assert rows[0]["pareto"] and rows[1]["pareto"]  # a tie: both on the frontier
    shown = visible(sweep_html(rows, {"name": "s", "currency": "USD"}))
    assert "both cheaper and faster" not in shown
    rule = f"ahead in one by more than {PARETO_TIE_REL:.0%}: a smaller lead is a tie"
    assert shown.count(rule) == 2  # the caption and the glossary


def test_the_sweep_pages_table_lists_the_designs_in_the_text_summarys_order(sweep_rows):
    """A QA run: the page's table kept sweep.json's order (the file's designs) while the text summary lists them
    in the order of the study objective (sweep.price.score): h100x16 first on the page, h100x32 (the faster, under
    `objective: time`) first in the text."""
    from placement.sweep.output import RANKED_BY, summary

    spec, rows = sweep_rows
    text = summary(rows, "USD", spec)
    designs = [r["design"] for r in rows]
    in_text = sorted(designs, key=lambda d: re.search(rf"^\s*{d}\b", text, re.M).start())
    assert in_text != designs, "the study's file order is the objective's: the test shows nothing"
    for objective in ("time", "cost"):
        mine = [{**r, "objective": objective} for r in rows]
        shown = visible(sweep_html(mine, {"name": spec.name, "currency": "USD"}))
        on_page = sorted(designs, key=lambda d: shown.index(f"{d} ok "))
        in_text = sorted(designs, key=lambda d: re.search(rf"^\s*{d}\b", summary(mine, "USD"), re.M).start())
        assert on_page == in_text, objective
        assert f"Rows {RANKED_BY[objective]}" in shown


def test_the_sweep_pages_days_band_is_the_text_summarys(sweep_rows):
    """A QA run: a100x16's 32.6 days read `(30-43)` in the text summary (whole days from 20 days on) and
    `30.8 - 42.5` on the page."""
    from placement.sweep.output import days_text

    _, rows = sweep_rows
    long = [r for r in rows if r["time_to_train_days"] >= 20]
    assert long, "no row of 20 days or more: the test shows nothing"
    shown = visible(sweep_html(rows, {"name": "s", "currency": "USD"}))
    for r in long:
        band = days_text(r).split(" ", 1)[1].strip("()")
        lo, hi = band.split("-")
        assert f"{r['design']} ok" in shown
        row = shown[shown.index(f"{r['design']} ok"):]
        assert f" {lo} - {hi} " in row.split(" ok ", 2)[1], (band, row[:120])


def test_breakdown_png_lists_the_designs_top_down_in_the_summarys_order(sweep_rows, tmp_path, monkeypatch):
    """A QA run: breakdown.png drew sweep.json's order from the bottom up (h100x16 at the bottom, a100x16 on top)
    while the summary and the page's chart list h100x32, the fastest under `objective: time`, first."""
    import matplotlib.figure

    from placement.sweep.output import summary_order, write_plots

    _, rows = sweep_rows
    drawn = {}
    save = matplotlib.figure.Figure.savefig

    def record(fig, path, *args, **kwargs):
        ax = fig.axes[0]
        labels = [t.get_text().split("\n")[0] for t in ax.get_yticklabels()]
        drawn[len(drawn)] = labels if ax.yaxis_inverted() else labels[::-1]  # top to bottom
        return save(fig, path, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    write_plots(tmp_path, rows, "USD")
    expected = [r["design"] for r in summary_order(rows)]
    assert expected != [r["design"] for r in rows], "the file order is the objective's: the test shows nothing"
    assert drawn[1] == expected


def test_a_design_that_misses_the_deadline_is_listed_after_those_that_meet_it(sweep_rows):
    """A QA run: under `objective: cost` with a 14-day deadline, a rented design whose fastest count took 14.6 days was
    listed first, as the lowest outlay, above designs that met the deadline; the text and the page now list it after
    them, and say so."""
    from placement.sweep.output import summary

    _, rows = sweep_rows
    mine = [{**r, "objective": "time", "deadline_met": True} for r in rows]
    fastest = min(mine, key=lambda r: r["time_to_train_s"])
    fastest["deadline_met"] = False
    others = sorted((r for r in mine if r is not fastest), key=lambda r: r["time_to_train_s"])
    expected = [r["design"] for r in others] + [fastest["design"]]
    text = summary(mine, "USD")
    assert sorted(expected, key=lambda d: re.search(rf"^\s*{d}\b", text, re.M).start()) == expected
    shown = visible(sweep_html(mine, {"name": "s", "currency": "USD"}))
    assert sorted(expected, key=lambda d: shown.index(f"{d} ok ")) == expected
    assert "a design that misses the deadline after those that meet it" in shown
