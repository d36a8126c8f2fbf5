"""Alpha-beta cost of collectives on a hierarchy, vectorized over candidates.

A group is described by `within` (K x (levels + 1)): within[:, j] is the most members of one group
inside one level-j block, the last column the group size.  Fan-out at level j is
f_j = within[:, j] / within[:, j-1] (within[:, -1] := 1).

- Reduce-scatter / all-gather run hierarchically: level j moves (f_j - 1)/f_j of the data still
  unreduced, S / within[:, j-1], at level j's bandwidth (reference costmodel.md §2a, "Hierarchical
  all-reduce"; nccl-tests PERF for the (n-1)/n factors).  The phases pipeline (NCCL rings with one
  channel per NIC), so the bandwidth term is the slowest phase; the measured B200 4-node case lands
  between this and the serialized sum (ml-engineering "Inter-node speed ...").
- All-reduce = reduce-scatter + all-gather: twice the bytes.  Latency is the cheaper of a
  hierarchical ring (one step per member per level) and NCCL's double binary tree (log2 of the
  members per level, NCCL tuning.cc), plus a base latency.
- All-to-all: bytes leaving a level-(j-1) block cross at level j, S * (1 - within[:, j-1]/n);
  the slowest level bounds it (injection bound with oversubscription, costmodel.md §2a).
"""

from __future__ import annotations

import numpy as np

from placement.cost.constants import COLLECTIVE_BASE_LATENCY_S
from placement.topology import Topology


class LevelArrays:
    """Per-level bandwidth and latency of a topology as arrays, plus the full-mesh scale-up rule."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.bw = np.array([lv.bandwidth_bytes_per_s for lv in topo.levels])
        self.lat = np.array([lv.latency_s for lv in topo.levels])
        self.num_levels = len(topo.levels)

    def bandwidth(self, within: np.ndarray) -> np.ndarray:
        """K x levels bandwidth; level 0 depends on how many members share the scale-up domain."""
        bw = np.broadcast_to(self.bw, (within.shape[0], self.num_levels)).copy()
        su = self.topo.cluster.scale_up
        if su.peer_bandwidth_bytes_per_s is not None and su.kind.value == "full_mesh":
            peers = np.maximum(within[:, 0] - 1, 1)
            bw[:, 0] = np.minimum(su.bandwidth_bytes_per_s, peers * su.peer_bandwidth_bytes_per_s) \
                * su.collective_efficiency
        return bw


def span_table(topo: Topology, stride: np.ndarray, size: np.ndarray) -> np.ndarray:
    """K x (levels + 1) members-within table for groups of `size` ranks `stride` apart."""
    pairs = np.stack([np.asarray(stride, dtype=np.int64), np.asarray(size, dtype=np.int64)], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    table = np.array([topo.span(int(s), int(n)).members_within for s, n in uniq], dtype=np.float64)
    return table[inverse.reshape(-1)]


def _fanout(within: np.ndarray) -> np.ndarray:
    prev = np.concatenate([np.ones((within.shape[0], 1)), within[:, :-2]], axis=1)
    return within[:, :-1] / prev, prev


def reduce_scatter_time(levels: LevelArrays, within: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Reduce-scatter (or all-gather) of a buffer of `nbytes` per member (the full, unsharded size)."""
    return _hierarchical(levels, within, nbytes, passes=1)


def all_reduce_time(levels: LevelArrays, within: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    return _hierarchical(levels, within, nbytes, passes=2)


def _hierarchical(levels: LevelArrays, within: np.ndarray, nbytes: np.ndarray, passes: int) -> np.ndarray:
    fan, prev = _fanout(within)
    bw = levels.bandwidth(within)
    phase = (nbytes[:, None] / prev) * (fan - 1.0) / fan / bw
    bandwidth_s = passes * phase.max(axis=1)
    ring_lat = passes * ((fan - 1.0) * levels.lat).sum(axis=1)
    tree_lat = passes * (np.log2(fan) * levels.lat).sum(axis=1)
    latency_s = np.minimum(ring_lat, tree_lat) + COLLECTIVE_BASE_LATENCY_S
    size = within[:, -1]
    return np.where(size > 1, bandwidth_s + latency_s, 0.0)


def all_to_all_time(levels: LevelArrays, within: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """All-to-all where each member sends `nbytes` in total, spread evenly over the group."""
    size = within[:, -1]
    bw = levels.bandwidth(within)
    _, prev = _fanout(within)
    leaving = np.empty_like(prev)
    leaving[:, 0] = (within[:, 0] - 1.0) / size  # to other members of its own scale-up domain
    leaving[:, 1:] = 1.0 - prev[:, 1:] / size   # out of its level-(j-1) block
    bandwidth_s = (nbytes[:, None] * leaving / bw).max(axis=1)
    top = _top_level(within)
    latency_s = levels.lat[top] + COLLECTIVE_BASE_LATENCY_S
    return np.where(size > 1, bandwidth_s + latency_s, 0.0)


def p2p_time(levels: LevelArrays, within_pair: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Send `nbytes` between two ranks: at the level of the lowest block holding both."""
    top = _top_level(within_pair)
    bw = levels.bandwidth(within_pair)[np.arange(within_pair.shape[0]), top]
    return np.where(within_pair[:, -1] > 1, nbytes / bw + levels.lat[top], 0.0)


def _top_level(within: np.ndarray) -> np.ndarray:
    """Lowest level whose block holds a whole group."""
    full = within[:, :-1] >= within[:, -1:]
    return np.argmax(full, axis=1)
