"""Alpha-beta cost of collectives on a hierarchy, vectorized over candidates.

A group is described by `within` (K x (levels + 1)): within[:, j] is the most members of one group
inside one level-j block, the last column the group size.  Fan-out at level j is
f_j = within[:, j] / within[:, j-1] (within[:, -1] := 1).

- Reduce-scatter / all-gather run hierarchically: level j moves (f_j - 1)/f_j of the data still
  unreduced, S / within[:, j-1], at level j's bandwidth (reference costmodel.md §2a, "Hierarchical
  all-reduce"; nccl-tests PERF for the (n-1)/n factors).  The phases are summed (serialized): the
  measured B200 4-node all-reduce, 22.05 ms, lies nearer the serialized model (26.25 ms) than the fully
  overlapped one (16.1 ms) (ml-engineering "Inter-node speed depends on intra-node speed").
- An oversubscribed level is shared by the GPUs of a block that send across it: with only a share f
  of them crossing (a few split groups), each gets bandwidth * ratio / max(1, ratio * f).
  A cluster's `hierarchical_serial_share` (1 by default; `placement calibrate` fits it from nccl-tests) moves
  the summed phases towards the slowest level alone: NCCL's rings across 8-NIC H100 nodes reach 392 GB/s
  busbw on 2 nodes (nccl-tests#309), which only overlapped phases reproduce.
- All-reduce = reduce-scatter + all-gather: twice the bytes.  Its latency is the cheaper of NCCL's
  ring (2 (n - 1) steps, each at the level its two members meet, a step inside a node of a ring that
  spans nodes at no less than the network overhead, NCCL_NET_OVERHEAD_S) and its double binary tree (log2 of
  the members per level, NCCL tuning.cc), plus a base latency; a reduce-scatter's or all-gather's is the
  ring's n - 1 steps, which is all NCCL runs them as at bucket sizes (tuning.cc: its tree is the
  all-reduce's alone; PAT, NCCL 2.23's log-step all-gather for one rank a node, is for small messages).
- Point-to-point along a group (pipeline stages): only the members with a neighbour in another block send
  across its uplinks, so f is that share (a boundary stage per block, both ends for a middle block or an
  interleaved pipeline's wrap-around from the last stage to the first).
- All-to-all: bytes leaving a level-(j-1) block cross at level j, S * (1 - within[:, j-1]/n);
  the slowest level bounds it (injection bound with oversubscription, costmodel.md §2a).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from placement.cost.constants import COLLECTIVE_BASE_LATENCY_S, NCCL_NET_OVERHEAD_S
from placement.topology import Topology


class LevelArrays:
    """Per-level bandwidth and latency of a topology as arrays, plus the full-mesh scale-up rule."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.bw = np.array([lv.bandwidth_bytes_per_s for lv in topo.levels])
        self.oversub = np.array([lv.oversubscription for lv in topo.levels])
        self.lat = np.array([lv.latency_s for lv in topo.levels])
        self.num_levels = len(topo.levels)

    def bandwidth(self, within: np.ndarray, crossing: np.ndarray | None = None) -> np.ndarray:
        """U x levels bandwidth; level 0 depends on how many members share the scale-up domain, and an
        oversubscribed level is shared only by the share `crossing` of GPUs that send across it."""
        bw = np.broadcast_to(self.bw, (within.shape[0], self.num_levels)).copy()
        node = self.topo.node_layout
        if node is not None:  # measured intra-node links: the best ring of that many GPUs in a node
            sizes = np.array(sorted(k for k in node.group_bandwidth if k > 1))
            pick = sizes[np.minimum(np.searchsorted(sizes, within[:, 0]), len(sizes) - 1)]
            ring = np.array([node.group_bandwidth[int(k)] for k in pick])
            bw[:, 0] = np.minimum(ring * self.topo.cluster.scale_up.collective_efficiency, bw[:, 0])
        if crossing is not None:
            bw = bw * self.oversub / np.maximum(1.0, self.oversub * crossing)
        su = self.topo.cluster.scale_up
        if su.peer_bandwidth_bytes_per_s is not None and su.kind.value == "full_mesh":
            peers = np.maximum(within[:, 0] - 1, 1)
            bw[:, 0] = np.minimum(su.bandwidth_bytes_per_s, peers * su.peer_bandwidth_bytes_per_s) \
                * su.collective_efficiency
        return bw


