"""The report's charts: matplotlib figures as inline SVG, the same bytes for the same input.

Matplotlib writes a date into the SVG metadata and random ids for clip paths unless told otherwise: the
date is left out (`metadata={"Date": None}`) and the ids are hashed with a fixed salt (`svg.hashsalt`).  Text
stays text (`svg.fonttype: none`), so the page is small and its labels can be searched and copied.  Colours
are mid-tones that read on white paper and on screen.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from placement.cost.constants import GiB
from placement.plan import Plan

RC = {"svg.hashsalt": "placement-report", "svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10,
      "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False}
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
           "#64b5cd")


def _figure(width_in: float, height_in: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.figure(figsize=(width_in, height_in))


def svg(fig) -> str:
    """The figure as an `<svg>` element (no XML prolog, no date), closed after."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _rc():
    import matplotlib

    return matplotlib.rc_context(RC)


STEP_TERMS = (("compute", "compute"), ("tp", "TP/SP"), ("cp", "CP"), ("ep", "EP all-to-all"), ("pp", "PP p2p"),
              ("dp", "DP / ZeRO"), ("host", "host"), ("grad_accumulation", "gradient accumulation"),
              ("bubble", "pipeline bubble"), ("optimizer", "optimizer"),
              ("overlap_slowdown", "overlap slowdown"), ("variability", "slowest GPU"))


def step_chart(p: Plan) -> str:
    """Seconds per step by term: exposed (solid, adds to the step) and overlapped (hatched, hidden under
    compute), labelled with the exposed time as the text report prints it."""
    b = p.breakdown
    comm = {"tp", "cp", "ep", "pp", "dp"}
    terms = [(key, label) for key, label in STEP_TERMS
             if key == "compute" or getattr(b, key) > 0 or (key in comm and getattr(b.overlapped, key) > 0)]
    with _rc():
        fig = _figure(7.0, 0.45 * len(terms) + 0.9)
        ax = fig.add_subplot()
        y = np.arange(len(terms))[::-1]
        exposed = [getattr(b.exposed, k) if k in comm else getattr(b, k) for k, _ in terms]
        hidden = [getattr(b.overlapped, k) if k in comm else 0.0 for k, _ in terms]
        ax.barh(y, exposed, color=PALETTE[0], label="exposed (adds to the step)")
        ax.barh(y, hidden, left=exposed, color="white", edgecolor=PALETTE[0], hatch="///", linewidth=0.6,
                label="overlapped with compute")
        for yi, e, h in zip(y, exposed, hidden, strict=True):
            ax.text(e + h, yi, f"  {e:.3f} s" + (f" (+{h:.3f} hidden)" if h > 0 else ""), va="center", fontsize=8)
        ax.set_yticks(y, [label for _, label in terms])
        ax.set_xlabel("seconds per step")
        ax.set_xlim(0, max(e + h for e, h in zip(exposed, hidden, strict=True)) * 1.35)
        ax.set_title(f"step {p.step_time_s:.3f} s by term")
        ax.legend(loc="lower right", fontsize=8, frameon=False)
        return svg(fig)


MEMORY_TERMS = (("weights_bytes", "weights"), ("grads_bytes", "gradients"), ("optimizer_bytes", "optimizer state"),
                ("activations_bytes", "activations"), ("other_bytes", "buffers, logits, reserve"))


def memory_chart(p: Plan) -> str:
    """GiB per GPU, stacked by term, against the capacity."""
    m = p.memory
    with _rc():
        fig = _figure(7.0, 1.7)
        ax = fig.add_subplot()
        left = 0.0
        for k, (attr, label) in enumerate(MEMORY_TERMS):
            v = getattr(m, attr) / GiB
            ax.barh(0, v, left=left, color=PALETTE[k], label=f"{label} {v:.1f}")
            left += v
        cap = p.memory_capacity_bytes / GiB
        headroom = p.memory_headroom_bytes / GiB
        # the capacity in the legend, not beside its line: above the bar, the label ran into the title wherever the
        # line fell mid-axis, as it does for a job that does not fit (a QA run: "memory 122.7 of 78.1 GiB" unreadable)
        ax.axvline(cap, color="black", linewidth=1.2, linestyle="--", label=f"capacity {cap:.1f} GiB")
        if headroom:  # the margin kept free, beyond the capacity line (--memory-headroom-gib)
            ax.axvspan(cap, cap + headroom, color="0.85", zorder=0)
            ax.text(cap + headroom / 2, 0.0, f"{headroom:.1f} GiB\nkept free", fontsize=8, ha="center", va="center")
        ax.set_yticks([])
        ax.set_xlim(0, max(cap + headroom, p.peak_memory_bytes / GiB) * 1.12)
        ax.set_xlabel("GiB per GPU")
        ax.set_title(f"memory {p.peak_memory_bytes / GiB:.1f} of {cap:.1f} GiB" + ("" if p.fits else ": does not fit"))
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.42), ncol=3, fontsize=8, frameon=False)
        return svg(fig)


