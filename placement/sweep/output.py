"""Sweep results as files a buyer can use: CSV and JSON tables, a summary, and two plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from placement.outfiles import atomic_path, check_out_dir, write_atomic

COLUMNS = ("design", "workload", "num_gpus", "num_gpus_bought", "accelerator", "status", "step_time_s",
           "time_to_train_s", "gpu_hours", "price_per_gpu_hour", "cost", "pareto", "mfu", "layout", "message")
BREAKDOWN_TERMS = (("compute", "compute"), ("tp", "TP/SP"), ("cp", "CP"), ("ep", "EP all-to-all"),
                   ("pp", "PP p2p"), ("dp", "DP/ZeRO exposed"), ("bubble", "pipeline bubble"),
                   ("other", "optimizer + overlap"))


def _layout(plan: dict | None) -> str:
    if not plan:
        return ""
    lay = plan["layout"]
    return (f"tp{lay['tp']} cp{lay['cp']} ep{lay['ep']} pp{lay['pp']}x{lay['vpp']} dp{lay['dp']} z{lay['zero_stage']} "
            f"mbs{lay['micro_batch_size']} {lay['recompute']}")


def flat(row: dict) -> dict:
    out = {k: row.get(k) for k in COLUMNS}
    out["mfu"] = row["plan"]["mfu"] if row.get("plan") else None
    out["layout"] = _layout(row.get("plan"))
    return out


def step_terms(plan: dict) -> dict[str, float]:
    """Seconds per step of each term as it adds to the step (exposed communication only)."""
    b = plan["breakdown"]
    e = b["exposed"]
    return {"compute": b["compute"], "tp": e["tp"], "cp": e["cp"], "ep": e["ep"], "pp": e["pp"], "dp": e["dp"],
            "bubble": b["bubble"], "other": b["optimizer"] + b.get("overlap_slowdown", 0.0)}


def write_tables(out: Path, rows: list[dict]) -> list[Path]:
    check_out_dir(out)
    csv_path, json_path = out / "sweep.csv", out / "sweep.json"
    with atomic_path(csv_path) as tmp, tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(flat(row))
    write_atomic(json_path, json.dumps({"rows": rows}, indent=1) + "\n")
    return [csv_path, json_path]


def summary(rows: list[dict], currency: str) -> str:
    lines = []
    for work in dict.fromkeys(r["workload"] for r in rows):
        mine = sorted((r for r in rows if r["workload"] == work),
                      key=lambda r: (r["status"] != "ok", r["cost"] or 0.0, r["design"]))
        lines.append(f"{work}")
        cost = "cost " + currency
        head = f"  {'design':28} {'GPUs used':>9} {'days':>8} {'GPU-hours':>12} {cost:>16}  frontier  layout"
        lines.append(head)
        for r in mine:
            if r["status"] != "ok":
                lines.append(f"  {r['design']:28} {r['num_gpus']:>9} {'no plan: ' + r['message'][:90]}")
                continue
            lines.append(f"  {r['design']:28} {r['num_gpus']:>9} {r['time_to_train_s'] / 86400:>8.1f} "
                         f"{r['gpu_hours']:>12,.0f} {r['cost']:>16,.0f}  {'*' if r['pareto'] else ' ':^8}  "
                         f"{_layout(r['plan'])}")
        lines.append("")
    return "\n".join(lines)


def write_plots(out: Path, rows: list[dict], currency: str) -> list[Path]:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    works = list(dict.fromkeys(r["workload"] for r in rows))
    paths = []

    fig, axes = plt.subplots(1, len(works), figsize=(6.5 * len(works), 5), squeeze=False)
    for ax, work in zip(axes[0], works, strict=True):
        ok = [r for r in rows if r["workload"] == work and r["status"] == "ok"]
        for r in ok:
            ax.scatter(r["cost"], r["time_to_train_s"] / 86400, s=60 if r["pareto"] else 30,
                       color="tab:red" if r["pareto"] else "tab:gray", zorder=3)
            ax.annotate(r["design"], (r["cost"], r["time_to_train_s"] / 86400), textcoords="offset points",
                        xytext=(5, 4), fontsize=8)
        front = sorted((r for r in ok if r["pareto"]), key=lambda r: r["cost"])
        if front:
            ax.step([r["cost"] for r in front], [r["time_to_train_s"] / 86400 for r in front], where="post",
                    color="tab:red", label="Pareto frontier (red points)")
            ax.legend(loc="best", fontsize=8)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1e6:,.1f}M"))
        ax.margins(x=0.25, y=0.15)
        ax.set_title(work)
        ax.set_xlabel(f"cost to train ({currency})")
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
        ok = [r for r in rows if r["workload"] == work and r["status"] == "ok"]
        for y, r in enumerate(ok):
            left = 0.0
            for k, (term, label) in enumerate(BREAKDOWN_TERMS):
                width = step_terms(r["plan"])[term]
                ax.barh(y, width, left=left, color=colors[k % len(colors)], label=label if y == 0 else None)
                left += width
        ax.set_yticks(range(len(ok)), [r["design"] for r in ok], fontsize=8)
        ax.set_xlabel("seconds per step")
        ax.set_title(f"{work}: step time by term")
        if ok:
            ax.legend(fontsize=7, ncol=8, loc="upper center", bbox_to_anchor=(0.5, -0.28), frameon=False)
    fig.tight_layout()
    paths.append(out / "breakdown.png")
    with atomic_path(paths[-1]) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return paths
