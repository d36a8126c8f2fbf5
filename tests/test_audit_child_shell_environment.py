"""A `bash -c STRING` (`srun bash -c`, `sh -c`) is a new shell: it sees the variables the script exported (`export`,
`declare -x`, `set -a`), those given on its own command line (`TP=4 bash -c ...`) and SLURM's, not a plain `TP=4`
(bash(1) ENVIRONMENT).  A QA trial's Megatron-LM script set `TP=4` without exporting it and ran
`srun bash -c '... --tensor-model-parallel-size ${TP:-2} ...'`: it was priced at tp 4, while the job runs tp 2
unless its environment exports TP."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

ARGS = ("--pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 256 --bf16 "
        "--ffn-hidden-size 14336 --swiglu --num-query-groups 8 --group-query-attention --normalization RMSNorm "
        "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
        "--vocab-size 128256")
HEADER = "#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n"
SRUN = ("srun bash -c 'torchrun --nproc_per_node 8 --nnodes $SLURM_NNODES --node_rank $SLURM_PROCID pretrain_gpt.py "
        "--tensor-model-parallel-size {tp} " + ARGS + "'\n")


def _script(tmp_path: Path, setting: str, tp: str = "${TP:-2}", srun: str = SRUN) -> Path:
    path = tmp_path / "job.sh"
    path.write_text(HEADER + setting + srun.format(tp=tp))
    return path


@pytest.mark.parametrize(("setting", "tp", "default"), [
    ("TP=4\n", 2, True),
    ("TP=4\nexport TP\n", 4, False),
    ("export TP=4\n", 4, False),
    ("declare -x TP=4\n", 4, False),
    ("set -a\nTP=4\nset +a\n", 4, False),
    ("set -o allexport\nTP=4\n", 4, False),
    ("set -a\nset +a\nTP=4\n", 2, True),
    ("export TP=4\nexport -n TP\n", 2, True),
    ("export TP=8\nunset TP\nTP=4\n", 2, True),
    ("TP=4 ", 4, False),  # on the command's own line: in its environment
])
def test_the_child_shell_sees_only_exported_variables(tmp_path: Path, setting: str, tp: int, default: bool) -> None:
    lay = parse_launch([_script(tmp_path, setting)])
    assert lay.tp == tp
    note = "(the default of ${TP:-...}: the job's environment may set TP)"
    assert (note in lay.sources["tp"]) is default, lay.sources["tp"]


def test_a_prefix_assignment_is_for_its_command_alone(tmp_path: Path) -> None:
    """`TP=8 true` sets TP for `true` only, and `TP=8 torchrun --tp $TP` expands $TP before the assignment."""
    lay = parse_launch([_script(tmp_path, "TP=4\nTP=8 true\nexport TP\n")])
    assert lay.tp == 4


def test_a_variable_the_child_does_not_see_is_an_error_saying_so(tmp_path: Path) -> None:
    script = _script(tmp_path, "TP=4\n", tp="$TP")
    with pytest.raises(InputError) as err:
        parse_launch([script])
    said = str(err.value)
    for fact in ("--tensor-model-parallel-size depends on $TP (not exported: ", "job.sh:4 sets it in the script",
                 "`export TP`", "--env TP=VALUE"):
        assert fact in said, (fact, said)
    assert "which the files do not set" not in said and "\n" not in said


def test_the_audit_prices_what_the_child_runs(tmp_path: Path) -> None:
    script = _script(tmp_path, "TP=4\n")
    base = ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "32"]
    out = CliRunner().invoke(main, base)
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert "layout: tp2 " in out.output  # 81.3 GiB: it does not fit, which the audit says
    assert "tp 2: " in out.output and "the job's environment may set TP" in out.output
    # the job's environment exporting TP=4 is what runs tp 4
    out = CliRunner().invoke(main, [*base, "--env", "TP=4"])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert "layout: tp4 " in out.output


FUNCTION = ("launch() {{{{ torchrun --nproc_per_node 8 --nnodes $SLURM_NNODES --node_rank $SLURM_PROCID "
            "pretrain_gpt.py --tensor-model-parallel-size $1 " + ARGS + "; }}}}\n{export}srun bash -c 'launch 4'\n")


def test_a_function_the_script_does_not_export_is_not_in_the_child_shell(tmp_path: Path) -> None:
    """`srun bash -c 'launch 4'` where the script defines launch() without `export -f launch`: bash in the new shell
    finds no command `launch` and the job does not start; it was priced as the function's tp 4."""
    with pytest.raises(InputError) as err:
        parse_launch([_script(tmp_path, "", srun=FUNCTION.format(export=""))])
    said = str(err.value)
    for fact in ("runs launch, a function ", "job.sh:4 defines without exporting it", "the job does not start",
                 "`export -f launch`"):
        assert fact in said, (fact, said)
    for export in ("export -f launch\n", "declare -fx launch\n"):
        assert parse_launch([_script(tmp_path, "", srun=FUNCTION.format(export=export))]).tp == 4
    with pytest.raises(InputError, match="defines without exporting"):
        parse_launch([_script(tmp_path, "", srun=FUNCTION.format(export="export -f launch\nexport -fn launch\n"))])


def test_the_child_shell_positional_parameters_are_its_own_arguments(tmp_path: Path) -> None:
    """`bash -c '... --tensor-model-parallel-size $1 ...' bash 4`: $1 is 4 (bash(1) -c: the words after the
    string are $0, $1 ...); the audit refused it as `--tensor-model-parallel-size expects one value, got nothing`,
    and under --script-args it bound the script's own $1."""
    srun = SRUN.replace("{tp} ", "$1 ").replace(ARGS + "'", ARGS + "' bash 4")
    lay = parse_launch([_script(tmp_path, "", srun=srun)])
    assert lay.tp == 4
    assert lay.sources["tp"].startswith(f"{tmp_path / 'job.sh'}:4: ")
    from placement.audit.shell import SCRIPT_ARGUMENTS
    token = SCRIPT_ARGUMENTS.set(("8",))
    try:
        assert parse_launch([_script(tmp_path, "", tp="${1:-2}")]).tp == 2
    finally:
        SCRIPT_ARGUMENTS.reset(token)
