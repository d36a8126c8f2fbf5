"""Sweep results as files a buyer can use: CSV and JSON tables, a summary, and two plots."""

from __future__ import annotations

import csv
import json
import math
import textwrap
from pathlib import Path

from placement.calibration.published import above_ratio, published_line
from placement.outfiles import atomic_path, check_out_dir, write_atomic
from placement.sweep.price import score
from placement.sweep.spec import PURCHASE_ONLY_INPUTS, Objective, budget_rented

GPU_COUNT_KEYS = ("considered", "with_layout", "planned", "planned_ok", "largest_with_layout")
"""A row's `gpu_counts` (sweep.counts.choose), flat in the CSV as gpu_counts_<key>."""
COLUMNS = ("design", "workload", "num_gpus", "num_gpus_bought", "accelerator", "status", "step_time_s",
           "time_to_train_s", "gpu_hours", "price_per_gpu_hour", "cost", "pareto", "mfu", "layout", "message",
           # added by issue #14 (after the old columns, so a reader by position keeps working)
           "time_to_train_days", "time_to_train_days_low", "time_to_train_days_high", "num_gpus_idle", "idle_cost",
           "cost_low", "cost_high", "cost_per_million_tokens", "capex_total", "capex_amortized", "energy_mwh",
           "energy_cost", "facility_mw", "outlay", "objective", "deadline_met", "error_band_group",
           "error_band_num_rows", "idle_reason",
           # the rest of a JSON row but its plan (a user trial: README said "the same fields", which they were not)
           "cluster", "tokens_per_s", "deadline_days", "command", "fingerprint",
           *(f"gpu_counts_{k}" for k in GPU_COUNT_KEYS),
           # the plan's MFU over the best published run of its kind where above all of them, else empty
           "above_published_ratio",
           # the network the row was priced on (a design's overrides of its catalog cluster included)
           "leaf_oversubscription", "domains_per_leaf", "nic_bandwidth_bytes_per_s",
           # met at the predicted step but not at the error band's slow end
           "deadline_at_risk",
           # what bound a row without a plan (memory, divisibility, ...), as `plan --json` names it; empty otherwise
           "binding")
WIDTH = 100
"""The text summary's width in columns."""
SCHEMA = "placement.sweep/2"
BREAKDOWN_TERMS = (("compute", "compute"), ("tp", "TP/SP"), ("cp", "CP"), ("ep", "EP all-to-all"),
                   ("pp", "PP p2p"), ("dp", "DP/ZeRO exposed"), ("bubble", "pipeline bubble"),
                   ("other", "optimizer, overlap slowdown, host, slowest GPU"))


def _layout(plan: dict | None) -> str:
    """The plan's layout as `plan` prints it (report.layout_text)."""
    from placement.report import layout_text

    return layout_text(plan["layout"], plan.get("recipe") or {}) if plan else ""


def _tight_memory(plan: dict | None) -> str:
    """`, memory X of Y GiB: within Z GiB, an estimate, no headroom kept` where the plan fills its GPUs as `plan`'s
    own text warns (plan.TIGHT_MEMORY_SHARE), else "" (a user trial: a sweep's winning design was 0.27 GiB from its
    capacity, and the sweep said nothing)."""
    from placement.cost.constants import GiB
    from placement.plan import tight_spare

    if not plan:
        return ""
    cap, peak = plan["memory_capacity_bytes"], plan["peak_memory_bytes"]
    spare = tight_spare(cap, peak, plan.get("fits", True), plan.get("memory_headroom_bytes") or 0.0)
    if spare is None:
        return ""
    return (f", memory {peak / GiB:.1f} of {cap / GiB:.1f} GiB: within {spare / GiB:.1f} GiB, an estimate, no "
            f"headroom kept (workload memory_headroom_gib)")


STUDY_DEFAULTABLE = ("objective", "currency")
"""Study fields a sweep file may leave out whose default decides what the rows say: the objective picks each design's
GPU count, the currency labels every money figure; the summary's head marks each `(default)` and `study_defaults`
names them."""
WORKLOAD_DEFAULTABLE = ("precision", "memory_headroom_gib")
"""Workload fields a sweep file may leave out, whose default the summary and `workload_defaults` name."""


def _workload_line(w) -> str:
    """The job a workload prices, each value the file leaves out marked as the default (a user trial: the summary
    never said the precision, which was bf16 by default)."""
    said = w.model_fields_set

    def mark(name: str, text: str) -> str:
        return text if name in said else f"{text} (default)"

    headroom = mark("memory_headroom_gib", f"headroom {w.memory_headroom_gib:g} GiB")
    return (f"{w.model}, seq {w.seq_len:,}, batch {w.global_batch:,}, {w.tokens:.3g} tokens, "
            f"{mark('precision', w.precision.value)}, {headroom}")