@lru_cache(maxsize=8)
def _divisors(n: int) -> np.ndarray:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return np.array(sorted(set(small + [n // d for d in small])), dtype=np.int64)


def _unique_pairs(stride: np.ndarray, size: np.ndarray, num_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(stride * (num_gpus + 1) + size, return_inverse=True), in O(K) when every stride and size
    divides the GPU count (they do for mesh axes): each pair becomes (divisor index, divisor index), a
    slot in a small table, instead of a sort of K keys.  Same sorted keys, same inverse."""
    divs = _divisors(num_gpus)
    n = divs.size
    i_stride = np.minimum(np.searchsorted(divs, stride), n - 1)
    i_size = np.minimum(np.searchsorted(divs, size), n - 1)
    if n * n > 1 << 22 or not (np.array_equal(divs[i_stride], stride) and np.array_equal(divs[i_size], size)):
        return np.unique(stride * (num_gpus + 1) + size, return_inverse=True)
    slot = i_stride * n + i_size  # ordered as key is: stride first, then size (size <= num_gpus)
    present = np.zeros(n * n, dtype=bool)
    present[slot] = True
    used = np.flatnonzero(present)
    index_of_slot = np.cumsum(present) - 1
    return divs[used // n] * (num_gpus + 1) + divs[used % n], index_of_slot[slot]


class Groups:
    """One kind of group (a mesh axis) for K candidates: `size` ranks `stride` apart.

    Every collective's time is linear in its bytes, time = bytes * coef + latency, with coef and
    latency set by where the group sits; they are computed once per distinct (stride, size) and
    gathered back, so pricing K candidates costs O(K) arithmetic.
    """

    def __init__(self, levels: LevelArrays, stride: np.ndarray, size: np.ndarray, pair: bool = False) -> None:
        topo = levels.topo
        stride = np.asarray(stride, dtype=np.int64)
        size = np.asarray(size, dtype=np.int64)
        uniq, inverse = _unique_pairs(stride, size, topo.num_gpus)
        spans = [topo.span(int(k // (topo.num_gpus + 1)), int(k % (topo.num_gpus + 1))) for k in uniq]
        within = np.array([sp.members_within for sp in spans], dtype=np.float64)
        least = np.array([sp.members_least or sp.members_within for sp in spans], dtype=np.float64)
        self.crossing = np.array([sp.crossing for sp in spans], dtype=np.float64)
        self.load = np.array([sp.load for sp in spans], dtype=np.float64)
        # point-to-point along the group: only members next to a block boundary send across it
        self.chain_crossing = np.array([sp.chain_crossing or sp.crossing for sp in spans], dtype=np.float64)
        self.ring_crossing = np.array([sp.ring_crossing or sp.crossing for sp in spans], dtype=np.float64)
        if pair:  # neighbours share a block exactly when the whole group does (else some pair crosses)
            within = np.where(within >= within[:, -1:], 2.0, 1.0) * (within[:, -1:] > 1) + (within[:, -1:] == 1)
        self.levels = levels
        self.within = within
        self.least = within if pair else least
        self.inverse = inverse.reshape(-1)
        self.single = within[:, -1] <= 1

    def _linear(self, coef: np.ndarray, lat: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        coef = np.where(self.single, 0.0, coef)[self.inverse]
        lat = np.where(self.single, 0.0, lat)[self.inverse]
        return nbytes * coef + lat

    def _hierarchical(self, passes: int) -> tuple[np.ndarray, np.ndarray]:
        lv, within = self.levels, self.within
        prev = np.concatenate([np.ones((within.shape[0], 1)), within[:, :-2]], axis=1)
        fan = within[:, :-1] / prev
        bandwidth = lv.bandwidth(within, self.crossing)
        serial = lv.topo.cluster.hierarchical_serial_share

        def chain(pieces: np.ndarray) -> np.ndarray:
            # after the levels below, each of the k members of a group's piece in a level-(j-1) block holds 1/k of
            # the buffer and sends (1 - k/K) of it across level j to the K members of the piece above
            # (costmodel.md section 2a, hierarchical all-reduce)
            below = np.concatenate([np.ones((pieces.shape[0], 1)), pieces[:, :-2]], axis=1)
            terms = passes * np.maximum(1.0 - below / pieces[:, :-1], 0.0) / below / bandwidth
            coef = terms.sum(axis=1)
            if serial < 1.0:  # pipelined levels overlap: between the sum and the slowest level (calibrated)
                coef = serial * coef + (1.0 - serial) * terms.max(axis=1)
            return coef

        # the pieces' blocks run their levels side by side: the group waits for the slower of the chain of its
        # largest pieces and the chain of its smallest, which on an uneven split (8 + 56 GPUs of two leaves)
        # sends 7/64 of the buffer per member across the level above where the largest sends 1/448 (a user trial:
        # pricing the largest alone made a 1 + 7 node split of two oversubscribed leaves cheaper than 4 + 4); on
        # an even split the two are one chain, and at equal bandwidths both sum to a flat ring's bytes
        coef = np.maximum(chain(within), chain(self.least))
        # NCCL's ring: one step per member but one (an all-reduce's twice), each at the latency of the lowest level
        # holding both members it joins, so n / within[j-1] - n / within[j] of them at level j (tuning.cc: nsteps -
        # nInterSteps at the intra-node latency, nInterSteps = nNodes - 1 at the network's)
        size = within[:, -1:]
        blocks = size / within[:, :-1]
        # a ring across nodes pays the proxy's network overhead on its steps inside a node as well (tuning.cc:
        # intraLat = max(intraLat, netOverhead) where nNodes > 1)
        step_lat = np.broadcast_to(lv.lat, blocks.shape).copy()
        step_lat[:, 0] = np.where(blocks[:, 0] > 1, np.maximum(step_lat[:, 0], NCCL_NET_OVERHEAD_S), step_lat[:, 0])
        ring_lat = passes * ((np.concatenate([size, blocks[:, :-1]], axis=1) - blocks) * step_lat).sum(axis=1)
        if passes == 1:  # a reduce-scatter or an all-gather: NCCL's ring (module docstring)
            return coef, ring_lat + COLLECTIVE_BASE_LATENCY_S
        tree_lat = passes * (np.log2(fan) * lv.lat).sum(axis=1)
        return coef, np.minimum(ring_lat, tree_lat) + COLLECTIVE_BASE_LATENCY_S

    def reduce_scatter(self, nbytes: np.ndarray) -> np.ndarray:
        """Reduce-scatter (or all-gather) of a buffer of `nbytes` per member (the full, unsharded size)."""
        return self._linear(*self._hierarchical(1), nbytes)

    def all_reduce(self, nbytes: np.ndarray) -> np.ndarray:
        return self._linear(*self._hierarchical(2), nbytes)

    def all_to_all(self, nbytes: np.ndarray, beyond_domain: np.ndarray | float = 1.0,
                   inside_domain: np.ndarray | float = 1.0) -> np.ndarray:
        """All-to-all where each member sends `nbytes` in total, spread evenly over the group.

        `beyond_domain` scales the bytes that leave the scale-up domain (per candidate): MoE dispatch
        with group-limited routing, or DeepEP, sends a token once per target node, then fans out over
        NVLink; `inside_domain` scales the bytes inside it (DeepEP: once per target GPU, not per expert)."""
        lv, within = self.levels, self.within
        size = within[:, -1:]
        # out of its level-(j-1) block: a member of the group's smallest piece there sends the most (8 + 24 GPUs
        # over two racks: 24/32 of its bytes leave from the 8-GPU piece, 8/32 from the other; a review)
        prev = np.concatenate([np.ones((within.shape[0], 1)), self.least[:, :-2]], axis=1)
        leaving = np.concatenate([(within[:, :1] - 1.0) / size,  # to the rest of its scale-up domain
                                  1.0 - prev[:, 1:] / size], axis=1)
        # a level is bound by the worst member's own bytes or, when oversubscribed, by the bytes all
        # members of the most loaded block push through its uplinks: max(leave, ratio * load) / bw
        raw = lv.bandwidth(within) * lv.oversub
        demand = np.maximum(leaving, lv.oversub * self.load)
        demand[:, 0] = leaving[:, 0]
        inside = demand[:, 0] / raw[:, 0]
        beyond = (demand[:, 1:] / raw[:, 1:]).max(axis=1) if demand.shape[1] > 1 else np.zeros_like(inside)
        lat = lv.lat[self._top()] + COLLECTIVE_BASE_LATENCY_S
        inside, beyond, lat = (np.where(self.single, 0.0, x)[self.inverse] for x in (inside, beyond, lat))
        return nbytes * np.maximum(inside * inside_domain, beyond * beyond_domain) + lat

    def p2p(self, nbytes: np.ndarray, wrap: np.ndarray | bool = False) -> np.ndarray:
        """Send `nbytes` between neighbouring members (member i to i + 1; with `wrap`, per candidate, the last
        to the first too), at the slowest level a hop crosses up to the lowest block holding the whole group:
        each level's oversubscribed uplinks shared by the members next to one of its block boundaries (not every
        member of a split group).  A hop across a spine also crosses the leaf uplinks below it: a user trial found
        a 2:1 leaf priced at full rate wherever a non-blocking spine sat above it."""
        top = self._top()
        lat = self.levels.lat[top]
        chain = self._linear(1.0 / self._slowest(self.chain_crossing, top), lat, nbytes)
        if not np.any(wrap):
            return chain
        ring = self._linear(1.0 / self._slowest(self.ring_crossing, top), lat, nbytes)
        return np.where(wrap, ring, chain)

    def _slowest(self, crossing: np.ndarray, top: np.ndarray) -> np.ndarray:
        """Per group, the lowest bandwidth of the levels its hops cross: the network levels up to `top` (the
        scale-up level itself only where the group lies in one domain), each shared by its own crossing share."""
        bw = self.levels.bandwidth(self.within, crossing)
        level = np.arange(bw.shape[1])[None, :]
        crossed = ((level >= 1) & (level <= top[:, None])) | (level == top[:, None])
        return np.where(crossed, bw, np.inf).min(axis=1)

    def _top(self) -> np.ndarray:
        """Lowest level whose block holds a whole group."""
        return np.argmax(self.within[:, :-1] >= self.within[:, -1:], axis=1)
