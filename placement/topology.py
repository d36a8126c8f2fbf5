"""Topology: the cluster as a networkx graph of GPUs, hosts and switches, and the one question the
cost model asks of it: for a group of GPUs, how many members share a block at each level, and what
bandwidth and latency does each member get there.

Levels, innermost first: 0 = scale-up domain (NVLink), then one per switch tier (leaf, spine, core).
Traffic that leaves a level-(j-1) block but stays inside a level-j block moves at level j's
per-GPU bandwidth: NVLink at level 0, the NIC at the leaf, and the NIC divided by the product of the
oversubscription ratios of every tier below (reference costmodel.md §2a, oversubscribed all-to-all).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Final

import networkx as nx
import numpy as np

from placement.errors import InputError
from placement.intranode import NodeLayout, fabric_label, link_name, node_layout
from placement.specs import AcceleratorSpec, ClusterSpec
from placement.specs.fabric import NodeTopo
from placement.specs.hardware import ScaleUpKind


@dataclass(frozen=True)
class Level:
    name: str
    block_gpus: int
    """GPUs in one block of this level (the last level: the whole cluster)."""
    bandwidth_bytes_per_s: float
    """Per-GPU, per-direction bandwidth for traffic crossing into this level when every GPU below sends
    across it (efficiency and oversubscription applied)."""
    latency_s: float
    oversubscription: float = 1.0
    """Product of the oversubscription ratios of the tiers below: when only a fraction f of the GPUs
    of a block send across, each gets bandwidth * oversubscription / max(1, oversubscription * f)."""


@dataclass(frozen=True)
class GroupSpan:
    """How one kind of group sits on the hierarchy (the worst-placed group of that kind).

    members_within[j] = most members of one group inside a single level-j block; the entry past the
    last level is the group size.  For the traffic crossing into level j (j >= 1), i.e. leaving
    level-(j-1) blocks, `crossing[j]` is the largest share of a block's GPUs whose group reaches
    outside it, and `load[j]` the largest mean share of their bytes that leaves it (all-to-all);
    both are 1 for a fully loaded block, less where only some groups are split.
    """

    members_within: tuple[int, ...]
    crossing: tuple[float, ...] = ()
    load: tuple[float, ...] = ()
    chain_crossing: tuple[float, ...] = ()
    """Like `crossing`, for point-to-point traffic along the group in member order (pipeline stages): the
    largest share of a block's GPUs with a neighbouring member (previous or next) outside the block; only
    the ranks at a stage boundary that leaves the block send across its uplinks."""
    ring_crossing: tuple[float, ...] = ()
    """`chain_crossing` with the last member also a neighbour of the first (an interleaved pipeline sends
    from the last stage back to the first)."""
    members_least: tuple[int, ...] = ()
    """members_least[j] = fewest members of one group inside a level-j block that holds any (the worst group's):
    where a group is split unevenly, the members of its smallest piece hold the largest shards after the levels
    below and send them across the level above (() : as members_within)."""

    @property
    def size(self) -> int:
        return self.members_within[-1]

    def top_level(self) -> int:
        """Lowest level whose block holds a whole group (-1 for a single GPU)."""
        if self.size <= 1:
            return -1
        return next(j for j, c in enumerate(self.members_within[:-1]) if c >= self.size)


MAX_GPUS: Final = 1 << 20
"""Largest GPU count planned (1,048,576, far above any cluster built so far): the search, the mapping and
the rank table hold arrays of this length, so a typo such as --gpus 10000000000 is refused, not run out of memory."""


def _check_max(num_gpus: int, what: str) -> None:
    if num_gpus > MAX_GPUS:
        raise InputError(
            f"{what}: {num_gpus:,} GPUs is more than the {MAX_GPUS:,} placement plans (far above any cluster "
            f"built so far); check the number for a typo"
        )


def _resolve_size(cluster: ClusterSpec, num_gpus: int | None, num_nodes: int | None) -> int:
    if num_gpus is not None and num_nodes is not None:
        raise InputError("give --gpus or --nodes, not both")
    if num_nodes is not None:
        if num_nodes < 1:
            raise InputError(f"--nodes {num_nodes}: must be at least 1")
        _check_max(num_nodes * cluster.gpus_per_node,
                   f"--nodes {num_nodes} x {cluster.gpus_per_node} GPUs per {cluster.name} node")
        return num_nodes * cluster.gpus_per_node
    n = cluster.default_num_gpus if num_gpus is None else num_gpus
    # the value as the user gave it: the flag, or the cluster file's default (a user trial was told "--gpus 1020",
    # which it never passed)
    said = f"--gpus {n}" if num_gpus is not None else f"cluster {cluster.name!r} default_num_gpus {n} (no --gpus given)"
    if n < 1:
        raise InputError(f"{said}: must be at least 1")
    _check_max(n, said)
    if n > cluster.gpus_per_node and n % cluster.gpus_per_node:
        raise InputError(
            f"{said} is not a whole number of {cluster.name} nodes ({cluster.gpus_per_node} GPUs each); "
            f"use {n // cluster.gpus_per_node * cluster.gpus_per_node} or "
            f"{(n // cluster.gpus_per_node + 1) * cluster.gpus_per_node}"
        )
    return n


def _segment_divisors(num_nodes: int, nodes_per_domain: int) -> str:
    fits = [d for d in range(1, min(num_nodes, nodes_per_domain) + 1) if num_nodes % d == 0]
    return ", ".join(map(str, fits))


def _resolve_segment(cluster: ClusterSpec, num_gpus: int, segment_nodes: int | None) -> int | None:
    """The job's segment in nodes, or None when its GPUs fill scale-up domains whole.

    SLURM's topology/block plugin allocates `sbatch --segment N` jobs as runs of N contiguous nodes, each
    run inside one block (an NVL72 rack), and requires the node count to be a multiple of N.  An explicit
    segment that breaks a rule is an InputError.  Without one, the job takes the largest divisor of its node
    count up to the cluster's `segment_nodes`, as Megatron-Bridge's launcher does.
    """
    gph = cluster.gpus_per_node
    nodes_per_domain = cluster.scale_up.size // gph
    if segment_nodes is None:
        # Megatron-Bridge's executor passes the largest divisor of the node count up to the rack's trays
        # (scripts/performance/utils/executors.py): 64 trays -> 16, 144 -> 18
        most = cluster.segment_nodes
        if most is None or num_gpus % gph:
            return None
        nodes = num_gpus // gph
        default = max(d for d in range(1, min(most, nodes) + 1) if nodes % d == 0)
        return None if default == nodes_per_domain or default == nodes else default
    if segment_nodes < 0:
        raise InputError(f"--segment {segment_nodes}: a segment is a number of nodes, at least 1 (0 = no segment)")
    if segment_nodes == 0:
        return None
    if nodes_per_domain <= 1:
        raise InputError(
            f"--segment {segment_nodes}: a {cluster.name} scale-up domain ({cluster.scale_up.size} GPUs) is no "
            f"more than one node ({gph} GPUs), so each node is already a segment of its own; --segment is for "
            f"clusters whose NVLink domain spans several nodes (GB200 NVL72): drop it"
        )
    if num_gpus % gph:
        raise InputError(
            f"--segment {segment_nodes}: the job's {num_gpus} GPUs are less than one {cluster.name} node "
            f"({gph} GPUs), and a segment is whole nodes: drop --segment or ask for {gph} GPUs"
        )
    num_nodes = num_gpus // gph
    fits = _segment_divisors(num_nodes, nodes_per_domain)
    if segment_nodes > nodes_per_domain:
        raise InputError(
            f"--segment {segment_nodes}: {segment_nodes} nodes x {gph} GPUs = {segment_nodes * gph} GPUs is more "
            f"than one {cluster.name} NVLink domain holds ({cluster.scale_up.size} GPUs = {nodes_per_domain} "
            f"nodes), and a segment lies inside one domain; use a divisor of the job's {num_nodes} nodes that "
            f"fits: {fits}"
        )
    if num_nodes % segment_nodes:
        raise InputError(
            f"--segment {segment_nodes}: the job's {num_nodes} nodes are not a whole number of {segment_nodes}-node "
            f"segments (SLURM requires the node count to be a multiple of --segment); use a divisor of "
            f"{num_nodes} that fits one {cluster.name} NVLink domain ({nodes_per_domain} nodes): {fits}"
        )
    return segment_nodes


class Topology:
    """GPUs on a hierarchy of levels, and where each rank runs.

    Built two ways: `Topology(cluster, accelerator, num_gpus)` is a regular cluster of the catalog
    design filled innermost-first (blocks by arithmetic); `Topology.from_hosts(...)` is a real
    allocation (leaves of different sizes, hosts left out), with each GPU's block at every level
    listed explicitly.  `with_mapping(gpu_of_rank)` returns the same machine with ranks placed on
    chosen GPUs; every group span is then counted on the GPUs its ranks really run on.
    """

    def __init__(self, cluster: ClusterSpec, accelerator: AcceleratorSpec, num_gpus: int | None = None,
                 num_nodes: int | None = None, segment_nodes: int | None = None) -> None:
        """`segment_nodes` is the job's SLURM segment (`sbatch --segment`): None takes the cluster's
        default, 0 fills scale-up domains whole (no segment), N > 0 lays the job out as runs of N nodes,
        each inside one scale-up domain."""
        if accelerator.name != cluster.accelerator and not _names_file(cluster.accelerator, accelerator):
            raise InputError(
                f"cluster {cluster.name!r} names accelerator {cluster.accelerator!r} but "
                f"{accelerator.name!r} was given"
            )
        self.cluster = cluster
        self.accelerator = accelerator
        self.num_gpus = _resolve_size(cluster, num_gpus, num_nodes)
        self.segment_nodes: int | None = _resolve_segment(cluster, self.num_gpus, segment_nodes)
        """Nodes per segment the job's GPUs are laid out in (None: scale-up domains filled whole)."""
        self.levels = self._levels()
        n_hosts = -(-self.num_gpus // cluster.gpus_per_node)
        self.host_names: tuple[str, ...] = tuple(f"host{h}" for h in range(n_hosts))
        self._explicit_blocks: np.ndarray | None = None
        self.gpu_of_rank: np.ndarray | None = None
        self.node_layout: NodeLayout | None = None
        self.node_topo_source: str | None = None
        """The `nvidia-smi topo -m` file the in-node links come from (`with_node_topo`), else None."""
        self.node_topo_note: str | None = None
        """Where the --node-topo matrix contradicts the node type's scale-up fabric (`_node_topo_note`)."""
        self.link_speeds: tuple[int, ...] = ()
        """The `LinkSpeed=` values of the SLURM tree topology.conf a real allocation was read from (read, not priced:
        SLURM gives them no unit); empty otherwise."""
        self.slurm_choice: str | None = None
        """Which topology of a SLURM topology.yaml the allocation was read from, in words (SlurmTree.choice)."""
        self.slurm_rank_order: tuple[tuple[str, ...], str] | None = None
        """The job's hosts as SLURM numbers them under slurm.conf's TopologyParam=SwitchAsNodeRank (a tree file) or
        BlockAsNodeRank (a block file): leaf switch by leaf switch (block by block) in the file's order, by name
        inside one; with the words saying so.  None where the allocation was not read from a SLURM topology."""
        self.slurm_rank_order_on: str | None = None
        """Where the cluster's slurm.conf (audit --slurm-conf) turns that ranking on: its `FILE:LINE:
        TopologyParam=...`, so SLURM numbers the job's nodes in `slurm_rank_order`; None where no slurm.conf says
        so (by name, or not read)."""
        self.slurm_conf_source: str | None = None
        """What the cluster's slurm.conf given to the audit sets (`FILE:LINE: TopologyParam=...`, or that it sets
        none); None where no slurm.conf was given."""
        self._span_cache: dict[tuple[int, int], GroupSpan] = {}

    @classmethod
    def from_hosts(cls, cluster: ClusterSpec, accelerator: AcceleratorSpec, host_names: list[str],
                   host_blocks: np.ndarray, levels: tuple[Level, ...], segment_nodes: int | None = None) -> Topology:
        """A real allocation: `host_blocks[j, h]` is the level-j block (scale-up domain, leaf, ...) of
        host h; hosts are in allocation order and each holds `cluster.gpus_per_node` GPUs.  `segment_nodes`
        records the segment the job was allocated with (checked by the caller against the blocks)."""
        _check_max(len(host_names) * cluster.gpus_per_node,
                   f"{len(host_names)} hosts x {cluster.gpus_per_node} GPUs per {cluster.name} node")
        topo = cls.__new__(cls)
        topo.cluster = cluster
        topo.accelerator = accelerator
        topo.num_gpus = len(host_names) * cluster.gpus_per_node
        topo.levels = levels
        topo.host_names = tuple(host_names)
        topo.segment_nodes = segment_nodes
        gpu_host = np.arange(topo.num_gpus) // cluster.gpus_per_node
        topo._explicit_blocks = np.asarray(host_blocks, dtype=np.int64)[:, gpu_host]
        topo.gpu_of_rank = None
        topo.node_layout = None
        topo.node_topo_source = None
        topo.node_topo_note = None
        topo.link_speeds = ()
        topo.slurm_choice = None
        topo.slurm_rank_order = None
        topo.slurm_rank_order_on = None
        topo.slurm_conf_source = None
        topo._span_cache = {}
        return topo

    def with_mapping(self, gpu_of_rank: np.ndarray) -> Topology:
        """The same machine with rank r running on GPU gpu_of_rank[r]."""
        other = copy.copy(self)
        other.gpu_of_rank = np.asarray(gpu_of_rank, dtype=np.int64)
        other._span_cache = {}
        return other

    def flattened(self) -> Topology:
        """The same hosts with every level above the scale-up domain as fast as its fastest one (bandwidth,
        latency, oversubscription): no host order can price below this machine, and every host order prices
        the same on it (node blocks stay whole), so its step bounds the mapped step from below.  Only where the
        scale-up domain is one host (`scale_up_spans_hosts`: otherwise the host order decides which hosts share
        it, and no flattened machine bounds that)."""
        if len(self.levels) <= 2:
            return self
        up = self.levels[1:]
        best = dict(bandwidth_bytes_per_s=max(lv.bandwidth_bytes_per_s for lv in up),
                    latency_s=min(lv.latency_s for lv in up), oversubscription=min(lv.oversubscription for lv in up))
        other = copy.copy(self)
        other.levels = (self.levels[0], *(dataclasses.replace(lv, **best) for lv in up))
        other._span_cache = {}
        return other

    @property
    def scale_up_spans_hosts(self) -> bool:
        """The scale-up domain holds several hosts (a GB200 NVL72 rack of 18 trays): the host order decides which
        of them share it."""
        return self.levels[0].block_gpus > self.gpus_per_host

    def with_node_topo(self, node: NodeTopo) -> Topology:
        """The same machine with each node's GPU-to-GPU links from `nvidia-smi topo -m`: groups inside a
        node get the bandwidth of their best ring (PCIe, bridged NVLink pairs, cross-socket hops)."""
        if node.num_gpus != self.gpus_per_host:
            raise InputError(
                f"{node.source}: the matrix has {node.num_gpus} GPUs but a {self.cluster.name} node has "
                f"{self.gpus_per_host}; give the matrix of this node type or another --node-type"
            )
        other = copy.copy(self)
        other.node_layout = node_layout(node)
        other.node_topo_source = node.source
        other.node_topo_note = _node_topo_note(self.cluster, other.node_layout, node.source)
        label = fabric_label(node)
        if label is not None:  # the in-node level is what the matrix links its GPUs with, not the catalog's fabric
            other.levels = (dataclasses.replace(self.levels[0], name=label), *self.levels[1:])
        other._span_cache = {}
        return other

    def as_launched_in_order(self, orders: list[tuple[int, ...]] | None = None) -> Topology:
        """The same machine for a job that runs each host's ranks on its GPUs in numbered order (no
        CUDA_VISIBLE_DEVICES), or in one of `orders` (the CUDA_VISIBLE_DEVICES its launch lines set, the worst
        priced): groups inside a node get the links of the GPUs they run on, not the best split
        (NodeLayout.as_launched).  Unchanged without measured intra-node links."""
        if self.node_layout is None:
            return self
        other = copy.copy(self)
        other.node_layout = self.node_layout.as_launched(orders)
        return other

    @property
    def regular(self) -> bool:
        """Blocks follow from arithmetic and ranks run on GPUs in order (the fast span path)."""
        return self._explicit_blocks is None and self.gpu_of_rank is None

    @property
    def allocated(self) -> bool:
        """A real allocation (`from_hosts`): its size is its host list's, not a GPU count."""
        return self._explicit_blocks is not None

    @property
    def gpus_per_host(self) -> int:
        return self.cluster.gpus_per_node

    @property
    def num_hosts(self) -> int:
        """Hosts the job's GPUs occupy (a job on part of one node still has its host)."""
        return -(-self.num_gpus // self.gpus_per_host)

    # -- levels -----------------------------------------------------------------------------------

    def _levels(self) -> tuple[Level, ...]:
        c = self.cluster
        su = c.scale_up
        # the job's GPUs in one scale-up domain: a whole domain, or one segment of it
        block = su.size if self.segment_nodes is None else self.segment_nodes * c.gpus_per_node
        levels = [Level(su.name, min(block, self.num_gpus), su.bandwidth_bytes_per_s * su.collective_efficiency,
                        su.latency_s)]
        derate = 1.0  # product of oversubscription ratios of the tiers below
        for tier in c.tiers:
            if block >= self.num_gpus:
                break
            block = self.num_gpus if tier.fanout is None else min(block * tier.fanout, self.num_gpus)
            bw = c.nic_bandwidth_bytes_per_s * c.nic_collective_efficiency / derate
            levels.append(Level(tier.name, block, bw, tier.latency_s, derate))
            derate *= tier.oversubscription
        if block < self.num_gpus:
            top = c.tiers[-1]
            raise InputError(
                f"cluster {c.name!r}: its tiers cover {block} GPUs but {self.num_gpus} were asked for; "
                f"set the top tier ({top.name!r}) fanout to null so it spans the rest of the cluster"
            )
        return tuple(levels)

    @cached_property
    def block_of(self) -> np.ndarray:
        """block_of[j, g] = index of the level-j block holding GPU g."""
        if self._explicit_blocks is not None:
            return self._explicit_blocks
        g = np.arange(self.num_gpus, dtype=np.int64)
        return np.stack([g // lv.block_gpus for lv in self.levels])

    # -- the graph --------------------------------------------------------------------------------

    @cached_property
    def graph(self) -> nx.Graph:
        """GPUs, hosts, scale-up switches and switch tiers, edges carrying bandwidth per direction."""
        c = self.cluster
        g = nx.Graph(name=c.name)
        gph = c.gpus_per_node
        blocks = self.block_of
        for name in self.host_names:
            g.add_node(name, kind="host")
        for gpu in range(self.num_gpus):
            gname = f"gpu{gpu}"
            g.add_node(gname, kind="gpu", host=self.host_names[gpu // gph], local_gpu=gpu % gph)
            g.add_edge(gname, self.host_names[gpu // gph], kind="pcie")
            g.add_edge(gname, f"{c.scale_up.name}{blocks[0, gpu]}", kind="scale_up",
                       bandwidth_bytes_per_s=c.scale_up.bandwidth_bytes_per_s)
        for d in np.unique(blocks[0]):
            g.nodes[f"{c.scale_up.name}{d}"].update(kind="scale_up_switch", level=0)
        for j, lv in enumerate(self.levels[1:], start=1):
            child_name = c.scale_up.name if j == 1 else self.levels[j - 1].name
            pairs = np.unique(np.stack([blocks[j - 1], blocks[j]], axis=1), axis=0)
            for child, parent in pairs:
                g.add_node(f"{lv.name}{parent}", kind="switch", level=j)
                g.add_edge(f"{child_name}{child}", f"{lv.name}{parent}", kind="uplink",
                           bandwidth_bytes_per_s=lv.bandwidth_bytes_per_s)
        return g

    # -- spans ------------------------------------------------------------------------------------

    def span(self, stride: int, size: int) -> GroupSpan:
        """Span of the groups made of `size` ranks `stride` apart (a mesh axis), worst group."""
        if self.regular:
            return _span(tuple(lv.block_gpus for lv in self.levels), self.num_gpus, stride, size)
        key = (stride, size)
        if key not in self._span_cache:
            ranks = _group_ranks(self.num_gpus, stride, size)
            gpus = ranks if self.gpu_of_rank is None else self.gpu_of_rank[ranks]
            self._span_cache[key] = _span_listed(self.block_of, gpus)
        return self._span_cache[key]

    def describe(self) -> list[dict]:
        """Each level's name, block, bandwidth, latency and oversubscription; where the node's links are measured
        (--node-topo), the in-node level also has `ring_bandwidth_bytes_per_s`: group size -> the raw per-GPU rate of
        the best ring of that many GPUs on the node's links (NodeLayout.group_bandwidth), what in-node groups are
        priced with instead of the level's bandwidth."""
        out = [
            {"level": j, "name": lv.name, "block_gpus": lv.block_gpus,
             "bandwidth_bytes_per_s": lv.bandwidth_bytes_per_s, "latency_s": lv.latency_s,
             "oversubscription": lv.oversubscription}
            for j, lv in enumerate(self.levels)
        ]
        if self.node_layout is not None and out:
            out[0]["ring_bandwidth_bytes_per_s"] = {k: bw for k, bw in sorted(self.node_layout.group_bandwidth.items())
                                                    if k > 1}
        return out


def _node_topo_note(cluster: ClusterSpec, layout: NodeLayout, source: str) -> str | None:
    """A warning where a node's measured links are not its node type's scale-up fabric: PCIe between GPUs of a node
    the catalog makes one NVLink domain, or NVLink at another rate per GPU (a user trial: a PCIe matrix under
    --node-type dgx-h100, and an A100's NV12 under H100 nodes, were priced from the matrix without a word).  The
    matrix is what prices the in-node groups either way; the note asks whether it is this node type's."""
    up = cluster.scale_up
    if up.size < cluster.gpus_per_node or up.kind is not ScaleUpKind.SWITCHED:
        return None
    rings = {k: bw for k, bw in layout.group_bandwidth.items() if k > 1}
    if not rings:
        return None
    whole = rings[max(rings)]
    catalog = up.bandwidth_bytes_per_s
    if abs(whole / catalog - 1.0) <= 0.05:
        return None
    return (f"--node-topo {source}: a ring of all {max(rings)} GPUs of the node runs at {whole / 1e9:.0f} GB/s per GPU "
            f"over its links ({link_name(whole)}), where {cluster.name}'s nodes are one {up.name} domain at "
            f"{catalog / 1e9:.0f} GB/s: the in-node groups are priced from the matrix; if it is not this node type's, "
            f"give the node type it belongs to (--node-type) or the matrix of these nodes")


def intra_node_order(topo: Topology, tp: int, gpu_of_rank: np.ndarray) -> np.ndarray:
    """With measured intra-node links, each TP group laid on its best-connected GPUs (the order the cost model
    prices); launch files realize it with CUDA_VISIBLE_DEVICES.  Unchanged without measured links."""
    node = topo.node_layout
    gph = topo.gpus_per_host
    if node is None or tp not in node.order or tp >= gph:
        return gpu_of_rank
    perm = np.array(node.order[tp])
    return (gpu_of_rank // gph) * gph + perm[gpu_of_rank % gph]


def _group_ranks(num_gpus: int, stride: int, size: int) -> np.ndarray:
    """Rows = groups of `size` ranks `stride` apart, as a mesh axis lays them."""
    return np.arange(num_gpus, dtype=np.int64).reshape(-1, size, stride).transpose(0, 2, 1).reshape(-1, size)


def _span_listed(block_of: np.ndarray, gpus: np.ndarray) -> GroupSpan:
    """Span of groups given as rows of GPU ids, counted on the blocks each GPU really sits in."""
    size = gpus.shape[1]
    within, least, crossing, load, chain, ring = [], [], [0.0], [0.0], [0.0], [0.0]
    for j in range(block_of.shape[0]):
        ids = block_of[j][gpus]
        within.append(_worst_group_within(ids))
        least.append(_worst_group_least(ids))
        if j + 1 < block_of.shape[0]:
            chain.append(_neighbour_crossing(ids, wrap=False))
            ring.append(_neighbour_crossing(ids, wrap=True))
            c, lo = _leaving(ids)
            crossing.append(c)
            load.append(lo)
    within.append(size)
    least.append(size)
    return GroupSpan(tuple(within), tuple(crossing), tuple(load), tuple(chain), tuple(ring), tuple(least))


def _leaving(ids: np.ndarray) -> tuple[float, float]:
    """(crossing, load) out of one level's blocks for groups listed as rows of block ids: the worst block's share of
    members with a group member elsewhere, and its mean share of a member's group that is elsewhere (GroupSpan)."""
    leave = 1.0 - _members_sharing_block(ids) / ids.shape[1]  # per member: share of its group in other blocks
    members = np.bincount(ids.ravel())
    seen = members > 0
    crossing = float((np.bincount(ids.ravel(), weights=(leave > 0).ravel())[seen] / members[seen]).max())
    return crossing, float((np.bincount(ids.ravel(), weights=leave.ravel())[seen] / members[seen]).max())


def _neighbour_crossing(ids: np.ndarray, wrap: bool) -> float:
    """Largest share of a block's members (rows = groups, columns in member order, values = block ids) with
    a neighbouring member of their group in another block: next or previous, and with `wrap` the last and
    the first members neighbours too."""
    cross = np.zeros(ids.shape, dtype=bool)
    if ids.shape[1] > 1:
        step = ids[:, 1:] != ids[:, :-1]
        cross[:, :-1] |= step
        cross[:, 1:] |= step
        if wrap:
            ends = ids[:, 0] != ids[:, -1]
            cross[:, 0] |= ends
            cross[:, -1] |= ends
    members = np.bincount(ids.ravel())
    seen = members > 0
    return float((np.bincount(ids.ravel(), weights=cross.ravel().astype(np.float64))[seen] / members[seen]).max())


def _members_sharing_block(ids: np.ndarray) -> np.ndarray:
    """For every member (rows = groups), how many members of its group share its block."""
    rows = np.repeat(np.arange(ids.shape[0]), ids.shape[1])
    key = rows * (int(ids.max()) + 1) + ids.ravel()
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)].reshape(ids.shape).astype(np.float64)


def _worst_group_within(ids: np.ndarray) -> int:
    """Members of the worst-placed group inside one block, given each member's block id (rows = groups).

    Each group's count is its largest run of members sharing a block; the worst group is the one with
    the smallest such count (the most split), and it sets the pace of a synchronous collective.
    """
    ids = np.sort(ids, axis=1)
    size = ids.shape[1]
    starts = np.ones_like(ids, dtype=bool)
    starts[:, 1:] = ids[:, 1:] != ids[:, :-1]
    # every row opens with a run start, so no run crosses rows once flattened
    first = np.flatnonzero(starts.ravel())
    lengths = np.append(first[1:], ids.size) - first
    per_group = np.zeros(ids.shape[0], dtype=np.int64)
    np.maximum.at(per_group, first // size, lengths)
    return int(per_group.min())


def _worst_group_least(ids: np.ndarray) -> int:
    """Fewest members of one group sharing a block, over every group and block that holds any (rows = groups,
    values = block ids): a 64-member group on 8 + 56 GPUs of two blocks gives 8."""
    return int(_members_sharing_block(ids).min())


@lru_cache(maxsize=4096)
def _span(blocks: tuple[int, ...], num_gpus: int, stride: int, size: int) -> GroupSpan:
    within, least, chain, ring = [], [], [0.0], [0.0]
    listed: dict[int, tuple[float, float]] = {}  # misaligned level j -> (crossing, load) out of its blocks
    for j, block in enumerate(blocks):
        if stride >= block:
            within.append(1)  # consecutive members are a block or more apart
            least.append(1)
            neighbours = (1.0, 1.0) if size > 1 else (0.0, 0.0)  # every member's neighbours are elsewhere
        elif block % stride == 0 and (block % (stride * size) == 0 or (stride * size) % block == 0):
            k = min(size, block // stride)  # aligned: every group looks the same, runs of k members
            within.append(k)
            least.append(k)
            runs = size // k  # a block holds one run of k consecutive members of each of `stride` groups
            # a run's end members have a neighbour in the next block: one end when the chain has two runs,
            # both ends for a middle run or a ring
            neighbours = (0.0, 0.0) if runs == 1 else (min(1 if runs == 2 else 2, k) / k, min(2, k) / k)
        else:  # misaligned (e.g. groups of 16 on 72-GPU NVLink domains): list every group
            ids = _group_ranks(num_gpus, stride, size) // block
            within.append(_worst_group_within(ids))
            least.append(_worst_group_least(ids))
            neighbours = (_neighbour_crossing(ids, wrap=False), _neighbour_crossing(ids, wrap=True))
            if j + 1 < len(blocks):
                # counted on the listed groups, as a mapped topology counts them (_span_listed): the worst-placed
                # group's best run does not say how much of a block's traffic leaves it
                listed[j] = _leaving(ids)
        if j + 1 < len(blocks):
            chain.append(neighbours[0])
            ring.append(neighbours[1])
    within.append(size)
    least.append(size)
    crossing = [0.0] + [listed[j - 1][0] if j - 1 in listed else 1.0 if within[j - 1] < size else 0.0
                        for j in range(1, len(blocks))]
    load = [0.0] + [listed[j - 1][1] if j - 1 in listed else 1.0 - within[j - 1] / size
                    for j in range(1, len(blocks))]
    return GroupSpan(tuple(within), tuple(crossing), tuple(load), tuple(chain), tuple(ring), tuple(least))


def _names_file(ref: str, accelerator: AcceleratorSpec) -> bool:
    """A cluster whose `accelerator` is a user's accelerator file, and `accelerator` that file's part."""
    from placement.catalog import accelerator_file_given, load_accelerator

    return accelerator_file_given(ref) and load_accelerator(ref) == accelerator