def flat(row: dict) -> dict:
    out = {k: row.get(k) for k in COLUMNS}
    out["mfu"] = row["plan"]["mfu"] if row.get("plan") else None
    out["layout"] = _layout(row.get("plan"))
    band = row.get("error_band") or {}
    out["error_band_group"] = band.get("group")
    out["error_band_num_rows"] = band.get("num_rows")
    # the plan's MFU over the best published run of its kind, where it is above all of them (Plan.published_best)
    out["above_published_ratio"] = above_ratio((row.get("plan") or {}).get("published_best"))
    counts = row.get("gpu_counts") or {}
    for k in GPU_COUNT_KEYS:
        out[f"gpu_counts_{k}"] = counts.get(k)
    return out


ASSUMPTIONS = (
    "time_to_train = tokens / tokens_per_s of the chosen plan (the cost model's step, no restarts or failures)",
    "cost = capex_amortized + energy_cost for a capex design, gpu_hours x price_per_gpu_hour for a rental one; "
    "GPUs bought and idle are charged in full (capex, and energy at power_per_gpu_w)",
    "capex_amortized = capex_total x run hours / (amortization_years x 8760)",
    "energy_mwh = facility_mw x run hours; facility_mw = num_gpus_bought x power_per_gpu_w x pue",
    "outlay = capex_total + energy_cost (a rental design: cost); cost_per_million_tokens = cost / tokens x 1e6",
    "rental designs (price_per_gpu_hour) state no capex or power: capex_total, capex_amortized, energy_mwh, "
    "energy_cost and facility_mw are null",
    "error bands: predicted step / (1 + e) for the lowest and highest `placement validate` error e (0 included) of "
    "the nearest calibration group (dense or MoE, accelerator family); the GPU count stays as chosen",
)


DEFAULT_WORDS = {
    "energy_price_per_kwh": lambda d, currency: f"energy {d.energy_price_per_kwh:.2f} {currency}/kWh",
    "pue": lambda d, currency: f"PUE {d.pue:g}",
    "amortization_years": lambda d, currency: f"{d.amortization_years:g}-year amortization",
}
"""How the summary names each cost input a design may leave to its default (spec.CAPEX_COST_INPUTS)."""


