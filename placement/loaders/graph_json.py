"""Read a cluster graph from networkx node-link JSON, checking the attributes the topology needs.

The file is what ``json.dump(networkx.node_link_data(G), f)`` writes: ``{"directed": false,
"multigraph": false, "graph": {...}, "nodes": [{"id": ..., ...}], "edges": [{"source": ...,
"target": ..., ...}]}``.  networkx 3.4 renamed the edge list key from ``links`` to ``edges`` (files
written by older versions say ``links``); either is accepted, not both.

What the graph must say:

- every node has ``kind``: ``gpu``, ``host`` or ``switch``;
- a ``gpu`` node has ``host`` (the id of its ``host`` node) and ``local_gpu`` (its index on that host,
  an integer >= 0, unique per host);
- a ``switch`` node has ``level``, an integer >= 1 (1 = leaf switch, 2 = the switches above leaves, ...);
- an edge between two GPUs joins GPUs of one host and may carry ``bandwidth_bytes_per_s``; an edge between
  a GPU and its own host may too;
- every other edge (host-switch, switch-switch, and GPU-switch for NICs cabled per GPU) carries
  ``bandwidth_bytes_per_s`` > 0;
- the graph is undirected and simple: no ``"directed": true``, no ``"multigraph": true``, no self-loops,
  no edge given twice, no edge to a node the node list lacks.

Other attributes pass through untouched.  Every failure is an InputError naming the file, the node or
edge, the attribute, the value and the fix.  The checks run on the JSON before networkx sees it, so
networkx never fills in a missing node or merges a duplicate edge silently.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any, Final

import networkx as nx

from placement.errors import InputError
from placement.loaders.files import parse_json, read_text
from placement.specs.hardware import MAX_BANDWIDTH_BYTES_PER_S, MIN_BANDWIDTH_BYTES_PER_S

NODE_KINDS: Final = ("gpu", "host", "switch")
BANDWIDTH: Final = "bandwidth_bytes_per_s"
_EDGE_KEYS: Final = ("edges", "links")
"""networkx >= 3.4 writes ``edges``; earlier versions wrote ``links``."""


def load_cluster_graph(path: Path) -> nx.Graph:
    """The undirected cluster graph in a node-link JSON file, its attributes checked."""
    path = Path(path)
    data = _read_json(path)
    edge_key = _edge_key(data, path)
    nodes = _check_nodes(data["nodes"], path)
    _check_edges(data[edge_key], edge_key, nodes, path)
    return _node_link_graph(data, edge_key)


def _read_json(path: Path) -> dict[str, Any]:
    text = read_text(path, "cluster graph file",
                     "pass a UTF-8 JSON file written by `json.dump(networkx.node_link_data(G), f)`")
    data = parse_json(text, path, "a cluster graph is networkx node-link JSON.", lambda err: (
        f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg}); the file must be networkx node-link "
        "JSON, as `json.dump(networkx.node_link_data(G), f)` writes it."),
        unique_keys="a cluster graph states each field once (json.load would keep the last, silently)")
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: the top level is a JSON {type(data).__name__}, expected an object with `nodes` and `edges` "
            "(networkx node-link JSON)."
        )
    return data


def _edge_key(data: dict[str, Any], path: Path) -> str:
    """Which of ``edges``/``links`` holds the edges; checks the graph flags and the two lists' types."""
    present = [key for key in _EDGE_KEYS if key in data]
    if len(present) == 2:
        raise InputError(
            f"{path}: the file has both `edges` and `links`; they are two names for the edge list (networkx "
            ">= 3.4 writes `edges`, older versions `links`): keep one."
        )
    if not present:
        raise InputError(f"{path}: no `edges` list (or `links`, as networkx < 3.4 wrote it); add the edges.")
    if "nodes" not in data:
        raise InputError(f"{path}: no `nodes` list; add the nodes, each an object with `id` and `kind`.")
    for key in ("nodes", present[0]):
        if not isinstance(data[key], list):
            raise InputError(f"{path}: `{key}` is a JSON {type(data[key]).__name__}, expected a list of objects.")
    for flag, why in (("directed", "links are used both ways"), ("multigraph", "parallel links are one edge")):
        if data.get(flag, False) is not False:
            raise InputError(
                f'{path}: `"{flag}": {json.dumps(data[flag])}`; the cluster graph is undirected and simple '
                f"({why}, with their bandwidth): set it to false."
            )
    return present[0]


MIN_LINK_BYTES_PER_S = MIN_BANDWIDTH_BYTES_PER_S
"""Slowest link accepted (1 MB/s, as in a cluster YAML): below it a number is a typo (bits for bytes, a missing
exponent) that would price a step at years."""
MAX_LINK_BYTES_PER_S = MAX_BANDWIDTH_BYTES_PER_S
"""Fastest link accepted (1 PB/s, far past any NVLink or NIC)."""


