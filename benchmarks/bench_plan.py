"""Time `placement plan` end to end (process start to JSON) from 8 to 1,048,576 GPUs, dense and MoE.

Usage: python benchmarks/bench_plan.py [--out benchmarks/results.json] [--chart benchmarks/plan_scaling.png]
       python benchmarks/bench_plan.py --render   # table and chart from an existing --out, no runs

The table and the targets read from it replace the section of benchmarks/README.md between
`<!-- plan-bench:begin -->` and `<!-- plan-bench:end -->` (`--readme ''` leaves the file alone).

Each point runs in a fresh process: wall time, the process's CPU time (user + system), the search's own
time, layouts searched, peak RSS (VmHWM of the process's own memory map, so nothing is inherited from this
parent) and the size of the JSON.  Points up to REPEAT_MAX_GPUS run --repeat times: the table shows the
fastest run (the least disturbed by other load on the machine) and the median beside it.

Every point runs with the default mapping (a catalog cluster's ranks fill the hierarchy innermost-first);
the largest also run with `--map` (CP-SAT, or its greedy fallback above MAX_ASSIGNMENT_VARIABLES).
1,000,000 GPUs (= 2^6 x 5^6) is the issue's 10^6 as typed; 1,048,576 (= 2^20) is the nearest count the
layouts can split.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    ("llama3-405b", "dgx-h100", 8192, 2048),
    ("deepseek-v3", "hgx-h800", 4096, 15360),
]
GPU_COUNTS = [8, 64, 512, 2048, 16384, 131072, 1000000, 1048576]
MAP_COUNTS = [16384, 131072, 1048576]
REPEAT_MAX_GPUS = 131072
TIMEOUT_S = 600.0

RUNNER = """
import resource, sys
from placement.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
finally:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    # VmHWM: peak RSS of this process's memory map (ru_maxrss would also count the forking parent's)
    hwm = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(f"RUSAGE {hwm} {ru.ru_utime + ru.ru_stime}", file=sys.stderr)
"""


def repeated(model: str, cluster: str, seq: int, gbs: int, gpus: int, do_map: bool, repeat: int) -> dict:
    """The fastest of `repeat` runs, with the median wall time and the largest peak RSS of all of them."""
    runs = [one(model, cluster, seq, gbs, gpus, do_map) for _ in range(repeat if gpus <= REPEAT_MAX_GPUS else 1)]
    best = dict(min(runs, key=lambda r: r["wall_s"]))
    best["wall_runs_s"] = [r["wall_s"] for r in runs]
    best["wall_median_s"] = round(statistics.median(best["wall_runs_s"]), 2)
    if all("peak_rss_mib" in r for r in runs):
        best["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return best


def one(model: str, cluster: str, seq: int, gbs: int, gpus: int, do_map: bool) -> dict:
    args = ["plan", "--model", model, "--cluster", cluster, "--gpus", str(gpus), "--seq-len", str(seq),
            "--global-batch", str(gbs), "--json", "--top-k", "1"] + (["--map"] if do_map else [])
    row = {"model": model, "cluster": cluster, "gpus": gpus, "map": do_map,
           "load_average_1min": round(os.getloadavg()[0], 2)}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, check=False,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        row.update(wall_s=TIMEOUT_S, result=f"timeout: no answer within {TIMEOUT_S:.0f} s")
        return row
    wall = time.perf_counter() - start
    rusage = next(line.split() for line in proc.stderr.splitlines() if line.startswith("RUSAGE"))
    row.update(wall_s=round(wall, 2), cpu_s=round(float(rusage[2]), 2), peak_rss_mib=int(rusage[1]) // 1024,
               json_mib=round(len(proc.stdout.encode()) / 2**20, 1))
    data = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if data.get("plans"):
        best = data["plans"][0]
        lay = best["layout"]
        solver = best.get("mapping_solver") or {}
        row.update(result="plan", search_s=data["search"]["seconds"], candidates=data["search"]["candidates"],
                   step_time_s=best["step_time_s"], mfu=best["mfu"], mapping=solver.get("status"),
                   mapping_wall_s=solver.get("wall_s"),
                   layout=f"tp{lay['tp']} cp{lay['cp']} ep{lay['ep']} pp{lay['pp']} dp{lay['dp']} z{lay['zero_stage']}")
    else:  # an infeasible job prints its JSON with no plans (README: `"plans": []` and `infeasible`)
        message = next((line for line in proc.stderr.splitlines() if line.startswith("placement:")), "")
        row.update(result="infeasible" if "infeasible" in message else "error", message=message[:400])
    return row


def table(rows: list[dict]) -> str:
    """The README table, from the rows."""
    head = ("| model | cluster | GPUs | mapping | wall s (process start to JSON), fastest | median | CPU s | search s "
            "| layouts searched | peak RSS MiB | JSON MiB | best layout | step s | MFU |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        mapping = "--map " + (r.get("mapping") or "") if r["map"] else "default"
        if r["result"] == "plan":
            cells = [f"{r['search_s']:.3g}", f"{r['candidates']:,}", str(r["peak_rss_mib"]), str(r["json_mib"]),
                     r["layout"], f"{r['step_time_s']:.6g}", f"{r['mfu']:.1%}"]
        else:
            cells = ["", "", str(r.get("peak_rss_mib", "")), "", r["result"].split(":")[0], "", ""]
        lines.append("| " + " | ".join([r["model"], r["cluster"], f"{r['gpus']:,}", mapping, f"{r['wall_s']}",
                                        str(r.get("wall_median_s", "")), str(r.get("cpu_s", "")), *cells]) + " |")
    return "\n".join(lines)


TARGET_GPUS, TARGET_WALL_S, TARGET_RSS_MIB = 131072, 10.0, 1024
"""Issue 7's targets: a plan for 131,072 GPUs within 10 s of process start, in at most 1 GiB."""