def cost_input_sources(sweep, overrides: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """Per design, where each input of its price came from: "study file", "--set", or "default" (a DesignSpec
    default: an assumption with no source)."""
    from placement.sweep.overrides import design_fields_set

    out = {}
    for d in sweep.designs:
        given = design_fields_set(overrides, d.name)
        out[d.name] = {f: "default" if f in d.defaulted_cost_inputs else "--set" if f in given else "study file"
                       for f in d.cost_inputs}
    return out


NETWORK_FIELDS = (("oversubscription", "oversubscription"), ("nodes_per_leaf", "fanout"),
                  ("nic_bandwidth_bytes_per_s", None))
"""A design's network overrides and the catalog cluster's field each replaces (its leaf tier's, or the cluster's)."""


def network_sources(sweep, overrides: tuple[str, ...] = ()) -> dict[str, dict[str, dict]]:
    """Per design, each network input as priced and where it came from: "study file", "--set", or the catalog
    cluster's file (a user trial: `--set oversubscription=4` was said nowhere, and every row kept its 1:1 label);
    `nodes_per_leaf` also says what the leaf's fanout counts (`counts`: nodes, or a design's NVLink domains of
    several nodes, an NVL72 rack on GB200)."""
    from placement.catalog import load_cluster
    from placement.sweep.overrides import design_fields_set
    from placement.sweep.run import leaf_uplinks_unused, network_overrides_unused

    out = {}
    for d in sweep.designs:
        given = design_fields_set(overrides, d.name)
        base = load_cluster(d.cluster)
        leaf = base.tiers[0] if base.tiers else None
        out[d.name] = {}
        for field, tier_field in NETWORK_FIELDS:
            mine = getattr(d, field)
            catalog = base.nic_bandwidth_bytes_per_s if tier_field is None else (
                getattr(leaf, tier_field) if leaf is not None else None)
            # a `--set KEY=null` drops the file's override: the value is the cluster's, and so is its source
            out[d.name][field] = {"value": catalog if mine is None else mine,
                                  "source": f"cluster {d.cluster}'s file" if mine is None
                                  else "--set" if field in given else "study file"}
        unused = leaf_uplinks_unused(sweep, d)
        if unused is not None:  # the ratio is in the study, and prices nothing at its size
            out[d.name]["oversubscription"]["note"] = unused
        for field, note in network_overrides_unused(sweep, d).items():  # an override that prices nothing
            out[d.name][field]["note"] = note
        up = base.scale_up
        out[d.name]["nodes_per_leaf"]["counts"] = ("nodes" if up.size <= base.gpus_per_node else
                                                   f"{up.size}-GPU {up.name} domains ({up.size // base.gpus_per_node} "
                                                   f"nodes each)")
    return out


def _one(counts: str, n) -> str:
    """"nodes" or "N-GPU nvl domains (...)" in the singular for one of them ("1 node per leaf", a QA note)."""
    if n != 1:
        return counts
    return "node" if counts == "nodes" else counts.replace(" domains ", " domain ", 1)


def network_lines(network: dict[str, dict[str, dict]]) -> list[str]:
    """One summary line per design (of `network_sources`): `network of DESIGN: leaf 4:1 (--set), 32 nodes per leaf
    (cluster dgx-h100's file), NIC 50 GB/s per GPU (cluster dgx-h100's file)`, a catalog cluster's own network too
    (a user trial: a 1:1 vs 2:1 study's report named the 2:1 design's network and not the 1:1 one it is compared
    with)."""
    lines = []
    for name, fields in network.items():
        if not fields:
            continue
        over, leaf, nic = (fields[f] for f, _ in NETWORK_FIELDS)
        parts = [f"leaf {over['value']:g}:1 ({over['source']})",
                 f"{leaf['value']} {_one(leaf['counts'], leaf['value'])} per leaf ({leaf['source']})"
                 if leaf["value"] is not None else None,
                 f"NIC {nic['value'] / 1e9:g} GB/s per GPU ({nic['source']})"]
        notes = [f["note"] for f in (over, leaf, nic) if f.get("note")]
        lines.append(f"network of {name}: " + ", ".join(x for x in parts if x) + "".join(f"; {n}" for n in notes))
    return lines


def assumed_lines(sweep, currency: str) -> list[str]:
    """One line per set of defaulted cost inputs (one line when every design shares it): "assumed (defaults,
    no source): energy 0.10 USD/kWh, PUE 1.3, 4-year amortization"."""
    groups: dict[str, list[str]] = {}
    for d in sweep.designs:
        text = ", ".join(say(d, currency) for f, say in DEFAULT_WORDS.items() if f in d.defaulted_cost_inputs)
        if text:
            groups.setdefault(text, []).append(d.name)
    return [f"assumed{'' if len(names) == len(sweep.designs) else ' for ' + ', '.join(names)} (defaults, no "
            f"source): {text}" for text, names in groups.items()]


def resolved_inputs(sweep) -> dict:
    """The study as resolved (defaults filled, after --set), a sweep file of its own: a rented design without the
    purchase's amortization_years, energy_price_per_kwh and pue, which its price does not use (a QA trial: sweep.json
    gave a rented design PUE 1.3 and 0.10 USD/kWh it was never priced with, and the same inputs read back as a sweep
    file were refused for stating them beside a rental price)."""
    out = sweep.model_dump(mode="json")
    for design, spec in zip(out["designs"], sweep.designs, strict=True):
        if spec.price_per_gpu_hour is not None:
            for name in PURCHASE_ONLY_INPUTS:
                design.pop(name, None)
    return out


def study_document(sweep, result, overrides: tuple[str, ...] = (), date: str | None = None,
                   calibration: dict | None = None) -> dict:
    """The sweep's JSON document (sweep.json, `--json`, the HTML report's input): the study's resolved inputs,
    assumptions, package version, date (None when --reproducible) and the rows.  A function of the inputs and the
    date only: what came from the cache is said on stderr, not here, so a cached re-run writes the same bytes."""
    from placement import __version__

    return {
        "schema": SCHEMA,
        "name": sweep.name,
        "placement_version": __version__,
        "date": date,
        "inputs": resolved_inputs(sweep),
        "overrides": list(overrides),
        "objective": sweep.objective.value,
        "deadline_days": sweep.deadline_days,
        "budget": sweep.budget,
        # the rented designs the budget (capex) does not bind: [] without a budget or a rented design
        "budget_rented_designs": list(budget_rented(sweep)),
        "currency": sweep.currency,
        "assumptions": list(ASSUMPTIONS),
        "cost_input_sources": cost_input_sources(sweep, overrides),
        "network_sources": network_sources(sweep, overrides),
        "study_defaults": [f for f in STUDY_DEFAULTABLE if f not in sweep.model_fields_set],
        "workload_defaults": {w.name: sorted(f for f in WORKLOAD_DEFAULTABLE if f not in w.model_fields_set)
                              for w in sweep.workloads},
        "error_bands": error_bands(result.rows),
        "calibration": calibration,
        "rows": result.rows,
    }


def error_bands(rows: list[dict]) -> dict[str, dict]:
    """Each distinct band a row used, by its validate group; where rows of one group used different bands (a plan
    priced above the group's best published run widens its own: `published_anchor`), each under "GROUP: DESIGN /
    WORKLOAD, ..." of the rows that used it.  A user trial found one band per group, the last row's, so the page
    named a band most rows had not used."""
    used: dict[str, list[tuple[dict, list[str]]]] = {}
    for r in rows:
        band = r.get("error_band")
        if not band:
            continue
        kinds = used.setdefault(band["group"], [])
        same = next((k for k in kinds if k[0] == band), None)
        if same is None:
            kinds.append((band, [f"{r['design']} / {r['workload']}"]))
        else:
            same[1].append(f"{r['design']} / {r['workload']}")
    out = {}
    for group, kinds in used.items():
        for band, names in kinds:
            out[group if len(kinds) == 1 else f"{group}: {', '.join(names)}"] = band
    return dict(sorted(out.items()))


def page_meta(document: dict, calibration_line: str | None = None) -> dict:
    """The study document as the HTML page shows it: the scalar fields as they are, and each design, workload
    and error band as one line of words (their full JSON is in sweep.json)."""

    def fields(item: dict, skip: tuple[str, ...] = ("name",)) -> str:
        return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in item.items()
                         if k not in skip and v is not None)

    inputs = document.get("inputs") or {}
    meta = {k: document.get(k) for k in ("name", "placement_version", "date", "objective", "deadline_days", "budget",
                                         "currency")}
    # the study fields left to their default, as the text's head marks them (`currency` stays the money's label)
    meta["study defaults"] = [f"{f} {document.get(f)}" for f in document.get("study_defaults") or ()]
    if document.get("budget_rented_designs"):  # the budget is capex: said beside it as the text head says it
        meta["budget"] = f"{document['budget']:,.0f}{budget_scope(document['budget_rented_designs'])}"
    meta["calibration"] = calibration_line
    sources = document.get("cost_input_sources") or {}

    def defaulted(name: str) -> str:
        names = [f for f, where in (sources.get(name) or {}).items() if where == "default"]
        return f" (defaults, no source: {', '.join(names)})" if names else ""

    def design_fields(d: dict) -> str:
        # a rental's price is its hourly rate alone: the purchase inputs it cannot state (spec._check_rental) hold their
        # defaults in `inputs`, which the page listed as its prices (a QA trial: "price_per_gpu_hour 4.5,
        # amortization_years 4, energy_price_per_kwh 0.1, pue 1.3")
        rental = d.get("price_per_gpu_hour") is not None
        return fields(d, ("name", *PURCHASE_ONLY_INPUTS) if rental else ("name",))

    meta["designs"] = [f"{d['name']}: {design_fields(d)}{defaulted(d['name'])}" for d in inputs.get("designs", ())]
    meta["workloads"] = [f"{w['name']}: {fields(w)}" for w in inputs.get("workloads", ())]
    meta["overrides"] = list(document.get("overrides") or ())
    meta["networks"] = network_lines(document.get("network_sources") or {})
    meta["assumptions"] = list(document.get("assumptions") or ())
    meta["error bands"] = [
        f"{group}: {b['num_rows']} validate rows ({', '.join(b['accelerators'])}), error {b['error_low']:+.1%} to "
        f"{b['error_high']:+.1%}; {b['source']}" + (f"; {b['note']}" if b.get("note") else "")
        for group, b in (document.get("error_bands") or {}).items()]
    return meta


