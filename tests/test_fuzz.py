"""A fuzz corpus for every input parser (issue #7): generated bad inputs each end in a success or a clean
`InputError` that names the file (or the flag), never another exception, never a hang.

Every input starts from a real-format sample (the catalogs, tests/data/) and is mutated by hypothesis, with
fixed seeds (``derandomize=True``) so CI runs the same corpus every time.  Byte mutations (truncation, byte
flips, junk and non-UTF-8 insertions, deleted and doubled spans, empty files) apply to every parser;
structured ones (a key deleted, renamed or added, a value replaced by a wrong type, zero, a negative, a
huge or non-finite number, a deep nesting) to the YAML and JSON formats; line and token ones to the
line formats.  An input the parser accepts goes on through the step that consumes it (a topology, a
search), so a value that is read fine but breaks the core is caught too; every numeric field of real model,
cluster and accelerator files is also set to extremes (past int32, the int64 edge, near float underflow and
overflow) and searched.

Inputs that once crashed a parser are kept as explicit cases in `REGRESSIONS`, named after the bug.
`test_corpus_size` counts the distinct inputs the whole file exercised.
"""

from __future__ import annotations

import copy
import json
import math
import random
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.audit.launch import parse_launch
from placement.catalog import load_accelerator, load_cluster, load_model, read_yaml
from placement.cli import main
from placement.errors import InputError, PlacementInfeasible
from placement.fabric import topology_from_graph, topology_from_slurm
from placement.loaders.graph_json import load_cluster_graph
from placement.loaders.hf_config import load_hf_config
from placement.loaders.hostlist import expand_hostlist, read_nodelist
from placement.loaders.nvidia_smi import load_topo_matrix
from placement.loaders.slurm import parse_topology_conf
from placement.search import SearchConfig, search
from placement.specs import AcceleratorSpec, ModelSpec, TrainingSpec
from placement.specs.fabric import SlurmBlocks
from placement.sweep.run import cells
from placement.sweep.spec import SweepSpec
from placement.topology import Topology

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"

MAX_SECONDS_PER_INPUT = 60.0
"""A parser reads any of these inputs in milliseconds and a search on 16 GPUs takes about a second; the budget
catches a hang, not a slow machine (at 10 s, a busy 2-core CI machine once took 10.2 s over DeepSeek-V3 with a
2^31 vocabulary, whose memory message then searched 8,192 GPUs in full: `_fits_on` now answers that in 0.8 s)."""

EXAMPLES = 60
"""Generated inputs per parser test (30 to 120 by parser); with the regressions, the extreme values and the
CLI sample the file exercises over 500 distinct inputs (`test_corpus_size` checks)."""

FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.large_base_example])

CORPUS: dict[str, set[bytes]] = defaultdict(set)
"""Distinct inputs exercised, per parser."""
OUTCOMES: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
"""Per parser: how many inputs were read ("ok") and how many refused ("InputError")."""

DGX = load_cluster("dgx-h100")
H100 = load_accelerator("h100-sxm")
SMALL = ModelSpec(name="fuzz-small", num_layers=4, hidden_size=512, ffn_hidden_size=1024, num_attention_heads=8,
                  num_kv_heads=2, vocab_size=32000)


# --- samples ---------------------------------------------------------------------------------------


def _samples(folder: Path, pattern: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted(folder.glob(pattern))]


def _graph_sample() -> bytes:
    """Two 8-GPU hosts under two leaves and a spine, NVLink inside each host (what dgx-h100 nodes need)."""
    g = nx.Graph(name="fuzz")
    g.add_node("spine", kind="switch", level=2)
    for h in range(2):
        host, leaf = f"host{h}", f"leaf{h}"
        g.add_node(leaf, kind="switch", level=1)
        g.add_node(host, kind="host")
        g.add_edge(leaf, "spine", bandwidth_bytes_per_s=400e9)
        g.add_edge(host, leaf, bandwidth_bytes_per_s=400e9)
        for i in range(8):
            g.add_node(f"{host}/gpu{i}", kind="gpu", host=host, local_gpu=i)
            g.add_edge(f"{host}/gpu{i}", host)
        for i in range(1, 8):
            g.add_edge(f"{host}/gpu0", f"{host}/gpu{i}", bandwidth_bytes_per_s=450e9)
    return json.dumps(nx.node_link_data(g, edges="edges"), indent=1).encode()


TINY_SWEEP = b"""name: tiny
designs:
  - {name: h100x8, cluster: dgx-h100, gpus: 8, price_per_gpu_hour: 2.0}
  - {name: bought, cluster: dgx-a100-80g, capex_per_gpu: 20000, power_per_gpu_w: 900}
budget: 1000000
workloads:
  - {name: 8b, model: llama3-8b, seq_len: 4096, global_batch: 64, tokens: 1.0e9}
"""

CATALOG = {"model-yaml": ROOT / "models", "cluster-yaml": ROOT / "hardware" / "clusters",
           "accelerator-yaml": ROOT / "hardware" / "accelerators"}

