"""Topology: the levels a cluster file turns into, the span of groups on them, the graph, and bad sizes."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from placement.catalog import load_accelerator, load_cluster
from placement.errors import InputError
from placement.specs import ClusterSpec, SwitchTier
from placement.topology import Topology

H100_NVLINK = 450e9 * 0.82
H100_NIC = 50e9 * 0.92


def topo(n: int, cluster: str | ClusterSpec = "dgx-h100") -> Topology:
    c = load_cluster(cluster) if isinstance(cluster, str) else cluster
    return Topology(c, load_accelerator(c.accelerator), num_gpus=n)


def groups(num_gpus: int, stride: int, size: int) -> list[list[int]]:
    """The groups of `size` ranks `stride` apart under the default innermost-first mapping, listed by hand."""
    out = []
    for outer in range(num_gpus // (stride * size)):
        for inner in range(stride):
            out.append([outer * stride * size + inner + i * stride for i in range(size)])
    assert sorted(r for g in out for r in g) == list(range(num_gpus))
    return out


def most_in_one_block(group: list[int], block: int) -> int:
    return max(Counter(r // block for r in group).values())


def brute_force_within(t: Topology, stride: int, size: int, *, worst: bool = True) -> tuple[int, ...]:
    """members_within by listing every group: for each level, the members of a group that share its
    fullest block; `worst` takes the group for which that is smallest (the one that crosses most)."""
    pick = min if worst else max
    gs = groups(t.num_gpus, stride, size)
    return (*tuple(pick(most_in_one_block(g, lv.block_gpus) for g in gs) for lv in t.levels), size)


# -- levels ----------------------------------------------------------------------------------------


def test_dgx_h100_levels_at_1024_gpus() -> None:
    t = topo(1024)
    assert [lv.name for lv in t.levels] == ["nvlink4", "leaf", "spine"]
    assert [lv.block_gpus for lv in t.levels] == [8, 256, 1024]
    assert t.levels[0].bandwidth_bytes_per_s == pytest.approx(H100_NVLINK, rel=1e-12)
    assert t.levels[1].bandwidth_bytes_per_s == pytest.approx(H100_NIC, rel=1e-12)
    assert t.levels[2].bandwidth_bytes_per_s == pytest.approx(H100_NIC, rel=1e-12)  # no oversubscription
    assert [lv.latency_s for lv in t.levels] == [1.9e-6, 4.0e-6, 4.0e-6]


def test_dgx_h100_levels_at_16384_gpus() -> None:
    t = topo(16384)
    assert [lv.name for lv in t.levels] == ["nvlink4", "leaf", "spine", "core"]
    assert [lv.block_gpus for lv in t.levels] == [8, 256, 1024, 16384]
    assert t.levels[0].bandwidth_bytes_per_s == pytest.approx(H100_NVLINK, rel=1e-12)
    for lv in t.levels[1:]:
        assert lv.bandwidth_bytes_per_s == pytest.approx(H100_NIC, rel=1e-12)
    assert t.describe()[3] == {"level": 3, "name": "core", "block_gpus": 16384,
                               "bandwidth_bytes_per_s": pytest.approx(H100_NIC), "latency_s": 4.0e-6,
                               "oversubscription": 1.0}


def test_small_cluster_stops_at_the_tier_that_covers_it() -> None:
    assert [lv.block_gpus for lv in topo(8).levels] == [8]
    assert [lv.block_gpus for lv in topo(4).levels] == [4]  # a partial node
    assert [lv.block_gpus for lv in topo(64).levels] == [8, 64]
    assert [lv.block_gpus for lv in topo(2048).levels] == [8, 256, 1024, 2048]


def test_oversubscribed_tier_lowers_the_levels_above_it() -> None:
    base = load_cluster("dgx-h100")
    tiers = (base.tiers[0].model_copy(update={"oversubscription": 2.0}),
             base.tiers[1].model_copy(update={"oversubscription": 1.5}),
             base.tiers[2])
    t = topo(16384, base.model_copy(update={"tiers": tiers}))
    bw = [lv.bandwidth_bytes_per_s for lv in t.levels]
    assert bw[0] == pytest.approx(H100_NVLINK)
    assert bw[1] == pytest.approx(H100_NIC)  # a tier's own ratio throttles what leaves it, not what stays in
    assert bw[2] == pytest.approx(H100_NIC / 2.0)
    assert bw[3] == pytest.approx(H100_NIC / 3.0)
    plain = topo(16384)
    assert bw[2] < plain.levels[2].bandwidth_bytes_per_s and bw[3] < plain.levels[3].bandwidth_bytes_per_s


# -- spans ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1024, 16384])
def test_tp_group_stays_in_one_node(n: int) -> None:
    t = topo(n)
    s = t.span(1, 8)
    assert s.members_within == (8,) * (len(t.levels) + 1)
    assert s.size == 8
    assert s.top_level() == 0
    assert s.members_within == brute_force_within(t, 1, 8)
    for g in groups(n, 1, 8)[:50]:
        assert len({r // 8 for r in g}) == 1  # one node, one NVLink domain


def test_dp_group_spans_leaf_and_spine() -> None:
    """128 ranks 8 apart at 1024 GPUs: one GPU per node, 32 nodes per leaf, all 4 leaves."""
    t = topo(1024)
    s = t.span(8, 128)
    assert s.members_within == (1, 32, 128, 128)
    assert s.top_level() == 2  # the spine
    assert s.members_within == brute_force_within(t, 8, 128)
    assert s.members_within == brute_force_within(t, 8, 128, worst=False)


def test_dp_group_at_16384_stays_below_the_core() -> None:
    t = topo(16384)
    s = t.span(8, 128)
    assert s.members_within == (1, 32, 128, 128, 128)
    assert s.top_level() == 2


def test_single_gpu_group_spans_nothing() -> None:
    s = topo(1024).span(1, 1)
    assert s.size == 1 and s.top_level() == -1


def test_misaligned_span_takes_the_exact_path_and_matches_brute_force() -> None:
    """GB200 NVL72 at 144 GPUs, groups of 9 ranks 16 apart: 72 is not a multiple of 16, so the aligned
    shortcut does not apply; every group has 5 members in one rack and 4 in the other."""
    t = topo(144, "gb200-nvl72")
    assert [lv.block_gpus for lv in t.levels] == [72, 144]
    assert 72 % 16  # misaligned at level 0
    s = t.span(16, 9)
    assert s.members_within == (5, 9, 9)
    assert s.members_within == brute_force_within(t, 16, 9) == brute_force_within(t, 16, 9, worst=False)
    assert s.top_level() == 1


@pytest.mark.parametrize("size", [16, 48])
def test_misaligned_span_counts_the_worst_group(size: int) -> None:
    t = topo(144, "gb200-nvl72")
    assert 72 % size and size % 72  # misaligned: the exact path
    expected = brute_force_within(t, 1, size)
    assert expected[0] == size // 2  # the group straddling the rack boundary has half in each rack
    assert t.span(1, size).members_within == expected


# -- the graph --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("cluster", "n", "hosts"), [("dgx-h100", 1024, 128), ("gb200-nvl72", 144, 36),
                                                      ("dgx-h100", 4, 1)])
def test_graph_has_every_gpu_on_a_host(cluster: str, n: int, hosts: int) -> None:
    t = topo(n, cluster)
    g = t.graph
    gpus = [v for v, d in g.nodes(data=True) if d["kind"] == "gpu"]
    assert len(gpus) == n
    assert sum(1 for _, d in g.nodes(data=True) if d["kind"] == "host") == hosts
    per_node = t.cluster.gpus_per_node
    for v in gpus:
        host_neighbours = [u for u in g.neighbors(v) if g.nodes[u]["kind"] == "host"]
        assert host_neighbours == [f"host{int(v[3:]) // per_node}"]
        assert g.nodes[v]["host"] == f"host{int(v[3:]) // per_node}"
    assert nx.is_connected(g)


def test_graph_switch_counts_and_uplink_bandwidth() -> None:
    t = topo(1024)
    g = t.graph
    kinds = Counter(d["kind"] for _, d in g.nodes(data=True))
    assert kinds["scale_up_switch"] == 128
    assert kinds["switch"] == 4 + 1  # 4 leaves, 1 spine
    uplinks = [d for _, _, d in g.edges(data=True) if d["kind"] == "uplink"]
    assert len(uplinks) == 128 + 4
    assert all(d["bandwidth_bytes_per_s"] == pytest.approx(H100_NIC) for d in uplinks)


# -- bad sizes --------------------------------------------------------------------------------------


def test_more_gpus_than_a_finite_top_tier_covers_is_an_input_error() -> None:
    base = load_cluster("dgx-h100")
    capped = base.model_copy(update={"tiers": (base.tiers[0], SwitchTier(name="spine", fanout=4, latency_s=4e-6))})
    assert [lv.block_gpus for lv in topo(1024, capped).levels] == [8, 256, 1024]  # exactly what it covers
    with pytest.raises(InputError) as info:
        topo(2048, capped)
    msg = str(info.value)
    assert "1024" in msg and "2048" in msg and "fanout" in msg and "spine" in msg


@pytest.mark.parametrize(("cluster", "n", "lower", "upper"),
                         [("dgx-h100", 12, 8, 16), ("dgx-h100", 1001, 1000, 1008), ("gb200-nvl72", 146, 144, 148)])
def test_gpus_not_a_whole_number_of_nodes_is_an_input_error(cluster: str, n: int, lower: int, upper: int) -> None:
    with pytest.raises(InputError) as info:
        topo(n, cluster)
    msg = str(info.value)
    assert f"--gpus {n}" in msg
    assert f"use {lower} or {upper}" in msg


def test_nodes_and_gpus_are_exclusive_and_nodes_multiply() -> None:
    c = load_cluster("dgx-h100")
    acc = load_accelerator(c.accelerator)
    assert Topology(c, acc, num_nodes=4).num_gpus == 32
    with pytest.raises(InputError):
        Topology(c, acc, num_gpus=32, num_nodes=4)
    with pytest.raises(InputError):
        Topology(c, acc, num_gpus=0)


def test_accelerator_must_match_the_cluster() -> None:
    with pytest.raises(InputError, match="names accelerator"):
        Topology(load_cluster("dgx-h100"), load_accelerator("b200"), num_gpus=8)
