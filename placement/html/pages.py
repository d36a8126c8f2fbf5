"""The three pages: what `plan`, `audit` and `sweep` computed, laid out for people."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

from placement.html import charts
from placement.html.render import render, trusted_svg
from placement.html.topology_view import TopologyView, topology_view
from placement.mapping.report import rank_coords
from placement.plan import Plan
from placement.report import (
    BREAKDOWN_HEADER,
    LAUNCH_SBATCH_SETS,
    MEMORY_HEADER,
    TOP_K_HEADER,
    breakdown_rows,
    capacity_note,
    headline,
    mapping_parts,
    memory_rows,
    search_line,
    top_k_rows,
)
from placement.topology import Topology


def _sizes(p: Plan) -> dict[str, int]:
    lay = p.layout
    return {"tp": lay.tp, "cp": lay.cp, "ep": lay.ep, "dp": lay.dp, "pp": lay.pp}


def _plan_view(p: Plan, topo: Topology, gpu_of_rank: np.ndarray) -> TopologyView:
    """The plan's groups where its mapping puts them (ranks in placement's mesh order)."""
    coords = rank_coords(p.layout_spec(), topo.num_gpus, p.layout.ep > 1)
    return topology_view(topo, gpu_of_rank, coords, _sizes(p))


def _table_view(p: Plan, topo: Topology) -> TopologyView | None:
    """The plan's groups from its rank table (`Plan.mapping`: host, local GPU and mesh coordinates of each
    rank), as audit prices the job as launched; None for a plan without one."""
    rows = p.mapping or []
    if not rows:
        return None
    index = {name: k for k, name in enumerate(topo.host_names)}
    gph = topo.gpus_per_host
    gpu_of_rank = np.array([index[r["host"]] * gph + r["local_gpu"] for r in rows], dtype=np.int64)
    coords = {axis: np.array([r["coords"][axis] for r in rows], dtype=np.int64) for axis in rows[0]["coords"]}
    return topology_view(topo, gpu_of_rank, coords, _sizes(p))


def _precision(p: Plan) -> str:
    """The precision the job runs, as its headline names it (an FP16 launch is priced as BF16: a QA run's page read
    "bf16" under its title for a job that runs --fp16)."""
    if p.precision_as_run in (None, p.precision):
        return p.precision
    return f"{p.precision_as_run} (priced as {p.precision})"


def _plan_sections(p: Plan, setter: str = LAUNCH_SBATCH_SETS, notes: Sequence[str] = ()) -> dict:
    """A plan's headline, charts and tables, and the lines the text prints under its memory table: what the capacity
    assumes (`capacity_note`, with `setter`, who sets the expandable segments) and any `notes` (a QA run: the page
    left out the capacity's assumption the text states under every plan)."""
    return {"headline": headline(p).splitlines(), "step_svg": trusted_svg(charts.step_chart(p)),
            "memory_svg": trusted_svg(charts.memory_chart(p)), "breakdown_header": BREAKDOWN_HEADER,
            "breakdown_rows": breakdown_rows(p), "memory_header": MEMORY_HEADER, "memory_rows": memory_rows(p),
            "notes": [capacity_note(p, setter), *notes]}


def _mapping(p: Plan) -> dict | None:
    parts = mapping_parts(p)
    if parts is None:
        return None
    verdict, orders, levels, crossings = parts
    ring = ["in-node ring (--node-topo)"] if p.node_topo is not None else []
    return {"verdict": verdict, "orders": orders, "crossings": crossings,
            "crossing_header": ["groups", "count x size", *(f"within {lv}" for lv in levels), *ring]}


def plan_html(planned, topo: Topology, calibration: str | None = None, *, setter: str = LAUNCH_SBATCH_SETS,
              fabric: str | None = None, notes: Sequence[str] = (), files: dict | None = None,
              bounds: Sequence[str] = ()) -> str:
    """The `plan` page: the best plan's headline, step and memory charts and tables, its groups on the
    topology, its mapping against the baseline orders, the top-k table.  `planned`: what `plan_job` returned
    (after `without_timings` under --reproducible, as the text output); `calibration`: the profile line the
    text output ends with, if any; `setter`: who sets the expandable segments the capacity assumes
    (report.allocator_setter); `fabric`: the network priced and its sources (cli.fabric_priced); `notes`: what the
    command says of its inputs on stderr (the job's defaults, the search --emit narrowed); `files`: what --out wrote,
    {"folder", "index" (the plan the files realize, 1-based), "run" (files_run: each file that runs otherwise)};
    `bounds`: what the search leaves untried, as `plan --exhaustive` prints it under the table.
    A QA run: under `--out --plan-index 2` the page showed plan 1 alone, and none of the files that run slower
    than planned."""
    best = planned.plans[0]
    realized = None
    if files is not None:
        index = int(files["index"])
        realized = {"folder": str(files["folder"]), "index": index, "run": list(files.get("run") or ()),
                    "plan": None if index == 1 else _plan_sections(planned.plans[index - 1], setter)}
    return render("plan.html", title=f"placement plan: {best.model} on {best.num_gpus:,} x {best.accelerator}",
                  subtitle=f"{best.cluster}, seq {best.seq_len}, global batch {best.global_batch}, {_precision(best)}",
                  best=_plan_sections(best, setter), view=_plan_view(best, topo, planned.gpu_of_rank[0]),
                  mapping=_mapping(best), top_header=TOP_K_HEADER, top_rows=top_k_rows(planned),
                  search=search_line(planned), calibration=calibration, fabric=fabric, notes=list(notes),
                  files=realized, bounds=list(bounds))


def audit_html(a, topo: Topology, calibration: str | None = None, *, files: dict | None = None) -> str:
    """The `audit` page: the job as launched (headline, charts, groups where they land, mapping against the
    baselines), its findings with their cost, the better plan as an argument diff, and where each value came
    from.  `a`: what `audit_job` returned (after `without_timings` under --reproducible); `files`: what --out wrote,
    {"folder", "run" (files_run: each file that runs other than the best plan)}."""
    from placement.audit.report import (
        TRAFFIC_TITLE,
        allocator_setter_of,
        best_lines,
        change_lines,
        changes_note,
        crossings_rows,
        finding_cost,
        launch_label,
        no_changes_text,
        offloaded_note,
        ranks_text,
        sources_lines,
    )

    est, best = a.estimate, a.best
    findings = [{"severity": f.severity, "kind": f.kind, "cost": finding_cost(f), "message": f.message,
                 "groups": [f"{ranks_text(g['ranks'])} on {', '.join(g['hosts'])}" for g in f.groups[:2]]}
                for f in a.findings]
    same = best is est
    # the capacity's assumption as the text says it under the job as launched (who sets the expandable segments: the
    # job's files); the best plan is the same launch changed, so the same
    setter, offloaded = allocator_setter_of(a), offloaded_note(a)
    return render("audit.html", title=f"placement audit: a {launch_label(a)} launch of {est.model} on "
                                      f"{est.num_gpus:,} x {est.accelerator}",
                  subtitle=f"{est.cluster}, seq {est.seq_len}, global batch {est.global_batch}, {_precision(est)}",
                  launched=_plan_sections(est, setter, [offloaded] if offloaded else []),
                  best=_plan_sections(best, setter), findings=findings,
                  best_lines=best_lines(a).splitlines(), changes=change_lines(a), changes_note=changes_note(a),
                  no_changes=no_changes_text(a),
                  launched_view=_table_view(est, topo),
                  best_view=None if same else _plan_view(best, topo, a.best_gpu_of_rank),
                  mapping=_mapping(est), traffic=crossings_rows(est) if est.crossings else None,
                  traffic_title=TRAFFIC_TITLE,
                  sources=[line.strip().removeprefix("- ") for line in sources_lines(a)[1:]],
                  calibration=calibration, files=files,
                  measured=[] if a.measured is None else [line.strip() for line in a.measured.summary().splitlines()])


# -- sweep ------------------------------------------------------------------------------------------------

SWEEP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (key, header, format); a column shows when some row has its key
    ("design", "design", "text"),
    ("status", "status", "text"),
    ("num_gpus_bought", "GPUs bought", "int"),
    ("num_gpus", "GPUs used", "int"),
    ("num_gpus_idle", "GPUs idle", "int"),
    ("time_to_train_days", "days", "days"),
    ("time_to_train_days_range", "days range", "range1"),
    ("deadline_met", "deadline met", "yesno"),
    ("deadline_at_risk", "deadline at risk", "risk"),
    ("step_time_s", "step s", "f3"),
    ("mfu", "MFU", "pct"),
    ("gpu_hours", "GPU-hours", "int"),
    ("cost", "cost", "money"),
    ("cost_range", "cost range", "moneyrange"),
    ("capex_total", "capex total", "money"),
    ("capex_amortized", "capex amortized", "money"),
    ("energy_mwh", "energy MWh", "qty"),
    ("energy_cost", "energy cost", "money"),
    ("facility_mw", "facility MW", "qty"),
    ("idle_cost", "idle cost", "money"),
    ("outlay", "outlay", "money"),
    ("cost_per_million_tokens", "per M tokens", "mtok"),
    ("error_band_source", "error band from", "text"),
    ("published_check", "vs published runs", "text"),
    ("pareto", "frontier", "mark"),
    ("layout", "layout", "layout"),
)
GLOSSARY = {
    "GPUs bought": "GPUs the design buys (its `gpus`, or what the budget buys in whole purchase units: nodes, or "
                   "NVL72 racks where the NVLink domain spans nodes)",
    "GPUs used": "GPUs the chosen plan runs on",
    "GPUs idle": "bought and not used by the plan; still paid for",
    "days": "time to train the workload's tokens at the plan's tokens/s",
    "days range": "time to train across the error band of the nearest calibration group",
    "step s": "modeled seconds per training step",
    "MFU": "model FLOPs utilisation of the plan (PaLM's definition)",
    "GPU-hours": "hours to train x GPUs bought",
    "cost": "cost of the run, idle GPUs included",
    "cost range": "cost across the error band",
    "capex total": "purchase price of everything bought",
    "capex amortized": "the purchase price's share for the run's duration",
    "energy MWh": "energy at the wall over the run, PUE included",
    "energy cost": "that energy at the design's energy price",
    "facility MW": "power the facility draws while training, PUE included",
    "idle cost": "the cost's share paid for idle GPUs",
    "outlay": "capex total plus the run's energy cost",
    "per M tokens": "cost per million training tokens",
    "error band from": "the validation group whose error sets the band (and the published run a plan priced above "
                       "every run of its kind is widened to)",
    "vs published runs": "the plan against published runs: its error on a published run of this very job, or how "
                         "far its MFU is above every published run of its kind (the model's extrapolation)",
    "deadline met": "whether the row trains within the study's deadline_days (MISSED where it does not)",
    "deadline at risk": "met at the predicted step but not at the error band's slow end (\"at risk\"; \"no\" where "
                        "the slow end meets it too)",
    "frontier": "on the Pareto frontier of cost and time for this workload ({rule})",
    "layout": "the chosen plan's parallel layout",
}


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _days(row: dict, key: str = "time_to_train_days") -> float | None:
    if _num(row.get(key)) is not None:
        return _num(row[key])
    seconds = _num(row.get("time_to_train_s")) if key == "time_to_train_days" else None
    return None if seconds is None else seconds / 86400.0


