"""`plan --json --top-k 5` as a user runs it: wall time, peak memory and JSON size of the whole command (startup
included), on a 256-node, 5-leaf SLURM allocation (tests/data/slurm/tree-5leaf.conf; non-blocking and 2:1
oversubscribed) and on 131,072 GPUs of the catalog dgx-h100.

Target (issue: launch files that run exactly what was priced): <= 5 s.  The mapping skips a candidate whose
allocation order meets the flat-fabric bound, and the CP-SAT budget (--map-time-limit) is shared by the
candidates that need a solve.  Usage: .venv/bin/python benchmarks/bench_alloc_plan.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 3
MEASURE = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")
"""Runs one command and prints its peak RSS in KiB (this wrapper's only child)."""


ALLOCATION = ["--model", "llama3-70b", "--slurm-topology", str(ROOT / "tests" / "data" / "slurm" / "tree-5leaf.conf"),
              "--nodelist", "gpu[0001-0256]", "--node-type", "dgx-h100"]
CASES = {"non-blocking": ALLOCATION, "2:1 oversubscribed": [*ALLOCATION, "--oversubscription", "2"],
         "131,072 GPUs, catalog dgx-h100": ["--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "131072"]}
"""The 256-node allocation (target <= 5 s) and the JSON at 131,072 GPUs (target <= 3 s, <= 1 GiB, <= 10 MB)."""


def run(extra: list[str]) -> dict:
    argv = [sys.executable, "-m", "placement.cli", "plan", "--top-k", "5", "--json", *extra]
    walls, rss = [], 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True,
                              cwd=ROOT)
        walls.append(time.perf_counter() - start)
        rss = max(rss, int(proc.stderr.strip().splitlines()[-1]))
    plans = json.loads(proc.stdout)["plans"]
    return {"wall_s_median": round(sorted(walls)[len(walls) // 2], 2), "wall_s_max": round(max(walls), 2),
            "max_rss_mib": round(rss / 1024), "json_bytes": len(proc.stdout.encode()),
            "statuses": [p["mapping_solver"]["status"] for p in plans],
            "chosen": [p["mapping_solver"]["chosen"] for p in plans],
            "best_step_s": plans[0]["step_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "alloc_plan_results.json"))
    args = parser.parse_args()
    results = {name: run(extra) for name, extra in CASES.items()}
    results["date"] = time.strftime("%Y-%m-%d %H:%M")
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    for name in CASES:
        r = results[name]
        print(f"| {name} | {r['wall_s_median']} | {r['wall_s_max']} | {r['max_rss_mib']} | "
              f"{r['json_bytes'] / 1e6:.2f} | {', '.join(sorted(set(r['statuses'])))} |")


if __name__ == "__main__":
    main()
