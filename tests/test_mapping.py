"""Rank-to-GPU mapping: CP-SAT and the regular-tree bound against brute force, the irregular allocation,
limits and gaps, determinism, launch files."""

from __future__ import annotations

import itertools
import json
import math
import time
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
from placement.mapping.regular import BoxKind, PairKind, RegularTree, best_tiling, max_unit_savings, regular_tree
from placement.mapping.report import crossings, rank_table, write_launch_files
from placement.specs import Layout, TrainingSpec
from placement.specs.hardware import SwitchTier
from placement.topology import Topology
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
    assert crossings(mapped.topo, [kinds["tp"]])["tp"]["highest_level"]["nvlink4"] == topo.num_gpus // layout.tp
    # the solver's own order (the exact cost model keeps another where it prices faster: here the pipeline order,
    # whose data-parallel groups split the leaves more evenly)
    report = crossings(topo.with_mapping(mapped.solution.gpu_of_rank), list(kinds.values()))
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


def test_regular_1024_gpus_is_optimal_and_priced_like_the_hierarchy_order():
    topo = Topology(DGX, H100, num_gpus=1024)
    layout = Layout(tp=8, pp=16, dp=8, zero_stage=1, recompute="full", sequence_parallel=True)
    w, train, est = priced(topo, layout, model="llama3-405b", seq=8192, batch=2048)
    kinds = group_kinds(layout, est, 0)
    sol = solve_mapping(topo, kinds)
    assert sol.status == "OPTIMAL" and sol.gap == 0.0
    assert sol.objective_s == pytest.approx(sol.bound_s)
    # no worse than the hierarchy order under the proxy, and the exact cost model prices it the same
    assert sol.objective_s <= proxy_objective_s(topo, kinds, np.arange(128)) * (1 + 1e-9)
    mapped = topo.with_mapping(sol.gpu_of_rank)
    assert estimate(w, train, mapped, LayoutBatch.from_layouts([layout])).step_time_s[0] == pytest.approx(
        est.step_time_s[0])


# -- regular trees: the bound of regular.py, its tiling, and the limits ------------------------------------

def small_tree(fanouts: tuple, oversubscription: tuple):
    """A catalog-style cluster of 8-GPU nodes with small switch fanouts, so brute force can check it."""
    tiers = tuple(SwitchTier(name=f"tier{i}", fanout=f, oversubscription=o, latency_s=4e-6)
                  for i, (f, o) in enumerate(zip(fanouts, oversubscription, strict=True)))
    return DGX.model_copy(update={"tiers": tiers})


def brute_force_all_levels(topo, kinds) -> float:
    """Best proxy objective over every permutation of node blocks onto hosts, at every level."""
    gph = topo.gpus_per_host
    hb = topo.block_of[:, ::gph]
    perms = np.array(list(itertools.permutations(range(hb.shape[1]))))
    total = np.zeros(len(perms))
    for j in range(hb.shape[0]):
        if len(np.unique(hb[j])) in (1, hb.shape[1]):
            continue  # one unit, or one host per unit: every assignment pays the same
        unit = hb[j][perms]  # permutation x block -> unit
        for kind in kinds:
            rows = kind.ranks(topo.num_gpus) // gph
            rows = rows[~(rows == rows[:, :1]).all(axis=1)]
            units = np.sort(unit[:, rows], axis=2)
            touched = 1 + np.count_nonzero(np.diff(units, axis=2), axis=2)
            total += touched.sum(axis=1) * kind.size * kind.seconds_at(topo)[j + 1]
    return float(total.min())