def step_terms(plan: dict) -> dict[str, float]:
    """Seconds per step of each term as it adds to the step (exposed communication only)."""
    b = plan["breakdown"]
    e = b["exposed"]
    # host launch time and gradient accumulation outside the GEMMs add to the step too (a user trial found the chart
    # 0.6 s short of the table's step on DeepSeek-V3, its host time)
    return {"compute": b["compute"], "tp": e["tp"], "cp": e["cp"], "ep": e["ep"], "pp": e["pp"], "dp": e["dp"],
            "bubble": b["bubble"], "other": b["optimizer"] + b.get("overlap_slowdown", 0.0) + b.get("host", 0.0)
            + b.get("grad_accumulation", 0.0) + b.get("variability", 0.0)}


def write_tables(out: Path, rows: list[dict], document: dict | None = None) -> list[Path]:
    """sweep.csv and sweep.json (`document`, or {"rows": rows})."""
    check_out_dir(out)
    csv_path, json_path = out / "sweep.csv", out / "sweep.json"
    with atomic_path(csv_path) as tmp, tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(flat(row))
    write_atomic(json_path, json.dumps(document if document is not None else {"rows": rows}, indent=1) + "\n")
    return [csv_path, json_path]


def plan_commands(out: Path, rows: list[dict], cells: list, calibration: tuple[str, str] | None) -> list[Path]:
    """Give each row with a plan the `placement plan` command that prices the same job (`command`): the design's
    cluster, as a catalog name, or, where the design changes it (oversubscription, leaf size, NIC bandwidth), a
    cluster file written to OUT/clusters/DESIGN-HASH.yaml, HASH of its content (named by its absolute path, as the
    profile is, so the command runs from any directory); `calibration`: (profile path, the accelerator it applies
    to).  Returns the cluster files written."""
    import hashlib
    import shlex

    import yaml

    from placement.catalog import load_cluster
    from placement.sweep.counts import sweep_segment
    from placement.sweep.run import design_hardware

    written, cluster_of = [], {}
    for cell in cells:
        design = cell.design
        if design.name in cluster_of:
            continue
        cluster, _ = design_hardware(design)
        if cluster == load_cluster(design.cluster):
            cluster_of[design.name] = design.cluster
            continue
        data = cluster.model_dump(mode="json") | {"name": f"{cluster.name} ({design.name})"}
        text = (f"# design {design.name!r} of the sweep: {design.cluster} with its network overrides\n"
                + yaml.safe_dump(data, sort_keys=False))
        # named by the design and its content: a later what-if (`--set`) into the same OUT writes its own file, and
        # an earlier row's command keeps pricing what that row did (a user trial: it silently priced the new one)
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in design.name)
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        path = out / "clusters" / f"{stem}-{digest}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
        # absolute, so the command runs from any directory (a path relative to where the sweep ran did not)
        cluster_of[design.name], written = str(path.resolve()), [*written, path]
    work = {(c.design.name, c.workload.name): c for c in cells}
    for row in rows:
        cell = work.get((row["design"], row["workload"]))
        if row.get("status") != "ok" or cell is None:
            row["command"] = None
            continue
        w = cell.workload
        args = ["placement", "plan", "--model", _anywhere(w.model, "model"), "--cluster",
                _anywhere(cluster_of[row["design"]], "cluster"), "--gpus",
                str(row["num_gpus"]), "--seq-len", str(w.seq_len), "--global-batch", str(w.global_batch),
                "--precision", w.precision.value]
        if w.memory_headroom_gib:
            args += ["--memory-headroom-gib", f"{w.memory_headroom_gib:g}"]
        segment = sweep_segment(cell.cluster, row["num_gpus"], cell.num_gpus_bought // cell.unit)
        if segment is not None:  # the segment whose runs fit the racks bought, not the cluster's default
            args += ["--segment", str(segment)]
        if calibration is not None and cell.accelerator.name == calibration[1]:
            args += ["--calibration", str(Path(calibration[0]).resolve())]
        row["command"] = shlex.join(args)
    return written


def _anywhere(ref: str, kind: str) -> str:
    """A row command's `--model` or `--cluster`: a file or folder the loader reads as a path, by its absolute path (as
    the sweep's own cluster files and a profile are), so the command runs from any directory; a catalog name as it is.
    A user trial: `model: m.yaml` beside a sweep run as `sweep st/s.yaml` gave `--model st/m.yaml`, which failed
    anywhere but the folder the sweep ran in."""
    from placement.catalog import _file_given, _is_dir, _is_file, catalog_root

    path = Path(ref)
    if path.is_absolute() or not path.exists():
        return ref
    if kind == "model":
        given = (path.suffix == ".json" or _file_given(ref, path)
                 or (_is_dir(path) and not _is_file(catalog_root() / "models" / f"{ref}.yaml")))
    else:
        given = _file_given(ref, path)
    return str(path.resolve()) if given else ref


def _money(x: float | None, digits: int | None = None) -> str:
    """`1.2M` or `603,621`; with `digits`, millions to that many significant figures (`0.604M`, `0.640M`: a plot's key
    and axis, where a user trial read 603,621 and 640,295 both as `0.6M`)."""
    if x is None:
        return "-"
    if digits is not None:
        whole = len(f"{abs(x) / 1e6:.0f}") if abs(x) >= 1e6 else 0
        return f"{x / 1e6:,.{max(digits - whole, 1)}f}M"
    return f"{x / 1e6:,.1f}M" if abs(x) >= 1e6 else f"{x:,.0f}"


def _quantity(x: float) -> str:
    """A power or an energy in the summary: whole units from 100, one decimal from 1, two significant figures below
    (a user trial read an 8-GPU design's 0.0187 MW as `0.0 MW`)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}" if abs(x) >= 1 else f"{x:.2g}"


def days_format(days: float) -> str:
    """The format of a number of days: one decimal, or two significant figures below 0.1 day (a QA trial: a 2e9-token
    what-if on 256 rented H100, a 15-minute run, printed `0.0 (0.0-0.1)` days beside its cost)."""
    if days >= 0.1 or days <= 0 or not math.isfinite(days):
        return ",.1f"
    return f",.{min(1 - math.floor(math.log10(days)), 8)}f"


def days_text(row: dict) -> str:
    """A row's days and their band as the summary prints them, `100.6 (97-130)`: whole days in the band from 20 days
    on, the band rounded outward (`_band`); the README's study table prints the same text (benchmarks/bench_sweep.py;
    a user trial found the README's `98.0-129.4` beside the summary's `97-130` and the JSON's 97.96-129.35); a run
    under 0.1 day to two significant figures (days_format)."""
    point = days_format(row["time_to_train_days"])
    return f"{row['time_to_train_days']:{point}} " + _band(row["time_to_train_days_low"],
                                                          row["time_to_train_days_high"], 1.0,
                                                          days_band_format(row["time_to_train_days"]))


def days_band_format(days: float) -> str:
    """The format of the band around `days` (days_text): whole days from 20 days on, else the point's own."""
    return ",.0f" if days >= 20 else days_format(days)


def _band(lo: float | None, hi: float | None, scale: float = 1.0, fmt: str = ".0f") -> str:
    """`(lo-hi)` at `fmt`'s decimals, the low end rounded down and the high end up, so that the printed band holds
    the value it brackets (a user trial: `159.5 (160-168)`, the low end rounded to whole days above the point)."""
    if lo is None or hi is None:
        return ""
    if math.isinf(hi):
        return f"({_down(lo / scale, fmt):{fmt}}-inf)"
    return f"({_down(lo / scale, fmt):{fmt}}-{_up(hi / scale, fmt):{fmt}})"


def _per_mtok(x: float) -> str:
    """Cost per million tokens with three significant figures below 1 (a user trial's cost_per_token study printed
    0.0260, 0.0271 and 0.0317 all as 0.03), two decimals up to 100, whole above."""
    return f"{x:.3g}" if x < 1 else f"{x:,.2f}" if x < 100 else f"{x:,.0f}"


def _decimals(fmt: str) -> int:
    return int(fmt.rsplit(".", 1)[1].rstrip("f")) if "." in fmt else 0


def _down(x: float, fmt: str) -> float:
    q = 10 ** _decimals(fmt)
    return math.floor(round(x * q, 6)) / q


def _up(x: float, fmt: str) -> float:
    q = 10 ** _decimals(fmt)
    return math.ceil(round(x * q, 6)) / q


def _wrap(text: str, indent: int = 6) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=" " * indent, subsequent_indent=" " * indent) or []


