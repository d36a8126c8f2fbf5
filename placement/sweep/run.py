"""Run a sweep: every design x workload planned once (cached by an input fingerprint), in parallel.

A cell's fingerprint covers everything its answer depends on: the resolved design (node design,
accelerator, overrides, GPU count, price), the workload, the model dimensions and the tool version.
A re-run with one more design computes only that design's cells.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from placement import __version__
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.errors import InputError, PlacementInfeasible
from placement.loaders.files import read_bytes
from placement.outfiles import check_out_dir, checked_dump, checked_load, write_atomic
from placement.specs import AcceleratorSpec, ClusterSpec
from placement.sweep.spec import DesignSpec, SweepSpec, WorkloadSpec
from placement.topology import MAX_GPUS

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Cell:
    design: DesignSpec
    workload: WorkloadSpec
    gpu_options: tuple[int, ...]
    """GPU counts the job may use; the cell keeps the fastest that has a plan."""
    cluster: ClusterSpec
    accelerator: AcceleratorSpec
    num_gpus_bought: int

    @property
    def fingerprint(self) -> str:
        payload = {
            "version": __version__,
            "code": _code_digest(),
            "design": self.design.model_dump(mode="json"),
            "workload": self.workload.model_dump(mode="json"),
            "gpu_options": list(self.gpu_options),
            "num_gpus_bought": self.num_gpus_bought,
            "cluster": self.cluster.model_dump(mode="json"),
            "accelerator": self.accelerator.model_dump(mode="json"),
            "model": load_model(self.workload.model).model_dump(mode="json"),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]

    def payload(self) -> dict:
        """What a worker needs, as plain JSON (process pools and Ray ship it)."""
        return {"design": self.design.model_dump(mode="json"), "workload": self.workload.model_dump(mode="json"),
                "gpu_options": list(self.gpu_options), "num_gpus_bought": self.num_gpus_bought,
                "cluster": self.cluster.model_dump(mode="json"),
                "accelerator": self.accelerator.model_dump(mode="json")}


@lru_cache(maxsize=1)
def _code_digest() -> str:
    """Digest of the package's source: a changed cost model invalidates cached cells."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def design_hardware(design: DesignSpec) -> tuple[ClusterSpec, AcceleratorSpec]:
    """The catalog node design with the design's network overrides applied."""
    cluster = load_cluster(design.cluster)
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


def design_gpus(sweep: SweepSpec, design: DesignSpec, cluster: ClusterSpec) -> tuple[int, tuple[int, ...]]:
    """(GPUs bought, GPU counts the job may use, largest first).  Given gpus are used as they are.  A
    budget buys whole scale-up domains (nodes, NVL72 racks); since degrees must divide the GPU count
    and the global batch (10,000 GPUs has no layout for a batch of 2,048), the job may use the largest
    count of whole domains that is a power of two, or 3-smooth (no prime factor above 3); the cell
    keeps whichever trains faster.  The idle rest of the purchase is still paid."""
    if design.gpus is not None:
        if design.gpus > MAX_GPUS:
            raise InputError(
                f"design {design.name!r}: gpus {design.gpus:,} is more than the {MAX_GPUS:,} placement plans; "
                "check the number for a typo"
            )
        if design.gpus > cluster.gpus_per_node and design.gpus % cluster.gpus_per_node:
            raise InputError(
                f"design {design.name!r}: gpus {design.gpus} is not a whole number of {cluster.name} nodes "
                f"({cluster.gpus_per_node} GPUs each); use a multiple of {cluster.gpus_per_node}"
            )
        return design.gpus, (design.gpus,)
    unit = max(cluster.gpus_per_node, cluster.scale_up.size)
    affordable = sweep.budget / design.capex_per_gpu
    if affordable > MAX_GPUS:  # also keeps the search for a 3-smooth count below short
        raise InputError(
            f"design {design.name!r}: budget {sweep.budget:,.0f} buys {affordable:,.0f} GPUs at "
            f"{design.capex_per_gpu:,} each, more than the {MAX_GPUS:,} placement plans; check the budget and "
            "capex_per_gpu, or give gpus"
        )
    units = math.floor(sweep.budget / (design.capex_per_gpu * unit))
    if units < 1:
        raise InputError(
            f"design {design.name!r}: budget {sweep.budget:,.0f} buys {sweep.budget / design.capex_per_gpu:,.1f} GPUs, "
            f"less than one {unit}-GPU unit of {cluster.name}; raise the budget or give gpus"
        )
    smooth = max(k for k in range(1, units + 1) if _smooth(k))
    power = 1 << (units.bit_length() - 1)
    return units * unit, tuple(sorted({smooth * unit, power * unit}, reverse=True))