SAMPLES: dict[str, list[bytes]] = {
    "model-yaml": _samples(CATALOG["model-yaml"], "*.yaml"),
    "cluster-yaml": _samples(CATALOG["cluster-yaml"], "*.yaml"),
    "accelerator-yaml": _samples(CATALOG["accelerator-yaml"], "*.yaml"),
    "sweep-yaml": [*_samples(ROOT / "hardware" / "sweeps", "*.yaml"), TINY_SWEEP],
    "hf-config": _samples(DATA / "hf", "*/config.json"),
    "slurm-conf": _samples(DATA / "slurm", "*.conf"),
    "nvidia-smi": _samples(DATA / "nvsmi", "*.txt"),
    "graph-json": [_graph_sample()],
    "nodelist-file": [b"gpu0040\ngpu0002  # a comment\n\ngpu[0103-0110]\n", b"node[01-04],node[09-10]\n"],
}

LAUNCH_SAMPLES: list[tuple[str, bytes]] = [
    (p.suffix or "." + p.name, p.read_bytes()) for p in sorted((DATA / "audit").rglob("*")) if p.is_file()
    and p.name != "README.md"
]
"""(suffix, content) of the audit's launch material: Megatron and DeepSpeed scripts, torchtitan TOML, DeepSpeed
JSON and hostfile, Megatron-Bridge YAML.  The suffix decides how parse_launch reads a file."""


# --- running one input -----------------------------------------------------------------------------


def exercise(parser: str, data: bytes, call: Callable[[], object], names: str) -> None:
    """Run `call` on one input: success or an InputError whose message contains `names`; nothing else."""
    CORPUS[parser].add(data)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # numpy overflow or an invalid cast: a wrong number
            call()
        OUTCOMES[parser]["ok"] += 1
    except InputError as err:
        OUTCOMES[parser]["InputError"] += 1
        message = str(err)
        assert names in message, f"{parser}: the message does not name {names!r}: {message}"
        assert "Traceback" not in message
    elapsed = time.perf_counter() - start
    assert elapsed < MAX_SECONDS_PER_INPUT, f"{parser}: {elapsed:.1f} s on one input of {len(data)} bytes"


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _model_then_search(path: Path) -> None:
    model = load_model(str(path))
    _search_or_infeasible(model, DGX, H100, 8)


def _cluster_then_search(path: Path) -> None:
    cluster = load_cluster(str(path))
    accelerator = load_accelerator(cluster.accelerator)
    _search_or_infeasible(SMALL, cluster, accelerator, None)


def _search_or_infeasible(model: ModelSpec, cluster, accelerator, gpus: int | None) -> None:
    topo = Topology(cluster, accelerator, num_gpus=gpus or 2 * cluster.gpus_per_node)
    json.dumps(topo.describe(), allow_nan=False)  # what `show cluster --json` prints: Infinity is not JSON
    train = TrainingSpec(seq_len=min(model.default_seq_len, 4096), global_batch=64)
    try:
        result = search(model, train, topo, SearchConfig(top_k=1))
    except PlacementInfeasible:
        return
    # a finite, positive plan or a clear "infeasible": an overflow to inf or nan is a wrong number, not an answer
    best = result.estimates.step_time_s[result.ranked[0]]
    assert math.isfinite(best) and best > 0, f"{model.name} on {cluster.name}: step time {best}"


def _accelerator_then_search(path: Path) -> None:
    accelerator = read_yaml(path, AcceleratorSpec, "accelerator")
    _search_or_infeasible(SMALL, DGX.model_copy(update={"accelerator": accelerator.name}), accelerator, 16)


def _sweep(path: Path) -> None:
    spec = read_yaml(path, SweepSpec, "sweep")
    try:
        cells(spec)
    except InputError as err:  # as the CLI does: the designs' and workloads' errors, against the sweep file
        raise InputError(f"{path}: {err}") from None


def _hf(path: Path) -> None:
    load_hf_config(path)


def _slurm(path: Path) -> None:
    conf = parse_topology_conf(path)
    nodes = [n for b in conf.blocks for n in b.nodes] if isinstance(conf, SlurmBlocks) else \
        [n for s in conf.switches for n in s.nodes]
    topology_from_slurm(conf, nodes[:64], DGX, H100)


def _nvsmi(path: Path) -> None:
    node = load_topo_matrix(path)
    Topology(DGX, H100, num_gpus=8).with_node_topo(node)


def _graph(path: Path) -> None:
    topology_from_graph(load_cluster_graph(path), DGX, H100, str(path))


RUNNERS: dict[str, tuple[str, Callable[[Path], object]]] = {
    # parser: (file name, what reads it; names in messages are the file name)
    "model-yaml": ("fuzz-model.yaml", _model_then_search),
    "cluster-yaml": ("fuzz-cluster.yaml", _cluster_then_search),
    "accelerator-yaml": ("fuzz-accelerator.yaml", _accelerator_then_search),
    "sweep-yaml": ("fuzz-sweep.yaml", _sweep),
    "hf-config": ("config.json", _hf),
    "slurm-conf": ("fuzz-topology.conf", _slurm),
    "nvidia-smi": ("fuzz-topo.txt", _nvsmi),
    "graph-json": ("fuzz-graph.json", _graph),
    "nodelist-file": ("fuzz-hosts.txt", lambda p: read_nodelist(f"@{p}")),
}