def row_notes(row: dict) -> list[str]:
    """What the summary says under a priced row's line, in its order: why GPUs are left idle (where a tenth or more
    are), the row's message (a missed deadline, one at risk), the error band's note, and the plan's check against
    published runs, as `plan` prints it (a user trial: a design ranked ahead on a plan 1.19x above every published
    run of its kind, said only in the JSON).  The HTML page lists the same lines under its table."""
    band = row.get("error_band") or {}
    published = published_line((row.get("plan") or {}).get("published_best")).splitlines()
    used, bought = row.get("num_gpus"), row.get("num_gpus_bought")
    idle = row.get("idle_reason") if used is not None and bought and used < 0.9 * bought else None
    return [text for text in (idle, row.get("message"), f"band: {band['note']}" if band.get("note") else None,
                              *published) if text]


def budget_scope(rented) -> str:
    """What the study head says beside a budget where some designs are rented (spec.budget_rented): the budget is
    capex, which binds the bought designs only (a QA trial: a 20 M budget printed over a study with a rented design
    read as bounding its bill too); "" where none is."""
    if not rented:
        return ""
    names = ", ".join(rented)
    return (f" (capex of the bought designs; it does not bound the rented {names}, "
            f"{'whose bill is' if len(rented) == 1 else 'whose bills are'} the rows' cost)")