def frontier_chart(workload: str, points: Sequence[dict], currency: str) -> str:
    """Time to train against cost, one point per design, error bars where a range is known, each marked with
    its number in the page's key (design and GPU count: whole labels overlapped wherever two designs priced
    alike, as three of the budget study's five did), offset by the number as sweep.output.write_plots does; the
    Pareto frontier as a step line.  `points`: {"key" (the number), "cost", "days", "cost_low", "cost_high",
    "days_low", "days_high", "pareto"} (None where unknown)."""
    import matplotlib.ticker

    with _rc():
        fig = _figure(7.0, 4.2)
        ax = fig.add_subplot()
        for pt in points:
            color = PALETTE[3] if pt["pareto"] else PALETTE[7]
            xerr = _err(pt["cost"], pt.get("cost_low"), pt.get("cost_high"))
            yerr = _err(pt["days"], pt.get("days_low"), pt.get("days_high"))
            ax.errorbar(pt["cost"], pt["days"], xerr=xerr, yerr=yerr, fmt="o", color=color,
                        markersize=7 if pt["pareto"] else 5, capsize=3, linewidth=1, zorder=3)
            k = int(pt["key"])
            ax.annotate(str(k), (pt["cost"], pt["days"]), textcoords="offset points",
                        xytext=(4 + 7 * (k % 2), 3 + 5 * (k % 3)), fontsize=8, fontweight="bold")
        front = sorted((pt for pt in points if pt["pareto"]), key=lambda pt: pt["cost"])
        if front:
            ax.step([pt["cost"] for pt in front], [pt["days"] for pt in front], where="post", color=PALETTE[3],
                    linewidth=1, label="Pareto frontier (red)")
            ax.legend(loc="upper right", fontsize=8, frameon=False)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_money(max(pt["cost"] for pt in points))))
        ax.margins(x=0.3, y=0.2)
        ax.set_xlabel(f"cost to train ({currency})")
        ax.set_ylabel("time to train (days)")
        ax.set_title(workload)
        ax.grid(alpha=0.3)
        return svg(fig)


def _money(top: float):
    """Tick labels in M or k of the currency, by the largest cost on the axis."""
    scale, unit = (1e6, "M") if top >= 1e6 else (1e3, "k") if top >= 1e4 else (1.0, "")
    digits = 2 if top / scale < 10 else 1 if top / scale < 100 else 0
    return lambda x, _: f"{x / scale:,.{digits}f}{unit}"


def _err(mid: float, low: float | None, high: float | None):
    if low is None or high is None:
        return None
    return np.array([[max(mid - low, 0.0)], [max(high - mid, 0.0)]])


def stacked_step_chart(title: str, labels: Sequence[str], terms: Sequence[dict[str, float]],
                       names: Sequence[tuple[str, str]]) -> str:
    """One horizontal bar per label, stacked by the (key, legend) `names` of each `terms` dict (s/step)."""
    with _rc():
        fig = _figure(7.5, 0.42 * len(labels) + 1.4)
        ax = fig.add_subplot()
        y = np.arange(len(labels))[::-1]
        left = np.zeros(len(labels))
        for k, (key, legend) in enumerate(names):
            widths = np.array([t.get(key, 0.0) for t in terms])
            ax.barh(y, widths, left=left, color=PALETTE[k % len(PALETTE)], label=legend)
            left += widths
        for yi, total in zip(y, left, strict=True):
            ax.text(total, yi, f" {total:.3f} s", va="center", fontsize=8)
        ax.set_yticks(y, list(labels), fontsize=8)
        ax.set_xlim(0, (left.max() if len(left) else 1.0) * 1.18)
        ax.set_xlabel("seconds per step")
        ax.set_title(title)
        ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.35), frameon=False)
        return svg(fig)
