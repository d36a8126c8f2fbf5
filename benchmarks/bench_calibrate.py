"""`placement calibrate` measured three ways (make calibrate-bench), results in benchmarks/calibration.json and the
README's calibration section (between `<!-- calibration:begin -->` and `<!-- calibration:end -->`):

1. Synthetic recovery: nccl-tests files and Megatron logs the cost model generates from known constants plus
   3 % noise (tests/synthetic_calibration.py), five seeds; the error of each recovered constant.
2. Real nccl-tests outputs (tests/data/nccl): the fitted levels and the error before and after per file.
3. Leave-one-out on the shipped calibration runs (placement/calibration/runs*.yaml), per accelerator with at least
   three runs: the GEMM efficiency of each precision used, the host time per kernel and the overlap slowdown are
   fitted on all runs of that accelerator but one, which is then predicted; the mean |error| against the
   uncalibrated model on the same runs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_calibration import TRUTH, study  # noqa: E402

from placement.calibration.calibrate import BOUNDS, PRIOR_WIDTH, Calibration  # noqa: E402
from placement.calibration.fit import Param, fit_steps  # noqa: E402
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


def _family_fit(runs, held: int | None) -> tuple[float, dict[str, float]]:
    """Fit the step constants on `runs` minus `held` as `calibrate` does (Schwarz's criterion, then its own
    leave-one-out test: fit_steps); the held-out run's error (or nan) and the values kept."""
    train = [r for i, r in enumerate(runs) if i != held]
    topo0 = run_topology(train[0][0])
    start = defaults(topo0)
    names = [*sorted({f"matmul_efficiency_{r.precision.value}" for r, _ in train}), "host_s_per_kernel",
             "overlap_compute_slowdown"]
    params = [Param(n, start[n], *BOUNDS[n], PRIOR_WIDTH[n]) for n in names]

    def residual_of(indices):
        chosen = [train[i] for i in indices]
        measured = np.array([r.published_step_time_s for r, _ in chosen])

        def residual(values: dict[str, float]) -> np.ndarray:
            pred = [predict(r, m, with_constants(run_topology(r), values)).predicted_step_time_s for r, m in chosen]
            return np.log(np.array([p if p is not None else 1e9 for p in pred]) / measured)
        return residual

    result = fit_steps(residual_of, len(train), params, report=False).result
    fitted = {k: v for k, v in result.values.items() if result.identified[k]}
    if held is None:
        return float("nan"), fitted
    r, m = runs[held]
    pred = predict(r, m, with_constants(run_topology(r), fitted)).predicted_step_time_s
    return (pred - r.published_step_time_s) / r.published_step_time_s if pred else float("nan"), fitted


def leave_one_out() -> list[dict]:
    families = defaultdict(list)
    for r in load_runs():
        families[load_cluster(r.cluster).accelerator].append((r, load_model(r.model)))
    out = []
    for acc, runs in sorted(families.items()):
        if len(runs) < MIN_RUNS:
            out.append({"accelerator": acc, "runs": len(runs), "skipped": f"fewer than {MIN_RUNS} runs"})
            continue
        started = time.perf_counter()
        default_errors = [abs(predict(r, m).error) for r, m in runs]
        held = [abs(_family_fit(runs, i)[0]) for i in range(len(runs))]
        _, all_fit = _family_fit(runs, None)
        out.append({"accelerator": acc, "runs": len(runs), "uncalibrated_mean": float(np.mean(default_errors)),
                    "leave_one_out_mean": float(np.nanmean(held)), "uncalibrated_max": float(np.max(default_errors)),
                    "leave_one_out_max": float(np.nanmax(held)), "fitted_on_all": all_fit,
                    "seconds": time.perf_counter() - started})
        print(f"{acc}: {out[-1]}", file=sys.stderr)
    return out


def _pct(x) -> str:
    return "not identified" if x is None else f"{100 * x:+.1f} %"


def section(data: dict) -> str:
    syn = data["synthetic"]
    lines = [BEGIN, "", f"Generated by `make calibrate-bench` (benchmarks/bench_calibrate.py) on {data['date']}.", "",
             f"**Synthetic recovery** ({syn['seeds']} seeds, 3 % noise; nccl-tests inside a node and across 2 and 4 "
             "nodes, six Megatron-LM logs): error of each recovered constant, worst seed.", "",
             "| constant | true value | worst error |", "|---|---|---|"]
    for name, errs in syn["relative_error"].items():
        worst = None if any(e is None for e in errs) else max(errs, key=abs)
        lines.append(f"| `{name}` | {syn['truth'][name]:.3g} | {_pct(worst)} |")
    loo = syn["leave_one_out"]
    lines += ["", f"Each synthetic run predicted from a fit on the other five: mean |error| "
              f"{100 * loo['held_out_mean']:.1f} % held out, against {100 * loo['default_mean']:.1f} % with the "
              f"default step constants (network constants fitted in both)."]
    lines += ["", "**Real nccl-tests outputs** (tests/data/nccl, H100): mean |error| of the files' times before and "
              "after the fit.", "", "| inputs | file | before | after | fitted |", "|---|---|---|---|---|"]
    for s in data["real"]:
        fitted = ", ".join(f"{k} {v:.3g}" for k, v in s["fitted"].items())
        for i, (f, e) in enumerate(s["files"].items()):
            lines.append(f"| {s['set'] if i == 0 else ''} | {f} | {100 * e['before']:.1f} % | {100 * e['after']:.1f} % "
                         f"| {fitted if i == 0 else ''} |")
    lines += ["", "**Leave-one-out on the shipped calibration runs**, per accelerator: GEMM efficiency, host time "
              "per kernel and overlap slowdown fitted on every run but one, which is then predicted.", "",
              "| accelerator | runs | uncalibrated mean \\|error\\| | leave-one-out mean | uncalibrated max | "
              "leave-one-out max |", "|---|---|---|---|---|---|"]
    for f in data["leave_one_out"]:
        if "skipped" in f:
            lines.append(f"| {f['accelerator']} | {f['runs']} | {f['skipped']} | | | |")
            continue
        lines.append(f"| {f['accelerator']} | {f['runs']} | {100 * f['uncalibrated_mean']:.1f} % | "
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
