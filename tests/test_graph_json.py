"""networkx node-link JSON -> cluster graph: a graph written by networkx itself reads back equal, under
either edge-list key, and every missing or invalid attribute is an InputError naming file, node/edge, fix."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from placement.errors import InputError
from placement.loaders.graph_json import load_cluster_graph

NVLINK = 450e9
NIC = 50e9
SPINE = 400e9


def cluster() -> nx.Graph:
    """Two hosts of two GPUs under one leaf each, the leaves under a spine; NVLink inside each host."""
    graph = nx.Graph(name="tiny")
    graph.add_node("spine", kind="switch", level=2)
    for h in range(2):
        host, leaf = f"host{h}", f"leaf{h}"
        graph.add_node(leaf, kind="switch", level=1)
        graph.add_node(host, kind="host", rack=f"r{h}")
        graph.add_edge(leaf, "spine", bandwidth_bytes_per_s=SPINE)
        graph.add_edge(host, leaf, bandwidth_bytes_per_s=2 * NIC)
        for g in range(2):
            graph.add_node(f"{host}/gpu{g}", kind="gpu", host=host, local_gpu=g)
            graph.add_edge(f"{host}/gpu{g}", host)  # PCIe attach: no bandwidth needed
        graph.add_edge(f"{host}/gpu0", f"{host}/gpu1", bandwidth_bytes_per_s=NVLINK)
    return graph


def data() -> dict[str, Any]:
    return nx.node_link_data(cluster(), edges="edges")


def write(tmp_path: Path, payload: Any) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload, indent=1))
    return path


def edge_index(payload: dict[str, Any], a: str, b: str) -> int:
    key = "edges" if "edges" in payload else "links"
    return next(i for i, e in enumerate(payload[key]) if {e["source"], e["target"]} == {a, b})


def node(payload: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in payload["nodes"] if n["id"] == node_id)


def test_round_trip(tmp_path: Path) -> None:
    graph = load_cluster_graph(write(tmp_path, data()))
    assert nx.utils.graphs_equal(graph, cluster())
    assert not graph.is_directed()
    assert not graph.is_multigraph()
    assert graph.nodes["host1/gpu1"] == {"kind": "gpu", "host": "host1", "local_gpu": 1}
    assert graph.edges["host0", "leaf0"]["bandwidth_bytes_per_s"] == 2 * NIC
    assert graph.graph == {"name": "tiny"}


def test_links_key_of_older_networkx(tmp_path: Path) -> None:
    payload = data()
    payload["links"] = payload.pop("edges")
    graph = load_cluster_graph(write(tmp_path, payload))
    assert nx.utils.graphs_equal(graph, cluster())


def test_rail_optimized_gpu_to_switch_edge(tmp_path: Path) -> None:
    """A GPU's own NIC cabled to a leaf switch is a network edge: allowed, with its bandwidth."""
    graph = cluster()
    graph.add_edge("host0/gpu0", "leaf1", bandwidth_bytes_per_s=NIC)
    loaded = load_cluster_graph(write(tmp_path, nx.node_link_data(graph, edges="edges")))
    assert loaded.edges["host0/gpu0", "leaf1"]["bandwidth_bytes_per_s"] == NIC


def test_integer_node_ids(tmp_path: Path) -> None:
    graph = nx.convert_node_labels_to_integers(cluster(), label_attribute="name")
    for _, attributes in graph.nodes(data=True):
        if attributes["kind"] == "gpu":
            attributes["host"] = next(n for n, a in graph.nodes(data=True) if a["name"] == attributes["host"])
    loaded = load_cluster_graph(write(tmp_path, nx.node_link_data(graph, edges="edges")))
    assert nx.utils.graphs_equal(loaded, graph)


def set_node(node_id: str, attribute: str, value: Any):
    def mutate(payload: dict[str, Any]) -> None:
        if value is DELETE:
            del node(payload, node_id)[attribute]
        else:
            node(payload, node_id)[attribute] = value

    return mutate


def set_edge(a: str, b: str, attribute: str, value: Any):
    def mutate(payload: dict[str, Any]) -> None:
        edge = payload["edges"][edge_index(payload, a, b)]
        if value is DELETE:
            del edge[attribute]
        else:
            edge[attribute] = value

    return mutate


def add_edge(edge: dict[str, Any]):
    def mutate(payload: dict[str, Any]) -> None:
        payload["edges"].append(edge)

    return mutate


def set_top(key: str, value: Any):
    def mutate(payload: dict[str, Any]) -> None:
        if value is DELETE:
            del payload[key]
        else:
            payload[key] = value

    return mutate