def _point(rows: list[dict], gpus: int) -> str:
    """One GPU count's rows as prose: each model's wall time by mapping mode, or why there is no plan."""
    parts = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model and r["gpus"] == gpus]
        if not mine:
            continue
        if all(r["result"] != "plan" for r in mine):
            r = mine[0]
            why = re.search(r"infeasible \((\w+)\)", r.get("message", ""))
            parts.append(f"{model} is refused in {r['wall_s']} s, exit 1 ({why.group(0) if why else r['result']})")
            continue
        times = [f"{r['wall_s']} s " + (f"with `--map` ({r.get('mapping')})" if r["map"] else "by default")
                 for r in mine if r["result"] == "plan"]
        rss = max(r["peak_rss_mib"] for r in mine if "peak_rss_mib" in r)
        parts.append(f"{model} {' and '.join(times)}, peak RSS at most {rss} MiB")
    return "; ".join(parts)


def section(rows: list[dict], meta: dict) -> str:
    """benchmarks/README.md's generated part: when and under what load, the table, and the targets."""
    plans = [r for r in rows if r["gpus"] == TARGET_GPUS and r["result"] == "plan"]
    met = plans and all(r["wall_s"] <= TARGET_WALL_S and r["peak_rss_mib"] <= TARGET_RSS_MIB for r in plans)
    loads = [r["load_average_1min"] for r in rows if "load_average_1min" in r]
    reruns = "".join(f" The points at {', '.join(f'{g:,}' for g in r['gpus'])} GPUs were re-run on {r['date']}, "
                     f"from {r['start']} to {r['end']} UTC (`--only-gpus`)." for r in meta.get("reruns", []))
    lines = [f"Generated by `make bench` (benchmarks/bench_plan.py) on {meta['date']}, from {meta['start']} to "
             f"{meta['end']} UTC.{reruns} The 1-minute load average before each point ranged from {min(loads)} "
             f"to {max(loads)} (the benchmark itself counts for 1 while it runs).", "", table(rows), "",
             f"Targets of issue 7, read from the rows above (wall time from process start to JSON, fastest of "
             f"{meta['repeat']}):", "",
             f"- **{TARGET_GPUS:,} GPUs, at most {TARGET_WALL_S:.0f} s and {TARGET_RSS_MIB} MiB:** "
             f"{'met' if met else 'not met'}. {_point(rows, TARGET_GPUS)}."]
    for gpus in sorted({r["gpus"] for r in rows if r["gpus"] > TARGET_GPUS}):
        lines.append(f"- **{gpus:,} GPUs:** {_point(rows, gpus)}.")
    return "\n".join(lines)