def _band(row: dict) -> str | None:
    for key in ("error_band_source", "error_source", "band_source"):
        if row.get(key) is not None:
            return str(row[key])
    band = row.get("error_band")
    if isinstance(band, dict):
        # the validate group (the glossary's "validation group"), and the published run a plan above it is anchored
        # to (a user trial: every row showed the code hash of `placement validate`, the same for all)
        group = band.get("group") or band.get("source")
        anchor = (band.get("published_anchor") or {}).get("run")
        return (f"{group}; widened to {anchor}" if anchor else str(group or "")) or None
    return str(band) if band is not None else None


def _published_check(best: dict | None) -> str | None:
    """A plan's check against published runs in a few words (Plan.published_best; `plan` prints it in full)."""
    from placement.calibration.published import above_ratio

    if not best:
        return None
    same = best.get("same_job")
    if same:
        return f"published run of this job: priced {same['error']:+.1%} ({same['run']})"
    parts = []
    workload = best.get("same_workload")
    if workload and not best.get("similar_job"):  # as the summary's line (calibration.published.published_line)
        parts.append(f"published run of this workload at other degrees: priced {workload['plan_speedup']:.2f}x its "
                     f"speed ({workload['run']})")
    if above_ratio(best) is not None:
        parts.append(f"above published: MFU {best['ratio']:.2f}x the best {best['group']} run's "
                     f"({best['best_mfu']:.1%}, {best['best_run']})")
    return "; ".join(parts) or None


