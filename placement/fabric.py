"""Real cluster inputs -> Topology: a SLURM topology plus the job's host list, or a networkx graph.

Levels, innermost first:
- 0, the scale-up domain: one host on 8-GPU nodes; a SLURM block (an NVL72 rack of 18 trays) when
  the node design's NVLink domain spans several hosts.
- 1.., the switch tiers above it, by height in the tree (leaf = 1).  Traffic into level j >= 2 is
  derated by the oversubscription of the tiers below (the `--oversubscription` ratio at the leaf
  uplinks, else the node design's catalog tiers).
Hosts keep the allocation's order: that order is the `allocation_order` baseline and the host index
of the mapping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from placement.errors import InputError
from placement.loaders.hostlist import hostlist_sort_key
from placement.specs import AcceleratorSpec, ClusterSpec
from placement.specs.fabric import SlurmBlocks, SlurmTree
from placement.topology import Level, Topology

_TIER_NAMES = ("leaf", "spine", "core", "super-core")


def _check_hosts(hosts: Sequence[str], known: set[str], source: str) -> None:
    if not hosts:
        raise InputError("--nodelist is empty: give the job's hosts (e.g. $SLURM_JOB_NODELIST or @hosts.txt)")
    missing = [h for h in hosts if h not in known]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise InputError(
            f"{source}: host(s) {shown} of --nodelist are not in the topology; give the topology.conf of the "
            f"cluster the job ran on, or drop those hosts"
        )


def _tier_levels(cluster: ClusterSpec, heights: int, oversubscription: float | None) -> list[Level]:
    """Levels 1..heights: NIC bandwidth per GPU, derated by the oversubscription of the tiers below."""
    nic = cluster.nic_bandwidth_bytes_per_s * cluster.nic_collective_efficiency
    levels, derate = [], 1.0
    for j in range(1, heights + 1):
        tier = cluster.tiers[min(j - 1, len(cluster.tiers) - 1)]
        name = tier.name if j - 1 < len(cluster.tiers) else _TIER_NAMES[min(j - 1, len(_TIER_NAMES) - 1)]
        levels.append(Level(name, 0, nic / derate, tier.latency_s, derate))
        ratio = oversubscription if (j == 1 and oversubscription is not None) else tier.oversubscription
        derate *= ratio
    return levels


def _scale_up_level(cluster: ClusterSpec, block_gpus: int) -> Level:
    su = cluster.scale_up
    return Level(su.name, block_gpus, su.bandwidth_bytes_per_s * su.collective_efficiency, su.latency_s)


MAX_OVERSUBSCRIPTION = 64.0
"""Largest leaf down:up ratio accepted: published fabrics run 1:1 to 4:1, and a larger number is a typo that
would price a spine link at (almost) nothing."""


def topology_from_slurm(conf: SlurmTree | SlurmBlocks, hosts: Sequence[str], cluster: ClusterSpec,
                        accelerator: AcceleratorSpec, oversubscription: float | None = None,
                        segment_nodes: int | None = None) -> Topology:
    """`segment_nodes`: the job's `sbatch --segment` (block plugin only), checked against where its hosts
    sit and recorded on the topology; the hosts' blocks, not the segment, place the GPUs."""
    if oversubscription is not None and not (math.isfinite(oversubscription)
                                             and 1 <= oversubscription <= MAX_OVERSUBSCRIPTION):
        raise InputError(f"--oversubscription {oversubscription}: a down:up ratio is a finite number of at least 1 "
                         f"(1 = non-blocking) and at most {MAX_OVERSUBSCRIPTION:g}; give e.g. 2 for 2:1")
    if isinstance(conf, SlurmBlocks):
        topo = _from_blocks(conf, hosts, cluster, accelerator, oversubscription, segment_nodes)
        topo.slurm_choice = conf.choice
        topo.slurm_rank_order = _ranked_order(hosts, [b.nodes for b in conf.blocks], "BlockAsNodeRank",
                                              f"block by block as {conf.source} lists them")
        return topo
    if segment_nodes is not None:
        raise InputError(
            f"--segment {segment_nodes}: {conf.source} is a topology/tree file, and SLURM's --segment is a "
            f"topology/block option; give the block-plugin topology.conf (BlockName= lines) or drop --segment"
        )
    topo = _from_tree(conf, hosts, cluster, accelerator, oversubscription)
    topo.link_speeds = tuple(sorted({sw.link_speed for sw in conf.switches if sw.link_speed is not None}))
    topo.slurm_choice = conf.choice
    topo.slurm_rank_order = _ranked_order(hosts, [sw.nodes for sw in conf.switches if sw.nodes], "SwitchAsNodeRank",
                                          f"leaf switch by leaf switch as {conf.source} lists them")
    return topo