def _check_nodes(nodes: list[Any], path: Path) -> dict[Any, dict[str, Any]]:
    """Node id -> attributes, every node's kind and kind-specific attributes checked."""
    by_id: dict[Any, dict[str, Any]] = {}
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or "id" not in node:
            raise InputError(f"{path}: nodes[{index}] is {json.dumps(node)}; each node is an object with an `id`.")
        node_id = node["id"]
        if not isinstance(node_id, (str, int)) or isinstance(node_id, bool):
            raise InputError(f"{path}: nodes[{index}] has id {json.dumps(node_id)}; an id is a string or an integer.")
        if node_id in by_id:
            raise InputError(f"{path}: node {node_id!r} is listed twice in `nodes`; give each id once.")
        kind = node.get("kind")
        if kind not in NODE_KINDS:
            what = "has no `kind`" if "kind" not in node else f"has kind {json.dumps(kind)}"
            raise InputError(f"{path}: node {node_id!r} {what}; set `kind` to one of {', '.join(NODE_KINDS)}.")
        if kind == "switch":
            _check_int(node, "level", 1, node_id, path, "1 = leaf switch, 2 = the switches above the leaves, ...")
        by_id[node_id] = node
    local_gpus: dict[tuple[Any, int], Any] = {}
    for node_id, node in by_id.items():
        if node["kind"] != "gpu":
            continue
        if "host" not in node:
            raise InputError(f"{path}: gpu node {node_id!r} has no `host`; set it to the id of its host node.")
        host = node["host"]
        valid_id = isinstance(host, (str, int)) and not isinstance(host, bool)
        if not valid_id or by_id.get(host, {}).get("kind") != "host":
            found = f"a {by_id[host]['kind']} node" if valid_id and host in by_id else "no node"
            raise InputError(
                f"{path}: gpu node {node_id!r} has host {json.dumps(host)}, which is {found}; `host` is the id "
                "of a node of kind host."
            )
        local = _check_int(node, "local_gpu", 0, node_id, path, "the GPU's index on its host, from 0")
        if (host, local) in local_gpus:
            raise InputError(
                f"{path}: gpu nodes {local_gpus[host, local]!r} and {node_id!r} both have host {host!r} and "
                f"local_gpu {local}; each GPU of a host has its own local_gpu."
            )
        local_gpus[host, local] = node_id
    return by_id


def _check_int(node: dict[str, Any], attribute: str, minimum: int, node_id: Any, path: Path, meaning: str) -> int:
    if attribute not in node:
        raise InputError(
            f"{path}: {node['kind']} node {node_id!r} has no `{attribute}`; add it (an integer >= {minimum}: "
            f"{meaning})."
        )
    value = node[attribute]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(
            f"{path}: {node['kind']} node {node_id!r} has {attribute} = {json.dumps(value)}; expected an integer "
            f">= {minimum} ({meaning})."
        )
    return value


def _check_edges(edges: list[Any], edge_key: str, nodes: dict[Any, dict[str, Any]], path: Path) -> None:
    seen: dict[frozenset[Any], int] = {}
    for index, edge in enumerate(edges):
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise InputError(
                f"{path}: {edge_key}[{index}] is {json.dumps(edge)}; each edge is an object with `source` and "
                "`target` node ids."
            )
        source, target = edge["source"], edge["target"]
        name = f"edge {source!r} -- {target!r} ({edge_key}[{index}])"
        for end in (source, target):
            if not isinstance(end, (str, int)) or isinstance(end, bool) or end not in nodes:
                raise InputError(
                    f"{path}: {name} names node {json.dumps(end)}, which is not in `nodes`; add the node or "
                    "correct the id."
                )
        if source == target:
            raise InputError(f"{path}: {name} joins a node to itself; remove it.")
        pair = frozenset((source, target))
        if pair in seen:
            raise InputError(
                f"{path}: {name} repeats {edge_key}[{seen[pair]}] (the graph is undirected); give each link once, "
                f"with the total {BANDWIDTH}."
            )
        seen[pair] = index
        _check_edge_kinds(edge, name, nodes[source], nodes[target], path)


def _check_edge_kinds(edge: dict[str, Any], name: str, a: dict[str, Any], b: dict[str, Any], path: Path) -> None:
    kinds = {a["kind"], b["kind"]}
    if kinds == {"gpu"} and a["host"] != b["host"]:
        raise InputError(
            f"{path}: {name} joins GPUs of two hosts ({a['host']!r} and {b['host']!r}); GPU-GPU edges stay in a "
            "host: connect hosts (or the GPUs' NICs) through switch nodes."
        )
    if kinds == {"gpu", "host"}:
        gpu, host = (a, b) if a["kind"] == "gpu" else (b, a)
        if gpu["host"] != host["id"]:
            raise InputError(
                f"{path}: {name} joins gpu {gpu['id']!r} to host {host['id']!r}, but the gpu's `host` is "
                f"{gpu['host']!r}; a GPU links only to its own host: fix the edge or the gpu's `host`."
            )
    if kinds == {"host"}:
        raise InputError(
            f"{path}: {name} joins two hosts directly; hosts connect through switch nodes: add a switch between them."
        )
    required = "switch" in kinds
    if BANDWIDTH not in edge:
        if required:
            raise InputError(
                f"{path}: {name} ({a['kind']}-{b['kind']}) has no `{BANDWIDTH}`; network edges carry their "
                "bandwidth per direction in bytes per second, e.g. 50e9 for a 400 Gb/s link."
            )
        return
    value = edge[BANDWIDTH]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise InputError(
            f"{path}: {name} has {BANDWIDTH} = {json.dumps(value)}; expected a number > 0 (bytes per second per "
            "direction, e.g. 50e9 for a 400 Gb/s link)."
        )
    if not MIN_LINK_BYTES_PER_S <= value <= MAX_LINK_BYTES_PER_S:
        raise InputError(
            f"{path}: {name} has {BANDWIDTH} = {value:g}, outside {MIN_LINK_BYTES_PER_S:g} to "
            f"{MAX_LINK_BYTES_PER_S:g} bytes per second per direction; check the unit (50e9 is a 400 Gb/s link)."
        )


def _node_link_graph(data: dict[str, Any], edge_key: str) -> nx.Graph:
    """networkx.node_link_graph with the edge key named, on every networkx this package supports."""
    keyword = "edges" if "edges" in inspect.signature(nx.node_link_graph).parameters else "link"
    return nx.node_link_graph(data, directed=False, multigraph=False, **{keyword: edge_key})
