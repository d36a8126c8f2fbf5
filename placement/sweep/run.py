"""Run a sweep: every design x workload, its GPU count chosen by the study objective, in parallel.

Plans are cached by what they depend on only: one cache entry per cell holds the cell's count bounds and
the plans of the counts it planned, under a fingerprint of the hardware (node design, accelerator, network
overrides, calibration), the model, the workload's shape (sequence, global batch, precision), the
candidate GPU counts and the code.  Prices, the energy price, PUE, amortization, the tokens to train, the
objective and the deadline are not in it: they are applied to the cached plans afterwards (`cell_row`), so
a re-priced study plans nothing unless the new prices make a count worth checking that was not planned
(under the time and cost_per_token objectives they never do; README "What-ifs").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from placement import __version__
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.errors import InputError
from placement.loaders.files import read_bytes
from placement.outfiles import check_out_dir, checked_dump, checked_load, write_atomic
from placement.search import SWEEP_FIX_NAMES
from placement.specs import AcceleratorSpec, ClusterSpec, ModelSpec, TrainingSpec
from placement.sweep.band import band as error_band
from placement.sweep.band import data_digest, validate_errors
from placement.sweep.counts import (
    Choice,
    NeedPlan,
    candidate_counts,
    choose,
    count_bounds,
    plan_count,
    sweep_segment,
    units_for,
)
from placement.sweep.price import price
from placement.sweep.spec import HOURS_PER_YEAR, DesignSpec, Objective, SweepSpec, WorkloadSpec

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Cell:
    design: DesignSpec
    workload: WorkloadSpec
    counts: tuple[int, ...]
    """GPU counts the job may use, ascending (whole nodes, up to what the design buys)."""
    cluster: ClusterSpec
    accelerator: AcceleratorSpec
    num_gpus_bought: int
    """The most GPUs the design buys (its `gpus`, or every whole unit the budget affords)."""
    unit: int
    """GPUs per purchase unit (scale-up domain)."""
    model: ModelSpec

    @property
    def train(self) -> TrainingSpec:
        return self.workload.train()

    @property
    def fingerprint(self) -> str:
        """What the cell's plans depend on, and nothing else (no name, price, token count or objective)."""
        payload = {
            "version": __version__,
            # a changed cost model, or changed calibration runs (each plan's published_best is read from them),
            # invalidates cached cells
            "code": data_digest(),
            "counts": list(self.counts),
            "num_gpus_bought": self.num_gpus_bought,  # what the segments must fit in (counts.sweep_segment)
            "train": self.train.model_dump(mode="json"),
            "cluster": self.cluster.model_dump(mode="json"),
            "accelerator": self.accelerator.model_dump(mode="json"),
            "model": self.model.model_dump(mode="json"),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]

    def payload(self, objective: Objective, deadline_days: float | None, known: dict | None) -> dict:
        """What a worker needs, as plain JSON (process pools and Ray ship it); `known`: the cached entry."""
        return {"design": self.design.model_dump(mode="json"), "workload": self.workload.model_dump(mode="json"),
                "counts": list(self.counts), "num_gpus_bought": self.num_gpus_bought, "unit": self.unit,
                "cluster": self.cluster.model_dump(mode="json"),
                "accelerator": self.accelerator.model_dump(mode="json"),
                "model": self.model.model_dump(mode="json"), "objective": objective.value,
                "deadline_days": deadline_days, "known": known}


def design_hardware(design: DesignSpec) -> tuple[ClusterSpec, AcceleratorSpec]:
    """The catalog node design with the design's network overrides applied."""
    cluster = load_cluster(design.cluster, f"the `cluster` of design {design.name!r}")
    tiers = list(cluster.tiers)
    if design.nodes_per_leaf is not None or design.oversubscription is not None:
        leaf = tiers[0].model_copy(update={
            k: v for k, v in (("fanout", design.nodes_per_leaf), ("oversubscription", design.oversubscription))
            if v is not None})
        tiers[0] = leaf
    update: dict = {"tiers": tuple(tiers)}
    if design.nic_bandwidth_bytes_per_s is not None:
        update["nic_bandwidth_bytes_per_s"] = design.nic_bandwidth_bytes_per_s
    cluster = ClusterSpec.model_validate({**cluster.model_dump(), **update, "tiers": [t.model_dump() for t in tiers]})
    return cluster, load_accelerator(cluster.accelerator)