def _ranked_order(hosts: Sequence[str], groups: list[tuple[str, ...]], param: str,
                  how: str) -> tuple[tuple[str, ...], str]:
    """The hosts in the order SLURM numbers a job's nodes under slurm.conf's TopologyParam=`param`: slurmctld ranks
    each node by its leaf switch (block), counting them in the file's order, and sorts its node table by that rank
    (slurm src/plugins/topology/tree/topology_tree.c and block/topology_block.c topology_p_generate_node_ranking,
    src/slurmctld/read_config.c _sort_node_record_table_ptr); inside one the nodes are taken by name."""
    rank = {n: i for i, nodes in enumerate(groups) for n in nodes}
    ordered = sorted(hosts, key=lambda h: (rank.get(h, len(groups)), hostlist_sort_key(h)))
    return tuple(ordered), f"TopologyParam={param}, which numbers them {how}"


def _from_tree(conf: SlurmTree, hosts: Sequence[str], cluster: ClusterSpec, accelerator: AcceleratorSpec,
               oversubscription: float | None) -> Topology:
    if cluster.scale_up.size > cluster.gpus_per_node:
        raise InputError(
            f"--node-type {cluster.name}: its NVLink domain ({cluster.scale_up.size} GPUs) spans several hosts, "
            f"which a tree topology.conf cannot place; give the block-plugin topology.conf (BlockName= lines)"
        )
    leaf_of = {n: s.name for s in conf.switches for n in s.nodes}
    _check_hosts(hosts, set(leaf_of), conf.source)
    parent = {c: s.name for s in conf.switches for c in s.switches}
    height = _heights(conf)  # walked up level by level from each host's leaf, without recursion
    at = [leaf_of[host] for host in hosts]

    def switches_at(j: int) -> list[str]:
        for i, node in enumerate(at):
            while height[node] < j and node in parent:
                node = parent[node]
            at[i] = node
        return at

    host_blocks = _host_blocks(len(hosts), max(height.values()), switches_at, conf.source)
    if len(hosts) > 1 and len(set(host_blocks[-1].tolist())) > 1:
        tops = list(dict.fromkeys(switches_at(max(height.values()))))
        first = {top: next(h for h, s in zip(hosts, at, strict=True) if s == top) for top in tops}
        raise InputError(
            f"{conf.source}: the job's hosts sit under {len(tops)} switches with no parent "
            f"({', '.join(f'{top} (e.g. {host})' for top, host in list(first.items())[:4])}"
            f"{', ...' if len(tops) > 4 else ''}): separate fabrics, which SLURM never places one job across "
            f"(topology.conf(5): jobs only span nodes connected by the same switch fabric); give the hosts of "
            f"one of them, or add the switch that joins them (`SwitchName=top Switches={','.join(tops[:2])}`) if "
            f"one does")
    levels = [_scale_up_level(cluster, cluster.gpus_per_node),
              *_tier_levels(cluster, len(host_blocks) - 1, oversubscription)]
    return Topology.from_hosts(cluster, accelerator, list(hosts), _collapse_top(host_blocks), tuple(levels))


MAX_TIERS = 16
"""Most switch levels a job's hosts may sit under before they all meet (real fabrics: 2 to 4)."""


def _host_blocks(num_hosts: int, top: int, switches_at, source: str) -> np.ndarray:
    """(levels + 1, hosts) block ids: row 0 each host alone, row j the switch `switches_at(j)` puts above each
    host.  It stops at the first level where the job's hosts share one switch: traffic never goes higher,
    however long the chain of switches above (a chain of 1,500 over one leaf is one level for the job)."""
    rows = [np.arange(num_hosts)]
    for j in range(1, top + 1):
        ids: dict = {}
        rows.append(np.array([ids.setdefault(s, len(ids)) for s in switches_at(j)], dtype=np.int64))
        if len(ids) == 1:
            break
    if len(rows) - 1 > MAX_TIERS:
        raise InputError(f"{source}: the job's hosts meet only {len(rows) - 1} switch levels up; placement prices "
                         f"up to {MAX_TIERS} tiers (real fabrics have 2 to 4): check the switches' levels")
    return np.stack(rows)