def _value(row: dict, key: str):
    """A row's value for a sweep column (derived columns from the row's own fields), None if absent."""
    plan = row.get("plan") or None
    if key == "time_to_train_days":
        return _days(row)
    if key == "time_to_train_days_range":
        lo, hi, days = _days(row, "time_to_train_days_low"), _days(row, "time_to_train_days_high"), _days(row)
        return None if lo is None or hi is None else (lo, hi, days)
    if key == "cost_range":
        lo, hi = _num(row.get("cost_low")), _num(row.get("cost_high"))
        return None if lo is None or hi is None else (lo, hi)
    if key == "mfu":
        return plan.get("mfu") if plan else None
    if key == "layout":
        return plan
    if key == "error_band_source":
        return _band(row)
    if key == "published_check":
        return _published_check((plan or {}).get("published_best"))
    if key == "deadline_at_risk" and row.get("deadline_met") is False:
        return None  # missed, not at risk ("-"; its deadline column says MISSED)
    return row.get(key)


def _cell(value, fmt: str, currency: str) -> str:
    if value is None:
        return "-"
    if fmt == "text":
        return str(value)
    if fmt == "mark":
        return "*" if value else ""
    if fmt == "yesno":
        return "yes" if value else "MISSED"
    if fmt == "risk":  # met even at the band's slow end is not at risk (a QA run: every such row read MISSED)
        return "at risk" if value else "no"
    if fmt == "mtok":  # as the text summary prints it (sweep.output._per_mtok: 0.0503 and 0.0471 both read 0.05)
        from placement.sweep.output import _per_mtok

        number = _num(value)
        return str(value) if number is None else _per_mtok(number)
    if fmt == "layout":
        from placement.sweep.output import _layout

        return _layout(value)
    if fmt in ("range1", "moneyrange"):
        # rounded outward, as the text summary's bands are (sweep.output._down/_up: a user trial read 12.3-17.8 days
        # in the text and 12.3 - 17.7 on the page), to its decimals: whole days around a point of 20 days or more
        # (days_band_format; a QA run read a 32.6-day row's band as 30-43 in the text and 30.8 - 42.5 on the page)
        from placement.sweep.output import _down, _up, days_band_format

        lo, hi, *point = value
        days = point[0] if point and point[0] is not None else lo
        spec = days_band_format(days).lstrip(",") if fmt == "range1" else ".0f"
        return f"{_down(lo, spec):,{spec}} - " + ("inf" if math.isinf(hi) else f"{_up(hi, spec):,{spec}}")
    number = _num(value)
    if number is None:
        return str(value)
    if fmt == "qty":  # a power or an energy as the text summary prints it: 0.015 MW, not 0.01 (sweep.output._quantity)
        from placement.sweep.output import _quantity

        return _quantity(number)
    if fmt == "days":  # two significant figures below 0.1 day, as the text summary (sweep.output.days_format)
        from placement.sweep.output import days_format

        return f"{number:{days_format(number)}}"
    return {"int": f"{number:,.0f}", "f1": f"{number:,.1f}", "f2": f"{number:,.2f}",
            "f3": f"{number:.3f}", "pct": f"{number:.1%}", "money": f"{number:,.0f}"}[fmt]


