"""Generating strategies for the input classes where "no crash" is not enough (issue: robustness, part two).

tests/test_grammar_fuzz.py holds every reader to exit 0/1/2 without a traceback.  The classes here have a
stricter outcome, so each gets its own grammar and invariant:

- **Unbounded or odd sources.**  Any file-reading flag given a file past the read limit, /dev/zero, an empty
  file, a folder, binary bytes or a named pipe nobody writes to: exit 2, and the message names the path.
- **Silent acceptance.**  A valid command plus one piece of clearly invalid input (conflicting flags, numbers
  out of domain, a DeepSeek config whose dense layers outnumber its layers, a hostfile slot count that is not
  positive, a sweep price out of range): exit 2, never 0 or 1.
- **Sweep cache.**  One cache entry truncated, bit-flipped, emptied, replaced by a folder or a huge file, or
  reshaped under a valid checksum (a key gone, a wrong type, a non-finite number): the next run exits 0, says
  so, and its rows equal a clean run's.

Profiles as in test_grammar_fuzz.py: a fixed seed in CI, `PLACEMENT_FUZZ_LONG=1` for the manual profile.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.cli import main
from placement.loaders import files
from placement.loaders.files import MAX_INPUT_BYTES
from placement.outfiles import checked_dump

LONG = bool(os.environ.get("PLACEMENT_FUZZ_LONG"))
DATA = Path(__file__).parent / "data"
JOB = ["--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64"]
TREE = str(DATA / "slurm" / "tree-5leaf.conf")
MAX_SECONDS = 20.0
COUNT: dict[str, int] = {}
"""Cases run per grammar (the manual profile records them: PLACEMENT_FUZZ_RECORD=FILE)."""


def profile(ci: int, long: int) -> settings:
    return settings(max_examples=long if LONG else ci, derandomize=not LONG, database=None, deadline=None,
                    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                            HealthCheck.data_too_large])


def run(argv: list[str]):
    start = time.perf_counter()
    result = CliRunner().invoke(main, argv)
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out[-800:]
    assert time.perf_counter() - start < MAX_SECONDS, f"{time.perf_counter() - start:.1f} s for {argv!r:.400}"
    return result


def expect_bad_input(argv: list[str], names: str | None = None) -> None:
    """Exit 2 with one paragraph that starts `placement:` (or click's usage error) and names `names`."""
    result = run(argv)
    err = result.stderr.strip()
    assert result.exit_code == 2, f"exit {result.exit_code} for {argv!r:.600}: {(result.stdout + err)[-600:]}"
    assert err.startswith("placement: ") or "Error:" in err, err[:600]
    if err.startswith("placement: "):
        assert "\n" not in err, err[:600]
    if names is not None:
        assert names in err, f"{names!r} not in {err[:600]!r}"


# --- unbounded or odd sources ------------------------------------------------------------------------------

def _reader_argv(reader: str, path: str, tmp: Path) -> list[str]:
    """A command that reads `path` with one reader, the rest of its inputs valid."""
    launch = str(DATA / "audit" / "megatron" / "train_llama3_8b_h100_fp8.sh")
    return {
        "topology.conf": ["plan", *JOB, "--slurm-topology", path, "--nodelist", "gpu[0001-0002]",
                          "--node-type", "dgx-h100"],
        "nodelist-file": ["plan", *JOB, "--slurm-topology", TREE, "--nodelist", f"@{path}", "--node-type",
                          "dgx-h100"],
        "nvidia-smi": ["plan", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--node-topo", path],
        "cluster-graph": ["plan", *JOB, "--cluster-graph", path, "--node-type", "dgx-h100"],
        "launch": ["audit", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--launch", path],
        # the script's own GLOBAL_BATCH_SIZE=128 and SEQ_LENGTH=8192 fix the batch and sequence (another
        # --global-batch or --seq-len is refused)
        "hosts": ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                  "--launch", launch, "--hosts", path],
        "recipe": ["plan", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--recipe", path],
        "model": ["plan", "--model", path, "--gpus", "8", "--seq-len", "4096", "--global-batch", "64"],
        "sweep": ["sweep", path, "--out", str(tmp / "out")],
    }[reader]


READERS = ("topology.conf", "nodelist-file", "nvidia-smi", "cluster-graph", "launch", "hosts", "recipe", "model",
           "sweep")
SOURCES = ("huge", "zero", "empty", "folder", "binary", "pipe")


@profile(ci=120, long=1500)
@given(reader=st.sampled_from(READERS), source=st.sampled_from(SOURCES),
       head=st.binary(max_size=64), extra=st.integers(1, 3 * MAX_INPUT_BYTES))
def test_unbounded_or_odd_sources_are_bad_input(tmp_path_factory, monkeypatch, reader, source, head, extra):
    COUNT["odd-sources"] = COUNT.get("odd-sources", 0) + 1
    tmp = tmp_path_factory.mktemp("src")
    path = tmp / ("input.yaml" if reader in ("recipe", "model", "sweep") else "input")
    if source == "huge":  # sparse: past the limit by `extra` bytes, no disk used
        with open(path, "wb") as fh:
            fh.write(head)
            fh.truncate(MAX_INPUT_BYTES + extra)
    elif source == "zero":
        path = Path("/dev/zero")
    elif source == "empty":
        path.write_bytes(b"")
    elif source == "folder":
        path.mkdir()
    elif source == "binary":
        path.write_bytes(b"\x00\xff\xfe" + head + b"\x80" * 16)
    else:  # a named pipe that nobody writes to: an error after the wait, not a wait forever
        os.mkfifo(path)
        monkeypatch.setattr(files, "PIPE_WAIT_S", 0.05)
    expect_bad_input(_reader_argv(reader, str(path), tmp), names=str(path))


def test_a_pipe_is_read_once_and_reread_from_memory(tmp_path):
    """Process substitution (`--launch <(cmd)`): the launch reader looks at the file twice (detect, then read);
    the pipe's bytes are kept, so the second look sees them."""
    import threading

    fifo = tmp_path / "launch"
    os.mkfifo(fifo)
    text = (b"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --seq-length 4096 "
            b"--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 "
            b"--group-query-attention --num-query-groups 8 --bf16\n")

    def write():
        with open(fifo, "wb") as fh:
            fh.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    result = run(["audit", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--launch", str(fifo)])
    writer.join()
    assert result.exit_code in (0, 1), result.output
    assert "megatron launch" in result.stdout and "tp2" in result.stdout


# --- silent acceptance -------------------------------------------------------------------------------------

def _deepseek_config(tmp: Path, dense_past: int) -> str:
    cfg = json.loads((DATA / "hf" / "deepseek-v3" / "config.json").read_text())
    cfg["first_k_dense_replace"] = cfg["num_hidden_layers"] + dense_past
    path = tmp / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@st.composite
def invalid_commands(draw, tmp: Path) -> tuple[list[str], str | None]:
    """A valid plan/evaluate/audit/sweep command with one invalid piece; returns (argv, what the error names)."""
    kind = draw(st.sampled_from(["conflict", "flag-domain", "deepseek", "hostfile", "sweep-price"]))
    base = ["plan", *JOB, "--top-k", "1"]
    if kind == "conflict":
        piece, names = draw(st.sampled_from([
            (["--cluster", "dgx-h100", "--slurm-topology", TREE, "--nodelist", "gpu[0001-0002]", "--node-type",
              "dgx-h100"], "--slurm-topology"),
            (["--gpus", "8", "--nodes", "1"], "--nodes"),
            (["--gpus", "8", "--recompute", "full", "--recompute-modules", "mlp"], "--recompute-modules"),
            (["--gpus", "8", "--recompute", "none", "--recompute-modules", "core_attn"], "--recompute-modules"),
            (["--gpus", "8", "--oversubscription", "2"], "--oversubscription"),
            (["--gpus", "8", "--nodelist", "gpu[1-2]"], "--nodelist"),
            (["--gpus", "8", "--node-type", "dgx-h100"], "--node-type"),
            (["--slurm-topology", TREE, "--nodelist", "gpu[0001-0002]", "--node-type", "dgx-h100",
              "--cluster", "dgx-a100-80g"], "--cluster"),
        ]))
        return base + piece, names
    if kind == "flag-domain":
        flag, value = draw(st.sampled_from([
            ("--seq-len", "0"), ("--seq-len", "-4096"), ("--global-batch", "0"), ("--global-batch", "-1"),
            ("--gpus", "0"), ("--gpus", "-8"), ("--top-k", "0"), ("--routing-imbalance", "nan"),
            ("--routing-imbalance", "inf"), ("--routing-imbalance", "0.5"), ("--moe-capacity-factor", "0"),
            ("--moe-capacity-factor", "nan"), ("--moe-capacity-factor", "-1"), ("--mtp-layers", "-1"),
            ("--segment", "-1"), ("--precision", "fp3"), ("--recompute", "some"),
        ]))
        gpus = [] if flag == "--gpus" else ["--gpus", "8"]
        return [*base, *gpus, flag, value], flag
    if kind == "deepseek":
        past = draw(st.integers(1, 10_000))
        return ["show", "model", _deepseek_config(tmp, past)], "first_k_dense_replace"
    if kind == "hostfile":
        slots = draw(st.sampled_from(["0", "-1", "-8", "x", "1e400", "", "8.5"]))
        good = draw(st.integers(0, 2))
        lines = [f"node{i} slots=8" for i in range(good)]
        lines.insert(draw(st.integers(0, good)), f"nodeX slots={slots}")
        path = tmp / "hostfile"
        path.write_text("\n".join(lines) + "\n")
        return ["audit", *JOB, "--cluster", "dgx-h100", "--gpus", "8", "--launch", str(path)], "nodeX"
    field, value = draw(st.sampled_from([
        ("price_per_gpu_hour", 1e308), ("price_per_gpu_hour", float("inf")), ("price_per_gpu_hour", float("nan")),
        ("price_per_gpu_hour", -2.0), ("price_per_gpu_hour", 0.0), ("price_per_gpu_hour", 1e5),
        ("gpus", 0), ("gpus", -16),
    ]))
    design = {"name": "d", "cluster": "dgx-h100", "gpus": 16, "price_per_gpu_hour": 2.0, field: value}
    spec = {"name": "s", "designs": [design],
            "workloads": [{"name": "8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1e9}]}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return ["sweep", str(path), "--out", str(tmp / "out"), "--json", "--workers", "1"], field


@profile(ci=120, long=1500)
@given(data=st.data())
def test_clearly_invalid_input_is_never_accepted(tmp_path_factory, data):
    COUNT["invalid-input"] = COUNT.get("invalid-input", 0) + 1
    tmp = tmp_path_factory.mktemp("invalid")
    argv, names = data.draw(invalid_commands(tmp))
    expect_bad_input(argv, names=names)


# --- sweep cache -------------------------------------------------------------------------------------------

ONE_CELL = {"name": "one", "designs": [{"name": "h100x8", "cluster": "dgx-h100", "gpus": 8,
                                        "price_per_gpu_hour": 2.0}],
            "workloads": [{"name": "8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1e9}]}


@pytest.fixture(scope="module")
def clean_sweep(tmp_path_factory):
    """A clean run's rows and its one cache entry (name, text)."""
    tmp = tmp_path_factory.mktemp("clean")
    spec = tmp / "sweep.yaml"
    spec.write_text(yaml.safe_dump(ONE_CELL))
    result = run(["sweep", str(spec), "--out", str(tmp / "out"), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    (entry,) = (tmp / "out" / "cache").glob("*.json")
    return spec, json.loads(result.stdout)["rows"], entry.name, entry.read_text()


RESHAPES = st.sampled_from(["drop", "none", "string", "negative", "nan", "inf", "list", "bool", "status"])
ENTRY_KEYS = ("counts", "bounds", "plans", "plan.status", "plan.message", "plan.plan", "plan.binding", "bound")
"""A cache entry holds the cell's GPU counts, their step bounds and its plans by count (issue #14: plans are cached
without prices); `plan.*` reshapes a field of the entry's first plan, `bound` its first count's bound."""


@profile(ci=30, long=300)
@given(mutation=st.sampled_from(["truncate", "flip", "empty", "folder", "huge", "reshape", "not-json", "whole"]),
       at=st.floats(0.0, 1.0), reshape=RESHAPES, key=st.sampled_from(ENTRY_KEYS))
def test_a_bad_cache_entry_never_breaks_the_study(tmp_path_factory, clean_sweep, mutation, at, reshape, key):
    COUNT["sweep-cache"] = COUNT.get("sweep-cache", 0) + 1
    spec, rows, name, text = clean_sweep
    out = tmp_path_factory.mktemp("cached") / "out"
    (out / "cache").mkdir(parents=True)
    entry = out / "cache" / name
    cut = int(at * (len(text) - 1))
    if mutation == "truncate":
        entry.write_text(text[:cut])
    elif mutation == "flip":
        raw = bytearray(text.encode())
        raw[cut] ^= 0x55
        entry.write_bytes(bytes(raw))
    elif mutation == "empty":
        entry.write_text("")
    elif mutation == "folder":
        entry.mkdir()
    elif mutation == "huge":
        with open(entry, "wb") as fh:
            fh.write(text.encode())
            fh.truncate(MAX_INPUT_BYTES + 1)
    elif mutation == "not-json":
        entry.write_text("{" + text)
    elif mutation == "whole":  # untouched: must be used as is
        entry.write_text(text)
    else:  # a valid checksum over a row of the wrong shape
        row = copy.deepcopy(json.loads(text)["value"])
        target, field = row, key
        if key.startswith("plan."):
            target, field = next(iter(row["plans"].values())), key.removeprefix("plan.")
        elif key == "bound":
            target, field = row["bounds"], next(iter(row["bounds"]))
        if reshape == "drop":
            target.pop(field)
        elif reshape == "list":
            row = [row]
        elif reshape == "status":
            next(iter(row["plans"].values()))["status"] = "maybe"
        else:
            target[field] = {"none": None, "string": "x", "negative": -1, "nan": float("nan"), "inf": float("inf"),
                             "bool": True}[reshape]
        entry.write_text(checked_dump(row))
    result = run(["sweep", str(spec), "--out", str(out), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output[-800:]
    got = json.loads(result.stdout)["rows"]
    # a well-shaped edit under a valid checksum is indistinguishable from a real entry only in free text
    # free text of a plan (its message, its binding) is the one edit a checksum cannot tell from a real entry
    usable = mutation == "whole" or (mutation == "reshape" and reshape == "string"
                                     and key in ("plan.message", "plan.binding"))
    if usable:
        assert "from cache 1" in result.stderr
        assert got == rows
    else:
        assert "computed 1" in result.stderr, result.stderr
        assert got == rows
    if mutation == "folder":
        assert "could not be written" in result.stderr


def test_counts():
    """Each grammar ran; the manual profile's record (benchmarks/README.md) holds when pytest exits 0."""
    if len(COUNT) < 3:
        pytest.skip("run with the whole file")
    assert COUNT["odd-sources"] >= (1500 if LONG else 120) // 2 and COUNT["sweep-cache"] >= (300 if LONG else 30) // 2
    if LONG and os.environ.get("PLACEMENT_FUZZ_RECORD"):
        Path(os.environ["PLACEMENT_FUZZ_RECORD"]).write_text(json.dumps(
            {"cases": COUNT, "total": sum(COUNT.values()), "failures": 0, "date": time.strftime("%Y-%m-%d %H:%M")},
            indent=1) + "\n")
