"""Grammar-based fuzzing of every reader and command (issue: robustness, part two).

tests/test_fuzz.py mutates real files; this file *generates* inputs from a grammar of each format, so input
classes nobody listed are reached: switch trees and chains of any depth, islands and cycles, nvidia-smi matrices
of 1 to 40 GPUs, cluster graphs with mixed ids and extreme bandwidths, launch scripts built from the shell
constructs launchers use (arrays, ${...} operators and subscripts, arithmetic, conditionals, `cd &&`, pipes),
DeepSpeed JSON and torchtitan TOML with wrong types and extremes, and CLI argument lists with extreme numbers
and conflicting flags.  Each input goes through the real command line (click's runner, in process).

The invariant is the README's: exit 0, 1 or 2 only (130 only when interrupted), no traceback, an error is one
paragraph on stderr, and every case ends within MAX_SECONDS.

Profiles: CI runs `EXAMPLES` cases per grammar with a fixed seed (derandomize); `PLACEMENT_FUZZ_LONG=1` runs
`LONG_EXAMPLES` per grammar (the manual profile; its count is recorded in benchmarks/README.md).
"""

from __future__ import annotations

import json
import os
import string
import time
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.cli import main

LONG = bool(os.environ.get("PLACEMENT_FUZZ_LONG"))
EXAMPLES = 250
"""Cases per grammar in CI (10 grammars: 2,500 cases)."""
LONG_EXAMPLES = 2500
"""Cases per grammar in the manual profile (25,000)."""
MAX_SECONDS = 20.0
"""A case that runs longer is a hang (the slowest real case plans a few seconds on 2 cores)."""

PROFILE = settings(max_examples=LONG_EXAMPLES if LONG else EXAMPLES, derandomize=not LONG, database=None,
                   deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.filter_too_much, HealthCheck.large_base_example,
                                          HealthCheck.function_scoped_fixture])
COUNT: dict[str, int] = {}
"""Cases run per grammar (test_counts checks the CI profile ran them all)."""
FAILED: list[str] = []
"""Grammars with a case that broke the invariant (hypothesis re-runs it while shrinking)."""

JOB = ["--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64"]


def check(name: str, argv: list[str]) -> None:
    """The README's invariant for one generated command line."""
    COUNT[name] = COUNT.get(name, 0) + 1
    FAILED.append(name)  # taken back below once the case holds the invariant
    start = time.perf_counter()
    result = CliRunner().invoke(main, argv)
    elapsed = time.perf_counter() - start
    out = result.stdout + result.stderr
    assert result.exit_code in (0, 1, 2), f"{name}: exit {result.exit_code}: {out[-800:]} (argv {argv!r:.600})"
    assert "Traceback" not in out, f"{name}: {out[-800:]}"
    if result.exit_code == 2:
        err = result.stderr.strip()
        assert err.startswith("placement: ") or "Error:" in err, f"{name}: {err[:600]}"
        if err.startswith("placement: "):
            assert "\n" not in err, f"{name}: more than one paragraph: {err[:600]}"
    assert elapsed < MAX_SECONDS, f"{name}: {elapsed:.1f} s for argv {argv!r:.600}"
    FAILED.pop()


# --- grammar pieces ------------------------------------------------------------------------------------

NAME = st.text(alphabet=string.ascii_lowercase + string.digits + "-_", min_size=1, max_size=8)
INT_EXTREME = st.sampled_from([0, 1, 2, 3, 7, 8, 16, 64, 1000, 2**31, 2**63, 10**30, -1])
FLOAT_EXTREME = st.sampled_from(["0", "1", "2", "1e-300", "5e-324", "1e308", "inf", "nan", "-1", "0.5", "64"])


