"""`placement calibrate` measured three ways (make calibrate-bench), results in benchmarks/calibration.json and the
README's calibration section (between `<!-- calibration:begin -->` and `<!-- calibration:end -->`):

1. Synthetic recovery: nccl-tests files and Megatron logs the cost model generates from known constants plus
   3 % noise (tests/synthetic_calibration.py), five seeds; the error of each recovered constant.
2. Real nccl-tests outputs (tests/data/nccl): the fitted levels and the error before and after per file.
3. Held-out runs of the shipped calibration set (placement/calibration/runs*.yaml), per accelerator with at least
   three runs: the GEMM efficiency of each precision used, the host time per kernel, the overlap slowdown and, where
   the runs' GPU counts lie SPREAD_GPU_RATIO apart, the GPUs' speed spread are fitted on all runs of that
   accelerator but the held-out ones (one run at a time; a fold at a time above FOLD_ABOVE runs), which are then
   predicted; the mean |error| against the uncalibrated model on the same runs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_calibration import NCCL_FILES, STEP_RUNS, TRUTH, study  # noqa: E402

from placement.calibration.calibrate import Calibration, fit_params, step_constant_names  # noqa: E402
from placement.calibration.fit import fit_steps  # noqa: E402
from placement.calibration.profile import defaults, with_constants  # noqa: E402
from placement.calibration.validate import load_runs, predict, run_topology  # noqa: E402
from placement.catalog import load_accelerator, load_cluster, load_model  # noqa: E402
from placement.topology import Topology  # noqa: E402

BEGIN, END = "<!-- calibration:begin -->", "<!-- calibration:end -->"
REAL_SETS = (
    ("1 node (NVLS) + 2 nodes, ring", ("h100-1node-all_reduce_perf.txt", "h100-2node-all_reduce_perf-ring.txt")),
    ("1 node + 4 nodes + 8 nodes", ("h100-1node-all_reduce_perf.txt", "h100-4node-all_reduce_perf.txt",
                                    "h100-8node-all_reduce_perf.txt")))
MIN_RUNS = 3


def _base() -> Topology:
    c = load_cluster("dgx-h100")
    return Topology(c, load_accelerator(c.accelerator), num_gpus=64)


def synthetic(seeds: int = 5) -> dict:
    rows = defaultdict(list)
    held, default = [], []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            nccl, logs = study(Path(tmp), seed=seed)
            profile = Calibration(_base(), "dgx-h100", nccl, logs).run()
        for name, truth in TRUTH.items():
            c = profile.constants[name]
            rows[name].append(c.value / truth - 1.0 if c.identified else None)
        held += [abs(h.held_out / h.measured - 1) for h in profile.leave_one_out]
        default += [abs(h.before / h.measured - 1) for h in profile.leave_one_out]
    return {"seeds": seeds, "truth": TRUTH, "relative_error": dict(rows),
            "leave_one_out": {"default_mean": float(np.mean(default)), "held_out_mean": float(np.mean(held))}}


def real() -> list[dict]:
    out = []
    for label, files in REAL_SETS:
        profile = Calibration(_base(), "dgx-h100", [ROOT / "tests" / "data" / "nccl" / f for f in files]).run()
        per_file = defaultdict(lambda: [[], []])
        for r in profile.measurements:
            per_file[r.group][0].append(abs(r.before / r.measured - 1))
            per_file[r.group][1].append(abs(r.after / r.measured - 1))
        unfitted = [k for k, c in profile.constants.items() if not c.identified and "of its kind" not in c.note]
        out.append({"set": label, "fitted": profile.fitted(), "not_identified": unfitted,
                    "files": {Path(g.split(":")[0]).name: {"before": float(np.mean(b)), "after": float(np.mean(a))}
                              for g, (b, a) in per_file.items()},
                    "warnings": list(profile.warnings)})
    return out


FOLD_ABOVE = 10
"""A family of more runs than this is held out a fold at a time (FOLDS folds, the runs dealt round-robin in file
order), not one run at a time: each fit runs `calibrate`'s own leave-one-out test on its training runs, so held-out
fits cost the square of the runs (31 H100 runs one at a time: over 100 minutes on 2 cores)."""
FOLDS = 5

_TOPOLOGY: dict[str, Topology] = {}
_PREDICTED: dict[tuple, float | None] = {}


def _predicted(run, model, values: dict[str, float]) -> float | None:
    """The run's predicted step with `values`, its topology built once (the catalog files parsed once, not on each of
    ~10^5 predictions) and each (run, values) priced once (every fit starts from the same defaults)."""
    key = (run.id, tuple(sorted(values.items())))
    if key not in _PREDICTED:
        if run.id not in _TOPOLOGY:
            _TOPOLOGY[run.id] = run_topology(run)
        _PREDICTED[key] = predict(run, model, with_constants(_TOPOLOGY[run.id], values)).predicted_step_time_s
    return _PREDICTED[key]


def _family_fit(runs, held: tuple[int, ...]) -> tuple[list[float], dict[str, float]]:
    """Fit the step constants on `runs` minus `held` as `calibrate` does (Schwarz's criterion, then its own
    leave-one-out test: fit_steps); each held-out run's error (nan where it is not priced) and the values kept."""
    train = [r for i, r in enumerate(runs) if i not in held]
    start = defaults(run_topology(train[0][0]))
    names = step_constant_names((r.precision.value for r, _ in train), [r.num_gpus for r, _ in train])
    params = fit_params(names, start)

    def residual_of(indices):
        chosen = [train[i] for i in indices]
        measured = np.array([r.published_step_time_s for r, _ in chosen])

        def residual(values: dict[str, float]) -> np.ndarray:
            pred = [_predicted(r, m, values) for r, m in chosen]
            return np.log(np.array([p if p is not None else 1e9 for p in pred]) / measured)
        return residual

    result = fit_steps(residual_of, len(train), params, report=False).result
    fitted = {k: v for k, v in result.values.items() if result.identified[k]}
    errors = []
    for i in held:
        r, m = runs[i]
        pred = _predicted(r, m, fitted)
        errors.append((pred - r.published_step_time_s) / r.published_step_time_s if pred else float("nan"))
    return errors, fitted


