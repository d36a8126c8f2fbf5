"""`sh -c STRING` is not `bash -c`: /bin/sh is dash on Debian and Ubuntu (the NGC containers' base), which has no
arrays, `[[`, `source` or exported functions, and bash in POSIX mode on RHEL, which has them all.  The audit cannot
tell which the job's nodes have, so a string that needs bash is an error naming the construct, and a POSIX string is
read as before.  A QA trial: `srun sh -c 'ARGS=(...); run "${ARGS[@]}"'` with an `export -f run` was priced as bash
runs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 1024 --bf16")
HEADER = "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=8\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.sh"
    path.write_text(HEADER + body + "\n")
    return path


@pytest.mark.parametrize(("string", "construct"), [
    (f"A=({ARGS}); python pretrain_gpt.py \"${{A[@]}}\"", "an array"),
    (f"[[ -n x ]] && python pretrain_gpt.py {ARGS}", "a [[ ... ]] test"),
    (f"source env.sh; python pretrain_gpt.py {ARGS}", "`source`"),
    (f"python pretrain_gpt.py {ARGS} --seed ${{SEED//x/}}", "a ${V//x/y} substitution"),
])
def test_a_bash_only_string_under_sh_is_refused(tmp_path: Path, string: str, construct: str) -> None:
    path = _write(tmp_path, f"srun sh -c '{string}'")
    with pytest.raises(InputError, match=re.escape(f"`sh -c` runs a string with {construct}")) as e:
        parse_launch([path])
    assert "dash" in str(e.value) and "expected `bash -c`" in str(e.value) and f"{path}:5" in str(e.value)
    if construct != "`source`":  # the same string under bash is read
        assert parse_launch([_write(tmp_path, f"srun bash -c '{string}'")]).tp == 2


def test_an_exported_function_under_sh_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, f"run() {{ python pretrain_gpt.py \"$@\"; }}\nexport -f run\nsrun sh -c 'run {ARGS}'")
    with pytest.raises(InputError, match=re.escape("runs run, a function")) as e:
        parse_launch([path])
    assert f"{path}:5" in str(e.value) and "only bash imports exported functions" in str(e.value)
    assert parse_launch([_write(tmp_path, f"run() {{ python pretrain_gpt.py \"$@\"; }}\nexport -f run\n"
                                          f"srun bash -c 'run {ARGS}'")]).tp == 2


def test_a_posix_string_under_sh_is_read(tmp_path: Path) -> None:
    lay = parse_launch([_write(tmp_path, f"srun sh -c 'f() {{ python pretrain_gpt.py \"$@\"; }}; "
                                         f"f {ARGS} --seed ${{SEED:-7}}'")])
    assert lay.tp == 2 and lay.world_size == 16


def _rerun(tmp_path: Path, name: str, shell: str, test: str, args: str) -> Path:
    """A batch script that starts itself once per task with `srun SHELL NAME --task`, as placement's launch.sbatch
    does with bash."""
    path = tmp_path / name
    path.write_text(f"#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=8\nif {test}; then\n"
                    f"  exec python pretrain_gpt.py {args}\nfi\nsrun {shell} {name} --task\n")
    return path


@pytest.mark.parametrize("name", ["job.sh", "job.sbatch"])
def test_a_script_sh_runs_again_may_use_only_posix_sh(tmp_path: Path, name: str) -> None:
    """A QA trial: `srun sh job.sbatch --task` of a script whose task branch is a `[[` test was read as bash runs it,
    where sh (dash) reads the whole file and stops at it; the `sh -c` string already was refused so."""
    bash_test = '[[ "${1:-}" == "--task" ]]'
    with pytest.raises(InputError, match=re.escape(f"`sh {name}` runs this script again with /bin/sh")) as e:
        parse_launch([_rerun(tmp_path, name, "sh", bash_test, ARGS)])
    said = str(e.value)
    assert f"{name}:4:" in said and "a [[ ... ]] test" in said and f"expected `bash {name}`" in said
    assert parse_launch([_rerun(tmp_path, name, "bash", bash_test, ARGS)]).world_size == 16
    posix = parse_launch([_rerun(tmp_path, name, "sh", '[ "${1:-}" = "--task" ]', ARGS)])
    assert (posix.tp, posix.world_size, posix.gpus_per_node) == (2, 16, 8)


def test_a_dot_sh_script_run_again_is_not_a_second_launch(tmp_path: Path) -> None:
    """A QA trial: the same script as launch.sbatch, named job.sh, was refused as 'two launch commands with different
    arguments (lines 7 and 5)': its own `srun bash job.sh --task` line was taken for a launch of job.sh."""
    lay = parse_launch([_rerun(tmp_path, "job.sh", "bash", '[ "${1:-}" = "--task" ]', ARGS)])
    assert (lay.tp, lay.world_size, lay.gpus_per_node) == (2, 16, 8)