@st.composite
def hostlists(draw) -> str:
    """prefix[a-b,c], lists of them, with padding, reversed and huge ranges, and junk."""
    def one() -> str:
        prefix = draw(st.sampled_from(["gpu", "node", "n", "a-b", ""]))
        if draw(st.booleans()):
            return prefix + str(draw(st.integers(0, 9999))).zfill(draw(st.integers(0, 4)))
        parts = []
        for _ in range(draw(st.integers(1, 3))):
            a = draw(st.sampled_from([0, 1, 2, 9, 10, 99, 9999, 10**12]))
            b = draw(st.sampled_from([0, 1, 2, 9, 10, 99, 9999, 10**12]))
            width = draw(st.integers(0, 5))
            parts.append(f"{str(a).zfill(width)}-{str(b).zfill(width)}" if draw(st.booleans()) else str(a))
        close = draw(st.sampled_from(["]", "]", "", "]]"]))
        return f"{prefix}[{','.join(parts)}{close}"
    return ",".join(one() for _ in range(draw(st.integers(1, 3))))


@st.composite
def topology_confs(draw) -> tuple[str, str]:
    """SLURM topology.conf (tree plugin, sometimes block): trees, chains up to 2,000 deep, cycles, islands,
    duplicates, unknown keys; with the node list of the job."""
    lines: list[str] = []
    leaves = draw(st.integers(1, 6))
    per = draw(st.sampled_from([1, 2, 4]))
    for i in range(leaves):
        key = draw(st.sampled_from(["Nodes", "Nodes", "Nodes", "Switches", "Bogus"]))
        lines.append(f"SwitchName=leaf{i} {key}=gpu[{i * per + 1:04d}-{(i + 1) * per:04d}]"
                     + (f" LinkSpeed={draw(INT_EXTREME)}" if draw(st.booleans()) else ""))
    shape = draw(st.sampled_from(["spine", "chain", "islands", "cycle", "none", "block"]))
    if shape == "spine":
        lines.append(f"SwitchName=spine Switches=leaf[0-{leaves - 1}]")
    elif shape == "chain":
        depth = draw(st.sampled_from([1, 10, 300, 2000]))
        lines.append(f"SwitchName=c0 Switches=leaf[0-{leaves - 1}]")
        lines += [f"SwitchName=c{k} Switches=c{k - 1}" for k in range(1, depth)]
    elif shape == "islands" and leaves > 1:
        lines.append("SwitchName=s0 Switches=leaf0")
        lines.append(f"SwitchName=s1 Switches=leaf[1-{leaves - 1}]")
    elif shape == "cycle":
        lines += ["SwitchName=x Switches=y", "SwitchName=y Switches=x,leaf0"]
    elif shape == "block":
        lines = [f"BlockName=b{i} Nodes=gpu[{i * per + 1:04d}-{(i + 1) * per:04d}]" for i in range(leaves)]
        lines.append(f"BlockSizes={draw(st.sampled_from(['1', '2,4', '0', 'x']))}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["# comment", "", "SwitchName=",
                                                                             "SwitchName=dup Nodes=gpu0001"])))
    nodes = draw(st.sampled_from([f"gpu[0001-{min(leaves * per, 2):04d}]", f"gpu[0001-{leaves * per:04d}]",
                                  "gpu0001", "gpu9999"]))
    return "\n".join(lines) + "\n", nodes