def _heights(conf: SlurmTree) -> dict[str, int]:
    """Each switch's height (leaf 1, its parent 2, ...), iteratively: children before parents (the loader has
    checked that the switches form a tree)."""
    children = {s.name: tuple(s.switches) for s in conf.switches}
    waiting = {name: len(kids) for name, kids in children.items()}
    parent = {c: name for name, kids in children.items() for c in kids}
    height = {name: 1 for name, n in waiting.items() if n == 0}
    ready = list(height)
    while ready:
        name = ready.pop()
        up = parent.get(name)
        if up is None:
            continue
        height[up] = max(height.get(up, 1), height[name] + 1)
        waiting[up] -= 1
        if waiting[up] == 0:
            ready.append(up)
    return height


def _from_blocks(conf: SlurmBlocks, hosts: Sequence[str], cluster: ClusterSpec, accelerator: AcceleratorSpec,
                 oversubscription: float | None, segment_nodes: int | None = None) -> Topology:
    block_of = {n: i for i, b in enumerate(conf.blocks) for n in b.nodes}
    _check_hosts(hosts, set(block_of), conf.source)
    segment = _check_segment(conf, hosts, block_of, cluster, segment_nodes)
    hosts_per_domain = max(cluster.scale_up.size // cluster.gpus_per_node, 1)
    largest = max(len(b.nodes) for b in conf.blocks)
    if hosts_per_domain > 1 and largest > hosts_per_domain:
        raise InputError(
            f"{conf.source}: a block has {largest} nodes but one {cluster.name} NVLink domain holds "
            f"{hosts_per_domain} ({cluster.scale_up.size} GPUs / {cluster.gpus_per_node} per node); check --node-type"
        )
    blocks = np.array([block_of[h] for h in hosts], dtype=np.int64)
    if hosts_per_domain > 1:  # each block is one NVLink domain; the network above it
        host_blocks = np.stack([blocks, np.zeros_like(blocks)])
        ratio = oversubscription if oversubscription is not None else cluster.tiers[0].oversubscription
        nic = cluster.nic_bandwidth_bytes_per_s * cluster.nic_collective_efficiency
        # traffic between racks leaves each rack through its (possibly oversubscribed) uplinks
        levels = [_scale_up_level(cluster, cluster.scale_up.size),
                  Level(cluster.tiers[0].name, 0, nic / ratio, cluster.tiers[0].latency_s, ratio)]
    else:  # 8-GPU nodes: blocks are network groups (leaf-like) above the hosts
        host_blocks = np.stack([np.arange(len(hosts)), blocks, np.zeros_like(blocks)])
        levels = [_scale_up_level(cluster, cluster.gpus_per_node), *_tier_levels(cluster, 2, oversubscription)]
    return Topology.from_hosts(cluster, accelerator, list(hosts), _collapse_top(host_blocks), tuple(levels),
                               segment_nodes=segment)


def _check_segment(conf: SlurmBlocks, hosts: Sequence[str], block_of: dict[str, int], cluster: ClusterSpec,
                   segment_nodes: int | None) -> int | None:
    """The job's segment, checked against the allocation: SLURM places each run of `--segment N` nodes
    inside one block and needs the node count to be a multiple of N, so every block holds a whole number
    of the job's segments, and a segment no larger than the base block size (`BlockSizes=`' first value)."""
    if segment_nodes is None or segment_nodes == 0:
        return None
    if segment_nodes < 0:
        raise InputError(f"--segment {segment_nodes}: a segment is a number of nodes, at least 1 (0 = no segment)")
    if cluster.scale_up.size <= cluster.gpus_per_node:
        raise InputError(
            f"--segment {segment_nodes}: a {cluster.name} NVLink domain ({cluster.scale_up.size} GPUs) is no more "
            f"than one node, so its blocks are network groups, not NVLink domains, and a segment does not change "
            f"what is priced; drop --segment"
        )
    n = len(hosts)
    fits = ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)
    if n % segment_nodes:
        raise InputError(
            f"--segment {segment_nodes}: the job's {n} hosts are not a whole number of {segment_nodes}-node "
            f"segments (SLURM requires the node count to be a multiple of --segment); the divisors of {n} are {fits}"
        )
    if conf.block_sizes is not None and segment_nodes > conf.block_sizes[0]:
        raise InputError(
            f"--segment {segment_nodes}: more nodes than the base block size {conf.block_sizes[0]} of {conf.source} "
            f"(BlockSizes=), and a segment lies inside one block; use at most {conf.block_sizes[0]}"
        )
    per_block: dict[int, int] = {}
    for host in hosts:
        per_block[block_of[host]] = per_block.get(block_of[host], 0) + 1
    for b, count in per_block.items():
        if count % segment_nodes:
            raise InputError(
                f"--segment {segment_nodes}: block `{conf.blocks[b].name}` ({conf.source}:{conf.blocks[b].line}) "
                f"holds {count} of the job's hosts, not a whole number of {segment_nodes}-node segments, so this "
                f"allocation was not made with --segment {segment_nodes}; give the job's own --segment, or drop it"
            )
    return segment_nodes


