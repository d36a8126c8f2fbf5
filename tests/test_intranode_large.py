"""Nodes of more than 8 GPUs (nvidia-smi matrices of 12, 16, 32 GPUs): the best split into rings is found by
components, matching and CP-SAT instead of enumerating every partition (which hung past 8 GPUs), and equals
the exhaustive answer where that can run."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.intranode import _node_layout, _partitions, _split_by_threshold, node_layout, ring_bandwidth
from placement.loaders.nvidia_smi import parse_topo_matrix
from placement.specs.fabric import GpuLink, LinkClass, NodeTopo

SELF = GpuLink(kind=LinkClass.SELF)
NV18, NV4 = GpuLink(kind=LinkClass.NVLINK, nvlinks=18), GpuLink(kind=LinkClass.NVLINK, nvlinks=4)
PIX, PXB, SYS = GpuLink(kind=LinkClass.PIX), GpuLink(kind=LinkClass.PXB), GpuLink(kind=LinkClass.SYS)


def node(n: int, link) -> NodeTopo:
    return NodeTopo(num_gpus=n, links=tuple(tuple(SELF if i == j else link(i, j) for j in range(n)) for i in range(n)),
                    nics=(), source="test")


def gbps(layout) -> dict[int, float]:
    return {k: v / 1e9 for k, v in layout.group_bandwidth.items() if k > 1}


def test_32_gpus_on_one_switch():
    assert gbps(node_layout(node(32, lambda i, j: NV18))) == {2: 450, 4: 450, 8: 450, 16: 450, 32: 450}


def test_16_pcie_gpus_in_switches_and_sockets():
    """PIX inside a switch of 4, PXB inside a socket of 8, SYS across: groups stay inside the fastest level."""
    lay = node_layout(node(16, lambda i, j: PIX if i // 4 == j // 4 else PXB if i // 8 == j // 8 else SYS))
    assert gbps(lay) == {2: 24, 4: 24, 8: 24, 16: 10}
    assert all(len({g // 8 for g in lay.order[8][s:s + 8]}) == 1 for s in (0, 8))  # one socket per group


def test_a_ring_of_16_nvlinked_neighbours():
    """NVLink only between neighbours of a 16-GPU ring: pairs and the whole ring ride NVLink, groups of 4 or 8
    (paths, not rings) cannot."""
    lay = node_layout(node(16, lambda i, j: NV4 if abs(i - j) in (1, 15) else SYS))
    assert gbps(lay) == {2: 100, 4: 10, 8: 10, 16: 100}


def test_12_gpus_in_nvlinked_pairs():
    lay = node_layout(node(12, lambda i, j: NV4 if i // 2 == j // 2 else SYS))
    assert gbps(lay) == {2: 100, 3: 10, 4: 10, 6: 10, 12: 10}
    assert {tuple(sorted(lay.order[2][s:s + 2])) for s in range(0, 12, 2)} == {(i, i + 1) for i in range(0, 12, 2)}


def test_a_16_gpu_matrix_from_nvidia_smi_text():
    names = [f"GPU{i}" for i in range(16)]
    rows = ["\t" + "\t".join(names) + "\tCPU Affinity"]
    for i in range(16):
        cells = [" X " if i == j else ("NV12" if i // 8 == j // 8 else "SYS") for j in range(16)]
        rows.append(f"GPU{i}\t" + "\t".join(cells) + "\t0-63")
    topo = parse_topo_matrix("\n".join(rows) + "\n", "16-gpu")
    assert gbps(node_layout(topo)) == {2: 300, 4: 300, 8: 300, 16: 10}


LINKS = st.sampled_from([NV18, NV4, PIX, PXB, SYS])


@settings(max_examples=30, deadline=None)
@given(n=st.sampled_from([4, 6, 8]), data=st.data())
def test_the_large_node_method_equals_exhaustion_on_small_nodes(n, data):
    upper = {(i, j): data.draw(LINKS) for i in range(n) for j in range(i + 1, n)}
    topo = node(n, lambda i, j: upper[(min(i, j), max(i, j))])
    _node_layout.cache_clear()
    exact = node_layout(topo)
    bw = np.array([[np.inf if i == j else exact_bw(upper, i, j) for j in range(n)] for i in range(n)])
    for k, best in exact.group_bandwidth.items():
        if k == 1:
            continue
        t, groups = _split_by_threshold(bw, k)
        assert t == best
        assert sorted(g for grp in groups for g in grp) == list(range(n)) and {len(grp) for grp in groups} == {k}
        assert min(ring_bandwidth(bw, grp) for grp in groups) == t
    assert next(iter(_partitions((0, 1, 2, 3), 2))) == ((0, 1), (2, 3))


def exact_bw(upper, i, j) -> float:
    from placement.intranode import link_bandwidth

    return link_bandwidth(upper[(min(i, j), max(i, j))])