@st.composite
def nvsmi_matrices(draw) -> str:
    n = draw(st.sampled_from([1, 2, 3, 4, 8, 12, 16, 32, 40]))
    cells = st.sampled_from(["NV18", "NV12", "NV4", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "NV0", "XX"])
    kind = draw(st.sampled_from(["uniform", "random", "pairs", "ring"]))
    cell = draw(cells)
    rows = ["\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity"]
    for i in range(n):
        row = []
        for j in range(n):
            if i == j:
                row.append(" X ")
            elif kind == "uniform":
                row.append(cell)
            elif kind == "pairs":
                row.append("NV4" if i // 2 == j // 2 else "SYS")
            elif kind == "ring":
                row.append("NV4" if abs(i - j) in (1, n - 1) else "SYS")
            else:
                row.append(draw(cells))
        if draw(st.integers(0, 20)) == 0:
            row = row[:-1]  # a ragged row
        rows.append(f"GPU{i}\t" + "\t".join(row) + "\t0-63\t0")
    return "\n".join(rows) + "\n"


@st.composite
def cluster_graphs(draw) -> str:
    g = nx.Graph()
    hosts = draw(st.integers(1, 4))
    gpus = draw(st.sampled_from([8, 8, 4, 9]))
    int_ids = draw(st.booleans())
    bandwidth = draw(st.sampled_from([400e9, 400e9, 1e-300, 5e-324, 0.0, 1e300, float("nan")]))
    spines = ["s0", "s1"] if draw(st.integers(0, 4)) == 0 else ["s0"]
    for s in spines:
        g.add_node(s, kind="switch", level=2)
    for h in range(hosts):
        host = h if int_ids else f"h{h}"
        g.add_node(f"l{h}", kind="switch", level=1)
        g.add_node(host, kind="host")
        g.add_edge(f"l{h}", spines[h % len(spines)], bandwidth_bytes_per_s=400e9)
        g.add_edge(host, f"l{h}", bandwidth_bytes_per_s=bandwidth if h == 0 else 400e9)
        for k in range(gpus):
            g.add_node(f"{host}/g{k}", kind="gpu", host=host,
                       local_gpu=draw(st.sampled_from([k, k, k, 100, -1])) if k == 0 else k)
            g.add_edge(f"{host}/g{k}", host)
    below = "s0"
    for c in range(draw(st.sampled_from([0, 0, 3, 1200]))):
        g.add_node(f"u{c}", kind="switch", level=3 + c)
        g.add_edge(below, f"u{c}", bandwidth_bytes_per_s=400e9)
        below = f"u{c}"
    return json.dumps(nx.node_link_data(g, edges="edges"))


WORDS = st.sampled_from(["8", "2", "$NP", "${NP}", "${NP:-8}", "${NP:=4}", "${NP:+2}", "${A[0]}", "${A[1]}",
                         "${A[@]}", "${A[0*]}", "${A[@@]}", "${X:-'}'}", "$(( 2 * 4 ))", "$(( NP * 2 ))",
                         "$(( 10 ** 5000 ))", "$(( 1" + "+1" * 3000 + " ))", "$(hostname)", "`date`", "'8'", '"8"',
                         "\\8", "${#A[@]}", "$1", "$@", "${UNSET}", "'open", '"open'])


@st.composite
def launch_scripts(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 4))):
        lines.append(draw(st.sampled_from(["NP=8", "A=(4 8)", "export NP=2", "TP=2", "set -e",
                                           "if [ -n \"$X\" ]; then NP=4; fi", "if [ $NP -gt 4 ]; then", "else",
                                           "fi", "cd /tmp", "# comment", "source env.sh", "A+=(16)"])))
    if draw(st.integers(0, 2)) == 0:  # runs of keywords, one line of thousands: no recursion, no re-lexing each
        word = draw(st.sampled_from(["then ", "do ", "then do ", "then ", "do ", "else ", "do ; "]))
        lines.append(word * draw(st.sampled_from([1, 40, 3000, 3000])))
    prefix = draw(st.sampled_from(["", "cd /w && ", "srun bash -c \"", "exec "]))
    launcher = draw(st.sampled_from(["torchrun --nproc-per-node", "python -m torch.distributed.run --nproc_per_node",
                                     "deepspeed --num_gpus", "python"]))
    args = [f"--tensor-model-parallel-size {draw(WORDS)}", f"--pipeline-model-parallel-size {draw(WORDS)}",
            f"--micro-batch-size {draw(WORDS)}", f"--global-batch-size {draw(WORDS)}", f"--seq-length {draw(WORDS)}"]
    args = draw(st.permutations(args))[: draw(st.integers(0, 5))]
    tail = draw(st.sampled_from(["", " 2>&1 | tee log", " > out.log", "\"", " &"]))
    lines.append(f"{prefix}{launcher} {draw(WORDS)} pretrain_gpt.py {' '.join(args)}{tail}")
    return "\n".join(lines) + "\n"