def _collapse_top(host_blocks: np.ndarray) -> np.ndarray:
    """The last level is the whole allocation (one block), whatever the tree above it."""
    out = host_blocks.copy()
    out[-1] = 0
    return out


def topology_from_graph(graph: nx.Graph, cluster: ClusterSpec, accelerator: AcceleratorSpec,
                        source: str) -> Topology:
    """A networkx cluster graph: hosts, their GPUs, switches with `level` (1 = leaf).

    Host-to-leaf edges carry the host's NIC bandwidth; switch uplinks carry the switch's total uplink
    bandwidth, so a switch's oversubscription is what its children bring over what it sends up.
    """
    hosts = [n for n, d in graph.nodes(data=True) if d["kind"] == "host"]
    gpus_per_host = dict.fromkeys(hosts, 0)
    for node, d in graph.nodes(data=True):
        if d["kind"] == "gpu":
            gpus_per_host[d["host"]] += 1
            if d["local_gpu"] >= cluster.gpus_per_node:
                raise InputError(f"{source}: gpu node {node!r} has local_gpu {d['local_gpu']}, but a {cluster.name} "
                                 f"host has GPUs 0 to {cluster.gpus_per_node - 1}; fix local_gpu or --node-type")
    if len(set(gpus_per_host.values())) != 1 or next(iter(gpus_per_host.values())) != cluster.gpus_per_node:
        raise InputError(
            f"{source}: every host must have {cluster.gpus_per_node} GPUs for --node-type {cluster.name}; "
            f"found {sorted(set(gpus_per_host.values()))}"
        )

    def up(node: str) -> list[str]:
        level = graph.nodes[node].get("level", 0)
        return [s for s in graph.neighbors(node) if graph.nodes[s]["kind"] == "switch"
                and graph.nodes[s]["level"] > level]

    chains = []
    for h in hosts:
        chain, node = [], h
        while ups := up(node):
            if len(ups) > 1:
                raise InputError(f"{source}: node {node!r} has {len(ups)} parent switches; the mapper needs a tree")
            node = ups[0]
            chain.append(node)
        if not chain:
            raise InputError(f"{source}: host {h!r} connects to no switch; add its host-to-leaf edge")
        chains.append(chain)
    tops = sorted({c[-1] for c in chains}, key=str)  # ids may mix strings and integers
    if len(tops) > 1:  # islands: no switch joins them, so no traffic can cross
        under = {t: sorted((h for h, c in zip(hosts, chains, strict=True) if c[-1] == t), key=str) for t in tops}
        parts = "; ".join(f"{t} over {len(v)} host(s) ({', '.join(map(str, v[:2]))}{', ...' if len(v) > 2 else ''})"
                          for t, v in under.items())
        raise InputError(f"{source}: the fabric is not connected: {len(tops)} top switches share no parent ({parts}); "
                         f"add the switch that joins them, with an edge up from each")
    host_blocks = _host_blocks(len(hosts), max(len(c) for c in chains),
                               lambda j: [c[min(j, len(c)) - 1] for c in chains], source)
    top = len(host_blocks) - 1
    nic = min(graph.edges[h, c[0]]["bandwidth_bytes_per_s"] for h, c in zip(hosts, chains, strict=True)) \
        / cluster.gpus_per_node * cluster.nic_collective_efficiency
    levels, derate = [_scale_up_level(cluster, cluster.gpus_per_node)], 1.0
    for j in range(1, top + 1):
        switches = sorted({c[j - 1] for c in chains if len(c) >= j}, key=str)
        levels.append(Level(_TIER_NAMES[min(j - 1, 3)], 0, nic / derate, cluster.tiers[0].latency_s, derate))
        derate *= max(_oversubscription(graph, s) for s in switches)
    return Topology.from_hosts(cluster, accelerator, hosts, _collapse_top(host_blocks), tuple(levels))