def cells(sweep: SweepSpec, calibration: dict[str, float] | None = None, accelerator: str | None = None
          ) -> list[Cell]:
    """The study's cells; `calibration` (a profile's fitted constants) applies to the designs on `accelerator`."""
    # an unknown model fails before any work, named as the sweep file's field
    models = {w.model: load_model(w.model, f"the `model` of workload {w.name!r}") for w in sweep.workloads}
    out = []
    for design in sweep.designs:
        cluster, acc = design_hardware(design)
        if calibration and acc.name == accelerator:
            from placement.calibration.profile import calibrated_specs

            cluster, acc = calibrated_specs(cluster, acc, calibration)
        for k, w in enumerate(sweep.workloads):  # named as the study's fields (a user trial was told `--precision`)
            if w.precision.value == "fp8" and acc.peak_flops_fp8 is None:
                raise InputError(f"workloads[{k}] {w.name!r} has `precision: fp8`, but design {design.name!r} runs "
                                 f"{acc.name}, which has no FP8 tensor cores (peak_flops_fp8 unset): set the "
                                 f"workload's precision to bf16, or leave the design out")
        counts, unit, most = candidate_counts(sweep, design, cluster)
        out.extend(Cell(design, w, counts, cluster, acc, most, unit, models[w.model]) for w in sweep.workloads)
    return out


def evaluate_cell(payload: dict) -> dict:
    """A cell's work (top-level so process pools and Ray can call it): the count bounds, unless known, and the
    plans the objective's choice needs that the cache does not hold.  Returns the cache entry
    {counts, bounds, plans} and `num_planned`."""
    design = DesignSpec.model_validate(payload["design"])
    work = WorkloadSpec.model_validate(payload["workload"])
    cluster = ClusterSpec.model_validate(payload["cluster"])
    acc = AcceleratorSpec.model_validate(payload["accelerator"])
    counts = tuple(payload["counts"])
    train = work.train()
    model = ModelSpec.model_validate(payload["model"])
    known = payload["known"] or {}
    units = payload["num_gpus_bought"] // payload["unit"]
    bounds = (_bounds_of(known) if known.get("bounds") is not None
              else count_bounds(model, train, cluster, acc, counts, units))
    plans = {int(k): v for k, v in (known.get("plans") or {}).items()}
    fresh = []


    def plan_of(n: int) -> dict:
        if n not in plans:
            plans[n] = plan_count(model, train, cluster, acc, n, sweep_segment(cluster, n, units))
            fresh.append(n)
        return plans[n]

    choose(design, work, train, Objective(payload["objective"]), payload["deadline_days"], counts, payload["unit"],
           payload["num_gpus_bought"], bounds, plan_of, lambda n: units_for(cluster, n, units))
    return {**_entry(counts, bounds, plans), "num_planned": len(fresh),
            "bounded": known.get("bounds") is None}


def _entry(counts: tuple[int, ...], bounds: dict[int, float | None], plans: dict[int, dict]) -> dict:
    return {"counts": list(counts), "bounds": {str(n): bounds[n] for n in counts},
            "plans": {str(n): plans[n] for n in sorted(plans)}}


def _bounds_of(entry: dict) -> dict[int, float | None]:
    return {int(k): v for k, v in entry["bounds"].items()}


def _number(value, positive: bool = False) -> bool:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value >= 0
    return ok and (value > 0 or not positive)


