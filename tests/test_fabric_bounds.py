"""Fabrics past their bounds: switch chains 1,000+ deep, islands with no common switch, ids that mix strings and
integers, GPUs past their host's count, links of 1e-300 B/s; each is planned or refused in one paragraph, never
a RecursionError, a hang or a fabric planned as if connected (issue: robustness, part two)."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner

from placement.cli import main

NIC, SPINE = 400e9, 3.2e12


def fabric(hosts: int = 2, gpus: int = 8, chain: int = 0, islands: bool = False, int_ids: bool = False) -> dict:
    """Hosts of `gpus` GPUs, one leaf each, under a spine (two spines with `islands`), `chain` more switches
    stacked above the spine."""
    g = nx.Graph()
    spines = ["spine0", "spine1"] if islands else ["spine0"]
    for s in spines:
        g.add_node(s, kind="switch", level=2)
    for h in range(hosts):
        host = h if int_ids else f"host{h}"
        leaf = f"leaf{h}"
        g.add_node(leaf, kind="switch", level=1)
        g.add_node(host, kind="host")
        g.add_edge(leaf, spines[h % len(spines)], bandwidth_bytes_per_s=SPINE)
        g.add_edge(host, leaf, bandwidth_bytes_per_s=NIC)
        for k in range(gpus):
            g.add_node(f"{host}/gpu{k}", kind="gpu", host=host, local_gpu=k)
            g.add_edge(f"{host}/gpu{k}", host)
    below = "spine0"
    for c in range(chain):
        g.add_node(f"up{c}", kind="switch", level=3 + c)
        g.add_edge(below, f"up{c}", bandwidth_bytes_per_s=SPINE)
        below = f"up{c}"
    return nx.node_link_data(g, edges="edges")


def plan_graph(tmp_path: Path, payload: dict):
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(payload))
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster-graph", str(path), "--node-type",
                                       "dgx-h100", "--seq-len", "4096", "--global-batch", "64"])
    assert "Traceback" not in result.output
    return result


def test_a_1200_switch_chain_above_the_hosts_plans(tmp_path):
    result = plan_graph(tmp_path, fabric(chain=1200))
    assert result.exit_code == 0, result.output


def test_islands_are_refused_not_planned_as_connected(tmp_path):
    result = plan_graph(tmp_path, fabric(hosts=4, islands=True))
    assert result.exit_code == 2
    assert "the fabric is not connected: 2 top switches share no parent" in result.stderr


def test_ids_mixing_strings_and_integers(tmp_path):
    result = plan_graph(tmp_path, fabric(hosts=4, islands=True, int_ids=True))
    assert result.exit_code == 2 and "not connected" in result.stderr  # sorted and named, not a TypeError
    assert plan_graph(tmp_path, fabric(hosts=2, int_ids=True)).exit_code == 0


def test_a_gpu_past_its_hosts_count_is_refused(tmp_path):
    payload = fabric()
    gpu = next(n for n in payload["nodes"] if n["kind"] == "gpu" and n["local_gpu"] == 7)
    gpu["local_gpu"] = 100
    result = plan_graph(tmp_path, payload)
    assert result.exit_code == 2 and "local_gpu 100" in result.stderr


@pytest.mark.parametrize("value", [1e-300, 5e-324, 1e300])
def test_link_bandwidth_out_of_range_is_refused(tmp_path, value):
    payload = fabric()
    payload["edges"][0]["bandwidth_bytes_per_s"] = value
    result = plan_graph(tmp_path, payload)
    assert result.exit_code == 2 and "bandwidth_bytes_per_s" in result.stderr


def test_a_1500_switch_chain_in_topology_conf_plans(tmp_path):
    lines = ["SwitchName=s0 Nodes=gpu[0001-0002]", *(f"SwitchName=s{i} Switches=s{i - 1}" for i in range(1, 1500))]
    conf = tmp_path / "topology.conf"
    conf.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--slurm-topology", str(conf), "--nodelist",
                                       "gpu[0001-0002]", "--node-type", "dgx-h100", "--seq-len", "4096",
                                       "--global-batch", "64"])
    assert result.exit_code == 0, result.output