def _oversubscription(graph: nx.Graph, switch: str) -> float:
    level = graph.nodes[switch]["level"]
    down = up = 0.0
    for n in graph.neighbors(switch):
        bw = graph.edges[switch, n].get("bandwidth_bytes_per_s", 0.0)
        if graph.nodes[n]["kind"] == "switch" and graph.nodes[n]["level"] > level:
            up += bw
        elif graph.nodes[n]["kind"] != "gpu":
            down += bw
    return max(down / up, 1.0) if up > 0 else 1.0


def mixed_design(designs: list[tuple[ClusterSpec, AcceleratorSpec]]) -> tuple[ClusterSpec, AcceleratorSpec]:
    """One design standing for hosts of several: the slowest GPU, link and NIC, the smallest memory.

    Synchronous training steps at the pace of its slowest GPU and link, and the smallest HBM binds memory, so a
    mixed allocation is priced as if every host were the weakest (placement does not split work unevenly across
    node types).  The GPU's compute is the slowest GPU's as a whole (peak with its own efficiencies), not the
    smallest of each field, which would make a GPU slower than any of the job's.
    """
    clusters = [c for c, _ in designs]
    accs = [a for _, a in designs]
    if len(clusters) == 1:
        return designs[0]
    gpn = {c.gpus_per_node for c in clusters}
    dom = {c.scale_up.size for c in clusters}
    if len(gpn) > 1 or len(dom) > 1:
        raise InputError(
            "--node-type: mixed node designs must have the same GPUs per node and NVLink domain size; got "
            + ", ".join(f"{c.name} ({c.gpus_per_node} per node, domain {c.scale_up.size})" for c in clusters)
        )
    name = "mixed(" + "+".join(sorted({c.name for c in clusters})) + ")"
    # the pace of the GEMMs is the slowest GPU's, as a whole: its peak with its own efficiency and shape curve (the
    # smallest peak with another GPU's smaller efficiency would price a GPU slower than any in the job)
    slow = min(accs, key=lambda a: a.peak_flops_bf16 * a.matmul_efficiency_bf16)
    fp8 = [a.peak_flops_fp8 for a in accs]
    slow8 = None if None in fp8 else min(accs, key=lambda a: a.peak_flops_fp8 * (a.matmul_efficiency_fp8
                                                                                 or a.matmul_efficiency_bf16))
    acc = slow.model_copy(update={
        "name": name,
        "peak_flops_fp8": None if slow8 is None else slow8.peak_flops_fp8,
        "matmul_efficiency_fp8": None if slow8 is None else slow8.matmul_efficiency_fp8 or slow8.matmul_efficiency_bf16,
        "hbm_bytes": min(a.hbm_bytes for a in accs),
        "hbm_bandwidth_bytes_per_s": min(a.hbm_bandwidth_bytes_per_s for a in accs),
        "mxfp8": all(a.mxfp8 for a in accs),  # an MXFP8 recipe needs every GPU to run it
        "source": (f"GEMMs at {slow.name}'s pace (the slowest peak x efficiency"
                   + (f"; FP8 at {slow8.name}'s" if slow8 is not None and slow8 is not slow else "")
                   + "), the smallest HBM and HBM bandwidth of " + ", ".join(a.name for a in accs)),
    })
    base = clusters[0]
    slow_up = min(clusters, key=lambda c: c.scale_up.bandwidth_bytes_per_s * c.scale_up.collective_efficiency)
    slow_nic = min(clusters, key=lambda c: c.nic_bandwidth_bytes_per_s * c.nic_collective_efficiency)
    # each network tier as the weakest design's: its largest oversubscription and latency (a QA run: the tiers were
    # the first design's by name alone, and the fabric line named a file of the mixed design, which has none)
    tiers = [t.model_copy(update={
        "oversubscription": max(c.tiers[min(i, len(c.tiers) - 1)].oversubscription for c in clusters),
        "latency_s": max(c.tiers[min(i, len(c.tiers) - 1)].latency_s for c in clusters)})
        for i, t in enumerate(base.tiers)]
    cluster = base.model_copy(update={
        "name": name, "accelerator": name, "scale_up": slow_up.scale_up, "tiers": tiers,
        "nic_bandwidth_bytes_per_s": slow_nic.nic_bandwidth_bytes_per_s,
        "nic_collective_efficiency": slow_nic.nic_collective_efficiency,
        "source": "smallest of " + ", ".join(c.name for c in clusters)
                  + "; each network tier's largest oversubscription and latency of theirs",
    })
    return cluster, acc