def _cached_entry(path: Path, cell: Cell) -> dict | None:
    """A cache entry for `cell`, or None when it cannot be used: unreadable, past the read limit, a bad checksum,
    of the wrong shape (a missing key, a wrong type, a non-finite number), or another cell's counts."""
    try:
        entry = checked_load(read_bytes(path, "sweep cache entry", "").decode("utf-8", errors="replace"))
    except (OSError, InputError):
        return None
    if not isinstance(entry, dict) or set(entry) != {"counts", "bounds", "plans"}:
        return None
    if entry["counts"] != list(cell.counts) or not isinstance(entry["bounds"], dict) \
            or not isinstance(entry["plans"], dict):
        return None
    if set(entry["bounds"]) != {str(n) for n in cell.counts} \
            or not all(v is None or _number(v) for v in entry["bounds"].values()):
        return None
    for key, plan in entry["plans"].items():
        if key not in entry["bounds"] or not isinstance(plan, dict) \
                or set(plan) != {"status", "binding", "message", "plan"} \
                or not isinstance(plan["message"], str) or not isinstance(plan["binding"], str):
            return None
        if plan["status"] == "infeasible":
            if plan["plan"] is not None:
                return None
        elif plan["status"] != "ok" or not isinstance(plan["plan"], dict) \
                or plan["plan"].get("num_gpus") != int(key) \
                or not all(_number(plan["plan"].get(k), positive=True) for k in ("tokens_per_s", "step_time_s")):
            return None
        bound = entry["bounds"][key]  # a planned count has a layout, and its bound is below its step
        if bound is None or (plan["status"] == "ok" and bound > plan["plan"]["step_time_s"] * (1 + 1e-5)):
            return None
    return entry


PARETO_TIE_REL = 0.01
"""Time to train or cost within 1 % of another row's counts as equal on the frontier: a lead smaller than that is
below what the summary prints (days to 0.1 of a 10-day run) and than any run's step-to-step variation, not a reason
to buy (a user trial: a design 36 % dearer was starred for arriving 6.5 minutes sooner in 20 days)."""


def mark_pareto(rows: list[dict]) -> None:
    """Per workload: a row is on the frontier when no other row is as costly or less and as slow or less, within
    PARETO_TIE_REL, and better than that in one of the two."""
    def no_worse(a: float, b: float) -> bool:
        return a <= b * (1 + PARETO_TIE_REL)

    def better(a: float, b: float) -> bool:
        return a < b * (1 - PARETO_TIE_REL)

    for row in rows:
        row["pareto"] = False
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok:
        rivals = [o for o in ok if o is not r and o["workload"] == r["workload"]]
        r["pareto"] = not any(
            no_worse(o["cost"], r["cost"]) and no_worse(o["time_to_train_s"], r["time_to_train_s"])
            and (better(o["cost"], r["cost"]) or better(o["time_to_train_s"], r["time_to_train_s"])) for o in rivals)


RESULT_KEYS = ("step_time_s", "tokens_per_s", "mfu", "time_to_train_s", "time_to_train_days",
               "time_to_train_days_low", "time_to_train_days_high", "gpu_hours", "cost", "cost_low", "cost_high",
               "cost_per_million_tokens", "capex_total", "capex_amortized", "energy_mwh", "energy_cost",
               "facility_mw", "outlay", "num_gpus_idle", "idle_cost")
"""A row's results: numbers for a row with a plan (the rental nulls aside), None for one without."""


def network_of(cluster: ClusterSpec) -> dict:
    """The network a row was priced on, as its design's overrides left the catalog's (a user trial: rows priced on a
    4:1 leaf with `--set oversubscription=4` named only the catalog cluster, 1:1 in the CSV's eyes): the leaf's
    oversubscription, its fanout in scale-up domains (nodes, or NVL72 racks: the design's `nodes_per_leaf`) and the
    NIC rate per GPU."""
    leaf = cluster.tiers[0] if cluster.tiers else None
    return {"leaf_oversubscription": None if leaf is None else leaf.oversubscription,
            "domains_per_leaf": None if leaf is None else leaf.fanout,
            "nic_bandwidth_bytes_per_s": cluster.nic_bandwidth_bytes_per_s}


