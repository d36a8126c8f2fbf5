"""Time `placement plan` end to end (process start to JSON) from 8 to 131,072 GPUs, dense and MoE.

Usage: python benchmarks/bench_plan.py [--out benchmarks/results.json]
Each point runs in a fresh process: wall time, the search's own time, layouts searched, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CASES = [
    ("llama3-405b", "dgx-h100", 8192, 2048),
    ("deepseek-v3", "hgx-h800", 4096, 15360),
]
GPU_COUNTS = [8, 64, 512, 2048, 16384, 131072]

RUNNER = """
import resource, sys
from placement.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
finally:
    print(f"MAXRSS_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)
"""


def one(model: str, cluster: str, seq: int, gbs: int, gpus: int) -> dict:
    args = ["plan", "--model", model, "--cluster", cluster, "--gpus", str(gpus), "--seq-len", str(seq),
            "--global-batch", str(gbs), "--json", "--top-k", "1"]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    rss_kb = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    row = {"model": model, "cluster": cluster, "gpus": gpus, "wall_s": round(wall, 2), "peak_rss_mib": rss_kb // 1024}
    if proc.stdout.strip():
        data = json.loads(proc.stdout)
        best = data["plans"][0]
        lay = best["layout"]
        row.update(search_s=data["search"]["seconds"], candidates=data["search"]["candidates"],
                   step_time_s=best["step_time_s"], mfu=best["mfu"],
                   layout=f"tp{lay['tp']} cp{lay['cp']} ep{lay['ep']} pp{lay['pp']} dp{lay['dp']} z{lay['zero_stage']}")
    else:
        row.update(result="infeasible" if "infeasible" in proc.stderr else proc.stderr.strip()[-200:])
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results.json")
    args = parser.parse_args()
    rows = []
    for model, cluster, seq, gbs in CASES:
        for gpus in GPU_COUNTS:
            row = one(model, cluster, seq, gbs, gpus)
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(args.out, "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
