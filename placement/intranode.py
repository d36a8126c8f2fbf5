"""Inside one node: GPU-to-GPU bandwidth from `nvidia-smi topo -m`, the best ring for a group of k GPUs,
and the GPU order that puts each tensor-parallel group on its best-connected GPUs.

Per-link figures (per direction):
- NV#: # bonded links x 25 GB/s (NVLink 3 and 4: A100 12 links = 300 GB/s, H100 18 links = 450 GB/s,
  scaling-book gpus.md NVLink table).
- PIX, PXB: PCIe 4.0 x16, 24 GB/s (twice NCCL's 12 GB/s figure for Gen3 x16, src/graph/topo.h).
- PHB, NODE: the same PCIe link, but through the CPU's root complex; NCCL treats them alike.
- SYS: across the socket interconnect, 10 GB/s (NCCL's QPI/UPI figure for Skylake, topo.h).
A ring is as fast as its slowest hop, so a group's bandwidth is the best ring's bottleneck.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from placement.specs.fabric import GpuLink, LinkClass, NodeTopo

NVLINK_LINK_BYTES_PER_S = 25e9
PCIE_BYTES_PER_S = 24e9
SYS_BYTES_PER_S = 10e9


def link_bandwidth(link: GpuLink) -> float:
    if link.kind is LinkClass.NVLINK:
        return link.nvlinks * NVLINK_LINK_BYTES_PER_S
    if link.kind is LinkClass.SYS:
        return SYS_BYTES_PER_S
    if link.kind is LinkClass.SELF:
        return float("inf")
    return PCIE_BYTES_PER_S


def link_name(bytes_per_s: float) -> str:
    """The link class a raw per-GPU rate belongs to, for labels: "NVLink (N links)", "PCIe" or "SYS (across the
    CPU sockets)" (`link_bandwidth`'s figures)."""
    if bytes_per_s <= SYS_BYTES_PER_S:
        return "SYS (across the CPU sockets)"
    if bytes_per_s <= PCIE_BYTES_PER_S:
        return "PCIe"
    return f"NVLink ({bytes_per_s / NVLINK_LINK_BYTES_PER_S:g} links)"


def is_nvlink(bytes_per_s: float) -> bool:
    return bytes_per_s > PCIE_BYTES_PER_S


@dataclass(frozen=True)
class NodeLayout:
    group_bandwidth: dict[int, float]
    """Group size k -> per-GPU ring bandwidth of the worst group when the node is split into groups of
    k along `order` (raw link rate; the cluster's collective efficiency applies on top)."""
    order: dict[int, tuple[int, ...]]
    """Group size k -> physical GPU order (CUDA_VISIBLE_DEVICES) that realizes it."""
    in_order: dict[int, float] | None = None
    """Group size k -> the worst group's ring bandwidth when ranks run on the GPUs in their numbered order (groups
    0..k-1, k..2k-1, ...): what a job launched without CUDA_VISIBLE_DEVICES gets."""
    bandwidth: tuple[tuple[float, ...], ...] | None = None
    """The raw link rate between each pair of GPUs (`as_launched` prices a stated GPU order with it)."""
    best: dict[int, float] | None = None
    """Group size k -> the best split's worst ring (`group_bandwidth` before `as_launched`): what the node's links
    allow a group of k, whatever order a job runs its ranks in."""

    @property
    def best_bandwidth(self) -> dict[int, float]:
        return self.best if self.best is not None else self.group_bandwidth

    def as_launched(self, orders: list[tuple[int, ...]] | None = None) -> NodeLayout:
        """The layout a job gets that runs each node's ranks on its GPUs in one of `orders` (local rank i on GPU
        order[i]: CUDA_VISIBLE_DEVICES), each group of k consecutive ranks on the GPUs it lists, priced at the worst
        of them (None: the numbered order, `in_order`)."""
        if self.in_order is None:
            return self
        n = max(len(o) for o in self.order.values())
        if orders is None or self.bandwidth is None:
            orders = [tuple(range(n))]
        bw = np.array(self.bandwidth) if self.bandwidth is not None else None
        group = {k: min(self.in_order[k] if tuple(o) == tuple(range(n))
                        else _in_order_bandwidth(bw[np.ix_(o, o)], k, self.group_bandwidth[k]) for o in orders)
                 for k in self.group_bandwidth}
        return NodeLayout(group_bandwidth=group, order={k: tuple(orders[0]) for k in self.order},
                          in_order=dict(self.in_order), bandwidth=self.bandwidth, best=dict(self.best_bandwidth))