def leaf_uplinks_unused(sweep: SweepSpec, design: DesignSpec) -> str | None:
    """Where a design's leaf is oversubscribed but every GPU count it can run sits under one leaf (the Topology's
    levels stop at the leaf: no traffic of the job crosses its uplinks), why its ratio prices nothing; else None.  A
    QA trial: a 256-H100 design (32 nodes, 32 to a leaf) at 2:1 was priced to the digit as the same design at 1:1,
    and its `network of` line said `leaf 2:1` with no word that the ratio changed nothing in this study."""
    from placement.topology import Topology

    cluster, acc = design_hardware(design)
    leaf = cluster.tiers[0] if cluster.tiers else None
    if leaf is None or leaf.oversubscription <= 1.0:
        return None
    counts, unit, most = candidate_counts(sweep, design, cluster)
    if leaf.fanout is None or most > leaf.fanout * max(unit, cluster.scale_up.size):
        return None  # more GPUs than a leaf holds: some count crosses it
    units = most // unit
    if any(len(Topology(cluster, acc, num_gpus=n, segment_nodes=sweep_segment(cluster, n, units)).levels) > 2
           for n in counts):
        return None
    domains = "nodes" if unit <= cluster.gpus_per_node else f"{unit}-GPU domains"
    return (f"every count of the design's {most:,} GPUs runs under one leaf ({leaf.fanout} {domains}): no traffic "
            f"crosses its uplinks, so its {leaf.oversubscription:g}:1 prices as 1:1 does")


def network_overrides_unused(sweep: SweepSpec, design: DesignSpec) -> dict[str, str]:
    """For the design's `nodes_per_leaf` and `nic_bandwidth_bytes_per_s`: where every GPU count the design can run is
    priced on the same network with the override as without it (the Topology's levels equal), why it prices nothing,
    by field.  A QA note: an 8-GPU design's `nic_bandwidth_bytes_per_s: 12.5e9` printed 'NIC 12.5 GB/s per GPU
    (study file)' and was priced to the digit as the catalog's 50 GB/s, its one node sending nothing over a NIC; a
    64-GPU design's `nodes_per_leaf: 8` likewise, its 8 nodes under one leaf of either size.  (The leaf's
    `oversubscription`: leaf_uplinks_unused.)"""
    from placement.topology import Topology

    cluster, acc = design_hardware(design)
    counts, unit, most = candidate_counts(sweep, design, cluster)
    units = most // unit

    def levels(c: ClusterSpec, n: int) -> tuple | None:
        try:
            return Topology(c, acc, num_gpus=n, segment_nodes=sweep_segment(c, n, units)).levels
        except InputError:  # the tiers cover fewer GPUs: a network of its own, not the same one
            return None

    out = {}
    for field in ("nodes_per_leaf", "nic_bandwidth_bytes_per_s"):
        mine = getattr(design, field)
        if mine is None:
            continue
        base, _ = design_hardware(design.model_copy(update={field: None}))
        theirs = base.nic_bandwidth_bytes_per_s if field == "nic_bandwidth_bytes_per_s" else (
            base.tiers[0].fanout if base.tiers else None)
        if mine == theirs:  # the file's own value: nothing to say
            continue
        with_it = [levels(cluster, n) for n in counts]
        if any(x is None or x != levels(base, n) for x, n in zip(with_it, counts, strict=True)):
            continue
        gpus = f"every count of the design's {most:,} GPUs"
        if field == "nic_bandwidth_bytes_per_s":
            out[field] = (f"{gpus} runs inside one {cluster.scale_up.name} domain: no traffic crosses a NIC, so "
                          f"its {mine / 1e9:g} GB/s prices as cluster {design.cluster}'s {theirs / 1e9:g} does")
        elif all(len(x) <= 2 for x in with_it):
            out[field] = (f"{gpus} runs under one leaf of either size: its {mine} per leaf prices as cluster "
                          f"{design.cluster}'s {theirs} does")
        else:
            out[field] = (f"{gpus} prices on the same network with its {mine} per leaf as with cluster "
                          f"{design.cluster}'s {theirs}")
    return out


SUGGESTED_GPUS = re.compile(re.escape(SWEEP_FIX_NAMES.gpus).replace(re.escape("{}"), r"(\d+)"))
"""A GPU count an infeasible cell's message suggests (search.SWEEP_FIX_NAMES: "`gpus: 16` in the design")."""