def _smooth(k: int) -> bool:
    for p in (2, 3):
        while k % p == 0:
            k //= p
    return k == 1


def cells(sweep: SweepSpec, calibration: dict[str, float] | None = None, accelerator: str | None = None
          ) -> list[Cell]:
    """The study's cells; `calibration` (a profile's fitted constants) applies to the designs on `accelerator`."""
    for work in sweep.workloads:  # fail on an unknown model before any work starts
        load_model(work.model)
    out = []
    for design in sweep.designs:
        cluster, acc = design_hardware(design)
        if calibration and acc.name == accelerator:
            from placement.calibration.profile import calibrated_specs

            cluster, acc = calibrated_specs(cluster, acc, calibration)
        bought, options = design_gpus(sweep, design, cluster)
        out.extend(Cell(design, w, options, cluster, acc, bought) for w in sweep.workloads)
    return out


def evaluate_cell(payload: dict) -> dict:
    """Plan one design x workload (top-level so process pools and Ray can call it)."""
    from placement.planner import plan_job
    from placement.search import SearchConfig
    from placement.specs import TrainingSpec
    from placement.topology import Topology

    design = DesignSpec.model_validate(payload["design"])
    work = WorkloadSpec.model_validate(payload["workload"])
    cluster = ClusterSpec.model_validate(payload["cluster"])
    acc = AcceleratorSpec.model_validate(payload["accelerator"])
    row = {"design": design.name, "workload": work.name, "num_gpus_bought": payload["num_gpus_bought"],
           "accelerator": acc.name, "cluster": cluster.name, "price_per_gpu_hour": design.gpu_hour_price}
    train = TrainingSpec(seq_len=work.seq_len, global_batch=work.global_batch, precision=work.precision)
    model = load_model(work.model)
    best, errors = None, []
    for n in payload["gpu_options"]:
        try:
            planned = plan_job(model, train, Topology(cluster, acc, num_gpus=n), SearchConfig(top_k=1), None,
                               with_rank_table=False)
        except PlacementInfeasible as err:
            errors.append(f"{n} GPUs: {err}")
            continue
        if best is None or planned.plans[0].step_time_s < best.step_time_s:
            best = planned.plans[0]
    if best is None:
        return {**row, "num_gpus": payload["gpu_options"][0], "status": "infeasible", "message": " | ".join(errors),
                "step_time_s": None, "time_to_train_s": None, "gpu_hours": None, "cost": None, "plan": None}
    plan = best
    row["num_gpus"] = plan.num_gpus
    time_to_train = work.tokens / plan.tokens_per_s
    gpu_hours = time_to_train * payload["num_gpus_bought"] / 3600.0  # idle GPUs of the purchase are paid too
    return {**row, "status": "ok", "message": "", "step_time_s": plan.step_time_s,
            "time_to_train_s": time_to_train, "gpu_hours": gpu_hours, "cost": gpu_hours * design.gpu_hour_price,
            "plan": plan.model_dump(mode="json")}


_ROW_KEYS = frozenset({"design", "workload", "num_gpus", "num_gpus_bought", "accelerator", "cluster", "status",
                       "message", "step_time_s", "time_to_train_s", "gpu_hours", "cost", "plan",
                       "price_per_gpu_hour"})
"""What every computed row holds (`plan_cell`): a cache entry without them is recomputed."""


_RESULT_NUMBERS = ("step_time_s", "time_to_train_s", "gpu_hours", "cost")
"""An "ok" row's results (finite, >= 0); an "infeasible" row holds None for them."""
_CELL_NUMBERS = ("num_gpus", "num_gpus_bought", "price_per_gpu_hour")
"""Numbers every row holds (finite, >= 0)."""


