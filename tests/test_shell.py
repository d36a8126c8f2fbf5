"""The audit's shell reader (placement/audit/shell.py) on what bash alone cannot check with a stub launcher:
values the reader must mark unknown or uncertain rather than guess, the lines words are attributed to, and
syntax errors (tree-sitter's ERROR and MISSING nodes, a stray `fi`) as one-paragraph InputErrors naming the
line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.audit.shell import Command, read_commands
from placement.errors import InputError


def _read(tmp_path: Path, text: str) -> list[Command]:
    path = tmp_path / "run.sh"
    path.write_text(text)
    return read_commands(path)


def _launch(tmp_path: Path, text: str) -> Command:
    (cmd,) = [c for c in _read(tmp_path, text) if c.words[0].text == "torchrun"]
    return cmd


def _word(cmd: Command, text: str):
    return next(w for w in cmd.words if w.text == text)


@pytest.mark.parametrize(("text", "message"), [
    ("X='unclosed\ntorchrun train.py\n", "run.sh:1: X='unclosed: a ' quote opened here is never closed"),
    ("A=1\ntorchrun train.py \"--name x\n", "run.sh:2: torchrun train.py \"--name x: a \" quote opened here is "
                                            "never closed"),
    ("torchrun train.py\nfi\n", "run.sh:2: fi: `fi` here belongs to no `if`"),
    ("echo a; done\n", "run.sh:1: echo a; done: `done` here belongs to no `for/while`"),
    ("if [ -f x ]; then\n  torchrun train.py\n", "run.sh:1: if [ -f x ]; then: `if` opened here is never closed "
                                                 "(expected `fi`)"),
    ("for x in 1 2; do\n  echo $x\n", "run.sh:1: for x in 1 2; do: `do` opened here is never closed (expected "
                                      "`done`)"),
    ("case $A in\n  a) echo ;;\n", "run.sh:1: case $A in: `case` opened here is never closed (expected `esac`)"),
    ("A=1\nsrun bash -c 'torchrun train.py \"x'\n", "run.sh:2: srun bash -c 'torchrun train.py \"x': a \" quote "
                                                    "opened here is never closed"),
    # trial t26: Yuan-2.0's script as published, with its placeholders
    ("A=1\nCHECKPOINT_PATH=<Specify path>\ntorchrun train.py\n", "run.sh:2: CHECKPOINT_PATH=<Specify path>: bash "
                                                               "cannot parse `<Specify path>` (a redirection, to "
                                                               "bash): a template placeholder left in"),
])
def test_syntax_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as err:
        _read(tmp_path, text)
    assert "\n" not in str(err.value)


def test_case_on_an_unknown_value_is_uncertain(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, 'case "$SIZE" in\n  big) TP=8 ;;\n  *) TP=2 ;;\nesac\ntorchrun train.py --tp $TP\n')
    tp = cmd.words[-1]
    # the last branch taken is the one whose value stays; the reader says it cannot tell which
    assert tp.text == "2" and "run.sh:3" in tp.uncertain and tp.unresolved is None


def test_case_after_an_unknown_pattern_is_uncertain(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, 'S=big\ncase $S in\n  "$OTHER") TP=1 ;;\n  big) TP=8 ;;\nesac\ntorchrun x --tp $TP\n')
    assert cmd.words[-1].text == "8" and cmd.words[-1].uncertain


def test_loops_the_reader_cannot_unroll(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, "ARGS=()\nfor x in $(ls); do\n  ARGS+=(--f $x)\ndone\n"
                            "while read line; do EXTRA=--bf16; done < f\ntorchrun train.py ${ARGS[@]} $EXTRA\n")
    assert _word(cmd, "--f").uncertain.startswith("set inside the block at ")
    assert _word(cmd, "$x").unresolved.startswith("$x, the loop variable of ")
    assert "run.sh:5" in _word(cmd, "--bf16").uncertain


def test_for_with_break_is_read_once_as_uncertain(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, "for n in 1 2 3; do\n  N=$n\n  [ $n -eq 2 ] && break\ndone\ntorchrun x --n $N\n")
    assert cmd.words[-1].unresolved and cmd.words[-1].uncertain


def test_test_on_an_unset_variable_reads_it_as_a_clean_environment_does(tmp_path: Path) -> None:
    """`-n`/`-z` of a variable the files never set: bash in a clean environment reads it empty (t26; it was an
    uncertain guard, while `${EXTERNAL:-}`, the same test, was read); what runs says the environment may set it."""
    cmd = _launch(tmp_path, '[[ -n "$EXTERNAL" ]] && MBS=4\ntorchrun train.py --micro-batch-size ${MBS:-1}\n')
    mbs = cmd.words[-1]
    assert mbs.text == "1" and not mbs.uncertain and "the job's environment may set MBS" in mbs.evidence
    cmd = _launch(tmp_path, '[[ -z "$EXTERNAL" ]] && MBS=4\ntorchrun train.py --micro-batch-size ${MBS:-1}\n')
    mbs = cmd.words[-1]
    assert mbs.text == "4" and not mbs.uncertain and "the job's environment may set EXTERNAL" in mbs.evidence


def test_arithmetic_over_an_uncertain_value_is_uncertain(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, "N=2\nif [ -f hosts ]; then N=4; fi\ntorchrun x --world $((N * 8))\n")
    assert cmd.words[-1].text == "32" and cmd.words[-1].uncertain


def test_arithmetic_commands_make_their_variables_unknown(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, "N=2\n(( N = N * 4 ))\n((M++))\ntorchrun x --n $N --m $M\n")
    assert cmd.words[-3].unresolved and cmd.words[-1].unresolved


def test_here_document_bodies_are_not_commands(tmp_path: Path) -> None:
    cmds = _read(tmp_path, "cat <<EOF > run2.sh\ntorchrun --inside 1\nEOF\ntorchrun --outside 2\n")
    assert [c.words[0].text for c in cmds] == ["cat", "torchrun"] and cmds[1].words[1].text == "--outside"


def test_functions_run_where_called_with_their_locals(tmp_path: Path) -> None:
    cmds = _read(tmp_path, "TP=1\nunused() { torchrun never; }\nrun() {\n  local TP=$1\n  torchrun x --tp $TP\n}\n"
                           "run 8\ntorchrun y --tp $TP\n")
    assert [[w.text for w in c.words] for c in cmds] == [["torchrun", "x", "--tp", "8"], ["torchrun", "y", "--tp", "1"]]
    assert cmds[0].origin.line == 5 and cmds[0].words[-1].origin.line == 7  # written as the call's argument


def test_recursion_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"run\.sh:1: .*function f runs inside 32 nested function calls"):
        _read(tmp_path, "f() { f; }; f\n")


def test_words_keep_their_lines(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, 'TP=4\nARGS=(\n  --a 1 \\\n  --tp "$TP"\n)\ncd /w && \\\n  torchrun train.py \\\n'
                            '  "${ARGS[@]}" "--x \\\n y"\n')
    assert cmd.origin.line == 6  # the statement's first line, as before
    tp = cmd.words[5]
    assert (tp.text, tp.origin.line, tp.site.line) == ("4", 1, 8)
    assert (_word(cmd, "--tp").origin.line, _word(cmd, "--a").origin.line) == (4, 3)
    assert _word(cmd, "--x  y").origin.line == 8


def test_element_assignment(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, "A=(1 2)\nA[1]=8\nA[2]=9\nB[$i]=3\ntorchrun x ${A[@]} ${B[@]}\n")
    assert [w.text for w in cmd.words[2:5]] == ["1", "8", "9"] and cmd.words[5].unresolved


def test_a_bash_c_string_set_under_a_condition_is_uncertain(tmp_path: Path) -> None:
    cmd = _launch(tmp_path, 'CMD="torchrun a --tp 2"\nif [ -f x ]; then CMD="torchrun b --tp 4"; fi\n'
                            'srun bash -c "$CMD"\n')
    assert cmd.origin.line == 3 and cmd.words[-1].text == "4" and "run.sh:2" in cmd.words[-1].uncertain


def test_a_script_that_runs_itself_is_read_again_with_its_arguments(tmp_path: Path) -> None:
    """`srun bash "$DIR/run.sh" --task` starts the script again with $1 = --task: the reader reads it again as that
    process (the exported variables its environment, the others unset) and stops that run at its `exec`."""
    cmds = _read(tmp_path, (
        "if [[ \"${1:-}\" == --task ]]; then\n"
        "  exec torchrun --nnodes \"$NNODES\" --local \"${LOCAL:-unset}\" train.py\n"
        "  echo never\n"
        "fi\n"
        "export NNODES=4\n"
        "LOCAL=1\n"
        "srun --ntasks-per-node=1 bash \"${SLURM_SUBMIT_DIR:-$PWD}/run.sh\" --task\n"))
    texts = [[w.text for w in c.words] for c in cmds]
    assert texts[0][:3] == ["srun", "--ntasks-per-node=1", "bash"]
    launch = [t for t in texts if "torchrun" in t]
    assert launch == [["exec", "torchrun", "--nnodes", "4", "--local", "unset", "train.py"]]
    assert not any("never" in t for t in texts)
    assert sum(t[0] == "srun" for t in texts) == 1  # the run that execs does not reach the srun line again


def test_another_script_run_by_srun_is_not_read_as_this_one(tmp_path: Path) -> None:
    cmds = _read(tmp_path, "if [[ \"${1:-}\" == --task ]]; then torchrun train.py; fi\nsrun bash other.sh --task\n")
    assert [c.words[0].text for c in cmds] == ["srun"]


@pytest.mark.parametrize("line", ["srun --ntasks-per-node=1 \"${DIR:-.}/run.sh\" --task",
                                  "srun -N 2 bash -x ./run.sh --task", "bash run.sh --task"])
def test_each_way_of_starting_the_script_again_is_read(tmp_path: Path, line: str) -> None:
    cmds = _read(tmp_path, f"if [[ \"${{1:-}}\" == --task ]]; then exec torchrun train.py; fi\n{line}\n")
    assert [[w.text for w in c.words] for c in cmds if "torchrun" in [w.text for w in c.words]] == [
        ["exec", "torchrun", "train.py"]]


def test_the_script_arguments_the_audit_is_given_are_its_positional_parameters(tmp_path: Path) -> None:
    from placement.audit.shell import SCRIPT_ARGUMENTS

    text = "FW=${1:-megatron}\nshift\ncase $FW in\n  deepspeed) deepspeed train.py --rest \"$1\" ;;\n" \
           "  *) torchrun pretrain_gpt.py ;;\nesac\n"
    token = SCRIPT_ARGUMENTS.set(("deepspeed", "x y"))
    try:
        cmds = _read(tmp_path, text)
    finally:
        SCRIPT_ARGUMENTS.reset(token)
    assert [[w.text for w in c.words] for c in cmds if c.words[0].text != "shift"] == [
        ["deepspeed", "train.py", "--rest", "x y"]]
    assert [c.words[0].text for c in _read(tmp_path, text) if c.words[0].text != "shift"] == ["torchrun"]


def test_a_slurm_variable_is_the_jobs_not_the_scripts_default(tmp_path: Path) -> None:
    """`NNODES=${SLURM_NNODES:-"1"}` (Megatron-LM's examples/mixtral script) runs on the job's node count: SLURM
    sets the variable in every job, so the default is not what runs (a user trial: the audit took 1 node and told
    the user to change the expert parallelism).  An #SBATCH header that fixes it, or the script, makes it known."""
    cmd = _launch(tmp_path, "NNODES=${SLURM_NNODES:-\"1\"}\ntorchrun --nnodes $NNODES train.py\n")
    assert cmd.words[2].unresolved == "$SLURM_NNODES"
    cmd = _launch(tmp_path, "#!/bin/bash\n#SBATCH --nodes=4\nNNODES=${SLURM_NNODES:-1}\ntorchrun --nnodes $NNODES "
                            "train.py\n")
    assert [w.text for w in cmd.words][:3] == ["torchrun", "--nnodes", "4"]
    cmd = _launch(tmp_path, "OTHER=${NOT_SLURM:-2}\ntorchrun --nnodes $OTHER train.py\n")
    assert [w.text for w in cmd.words][:3] == ["torchrun", "--nnodes", "2"]


def test_a_redirection_among_the_arguments_is_named_not_misread(tmp_path: Path) -> None:
    """Megatron-DeepSpeed's examples/pretrain_gpt3_175B.sh keeps `<PATH TO gpt-vocab.json>` and `<TENSORBOARD
    DIRECTORY>` placeholders in its `sh -c` string: bash reads `> --fp16` as output to a file named --fp16, and the
    reader (whose grammar gives a redirection every word after it) dropped `--fp16` and `--checkpoint-activations`
    and priced BF16 without recompute as "not set by the files" (a user trial)."""
    with pytest.raises(InputError, match=r"run\.sh:1: .*puts a redirection \(< PATH\) among the command's "
                                         r"arguments.*placeholder"):
        _read(tmp_path, "python -u pretrain_gpt.py --vocab-file <PATH TO v.json> --fp16 --checkpoint-activations\n")
    ok = _read(tmp_path, "python -u pretrain_gpt.py --fp16 > log.txt 2>&1\n")
    assert [w.text for w in ok[0].words] == ["python", "-u", "pretrain_gpt.py", "--fp16"]


@pytest.mark.parametrize("shell", ["bash -lc", "bash -l -c", "bash --login -c", "sh -xc", "bash -O extglob -c",
                                   "bash -c -x", "/bin/bash -o pipefail -c"])
def test_options_around_dash_c_still_run_the_string(tmp_path: Path, shell: str) -> None:
    """bash(1): with -c anywhere among the options (grouped as in `-lc`, or beside `-o OPT`), the first word that is
    not an option is the command string (t26: `srun ... bash -lc "torchrun ..."` was not read as a launch)."""
    cmd = _launch(tmp_path, f'srun --ntasks 2 {shell} "torchrun --nproc_per_node 8 train.py --tp 2"\n')
    assert [w.text for w in cmd.words] == ["torchrun", "--nproc_per_node", "8", "train.py", "--tp", "2"]


def test_an_option_argument_is_not_the_command_string(tmp_path: Path) -> None:
    """`-o pipefail` takes its word: without -c the next word is a script, and no string is read."""
    cmds = _read(tmp_path, 'bash -o pipefail "torchrun x.py"\n')
    assert not any(c.words[0].text == "torchrun" for c in cmds)