def over_budget_note(message: str, design: DesignSpec, sweep: SweepSpec) -> str:
    """What a suggested GPU count would cost where the study's budget buys the design's GPUs and the count costs more
    than it: the message's fix is then a larger purchase, not a setting (a QA note: a 600,000 USD study was told to
    try `gpus: 16` of a 40,000 USD GPU, 640,000 USD); "" otherwise."""
    found = SUGGESTED_GPUS.search(message)
    if found is None or design.gpus is not None or sweep.budget is None or design.capex_per_gpu is None:
        return ""
    gpus = int(found.group(1))
    cost = gpus * design.capex_per_gpu
    if cost <= sweep.budget:
        return ""
    currency = sweep.currency
    return (f" ({gpus:,} GPUs at the design's capex_per_gpu {design.capex_per_gpu:,.0f} {currency} cost "
            f"{cost:,.0f} {currency}, over the study's budget of {sweep.budget:,.0f} {currency}: `gpus: {gpus}` buys "
            f"them regardless of the budget, or a budget of {cost:,.0f} {currency} buys them)")


def outlasts_amortization(design: DesignSpec, fields: dict, currency: str) -> str:
    """What a bought design's row says when its run outlasts the capex's amortization: the cost then charges more
    than the capex (capex_amortized = capex_total x run hours / (amortization_years x 8760)), above the outlay that
    buys the machine once, for a run the machine is not priced to last (a QA trial: `objective: cost` with no deadline
    chose 8 B200 for 3,353 days on a 5-year amortization, a cost of 1.84x the capex, and no row said so); "" otherwise
    and for a rental."""
    if fields.get("capex_total") is None:
        return ""
    years = fields["time_to_train_s"] / (HOURS_PER_YEAR * 3600.0)
    if years <= design.amortization_years:
        return ""
    times = years / design.amortization_years
    return (f"the run's {fields['time_to_train_days']:,.0f} days ({years:.1f} years) outlast the design's "
            f"{design.amortization_years:g}-year amortization: its cost charges {times:.2f}x the capex "
            f"(capex_amortized {fields['capex_amortized']:,.0f} {currency} against capex_total "
            f"{fields['capex_total']:,.0f}), more than "
            f"the outlay that buys the machine once; deadline_days, or more GPUs, keeps the run within it")


def cell_row(cell: Cell, sweep: SweepSpec, entry: dict, errors: tuple[str, tuple[dict, ...]] | None) -> dict:
    """A cell's row from its cache entry: the count the objective chooses, priced, with its error band.
    Raises NeedPlan when the choice needs a plan the entry does not hold."""
    plans = entry["plans"]

    def plan_of(n: int) -> dict:
        if str(n) not in plans:
            raise NeedPlan(n)
        return plans[str(n)]

    design, work = cell.design, cell.workload
    units = cell.num_gpus_bought // cell.unit
    choice: Choice = choose(design, work, cell.train, sweep.objective, sweep.deadline_days, cell.counts,
                            cell.unit, cell.num_gpus_bought, _bounds_of(entry), plan_of,
                            lambda n: units_for(cell.cluster, n, units))
    row = {"design": design.name, "workload": work.name, "accelerator": cell.accelerator.name,
           "cluster": cell.cluster.name, "objective": sweep.objective.value, "num_gpus": choice.num_gpus,
           "num_gpus_bought": choice.num_gpus_bought, "price_per_gpu_hour": design.gpu_hour_price,
           "deadline_days": sweep.deadline_days, "deadline_met": choice.deadline_met, "gpu_counts": choice.counts,
           **network_of(cell.cluster)}
    if choice.entry["status"] != "ok":
        # the constraint that bound, as `plan --json`'s `infeasible.binding` names it (memory, divisibility, ...)
        return {**row, **dict.fromkeys(RESULT_KEYS), "deadline_at_risk": None, "status": "infeasible",
                "binding": choice.entry.get("binding") or None,
                "message": choice.entry["message"] + over_budget_note(choice.entry["message"], design, sweep),
                "idle_reason": None, "error_band": None, "plan": None}
    plan = choice.entry["plan"]
    fields = price(design, work, choice.num_gpus_bought, choice.num_gpus, plan["tokens_per_s"])
    band = error_band(errors[1], cell.model.moe is not None, cell.accelerator.name, errors[0],
                      cell.train.precision.value) if errors else None
    band = unbounded_band(anchored_band(band, plan.get("published_best")), plan.get("unpublished_kind"))
    low = high = {"time_to_train_days": None, "cost": None}
    if band is not None:  # true step = predicted / (1 + error): the group's best and worst rows
        low = price(design, work, choice.num_gpus_bought, choice.num_gpus,
                    plan["tokens_per_s"] * (1 + band["error_high"]))
        high = price(design, work, choice.num_gpus_bought, choice.num_gpus,
                     plan["tokens_per_s"] * (1 + band["error_low"])) if band["error_low"] > -1 else \
            {"time_to_train_days": math.inf, "cost": math.inf}
    message = ""
    if choice.deadline_met is False:
        message = (f"no GPU count trains within the {sweep.deadline_days:g}-day deadline; the fastest "
                   f"({choice.num_gpus:,} GPUs) is shown")
    # met at the predicted step, but not at the slow end of the error band (a user trial: 9.7 (9.4-11.7) days against
    # a 10-day deadline read "deadline met" with no word of the risk)
    slow = high["time_to_train_days"]
    at_risk = (None if choice.deadline_met is None or slow is None
               else bool(choice.deadline_met and slow > sweep.deadline_days))
    if at_risk:
        message = (f"meets the {sweep.deadline_days:g}-day deadline at the predicted "
                   f"{fields['time_to_train_days']:.1f} days, but not at the slow end of the error band ({slow:.1f} "
                   f"days)")
    row["deadline_at_risk"] = at_risk
    message = "; ".join(x for x in (message, outlasts_amortization(design, fields, sweep.currency)) if x)
    return {**row, "status": "ok", "binding": None, "message": message, "step_time_s": plan["step_time_s"],
            "tokens_per_s": plan["tokens_per_s"], "mfu": plan.get("mfu"), **fields,
            "time_to_train_days_low": low["time_to_train_days"], "time_to_train_days_high": high["time_to_train_days"],
            "cost_low": low["cost"], "cost_high": high["cost"], "idle_reason": choice.idle_reason,
            "error_band": band, "plan": plan}