@pytest.mark.parametrize(("model", "layout", "batch"), [
    ("llama3-8b", Layout(tp=2, cp=2, dp=8, pp=2, zero_stage=1), 64),
    ("llama3-8b", Layout(tp=1, dp=16, pp=4, zero_stage=1), 64),
    ("llama3-8b", Layout(tp=1, dp=16, pp=4, zero_stage=1), 1024),  # heavier pp traffic: another tiling
    ("llama3-8b", Layout(tp=8, dp=2, pp=4, zero_stage=1), 256),
    ("llama3-8b", Layout(tp=2, dp=4, pp=8, zero_stage=1), 4096),
    ("mixtral-8x7b", Layout(tp=1, ep=8, dp=32, pp=2, zero_stage=1), 256),
    ("mixtral-8x7b", Layout(tp=2, ep=4, etp=1, dp=8, pp=4, zero_stage=1), 1024),
])
def test_regular_tree_is_optimal_against_brute_force(model, layout, batch):
    # 8 hosts: leaves of 2 (2:1 oversubscribed), pods of 4, a core; 40,320 host orders
    topo = Topology(small_tree((2, 2, None), (2.0, 1.0, 1.0)), H100, num_gpus=64)
    _, _, est = priced(topo, layout, model=model, seq=4096, batch=batch)
    kinds = group_kinds(layout, est, 0)
    sol = solve_mapping(topo, kinds, SolverConfig(num_workers=1, interleave_search=False))
    assert "regular-tree bound" in sol.solver
    best = brute_force_all_levels(topo, kinds)
    assert sol.status == "OPTIMAL" and sol.gap == 0.0
    assert proxy_objective_s(topo, kinds, sol.host_of_block) == pytest.approx(best, rel=1e-6)
    assert sol.bound_s == pytest.approx(best, rel=1e-6)
    assert sorted(sol.gpu_of_rank.tolist()) == list(range(64))


def test_regular_slurm_allocation_with_interleaved_names(tmp_path):
    # two leaves of 4 whose host names alternate: the tiling must follow the leaves, not the names
    topo = allocation(tmp_path, [4, 4])
    layout = Layout(tp=1, ep=8, pp=2, dp=32, zero_stage=1)
    _, _, est = priced(topo, layout, batch=64)
    kinds = group_kinds(layout, est, 0)
    sol = solve_mapping(topo, kinds)
    assert "regular-tree bound" in sol.solver and sol.status == "OPTIMAL"
    best = brute_force_min(topo, kinds)
    assert proxy_objective_s(topo, kinds, sol.host_of_block) == pytest.approx(best, rel=1e-6)
    plain = proxy_objective_s(topo, kinds, np.arange(8))
    assert plain > best * 1.01  # the names alone would split the groups


def _best_savings_of_all_subsets(tree: RegularTree, units: int) -> int:
    """max over every set of `units` node blocks of savings_0, straight from its definition (regular.py,
    Claim 1): a box kind saves the set's size minus the groups it touches, a pair kind its pairs inside."""
    n = tree.num_blocks
    member = np.zeros((math.comb(n, units), n), dtype=bool)  # one row per subset
    for row, subset in enumerate(itertools.combinations(range(n), units)):
        member[row, list(subset)] = True
    x = tree.coords()
    total = np.zeros(len(member), dtype=np.int64)
    for k in tree.boxes:
        others = [i for i in range(len(tree.sizes)) if i not in k.axes]
        gid = np.unique(x[others].T, axis=0, return_inverse=True)[1].ravel()
        touched = sum(member[:, gid == g].any(axis=1) for g in np.unique(gid))
        total += k.weight[0] * (units - touched)
    for k in tree.pairs:
        low = np.flatnonzero(x[k.axis] < tree.sizes[k.axis] - 1)
        total += k.weight[0] * (member[:, low] & member[:, low + tree.breaks[k.axis]]).sum(axis=1)
    return int(total.max())


@pytest.mark.parametrize(("seed", "units"), [(0, 3), (1, 4), (2, 6), (3, 6), (4, 9)])
def test_downset_program_equals_the_best_of_all_subsets(seed, units):
    """Claim 2: the best set of U blocks is a down-set, so the small program finds the best of all
    C(18, U) sets."""
    rng = np.random.default_rng(seed)
    w = [(int(v),) for v in rng.integers(1, 100, size=4)]
    tree = RegularTree(sizes=(3, 2, 3), breaks=(1, 3, 6),
                       boxes=(BoxKind("a", (0,), w[0]), BoxKind("b", (0, 1), w[1]), BoxKind("c", (1,), w[2])),
                       pairs=(PairKind("pp", 2, w[3]),), levels=(1,), unit_hosts=(units,))
    best = _best_savings_of_all_subsets(tree, units)
    savings, proven, _ = max_unit_savings(tree, 0, SolverConfig(num_workers=1, interleave_search=False),
                                          time.perf_counter() + 60)
    assert proven
    assert savings == best