def _study_sections(meta: dict) -> list[dict]:
    """The document's metadata as titled sections: its scalars first (one table), then each dict (a table) and
    each list (bullets), in the document's own order."""
    scalars = [[str(k).replace("_", " "), _plain(v)] for k, v in meta.items() if not isinstance(v, (dict, list))]
    sections = [{"title": None, "rows": scalars, "bullets": None, "header": None}] if scalars else []
    for k, v in meta.items():
        if isinstance(v, dict):
            sections.append({"title": str(k).replace("_", " "), "bullets": None, "header": None,
                             "rows": [[str(kk).replace("_", " "), _plain(vv)] for kk, vv in v.items()]})
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):  # records: one table
            keys = list(dict.fromkeys(kk for x in v for kk in x))
            sections.append({"title": str(k).replace("_", " "), "bullets": None, "header": keys,
                             "rows": [[_plain(x.get(kk)) for kk in keys] for x in v]})
        elif isinstance(v, list) and v:  # an empty list (a study without overrides) is no section (a QA note)
            sections.append({"title": str(k).replace("_", " "), "rows": None, "header": None,
                             "bullets": [_plain(x) for x in v]})
    return sections


def _plain(v) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=False, separators=(", ", ": "))
    if v is None:
        return "-"
    if isinstance(v, float):  # a whole number in full, as the text writes a budget (12,000,000, not 1.2e+07)
        return f"{v:,.0f}" if v.is_integer() and abs(v) < 1e18 else f"{v:,.6g}"
    return str(v)