DELETE = object()
N = len(cluster().edges)
"""Index of an appended edge."""

MALFORMED = {
    "node without kind": (
        set_node("leaf0", "kind", DELETE),
        "node 'leaf0' has no `kind`; set `kind` to one of gpu, host, switch.",
    ),
    "node with unknown kind": (
        set_node("host0", "kind", "server"),
        "node 'host0' has kind \"server\"; set `kind` to one of gpu, host, switch.",
    ),
    "switch without level": (
        set_node("spine", "level", DELETE),
        "switch node 'spine' has no `level`; add it (an integer >= 1: 1 = leaf switch, 2 = the switches above the "
        "leaves, ...).",
    ),
    "switch level 0": (
        set_node("leaf1", "level", 0),
        "switch node 'leaf1' has level = 0; expected an integer >= 1 (1 = leaf switch",
    ),
    "switch level as a string": (
        set_node("leaf1", "level", "1"),
        "switch node 'leaf1' has level = \"1\"; expected an integer >= 1",
    ),
    "gpu without host": (
        set_node("host0/gpu1", "host", DELETE),
        "gpu node 'host0/gpu1' has no `host`; set it to the id of its host node.",
    ),
    "gpu host is no node": (
        set_node("host0/gpu1", "host", "host9"),
        "gpu node 'host0/gpu1' has host \"host9\", which is no node; `host` is the id of a node of kind host.",
    ),
    "gpu host is a switch": (
        set_node("host0/gpu1", "host", "leaf0"),
        "gpu node 'host0/gpu1' has host \"leaf0\", which is a switch node; `host` is the id of a node of kind host.",
    ),
    "gpu without local_gpu": (
        set_node("host1/gpu0", "local_gpu", DELETE),
        "gpu node 'host1/gpu0' has no `local_gpu`; add it (an integer >= 0: the GPU's index on its host, from 0).",
    ),
    "negative local_gpu": (
        set_node("host1/gpu0", "local_gpu", -1),
        "gpu node 'host1/gpu0' has local_gpu = -1; expected an integer >= 0",
    ),
    "boolean local_gpu": (
        set_node("host1/gpu0", "local_gpu", True),
        "gpu node 'host1/gpu0' has local_gpu = true; expected an integer >= 0",
    ),
    "two GPUs with one local_gpu": (
        set_node("host1/gpu1", "local_gpu", 0),
        "gpu nodes 'host1/gpu0' and 'host1/gpu1' both have host 'host1' and local_gpu 0; each GPU of a host has "
        "its own local_gpu.",
    ),
    "host-switch edge without bandwidth": (
        set_edge("host1", "leaf1", "bandwidth_bytes_per_s", DELETE),
        "edge 'leaf1' -- 'host1' (edges[{host1-leaf1}]) (switch-host) has no `bandwidth_bytes_per_s`; network "
        "edges carry their bandwidth per direction in bytes per second, e.g. 50e9 for a 400 Gb/s link.",
    ),
    "switch-switch edge without bandwidth": (
        set_edge("leaf0", "spine", "bandwidth_bytes_per_s", DELETE),
        "edge 'spine' -- 'leaf0' (edges[{leaf0-spine}]) (switch-switch) has no `bandwidth_bytes_per_s`",
    ),
    "gpu-switch edge without bandwidth": (
        add_edge({"source": "host0/gpu0", "target": "leaf0"}),
        f"edge 'host0/gpu0' -- 'leaf0' (edges[{N}]) (gpu-switch) has no `bandwidth_bytes_per_s`",
    ),
    "zero bandwidth": (
        set_edge("leaf0", "spine", "bandwidth_bytes_per_s", 0),
        "edge 'spine' -- 'leaf0' (edges[{leaf0-spine}]) has bandwidth_bytes_per_s = 0; expected a number > 0 "
        "(bytes per second per direction, e.g. 50e9 for a 400 Gb/s link).",
    ),
    "bandwidth as a string": (
        set_edge("host0", "leaf0", "bandwidth_bytes_per_s", "400G"),
        "edge 'leaf0' -- 'host0' (edges[{host0-leaf0}]) has bandwidth_bytes_per_s = \"400G\"; expected a number > 0",
    ),
    "negative NVLink bandwidth": (
        set_edge("host0/gpu0", "host0/gpu1", "bandwidth_bytes_per_s", -1.0),
        "edge 'host0/gpu0' -- 'host0/gpu1' (edges[{host0/gpu0-host0/gpu1}]) has bandwidth_bytes_per_s = -1.0",
    ),
    "GPUs of two hosts": (
        add_edge({"source": "host0/gpu0", "target": "host1/gpu0", "bandwidth_bytes_per_s": NVLINK}),
        f"edge 'host0/gpu0' -- 'host1/gpu0' (edges[{N}]) joins GPUs of two hosts ('host0' and 'host1'); GPU-GPU "
        "edges stay in a host: connect hosts (or the GPUs' NICs) through switch nodes.",
    ),
    "GPU to another host": (
        add_edge({"source": "host1", "target": "host0/gpu1"}),
        f"edge 'host1' -- 'host0/gpu1' (edges[{N}]) joins gpu 'host0/gpu1' to host 'host1', but the gpu's `host` "
        "is 'host0'; a GPU links only to its own host",
    ),
    "host to host": (
        add_edge({"source": "host0", "target": "host1", "bandwidth_bytes_per_s": NIC}),
        f"edge 'host0' -- 'host1' (edges[{N}]) joins two hosts directly; hosts connect through switch nodes",
    ),
    "edge to an unknown node": (
        add_edge({"source": "host0", "target": "leaf7", "bandwidth_bytes_per_s": NIC}),
        f"edge 'host0' -- 'leaf7' (edges[{N}]) names node \"leaf7\", which is not in `nodes`; add the node or "
        "correct the id.",
    ),
    "self-loop": (
        add_edge({"source": "spine", "target": "spine", "bandwidth_bytes_per_s": SPINE}),
        f"edge 'spine' -- 'spine' (edges[{N}]) joins a node to itself; remove it.",
    ),
    "edge given twice": (
        add_edge({"source": "spine", "target": "leaf0", "bandwidth_bytes_per_s": SPINE}),
        f"edge 'spine' -- 'leaf0' (edges[{N}]) repeats edges[{{leaf0-spine}}] (the graph is undirected); give each "
        "link once, with the total bandwidth_bytes_per_s.",
    ),
    "edge without target": (
        add_edge({"source": "spine"}),
        f'edges[{N}] is {{"source": "spine"}}; each edge is an object with `source` and `target` node ids.',
    ),
    "node without id": (
        lambda payload: payload["nodes"].append({"kind": "host"}),
        'nodes[9] is {"kind": "host"}; each node is an object with an `id`.',
    ),
    "node listed twice": (
        lambda payload: payload["nodes"].append({"id": "leaf1", "kind": "switch", "level": 1}),
        "node 'leaf1' is listed twice in `nodes`; give each id once.",
    ),
    "both edges and links": (
        lambda payload: payload.update(links=copy.deepcopy(payload["edges"])),
        "the file has both `edges` and `links`; they are two names for the edge list (networkx >= 3.4 writes "
        "`edges`, older versions `links`): keep one.",
    ),
    "no edge list": (
        set_top("edges", DELETE),
        "no `edges` list (or `links`, as networkx < 3.4 wrote it); add the edges.",
    ),
    "no node list": (
        set_top("nodes", DELETE),
        "no `nodes` list; add the nodes, each an object with `id` and `kind`.",
    ),
    "nodes not a list": (
        set_top("nodes", {"spine": {}}),
        "`nodes` is a JSON dict, expected a list of objects.",
    ),
    "directed": (
        set_top("directed", True),
        '`"directed": true`; the cluster graph is undirected and simple (links are used both ways, with their '
        "bandwidth): set it to false.",
    ),
    "multigraph": (
        set_top("multigraph", True),
        '`"multigraph": true`; the cluster graph is undirected and simple (parallel links are one edge, with their '
        "bandwidth): set it to false.",
    ),
}


@pytest.mark.parametrize(("mutate", "message"), MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_graph_is_input_error(tmp_path: Path, mutate, message: str) -> None:
    payload = data()
    mutate(payload)
    # Edge positions in the expected text are written {a-b}; resolve them against the unmutated file.
    for a, b in re.findall(r"\{([^{}-]+)-([^{}]+)\}", message):
        message = message.replace(f"{{{a}-{b}}}", str(edge_index(data(), a, b)))
    path = write(tmp_path, payload)
    with pytest.raises(InputError, match=re.escape(f"{path}: {message}")):
        load_cluster_graph(path)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "nodes": [\n    {"id": "a", "kind": "host"},\n  ]\n}\n')
    with pytest.raises(InputError, match=re.escape(f"{path}:4:3: not valid JSON (")):
        load_cluster_graph(path)


def test_top_level_list(tmp_path: Path) -> None:
    path = write(tmp_path, [])
    with pytest.raises(InputError, match=re.escape(f"{path}: the top level is a JSON list, expected an object")):
        load_cluster_graph(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(InputError, match=re.escape(f"cluster graph file `{path}` cannot be read (")):
        load_cluster_graph(path)
