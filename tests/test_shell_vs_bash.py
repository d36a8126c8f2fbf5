"""The audit's shell reader (placement/audit/shell.py) against bash itself: every script of
tests/data/shell/ runs under bash with stub launchers (`torchrun`, `deepspeed`, `python`, `srun`) that record
their argv, and the reader's launch commands must have exactly those words.  The one exception is a word the
reader marks unresolved because only the running job's environment gives it (`$SLURM_PROCID` inside
`srun bash -c`): it must stand in the same position.  SLURM variables a script's `#SBATCH` header fixes are
set for bash as sbatch would set them."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from placement.audit.shell import read_commands

CORPUS = Path(__file__).parent / "data" / "shell"
LAUNCHERS = ("torchrun", "deepspeed", "python")
STUB = """#!{python}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""
SRUN = """#!{python}
import os, sys
# srun's own options first; run the command that follows them (bash -c STRING, or a launcher)
args = sys.argv[1:]
start = next(i for i, a in enumerate(args) if a in ("bash", "sh", "torchrun", "deepspeed", "python"))
os.execvp(args[start], args[start:])
"""


def _stubs(folder: Path) -> Path:
    folder.mkdir()
    for name in LAUNCHERS:
        (folder / name).write_text(STUB.format(python=sys.executable))
    (folder / "srun").write_text(SRUN.format(python=sys.executable))
    for p in folder.iterdir():
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return folder


def _bash_argvs(script: Path, tmp: Path, args: tuple[str, ...] = ()) -> list[list[str]]:
    log = tmp / "argv.jsonl"
    env = {"PATH": f"{_stubs(tmp / 'bin')}:{os.environ['PATH']}", "ARGV_LOG": str(log), "HOME": str(tmp)}
    nodes = re.search(r"^#SBATCH --nodes=(\d+)", script.read_text(), re.M)
    if nodes:  # what sbatch sets from the header
        env |= {"SLURM_NNODES": nodes.group(1), "SLURM_PROCID": "0"}
    subprocess.run([shutil.which("bash"), str(script), *args], cwd=tmp, env=env, check=True, capture_output=True,
                   timeout=60)
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


RUNTIME_ONLY = {"SLURM_PROCID"}
"""Variables only a running task has (srun sets them per task): the reader rightly leaves them unresolved."""


def _reader_argvs(script: Path) -> list[list]:
    out = []
    for c in read_commands(script):
        if c.words and c.words[0].text.rsplit("/", 1)[-1] in LAUNCHERS:
            out.append([None if w.unresolved and re.sub(r"[${}]", "", w.unresolved) in RUNTIME_ONLY else w.text
                        for w in c.words])
    return out


SCRIPTS = sorted(CORPUS.glob("*.sh"))


def test_the_corpus_has_forty_scripts():
    assert len(SCRIPTS) >= 40


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_the_reader_passes_the_launcher_what_bash_passes(script: Path, tmp_path: Path):
    bash = _bash_argvs(script, tmp_path)
    mine = _reader_argvs(script)
    assert bash, "the script launched nothing under bash"
    assert len(mine) == len(bash), (mine, bash)
    for ours, theirs in zip(mine, bash, strict=True):
        assert len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert a is None or a == b, (ours, theirs)


GETOPTS = """#!/bin/bash
TP=1
PP=1
EXTRA=none
while getopts "t:p:vx" opt; do
  case $opt in
    t) TP=$OPTARG ;;
    p) PP=$OPTARG ;;
    v) EXTRA=verbose ;;
    \\?) EXTRA=bad ;;
  esac
done
shift $((OPTIND - 1))
while getopts ":s:" o; do
  case $o in
    s) SEQ=$OPTARG ;;
    :) SEQ=missing-$OPTARG ;;
    \\?) SEQ=unknown-$OPTARG ;;
  esac
done
torchrun train.py --tp "$TP" --pp "$PP" --extra "$EXTRA" --seq "${SEQ:-0}" --optind "$OPTIND" "$@"
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("args", [(), ("-t", "2", "-p", "4"), ("-t2", "-vp", "8", "rest"), ("-v", "--", "-t", "3"),
                                  ("-q", "-t", "2"), ("-t", "2", "file", "-p", "4"), ("-x",)], ids=str)
def test_getopts_over_the_script_arguments_runs_as_bash_runs_it(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A `while getopts` loop over the arguments --script-args gives runs its body once per option, as bash does
    (it was read once as uncertain, and the launch refused: `--tp depends on $OPTARG`); the second loop, after
    `shift $((OPTIND - 1))`, reads the words left, in getopts' silent mode."""
    from placement.audit.shell import SCRIPT_ARGUMENTS

    script = tmp_path / "getopts.sh"
    script.write_text(GETOPTS)
    bash = _bash_argvs(script, tmp_path, args)
    token = SCRIPT_ARGUMENTS.set(args)
    try:
        mine = _reader_argvs(script)
    finally:
        SCRIPT_ARGUMENTS.reset(token)
    assert mine == bash