@st.composite
def deepspeed_jsons(draw) -> str:
    value = st.one_of(INT_EXTREME, st.sampled_from(["auto", [1, 2], None, True, 1e400, 1.5, "8"]))
    cfg = {"train_micro_batch_size_per_gpu": draw(value), "gradient_accumulation_steps": draw(value),
           "zero_optimization": {"stage": draw(value)}}
    if draw(st.booleans()):
        cfg["train_batch_size"] = draw(value)
    if draw(st.integers(0, 8)) == 0:
        depth = draw(st.sampled_from([10, 5000]))
        cfg["nested"] = "@@"
        return json.dumps(cfg).replace('"@@"', '{"a": ' * depth + "1" + "}" * depth)
    text = json.dumps(cfg, allow_nan=True).replace("Infinity", "1e400")
    return text if draw(st.integers(0, 10)) else text[: len(text) // 2]


@st.composite
def torchtitan_tomls(draw) -> str:
    value = draw(st.sampled_from(["2", "0", "-1", "1e400", '"x"', "[1, 2]", "9223372036854775808", "true"]))
    body = ["[job]", 'dump_folder = "./out"', "[model]", 'name = "llama3"', 'flavor = "8B"', "[training]",
            f"local_batch_size = {draw(st.sampled_from(['1', '8', value]))}", "seq_len = 4096",
            "[parallelism]", f"tensor_parallel_degree = {value}",
            f"pipeline_parallel_degree = {draw(st.sampled_from(['1', '2', value]))}"]
    if draw(st.integers(0, 6)) == 0:
        body.append("deep = " + "[" * 3000 + "]" * 3000)
    if draw(st.integers(0, 6)) == 0:  # tables nested by dotted headers: 3 deep is real, thousands are not
        body += ["[" + ".".join(["t"] * draw(st.sampled_from([3, 65, 5000]))) + "]", "x = 1"]
    if draw(st.integers(0, 6)) == 0:
        body.insert(0, "[[broken")
    return "\n".join(body) + "\n"


@st.composite
def plan_argvs(draw) -> list[str]:
    argv = ["plan", "--model", draw(st.sampled_from(["llama3-8b", "mixtral-8x7b", "qwen3-30b-a3b", "nope"])),
            "--cluster", draw(st.sampled_from(["dgx-h100", "gb200-nvl72", "dgx-a100-80g"]))]
    argv += ["--gpus", str(draw(st.sampled_from([8, 16, 64, 0, 12, 2**40])))]
    for flag, values in (("--seq-len", ["4096", "1", "0", str(2**40)]), ("--global-batch", ["64", "1", "7", "0"]),
                         ("--top-k", ["1", "3", "0", "1000"]), ("--recompute", ["none", "selective", "full", "x"]),
                         ("--zero", ["1", "3", "0", "9"]), ("--precision", ["bf16", "fp8", "fp4"]),
                         ("--routing-imbalance", ["1.0", "1e308", "0.5", "nan"]),
                         ("--moe-capacity-factor", ["1.5", "0", "inf"]), ("--mtp-layers", ["0", "1", "99"]),
                         ("--pipeline-layout", ["Et|tt|L", "(t|)*999999999L", "Q", "Et*31|tL"]),
                         ("--recompute-modules", ["mlp", "core_attn,moe", "nope"]), ("--segment", ["0", "2", "8"]),
                         ("--attention-kernel", ["flash", "unfused"]), ("--cuda-graphs", ["none", "full"])):
        if draw(st.integers(0, 4)) == 0:
            argv += [flag, draw(st.sampled_from(values))]
    return argv


@st.composite
def evaluate_argvs(draw) -> list[str]:
    argv = ["evaluate", *JOB, "--gpus", str(draw(st.sampled_from([8, 16])))]
    for flag in ("--tp", "--cp", "--pp", "--vpp", "--mbs", "--ep", "--etp"):
        if draw(st.booleans()):
            argv += [flag, str(draw(INT_EXTREME))]
    if draw(st.booleans()):
        argv += ["--dp-shard", str(draw(INT_EXTREME))]
    if draw(st.booleans()):
        argv += ["--recompute", draw(st.sampled_from(["none", "selective", "full"]))]
    return argv


# --- one test per grammar ----------------------------------------------------------------------------------


@PROFILE
@given(text=hostlists())
def test_hostlist_grammar(text):
    check("hostlist", ["plan", *JOB, "--slurm-topology", str(Path(__file__).parent / "data" / "slurm" /
                                                              "tree-5leaf.conf"), "--nodelist", text,
                       "--node-type", "dgx-h100"])


@PROFILE
@given(conf=topology_confs())
def test_topology_conf_grammar(tmp_path_factory, conf):
    text, nodes = conf
    path = tmp_path_factory.mktemp("topo") / "topology.conf"
    path.write_text(text)
    check("topology.conf", ["plan", *JOB, "--slurm-topology", str(path), "--nodelist", nodes, "--node-type",
                            "dgx-h100", "--top-k", "1"])


@PROFILE
@given(text=nvsmi_matrices())
def test_nvidia_smi_grammar(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("nvsmi") / "topo.txt"
    path.write_text(text)
    check("nvidia-smi", ["plan", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--node-topo", str(path),
                         "--top-k", "1"])


@PROFILE
@given(text=cluster_graphs())
def test_cluster_graph_grammar(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("graph") / "graph.json"
    path.write_text(text)
    check("graph-json", ["plan", *JOB, "--cluster-graph", str(path), "--node-type", "dgx-h100", "--top-k", "1"])


AUDITED = {"launch-script": (launch_scripts(), "launch.sh"), "deepspeed-json": (deepspeed_jsons(), "ds_config.json"),
           "torchtitan-toml": (torchtitan_tomls(), "train.toml")}
"""Grammars of the files `audit --launch` reads, and the name each file gets."""


@pytest.mark.parametrize("name", list(AUDITED))
@PROFILE
@given(data=st.data())
def test_audited_file_grammar(tmp_path_factory, name, data):
    strategy, filename = AUDITED[name]
    path = tmp_path_factory.mktemp(name) / filename
    path.write_text(data.draw(strategy))
    check(name, ["audit", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--launch", str(path)])


@PROFILE
@given(argv=plan_argvs())
def test_plan_argv_grammar(argv):
    check("plan-argv", argv)


@PROFILE
@given(argv=evaluate_argvs())
def test_evaluate_argv_grammar(argv):
    check("evaluate-argv", argv)


@PROFILE
@given(out=st.sampled_from(["/dev/null", "/proc/x/y", "FILE", "FILE/sub", "DIR", "NEW/deep/er"]),
       taken=st.sampled_from(["", "hosts.txt", "megatron.sh", "ds_config.json", "torchtitan.sh", "rankfile"]),
       emit=st.sampled_from(["megatron", "deepspeed", "torchtitan,megatron", "all", "nope"]),
       segments=st.lists(NAME, max_size=3))
def test_out_path_grammar(tmp_path_factory, out, taken, emit, segments):
    base = tmp_path_factory.mktemp("out")
    (base / "FILE").write_text("x")
    if taken:
        (base / "DIR" / taken).mkdir(parents=True)
    path = out if out.startswith("/") else str(base.joinpath(out, *segments))
    check("out-path", ["plan", *JOB, "--gpus", "8", "--top-k", "1", "--out", path, "--emit", emit])


def test_counts():
    """Every grammar ran its cases (the CI profile's count; the long profile's is in benchmarks/README.md)."""
    expected = LONG_EXAMPLES if LONG else EXAMPLES
    if len(COUNT) < 10:
        pytest.skip("run with the whole file")
    assert all(n >= expected // 2 for n in COUNT.values()), COUNT
    if LONG and os.environ.get("PLACEMENT_FUZZ_RECORD"):  # the manual profile's record (benchmarks/README.md)
        Path(os.environ["PLACEMENT_FUZZ_RECORD"]).write_text(json.dumps(
            {"cases": COUNT, "total": sum(COUNT.values()), "failing_grammars": sorted(set(FAILED)),
             "date": time.strftime("%Y-%m-%d %H:%M")},
            indent=1) + "\n")