@dataclass(frozen=True)
class SweepResult:
    rows: list[dict]
    computed: int
    """Cells that needed a worker (count bounds or a plan not in the cache)."""
    cached: int
    """Cells answered from the cache alone."""
    bad_cache: tuple[str, ...] = ()
    """Cache entries that were unreadable (truncated, edited, reshaped): recomputed, and named."""
    unwritable_cache: tuple[str, ...] = ()
    """Cache entries that could not be written (a directory in the way, a full disk): computed, not kept."""
    plans_computed: int = 0
    """Plans (one GPU count of one cell) computed by this run."""
    plans_cached: int = 0
    """Plans the rows read from the cache."""
    validate_cached: bool | None = None
    """Whether the error bands' validate errors came from the cache (None: no band was needed)."""


def run_sweep(sweep: SweepSpec, cache_dir: Path | None, executor: str = "local", workers: int | None = None,
              progress: Callable[[int], None] | None = None,
              evaluate: Callable[[dict], dict] = evaluate_cell, todo: list[Cell] | None = None,
              bands: bool = True) -> SweepResult:
    """Answer every cell, from the cache where it holds what the choice needs, else by a worker; rows come back
    in sweep order.  `evaluate` does one cell's work (tests pass one whose worker dies).  Raises CellsLost after
    the other cells finish when workers die.  `bands`: attach validate's error bands."""
    todo = cells(sweep) if todo is None else todo
    prints = [c.fingerprint for c in todo]
    entries: dict[str, dict] = {}
    bad: list[str] = []
    unwritable: list[str] = []
    if cache_dir is not None:
        check_out_dir(cache_dir, flag="the sweep cache")
        for fp, cell in zip(prints, todo, strict=True):
            path = cache_dir / f"{fp}.json"
            if fp not in entries and path.exists():
                entry = _cached_entry(path, cell)
                if entry is not None:
                    entries[fp] = entry
                elif path.name not in bad:  # a cache must never break a study: recompute the cell
                    bad.append(path.name)
    errors = None
    validate_cached = None
    if bands:
        digest, rows, validate_cached = validate_errors(None if cache_dir is None else cache_dir / "validate")
        errors = (digest, rows)
    rows: dict[int, dict] = {}
    missing: list[int] = []
    for i, (fp, cell) in enumerate(zip(prints, todo, strict=True)):
        if fp in entries:
            try:
                rows[i] = cell_row(cell, sweep, entries[fp], errors)
                continue
            except NeedPlan:
                pass
        missing.append(i)
    cached = len(rows)
    planned = 0

    def finished(k: int, work: dict) -> None:
        """A cell's work is done: merge it into its entry, cached at once (atomically), so a sweep stopped later
        keeps it."""
        nonlocal planned
        i = missing[k]
        fp = prints[i]
        planned += work.pop("num_planned")
        work.pop("bounded")
        old = entries.get(fp)
        if old is not None:  # another cell of the same fingerprint (other prices) planned other counts
            work["plans"] = {**old["plans"], **work["plans"]}
            work["plans"] = {k: work["plans"][k] for k in sorted(work["plans"], key=int)}
        entries[fp] = json.loads(json.dumps(work, sort_keys=True))  # what the cache holds, keys in its order
        if cache_dir is not None:
            try:
                write_atomic(cache_dir / f"{fp}.json", checked_dump(entries[fp]))
            except OSError as err:  # a cache must never break a study: the cell is computed, only not kept
                unwritable.append(f"{fp}.json ({err.strerror or err})")
        if progress:
            progress(1)

    _execute([todo[i].payload(sweep.objective, sweep.deadline_days, entries.get(prints[i])) for i in missing],
             executor, workers, finished, evaluate)
    for i in missing:
        rows[i] = cell_row(todo[i], sweep, entries[prints[i]], errors)
    out = [dict(rows[i], fingerprint=fp) for i, fp in enumerate(prints)]
    mark_pareto(out)
    used = sum(r["gpu_counts"]["planned"] for r in out)
    return SweepResult(rows=out, computed=len(missing), cached=cached, bad_cache=tuple(bad),
                       unwritable_cache=tuple(unwritable), plans_computed=planned,
                       plans_cached=max(used - planned, 0), validate_cached=validate_cached)


