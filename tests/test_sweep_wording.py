"""Singular counts in the sweep's summary lines (a QA note: "1 nodes per leaf", "1 are no better by time to train")."""

from __future__ import annotations

from placement.sweep.output import network_lines


def _network(nodes: int, counts: str) -> dict:
    return {"A": {"oversubscription": {"value": 4.0, "source": "--set"},
                  "nodes_per_leaf": {"value": nodes, "source": "study file", "counts": counts},
                  "nic_bandwidth_bytes_per_s": {"value": 50e9, "source": "cluster dgx-h100's file"}}}


def test_one_node_per_leaf_is_singular() -> None:
    assert "1 node per leaf (study file)" in network_lines(_network(1, "nodes"))[0]
    assert "2 nodes per leaf (study file)" in network_lines(_network(2, "nodes"))[0]
    domains = "72-GPU nvlink5 domains (18 nodes each)"
    assert "1 72-GPU nvlink5 domain (18 nodes each) per leaf" in network_lines(_network(1, domains))[0]