def test_regular_16384_gpus_is_proven_optimal_and_reproducible():
    topo = Topology(DGX, H100, num_gpus=16384)
    layout = Layout(tp=8, pp=16, dp=128, zero_stage=1, recompute="full", sequence_parallel=True)
    _, _, est = priced(topo, layout, model="llama3-405b", seq=8192, batch=2048)
    kinds = group_kinds(layout, est, 0)
    first, second = solve_mapping(topo, kinds), solve_mapping(topo, kinds)
    assert first.status == "OPTIMAL" and first.gap == 0.0 and first.objective_s == first.bound_s
    assert first.gpu_of_rank.tobytes() == second.gpu_of_rank.tobytes()
    assert first.objective_s == pytest.approx(proxy_objective_s(topo, kinds, first.host_of_block), rel=1e-6)
    chunks = solve_mapping(topo, kinds, SolverConfig(exploit_regularity=False, deterministic_time_limit=0.2))
    assert first.objective_s <= proxy_objective_s(topo, kinds, chunks.host_of_block) * (1 + 1e-6)


def test_regular_tree_states_the_gap_when_no_tiling_meets_the_bound():
    # heavy pp traffic: the best pod shape by itself is 3 stages x ~43 replicas, which boxes cannot tile
    topo = Topology(DGX, H100, num_gpus=16384)
    layout = Layout(tp=8, pp=16, dp=128, zero_stage=1, recompute="full", sequence_parallel=True)
    _, _, est = priced(topo, layout, model="llama3-405b", seq=8192, batch=16384)
    kinds = group_kinds(layout, est, 0)
    sol = solve_mapping(topo, kinds, SolverConfig(deterministic_time_limit=0.2))
    assert sol.status == "FEASIBLE"
    assert 0 < sol.gap < 0.01
    assert sol.gap == pytest.approx((sol.objective_s - sol.bound_s) / sol.objective_s)
    assert sol.objective_s == pytest.approx(proxy_objective_s(topo, kinds, sol.host_of_block), rel=1e-6)


def _hard(tmp_path):
    topo = allocation(tmp_path, [37, 64, 27, 64, 64])
    layout = Layout(tp=1, ep=64, pp=8, dp=256, zero_stage=1)
    _, _, est = priced(topo, layout)
    return topo, group_kinds(layout, est, 0)


def test_deterministic_limit_returns_the_best_mapping_with_its_gap(tmp_path):
    topo, kinds = _hard(tmp_path)
    sol = solve_mapping(topo, kinds, SolverConfig(deterministic_time_limit=0.05))
    assert sol.status == "FEASIBLE"
    assert 0 < sol.gap < 1
    assert sol.bound_s < sol.objective_s
    assert sol.objective_s == pytest.approx(proxy_objective_s(topo, kinds, sol.host_of_block), rel=1e-6)


@pytest.mark.parametrize("limit_s", [0.3, 3.0])  # stops while building the model; stops the search
def test_wall_clock_ceiling_is_honoured(tmp_path, limit_s):
    topo, kinds = _hard(tmp_path)
    start = time.perf_counter()
    sol = solve_mapping(topo, kinds, SolverConfig(deterministic_time_limit=1000.0, time_limit_s=limit_s))
    wall = time.perf_counter() - start
    assert sol.status == "FEASIBLE" and 0 < sol.gap < 1
    assert wall < limit_s + 5.0  # generous: the groups are collected before the first deadline check


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