RANKED_BY = {"time": "in order of the objective, the shortest time to train first",
             "cost": "in order of the objective, the lowest outlay first (capex of the GPUs bought + energy; "
                     "rental: the bill), not of the cost column, which amortizes the capex",
             "cost_per_token": "in order of the objective, the lowest cost per million tokens first"}
"""What the summary's head says the rows of each workload are ordered by, per objective (`_rank`)."""


def _rank(row: dict) -> float:
    """A priced row's place in the summary: the number its study objective minimizes (sweep.price.score), as the
    row states it; rows without an objective (an older sweep.json) by their cost."""
    objective = row.get("objective")
    try:
        value = score(Objective(objective), row) if objective else None
    except KeyError:  # a hand-written row without the objective's field (the page takes any sweep.json's rows)
        value = None
    return float(value) if value is not None else float(row.get("cost") or 0.0)


def summary_order(rows) -> list[dict]:
    """A workload's rows in the summary's order: the priced ones first, those that meet the study's deadline before
    those that miss it (the fastest count of a design no count of which meets it: a QA run listed a rented design
    that missed a 14-day deadline first under `objective: cost`, as the lowest outlay), each by the study objective
    (`_rank`), a tie by design name.  The text summary and the HTML page's table both list them so (a QA run: the
    page kept sweep.json's order, the text the objective's, so the two read the designs in different orders)."""
    return sorted(rows, key=lambda r: (r.get("status") != "ok", r.get("deadline_met") is False, _rank(r),
                                       str(r.get("design"))))


TABLE_MIN_DESIGN = 12
"""The fewest columns the summary table's design name is shortened to where wide numbers need the room."""


