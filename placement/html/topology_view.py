"""Where a plan's groups land: a slice of the machine (its switches, hosts and GPUs) with every GPU coloured
by its TP, CP, EP, DP and PP group, one strip per axis, as geometry for the page's SVG template.

A 16,384-GPU job drawn GPU by GPU is unreadable, so a large job shows a representative slice, and says which:
the whole job when it has at most `MAX_HOSTS` hosts, else the hosts of the first pipeline stage, else the
first `MAX_HOSTS` hosts of that stage in rank order.  The switches drawn are those above the slice's hosts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placement.topology import Topology

MAX_HOSTS = 32
"""Hosts drawn at most (32 DGX nodes: 256 GPUs, about 1,000 pixels wide)."""
GROUP_COLORS = ("#a1c9f4", "#ffb482", "#8de5a1", "#ff9f9b", "#d0bbff", "#debb9b", "#fab0e4", "#cfcfcf",
                "#fffea3", "#b9f2f0", "#7fa7d9", "#e5a36b")
"""Light enough that a group's number reads on its cell, on paper too."""
IDLE = "#e6e6e6"
AXES = (("tp", "TP"), ("cp", "CP"), ("ep", "EP"), ("dp", "DP"), ("pp", "PP"))

COL_W, COL_GAP, CELL_H, MARGIN, ROW_H, NAME_H = 22, 6, 11, 150, 44, 62


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str = "none"
    title: str = ""
    label: str = ""


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    anchor: str = "start"
    rotate: bool = False


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass
class TopologyView:
    caption: str
    width: float
    height: float
    boxes: list[Rect] = field(default_factory=list)
    cells: list[Rect] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    legend: list[str] = field(default_factory=list)
    """One sentence per strip: the axis, its group size, how many of its groups the slice shows."""


def mesh_axes(coords: dict[str, np.ndarray]) -> dict[str, tuple[str, ...]]:
    """For each drawn axis, the coordinates its groups share (the other axes of its mesh)."""
    out = {"tp": ("cp", "dp", "pp"), "cp": ("tp", "dp", "pp"), "dp": ("tp", "cp", "pp"), "pp": ("tp", "cp", "dp")}
    if "ep" in coords:
        out["ep"] = ("pp", "etp", "edp")
    return out