def _folds(n: int) -> list[tuple[int, ...]]:
    """The held-out sets of a family of n runs: each run alone, or FOLDS round-robin folds above FOLD_ABOVE."""
    if n <= FOLD_ABOVE:
        return [(i,) for i in range(n)]
    return [tuple(range(k, n, FOLDS)) for k in range(FOLDS)]


def _task(job: tuple[str, tuple[int, ...]]) -> tuple[str, tuple[int, ...], list[float], dict[str, float], float]:
    acc, held = job
    started = time.perf_counter()
    errors, fitted = _family_fit(_families()[acc], held)
    return acc, held, errors, fitted, time.perf_counter() - started


def _families() -> dict[str, list]:
    if not _FAMILIES:
        for r in load_runs():
            _FAMILIES.setdefault(load_cluster(r.cluster).accelerator, []).append((r, load_model(r.model)))
    return _FAMILIES


_FAMILIES: dict[str, list] = {}


def leave_one_out() -> list[dict]:
    """Held-out error per accelerator family, the fits spread over the machine's cores (each fit is deterministic,
    so the table does not depend on how they are spread)."""
    families = _families()
    jobs = [(acc, held) for acc, runs in sorted(families.items()) if len(runs) >= MIN_RUNS
            for held in [*_folds(len(runs)), ()]]
    done = []
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=get_context("fork")) as pool:
        for future in as_completed([pool.submit(_task, job) for job in jobs]):
            done.append(future.result())
            acc, held, _, _, seconds = done[-1]
            print(f"  {len(done)}/{len(jobs)} fits: {acc} without {len(held)} run(s), {seconds:.0f} s", file=sys.stderr)
    out = []
    for acc, runs in sorted(families.items()):
        if len(runs) < MIN_RUNS:
            out.append({"accelerator": acc, "runs": len(runs), "skipped": f"fewer than {MIN_RUNS} runs"})
            continue
        mine = [d for d in done if d[0] == acc]
        held = [abs(e) for d in mine if d[1] for e in d[2]]
        default_errors = [abs(predict(r, m).error) for r, m in runs]
        out.append({"accelerator": acc, "runs": len(runs), "held_out": "one run" if len(runs) <= FOLD_ABOVE
                    else f"{FOLDS} folds", "uncalibrated_mean": float(np.mean(default_errors)),
                    "leave_one_out_mean": float(np.nanmean(held)), "uncalibrated_max": float(np.max(default_errors)),
                    "leave_one_out_max": float(np.nanmax(held)),
                    "fitted_on_all": next(d[3] for d in mine if not d[1]),
                    "fit_seconds": sum(d[4] for d in mine)})
        print(f"{acc}: {out[-1]}", file=sys.stderr)
    return out


