"""The cost model's grouping of candidates by (stride, size): the O(K) path must equal np.unique."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.cost.collectives import _divisors, _unique_pairs


@settings(max_examples=60, deadline=None)
@given(num_gpus=st.sampled_from([1, 8, 24, 1000, 1024, 131072, 1000000]), k=st.integers(0, 400),
       seed=st.integers(0, 2**32 - 1), off_divisor=st.booleans())
def test_unique_pairs_equals_numpy_unique(num_gpus: int, k: int, seed: int, off_divisor: bool) -> None:
    rng = np.random.default_rng(seed)
    divs = _divisors(num_gpus)
    stride, size = rng.choice(divs, k), rng.choice(divs, k)
    if off_divisor and k:  # a value that does not divide the GPU count takes the np.unique path
        size[rng.integers(k)] = num_gpus + 1
    uniq, inverse = _unique_pairs(stride, size, num_gpus)
    want_uniq, want_inverse = np.unique(stride * (num_gpus + 1) + size, return_inverse=True)
    assert uniq.tolist() == want_uniq.tolist()
    assert inverse.reshape(-1).tolist() == want_inverse.reshape(-1).tolist()


def test_divisors() -> None:
    assert _divisors(12).tolist() == [1, 2, 3, 4, 6, 12]
    assert _divisors(1).tolist() == [1]


def test_reduce_scatter_and_all_gather_pay_a_ring_latency_the_all_reduce_a_tree() -> None:
    """NCCL runs reduce-scatter and all-gather as rings, one step per member (tuning.cc: nsteps = nRanks - 1, the
    inter-node ones nNodes - 1); only its all-reduce has the double binary tree's log2 steps.  A DP group of 1,024
    H100s over 128 nodes was priced at the tree's 38 us a gather; the ring's 1,023 steps are 896 NVLink and 127
    network hops (a review; a first fix counted one step a member per level, 41, which also let a host order price
    below the flattened fabric that bounds it, tests/test_mapping_skip.py)."""
    from placement.catalog import load_accelerator, load_cluster
    from placement.cost import collectives as coll
    from placement.cost.constants import COLLECTIVE_BASE_LATENCY_S
    from placement.topology import Topology

    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=1024)
    lv = coll.LevelArrays(topo)
    group = coll.Groups(lv, np.array([1]), np.array([1024]))
    # 8 members a node, 32 nodes a leaf, 4 leaves a spine block: of a ring's 1,023 steps, 1,024 - 128 join two GPUs
    # of a node, 128 - 4 two nodes of a leaf, 4 - 1 two leaves
    ring = 896 * lv.lat[0] + 124 * lv.lat[1] + 3 * lv.lat[2] + COLLECTIVE_BASE_LATENCY_S
    tree = 2 * (3 * lv.lat[0] + 5 * lv.lat[1] + 2 * lv.lat[2]) + COLLECTIVE_BASE_LATENCY_S
    assert float(group.reduce_scatter(np.array([0.0]))[0]) == pytest.approx(ring)
    assert float(group.all_reduce(np.array([0.0]))[0]) == pytest.approx(tree)


def test_a_ring_across_nodes_pays_the_network_overhead_on_its_steps_inside_a_node() -> None:
    """NCCL prices each step of a ring that spans nodes at no less than the proxy's network overhead, its NVLink steps
    too (tuning.cc: intraLat = max(intraLat, netOverhead), 1 us on an Intel host).  With a fitted NVLink step of
    0.4 us, a 2-node reduce-scatter's (or all-gather's) 14 NVLink steps cost 14 us, not 5.6; a ring inside one node
    keeps 0.4 us a step."""
    from placement.calibration.profile import with_constants
    from placement.catalog import load_accelerator, load_cluster
    from placement.cost import collectives as coll
    from placement.cost.constants import COLLECTIVE_BASE_LATENCY_S, NCCL_NET_OVERHEAD_S
    from placement.topology import Topology

    cluster = load_cluster("dgx-h100")
    topo = with_constants(Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=16),
                          {"scale_up_latency_s": 0.4e-6})
    lv = coll.LevelArrays(topo)
    assert lv.lat[0] == pytest.approx(0.4e-6) and lv.lat[0] < NCCL_NET_OVERHEAD_S
    two_nodes = coll.Groups(lv, np.array([1]), np.array([16]))
    one_node = coll.Groups(lv, np.array([1]), np.array([8]))
    assert float(two_nodes.reduce_scatter(np.array([0.0]))[0]) == pytest.approx(
        14 * NCCL_NET_OVERHEAD_S + lv.lat[1] + COLLECTIVE_BASE_LATENCY_S)
    assert float(one_node.reduce_scatter(np.array([0.0]))[0]) == pytest.approx(
        7 * lv.lat[0] + COLLECTIVE_BASE_LATENCY_S)