def real_topology(slurm_topology: Path | None, cluster_graph: Path | None, nodelist: str | None,
                  node_type: list[str], oversubscription: float | None, segment_nodes: int | None = None) -> Topology:
    """The machine of a real allocation: a SLURM topology.conf with the job's host list, or a cluster
    graph; node designs from the catalog, `HOSTLIST=NAME` entries for mixed allocations."""
    from placement.catalog import load_accelerator, load_cluster

    if not node_type:
        flag = "--slurm-topology" if slurm_topology is not None else "--cluster-graph"
        raise InputError(f"--node-type is required with {flag}: name the catalog design of the hosts (e.g. dgx-h100)")
    default = [t for t in node_type if "=" not in t]
    overrides = [t.split("=", 1) for t in node_type if "=" in t]
    if len(default) > 1:
        raise InputError(f"--node-type given {len(default)} times without HOSTLIST=: give one default design and "
                         f"HOSTLIST=NAME for the others")

    def designs(names: set[str]):
        loaded = []
        for name in sorted(names):
            # an unknown design is named by the flag that gave it (not --cluster, which is not given here)
            where = next((f"--node-type {expr}={n}:" for expr, n in overrides if n == name), "--node-type")
            c = load_cluster(name, field=where)
            loaded.append((c, load_accelerator(c.accelerator)))
        return mixed_design(loaded)

    if cluster_graph is not None:
        from placement.loaders.graph_json import load_cluster_graph

        if overrides:
            raise InputError("--node-type HOSTLIST=NAME goes with --slurm-topology; a cluster graph takes one "
                             "--node-type")
        cluster, accelerator = designs(set(default))
        return topology_from_graph(load_cluster_graph(cluster_graph), cluster, accelerator,
                                          str(cluster_graph))
    from placement.loaders.hostlist import expand_hostlist, read_nodelist
    from placement.loaders.slurm import parse_topology_conf

    if nodelist is None:
        raise InputError("--nodelist is required with --slurm-topology: the job's hosts ($SLURM_JOB_NODELIST or @FILE)")
    conf = parse_topology_conf(slurm_topology)
    hosts = read_nodelist(nodelist)
    typed: dict[str, str] = {}  # host -> the --node-type entry that names it
    for expr, name in overrides:
        flag = f"--node-type {expr}={name}"
        named = expand_hostlist(expr, source=flag)
        twice = [h for h in named if h in typed]
        if twice:
            other = " and ".join(dict.fromkeys(typed[h] for h in twice))
            shown = ", ".join(twice[:5]) + (f" and {len(twice) - 5} more" if len(twice) > 5 else "")
            raise InputError(f"{flag}: host(s) {shown} ({len(twice)} in all) are also in {other}; each host takes "
                             f"one design: give the --node-type hostlists without overlap")
        typed.update(dict.fromkeys(named, flag))
    stray = set(typed) - set(hosts)
    if stray:
        raise InputError(f"--node-type names host(s) {', '.join(sorted(stray)[:5])} that are not in --nodelist")
    untyped = set(hosts) - set(typed)
    if untyped and not default:
        raise InputError(f"--node-type gives no design for {', '.join(sorted(untyped)[:5])}; add a default "
                         f"--node-type NAME")
    cluster, accelerator = designs({name for _, name in overrides} | (set(default) if untyped else set()))
    return topology_from_slurm(conf, hosts, cluster, accelerator, oversubscription, segment_nodes)