def _pct(x) -> str:
    return "not identified" if x is None else f"{100 * x:+.1f} %"


def _nccl_files() -> str:
    """The synthetic nccl-tests files in words: `all_reduce_perf` on 1, 2 and 8 nodes, `all_gather_perf` on 4."""
    hosts: dict[str, list[int]] = defaultdict(list)
    for op, n in NCCL_FILES:
        hosts[op].append(n)

    def nodes(ns: list[int]) -> str:
        words = [str(n) for n in sorted(ns)]
        return (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]) + \
            (" node" if ns == [1] else " nodes")

    return ", ".join(f"`{op}_perf` on {nodes(ns)}" for op, ns in hosts.items())


def section(data: dict) -> str:
    syn = data["synthetic"]
    lines = [BEGIN, "", f"Generated by `make calibrate-bench` (benchmarks/bench_calibrate.py) on {data['date']}.", "",
             f"**Synthetic recovery** ({syn['seeds']} seeds, 3 % noise; nccl-tests {_nccl_files()}, "
             f"{len(STEP_RUNS)} Megatron-LM logs): error of each recovered constant, worst seed.", "",
             "| constant | true value | worst error |", "|---|---|---|"]
    for name, errs in syn["relative_error"].items():
        worst = None if any(e is None for e in errs) else max(errs, key=abs)
        lines.append(f"| `{name}` | {syn['truth'][name]:.3g} | {_pct(worst)} |")
    loo = syn["leave_one_out"]
    lines += ["", f"Each synthetic run predicted from a fit on the other five: mean |error| "
              f"{100 * loo['held_out_mean']:.1f} % held out, against {100 * loo['default_mean']:.1f} % with the "
              f"defaults (every constant at the catalog's, network ones too: a profile's `before`)."]
    lines += ["", "**Real nccl-tests outputs** (tests/data/nccl, H100): mean |error| of the files' times before and "
              "after the fit.", "", "| inputs | file | before | after | fitted |", "|---|---|---|---|---|"]
    for s in data["real"]:
        fitted = ", ".join(f"{k} {v:.3g}" for k, v in s["fitted"].items())
        for i, (f, e) in enumerate(s["files"].items()):
            lines.append(f"| {s['set'] if i == 0 else ''} | {f} | {100 * e['before']:.1f} % | {100 * e['after']:.1f} % "
                         f"| {fitted if i == 0 else ''} |")
    lines += ["", "**Held-out runs of the shipped calibration set**, per accelerator: GEMM efficiency, host time "
              "per kernel, overlap slowdown and, where the runs' GPU counts lie 8x apart or more, the GPUs' speed "
              "spread fitted as `placement calibrate` fits them on every run but the held-out "
              f"ones, which are then predicted: one run at a time, or {FOLDS} folds (runs dealt round-robin in file "
              f"order) for a family of more than {FOLD_ABOVE} runs.", "",
              "| accelerator | runs | held out | uncalibrated mean \\|error\\| | held-out mean | uncalibrated max | "
              "held-out max |", "|---|---|---|---|---|---|---|"]
    for f in data["leave_one_out"]:
        if "skipped" in f:
            lines.append(f"| {f['accelerator']} | {f['runs']} | {f['skipped']} | | | | |")
            continue
        lines.append(f"| {f['accelerator']} | {f['runs']} | {f['held_out']} | {100 * f['uncalibrated_mean']:.1f} % | "
                     f"{100 * f['leave_one_out_mean']:.1f} % | {100 * f['uncalibrated_max']:.1f} % | "
                     f"{100 * f['leave_one_out_max']:.1f} % |")
    lines += ["", END]
    return "\n".join(lines)


def main() -> int:
    data = {"date": dt.date.today().isoformat(), "synthetic": synthetic(), "real": real(),
            "leave_one_out": leave_one_out()}
    (ROOT / "benchmarks" / "calibration.json").write_text(json.dumps(data, indent=1) + "\n")
    readme = ROOT / "README.md"
    text = readme.read_text()
    if BEGIN in text and END in text:
        readme.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section(data), text,
                                 flags=re.S))
    print(section(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
