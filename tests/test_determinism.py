"""Determinism (issue #7): every command run twice on the same input prints the same bytes and writes the
same files.

Each command runs as two real processes side by side, with different ``PYTHONHASHSEED`` values, so an order
that leaks from set or dict iteration of strings, a cache warmed by an earlier call in the same process, or a
solver left to the machine's load would all show up as a difference.  Wall-clock timings (`search.seconds`,
`mapping_solver.wall_s`, the "in X s" of the tables) vary by nature: `--reproducible` leaves them out, and
every run here passes it.  Files are written under a relative `out/` from each run's own working directory,
so a path the tool writes into a file is the same in both runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SLURM = str(DATA / "slurm" / "tree-5leaf.conf")
NODE_TOPO = str(DATA / "nvsmi" / "h100-hgx.txt")
MEGATRON_SCRIPT = str(DATA / "audit" / "megatron" / "train_llama3_8b_h100_fp8.sh")
TINY_SWEEP = """name: tiny
designs:
  - {name: h100x16, cluster: dgx-h100, gpus: 16, price_per_gpu_hour: 2.0}
  - {name: a100-budget, cluster: dgx-a100-80g, capex_per_gpu: 20000, power_per_gpu_w: 900}
budget: 700000
workloads:
  - {name: 8b, model: llama3-8b, seq_len: 4096, global_batch: 64, tokens: 1.0e9}
"""
TIMEOUT_S = 300
"""Per process; each command here takes a second or two."""

SLURM_JOB = ["--model", "llama3-70b", "--slurm-topology", SLURM, "--nodelist", "gpu[0030-0045]",
             "--node-type", "dgx-h100", "--seq-len", "8192", "--global-batch", "64", "--top-k", "2"]

COMMANDS: dict[str, list[str]] = {
    "plan json, catalog cluster": ["plan", "--model", "llama3-8b", "--gpus", "64", "--json"],
    "plan table, catalog cluster": ["plan", "--model", "llama3-8b", "--gpus", "64"],
    "plan json, MoE": ["plan", "--model", "mixtral-8x7b", "--gpus", "128", "--top-k", "3", "--json"],
    "plan json, SLURM allocation, CP-SAT mapping, launch files": [
        "plan", *SLURM_JOB, "--json", "--out", "out", "--emit", "all"],
    "plan table, SLURM allocation, CP-SAT mapping": ["plan", *SLURM_JOB],
    "plan --emit all --out, catalog cluster": ["plan", "--model", "mixtral-8x7b", "--gpus", "64", "--top-k", "2",
                                               "--emit", "all", "--out", "out"],
    "evaluate json": ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--json"],
    "evaluate table, nvidia-smi node": ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "4",
                                        "--node-topo", NODE_TOPO],
    "show model json": ["show", "model", "deepseek-v3", "--json"],
    "show model table": ["show", "model", "llama3-405b"],
    "show cluster json": ["show", "cluster", "gb200-nvl72", "--gpus", "144", "--json"],
    "show cluster table": ["show", "cluster", "dgx-h100", "--nodes", "64"],
    "show lists": ["show", "models"],
    "validate json": ["validate", "--json"],
    "validate table": ["validate"],
    "sweep": ["sweep", "{sweep}", "--out", "out", "--workers", "1", "--json"],
    "audit json": ["audit", "--launch", MEGATRON_SCRIPT, "--model", "llama3-8b", "--cluster", "dgx-h100",
                   "--json", "--out", "out"],
    "audit table": ["audit", "--launch", MEGATRON_SCRIPT, "--model", "llama3-8b", "--cluster", "dgx-h100"],
}


def _start(argv: list[str], cwd: Path, hash_seed: str) -> subprocess.Popen:
    cwd.mkdir(parents=True)
    (cwd / "tiny.yaml").write_text(TINY_SWEEP)
    argv = [str(cwd / "tiny.yaml") if a == "{sweep}" else a for a in argv]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PLACEMENT_DEBUG": ""}
    env.pop("PLACEMENT_REPRODUCIBLE", None)
    return subprocess.Popen([sys.executable, "-m", "placement.cli", "--reproducible", *argv], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _files(root: Path) -> dict[str, bytes]:
    """Every file a run wrote under out/, by relative path."""
    out = root / "out"
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=list(COMMANDS))
def test_twice_gives_the_same_bytes(tmp_path: Path, argv: list[str]) -> None:
    runs = [_start(argv, tmp_path / f"run{seed}", seed) for seed in ("1", "2")]
    (out1, err1), (out2, err2) = (run.communicate(timeout=TIMEOUT_S) for run in runs)
    assert runs[0].returncode == runs[1].returncode
    assert runs[0].returncode in (0, 1), err1.decode()  # 1: audit findings, a layout that does not fit
    assert out1, err1.decode()
    assert out1 == out2
    assert err1 == err2  # "wrote out/..." lines, warnings: relative paths, so the same too
    assert b"Traceback" not in err1
    files1, files2 = _files(tmp_path / "run1"), _files(tmp_path / "run2")
    assert files1.keys() == files2.keys()
    for name in files1:
        assert files1[name] == files2[name], f"{name} differs between two runs"
    if "--out" in argv:
        assert files1, "the command wrote no files"


def test_reproducible_drops_exactly_the_timings() -> None:
    """Without --reproducible the timings are there; with it, they are null and nothing else changes."""
    import json

    argv = [sys.executable, "-m", "placement.cli"]
    job = ["plan", "--model", "llama3-8b", "--gpus", "64", "--json"]
    timed = json.loads(subprocess.run([*argv, *job], capture_output=True, check=True, timeout=TIMEOUT_S).stdout)
    fixed = json.loads(subprocess.run([*argv, "--reproducible", *job], capture_output=True, check=True,
                                      timeout=TIMEOUT_S).stdout)
    assert timed["search"]["seconds"] is not None and timed["search"]["seconds"] >= 0
    assert fixed["search"]["seconds"] is None
    timed["search"]["seconds"] = None
    assert timed == fixed