def write_readme(path: Path, body: str) -> None:
    begin, end = "<!-- plan-bench:begin -->", "<!-- plan-bench:end -->"
    text = path.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{path}: no {begin} ... {end} section to regenerate")
    head, rest = text.split(begin, 1)
    path.write_text(head + begin + "\n\n" + body.rstrip() + "\n\n" + end + rest.split(end, 1)[1])


def chart(rows: list[dict], path: str) -> None:
    """Wall and CPU seconds, and peak RSS, against the GPU count (log x), per model and mapping mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 4.5))
    for model, color in (("llama3-405b", "tab:blue"), ("deepseek-v3", "tab:red")):
        for do_map, marker in ((False, "o"), (True, "s")):
            pts = sorted((r for r in rows if r["model"] == model and r["map"] == do_map and "peak_rss_mib" in r
                          and r["result"] != "infeasible"), key=lambda r: r["gpus"])
            if not pts:
                continue
            label = f"{model}{' --map' if do_map else ''}"
            gpus = [r["gpus"] for r in pts]
            style = "--" if do_map else "-"
            ax_t.plot(gpus, [r["wall_s"] for r in pts], style, marker=marker, color=color, label=f"{label} wall")
            ax_t.plot(gpus, [r["cpu_s"] for r in pts], ":", marker=marker, color=color, alpha=0.6,
                      label=f"{label} CPU")
            ax_m.plot(gpus, [r["peak_rss_mib"] for r in pts], style, marker=marker, color=color, label=label)
    ax_t.axhline(10.0, color="gray", lw=0.8)
    ax_t.text(0.02, 11.0, "10 s target at 131,072 GPUs", color="gray", fontsize=8, transform=ax_t.get_yaxis_transform())
    ax_t.set_yscale("log")
    ax_m.axhline(1024.0, color="gray", lw=0.8)
    ax_m.text(0.02, 1060, "1 GiB target", color="gray", fontsize=8, transform=ax_m.get_yaxis_transform())
    for ax, ylabel in ((ax_t, "seconds, process start to JSON"), (ax_m, "peak RSS, MiB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("placement plan --json --top-k 1, one fresh process per point (2 cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results.json")
    parser.add_argument("--chart", default="benchmarks/plan_scaling.png")
    parser.add_argument("--render", action="store_true", help="Only print the table and draw the chart from --out.")
    parser.add_argument("--repeat", type=int, default=3, help=f"Runs per point up to {REPEAT_MAX_GPUS:,} GPUs.")
    parser.add_argument("--only-gpus", type=int, action="append", default=None,
                        help="Re-run only these GPU counts (repeatable) and replace their rows in --out.")
    parser.add_argument("--readme", default="benchmarks/README.md",
                        help="Markdown file whose plan-bench section gets the table ('' for none).")
    args = parser.parse_args()
    meta_path = Path(args.out).with_suffix(".meta.json")
    if args.render:
        if not meta_path.exists():
            raise SystemExit(f"{meta_path} is missing (when the rows were measured): run `make bench` first")
        with open(args.out) as fh:
            rows = json.load(fh)
        meta = json.loads(meta_path.read_text())
    else:
        started = datetime.datetime.now(datetime.UTC)
        kept = []
        if args.only_gpus:
            with open(args.out) as fh:
                kept = json.load(fh)
        rows = []
        for model, cluster, seq, gbs in CASES:
            for gpus in GPU_COUNTS:
                for do_map in (False, True) if gpus in MAP_COUNTS else (False,):
                    old = [r for r in kept if (r["model"], r["gpus"], r["map"]) == (model, gpus, do_map)]
                    if args.only_gpus and gpus not in args.only_gpus and old:
                        rows.append(old[0])
                        continue
                    row = repeated(model, cluster, seq, gbs, gpus, do_map, args.repeat)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
        ended = datetime.datetime.now(datetime.UTC)
        when = {"date": started.date().isoformat(), "start": started.strftime("%H:%M"), "end": ended.strftime("%H:%M")}
        if args.only_gpus and meta_path.exists():  # the other rows keep the run they came from
            meta = json.loads(meta_path.read_text())
            meta["reruns"] = [*meta.get("reruns", []), {"gpus": sorted(args.only_gpus), **when}]
        else:
            meta = {**when, "repeat": args.repeat}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    chart(rows, args.chart)
    print(table(rows))
    if args.readme:
        write_readme(Path(args.readme), section(rows, meta))


if __name__ == "__main__":
    main()