def run_file(parser: str, data: bytes, folder: Path) -> None:
    name, read = RUNNERS[parser]
    path = _write(folder, name, data)
    exercise(parser, data, lambda: read(path), name)


def run_launch(suffix: str, data: bytes, folder: Path) -> None:
    """One launch file through the audit's parser; a hostfile keeps its name (it has no suffix)."""
    name = "hostfile" if suffix == ".hostfile" else f"fuzz-launch{suffix}"
    path = _write(folder, name, data)
    exercise("launch", data, lambda: parse_launch([path]), name)


def run_hostlist(expr: str) -> None:
    exercise("hostlist", expr.encode("utf-8", "surrogatepass"), lambda: expand_hostlist(expr, source="fuzz-expr"),
             "fuzz-expr")


# --- mutations -------------------------------------------------------------------------------------

JUNK = [b"\x00", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"[", b"]", b"{", b"}", b":", b"- ", b"\t", b"\\",
        b"#", b"=", b",", b"\n", b"&a", b"*a", b"!!python/object:os.system", b"'", b'"', b"NaN", b"-1",
        b"99999999999999999999999999999", b"\xe2\x80\xae", b"\r", b"%", b"@"]
"""Bytes a fuzzer splices in: non-UTF-8 sequences, syntax characters, YAML tags and anchors, huge numbers."""

HUGE_DIGITS = "9" * 5000
"""More digits than Python converts to int by default (sys.get_int_max_str_digits() = 4300)."""
ARABIC = "\u0661-\u0663"
"""Arabic-Indic digits one to three as a range: `\\d` and str.isdigit() take them, SLURM does not."""

BAD_VALUES: list[Any] = [None, "", "x", "auto", -1, 0, 1, 2**31, 2**63, 2**64, 10**30, -(10**30), 0.5, -0.5, 1e308,
                         float("inf"), float("-inf"), float("nan"), True, False, [], {}, [1, 2], {"a": 1}, "1e3",
                         "x" * 2000, [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]
"""Wrong types, zero, negatives, sizes past int32/int64, non-finite floats, containers, deep nesting."""


@st.composite
def byte_mutation(draw, sample: bytes) -> bytes:
    n = len(sample)
    at = draw(st.integers(0, n))
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "double", "empty", "nest"]))
    if kind == "truncate":
        return sample[:at]
    if kind == "flip" and n:
        i = min(at, n - 1)
        return sample[:i] + bytes([sample[i] ^ draw(st.integers(1, 255))]) + sample[i + 1:]
    if kind == "insert":
        return sample[:at] + draw(st.sampled_from(JUNK)) + sample[at:]
    if kind == "delete":
        return sample[:at] + sample[at + draw(st.integers(1, 64)):]
    if kind == "double":
        return sample[:at] + sample[at:at + draw(st.integers(1, 200))] * 2 + sample[at + 200:]
    if kind == "nest":  # deep nesting: past the recursion limit of YAML's and JSON's readers
        depth = draw(st.sampled_from([50, 2000, 20000]))
        return sample[:at] + b"[" * depth + b"]" * depth + sample[at:]
    return b""


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def structured_mutation(draw, obj: Any) -> Any:
    """One key deleted, renamed or added, or one value replaced by a bad one, anywhere in the document."""
    doc = copy.deepcopy(obj)
    paths = _paths(doc)[1:]
    if not paths:
        return draw(st.sampled_from(BAD_VALUES))
    path = draw(st.sampled_from(paths))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "rename", "add"]))
    if op == "replace":
        parent[last] = draw(st.sampled_from(BAD_VALUES))
    elif op == "delete":
        del parent[last]
    elif op == "rename" and isinstance(parent, dict):
        parent[f"{last}_typo"] = parent.pop(last)
    elif isinstance(parent, dict):
        parent[draw(st.sampled_from(["unknown_key", "", "123", "hidden_size", "nodes", "edges"]))] = \
            draw(st.sampled_from(BAD_VALUES))
    else:
        parent.append(draw(st.sampled_from(BAD_VALUES)))
    return doc


def _dump_yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