def topology_view(topo: Topology, gpu_of_rank: np.ndarray, coords: dict[str, np.ndarray],
                  sizes: dict[str, int]) -> TopologyView:
    """`gpu_of_rank[r]`: the GPU rank r runs on; `coords[axis][r]`: its mesh coordinate (tp, cp, dp, pp; ep,
    etp, edp for MoE); `sizes`: the degree of each axis (an axis of size 1 has no strip)."""
    gph = topo.gpus_per_host
    gpu_of_rank = np.asarray(gpu_of_rank, dtype=np.int64)
    num_ranks = len(gpu_of_rank)
    host_of_rank = gpu_of_rank // gph
    rank_on_gpu = np.full(topo.num_gpus, -1, dtype=np.int64)
    rank_on_gpu[gpu_of_rank] = np.arange(num_ranks)
    num_hosts = len(np.unique(host_of_rank))
    stage = np.flatnonzero(coords["pp"] == 0)
    stage_hosts = list(dict.fromkeys(host_of_rank[stage].tolist()))
    if num_hosts <= MAX_HOSTS:
        hosts = list(dict.fromkeys(host_of_rank.tolist()))
        caption = f"the whole job: {num_ranks:,} GPUs on {num_hosts} hosts"
    elif len(stage_hosts) <= MAX_HOSTS:
        hosts = stage_hosts
        caption = (f"a slice: the {len(hosts)} hosts of pipeline stage 1 of {sizes['pp']} ({len(stage):,} of "
                   f"{num_ranks:,} GPUs); the other stages repeat it on other hosts")
    else:
        hosts = stage_hosts[:MAX_HOSTS]
        caption = (f"a slice: the first {MAX_HOSTS} hosts (in rank order) of pipeline stage 1 of {sizes['pp']}, "
                   f"{MAX_HOSTS * gph:,} of the job's {num_ranks:,} GPUs on {num_hosts:,} hosts; DP groups "
                   f"continue past it")
    blocks = topo.block_of[:, np.array(hosts) * gph]  # level-j block of each drawn host
    order = sorted(range(len(hosts)), key=lambda k: (*blocks[::-1, k].tolist(), hosts[k]))
    hosts = [hosts[k] for k in order]
    blocks = blocks[:, order]
    # levels drawn as switch rows: the network tiers, and the scale-up domain where it holds several hosts
    drawn = [j for j in range(len(topo.levels)) if j > 0 or topo.levels[0].block_gpus > gph]
    x0 = [MARGIN + k * (COL_W + COL_GAP) for k in range(len(hosts))]
    width = MARGIN + len(hosts) * (COL_W + COL_GAP) + 10
    view = TopologyView(caption=caption, width=width, height=0)
    y = 8.0
    parents: dict[int, list[tuple[float, float, float]]] = {}
    for row, j in enumerate(reversed(drawn)):
        lv = topo.levels[j]
        view.texts.append(Text(8, y + 15, lv.name))
        runs = _runs(blocks[j])
        parents[j] = []
        for start, stop in runs:
            bx, bw = x0[start] - 2, x0[stop - 1] + COL_W + 2 - (x0[start] - 2)
            block = int(blocks[j, start])
            view.boxes.append(Rect(bx, y, bw, 22, fill="#f4f4f4", title=f"{lv.name} {block}",
                                   label=f"{lv.name} {block}" if bw >= 8 * len(f"{lv.name} {block}") else str(block)))
            parents[j].append((bx + bw / 2, y + 22, start))
            if row > 0:  # a line up to the box above that holds this one
                above = drawn[len(drawn) - row]
                px = next(cx for cx, _, s in reversed(parents[above]) if s <= start)
                view.lines.append(Line(bx + bw / 2, y, px, y - ROW_H + 22))
        y += ROW_H
    host_top = y + NAME_H
    for k, h in enumerate(hosts):
        name = topo.host_names[h]
        view.texts.append(Text(x0[k] + COL_W / 2 + 3, host_top - 4, name, rotate=True))
        if drawn:
            lowest = drawn[0]
            px = next(cx for cx, _, s in reversed(parents[lowest]) if s <= k)
            view.lines.append(Line(x0[k] + COL_W / 2, host_top - NAME_H + 2, px, host_top - NAME_H - ROW_H + 22 + 2))
    view.texts.append(Text(8, host_top - 4, "hosts"))
    y = host_top + 6
    axes = mesh_axes(coords)
    for axis, label in AXES:
        size = sizes.get(axis, 1)
        if size <= 1 or axis not in axes:
            continue
        key = np.zeros(num_ranks, dtype=np.int64)
        for other in axes[axis]:
            key = key * (int(coords[other].max()) + 1) + coords[other]
        colors: dict[int, str] = {}
        numbers: dict[int, int] = {}  # each group's number in the picture, 1 first
        view.texts.append(Text(8, y + 14, f"{label} groups"))
        view.texts.append(Text(8, y + 27, f"{size} GPUs each"))
        for k, h in enumerate(hosts):
            view.boxes.append(Rect(x0[k] - 1, y - 1, COL_W + 2, gph * CELL_H + 1, fill="none"))
            for g in range(gph):
                gpu = h * gph + g
                r = int(rank_on_gpu[gpu])
                cy = y + g * CELL_H
                if r < 0:
                    view.cells.append(Rect(x0[k], cy, COL_W, CELL_H - 1, fill=IDLE,
                                           title=f"{topo.host_names[h]} GPU {g}: not in the job"))
                    continue
                kk = int(key[r])
                colors.setdefault(kk, GROUP_COLORS[len(colors) % len(GROUP_COLORS)])
                numbers.setdefault(kk, len(numbers) + 1)
                where = " ".join(f"{a} {int(coords[a][r])}" for a in ("tp", "cp", "ep", "dp", "pp") if a in coords
                                 and sizes.get(a, 1) > 1)
                view.cells.append(Rect(x0[k], cy, COL_W, CELL_H - 1, fill=colors[kk], label=str(numbers[kk]),
                                       title=f"rank {r} on {topo.host_names[h]} GPU {g}: {where}"))
        total = num_ranks // size
        view.legend.append(f"{label}: {len(colors):,} of the job's {total:,} groups of {size} GPUs shown"
                           + ("" if len(colors) <= len(GROUP_COLORS) else
                              f" (colours repeat every {len(GROUP_COLORS)} groups; the numbers do not)"))
        y += gph * CELL_H + 14
    view.height = y + 4
    return view


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) runs of equal neighbouring values."""
    runs, start = [], 0
    for k in range(1, len(values) + 1):
        if k == len(values) or values[k] != values[start]:
            runs.append((start, k))
            start = k
    return runs