def _table(rows: list[dict], currency: str) -> list[str]:
    """A workload's table: a line per design, with the notes under each priced one.  Each column is as wide as its
    widest cell (a QA trial: a cost of 4,512.3M JPY with its band, 26 characters, pushed the per-Mtok and frontier
    columns right of their headers; a 3,353-day run did the same to the days), the design's name shortened to leave
    the line within WIDTH; where even a TABLE_MIN_DESIGN name leaves no room, the bands move to a line of their
    own under the row."""
    priced = [r for r in rows if r["status"] == "ok"]

    def bands(r: dict) -> tuple[str, str]:
        """(days band, cost band) as the summary prints them: `(97-130)`, `(30.0-41.0)` in millions or whole units."""
        text = days_text(r)
        days = text.split(" ", 1)[1] if " " in text else ""
        money = (_band(r["cost_low"], r["cost_high"], 1e6, ",.1f") if r["cost"] >= 1e6 else
                 _band(r["cost_low"], r["cost_high"], 1.0, ",.0f"))
        return days, money

    def cells(r: dict, inline: bool) -> list[str]:
        days, money = bands(r) if inline else ("", "")
        point = f"{r['time_to_train_days']:{days_format(r['time_to_train_days'])}}"
        return [f"{point} {days}".strip(), f"{_money(r['cost'])} {money}".strip(),
                _per_mtok(r["cost_per_million_tokens"]), "*" if r["pareto"] else ""]

    heads = ["GPUs used/bought", "days (band)", f"cost {currency} (band)", "per Mtok", "front"]
    least = [16, 16, 21, 8, 5]  # the widths the table has always had, where its cells fit them
    used = {id(r): f"{r['num_gpus']:,}/{r['num_gpus_bought']:,}" for r in rows}
    for inline in (True, False):
        table = {id(r): cells(r, inline) for r in priced}
        widths = [max([least[0], len(heads[0])] + [len(u) for u in used.values()])] + [
            max([least[k], len(heads[k])] + [len(c[k - 1]) for c in table.values()]) for k in range(1, 5)]
        room = WIDTH - 2 - sum(w + 1 for w in widths)
        if room >= TABLE_MIN_DESIGN:
            break
        heads[1:3] = ["days", f"cost {currency}"]
    name_width = min(26, room)
    lines = ["  " + " ".join([f"{'design':{name_width}}"] + [f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)])]
    for r in rows:
        name = textwrap.shorten(r["design"], name_width, placeholder="...")
        if r["status"] != "ok":
            lines.append(f"  {name:{name_width}} {used[id(r)]:>{widths[0]}}  no plan"
                         + (f" ({r['binding']})" if r.get("binding") else ""))
            lines += _wrap(r["message"][:600])
            continue
        lines.append("  " + " ".join([f"{name:{name_width}}", f"{used[id(r)]:>{widths[0]}}"]
                                     + [f"{c:>{w}}" for c, w in zip(table[id(r)], widths[1:], strict=True)]))
        days, money = bands(r)
        extra = [] if inline or not (days or money) else [
            f"error band: days {days or '-'}, cost {money or '-'} {'M ' if r['cost'] >= 1e6 and money else ''}"
            f"{currency}"]
        extra.append(_layout(r["plan"]) + _tight_memory(r["plan"]))
        if r.get("outlay") is not None and r.get("capex_total") is not None:
            # under objective cost the outlay is what is minimized, not the cost column (a user trial)
            lowest = (f"outlay {_money(r['outlay'])} (capex + energy, the objective), "
                      if r.get("objective") == "cost" else "")
            extra.append(f"{lowest}capex {_money(r['capex_total'])}, energy {_quantity(r['energy_mwh'])} MWh "
                         f"({_money(r['energy_cost'])}), {_quantity(r['facility_mw'])} MW")
        if r.get("idle_cost"):
            extra.append(f"idle {r['num_gpus_idle']:,} GPUs cost {_money(r['idle_cost'])}")
        lines += _wrap("; ".join(extra))
        for text in row_notes(r):
            lines += _wrap(text)
    return lines


def summary(rows: list[dict], currency: str, sweep=None, network: dict | None = None) -> str:
    """The readable summary, at most WIDTH (100) columns: per workload, each design's GPUs used of bought, days
    and cost with their error bands, cost per million tokens, the frontier, then its layout and any reason."""
    lines = []
    if sweep is not None:
        # the objective and currency the file leaves out are named as defaults (a QA trial: `objective time` read as
        # chosen, where the file had none, and a cost-minded buyer's rows had bought every GPU the budget affords)
        default = {f: " (default)" if f not in sweep.model_fields_set else "" for f in STUDY_DEFAULTABLE}
        head = [f"study {sweep.name}: objective {sweep.objective.value}{default['objective']}"
                + (f", deadline {sweep.deadline_days:g} days" if sweep.deadline_days else "")
                + (f", budget {sweep.budget:,.0f} {currency}" if sweep.budget else "")
                + budget_scope(budget_rented(sweep))
                + (f", money in {currency} (default)" if default["currency"] else "")]
        head.append("cost = amortized capex + energy over the run (rental: GPU-hours x price); idle GPUs bought are "
                    "charged; ranges: the validate error band of the nearest calibration group")
        head.append(f"rows: {RANKED_BY[sweep.objective.value]}"
                    + ("; a design that misses the deadline after those that meet it" if sweep.deadline_days else "")
                    + "; front: the frontier of days and the cost column")
        head += assumed_lines(sweep, currency)
        head += network_lines(network or {})
        lines += [ln for h in head for ln in _wrap(h, 0)] + [""]
    for work in dict.fromkeys(r["workload"] for r in rows):
        # in the order of the study objective, the number each design's GPU count minimizes (a QA trial: under
        # `objective: cost` the rows were in the order of the cost column, which amortizes the capex, so a design
        # with the lower outlay, the objective, was listed below one with a higher outlay)
        mine = summary_order(r for r in rows if r["workload"] == work)
        lines.append(textwrap.shorten(work, WIDTH, placeholder="..."))
        spec = next((w for w in sweep.workloads if w.name == work), None) if sweep is not None else None
        if spec is not None:
            lines += _wrap(_workload_line(spec), 2)
        lines += _table(mine, currency)
        lines.append("")
    return "\n".join(lines)