def ring_bandwidth(bw: np.ndarray, gpus: tuple[int, ...]) -> float:
    """Best ring bottleneck over the GPUs (exhaustive: k <= 8 in one node)."""
    if len(gpus) == 1:
        return float("inf")
    first, rest = gpus[0], gpus[1:]
    best = 0.0
    for perm in itertools.permutations(rest):
        if len(perm) > 1 and perm[0] > perm[-1]:
            continue  # a ring and its reverse are the same
        cycle = (first, *perm, first)
        best = max(best, min(bw[a, b] for a, b in itertools.pairwise(cycle)))
    return best


def _partitions(items: tuple[int, ...], k: int):
    """Every way to split `items` into groups of k (the first item always opens the first group)."""
    if not items:
        yield ()
        return
    head, rest = items[0], items[1:]
    for others in itertools.combinations(rest, k - 1):
        left = tuple(x for x in rest if x not in others)
        for tail in _partitions(left, k):
            yield ((head, *others), *tail)


def fabric_label(node: NodeTopo) -> str | None:
    """What a matrix's GPUs talk over, for labels: "pcie" (no NVLink: PCIe, through the CPU or across the
    sockets), "nvlink bridge" (NVLink between some GPUs, PCIe between the others), None where every pair is
    on NVLink (the node design's own scale-up fabric, named by the catalog)."""
    kinds = {link.kind for row in node.links for link in row if link.kind is not LinkClass.SELF}
    if not kinds or kinds == {LinkClass.NVLINK}:
        return None
    return "nvlink bridge" if LinkClass.NVLINK in kinds else "pcie"


def node_layout(node: NodeTopo) -> NodeLayout:
    return _node_layout(node.links)


EXHAUSTIVE_GPUS = 8
"""Nodes up to this many GPUs are split by trying every partition and ring (exact, instant); larger ones by
link-class thresholds (`_split_by_threshold`: components, matchings, CP-SAT), not by enumerating partitions,
whose number grows factorially."""


@lru_cache(maxsize=16)
def _node_layout(links: tuple[tuple[GpuLink, ...], ...]) -> NodeLayout:
    n = len(links)
    bw = np.array([[link_bandwidth(x) for x in row] for row in links])
    group_bw, order = {}, {}
    for k in range(2, n + 1):
        if n % k:
            continue
        if n > EXHAUSTIVE_GPUS:
            best, best_split = _split_by_threshold(bw, k)
        else:
            best, best_split = -1.0, None
            for split in _partitions(tuple(range(n)), k):
                worst = min(ring_bandwidth(bw, g) for g in split)
                if worst > best:
                    best, best_split = worst, split
        group_bw[k] = best
        order[k] = tuple(g for group in best_split for g in group)
    group_bw[1] = float("inf")
    order[1] = tuple(range(n))
    return NodeLayout(group_bandwidth=group_bw, order=order,
                      in_order={k: _in_order_bandwidth(bw, k, group_bw[k]) for k in group_bw},
                      bandwidth=tuple(tuple(float(x) for x in row) for row in bw))


def _in_order_bandwidth(bw: np.ndarray, k: int, best: float) -> float:
    """The worst ring bandwidth of the groups of k consecutive GPUs (0..k-1, k..2k-1, ...): the best ring of each
    where k is small enough to try every one (EXHAUSTIVE_GPUS), the ring in numbered order above it (a lower bound:
    NCCL may find a better one); the whole node is its best split."""
    n = bw.shape[0]
    if k == 1:
        return float("inf")
    if k == n:
        return best
    groups = [tuple(range(g, g + k)) for g in range(0, n, k)]
    if k <= EXHAUSTIVE_GPUS:
        return min(ring_bandwidth(bw, g) for g in groups)
    return min(min(bw[a, b] for a, b in itertools.pairwise((*g, g[0]))) for g in groups)


CP_SAT_SECONDS = 2.0
"""Deterministic time (CP-SAT's own unit, about seconds) one component's split may take; past it the threshold
counts as not reached, so the node is priced at a lower, reachable one (never faster than it is)."""


