"""Rank-to-GPU mapping: CP-SAT against brute force, the irregular allocation, determinism, launch files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.fabric import topology_from_slurm
from placement.loaders.hostlist import expand_hostlist
from placement.loaders.slurm import parse_topology_conf
from placement.mapping.cpsat import SolverConfig, proxy_objective_s, solve_mapping
from placement.mapping.groups import group_kinds
from placement.mapping.mapper import map_layout
from placement.mapping.report import crossings, rank_table, write_launch_files
from placement.specs import Layout, TrainingSpec
from placement.workload import workload

DGX = load_cluster("dgx-h100")
H100 = load_accelerator("h100-sxm")


def interleaved_tree(path: Path, caps: list[int], prefix: str = "gpu") -> list[str]:
    """A tree topology.conf whose leaves take host names round-robin, as when a job gets whatever nodes
    are free: the sorted host list then alternates between leaves."""
    names = [f"{prefix}{i:04d}" for i in range(1, sum(caps) + 1)]
    leaves: list[list[str]] = [[] for _ in caps]
    i = leaf = 0
    while i < len(names):
        if len(leaves[leaf]) < caps[leaf]:
            leaves[leaf].append(names[i])
            i += 1
        leaf = (leaf + 1) % len(caps)
    lines = [f"SwitchName=leaf{k} Nodes={','.join(v)}" for k, v in enumerate(leaves)]
    lines.append(f"SwitchName=spine Switches=leaf[0-{len(caps) - 1}]")
    path.write_text("\n".join(lines) + "\n")
    return names


def allocation(tmp_path: Path, caps: list[int], oversubscription: float = 2.0):
    names = interleaved_tree(tmp_path / "topology.conf", caps)
    conf = parse_topology_conf(tmp_path / "topology.conf")
    return topology_from_slurm(conf, names, DGX, H100, oversubscription)


def priced(topo, layout: Layout, model: str = "deepseek-v3", seq: int = 4096, batch: int = 4096):
    m = load_model(model)
    train = TrainingSpec(seq_len=seq, global_batch=batch)
    w = workload(m)
    return w, train, estimate(w, train, topo, LayoutBatch.from_layouts([layout]))


def _multiset_permutations(counts: dict[int, int], length: int):
    """Every sequence of `length` items using each item exactly counts[item] times, once each."""
    if length == 0:
        yield ()
        return
    for item in sorted(counts):
        if counts[item]:
            counts[item] -= 1
            for rest in _multiset_permutations(counts, length - 1):
                yield (item, *rest)
            counts[item] += 1


def brute_force_min(topo, kinds) -> float:
    """Best objective over every distinct assignment of node blocks to leaves (hosts in one leaf are
    interchangeable), vectorized over the assignments."""
    hb = topo.block_of[:, :: topo.gpus_per_host]
    leaf_of_host = hb[1]
    leaves = np.unique(leaf_of_host)
    caps = [int((leaf_of_host == lf).sum()) for lf in leaves]
    num_blocks = len(leaf_of_host)
    # every distinct way to give each block a leaf with the right counts
    table = np.array(list(_multiset_permutations(dict(zip(leaves.tolist(), caps, strict=True)), num_blocks)))
    total = np.zeros(table.shape[0])
    spine_weight_index = 2
    for kind in kinds:
        blocks = kind.ranks(topo.num_gpus) // topo.gpus_per_host
        multi = np.array([len(np.unique(r)) > 1 for r in blocks])
        groups = blocks[multi]
        if groups.size == 0:
            continue
        leaf = table[:, groups]  # A x G x size
        touched = sum((leaf == lf).any(axis=2).sum(axis=1) for lf in leaves)
        total += touched * kind.size * kind.seconds_at(topo)[spine_weight_index]
    assert table.shape[1] == num_blocks
    return float(total.min())


@pytest.mark.parametrize(("caps", "layout"), [
    ([3, 3, 2], Layout(tp=1, ep=16, pp=2, dp=32, zero_stage=1)),
    ([4, 3, 2], Layout(tp=2, ep=24, etp=1, pp=1, dp=36, zero_stage=1)),
    ([5, 3], Layout(tp=1, ep=8, pp=4, dp=16, zero_stage=1)),
    ([9, 7], Layout(tp=1, ep=32, pp=2, dp=64, zero_stage=1)),  # 16 nodes: 11,440 distinct assignments
])
def test_cpsat_matches_brute_force_on_small_allocations(tmp_path, caps, layout):
    topo = allocation(tmp_path, caps)
    _, _, est = priced(topo, layout, batch=max(64, layout.dp))
    kinds = group_kinds(layout, est, 0)
    sol = solve_mapping(topo, kinds, SolverConfig(deterministic_time_limit=20.0, time_limit_s=60.0))
    assert sol.status == "OPTIMAL"
    assert sol.chunk_blocks == 1
    best = brute_force_min(topo, kinds)
    assert proxy_objective_s(topo, kinds, sol.host_of_block) == pytest.approx(best, rel=1e-9)
    assert sol.objective_s == pytest.approx(best, rel=1e-5)


def test_irregular_256_node_allocation(tmp_path):
    caps = [37, 64, 27, 64, 64]
    topo = allocation(tmp_path, caps)
    layout = Layout(tp=2, ep=32, pp=8, dp=128, micro_batch_size=1, zero_stage=1, sequence_parallel=True)
    w, train, est = priced(topo, layout)
    mapped = map_layout(w, train, topo, layout, est, 0, SolverConfig(deterministic_time_limit=1.0))
    kinds = {k.name: k for k in group_kinds(layout, est, 0)}
    report = crossings(mapped.topo, list(kinds.values()))
    # every TP group inside one node
    assert report["tp"]["highest_level"]["nvlink4"] == report["tp"]["groups"]
    # EP groups (32 ranks = 16 nodes... here 4 hosts of 8 GPUs with tp 2) split no more than forced
    hosts_per_ep = layout.ep * layout.etp // 8 if layout.etp * layout.ep >= 8 else 1
    groups = topo.num_gpus // (layout.ep * layout.etp)
    whole = sum(c // hosts_per_ep for c in caps)
    forced = max(groups - whole, 0)
    split = report["ep"]["groups"] - report["ep"]["highest_level"]["nvlink4"] - report["ep"]["highest_level"]["leaf"]
    assert split == forced
    # predicted faster than the plain launch order
    assert mapped.estimate.step_time_s[0] < mapped.baselines["allocation_order"]
    # and the plain order really does split more EP groups (the interleaved names)
    plain = topo.with_mapping(np.arange(topo.num_gpus))
    assert crossings(plain, [kinds["ep"]])["ep"]["highest_level"]["spine"] > split


def test_same_input_gives_the_same_rank_table(tmp_path):
    topo = allocation(tmp_path, [37, 64, 27, 64, 64])
    layout = Layout(tp=1, ep=64, pp=8, dp=256, zero_stage=1)
    _, _, est = priced(topo, layout)
    kinds = group_kinds(layout, est, 0)
    first = solve_mapping(topo, kinds, SolverConfig(deterministic_time_limit=0.5))
    second = solve_mapping(topo, kinds, SolverConfig(deterministic_time_limit=0.5))
    assert np.array_equal(first.gpu_of_rank, second.gpu_of_rank)
    assert first.objective_s == second.objective_s
    table = rank_table(topo, first.gpu_of_rank, layout, moe=True)
    assert [row["rank"] for row in table] == list(range(topo.num_gpus))
    assert sorted((row["host"], row["local_gpu"]) for row in table) == sorted(
        (h, g) for h in topo.host_names for g in range(8))


def test_regular_cluster_keeps_the_hierarchy_order():
    from placement.topology import Topology

    topo = Topology(DGX, H100, num_gpus=1024)
    layout = Layout(tp=8, pp=16, dp=8, zero_stage=1, recompute="full", sequence_parallel=True)
    w, train, est = priced(topo, layout, model="llama3-405b", seq=8192, batch=2048)
    sol = solve_mapping(topo, group_kinds(layout, est, 0))
    assert sol.status == "OPTIMAL"
    assert sol.objective_s == pytest.approx(sol.bound_s)
    mapped = topo.with_mapping(sol.gpu_of_rank)
    assert estimate(w, train, mapped, LayoutBatch.from_layouts([layout])).step_time_s[0] == pytest.approx(
        est.step_time_s[0])


def test_launch_files(tmp_path):
    hosts = expand_hostlist("gpu[0001-0008]")
    conf_path = tmp_path / "topology.conf"
    conf_path.write_text("SwitchName=leaf0 Nodes=gpu[0001-0004]\nSwitchName=leaf1 Nodes=gpu[0005-0008]\n"
                         "SwitchName=spine Switches=leaf[0-1]\n")
    topo = topology_from_slurm(parse_topology_conf(conf_path), hosts, DGX, H100)
    order = np.array([7, 6, 5, 4, 3, 2, 1, 0])
    gpu_of_rank = order[np.arange(64) // 8] * 8 + np.arange(64) % 8
    files = {p.name: p for p in write_launch_files(tmp_path / "out", topo, gpu_of_rank, "test plan")}
    assert set(files) == {"hosts.txt", "slurm.hostfile", "rankfile"}
    lines = [x for x in files["hosts.txt"].read_text().splitlines() if not x.startswith("#") and x]
    assert lines[0] == "0 gpu0008" and lines[-1] == "7 gpu0001"
    tasks = [x for x in files["slurm.hostfile"].read_text().splitlines() if not x.startswith("#") and x]
    assert len(tasks) == 64 and tasks[:8] == ["gpu0008"] * 8
    ranks = [x for x in files["rankfile"].read_text().splitlines() if x.startswith("rank")]
    assert ranks[9] == "rank 9=gpu0007 slot=1"