def _dump_json(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # NaN and Infinity as Python writes them (not strict JSON)


@st.composite
def line_mutation(draw, sample: bytes, tokens: list[str]) -> bytes:
    """A line dropped, doubled, swapped or added, or one token replaced."""
    lines = sample.decode().splitlines()
    i = draw(st.integers(0, max(len(lines) - 1, 0)))
    op = draw(st.sampled_from(["drop", "double", "swap", "add", "token", "token", "token"]))
    if not lines or op == "add":
        lines.insert(i, " ".join(draw(st.lists(st.sampled_from(tokens), min_size=1, max_size=4))))
    elif op == "drop":
        del lines[i]
    elif op == "double":
        lines.insert(i, lines[i])
    elif op == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        words = lines[i].split() or [""]
        k = draw(st.integers(0, len(words) - 1))
        words[k] = draw(st.sampled_from(tokens))
        lines[i] = " ".join(words)
    return "\n".join(lines).encode("utf-8", "surrogatepass")


SLURM_TOKENS = ["SwitchName=s9", "SwitchName=leaf0", "Switches=leaf0", "Switches=spine", "Switches=s[0-3]",
                "Nodes=gpu0001", "Nodes=n[1-99999999]", "Nodes=n[3-1]", "Nodes=n[1-2", "Nodes=n1]", "Nodes=n[01-3]",
                "Nodes=n1,n1", "Nodes=n[1-2][3]", "Nodes=", f"Nodes=n[{ARABIC}]", f"Nodes=n[1-{HUGE_DIGITS}]",
                "LinkSpeed=-1", "LinkSpeed=x", "LinkSpeed=²", f"LinkSpeed={HUGE_DIGITS}", "BlockName=rack9",
                "BlockName=rack1", "BlockSizes=0", "BlockSizes=18,35", "BlockSizes=²", f"BlockSizes=18,{HUGE_DIGITS}",
                "RingName=r", "\\", "#", "Foo=bar", "=x", "SwitchName=a,b", 'SwitchName="x"', "SwitchName=" + "s" * 70,
                "switchname=S nodes=N", "\\#"]

NVSMI_TOKENS = ["X", "NV0", "NV18", "NV" + HUGE_DIGITS, f"NV{ARABIC[-1]}", "SOC", "PIX", "PXB", "PHB", "NODE", "SYS",
                "GPU0", "GPU9", "GPU" + HUGE_DIGITS, "NIC0", "NIC99", "mlx5_0", "Legend:", "NIC Legend:",
                "NIC0: mlx5_0", "CPU Affinity", "N/A", "0-31", "", "\t"]

HOST_TOKENS = ["gpu0001", "gpu[0001-0004]", "n[1-99999999]", "n[3-1]", "n[1-2", "n1]", "n[01-3]", "n1,n1",
               "@other", "# only a comment", f"n[{ARABIC}]", f"n[{HUGE_DIGITS}]", "n[1-2][3]", "a b", "n[]", ",",
               "n,,m"]


# --- the parser tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _bytes_or_structured(draw, parser: str, dump: Callable[[Any], bytes], load: Callable[[bytes], Any]) -> bytes:
    sample = draw(st.sampled_from(SAMPLES[parser]))
    if draw(st.booleans()):
        return draw(byte_mutation(sample))
    return dump(draw(structured_mutation(load(sample))))


@FUZZ
@given(data=st.data())
def test_model_yaml(folder: Path, data: st.DataObject) -> None:
    run_file("model-yaml", _bytes_or_structured(data.draw, "model-yaml", _dump_yaml, yaml.safe_load), folder)


@FUZZ
@given(data=st.data())
def test_cluster_yaml(folder: Path, data: st.DataObject) -> None:
    run_file("cluster-yaml", _bytes_or_structured(data.draw, "cluster-yaml", _dump_yaml, yaml.safe_load), folder)


@settings(FUZZ, max_examples=EXAMPLES // 2)
@given(data=st.data())
def test_accelerator_yaml(folder: Path, data: st.DataObject) -> None:
    run_file("accelerator-yaml", _bytes_or_structured(data.draw, "accelerator-yaml", _dump_yaml, yaml.safe_load),
             folder)


@FUZZ
@given(data=st.data())
def test_sweep_yaml(folder: Path, data: st.DataObject) -> None:
    run_file("sweep-yaml", _bytes_or_structured(data.draw, "sweep-yaml", _dump_yaml, yaml.safe_load), folder)


@FUZZ
@given(data=st.data())
def test_hf_config(folder: Path, data: st.DataObject) -> None:
    run_file("hf-config", _bytes_or_structured(data.draw, "hf-config", _dump_json, json.loads), folder)


@FUZZ
@given(data=st.data())
def test_graph_json(folder: Path, data: st.DataObject) -> None:
    draw = data.draw
    sample = SAMPLES["graph-json"][0]
    if draw(st.booleans()):
        run_file("graph-json", _bytes_or_structured(draw, "graph-json", _dump_json, json.loads), folder)
        return
    # edges added between any two nodes: cycles between switches, GPU-GPU across hosts, host-host, self-loops
    doc = json.loads(sample)
    ids = [n["id"] for n in doc["nodes"]]
    for _ in range(draw(st.integers(1, 3))):
        edge = {"source": draw(st.sampled_from(ids)), "target": draw(st.sampled_from(ids))}
        if draw(st.booleans()):
            edge["bandwidth_bytes_per_s"] = draw(st.sampled_from([1.0, 50e9, 0, -1, float("nan")]))
        doc["edges"].append(edge)
    run_file("graph-json", _dump_json(doc), folder)


@FUZZ
@given(data=st.data())
def test_slurm_topology_conf(folder: Path, data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(SAMPLES["slurm-conf"]))
    mutation = line_mutation(sample, SLURM_TOKENS) if data.draw(st.booleans()) else byte_mutation(sample)
    run_file("slurm-conf", data.draw(mutation), folder)


@FUZZ
@given(data=st.data())
def test_nvidia_smi_topo(folder: Path, data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(SAMPLES["nvidia-smi"]))
    mutation = line_mutation(sample, NVSMI_TOKENS) if data.draw(st.booleans()) else byte_mutation(sample)
    run_file("nvidia-smi", data.draw(mutation), folder)


@settings(FUZZ, max_examples=EXAMPLES // 2)
@given(data=st.data())
def test_nodelist_file(folder: Path, data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(SAMPLES["nodelist-file"]))
    mutation = line_mutation(sample, HOST_TOKENS) if data.draw(st.booleans()) else byte_mutation(sample)
    run_file("nodelist-file", data.draw(mutation), folder)


LAUNCH_TOKENS = ["--tensor-model-parallel-size", "--pipeline-model-parallel-size", "0", "-1", HUGE_DIGITS, "x",
                 "$((1/0))", "$((2**64))", "${X:-", "${X:-8}", "$X", "eval", "`date`", "$(hostname)", "'", '"', "\\",
                 "if [ $X -gt 1 ]; then", "fi", "torchrun", "--nproc_per_node", "python", "pretrain_gpt.py", "[",
                 "[parallelism]", "tensor_parallel_degree = 0", "data_parallel_shard_degree = -2", "= 1", "{", "}",
                 '"zero_optimization": {"stage": 9}', "slots=0", "host1 slots=8", "--deepspeed_config", "&&", "|",
                 ";", "\t", "model.tensor_model_parallel_size=0", "activation-checkpoint:full", "--no-", "--="]


@settings(FUZZ, max_examples=2 * EXAMPLES)
@given(data=st.data())
def test_audit_launch_files(folder: Path, data: st.DataObject) -> None:
    """The audit's reader of Megatron/torchtitan/DeepSpeed/Bridge launch material (placement.audit.launch)."""
    suffix, sample = data.draw(st.sampled_from(LAUNCH_SAMPLES))
    kind = data.draw(st.sampled_from(["bytes", "lines", "structured"]))
    if kind == "structured" and suffix == ".json":
        mutated = _dump_json(data.draw(structured_mutation(json.loads(sample))))
    elif kind == "structured" and suffix == ".yaml":
        mutated = _dump_yaml(data.draw(structured_mutation(yaml.safe_load(sample))))
    elif kind == "bytes":
        mutated = data.draw(byte_mutation(sample))
    else:
        mutated = data.draw(line_mutation(sample, LAUNCH_TOKENS))
    run_launch(suffix, mutated, folder)


_NAME = st.text(alphabet="abgnpu-_.", min_size=0, max_size=4)
_NUMBER = st.one_of(st.integers(0, 120).map(str),
                    st.sampled_from(["007", "0", "99999999", HUGE_DIGITS[:30], ARABIC[0]]))
_PIECE = st.one_of(_NUMBER, st.tuples(_NUMBER, _NUMBER).map("-".join), st.sampled_from(["", "-", "1-", "-3",
                                                                                         "1-2/2", "a", " "]))
_BRACKET = st.lists(_PIECE, min_size=0, max_size=3).map(lambda p: "[" + ",".join(p) + "]")
_COMPONENT = st.lists(st.one_of(_NAME, _BRACKET, st.sampled_from(["[", "]", "[[", ",", " "])), min_size=1,
                      max_size=4).map("".join)


@settings(FUZZ, max_examples=2 * EXAMPLES)
@given(expr=st.lists(_COMPONENT, min_size=1, max_size=4).map(",".join))
def test_hostlist_expression(expr: str) -> None:
    """Expressions from the hostlist grammar with broken brackets, bad ranges, stray characters, repeats."""
    run_hostlist(expr)


# --- regressions: inputs that crashed a parser once ------------------------------------------------

def _catalog_with(parser: str, name: str, line: str, replacement: str) -> bytes:
    """A catalog file with the line starting `line` replaced."""
    text = (CATALOG[parser] / f"{name}.yaml").read_text()
    lines = [replacement if row.startswith(line) else row for row in text.splitlines()]
    assert lines != text.splitlines(), line
    return ("\n".join(lines) + "\n").encode()


def _sweep_with(**design: Any) -> bytes:
    doc = yaml.safe_load(TINY_SWEEP)
    doc["designs"][1] |= design
    return _dump_yaml(doc)


REGRESSIONS: list[tuple[str, str, bytes | str]] = [
    # (bug, parser, input)
    ("search.enumerate_layouts: OverflowError, num_layers past int64 reached numpy (now ModelSpec bounds it)",
     "model-yaml", _catalog_with("model-yaml", "llama3-8b", "num_layers:", f"num_layers: {2**64}")),
    ("search.enumerate_layouts: OverflowError from default_seq_len past int64", "model-yaml",
     _catalog_with("model-yaml", "llama3-8b", "default_seq_len:", f"default_seq_len: {2**64}")),
    ("cost.step.estimate: a batch of 2**63 - 1 cast nan to int (RuntimeWarning) and printed a plan", "model-yaml",
     _catalog_with("model-yaml", "llama3-8b", "default_global_batch:", f"default_global_batch: {2**63 - 1}")),
    ("cost.step.estimate: a 1e300 s latency made every step time inf", "cluster-yaml",
     _catalog_with("cluster-yaml", "dgx-h100", "  latency_s:", "  latency_s: 1.0e+300")),
    ("cost.step.estimate: an efficiency of 1e-300 made every step time inf", "cluster-yaml",
     _catalog_with("cluster-yaml", "dgx-h100", "nic_collective_efficiency:", "nic_collective_efficiency: 1.0e-300")),
    ("show cluster --json printed `Infinity` (not JSON) for a .inf bandwidth", "cluster-yaml",
     _catalog_with("cluster-yaml", "dgx-h100", "nic_bandwidth_bytes_per_s:", "nic_bandwidth_bytes_per_s: .inf")),
    ("cost: gemm_half_efficiency_dim 1e300 drove GEMM efficiency to 0 and step times to inf", "accelerator-yaml",
     _catalog_with("accelerator-yaml", "h100-sxm", "gemm_half_efficiency_dim:", "gemm_half_efficiency_dim: 1.0e+300")),
    ("sweep.run.design_gpus: a budget of 1e300 looped over every GPU count up to 1e295 (a hang)", "sweep-yaml",
     _sweep_with(capex_per_gpu=1.0e-5)),
    ("sweep: a design of 2**40 GPUs reached the topology (memory)", "sweep-yaml",
     _sweep_with(gpus=2**40, capex_per_gpu=None, power_per_gpu_w=None, price_per_gpu_hour=1.0)),
    ("catalog.read_yaml: RecursionError on a deeply nested YAML value", "model-yaml",
     b"name: x\nnum_layers: " + b"[" * 5000 + b"]" * 5000 + b"\n"),
    ("catalog.read_yaml: RecursionError on nested YAML mappings", "cluster-yaml",
     b"name: " + b"{a: " * 3000 + b"1" + b"}" * 3000 + b"\n"),
    ("catalog.read_yaml: RecursionError on a deep YAML block sequence", "sweep-yaml",
     b"name:\n" + b"".join(b" " * i + b"- \n" for i in range(1500))),
    ("hf_config._read_json_object: RecursionError on deeply nested JSON", "hf-config",
     b'{"model_type": "llama", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
    ("hf_config._read_json_object: ValueError on an integer past 4300 digits", "hf-config",
     b'{"model_type": "llama", "num_hidden_layers": ' + HUGE_DIGITS.encode() + b"}"),
    ("hf_config: a billion layers were enumerated one by one (minutes, gigabytes)", "hf-config",
     json.dumps({"model_type": "qwen3_moe", "num_hidden_layers": 10**9, "hidden_size": 8, "intermediate_size": 8,
                 "num_attention_heads": 2, "vocab_size": 8, "num_experts": 4, "num_experts_per_tok": 1,
                 "moe_intermediate_size": 4}).encode()),
    ("hf_config: the same for DeepSeek's dense-layer pattern", "hf-config",
     json.dumps({"model_type": "deepseek_v3", "num_hidden_layers": 10**9, "hidden_size": 8, "intermediate_size": 8,
                 "num_attention_heads": 2, "vocab_size": 8, "n_routed_experts": 4, "num_experts_per_tok": 1,
                 "moe_intermediate_size": 4, "q_lora_rank": None, "kv_lora_rank": 2, "qk_nope_head_dim": 2,
                 "qk_rope_head_dim": 2, "v_head_dim": 2, "n_shared_experts": None,
                 "first_k_dense_replace": 0}).encode()),
    ("graph_json._read_json: RecursionError on deeply nested JSON", "graph-json",
     b'{"nodes": ' + b"[" * 100000 + b"]" * 100000 + b', "edges": []}'),
    ("graph_json._read_json: ValueError on an integer past 4300 digits", "graph-json",
     b'{"nodes": [{"id": "s", "kind": "switch", "level": ' + HUGE_DIGITS.encode() + b'}], "edges": []}'),
    ("slurm._switch: ValueError from int() on a LinkSpeed past 4300 digits", "slurm-conf",
     f"SwitchName=s0 Nodes=n1 LinkSpeed={HUGE_DIGITS}\n".encode()),
    ("slurm._switch: str.isdigit() accepts '²', int() does not", "slurm-conf",
     "SwitchName=s0 Nodes=n1 LinkSpeed=²\n".encode()),
    ("slurm._block_sizes: ValueError from int() on a size past 4300 digits", "slurm-conf",
     f"BlockName=b Nodes=n1\nBlockSizes=1,{HUGE_DIGITS}\n".encode()),
    ("slurm._block_sizes: str.isdigit() accepts '²', int() does not", "slurm-conf",
     "BlockName=b Nodes=n1\nBlockSizes=²\n".encode()),
    ("nvidia_smi._link: ValueError from int() on NV followed by 5000 digits", "nvidia-smi",
     f"\tGPU0 GPU1\nGPU0 X NV{HUGE_DIGITS}\nGPU1 NV{HUGE_DIGITS} X\n".encode()),
    ("hostlist._expand_bracket: ValueError from int() on a range end past 4300 digits", "hostlist",
     f"n[1-{HUGE_DIGITS}]"),
    ("hostlist._expand_bracket: a 5000-digit single number", "hostlist", f"n[{HUGE_DIGITS}]"),
    ("hostlist: non-ASCII digits were read as numbers (Arabic-Indic one to three became n1, n2, n3)", "hostlist",
     f"n[{ARABIC}]"),
    ("hostlist: a component was expanded before the budget check (11 s to refuse a million hosts)", "hostlist",
     "n[1-1000],m[1-1048576],k[1-1048576]"),
    ("hostlist: a range refused before it is expanded", "hostlist", "node[1-99999999]"),
    ("hostlist: the budget covers the product of brackets", "hostlist", "a[1-1000]b[1-1000]c[1-1000]"),
    ("hostlist: a host named twice", "hostlist", "n[1-3],n2"),
    ("hostlist: unbalanced brackets", "hostlist", "n[1-2,m[3]"),
]


@pytest.mark.parametrize(("bug", "parser", "payload"), REGRESSIONS, ids=[r[0].split(":")[0] + f"-{i}"
                                                                      for i, r in enumerate(REGRESSIONS)])
def test_regression(folder: Path, bug: str, parser: str, payload: bytes | str) -> None:
    if parser == "hostlist":
        assert isinstance(payload, str)
        with pytest.raises(InputError, match="fuzz-expr"):
            expand_hostlist(payload, source="fuzz-expr")
        run_hostlist(payload)
    else:
        assert isinstance(payload, bytes)
        run_file(parser, payload, folder)


def test_huge_hostlist_is_refused_quickly() -> None:
    """A typo'd range is refused by arithmetic, before any host is listed: no hang, no memory blow-up."""
    for expr in ("node[1-99999999]", "n[1-1000],m[1-1048576]", "a[1-1000]b[1-1000]c[1-1000]",
                 f"n[0-{10**40}]"):
        start = time.perf_counter()
        with pytest.raises(InputError, match=r"expands to more than 1,048,576 hosts"):
            expand_hostlist(expr)
        assert time.perf_counter() - start < 5.0, expr


# --- a sample through the real command line --------------------------------------------------------


def _cli_cases(folder: Path) -> list[tuple[str, list[str], str]]:
    """(case, argv, name the message must show): mutated files the loaders refuse, and bad flags."""
    rng = random.Random(7)
    cases: list[tuple[str, list[str], str]] = []
    slurm = str(DATA / "slurm" / "tree-5leaf.conf")
    argv_for = {
        "model-yaml": lambda p: ["plan", "--model", p, "--gpus", "8"],
        "hf-config": lambda p: ["plan", "--model", p, "--gpus", "8"],
        "cluster-yaml": lambda p: ["plan", "--model", "llama3-8b", "--cluster", p, "--gpus", "8"],
        "slurm-conf": lambda p: ["plan", "--model", "llama3-8b", "--slurm-topology", p, "--nodelist", "gpu0001",
                                 "--node-type", "dgx-h100"],
        "nodelist-file": lambda p: ["plan", "--model", "llama3-8b", "--slurm-topology", slurm, "--nodelist", f"@{p}",
                                    "--node-type", "dgx-h100"],
        "nvidia-smi": lambda p: ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--node-topo", p],
        "graph-json": lambda p: ["plan", "--model", "llama3-8b", "--cluster-graph", p, "--node-type", "dgx-h100"],
        "sweep-yaml": lambda p: ["sweep", p, "--out", str(folder / "sweep-out")],
    }
    mutations: list[Callable[[bytes], bytes]] = [
        lambda b: b[: len(b) // 2] + b"\n[\n",
        lambda b: b[:10] + b"\xff\xfe" + b[10:],
        lambda b: b"",
        lambda b: b"[" * 3000 + b"]" * 3000,
        lambda b: b + b"\nunknown_key: 1\n" if not b.startswith(b"{") else b[:-1] + b', "x": ' + b"[" * 3000,
    ]
    for parser, argv in argv_for.items():
        for k, mutate in enumerate(mutations):
            data = mutate(rng.choice(SAMPLES[parser]))
            name, read = RUNNERS[parser]
            path = _write(folder, f"cli{k}-{name}", data)
            try:
                read(path)
            except InputError:
                cases.append((f"{parser}-{k}", argv(str(path)), path.name))
    for k, (suffix, sample) in enumerate(LAUNCH_SAMPLES):
        broken = sample[: len(sample) // 3] + b"\xff\n--tensor-model-parallel-size 0\n"
        path = _write(folder, f"cli-launch{k}{suffix}", broken)
        try:
            parse_launch([path])
        except InputError:
            cases.append((f"launch-{path.name}", ["audit", "--launch", str(path), "--model", "llama3-8b"], path.name))
    for expr in ("n[1-99999999]", "gpu[0001-0003", "gpu0001,gpu0001", "gpu[3-1]", f"n[{HUGE_DIGITS}]"):
        cases.append((f"nodelist {expr[:16]}", ["plan", "--model", "llama3-8b", "--slurm-topology", slurm,
                                                "--nodelist", expr, "--node-type", "dgx-h100"], "nodelist"))
    for flags in (["--gpus", "0"], ["--gpus", str(2**64)], ["--nodes", str(10**20)], ["--seq-len", str(2**64)],
                  ["--global-batch", str(2**64)], ["--gpus", "12"]):
        cases.append((" ".join(flags), ["plan", "--model", "llama3-8b", *flags], flags[0]))
    real = ["plan", "--model", "llama3-8b", "--slurm-topology", slurm, "--nodelist", "gpu[0001-0004]",
            "--node-type", "dgx-h100"]
    for flags in (["--oversubscription", "nan"], ["--oversubscription", "inf"], ["--oversubscription", "0.5"],
                  ["--oversubscription", "1e308"],
                  ["--map-time-limit", "nan"]):
        cases.append((" ".join(flags), [*real, *flags], flags[0]))
    return cases


def test_cli_sample_exits_2_with_one_paragraph(folder: Path) -> None:
    cases = _cli_cases(folder)
    assert len(cases) >= 30
    runner = CliRunner()
    for case, argv, names in cases:
        CORPUS["cli"].add(" ".join(argv).encode())
        start = time.perf_counter()
        result = runner.invoke(main, argv)
        elapsed = time.perf_counter() - start
        output = result.stdout + result.stderr
        assert result.exit_code == 2, f"{case}: exit {result.exit_code}: {output[:600]}"
        # our one paragraph, or click's own usage error for a value its types refuse
        assert result.stderr.startswith("placement: ") or "Error: Invalid value" in result.stderr, result.stderr
        assert names in result.stderr, f"{case}: {result.stderr[:600]}"
        assert "Traceback" not in output
        assert result.exception is None or isinstance(result.exception, SystemExit), f"{case}: {result.exception!r}"
        assert elapsed < MAX_SECONDS_PER_INPUT, f"{case}: {elapsed:.1f} s"


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "{folder}/deep.yaml", "--gpus", "8"],
    ["plan", "--model", "llama3-8b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
     "--nodelist", "n[1-99999999]", "--node-type", "dgx-h100"],
    ["plan", "--model", "llama3-8b", "--seq-len", str(2**64)],
], ids=["deep-yaml", "huge-range", "seq-len-2^64"])
def test_real_process_prints_no_traceback(folder: Path, argv: list[str]) -> None:
    (folder / "deep.yaml").write_text("name: " + "[" * 5000 + "]" * 5000 + "\n")
    argv = [a.replace("{folder}", str(folder)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "placement.cli", *argv], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("placement: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr + proc.stdout


# --- values a schema accepts, at its extremes, through the search ----------------------------------

EXTREMES: list[Any] = [2**31 - 1, 2**63 - 1, 1e-300, 1e300, float("inf"), float("nan")]
"""Past int32, the int64 edge, floats near underflow and overflow, and the non-finite floats YAML writes as
`.inf` and `.nan`."""


def _numeric_paths(doc: Any) -> list[tuple]:
    return [p for p in _paths(doc)[1:] if _get(doc, p) is not True and _get(doc, p) is not False
            and isinstance(_get(doc, p), (int, float))]


def _get(doc: Any, path: tuple) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _extreme_cases(parser: str, names: list[str]) -> list[tuple[str, str, tuple, Any]]:
    cases = []
    for name in names:
        doc = yaml.safe_load((CATALOG[parser] / f"{name}.yaml").read_text())
        cases += [(parser, name, path, value) for path in _numeric_paths(doc) for value in EXTREMES]
    return cases


EXTREME_CASES = (_extreme_cases("model-yaml", ["llama3-8b", "mixtral-8x7b", "deepseek-v3"])
                 + _extreme_cases("cluster-yaml", ["dgx-h100", "gb200-nvl72", "mi300x"])
                 + _extreme_cases("accelerator-yaml", ["h100-sxm", "mi300x"]))


@pytest.mark.parametrize(("parser", "name", "path", "value"), EXTREME_CASES,
                         ids=[f"{c[1]}-{'.'.join(map(str, c[2]))}={c[3]:g}" for c in EXTREME_CASES])
def test_extreme_value_through_search(folder: Path, parser: str, name: str, path: tuple, value: Any) -> None:
    """Every numeric field of a real model and cluster, set to an extreme: read, then searched on 16 GPUs; the
    outcome is a plan, an infeasible job or an InputError, never a crash or a numpy overflow warning."""
    doc = yaml.safe_load((CATALOG[parser] / f"{name}.yaml").read_text())
    parent = _get(doc, path[:-1])
    parent[path[-1]] = value
    run_file(parser, _dump_yaml(doc), folder)


# --- the corpus ------------------------------------------------------------------------------------

PARSERS = {*RUNNERS, "hostlist", "launch", "cli"}


def test_corpus_size() -> None:
    """Runs last (file order): at least 500 distinct generated inputs went through the parsers above."""
    if set(CORPUS) < PARSERS:
        pytest.skip("counts the corpus of the whole file; run tests/test_fuzz.py entire")
    sizes = {parser: len(inputs) for parser, inputs in CORPUS.items()}
    total = sum(sizes.values())
    outcomes = {parser: dict(counts) for parser, counts in OUTCOMES.items()}
    print(f"fuzz corpus: {total} distinct inputs: {sizes}; outcomes: {outcomes}")
    assert total >= 500, sizes
    assert all(size >= 10 for size in sizes.values()), sizes