def test_the_rankfile_slot_is_the_local_rank_not_the_gpu(tmp_path):
    """Open MPI binds a rank to the CPU its `slot=` names; the GPU is the local rank under CUDA_VISIBLE_DEVICES.
    The planned GPU index written as the slot (0, 3, 1, 2, ...) bound ranks to CPUs out of order (a user trial)."""
    hosts = expand_hostlist("gpu[0001-0002]")
    conf_path = tmp_path / "topology.conf"
    conf_path.write_text("SwitchName=leaf0 Nodes=gpu[0001-0002]\n")
    topo = topology_from_slurm(parse_topology_conf(conf_path), hosts, DGX, H100)
    perm = np.array([0, 3, 1, 2, 4, 7, 5, 6])
    gpu_of_rank = (np.arange(16) // 8) * 8 + perm[np.arange(16) % 8]
    files = {p.name: p for p in write_launch_files(tmp_path / "out", topo, gpu_of_rank, "test plan")}
    text = files["rankfile"].read_text()
    ranks = [x for x in text.splitlines() if x.startswith("rank")]
    assert ranks[:4] == ["rank 0=gpu0001 slot=0", "rank 1=gpu0001 slot=1", "rank 2=gpu0001 slot=2",
                         "rank 3=gpu0001 slot=3"]
    assert "CUDA_VISIBLE_DEVICES" in text and "gpu0001 CUDA_VISIBLE_DEVICES=0,3,1,2,4,7,5,6" in (
        files["cuda_visible_devices.txt"].read_text())


def test_plan_records_and_prints_the_gap():
    from click.testing import CliRunner

    from placement.cli import main

    conf = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"
    args = ["plan", "--model", "deepseek-v3", "--slurm-topology", str(conf), "--nodelist", "gpu[0001-0256]",
            "--node-type", "dgx-h100", "--oversubscription", "2", "--seq-len", "4096", "--global-batch", "4096",
            "--top-k", "1", "--map-time-limit", "0.01"]
    data = json.loads(CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False).stdout)
    solver = data["plans"][0]["mapping_solver"]
    assert solver["status"] == "FEASIBLE" and solver["bound_s"] < solver["objective_s"]
    assert solver["gap"] == pytest.approx((solver["objective_s"] - solver["bound_s"]) / solver["objective_s"], abs=1e-6)
    text = CliRunner().invoke(main, args, catch_exceptions=False).stdout
    assert f"gap {solver['gap']:.2%}" in text


def test_a_tiling_gap_on_a_small_allocation_is_closed_by_single_host_chunks(tmp_path):
    """Three leaves of 8 hosts, Mixtral with expert groups over two nodes: the best box tiling stays above
    the bound, and the leaves' gcd would make each leaf one chunk (nothing left to decide).  The chunk
    model at single-host chunks arranges hosts inside the leaves and beats the tiling."""
    from placement.mapping.cpsat import OBJECTIVE_RESOLUTION_S

    topo = allocation(tmp_path, [8, 8, 8])
    layout = Layout(tp=2, ep=8, etp=2, dp=96, micro_batch_size=2, zero_stage=1, sequence_parallel=True)
    _, _, est = priced(topo, layout, model="mixtral-8x7b", batch=192)
    kinds = group_kinds(layout, est, 0)
    tree = regular_tree(topo, kinds, OBJECTIVE_RESOLUTION_S)
    assert tree is not None
    tiling_s = best_tiling(tree)[1] * OBJECTIVE_RESOLUTION_S
    sol = solve_mapping(topo, kinds)
    assert sol.bound_s < tiling_s  # the tiling alone leaves a gap here
    assert "chunk model" in sol.solver
    assert sol.objective_s == pytest.approx(proxy_objective_s(topo, kinds, sol.host_of_block), rel=1e-6)
    assert sol.objective_s < tiling_s * 0.99
    assert sol.bound_s <= sol.objective_s


@pytest.mark.parametrize(("pp", "vpp", "wraps"), [(4, 1, False), (4, 4, True), (2, 4, False)])
def test_the_crossings_count_the_interleaved_pipelines_wrap_around_link(tmp_path, pp, vpp, wraps):
    """With virtual stages Megatron's last pipeline rank also sends to the first (the next rank wraps,
    parallel_state.py) and cost.comm.pp_term prices that link: the crossings table counts it too, one pair per
    position in the stage (a trial found a table of 192 links for a job that runs 256).  At pp 2 the wrap is the
    same pair; without interleaving there is none."""
    topo = allocation(tmp_path, [4, 4])
    layout = Layout(tp=4, pp=pp, vpp=vpp, dp=topo.num_gpus // (4 * pp), zero_stage=1, sequence_parallel=True)
    _, _, est = priced(topo, layout, batch=64)
    kind = next(k for k in group_kinds(layout, est, 0) if k.name == "pp")
    pairs = crossings(topo.with_mapping(np.arange(topo.num_gpus)), [kind])["pp"]
    per_stage = topo.num_gpus // pp
    assert pairs["groups"] == per_stage * (pp if wraps else pp - 1)
    assert sum(pairs["highest_level"].values()) == pairs["groups"]
