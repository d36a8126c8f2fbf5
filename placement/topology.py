"""Topology: the cluster as a networkx graph of GPUs, hosts and switches, and the one question the
cost model asks of it: for a group of GPUs, how many members share a block at each level, and what
bandwidth and latency does each member get there.

Levels, innermost first: 0 = scale-up domain (NVLink), then one per switch tier (leaf, spine, core).
Traffic that leaves a level-(j-1) block but stays inside a level-j block moves at level j's
per-GPU bandwidth: NVLink at level 0, the NIC at the leaf, and the NIC divided by the product of the
oversubscription ratios of every tier below (reference costmodel.md §2a, oversubscribed all-to-all).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import networkx as nx
import numpy as np

from placement.errors import InputError
from placement.specs import AcceleratorSpec, ClusterSpec
from placement.specs.hardware import ScaleUpKind


@dataclass(frozen=True)
class Level:
    name: str
    block_gpus: int
    """GPUs in one block of this level (the last level: the whole cluster)."""
    bandwidth_bytes_per_s: float
    """Effective per-GPU, per-direction bandwidth for traffic crossing into this level (efficiency and
    oversubscription applied)."""
    latency_s: float


@dataclass(frozen=True)
class GroupSpan:
    """How one kind of group sits on the hierarchy (the worst-placed group of that kind).

    members_within[j] = most members of one group inside a single level-j block; the entry past the
    last level is the group size.
    """

    members_within: tuple[int, ...]

    @property
    def size(self) -> int:
        return self.members_within[-1]

    def top_level(self) -> int:
        """Index of the highest level the group spans (-1 for a single GPU)."""
        top = -1
        for j in range(len(self.members_within) - 1):
            if self.members_within[j] < self.size:
                top = j + 1
        return min(top, len(self.members_within) - 2) if top >= 0 else (0 if self.size > 1 else -1)


def _resolve_size(cluster: ClusterSpec, num_gpus: int | None, num_nodes: int | None) -> int:
    if num_gpus is not None and num_nodes is not None:
        raise InputError("give --gpus or --nodes, not both")
    if num_nodes is not None:
        if num_nodes < 1:
            raise InputError(f"--nodes {num_nodes}: must be at least 1")
        return num_nodes * cluster.gpus_per_node
    n = cluster.default_num_gpus if num_gpus is None else num_gpus
    if n < 1:
        raise InputError(f"--gpus {n}: must be at least 1")
    if n > cluster.gpus_per_node and n % cluster.gpus_per_node:
        raise InputError(
            f"--gpus {n} is not a whole number of {cluster.name} nodes ({cluster.gpus_per_node} GPUs each); "
            f"use {n // cluster.gpus_per_node * cluster.gpus_per_node} or "
            f"{(n // cluster.gpus_per_node + 1) * cluster.gpus_per_node}"
        )
    return n


class Topology:
    """A regular cluster: `num_gpus` GPUs of `cluster`'s design filled innermost-first."""

    def __init__(self, cluster: ClusterSpec, accelerator: AcceleratorSpec, num_gpus: int | None = None,
                 num_nodes: int | None = None) -> None:
        if accelerator.name != cluster.accelerator:
            raise InputError(
                f"cluster {cluster.name!r} names accelerator {cluster.accelerator!r} but "
                f"{accelerator.name!r} was given"
            )
        self.cluster = cluster
        self.accelerator = accelerator
        self.num_gpus = _resolve_size(cluster, num_gpus, num_nodes)
        self.levels = self._levels()

    # -- levels -----------------------------------------------------------------------------------

    def _levels(self) -> tuple[Level, ...]:
        c = self.cluster
        su = c.scale_up
        levels = [Level(su.name, min(su.size, self.num_gpus), su.bandwidth_bytes_per_s * su.collective_efficiency,
                        su.latency_s)]
        block = su.size
        derate = 1.0  # product of oversubscription ratios of the tiers below
        for tier in c.tiers:
            if block >= self.num_gpus:
                break
            block = self.num_gpus if tier.fanout is None else min(block * tier.fanout, self.num_gpus)
            bw = c.nic_bandwidth_bytes_per_s * c.nic_collective_efficiency / derate
            levels.append(Level(tier.name, block, bw, tier.latency_s))
            derate *= tier.oversubscription
        if block < self.num_gpus:
            top = c.tiers[-1]
            raise InputError(
                f"cluster {c.name!r}: its tiers cover {block} GPUs but {self.num_gpus} were asked for; "
                f"set the top tier ({top.name!r}) fanout to null so it spans the rest of the cluster"
            )
        return tuple(levels)

    def scale_up_bandwidth(self, members: int) -> float:
        """Per-GPU bandwidth of a collective over `members` GPUs of one scale-up domain."""
        su = self.cluster.scale_up
        if su.kind is ScaleUpKind.FULL_MESH and su.peer_bandwidth_bytes_per_s is not None:
            raw = min(su.bandwidth_bytes_per_s, max(members - 1, 1) * su.peer_bandwidth_bytes_per_s)
            return raw * su.collective_efficiency
        return self.levels[0].bandwidth_bytes_per_s

    @cached_property
    def block_of(self) -> np.ndarray:
        """block_of[j, g] = index of the level-j block holding GPU g (rank g under the default mapping)."""
        g = np.arange(self.num_gpus, dtype=np.int64)
        return np.stack([g // lv.block_gpus for lv in self.levels])

    # -- the graph --------------------------------------------------------------------------------

    @cached_property
    def graph(self) -> nx.Graph:
        """GPUs, hosts, scale-up switches and switch tiers, edges carrying bandwidth per direction."""
        c = self.cluster
        g = nx.Graph(name=c.name)
        n_hosts = -(-self.num_gpus // c.gpus_per_node)
        for h in range(n_hosts):
            g.add_node(f"host{h}", kind="host")
        for d in range(-(-self.num_gpus // self.levels[0].block_gpus)):
            g.add_node(f"{c.scale_up.name}{d}", kind="scale_up_switch", level=0)
        for gpu in range(self.num_gpus):
            name = f"gpu{gpu}"
            g.add_node(name, kind="gpu", host=gpu // c.gpus_per_node, local_gpu=gpu % c.gpus_per_node)
            g.add_edge(name, f"host{gpu // c.gpus_per_node}", kind="pcie")
            g.add_edge(name, f"{c.scale_up.name}{gpu // self.levels[0].block_gpus}", kind="scale_up",
                       bandwidth_bytes_per_s=c.scale_up.bandwidth_bytes_per_s)
        for j, lv in enumerate(self.levels[1:], start=1):
            below = self.levels[j - 1].block_gpus
            for b in range(-(-self.num_gpus // lv.block_gpus)):
                g.add_node(f"{lv.name}{b}", kind="switch", level=j)
            for b in range(-(-self.num_gpus // below)):
                child = f"{c.scale_up.name}{b}" if j == 1 else f"{self.levels[j - 1].name}{b}"
                g.add_edge(child, f"{lv.name}{b * below // lv.block_gpus}", kind="uplink",
                           bandwidth_bytes_per_s=lv.bandwidth_bytes_per_s)
        return g

    # -- spans ------------------------------------------------------------------------------------

    def span(self, stride: int, size: int) -> GroupSpan:
        """Span of the groups made of `size` ranks `stride` apart (a mesh axis under the default mapping)."""
        return _span(self._key, tuple(lv.block_gpus for lv in self.levels), self.num_gpus, stride, size)

    @property
    def _key(self) -> tuple:
        return (self.cluster.name, self.num_gpus)

    def describe(self) -> list[dict]:
        return [
            {"level": j, "name": lv.name, "block_gpus": lv.block_gpus,
             "bandwidth_bytes_per_s": lv.bandwidth_bytes_per_s, "latency_s": lv.latency_s}
            for j, lv in enumerate(self.levels)
        ]


@lru_cache(maxsize=4096)
def _span(_key: tuple, blocks: tuple[int, ...], num_gpus: int, stride: int, size: int) -> GroupSpan:
    within = []
    for block in blocks:
        if stride >= block:
            within.append(1)  # consecutive members are a block or more apart
        elif block % stride == 0 and (block % (stride * size) == 0 or (stride * size) % block == 0):
            within.append(min(size, block // stride))  # aligned: every group looks the same
        else:
            within.append(_span_exact(block, num_gpus, stride, size))
    within.append(size)
    return GroupSpan(tuple(within))


def _span_exact(block: int, num_gpus: int, stride: int, size: int) -> int:
    """Members of the worst-placed group inside one block, by listing every group (misaligned cases).

    Each group's count is its largest run of members sharing a block; the worst group is the one with
    the smallest such count (the most split), and it sets the pace of a synchronous collective.
    """
    ranks = np.arange(num_gpus, dtype=np.int64).reshape(-1, size, stride).transpose(0, 2, 1).reshape(-1, size)
    ids = np.sort(ranks // block, axis=1)
    starts = np.ones_like(ids, dtype=bool)
    starts[:, 1:] = ids[:, 1:] != ids[:, :-1]
    # every row opens with a run start, so no run crosses rows once flattened
    first = np.flatnonzero(starts.ravel())
    lengths = np.append(first[1:], ids.size) - first
    per_group = np.zeros(ids.shape[0], dtype=np.int64)
    np.maximum.at(per_group, first // size, lengths)
    return int(per_group.min())
