"""A topology's arithmetic group spans (no mapping) and the spans counted on the listed groups of the same ranks
(any mapping, the identity one included) are one answer: `plan`/`evaluate` price the first, `audit` and the
mapper the second.  They differed where groups do not tile a level's blocks (128-rank EP groups on 72-GPU NVL72
domains: 50 % against 71.5 % of a domain's traffic leaving it), so a plan's own files audited 7 % slower."""

from __future__ import annotations

import numpy as np
import pytest

from placement.catalog import load_accelerator, load_cluster
from placement.topology import Topology

CLUSTERS = [("gb200-nvl72", 1152), ("gb200-nvl72", 576), ("dgx-h100", 1024), ("dgx-b200", 512)]


def _topo(name: str, gpus: int) -> Topology:
    cluster = load_cluster(name)
    return Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@pytest.mark.parametrize(("cluster", "gpus"), CLUSTERS)
def test_arithmetic_and_listed_spans_agree(cluster: str, gpus: int) -> None:
    topo = _topo(cluster, gpus)
    assert topo.regular
    listed = topo.with_mapping(np.arange(gpus))
    checked = 0
    for size in (d for d in _divisors(gpus) if 1 < d <= 256):
        for stride in (d for d in _divisors(gpus // size) if d <= 64):
            a, b = topo.span(stride, size), listed.span(stride, size)
            assert a.members_within == b.members_within, (stride, size)
            assert a.crossing == pytest.approx(b.crossing, abs=1e-12), (stride, size)
            assert a.load == pytest.approx(b.load, abs=1e-12), (stride, size)
            checked += 1
    assert checked > 20


def test_ep128_on_nvl72_counts_the_traffic_that_leaves_a_domain() -> None:
    """1152 GB200, EP groups of 128 consecutive ranks: the worst 72-GPU domain sends 71.5 % of its members' group
    traffic out, not the 50 % of the best run of the worst group."""
    topo = _topo("gb200-nvl72", 1152)
    span = topo.span(1, 128)
    assert span.load[1] == pytest.approx(0.715, abs=0.001)
