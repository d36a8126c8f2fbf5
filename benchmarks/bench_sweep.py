"""Time the shipped purchase study (hardware/sweeps/h100-h200-b200-gb200-budget.yaml): the full study from an
empty cache, then `--set energy_price_per_kwh=0.15` re-prices of the cached study, through the CLI (process start
to exit, with and without the plots) and in process (`run_sweep` alone).  Writes benchmarks/sweep_results.json
and prints the rows of the table in benchmarks/README.md (python benchmarks/bench_sweep.py [--workers N])."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "hardware" / "sweeps" / "h100-h200-b200-gb200-budget.yaml"


def _cli(out: Path, *extra: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "placement.cli", "sweep", str(STUDY), "--out", str(out), *extra],
                          env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc.stderr.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from placement.catalog import read_yaml
    from placement.sweep.run import run_sweep
    from placement.sweep.spec import SweepSpec

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        full_s, full_line = _cli(out, "--workers", str(args.workers))
        cli = [_cli(out, "--set", "energy_price_per_kwh=0.15")[0] for _ in range(args.repeats)]
        cli_np, line = [], ""
        for _ in range(args.repeats):
            s, line = _cli(out, "--set", "energy_price_per_kwh=0.15", "--no-plots")
            cli_np.append(s)
        data = read_yaml(STUDY, SweepSpec, "sweep").model_dump(mode="json")
        spec = SweepSpec.model_validate({**data, "designs": [dict(d, energy_price_per_kwh=0.15)
                                                             for d in data["designs"]]})
        run_sweep(spec, out / "cache")  # warm: imports, code digest
        inproc = []
        for _ in range(max(args.repeats, 5)):
            t0 = time.perf_counter()
            result = run_sweep(spec, out / "cache")
            inproc.append(time.perf_counter() - t0)
        with_layout = sum(r["gpu_counts"]["with_layout"] for r in result.rows)
        considered = sum(r["gpu_counts"]["considered"] for r in result.rows)
    record = {
        "study": STUDY.name, "cells": len(result.rows), "workers": args.workers, "cpus": os.cpu_count(),
        "full_study_s": round(full_s, 1), "full_study": full_line,
        "counts_considered": considered, "counts_with_layout": with_layout,
        "plans_computed_full": result.plans_cached, "reprice_plans_computed": result.plans_computed,
        "reprice_cli_s_median": round(statistics.median(cli), 2),
        "reprice_cli_no_plots_s_median": round(statistics.median(cli_np), 2),
        "reprice_in_process_s_median": round(statistics.median(inproc), 3),
        "reprice_in_process_s_fastest": round(min(inproc), 3), "reprice": line,
        "date": time.strftime("%Y-%m-%d"),
    }
    (ROOT / "benchmarks" / "sweep_results.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    print(f"| {record['cells']} cells, {args.workers} workers, {record['cpus']} CPUs | {record['full_study_s']} | "
          f"{record['plans_computed_full']} of {record['counts_with_layout']} counts with a layout "
          f"({record['counts_considered']:,} considered) | {record['reprice_plans_computed']} | "
          f"{record['reprice_in_process_s_median']} ({record['reprice_in_process_s_fastest']}) | "
          f"{record['reprice_cli_no_plots_s_median']} | {record['reprice_cli_s_median']} |")


if __name__ == "__main__":
    main()