def sweep_html(rows: Sequence[dict], meta: dict) -> str:
    """The `sweep` page: the study and its assumptions, then per workload the table, the cost/time frontier with
    error bars and GPU counts, and the step breakdown of each design's plan.

    `rows`: the sweep's rows as `sweep.json` holds them.  Read, each where present ("-" where a row lacks it,
    the column left out where no row has it): design, workload, status, message, num_gpus_bought, num_gpus,
    num_gpus_idle, time_to_train_days (else time_to_train_s / 86400), time_to_train_days_low/_high,
    step_time_s, gpu_hours, cost, cost_low/_high, capex_total, capex_amortized, energy_mwh, energy_cost,
    facility_mw, idle_cost, outlay, cost_per_million_tokens, error_band_source (or error_band{"source"}),
    pareto, and plan (its mfu, layout and breakdown).
    `meta`: the study document's other fields, shown as they are (name, currency, date, version, budget,
    inputs, assumptions...); "name" titles the page and "currency" labels the money columns (default USD)."""
    from placement.sweep.output import BREAKDOWN_TERMS, RANKED_BY, _tight_memory, row_notes, step_terms, summary_order
    from placement.sweep.run import PARETO_TIE_REL

    currency = str(meta.get("currency") or "USD")
    name = meta.get("name") or meta.get("study") or "sweep"
    workloads = []
    for work in dict.fromkeys(r.get("workload", "-") for r in rows):
        # in the text summary's order, the study objective's (a QA run: the page kept sweep.json's order)
        mine = summary_order(r for r in rows if r.get("workload", "-") == work)
        priced = [r for r in mine if r.get("status") == "ok"]
        objective = priced[0].get("objective") if priced else None
        missed = " (a design that misses the deadline after those that meet it)" if any(
            r.get("deadline_met") is False for r in priced) else ""
        order = (f"Rows {RANKED_BY[objective]}{missed}, as the text summary lists them." if objective in RANKED_BY
                 else "Rows in order of the cost column, the lowest first, as the text summary lists rows without an "
                      "objective." if priced else None)
        columns = [c for c in SWEEP_COLUMNS if c[0] in ("design", "status")
                   or any(_value(r, c[0]) is not None for r in mine)]
        header = [h + (f" ({currency})" if fmt in ("money", "moneyrange") else "") for _, h, fmt in columns]
        table = [[_cell(_value(r, key), fmt, currency) for key, _, fmt in columns] for r in mine]
        classes = ["text prose" if key in ("error_band_source", "published_check") else "text short" if key == "status"
                   else "text" if fmt == "text" else "layout" if fmt == "layout" else None for key, _, fmt in columns]
        ok = [r for r in mine if r.get("status") == "ok" and _num(r.get("cost")) is not None
              and _days(r) is not None]
        # numbered by cost as the frontier.png's key is (sweep.output.write_plots)
        ranked = sorted(ok, key=lambda r: (float(r["cost"]), str(r.get("design"))))
        points = [{"key": k, "cost": float(r["cost"]), "days": _days(r), "pareto": bool(r.get("pareto")),
                   "cost_low": _num(r.get("cost_low")), "cost_high": _num(r.get("cost_high")),
                   "days_low": _days(r, "time_to_train_days_low"), "days_high": _days(r, "time_to_train_days_high")}
                  for k, r in enumerate(ranked, start=1)]
        key = [f"{r.get('design')}: {_cell(r.get('num_gpus'), 'int', currency)} GPUs, "
               f"{_cell(_days(r), 'days', currency)} days, {_cell(r['cost'], 'money', currency)} {currency}"
               + (" (frontier)" if r.get("pareto") else "") for r in ranked]
        planned = [r for r in ok if r.get("plan")]
        workloads.append({
            "name": work, "header": header, "rows": table, "classes": classes, "order": order,
            "frontier_svg": trusted_svg(charts.frontier_chart(str(work), points, currency)) if points else None,
            "frontier_key": key,
            "has_bars": any(p["days_low"] is not None or p["cost_low"] is not None for p in points),
            "breakdown_svg": trusted_svg(charts.stacked_step_chart(
                f"{work}: step time by term", [f"{r.get('design')} ({_cell(r.get('num_gpus'), 'int', currency)})"
                                               for r in planned],
                [step_terms(r["plan"]) for r in planned], BREAKDOWN_TERMS)) if planned else None,
            "failed": [f"{r.get('design')}: " + (f"no plan ({r['binding']}): " if r.get("binding") else "")
                       + f"{r.get('message') or r.get('status')}" for r in mine
                       if r.get("status") != "ok"],
            # what the text summary says under each priced row (a QA run: a missed deadline's message, why a tenth
            # of the GPUs bought sit idle and a plan within 0.1 GiB of its memory were said in the text alone)
            "notes": [f"{r.get('design')}: {text}" for r in mine if r.get("status") == "ok"
                      for text in ([_tight_memory(r.get("plan"))[2:]] if _tight_memory(r.get("plan")) else [])
                      + [line.strip() for line in row_notes(r)]],
        })
    shown = {h for w in workloads for h in w["header"]}
    # the rule the rows' `pareto` follows (sweep.run.mark_pareto): a QA trial read "no other design is both cheaper
    # and faster" beside two red points, one 0.5 % cheaper and faster than the other, a tie under PARETO_TIE_REL
    rule = (f"no other design is as cheap and as fast and ahead in one by more than {PARETO_TIE_REL:.0%}: a smaller "
            f"lead is a tie")
    glossary = [(h, text.replace("{rule}", rule)) for h, text in GLOSSARY.items()
                if h in shown or f"{h} ({currency})" in shown]
    return render("sweep.html", title=f"placement sweep: {name}", subtitle=f"{len(rows)} cells, money in {currency}",
                  study=_study_sections(meta), workloads=workloads, glossary=glossary, frontier_rule=rule)