def _split_by_threshold(bw: np.ndarray, k: int) -> tuple[float, tuple[tuple[int, ...], ...]]:
    """(bottleneck, groups) of the best split of the node's GPUs into rings of k: the highest link bandwidth t
    such that the GPUs split into groups of k, each closing a ring over links of at least t.  Thresholds are
    tried from the highest (few: one per link class).  A ring cannot leave a connected component of the links
    at least t, so each component is split on its own: a component where every pair is linked (an NVSwitch
    node, a PCIe switch, a socket) in consecutive chunks; pairs by a perfect matching; any other shape by
    exhaustion up to EXHAUSTIVE_GPUS GPUs, or by CP-SAT.  Deterministic (one worker, fixed seed)."""
    n = len(bw)
    levels = sorted({float(bw[a, b]) for a in range(n) for b in range(n) if a != b}, reverse=True)
    for t in levels:
        groups = _split_at(bw >= t, k)
        if groups is not None:
            return t, groups
    raise AssertionError("at the lowest link bandwidth every pair of GPUs is linked: some split always exists")


def _split_at(ok: np.ndarray, k: int) -> tuple[tuple[int, ...], ...] | None:
    """Groups of k GPUs, each a ring over the links `ok` allows, or None when there is none."""
    import networkx as nx

    n = len(ok)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((a, b) for a in range(n) for b in range(a + 1, n) if ok[a, b])
    out: list[tuple[int, ...]] = []
    for comp in sorted(nx.connected_components(graph), key=min):
        nodes = sorted(comp)
        if len(nodes) % k:
            return None
        sub = ok[np.ix_(nodes, nodes)] | np.eye(len(nodes), dtype=bool)
        if sub.all():  # every pair linked: any k of them close a ring
            out += [tuple(nodes[i:i + k]) for i in range(0, len(nodes), k)]
            continue
        if k == 2:  # a ring of two is a link used both ways: a perfect matching of the component
            pairs = nx.max_weight_matching(graph.subgraph(nodes), maxcardinality=True)
            if 2 * len(pairs) < len(nodes):
                return None
            out += sorted(tuple(sorted(p)) for p in pairs)
            continue
        groups = _split_small(sub, k) if len(nodes) <= EXHAUSTIVE_GPUS else _split_component_cp_sat(sub, k)
        if groups is None:
            return None
        out += [tuple(nodes[i] for i in grp) for grp in groups]
    return tuple(sorted(out))


def _split_small(ok: np.ndarray, k: int) -> tuple[tuple[int, ...], ...] | None:
    """Exhaustively: the first split into groups of k that each close a ring over allowed links."""
    allowed = np.where(ok, 1.0, 0.0)
    for split in _partitions(tuple(range(len(ok))), k):
        if all(ring_bandwidth(allowed, grp) > 0 for grp in split):
            return split
    return None


def _split_component_cp_sat(ok: np.ndarray, k: int) -> tuple[tuple[int, ...], ...] | None:
    """CP-SAT: groups of k (k >= 3) of one component, each a ring over allowed links; None when infeasible or
    not decided within CP_SAT_SECONDS."""
    from ortools.sat.python import cp_model

    n = len(ok)
    g = n // k
    m = cp_model.CpModel()
    member = [[m.NewBoolVar(f"in_{i}_{j}") for j in range(g)] for i in range(n)]
    # each GPU in exactly one group, each group k GPUs
    for i in range(n):
        m.AddExactlyOne(member[i])
    for j in range(g):
        m.Add(sum(member[i][j] for i in range(n)) == k)
    # symmetry: GPU i sits in a group numbered at most i (groups are interchangeable)
    for i in range(n):
        for j in range(i + 1, g):
            m.Add(member[i][j] == 0)
    # each group closes a ring over allowed links through exactly its members (the others take self-loops)
    for j in range(g):
        arcs = [(i, i, member[i][j].Not()) for i in range(n)]
        for a in range(n):
            for b in range(n):
                if a != b and ok[a, b]:
                    lit = m.NewBoolVar(f"arc_{j}_{a}_{b}")
                    m.AddImplication(lit, member[a][j])
                    m.AddImplication(lit, member[b][j])
                    arcs.append((a, b, lit))
        m.AddCircuit(arcs)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = CP_SAT_SECONDS
    if solver.Solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return tuple(tuple(i for i in range(n) if solver.Value(member[i][j])) for j in range(g))