def write_plots(out: Path, rows: list[dict], currency: str, budget: float | None = None) -> list[Path]:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    works = list(dict.fromkeys(r["workload"] for r in rows))
    paths = []

    most = max((sum(1 for r in rows if r["workload"] == w and r["status"] == "ok") for w in works), default=0)
    fig, axes = plt.subplots(1, len(works), figsize=(6.5 * len(works), 5 + 0.2 * most), squeeze=False)
    for ax, work in zip(axes[0], works, strict=True):
        ok = sorted((r for r in rows if r["workload"] == work and r["status"] == "ok"),
                    key=lambda r: (r["cost"], r["design"]))
        for k, r in enumerate(ok, start=1):  # numbered points, the key below the plot: labels never overlap
            x, y = r["cost"], r["time_to_train_days"]
            color = "tab:red" if r["pareto"] else "tab:gray"
            if r.get("cost_low") is not None:  # the validate error band of the row's calibration group
                ax.errorbar(x, y, xerr=[[x - r["cost_low"]], [r["cost_high"] - x]],
                            yerr=[[y - r["time_to_train_days_low"]], [r["time_to_train_days_high"] - y]],
                            fmt="none", ecolor=color, alpha=0.5, capsize=3, zorder=2)
            ax.scatter(x, y, s=60 if r["pareto"] else 30, color=color, zorder=3)
            ax.annotate(str(k), (x, y), textcoords="offset points", xytext=(4 + 7 * (k % 2), 3 + 5 * (k % 3)),
                        fontsize=8, fontweight="bold")
        key = "\n".join(f"{k}  {r['design']}: {r['num_gpus']:,} of {r['num_gpus_bought']:,} GPUs, "
                        f"{r['time_to_train_days']:{days_format(r['time_to_train_days'])}} d, "
                        f"{_money(r['cost'], digits=3)}" for k, r in enumerate(ok, 1))
        ax.text(0.0, -0.16, key, transform=ax.transAxes, va="top", ha="left", fontsize=7.5, family="monospace")
        front = sorted((r for r in ok if r["pareto"]), key=lambda r: r["cost"])
        if front:
            ax.step([r["cost"] for r in front], [r["time_to_train_s"] / 86400 for r in front], where="post",
                    color="tab:red", label="Pareto frontier (red points)")
            ax.legend(loc="best", fontsize=8)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: _money(x, digits=3)))
        ax.margins(x=0.25, y=0.15)
        # a budget is capex: beside a rented design's point it says it bounds the bought ones only (budget_scope)
        rented = any(r["capex_total"] is None for r in ok)
        ax.set_title(work + (f"\nbudget {budget:,.0f} {currency}" + (" (bought designs)" if rented else "")
                             if budget else ""), fontsize=10)
        ax.set_xlabel(f"cost to train ({currency}; bars: validate error band)")
        ax.set_ylabel("time to train (days)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / "frontier.png")
    with atomic_path(paths[-1]) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)

    fig, axes = plt.subplots(len(works), 1, squeeze=False,
                             figsize=(10, (1.6 + 0.45 * len({r["design"] for r in rows})) * len(works)))
    colors = plt.get_cmap("tab10").colors
    for ax, work in zip(axes[:, 0], works, strict=True):
        # top to bottom in the summary's order, as the HTML page's chart (a QA run: file order, bottom up)
        ok = [r for r in summary_order(rows) if r["workload"] == work and r["status"] == "ok"]
        for y, r in enumerate(ok):
            left = 0.0
            for k, (term, label) in enumerate(BREAKDOWN_TERMS):
                width = step_terms(r["plan"])[term]
                ax.barh(y, width, left=left, color=colors[k % len(colors)], label=label if y == 0 else None)
                left += width
        ax.set_yticks(range(len(ok)), [f"{r['design']}\n{r['num_gpus']:,} GPUs" for r in ok], fontsize=8)
        ax.set_xlabel("seconds per step")
        ax.invert_yaxis()
        ax.set_title(f"{work}: step time by term")
        if ok:
            ax.legend(fontsize=7, ncol=8, loc="upper center", bbox_to_anchor=(0.5, -0.28), frameon=False)
    fig.tight_layout()
    paths.append(out / "breakdown.png")
    with atomic_path(paths[-1]) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return paths