class CellsLost(Exception):
    """Workers died during a sweep: the cells they held are not computed; every finished cell is cached."""

    def __init__(self, lost: int, total: int, cause: str) -> None:
        super().__init__(f"{lost} of {total} cells were lost when a worker died ({cause})")
        self.lost, self.total, self.cause = lost, total, cause


def _execute(payloads: list[dict], executor: str, workers: int | None, finished: Callable[[int, dict], None],
             evaluate: Callable[[dict], dict] = evaluate_cell) -> None:
    """Evaluate every payload; `finished(i, row)` as each one completes (in completion order).  A worker that
    dies loses only the cells it held: the others still finish, then CellsLost names how many were lost."""
    if not payloads:
        return
    if executor == "ray":
        _execute_ray(payloads, workers, finished, evaluate)
        return
    if executor != "local":
        raise InputError(f"--executor {executor!r}: use one of {', '.join(EXECUTORS)}")
    workers = workers or min(len(payloads), os.cpu_count() or 1)
    if workers == 1:
        for i, p in enumerate(payloads):
            finished(i, evaluate(p))
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    lost: list[str] = []
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(evaluate, p): i for i, p in enumerate(payloads)}
        for fut in as_completed(futures):
            try:
                row = fut.result()
            except BrokenProcessPool as err:  # a worker process died (killed, out of memory): its pool is gone
                lost.append(str(err) or "a process of the pool died")
                continue
            finished(futures[fut], row)
    finally:  # interrupted: drop the cells not started, do not wait for them
        pool.shutdown(wait=True, cancel_futures=True)
    if lost:
        raise CellsLost(len(lost), len(payloads), lost[0])


def _execute_ray(payloads: list[dict], workers: int | None, finished: Callable[[int, dict], None],
                 evaluate: Callable[[dict], dict]) -> None:
    try:
        import ray
        from ray.exceptions import RayError, RayTaskError
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'placement[ray]'") from None
    started = not ray.is_initialized()
    if started:  # a local instance unless RAY_ADDRESS points at a cluster
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    lost: list[str] = []
    try:
        remote = ray.remote(evaluate)  # Ray retries a task whose worker died (max_retries, 3 by default)
        refs = [remote.remote(p) for p in payloads]
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        while pending:  # finished cells are cached as they come, so a lost one costs only itself
            done, pending = ray.wait(pending, num_returns=1)
            try:
                row = ray.get(done[0])
            except RayTaskError as err:  # the cell itself raised: a bug, reported as such
                raise err.as_instanceof_cause() from None
            except RayError as err:  # the worker or its node died, past Ray's retries
                lost.append(type(err).__name__)
                continue
            finished(index[done[0]], row)
    finally:
        if started:
            ray.shutdown()
    if lost:
        raise CellsLost(len(lost), len(payloads), lost[0])


