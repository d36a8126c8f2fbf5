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


@dataclass(frozen=True)
class NodeLayout:
    group_bandwidth: dict[int, float]
    """Group size k -> per-GPU ring bandwidth of the worst group when the node is split into groups of
    k along `order` (raw link rate; the cluster's collective efficiency applies on top)."""
    order: dict[int, tuple[int, ...]]
    """Group size k -> physical GPU order (CUDA_VISIBLE_DEVICES) that realizes it."""


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


def node_layout(node: NodeTopo) -> NodeLayout:
    return _node_layout(node.links)


@lru_cache(maxsize=16)
def _node_layout(links: tuple[tuple[GpuLink, ...], ...]) -> NodeLayout:
    n = len(links)
    bw = np.array([[link_bandwidth(x) for x in row] for row in links])
    group_bw, order = {}, {}
    for k in range(2, n + 1):
        if n % k:
            continue
        best, best_split = -1.0, None
        for split in _partitions(tuple(range(n)), k):
            worst = min(ring_bandwidth(bw, g) for g in split)
            if worst > best:
                best, best_split = worst, split
        group_bw[k] = best
        order[k] = tuple(g for group in best_split for g in group)
    group_bw[1] = float("inf")
    order[1] = tuple(range(n))
    return NodeLayout(group_bandwidth=group_bw, order=order)