def _cached_row(path: Path, cell: Cell) -> dict | None:
    """A cache entry's row for `cell`, or None when it cannot be used: unreadable, past the read limit, a bad
    checksum, a row of the wrong shape (a missing key, a wrong type, a non-finite number), or another cell's."""
    try:
        row = checked_load(read_bytes(path, "sweep cache entry", "").decode("utf-8", errors="replace"))
    except (OSError, InputError):
        return None
    if not isinstance(row, dict) or not _ROW_KEYS <= row.keys() or row["status"] not in ("ok", "infeasible"):
        return None
    if not all(isinstance(row[k], str) for k in ("design", "workload", "accelerator", "cluster", "message")):
        return None
    names = (cell.design.name, cell.workload.name, cell.accelerator.name, cell.cluster.name)
    if (row["design"], row["workload"], row["accelerator"], row["cluster"]) != names:
        return None
    ok = row["status"] == "ok"
    if not ok and any(row[k] is not None for k in _RESULT_NUMBERS):
        return None
    for key in _CELL_NUMBERS + (_RESULT_NUMBERS if ok else ()):
        value = row[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            return None
    return row if not ok or isinstance(row["plan"], dict) else None


def mark_pareto(rows: list[dict]) -> None:
    """Per workload: a row is on the frontier when no other row is at most as costly and as slow and
    strictly better in one of the two."""
    for row in rows:
        row["pareto"] = False
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok:
        rivals = [o for o in ok if o is not r and o["workload"] == r["workload"]]
        r["pareto"] = not any(
            o["cost"] <= r["cost"] and o["time_to_train_s"] <= r["time_to_train_s"]
            and (o["cost"] < r["cost"] or o["time_to_train_s"] < r["time_to_train_s"]) for o in rivals)


@dataclass(frozen=True)
class SweepResult:
    rows: list[dict]
    computed: int
    cached: int
    bad_cache: tuple[str, ...] = ()
    """Cache entries that were unreadable (truncated, edited, reshaped): recomputed, and named."""
    unwritable_cache: tuple[str, ...] = ()
    """Cache entries that could not be written (a directory in the way, a full disk): computed, not kept."""


def run_sweep(sweep: SweepSpec, cache_dir: Path | None, executor: str = "local", workers: int | None = None,
              progress: Callable[[int], None] | None = None,
              evaluate: Callable[[dict], dict] = evaluate_cell, todo: list[Cell] | None = None) -> SweepResult:
    """Plan every cell not in the cache, in parallel; rows come back in sweep order.  `evaluate` plans one
    cell (tests pass one whose worker dies).  Raises CellsLost after the other cells finish when workers die."""
    todo = cells(sweep) if todo is None else todo
    prints = [c.fingerprint for c in todo]
    found: dict[str, dict] = {}
    bad: list[str] = []
    unwritable: list[str] = []
    if cache_dir is not None:
        check_out_dir(cache_dir, flag="the sweep cache")
        for fp, cell in zip(prints, todo, strict=True):
            path = cache_dir / f"{fp}.json"
            if path.exists():
                row = _cached_row(path, cell)
                if row is not None:
                    found[fp] = row
                else:  # a cache must never break a study: recompute the cell
                    bad.append(path.name)
    missing = [(fp, c) for fp, c in zip(prints, todo, strict=True) if fp not in found]

    def finished(i: int, row: dict) -> None:
        """A cell is done: keep it, cached at once (atomically), so a sweep stopped later keeps it."""
        fp = missing[i][0]
        found[fp] = row
        if cache_dir is not None:
            try:
                write_atomic(cache_dir / f"{fp}.json", checked_dump(row))
            except OSError as err:  # a cache must never break a study: the cell is computed, only not kept
                unwritable.append(f"{fp}.json ({err.strerror or err})")
        if progress:
            progress(1)

    _execute([c.payload() for _, c in missing], executor, workers, finished, evaluate)
    rows = [dict(found[fp], fingerprint=fp) for fp in prints]
    mark_pareto(rows)
    return SweepResult(rows=rows, computed=len(missing), cached=len(todo) - len(missing), bad_cache=tuple(bad),
                       unwritable_cache=tuple(unwritable))


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