def unbounded_band(band: dict | None, kind: str | None) -> dict | None:
    """The band with a note where no published run of the plan's kind exists (Plan.unpublished_kind), as `plan`'s
    text says it: a user trial found the GB200 dense rows carrying the group's band alone, where `plan` said no
    published run of that kind bounds the price."""
    if band is None or not kind:
        return band
    unbounded = (f"no published run of this kind ({kind}, or its accelerator's family) among those placement "
                 f"validates: the band is its group's, no measured run bounds this price")
    return {**band, "note": "; ".join(x for x in (band.get("note"), unbounded) if x)}


def anchored_band(band: dict | None, best: dict | None) -> dict | None:
    """The band with its slow end at least as slow as the best published run of the cell's kind where the plan is
    priced above every one of them (Plan.published_best `above`): validate's errors are those of runs priced at
    their own layouts, and a searched plan above all of them is the model's extrapolation (a user trial found
    searched plans 19-68 % above published runs behind a +-9-17 % band).  At the best published MFU the step is
    predicted x ratio, an error of 1/ratio - 1; `published_anchor` says which run set it.  And at least as slow as a
    published run of the same workload at other degrees that measured a slower step (`same_workload`): a layout
    that ran, beside one only the model priced; and at least as slow as the best MFU a published run of the same model
    on the same accelerator and precision measured at another batch or scale (`same_model`).  Unchanged otherwise."""
    if band is None or not best:
        return band
    workload = best.get("same_workload")
    if workload and workload["plan_speedup"] > 1.0:
        # the same workload ran slower at other degrees: that measured step is the slow end at least
        floor = 1.0 / workload["plan_speedup"] - 1.0
        if floor < band["error_low"]:
            note = (f"slow end at the published run of this workload ({workload['run']}, "
                    f"{workload['published_step_time_s']:.2f} s/step at other degrees): the plan is priced "
                    f"{workload['plan_speedup']:.2f}x its speed")
            band = {**band, "error_low": floor, "published_anchor": {"run": workload["run"],
                                                                     "step_time_s": workload["published_step_time_s"],
                                                                     "ratio": workload["plan_speedup"]},
                    "note": "; ".join(x for x in (band.get("note"), note) if x)}
    model = best.get("same_model")
    if model and model["above"] and 1.0 / model["ratio"] - 1.0 < band["error_low"]:
        # the same model ran on this accelerator at this precision (another batch or scale) at a lower MFU than the
        # plan's: that MFU is the slow end at least, as the best run of the kind's is below
        what = "this model" if not model.get("run_vocab_size") else (
            f"this architecture, with {model['run_model']}'s {model['run_vocab_size']:,}-token vocabulary,")
        acc = model.get("run_accelerator")
        what += " here" if acc is None or acc == best.get("accelerator", acc) else f" on {acc}"
        note = (f"slow end at the best published MFU of {what} ({model['mfu']:.1%}, {model['run']}, "
                f"{model['num_gpus']:,} GPUs at batch {model['global_batch']:,}): the plan is priced "
                f"{model['ratio']:.2f}x above it")
        band = {**band, "error_low": 1.0 / model["ratio"] - 1.0,
                "published_anchor": {"run": model["run"], "mfu": model["mfu"], "ratio": model["ratio"]},
                "note": "; ".join(x for x in (band.get("note"), note) if x)}
    if not best.get("above"):
        return band
    floor = 1.0 / best["ratio"] - 1.0
    if floor >= band["error_low"]:
        return band
    note = (f"slow end at the best published {best['group']} run's MFU ({best['best_mfu']:.1%}, {best['best_run']}): "
            f"the plan is priced {best['ratio']:.2f}x above it")
    return {**band, "error_low": floor, "published_anchor": {"run": best["best_run"], "mfu": best["best_mfu"],
                                                             "ratio": best["ratio"]},
            "note": "; ".join(x for x in (band.get("note"), note) if x)}
