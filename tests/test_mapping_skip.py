"""The flat-fabric bound: no host order prices below it, so a candidate whose allocation order already meets it
is not solved (issue: launch files that run exactly what was priced; "work that cannot change the ranking is
skipped")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import build_job, main
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.mapping.mapper import host_order_mapping
from placement.specs import Layout
from placement.workload import workload

TREE = str(Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf")


@pytest.mark.parametrize("oversubscription", [1.0, 4.0])
@pytest.mark.parametrize("layout", [
    Layout(tp=8, pp=4, dp=8, micro_batch_size=1, zero_stage=1, sequence_parallel=True),
    Layout(tp=4, cp=2, pp=2, dp=8, micro_batch_size=1, zero_stage=3, sequence_parallel=True),
    Layout(tp=2, dp=128, micro_batch_size=1, zero_stage=1, sequence_parallel=True),
])
def test_no_host_order_prices_below_the_flat_fabric(layout, oversubscription):
    model, train, topo = build_job("llama3-70b", None, None, None, 4096, 256, "bf16", TREE,
                                   "gpu[0030-0045],gpu[0098-0113]", ("dgx-h100",), None, oversubscription)
    w, batch = workload(model), LayoutBatch.from_layouts([layout])
    flat = float(estimate(w, train, topo.flattened(), batch).step_time_s[0])
    rng = np.random.default_rng(0)
    hosts = len(topo.host_names)
    steps = [float(estimate(w, train, topo.with_mapping(host_order_mapping(topo, order)), batch).step_time_s[0])
             for order in [np.arange(hosts), *(rng.permutation(hosts) for _ in range(12))]]
    assert min(steps) >= flat * (1 - 1e-12)
    # and every host order prices the same on the flat fabric (node blocks stay whole)
    flat_steps = {round(float(estimate(w, train, topo.flattened().with_mapping(host_order_mapping(topo, o)),
                                       batch).step_time_s[0]), 12)
                  for o in [np.arange(hosts), rng.permutation(hosts)]}
    assert len(flat_steps) == 1


def test_a_non_blocking_tree_is_planned_without_a_solve_and_an_oversubscribed_one_is_solved():
    base = ["plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "256", "--top-k", "3",
            "--slurm-topology", TREE, "--nodelist", "gpu[0030-0045],gpu[0098-0113]", "--node-type", "dgx-h100",
            "--json"]
    flat = json.loads(CliRunner().invoke(main, base).stdout)["plans"]
    statuses = {p["mapping_solver"]["status"] for p in flat}
    assert statuses == {"SKIPPED"}, statuses
    steep = json.loads(CliRunner().invoke(main, [*base, "--oversubscription", "8"]).stdout)["plans"]
    assert "SKIPPED" not in {p["mapping_solver"]["status"] for p in steep}


BLOCKS = str(Path(__file__).parent / "data" / "slurm" / "block-nvl72.conf")
ALTERNATE = ",".join(f"nvl{a:03d},nvl{b:03d}" for a, b in zip(range(1, 17), range(19, 35), strict=True))
"""32 GB200 trays of two racks, listed alternately (rack1, rack2, rack1, ...): the allocation order a scheduler
may give, in which consecutive ranks sit in different NVLink domains."""


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_a_scale_up_domain_of_several_hosts_is_never_skipped(dispatcher):
    """On NVL72 the NVLink domain is a rack of 18 trays, so the host order decides which trays share it: the bound
    took every host order to price the same, and no GB200 block allocation was ever mapped (a user trial); a
    flattened rack level is no bound either, since the expert all-to-all prices inside and beyond the domain at
    different efficiencies (a review: with DeepEP it priced above orders that run faster).  So no candidate is
    skipped there (the order changes the step either way: the sorted order that keeps each EP group in one rack is
    the faster one under the all-to-all dispatcher)."""
    from placement.planner import _no_order_is_faster
    from placement.search import SearchConfig, search
    from placement.specs.recipe import Recipe

    model, train, topo = build_job("qwen3-235b-a22b", None, None, None, 4096, 512, "bf16", BLOCKS, ALTERNATE,
                                   ("gb200-nvl72",), None, None)
    assert topo.scale_up_spans_hosts
    recipe = Recipe(moe_dispatcher=dispatcher)
    w, batch = workload(model), LayoutBatch.from_layouts([Layout(ep=64, dp=128, micro_batch_size=1, zero_stage=1)],
                                                        recipe)
    hosts = len(topo.host_names)
    given, ordered = (float(estimate(w, train, topo.with_mapping(host_order_mapping(topo, order)), batch,
                                     recipe).step_time_s[0])
                      for order in (np.arange(hosts), np.argsort([int(h[3:]) for h in topo.host_names])))
    if dispatcher == "alltoall":
        assert ordered < given * 0.97
    else:  # DeepEP's in-rack NVLink all-to-all is priced at a lower efficiency than its network sends: orders differ
        assert abs(ordered / given - 1) > 0.01
    result = search(model, train, topo, SearchConfig(top_k=3))
    assert not any(_no_order_is_faster(w, train, topo, result, int(i)) for i in result.ranked)


@pytest.mark.parametrize("top_k", ["1", "3"])
def test_trays_listed_alternately_across_racks_are_mapped_as_sorted_ones_are(top_k):
    """The trial's plan kept the alternate order (ep128, 3.184 s) beside its own Megatron-order baseline of the
    ep64 candidate, 2.924 s: the candidates the search ranks are now mapped, and the best is the sorted hosts'.
    With --top-k 1 too: the search ranked the candidates in the alternate order, so ep64, which only a reordering
    makes best, was never mapped (a user trial); it now ranks them with the hosts in block order."""
    base = ["--reproducible", "plan", "--model", "qwen3-235b-a22b", "--seq-len", "4096", "--global-batch", "512",
            "--top-k", top_k, "--slurm-topology", BLOCKS, "--node-type", "gb200-nvl72", "--json", "--nodelist"]
    alternate = json.loads(CliRunner().invoke(main, [*base, ALTERNATE]).stdout)["plans"][0]
    ordered = json.loads(CliRunner().invoke(main, [*base, "nvl[001-016],nvl[019-034]"]).stdout)["plans"][0]
    assert alternate["mapping_solver"]["status"] != "SKIPPED"
    assert alternate["step_time_s"] == pytest.approx(ordered["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("oversubscription", [1.0, 2.0])
def test_an_uneven_split_of_a_group_over_two_leaves_prices_no_cheaper_than_an_even_one(oversubscription):
    """The hierarchical collective priced a group by its largest piece per block: 1 + 7 nodes over two 2:1 leaves
    priced 0.154 s of gradient reduce-scatter where 4 + 4 priced 0.164 s, though the lone node's GPUs send 7/64 of
    the buffer each across the uplink, the 4 + 4's 1/64 (a user trial).  At 1:1 every split is a ring's bytes."""
    layout = LayoutBatch.from_layouts([Layout(tp=1, dp=64, micro_batch_size=1, zero_stage=1)])
    dp = {}
    for name, nodes in (("one leaf", "gpu[0038-0045]"), ("4 + 4", "gpu[0034-0037],gpu[0038-0041]"),
                        ("1 + 7", "gpu0037,gpu[0038-0044]")):
        model, train, topo = build_job("llama3-8b", None, None, None, 8192, 64, "bf16", TREE, nodes, ("dgx-h100",),
                                       None, oversubscription)
        dp[name] = float(estimate(workload(model), train, topo, layout).dp_s[0])
    if oversubscription == 1.0:
        assert dp["one leaf"] == pytest.approx(dp["4 + 4"], rel=1e-9) == pytest.approx(dp["1 + 7"], rel=1e-9)
    else:
        assert dp["one leaf"] < dp["4 + 4"] < dp["1 + 7"], dp


def test_megatron_order_sorts_host_names_as_slurm_does(tmp_path):
    """node1, node2, ..., node10 as SLURM sorts them (SLURM_NODEID): a string sort put node10-node16 between node1
    and node2, so the "megatron_order" baseline priced an order no launcher runs (a user trial)."""
    from placement.mapping.mapper import baseline_mappings

    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=l1 Nodes=node[1-8]\nSwitchName=l2 Nodes=node[9-16]\nSwitchName=s1 Switches=l[1-2]\n")
    _, _, topo = build_job("llama3-8b", None, None, None, 8192, 64, "bf16", str(conf), "node[1-16]", ("dgx-h100",),
                           None, 4.0)
    base = baseline_mappings(topo)
    assert np.array_equal(base["megatron_order"], base["allocation_order"])


def test_an_uneven_split_over_racks_prices_the_all_to_all_by_its_smallest_piece():
    """Groups of 32 consecutive ranks on NVL72 racks of 72 GPUs: some sit as 8 + 24, whose 8-GPU piece sends 24/32 of
    its bytes out of the rack; the all-to-all priced 16/32, the largest piece's (a review)."""
    from placement.cost.collectives import Groups, LevelArrays

    _, _, topo = build_job("llama3-8b", None, None, None, 4096, 512, "bf16", BLOCKS, "nvl[001-072]",
                           ("gb200-nvl72",), None, None)
    span = topo.span(1, 32)
    assert span.members_within[0] == 16 and span.members_least[0] == 8
    levels = LevelArrays(topo)
    groups = Groups(levels, np.array([1]), np.array([32]))
    nbytes = np.array([1e9])
    network = levels.bandwidth(groups.within)[0, 1] * levels.oversub[1]
    latency = float(groups.all_to_all(np.zeros(1))[0])
    assert float(groups.all_to_all(nbytes)[0]) - latency == pytest.approx(1e9 * (24 / 32) / network, rel=1e-9)
