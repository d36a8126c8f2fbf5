"""Read the commands a launch script runs, without running it: bash's grammar, and an honest evaluator.

Launch scripts for Megatron-LM, torchtitan and DeepSpeed build their argument lists in shell variables
(``GPUS_PER_NODE=8``, ``${MASTER_PORT:-6000}``, ``$((GPUS_PER_NODE*NUM_NODES))``, arrays
``ARGS=( ... )`` expanded with ``${ARGS[@]}``, ``ARGS+=(...)``, strings grown with ``opts="${opts} --x"``,
``if [[ "$DTYPE" == "fp8" ]]; then ... fi``, ``eval ${run_cmd}``).  This module reads the script with
tree-sitter's bash grammar (statements, lists, pipelines, redirections, words and which of their parts are
quoted, assignments, arrays, ``if``/``for``/``while``/``case``, functions, here-documents, comments and line
continuations all come from the syntax tree), walks the tree statement by statement, keeps the variables it can
know, and returns every other command with its words expanded, each word tagged with the file line it was
written on.

The evaluation is ours: an expansion splits into words only when it is unquoted (``${ARGS[@]}`` vs
``"${ARGS[@]}"``, ``"--fp8-format hybrid"`` as one array element that splits when expanded unquoted), which is
why words are built from the tree's parts rather than from text.  Plain argument-list files go through the
same grammar (bash reads them as one long command).

What is not known is never guessed: a variable set outside the file (``$1``, ``$HOSTNAME``), a command
substitution ``$(...)`` or an ``if`` whose condition tests files or runs commands leaves its words
marked ``unresolved`` or ``uncertain``; the caller raises an error only if such a word sets a layout
field.  ``${VAR:-default}`` with VAR not set in the file takes the default (the script run with no
arguments and a clean environment), but for the SLURM_ variables SLURM sets in every job, which stay unknown
unless the script or its ``#SBATCH`` header fixes them; ``$@`` and ``$*`` expand to nothing for the same reason.
A ``for`` loop over words the file determines runs once per word, and a ``while getopts`` loop over known arguments
once per option; other loops (``while``, ``until``, ``for ((;;))``, or a ``for`` over unknown words or with
``break``/``continue``) have their body read once as uncertain. A ``case`` on a known value takes the branch whose
pattern matches; on an unknown value every branch is uncertain. A function runs where it is called, with the call's
arguments as ``$1``...``$@``. A script that starts itself (``srun ... bash "$DIR/launch.sbatch" --task``, the
file's own name) is read again as that process: the call's words as ``$1``..., the exported variables as its
environment, up to an ``exec``.
Here-document bodies are data, not commands.  Text bash would refuse (an unclosed quote, ``fi`` without
``if``) is an InputError naming the line.
"""

from __future__ import annotations

import ast
import contextvars
import dataclasses
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import tree_sitter
import tree_sitter_bash

from placement.errors import InputError
from placement.loaders.files import read_text


@dataclass(frozen=True)
class Origin:
    path: str
    line: int
    text: str
    """The physical source line, stripped."""

    def __str__(self) -> str:
        text = self.text if len(self.text) <= 400 else f"{self.text[:300]} ... {self.text[-60:]}"  # messages stay short
        return f"{self.path}:{self.line}: {text}"


@dataclass(frozen=True)
class Word:
    """One argument of a command after expansion."""

    text: str
    origin: Origin
    """Where the word's first character was written (for an expanded variable: its assignment)."""
    site: Origin
    """Where the word appears in the command (the line of `$VAR` or `${ARGS[@]}` for expanded words)."""
    unresolved: str | None = None
    """The variable or construct whose value is unknown, if any part of the word depends on one."""
    uncertain: str | None = None
    """Why the word may or may not be there (an `if` that cannot be evaluated)."""
    default_of: str | None = None
    """A variable the file does not set whose `${VAR:-default}` default the word holds: the job's environment may set
    VAR, and the word is then another (a user trial: `TP=${TP:-4}` was read as tp 4 without a word of it)."""
    environment: Origin | None = None
    """Where a part of the word other than its first character came from `placement audit --env NAME=VALUE` (the
    value of `--seq-len=$SEQ_LEN`): the evidence says so."""
    withheld: str | None = None
    """Where the word is a `${VAR:-default}` default because srun's --export keeps the script's exported VAR from its
    tasks: WITHHELD_BY_SRUN's words, which the evidence adds (a QA trial: `export TP=4` above `srun --export=NONE
    bash -c "... ${TP:-2}"` was priced at tp 2 with only 'the job's environment may set TP')."""

    @property
    def evidence(self) -> str:
        said = default_note(self.default_of) if self.default_of else ""
        if self.withheld is not None:
            said += self.withheld
        if self.environment is not None:
            said += f" (with {self.environment.text.removeprefix('placement audit ')})"
        if self.origin == self.site:
            return str(self.site) + said
        return f"{self.origin} (expanded at {self.site.path}:{self.site.line}){said}"


DEFAULT_NOTE = " (the default of ${"
"""How `default_note` begins: a source holding it is a value the job's environment may set instead."""


ENVIRONMENT_NOTE = "the job's environment may set "
"""What every note on a value the job's environment may change says (`environment_may_set`)."""
TESTED_UNSET = "?"
"""Marks a `default_of` name as a variable a test read unset (`[ -z $V ]`), not a `${V:-default}`."""


NOT_EXPORTED = (" (not exported: {at.path}:{at.line} sets it in the script, but the shell `bash -c` starts, or the "
                "script run again, sees only exported variables)")
"""What an unset variable's `unresolved` adds where the parent script set it without `export`."""
WITHHELD_BY_SRUN = (" (withheld by srun: {at.path}:{at.line} exports it, but srun at {srun.path}:{srun.line} "
                    "(`--export={export}`) starts its tasks without it: srun(1) --export)")
"""What an unset variable's `unresolved` adds where the script exported it and srun's --export keeps it from the
command (readers.common.word_check then names that srun line, not the script)."""


def default_note(name: str) -> str:
    """What a source says after a value that is the `${NAME:-default}` default of a variable the file does not set,
    or that the file sets where a test reads such a variable unset (a name marked TESTED_UNSET)."""
    if name.startswith(TESTED_UNSET):
        name = name[1:]
        return (f" (set where a test reads ${name} unset, as bash does in a clean environment: {ENVIRONMENT_NOTE}"
                f"{name})")
    return f"{DEFAULT_NOTE}{name}:-...}}: {ENVIRONMENT_NOTE}{name})"


def environment_may_set(source: str) -> bool:
    """Whether a printed source holds a value the job's environment may set instead (`default_note`)."""
    return ENVIRONMENT_NOTE in source


@dataclass(frozen=True)
class Command:
    words: tuple[Word, ...]
    origin: Origin
    environment: tuple[tuple[str, Word], ...] = ()
    """The WATCHED_ENVIRONMENT variables the command runs with: exported earlier in the file (`export NAME=...`)
    or assigned on its own line (`NAME=value cmd`), each with its value's evidence."""

    srun: tuple[Word, ...] = ()
    """The `srun` and its options of an `srun ... bash -c STRING` (or `srun ... bash SCRIPT --task`, a script started
    again) whose string or run holds this command: each of srun's tasks runs it (srun(1)).  A command that starts
    with srun itself keeps it among its own words."""

    withheld: tuple[tuple[str, Word, Word], ...] = ()
    """The watched variables (WATCHED_ENVIRONMENT, WATCHED_PREFIXES) the script exported that srun's `--export`
    keeps from its tasks (srun(1) --export: `NONE`, or a list without `ALL` that does not name them), each as (name,
    the value the script gave it, srun's --export value): the command runs without them."""

    def env(self, name: str) -> Word | None:
        return dict(self.environment).get(name)

    def withheld_by_srun(self, name: str) -> str | None:
        """Where `name` was exported by the script but srun's --export keeps it from the command: a clause naming
        both lines, for a source or a finding; None otherwise."""
        for n, value, export in self.withheld:
            if n == name:
                at = self.origin
                given = ("" if (export.origin.path, export.origin.line) == (at.path, at.line) else
                         f", from {export.origin.path}:{export.origin.line}: sbatch passes its --export to srun as "
                         f"SLURM_EXPORT_ENV")
                return (f"{name}={value.text} exported at {value.origin.path}:{value.origin.line} does not reach "
                        f"the ranks: {WITHHELD_MARK} {at.path}:{at.line} (`--export={export.text}`{given}) starts "
                        f"its tasks without it (srun(1) --export)")
        return None


WITHHELD_MARK = "srun at"
"""What a source says where srun's --export keeps a variable the script exported from the ranks
(Command.withheld_by_srun; audit.core's findings then advise srun's line, not an export in the script)."""


@dataclass(frozen=True)
class HereDocLine:
    """One line of the text a here-document writes."""

    origin: Origin
    """The script line it was written on."""
    values: tuple[Word, ...] = ()
    """The expansions on it, each as the word it became (its origin: where the variable was set)."""


@dataclass(frozen=True)
class HereDoc:
    """A here-document a command writes to a file (`cat <<EOT > $DS_CONFIG ... EOT`, `cat > FILE <<'EOF'`, `tee FILE
    <<EOF`): its text as bash writes it (`<<EOT` expands parameters, arithmetic and command substitutions, `<<'EOT'`
    nothing; `<<-` strips leading tabs), each line with where it was written."""

    target: Word
    """The file the command writes."""
    command: Origin
    """The command's line."""
    text: str
    lines: tuple[HereDocLine, ...]
    """One per line of `text`."""
    unresolved: tuple[tuple[int, str, str], ...] = ()
    """(line of `text`, 1-based; the text it holds there; why it is not known: the variable or construct, or the
    condition it was set under) for each expansion whose value the files do not fix."""
    uncertain: str | None = None
    """Why the command may or may not run (an `if` that cannot be evaluated)."""
    append: bool = False
    """`>>`: the text is added to the file, not written over it."""
    after: int = 0
    """How many commands of the script ran before it (`Script.commands`): a launch later in that list runs with it."""


@dataclass(frozen=True)
class Script:
    """What a script runs as the reader evaluates it: its commands and the here-documents it writes to files."""

    commands: list[Command]
    heredocs: list[HereDoc]


@dataclass
class _Seg:
    """A run of characters of a word being built; `split` marks unquoted expansion results."""

    text: str
    split: bool
    origin: Origin
    unresolved: str | None = None
    uncertain: str | None = None
    brk: bool = False
    """A forced word break (between the elements of a quoted "${A[@]}")."""
    default_of: str | None = None
    """The variable whose `${VAR:-default}` default this text is, VAR being unset in the file (Word.default_of)."""
    environment: Origin | None = None
    """For an arithmetic result: the `--env` origin of a variable it read (Word.environment)."""
    withheld: str | None = None
    """Word.withheld."""


@dataclass
class _Var:
    value: list[_Seg] | None = None
    """Scalar value (segments keep their origins)."""
    items: list[list[_Seg]] | None = None
    """Array elements."""


@dataclass
class _Src:
    """A text the grammar parsed: the script itself, or the STRING of `bash -c STRING` / a function body's file."""

    data: bytes
    line: int | None = None
    """For a `bash -c` STRING: the line of that command, which the string's commands are attributed to."""
    origins: tuple[tuple[int, Origin], ...] = ()
    """For a `bash -c` STRING: (first byte, origin) of each stretch of the string, where its text was written (the
    assignment of a variable the string expanded): the origin of a word of the string."""


@dataclass
class _Call:
    """A running function: its arguments ($1 ... $@) and the outer values of the variables it made `local`."""

    args: list[list[_Seg]]
    saved: dict[str, _Var | None] = field(default_factory=dict)


@dataclass
class _State:
    path: str
    lines: list[str]
    vars: dict[str, _Var] = field(default_factory=dict)
    frames: list[list] = field(default_factory=list)
    """Open blocks: [mode, taken, origin] with mode "on" / "off" / "uncertain" (`if`, loops, `case` branches)."""
    commands: list[Command] = field(default_factory=list)
    depth: int = 0
    """Nesting of `bash -c STRING` runs (bounded: MAX_NESTED_SHELLS)."""
    functions: dict[str, tuple[tree_sitter.Node, _Src]] = field(default_factory=dict)
    exported_functions: set[str] = field(default_factory=set)
    """Functions `export -f` (`declare -fx`) marked: the only ones a shell the script starts sees."""
    hidden_functions: dict[str, Origin] = field(default_factory=dict)
    """Inside a `bash -c` STRING or a run of the script again: the functions the parent defined without `export -f`,
    which the child does not see (bash(1) ENVIRONMENT), each with where the parent defined it."""
    exported: set[str] = field(default_factory=set)
    """Variables `export`, `declare -x` or `set -a` marked: they reach the commands the script runs."""
    allexport: bool = False
    """`set -a` (`set -o allexport`) is on: every variable assigned from now on is exported (bash(1), set)."""
    hidden: dict[str, Origin] = field(default_factory=dict)
    """Inside a `bash -c` STRING or a run of the script again: the variables the parent set without exporting
    them, which the child does not see, each with where the parent set it (for the note on an unset one)."""
    calls: list[_Call] = field(default_factory=list)
    zero: list[_Seg] | None = None
    """Inside `bash -c STRING NAME ...`: NAME, the string's $0 (elsewhere $0 is left to the job)."""
    loop_runs: int = 0
    num_calls: int = 0
    """Loop bodies run so far (bounded: MAX_LOOP_RUNS)."""
    src: _Src | None = None
    """The script's own text, for a command that runs the script again (`srun bash "$0" --task`)."""
    reruns: int = 0
    """Such runs open (bounded with the `bash -c` ones: MAX_NESTED_SHELLS)."""
    stopped: bool = False
    """Inside such a run, a certain `exec CMD` replaced the process: nothing after it runs in that run."""
    srun: tuple[Word, ...] = ()
    """Command.srun of the commands read now: the `srun ...` words of the `bash -c` string or run being read."""
    heredocs: list[HereDoc] = field(default_factory=list)
    """The here-documents written to files so far (Script.heredocs)."""
    withheld: tuple[tuple[str, Word, Word], ...] = ()
    """Command.withheld of the commands read now: what an `srun --export=...` around them keeps from its tasks."""
    dropped: dict[str, tuple[Origin, Origin, str]] = field(default_factory=dict)
    """Every variable the script exported that an `srun --export=...` around the commands read now keeps from its
    tasks: name -> (where the script set it, the srun line, srun's --export value)."""
    posix: bool = False
    """Inside the string of an `sh -c`: /bin/sh, dash on Debian and Ubuntu, bash in POSIX mode on RHEL."""
    sh_functions: set[str] = field(default_factory=set)
    """Inside such a string: the functions the script exported with `export -f`, which only bash imports."""


SLURM_PREFIX: Final = "SLURM_"
"""Variables SLURM sets in a job's environment (sbatch(1), srun(1) OUTPUT ENVIRONMENT VARIABLES): a default the
script gives one (`${SLURM_NNODES:-1}`) is not what the job runs with."""
MAX_NESTED_SHELLS = 8
MAX_CALL_DEPTH = 32
"""Function calls inside function calls; deeper (a recursion) is an error rather than a guess at its end."""
MAX_CALLS = 10_000
"""Function calls in one script; more (calls fanning out) is an error, not an endless read."""
MAX_LOOP_RUNS = 1000
"""Body runs of `for` loops the reader unrolls in one script; past it a loop's body is read once, as uncertain."""
_DECLARE_LOCAL = {"local", "declare", "typeset"}
"""Declaration commands that make a variable local when run inside a function."""
WATCHED_ENVIRONMENT = ("CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS",
                       "OMPI_MCA_hwloc_base_binding_policy",
                       "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
"""Environment variables a command's `environment` reports (the ones the cost model prices,
CUDA_DEVICE_MAX_CONNECTIONS, which Megatron-LM checks at start: audit.core._check_megatron_connections, and PyTorch's
allocator settings, whose expandable segments the memory price assumes: audit.core._allocator_note)."""
WATCHED_PREFIXES = ("NCCL_", "NVTE_", "TORCH_", "NVSHMEM_", "UCX_", "FI_", "OMP_", "XLA_", "M_")
"""Prefixes of the variables a command's `environment` also reports: NCCL's, Transformer Engine's, PyTorch's,
NVSHMEM's, UCX's, libfabric's, OpenMP's and XLA's (MaxText's XLA_FLAGS) runtime settings, which the cost model does
not price but the audit must not pass over in silence (readers.common.nccl_settings, runtime_settings), nor the files
it writes for the job drop without a word (LaunchLayout.launch_environment); and MaxText's M_<KEY> config overrides
(pyconfig.py:519-553), which its reader lays over the config (readers.maxtext.env_overrides)."""
SLURM_JOB_ENVIRONMENT = ("SLURM_NNODES", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS", "SLURM_DISTRIBUTION",
                         "SLURM_DIST_PLANESIZE", "SLURM_CPU_BIND", "SLURM_JOB_NODELIST",
                         "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK", "SLURM_HET_SIZE")
"""SLURM's job variables a command's `environment` also reports where the #SBATCH header fixes them (sbatch puts
them in every command's environment): the task count of an `srun python ...` launch, one rank per task, the
tasks per node of an `srun torchrun ...`, each task a torchrun, and the task distribution srun reads as its
-m/--distribution (srun(1) INPUT ENVIRONMENT VARIABLES: SLURM_DISTRIBUTION, SLURM_DIST_PLANESIZE), which decides the
node of each rank of an `srun python ...` launch, SLURM_CPU_BIND, which srun reads as its --cpu-bind, and
SLURM_HET_SIZE, the components of a heterogeneous job (its header read for component 0 only, srun's default)."""
_RESERVED = {"then", "elif", "else", "fi", "do", "done", "esac"}
"""Words bash accepts only inside a compound command; tree-sitter reads a stray one as a command name."""
_WORDS = {"word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation", "simple_expansion",
          "expansion", "command_substitution", "arithmetic_expansion", "number", "extglob_pattern", "regex",
          "process_substitution", "brace_expression", "test_operator"}
"""Node types that are one shell word (or a test operator, read as one)."""

_LANGUAGE: tree_sitter.Language | None = None


SCRIPT_ENVIRONMENT: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "script_environment", default=())
"""The variables the audited scripts' environment sets at their start (`placement audit --env NAME=VALUE`), as bash
imports them: set and exported (bash(1) ENVIRONMENT), each value's origin the flag."""
ENV_FLAG = "placement audit --env"
"""How the origin of a value `--env` gives begins."""
SCRIPT_ARGUMENTS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("script_arguments", default=())
"""The arguments the audited scripts were started with (`placement audit --script-args`): their $1 ... $@ (none:
a script started with no arguments)."""


def read_commands(path: Path) -> list[Command]:
    """The commands `path` runs, in order, with words expanded as far as the file determines them, started with
    SCRIPT_ARGUMENTS as its arguments."""
    return read_script(path).commands


def read_script(path: Path) -> Script:
    """`read_commands`, with the here-documents the script writes to files."""
    text = read_text(path, "launch script", "expected a shell script or an argument list")
    body = text.rstrip()
    if body.endswith("\\") and not body.endswith("\\\\"):  # a continuation into the end of the file joins
        text = body[:-1] + " " + text[len(body):]  # nothing: bash runs the command it ends (`bash -n` accepts it)
    state = _State(str(path), text.split("\n"))
    for name, value in SCRIPT_ENVIRONMENT.get():  # before #SBATCH's: a SLURM variable --env gives wins
        state.vars[name] = _Var(value=[_Seg(value, False, Origin(str(path), 0, f"{ENV_FLAG} {name}={value}"))])
        state.exported.add(name)
    _sbatch_environment(state)
    src = state.src = _Src(text.encode())
    given = SCRIPT_ARGUMENTS.get()
    if given:
        at = Origin(str(path), 0, "placement audit --script-args " + " ".join(given))
        state.calls.append(_Call([[_Seg(a, False, at)] for a in given]))
    try:
        _block(state, src, _parse(state, src, None).children)
    except RecursionError:
        raise InputError(f"{path}: the script nests commands, quotes or expansions deeper than the reader follows "
                         f"(Python's recursion limit); expected a launch script") from None
    return Script(state.commands, state.heredocs)


# ---------------------------------------------------------------------------------------------------
# The environment sbatch gives the script


_SBATCH_ENV = {"nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"), "ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
               "ntasks": ("SLURM_NTASKS",), "gpus-per-node": ("SLURM_GPUS_ON_NODE",),
               "distribution": ("SLURM_DISTRIBUTION",), "nodelist": ("SLURM_JOB_NODELIST",),
               "export": ("SLURM_EXPORT_ENV",)}
"""sbatch option -> the variables SLURM sets from it in the job's environment (sbatch(1) OUTPUT ENVIRONMENT
VARIABLES); `--gres=gpu:N` sets SLURM_GPUS_ON_NODE too (not SLURM_GPUS_PER_NODE, which only `--gpus-per-node` sets,
as written), and `--distribution` (`-m`) SLURM_DISTRIBUTION, a word."""


_HEADER_OPTIONS = {"--nodes": "nodes", "-N": "nodes", "--ntasks-per-node": "ntasks-per-node",
                   "--ntasks-per-gpu": "ntasks-per-gpu", "--ntasks": "ntasks", "-n": "ntasks",
                   "--gpus-per-node": "gpus-per-node", "--gpus-per-task": "gpus-per-task", "--gpus": "gpus",
                   "-G": "gpus", "--gres": "gres", "--distribution": "distribution", "-m": "distribution",
                   "--nodelist": "nodelist", "-w": "nodelist", "--export": "export"}
"""The sbatch options whose values the header's reader keeps (sbatch(1)), by spelling."""


def _header_arguments(line: str) -> list[str]:
    """The arguments of one `#SBATCH` line's rest, as sbatch splits it (slurm src/sbatch/opt.c get_argument): words
    at whitespace, quotes grouping, and an unquoted `#` ending the line."""
    out, word, quote, started = [], [], "", False
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
            else:
                word.append(ch)
        elif ch in "\"'":
            quote, started = ch, True
        elif ch == "#":
            break
        elif ch.isspace():
            if word or started:
                out.append("".join(word))
            word, started = [], False
        else:
            word.append(ch)
    if word or started:
        out.append("".join(word))
    return out


_HET_SEPARATOR = re.compile(r"\s*(hetjob|packjob)(\s|$)", re.IGNORECASE)
"""An `#SBATCH hetjob` line (`packjob` before 20.02) ends one heterogeneous job component's options and starts the
next's (slurm src/sbatch/opt.c _opt_batch_script: het_job_scan_inx)."""


def _het_size(state: _State) -> tuple[int, Origin] | None:
    """The components of a heterogeneous job's header, with its first `#SBATCH hetjob` line; None for one.  sbatch
    reads each component's options from its own lines (src/sbatch/opt.c _opt_batch_script), the batch script's
    unsuffixed SLURM_* variables are component 0's (SLURM_*_HET_GROUP_# the others': sbatch(1)), and srun runs its
    step on component 0 unless --het-group says otherwise (srun(1) --het-group: "The default value is
    --het-group=0").  A QA trial: `#SBATCH --nodes=2 --ntasks-per-node=8`, `#SBATCH hetjob`, `#SBATCH --nodes=1
    --ntasks-per-node=1` with `srun python pretrain_gpt.py` (tp 2) was refused as 1 rank, the last component's."""
    count, first = 1, None
    for n, raw in enumerate(state.lines, 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            break
        magic = next((w for w in ("#SBATCH", "#SLURM") if line.startswith(w)), None)
        if magic is not None and _HET_SEPARATOR.match(line[len(magic):]):
            count, first = count + 1, first or Origin(state.path, n, line)
    return (count, first) if first is not None else None


def _header_values(state: _State) -> dict[str, tuple[str, Origin]]:
    """The header's option values, each with its line: every `#SBATCH` (or `#SLURM`) line up to the first command,
    each holding any number of options (`#SBATCH --nodes=2 --ntasks-per-node=8`), and of an option given twice the
    last, as sbatch passes them all to getopt in order (src/sbatch/opt.c _opt_batch_script).  A QA trial: the second
    option of a line was dropped, and of `--nodes=2` then `--nodes=4` the first was read."""
    values: dict[str, tuple[str, Origin]] = {}
    for n, raw in enumerate(state.lines, 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            break
        magic = next((w for w in ("#SBATCH", "#SLURM") if line.startswith(w)), None)
        if magic is None:
            continue
        at = Origin(state.path, n, line)
        if _HET_SEPARATOR.match(line[len(magic):]):
            break  # a heterogeneous job's next component: srun's default step runs on component 0 (see _het_size)
        args = _header_arguments(line[len(magic):])
        k = 0
        while k < len(args):
            arg = args[k]
            k += 1
            if arg.startswith("--"):
                flag, eq, value = arg.partition("=")
            elif re.fullmatch(r"-[A-Za-z].*", arg):
                flag, value = arg[:2], arg[2:]
                eq = "=" if value else ""
            else:
                continue
            option = _HEADER_OPTIONS.get(flag)
            if option is None:
                continue
            if not eq:
                if k >= len(args):
                    continue
                value, k = args[k], k + 1
            values[option] = (value, at)
    return values


def _sbatch_environment(state: _State) -> None:
    """`#SBATCH --nodes=48` (or `-N 48`, `--gres=gpu:8`...) fixes SLURM_NNODES & co. for the script, as sbatch
    does; a range (`--nodes=2-4`) fixes nothing.  Only the header's directives count (sbatch stops reading them at
    the first command)."""
    per_gpu: dict[str, tuple[int, Origin]] = {}  # ntasks-per-gpu, gpus-per-task, gpus and the counts beside them
    for option, (value, at) in _header_values(state).items():
        line = at.text
        written, given = value, option
        if option == "gres":
            g = re.fullmatch(r"gpu(?::[\w-]+)?:(\d+)", value)
            option, value = ("gpus-per-node", g.group(1)) if g else (None, "")
        elif option == "gpus-per-node" and (g := re.fullmatch(r"[\w-]+:(\d+)", value)):
            value = g.group(1)  # a GPU type leads the count (sbatch(1) --gpus-per-node=[type:]<number>)
        if given == "gpus-per-node":
            # sbatch sets SLURM_GPUS_PER_NODE to --gpus-per-node as written, type and all, and not from --gres
            # (src/common/env.c set_env_from_opts); the gres plugin sets SLURM_GPUS_ON_NODE to the count
            # (src/plugins/gres/common/gres_common.c)
            state.vars.setdefault("SLURM_GPUS_PER_NODE", _Var(value=[_Seg(written, False, at)]))
        if option in ("ntasks-per-gpu", "gpus-per-task", "gpus", "gpus-per-node", "nodes", "ntasks",
                      "ntasks-per-node"):
            g = re.fullmatch(r"(?:[\w-]+:)?(\d+)", value)  # a GPU type may lead (`--gpus=h100:16`)
            if g and (option.startswith("gpus") or value.isdigit()):
                per_gpu.setdefault(option, (int(g.group(1)), Origin(state.path, at.line, line)))
            if option in ("ntasks-per-gpu", "gpus-per-task", "gpus"):
                continue
        if option == "export" and value.upper() == "ALL":
            continue  # sbatch passes any other --export to srun as SLURM_EXPORT_ENV (slurm src/sbatch/opt.c)
        if option is None or not (value.isdigit() or option in ("distribution", "nodelist", "export")):
            continue
        if option == "nodelist" and "/" in value:
            value, at = _header_hostfile(state, value, at)
        for name in _SBATCH_ENV[option]:
            state.vars.setdefault(name, _Var(value=[_Seg(value, False, at)]))
    _tasks_from_gpus(state, per_gpu)
    het = _het_size(state)
    if het is not None:  # sbatch sets SLURM_HET_SIZE in a heterogeneous job's environment (sbatch(1))
        state.vars.setdefault("SLURM_HET_SIZE", _Var(value=[_Seg(str(het[0]), False, het[1])]))
    # `--nodelist` (-w) asks for hosts the job holds (sbatch(1) -w); they are its whole node list, SLURM_JOB_NODELIST,
    # where no node count asks for more
    hosts, nodes = state.vars.get("SLURM_JOB_NODELIST"), state.vars.get("SLURM_NNODES")
    if hosts is not None and hosts.value and hosts.value[0].origin.line:
        from placement.loaders.hostlist import expand_hostlist

        try:
            count = len(expand_hostlist(hosts.value[0].text))
        except InputError:
            count = -1
        if count < 1 or (nodes is not None and nodes.value and nodes.value[0].text != str(count)):
            del state.vars["SLURM_JOB_NODELIST"]


def _tasks_from_gpus(state: _State, given: dict[str, tuple[int, Origin]]) -> None:
    """The job's task count where the header gives it through its GPUs, as SLURM's gres validation sets it (slurm
    src/interfaces/gres.c gres_job_state_validate, _set_job_bits... of master 284c3b9): `--ntasks-per-gpu=N` without
    --ntasks starts N tasks for every GPU the job asks for (`--gpus-per-node=G` on `--nodes=K`: N x G x K; `--gpus=X`:
    N x X; "Set num_tasks = gpus * ntasks/gpu"), and `--gpus=X --gpus-per-task=Y` X / Y tasks ("--gpus not multiple
    of --gpus-per-task" is refused); sbatch's job then has that SLURM_NTASKS (src/common/env.c
    env_array_for_batch_job: "--ntasks-per-tres still implicitly sets ntasks"), which srun reads as its -n.
    `--ntasks-per-gpu` beside `--ntasks-per-node` or `--gpus-per-task` is refused as sbatch refuses it
    (src/common/slurm_opt.c _validate_ntasks_per_gpu).  A QA trial: `#SBATCH --nodes=2 --gpus-per-node=8
    --ntasks-per-gpu=1` with `srun python pretrain_gpt.py` left the world size to --gpus, which priced it on 64."""
    per_gpu, per_task = given.get("ntasks-per-gpu"), given.get("gpus-per-task")
    if per_task is not None:  # srun reads it as its --gpus-per-task (srun/opt.c env_vars), binding each task's GPUs
        state.vars.setdefault("SLURM_GPUS_PER_TASK", _Var(value=[_Seg(str(per_task[0]), False, per_task[1])]))
    if per_gpu is not None:
        other = given.get("ntasks-per-node") or per_task
        if other is not None:
            raise InputError(f"{other[1]}: beside {per_gpu[1]}: sbatch refuses --ntasks-per-gpu with "
                             f"--{'ntasks-per-node' if other is given.get('ntasks-per-node') else 'gpus-per-task'} "
                             f"(\"mutually exclusive\": slurm src/common/slurm_opt.c _validate_ntasks_per_gpu), so "
                             f"the job is not submitted; keep one of the two lines")
    if "ntasks" in given or "SLURM_NTASKS" in state.vars:
        return
    gpus = given.get("gpus")
    if gpus is None and "gpus-per-node" in given and "nodes" in given:
        (g, at), (k, nodes_at) = given["gpus-per-node"], given["nodes"]
        gpus = (g * k, Origin(state.path, at.line, f"line {at.line}: {at.text} on line {nodes_at.line}: "
                                                   f"{nodes_at.text}"))
    elif gpus is not None:
        gpus = (gpus[0], Origin(state.path, gpus[1].line, f"line {gpus[1].line}: {gpus[1].text}"))
    tasks: tuple[int, Origin] | None = None
    if per_gpu is not None and gpus is not None:
        n, at = per_gpu
        tasks = (n * gpus[0], Origin(state.path, at.line, f"{at.text}, {n} a GPU of the job's {gpus[0]} ("
                                                          f"{gpus[1].text}): {n * gpus[0]} tasks"))
    elif per_task is not None and "gpus" in given:
        (x, gat), (y, at) = given["gpus"], per_task
        if y < 1 or x % y:
            raise InputError(f"{gat}: {x} GPUs are not a whole number of tasks of {y} ({at}); sbatch refuses the job "
                             f"(\"--gpus not multiple of --gpus-per-task\": slurm src/interfaces/gres.c); ask for a "
                             f"multiple of {y} GPUs")
        tasks = (x // y, Origin(state.path, at.line, f"{at.text}, of the job's {x} GPUs (line {gat.line}: "
                                                     f"{gat.text}): {x // y} tasks"))
    if tasks is not None:
        state.vars["SLURM_NTASKS"] = _Var(value=[_Seg(str(tasks[0]), False, tasks[1])])


def _header_hostfile(state: _State, value: str, at: Origin) -> tuple[str, Origin]:
    """`#SBATCH --nodelist=hosts/job.txt`: a value with a `/` is a file sbatch reads the hosts from (sbatch(1) -w:
    "The nodes list will be assumed to be a filename if it contains a "/" character"; slurm src/common/proc_args.c
    verify_node_list, src/api/allocate.c slurm_read_hostfile: hostlist expressions, `#` comments).  Read as sbatch
    does, from the directory it is submitted in, or else beside the script; the hosts, joined, with a source naming
    the file.  A file that is in neither place, or lists no hosts, is an error (a QA trial: the header's file was
    dropped without a word and the audit asked for --nodelist)."""
    from placement.loaders.hostlist import read_nodelist

    path = Path(value)
    if not path.is_absolute() and not path.exists() and (Path(state.path).parent / path).exists():
        path = Path(state.path).parent / path
    if not path.exists():
        raise InputError(f"{at}: the job's hosts are in the file {value} (sbatch(1) --nodelist: a value with a / is "
                         f"a file name), which is not at {path.resolve()}; run the audit where the job was "
                         f"submitted, or give the job's hosts with --nodelist @FILE or its $SLURM_JOB_NODELIST")
    hosts = read_nodelist(f"@{path}")
    return ",".join(hosts), Origin(at.path, at.line, f"{at.text} ({len(hosts)} hosts read from {path})")


# ---------------------------------------------------------------------------------------------------
# The syntax tree: tree-sitter's bash grammar; its ERROR and MISSING nodes are the script's syntax errors.


def _parse(state: _State, src: _Src, at: Origin | None) -> tree_sitter.Node:
    """The tree of `src`; a syntax error is an InputError naming its line (`at`: the `bash -c` command)."""
    global _LANGUAGE
    if _LANGUAGE is None:
        _LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())
    root = tree_sitter.Parser(_LANGUAGE).parse(src.data).root_node
    for node in _descendants(root):
        if node.is_missing or node.is_error:
            raise InputError(_syntax_error(state, src, node, at))
        if node.type == "command_name" and node.text.decode("utf-8", "replace") in _RESERVED:
            kw = node.text.decode()
            opener = {"then": "if", "elif": "if", "else": "if", "fi": "if", "do": "for/while", "done": "for/while",
                      "esac": "case"}[kw]
            raise InputError(f"{at or _org(state, src, node)}: `{kw}` here belongs to no `{opener}`; expected a "
                             f"balanced shell script (bash stops with a syntax error here)")
    return root


def _descendants(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Every node under `node`, in document order (a cursor walk: trees deeper than Python's stack are fine)."""
    cursor = node.walk()
    while True:
        yield cursor.node
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent() or cursor.node == node:
                return


_CLOSERS = {"if": "fi", "case": "esac", "for": "done", "while": "done", "until": "done", "select": "done",
            "do": "done", "{": "}", "(": ")", "$(": ")", "((": "))", "$((": "))", "[[": "]]", "[": "]", "${": "}"}
"""A keyword or bracket that starts a construct, and what closes it."""
_QUOTES = {'"': '"', "'": "'", "`": "`", "$'": "'", '$"': '"'}


def _syntax_error(state: _State, src: _Src, node: tree_sitter.Node, at: Origin | None) -> str:
    if node.is_missing:
        parent = node.parent or node
        if node.type in _QUOTES.values():
            return _quote_error(state, src, parent, node.type, at)
        opener = parent.children[0].type if parent.children and not parent.children[0].is_named else parent.type
        return (f"{at or _org(state, src, parent)}: `{opener}` opened here is never closed (expected `{node.type}`); "
                f"expected a balanced shell script")
    for inner in _descendants(node):  # an unclosed quote: tree-sitter's error starts where the quote opens
        text = inner.text.decode("utf-8", "replace")
        for opening, closing in _QUOTES.items():
            if inner.is_error and text.startswith(opening) and (len(text) <= len(opening)
                                                                 or not text.rstrip().endswith(closing)):
                return _quote_error(state, src, inner, closing, at)
    opened: list[tree_sitter.Node] = []  # keywords and brackets the error leaves open, outermost first
    for leaf in _descendants(node):
        if leaf.child_count == 0:
            if leaf.type in _CLOSERS:
                opened.append(leaf)
            elif opened and leaf.type == _CLOSERS[opened[-1].type]:
                opened.pop()
    if opened:
        return (f"{at or _org(state, src, opened[0])}: `{opened[0].type}` opened here is never closed (expected "
                f"`{_CLOSERS[opened[0].type]}`); expected a balanced shell script")
    snippet = node.text.decode("utf-8", "replace").strip().split("\n")[0][:60]
    org = at or _org(state, src, node)
    hole = re.search(r"=\s*(<[^<>\n]*>)", org.text or "")
    if hole:  # a user trial: Yuan-2.0's `CHECKPOINT_PATH=<Specify path>`, a template's placeholder left in
        return (f"{org}: bash cannot parse `{hole.group(1)}` (a redirection, to bash): a template placeholder left "
                f"in; write the value it stands for (or quote it) and audit the filled script")
    return (f"{org}: bash cannot parse the script here (at `{snippet}`); expected a "
            f"balanced shell script (quotes, brackets, if/fi, case/esac, do/done)")


def _quote_error(state: _State, src: _Src, node: tree_sitter.Node, quote: str, at: Origin | None) -> str:
    return (f"{at or _org(state, src, node)}: a {quote} quote opened here is never closed; expected a balanced shell "
            f"script")


def _origin(state: _State, line: int) -> Origin:
    raw = state.lines[line - 1].strip() if 0 < line <= len(state.lines) else ""
    return Origin(state.path, line, raw)


def _line(src: _Src, row: int) -> int:
    return src.line if src.line is not None else row + 1


def _org(state: _State, src: _Src, node: tree_sitter.Node) -> Origin:
    if src.origins:  # a `bash -c` STRING: where the text at the node's start was written
        at = _start(node)[0]
        return next((o for first, o in reversed(src.origins) if first <= at), src.origins[0][1])
    return _origin(state, _line(src, _start(node)[1]))


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode("utf-8", "replace")


_EXTRAS = re.compile(rb"(?:[ \t]|\\\n)*")


def _start(node: tree_sitter.Node) -> tuple[int, int]:
    """Where `node` really starts (byte, row): inside double quotes tree-sitter's `$`, `` ` `` and `"` tokens
    begin at the blanks and line continuations before them, which are the string's text."""
    leaf = node
    while leaf.child_count:
        leaf = leaf.children[0]
    if leaf.is_named or leaf.start_byte != node.start_byte:
        return node.start_byte, node.start_point[0]
    data = leaf.text
    k = _EXTRAS.match(data).end()
    if k == 0 or k == len(data):
        return node.start_byte, node.start_point[0]
    return node.start_byte + k, node.start_point[0] + data[:k].count(b"\n")


def _source(src: _Src, node: tree_sitter.Node) -> str:
    """The text of `node` from its real start."""
    return src.data[_start(node)[0]:node.end_byte].decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------------
# Words: the tree's word nodes become parts (literal text, quoted or not; parameters; arithmetic; command
# substitutions), which the evaluator expands.


@dataclass
class _Part:
    kind: str  # "lit", "param", "arith", "cmdsub" (any construct whose value is unknown: `$(...)`, `<(...)`...)
    text: str
    quoted: bool
    origin: Origin
    arg: str = ""
    """For "param": the subscript and the operator with its word, as written (`[@]\\0:-8`)."""
    word: list[_Part] | None = None
    """For "param" with an operator (`${NAME:-word}`): the word's parts."""


def _parts(state: _State, src: _Src, node: tree_sitter.Node, quoted: bool = False) -> list[_Part]:
    """One word node as parts; `quoted`: the node is inside double quotes."""
    t = node.type
    org = _org(state, src, node)
    if t in ("string", "translated_string"):
        first, last = node.children[0], node.children[-1]
        parts = _span(state, src, node, first.end_byte, _start(last)[0], "double")
        return parts or [_Part("lit", "", True, org)]
    if t == "raw_string":
        parts = _literal(state, src, node.start_byte + 1, node.end_byte - 1, node.start_point[0], "single")
        return parts or [_Part("lit", "", True, org)]
    if t == "ansi_c_string":
        body = src.data[node.start_byte + 2:node.end_byte - 1].decode("utf-8", "replace")
        return [_Part("lit", _ansi_c(body), True, org)]
    if t in ("concatenation", "command_name"):
        return _span(state, src, node, node.start_byte, node.end_byte, "double" if quoted else "unquoted")
    if t == "simple_expansion":
        return [_Part("param", _source(src, node)[1:], quoted, org, arg="\0")]
    if t == "expansion":
        return [_expansion(state, src, node, quoted)]
    if t == "arithmetic_expansion":
        text = _source(src, node)
        inner = text[3:-2] if text.startswith("$((") else text[2:-1]
        return [_Part("arith", inner, quoted, org)]
    if t in ("command_substitution", "process_substitution", "brace_expression"):
        return [_Part("cmdsub", _source(src, node), quoted, org)]
    if t == "string_content":
        return _literal(state, src, node.start_byte, node.end_byte, node.start_point[0], "double")
    if t in _WORDS or not node.is_named or not node.named_children:
        return _literal(state, src, node.start_byte, node.end_byte, node.start_point[0],
                        "double" if quoted else "unquoted")
    # a construct the reader does not expand: its text, marked unknown
    return [_Part("cmdsub", _source(src, node), quoted, org)]


def _span(state: _State, src: _Src, node: tree_sitter.Node, start: int, end: int, mode: str) -> list[_Part]:
    """The parts of bytes start..end of `node`: its children, and the text between them as literal text."""
    parts: list[_Part] = []
    pos, row = start, node.start_point[0]
    for child in node.children:
        begin, begin_row = _start(child)
        if begin < start or child.end_byte > end:
            if child.end_byte <= start:
                row = child.end_point[0]
            continue
        if begin > pos:
            parts += _literal(state, src, pos, begin, row, mode)
        if child.type == "comment":
            pass
        elif child.type == "string_content" or not child.is_named:
            parts += _literal(state, src, begin, child.end_byte, begin_row, mode)
        else:
            parts += _parts(state, src, child, quoted=mode == "double")
        pos, row = child.end_byte, child.end_point[0]
    if pos < end:
        parts += _literal(state, src, pos, end, row, mode)
    return parts


def _literal(state: _State, src: _Src, start: int, end: int, row: int, mode: str) -> list[_Part]:
    """Literal text as parts, one per line and quoting: `mode` "unquoted" (a backslash quotes the next character),
    "double" (it quotes only $ ` " \\ and newline) or "single" (no escapes); backslash-newline is removed."""
    text = src.data[start:end].decode("utf-8", "replace")
    parts: list[_Part] = []
    at = [start]  # the byte offset of text[i] (a `bash -c` STRING's origins are by byte)

    def add(ch: str, quoted: bool) -> None:
        if src.origins:
            origin = next((o for first, o in reversed(src.origins) if first <= at[0]), src.origins[0][1])
        else:
            origin = _origin(state, _line(src, row))
        if parts and parts[-1].quoted == quoted and parts[-1].origin == origin:
            parts[-1].text += ch
        else:
            parts.append(_Part("lit", ch, quoted, origin))

    def step(n: int) -> None:
        at[0] += len(text[i:i + n].encode())

    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and mode != "single" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "\n":  # line continuation
                row += 1
                step(2)
                i += 2
                continue
            if mode == "unquoted" or nxt in '$`"\\':
                add(nxt, True)
                step(2)
                i += 2
                continue
        add(c, mode != "unquoted")
        if c == "\n":
            row += 1
        step(1)
        i += 1
    return parts


_ANSI_C = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b",
           "f": "\f", "r": "\r", "v": "\v", "?": "?"}


def _ansi_c(body: str) -> str:
    """The text of $'...': backslash escapes decoded (octal and hex too)."""
    return re.sub(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)",
                  lambda m: (chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" and len(m.group(1)) > 1
                             else chr(int(m.group(1), 8)) if m.group(1)[0] in "01234567"
                             else _ANSI_C.get(m.group(1), "\\" + m.group(1))), body, flags=re.S)


_PARAM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!])(\[[@*0-9]+\])?(.*)$", re.S)
_DEFAULT_OPS = (":-", "-", ":=", "=", ":+", "+", ":?", "?")


def _expansion(state: _State, src: _Src, node: tree_sitter.Node, quoted: bool) -> _Part:
    """`${...}`: NAME, a subscript of @, * or digits, and an operator with its word; anything else (`${X%%.*}`,
    `${!X}`, `${A[i]}`) is kept as written and expands to an unknown value."""
    text = _source(src, node)
    org = _org(state, src, node)
    m = _PARAM.match(text[2:-1])
    if not m:
        return _Part("cmdsub", text, quoted, org)
    part = _Part("param", m.group(1), quoted, org, arg=(m.group(2) or "") + "\0" + m.group(3))
    op = re.match(r":?[-=+?]", m.group(3))
    if op:
        token = next((c for c in node.children if not c.is_named and c.type == op.group(0)), None)
        close = node.children[-1]
        if token is not None and close.type == "}":
            part.word = _span(state, src, node, token.end_byte, _start(close)[0], "double" if quoted else "unquoted")
        else:
            part.word = [_Part("lit", m.group(3)[op.end():], quoted, org)]
    return part


# ---------------------------------------------------------------------------------------------------
# Expansion


def _mode(state: _State) -> tuple[str, str | None]:
    """("off" | "uncertain" | "on", reason)."""
    reason = None
    for mode, _, org, *why in state.frames:
        if mode == "off":
            return "off", None
        if mode == "uncertain" and reason is None:
            reason = why[0] if why and why[0] else (
                f"set inside the block at {org.path}:{org.line} ({org.text}), whose condition cannot be evaluated")
    return ("uncertain", reason) if reason else ("on", None)


def _param_value(state: _State, part: _Part) -> list[list[_Seg]] | None:
    """Value of a parameter part as a list of fields (None: unknown)."""
    name = part.text
    index, _, op_arg = part.arg.partition("\0")
    var = state.vars.get(name)
    call = state.calls[-1] if state.calls else None
    if name in ("@", "*"):  # the script runs with no arguments; a function with its call's
        return [list(a) for a in call.args] if call else []
    if name == "#":  # the script itself runs with no arguments (SCRIPT_ARGUMENTS pushes them as a call)
        var = _Var(value=[_Seg(str(len(call.args) if call else 0), False, part.origin)])
    elif name == "0" and state.zero is not None:
        var = _Var(value=list(state.zero))
    elif name.isdigit() and name != "0":
        k = int(name)
        args = call.args if call else []
        var = _Var(value=list(args[k - 1])) if k <= len(args) else None
        if var is None and not call:  # no such argument: unset, as bash expands it (empty)
            var = _Var(value=[])
    if index in ("[@]", "[*]"):
        if var is None:
            return None
        if var.items is not None:
            return [list(x) for x in var.items]
        return [list(var.value or [])]
    if index:  # ${A[0]}; any other subscript (${A[0*]}, ${A[@@]}) is a value the reader does not know
        if not index[1:-1].isdigit():
            return None
        k = int(index[1:-1])
        if var is None or var.items is None or k >= len(var.items):
            return None
        return [list(var.items[k])]
    value = None
    if var is not None:
        value = var.value if var.items is None else (var.items[0] if var.items else [])
    if not op_arg:
        return None if value is None else [list(value)]
    if op_arg in _CASE_OPS:  # ${X,,} ${X^^} ${X,} ${X^}: case modification without a pattern (bash(1) Parameter
        # Expansion); NVIDIA's dgxc-benchmarking launch scripts test `GPU_TYPE=${GPU_TYPE,,}`, and a QA run's
        # `if [[ $GPU_TYPE == "h100" ]]` on it was refused as a condition the reader cannot evaluate
        if value is None or any(x.unresolved for x in value):
            return None
        return [_change_case(value, op_arg)]
    m = re.match(r"(:?[-=+?])(.*)$", op_arg, re.S)
    if not m:
        return None
    op = m.group(1)
    if var is None and name.startswith(SLURM_PREFIX):
        # SLURM sets it in every job (`${SLURM_NNODES:-1}` runs on the job's node count, not on the default): known
        # only where the script or its #SBATCH header fixes it
        return None
    empty = value is None or (op.startswith(":") and not "".join(x.text for x in value))
    if op in (":-", "-", ":=", "="):
        if not empty or (op in ("-", "=") and value is not None):
            return [list(value)]
        sub = _expand_word(state, part.word or [])
        if var is None:  # the file does not set it: the job's environment may
            kept = state.dropped.get(name)
            why = WITHHELD_BY_SRUN.format(at=kept[0], srun=kept[1], export=kept[2]) if kept else None
            sub = [dataclasses.replace(x, default_of=name, withheld=x.withheld or why) for x in sub]
        if op in (":=", "="):
            state.vars[name] = _Var(value=sub)
        return [sub]
    if op in (":+", "+"):
        return [] if empty else [_expand_word(state, part.word or [])]
    if op in (":?", "?") and not empty:  # ${V:?message} of a set V is V (bash(1): else the shell exits)
        return [list(value or [])]
    return None


_CASE_OPS = (",,", "^^", ",", "^")
"""bash's case-modification operators written without a pattern: every character (doubled) or the first, lower
(`,`) or upper (`^`) case."""


def _change_case(value: list[_Seg], op: str) -> list[_Seg]:
    """`value` as ${X<op>} expands it (op one of _CASE_OPS), each segment keeping its origin."""
    change = str.lower if op[0] == "," else str.upper
    if len(op) == 2:
        return [dataclasses.replace(x, text=change(x.text)) for x in value]
    out, done = [], False
    for x in value:
        if not done and x.text:
            x, done = dataclasses.replace(x, text=change(x.text[0]) + x.text[1:]), True
        out.append(x)
    return out


def _copy(seg: _Seg, uncertain: str | None, tested: str | None = None) -> _Seg:
    """A stored copy of an expanded segment: unsplit, no forced break, and under `uncertain` where it has no reason of
    its own; set under a test of the unset variable `tested` (`_tested_unset`) where it is no default of its own;
    every other field kept."""
    return dataclasses.replace(seg, split=False, brk=False, uncertain=seg.uncertain or uncertain,
                               default_of=seg.default_of or tested)


def _tested_unset(state: _State) -> str | None:
    """The variable (marked TESTED_UNSET) whose test, read unset, chose a branch the reader is in, if any."""
    return next((frame[4] for frame in reversed(state.frames) if len(frame) > 4 and frame[4]), None)


def _expand_word(state: _State, parts: list[_Part]) -> list[_Seg]:
    """Expand the word of ${VAR:-word} into one field."""
    segs: list[_Seg] = []
    for fieldsegs in _expand_parts(state, parts, as_field=True):
        segs.extend(fieldsegs)
    return segs


_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _arith(state: _State, expr: str, read: list[Origin] | None = None) -> tuple[int, str | None] | None:
    """The value of $(( expr )) and why it is uncertain (a variable set under a condition), or None if unknown;
    `read` gets the origins of the variables' values."""
    uncertain: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        var = state.vars.get(name)
        if var is None or var.value is None or any(x.unresolved for x in var.value):
            raise KeyError(name)
        uncertain.extend(x.uncertain for x in var.value if x.uncertain)
        if read is not None:
            read.extend(x.environment or x.origin for x in var.value)
        return "".join(x.text for x in var.value).strip() or "0"

    try:
        text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\b([A-Za-z_][A-Za-z0-9_]*)\b",
                      sub, expr)
        tree = ast.parse(text.replace("/", "//").strip(), mode="eval")
    except (KeyError, SyntaxError, RecursionError, MemoryError):
        return None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            return _ARITH_OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(ast.dump(node))

    try:
        value = ev(tree.body)
    except (ValueError, ZeroDivisionError, RecursionError, OverflowError, MemoryError):
        return None
    if abs(value) >= 2**63:  # bash's arithmetic is 64-bit; past it, not a launch value
        return None
    return value, (uncertain[0] if uncertain else None)


def _expand_parts(state: _State, parts: list[_Part], as_field: bool = False) -> list[list[_Seg]]:
    """Expand one raw word into fields (lists of segments); unquoted expansions split at whitespace
    unless `as_field` (assignment right-hand sides never split)."""
    segs: list[_Seg] = []
    has_quoted = False
    for p in parts:
        split = not p.quoted and not as_field
        fields = _param_value(state, p) if p.kind == "param" else None
        # a quoted "$@" or "${A[@]}" of no elements is no word at all, as bash removes it ("If there are no
        # positional parameters, "$@" and $@ expand to nothing", and so does an empty array's "${A[@]}"); any other
        # quoted part keeps the word, empty or not ("" is one empty argument)
        has_quoted |= p.quoted and not (fields == [] and (p.text == "@" or p.arg.partition("\0")[0] == "[@]"))
        if p.kind == "lit":
            segs.append(_Seg(p.text, False, p.origin))
        elif p.kind == "arith":
            read: list[Origin] = []
            v = _arith(state, p.text, read)
            if v is None:
                segs.append(_Seg(f"$(({p.text}))", False, p.origin, unresolved=f"$(({p.text}))"))
            else:
                env = next((o for o in read if _from_env(o)), None)
                segs.append(_Seg(str(v[0]), split, p.origin, uncertain=v[1], environment=env))
        elif p.kind == "cmdsub":
            segs.append(_Seg(p.text, False, p.origin, unresolved=p.text))
        elif p.kind == "param":
            if fields is None:
                shown = "${" + p.text + p.arg.replace("\0", "") + "}"
                index = p.arg.partition("\0")[0]
                # a subscript the reader cannot evaluate is named as written, not as an unset variable
                hidden = state.hidden.get(p.text) if p.text not in state.vars else None
                kept = state.dropped.get(p.text) if p.text not in state.vars else None
                why = (WITHHELD_BY_SRUN.format(at=kept[0], srun=kept[1], export=kept[2]) if kept else
                       NOT_EXPORTED.format(at=hidden) if hidden else "")
                segs.append(_Seg(shown, False, p.origin, unresolved=shown if index and p.text in state.vars
                                 else "$" + p.text + why))
                continue
            star = p.arg.partition("\0")[0] == "[*]" or p.text == "*"
            for k, f in enumerate(fields):
                if k and p.quoted and star:  # "${A[*]}": one word, the elements joined by a space
                    segs.append(_Seg(" ", False, p.origin))
                elif k and p.quoted:
                    segs.append(_Seg("", False, p.origin, brk=True))
                elif k:
                    segs.append(_Seg(" ", True, p.origin))
                for x in f:
                    segs.append(dataclasses.replace(x, split=split and not x.unresolved, brk=False))
    return _split(segs, keep_empty=has_quoted)


def _split(segs: list[_Seg], keep_empty: bool) -> list[list[_Seg]]:
    fields: list[list[_Seg]] = []
    cur: list[_Seg] = []
    nonempty = False
    for s in segs:
        if s.brk:
            fields.append(cur)
            cur, nonempty = [], False
            continue
        if not s.split:
            cur.append(s)
            nonempty = True
            continue
        pieces = re.split(r"(\s+)", s.text)
        for piece in pieces:
            if not piece:
                continue
            if piece.isspace():
                if cur and (nonempty or any(x.text for x in cur)):
                    fields.append(cur)
                cur, nonempty = [], False
            else:
                cur.append(dataclasses.replace(s, text=piece, split=False, brk=False))
                nonempty = True
    if cur and (nonempty or keep_empty):
        fields.append(cur)
    elif not fields and keep_empty:
        fields.append([])
    return fields


def _from_env(origin: Origin) -> bool:
    """Whether `origin` is a value `placement audit --env` gave."""
    return origin.line == 0 and origin.text.startswith(ENV_FLAG)


def _to_word(f: list[_Seg], site: Origin, uncertain: str | None, tested: str | None = None) -> Word:
    text = "".join(x.text for x in f)
    first = next((x for x in f if x.text), f[0] if f else None)
    origin = first.origin if first else site
    unresolved = next((x.unresolved for x in f if x.unresolved), None)
    unc = next((x.uncertain for x in f if x.uncertain), None) or uncertain
    env = next((o for x in f if x.text for o in (x.environment, x.origin) if o is not None and _from_env(o)
                and o != origin), None)
    return Word(text, origin, site, unresolved, unc, next((x.default_of for x in f if x.default_of), tested), env,
                next((x.withheld for x in f if x.withheld), None))


# ---------------------------------------------------------------------------------------------------
# Running statements


def _block(state: _State, src: _Src, nodes: list[tree_sitter.Node]) -> None:
    for node in nodes:
        if node.is_named:
            _statement(state, src, node)


def _statement(state: _State, src: _Src, node: tree_sitter.Node, line: int | None = None) -> None:
    """Run one statement; `line`: the first line of the list or pipeline it is part of (its commands' origin)."""
    if _mode(state)[0] == "off" or state.stopped:
        return
    t = node.type
    line = _line(src, node.start_point[0]) if line is None else line
    if t == "command":
        _command(state, src, node, line)
    elif t == "variable_assignment":
        _assign(state, src, node, _mode(state)[1])
    elif t == "variable_assignments":
        for child in node.named_children:
            if child.type == "variable_assignment":
                _assign(state, src, child, _mode(state)[1])
    elif t == "declaration_command":
        _declare(state, src, node)
    elif t == "unset_command":
        functions = any(_text(c) == "-f" for c in node.named_children)
        for child in node.named_children:
            if child.type in ("variable_name", "word") and not _text(child).startswith("-"):
                (state.functions if functions else state.vars).pop(_text(child), None)
                if functions:
                    state.exported_functions.discard(_text(child))
                if not functions:  # an unset variable loses its export too (bash(1), unset)
                    state.exported.discard(_text(child))
    elif t in ("redirected_statement", "list", "pipeline", "negated_command"):
        # `a && b`, `a | tee log`, `cmd > log 2>&1`: each command on its own, redirections dropped; the left of
        # `[[ test ]] && cmd` decides whether cmd runs
        if t == "redirected_statement":
            _check_redirects(state, src, node, line)
        children = [c for c in node.children if c.is_named and c.type not in ("comment", "file_redirect",
                                                                                "heredoc_redirect",
                                                                                "herestring_redirect")]
        ops = [c.type for c in node.children if not c.is_named]
        if t == "list" and len(children) == 2 and children[0].type == "test_command" and ops[0] in ("&&", "||"):
            value, tested = _condition_read(state, _condition_words(state, src, [children[0]]))
            if value is not None and ops[0] == "||":
                value = not value
            _guarded(state, src, children[1], value, _org(state, src, children[0]), line, tested)
            return
        for child in children:
            if child.type != "test_command":
                _statement(state, src, child, line)
        if t == "redirected_statement":
            _here_document(state, src, node, line)
    elif t == "subshell":  # `( cd dir && cmd )`: runs; its variables do not outlive it
        saved = dict(state.vars)
        _block(state, src, node.children)
        state.vars = saved
    elif t == "compound_statement":
        if node.children and node.children[0].type == "((":
            _arith_command(state, src, node)
        else:
            _block(state, src, node.children)
    elif t == "if_statement":
        _if(state, src, node)
    elif t == "for_statement":
        _for(state, src, node)
    elif t in ("while_statement", "c_style_for_statement"):
        _unknown_loop(state, src, node)
    elif t == "case_statement":
        _case(state, src, node)
    elif t == "function_definition":
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is not None and body is not None:
            state.functions[_text(name)] = (body, src)
    # test_command alone, comments, heredoc bodies: nothing runs that the launch depends on


def _check_redirects(state: _State, src: _Src, node: tree_sitter.Node, line: int) -> None:
    """An InputError where a redirection stands between a command's arguments (`--vocab-file <PATH TO vocab.json>
    --merge-file ...`): bash reads `<PATH` as input from a file PATH and `> --merge-file` as output to a file of
    that name, so the word after each operator is lost and the job does not start where the file is missing.  Such
    a line is a template with its placeholders left in (Megatron-DeepSpeed's examples/pretrain_gpt3_175B.sh); the
    reader would drop other words than bash does (tree-sitter's grammar gives the redirection every word after it),
    so it names the line rather than guess."""
    for r in (c for c in node.children if c.type == "file_redirect"):
        words = [c for c in r.named_children if c.type in _WORDS]
        if len(words) > 1:
            org = _origin(state, _line(src, r.start_point[0]) if src.line is None else line)
            raise InputError(f"{org}: `{_text(r)[:80]}` puts a redirection ({_text(r)[:1]} {_text(words[0])}) among "
                             f"the command's arguments: bash reads the word after it as a file name and drops it "
                             f"from the command (a template placeholder such as <PATH TO ...> left in?); write the "
                             f"value the job runs with")


_STDOUT_REDIRECTS = {">": False, ">|": False, "&>": False, ">>": True, "&>>": True}
"""Redirections of standard output to a file, and whether each appends (bash(1) REDIRECTION)."""


def _here_document(state: _State, src: _Src, node: tree_sitter.Node, line: int) -> None:
    """Record the here-document of `node` (a redirected statement) where its command copies it to a file: `cat` (no
    argument but `-`) with standard output redirected there (the last such redirection wins, as bash opens them in
    order), or `tee [-a] FILE`.  Its text is what bash writes: with an unquoted delimiter, parameters, arithmetic and
    command substitutions expanded as inside double quotes and a backslash quoting only $, ` and \\ (and joining a
    line to the next); with a quoted one (`<<'EOT'`, `<<"EOT"`, `<<\\EOT`), the text as written (bash(1)
    Here Documents)."""
    redirect = next((c for c in node.children if c.type == "heredoc_redirect"), None)
    command = next((c for c in node.children if c.type == "command"), None)
    body = next((c for c in redirect.children if c.type == "heredoc_body"), None) if redirect is not None else None
    start = next((c for c in redirect.children if c.type == "heredoc_start"), None) if redirect is not None else None
    if redirect is None or command is None or start is None:
        return
    reason = _mode(state)[1]
    words = [command.children[i] for i in range(command.child_count)
             if command.field_name_for_child(i) in ("name", "argument")]
    names = [_plain(_parts(state, src, w)) for w in words]
    target_node, append = None, False
    if names and names[0].rsplit("/", 1)[-1] == "cat" and all(n == "-" for n in names[1:]):
        files = sorted([c for c in node.children if c.type == "file_redirect"]
                       + [c for c in redirect.children if c.type == "file_redirect"], key=lambda c: c.start_byte)
        for r in files:
            fd = next((c for c in r.children if c.type == "file_descriptor"), None)
            op = next((c.type for c in r.children if not c.is_named and c.type in _STDOUT_REDIRECTS), None)
            dest = next((c for c in r.named_children if c.type in _WORDS), None)
            if op is not None and dest is not None and (fd is None or _text(fd) == "1"):
                target_node, append = dest, _STDOUT_REDIRECTS[op]
    elif names and names[0].rsplit("/", 1)[-1] == "tee":
        rest = [(w, n) for w, n in zip(words[1:], names[1:], strict=True)]
        append = any(n in ("-a", "--append") for _, n in rest)
        target_node = next((w for w, n in rest if not n.startswith("-")), None)
    if target_node is None:
        return
    fields = _expand_parts(state, _parts(state, src, target_node), as_field=True)
    target = _to_word(fields[0] if fields else [], _org(state, src, target_node), reason, _tested_unset(state))
    quoted = any(q in _text(start) for q in "'\"\\")
    strip_tabs = any(c.type == "<<-" for c in redirect.children)
    out: list[str] = []
    lines: list[list] = []  # [row, [Word...]] per line of the text
    unresolved: list[tuple[int, str, str]] = []
    row = body.start_point[0] if body is not None else start.end_point[0] + 1
    lines.append([row, []])
    at_start = [True]

    def literal(text: str) -> None:
        nonlocal row
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\" and not quoted and i + 1 < len(text) and text[i + 1] in "$`\\\n":
                if text[i + 1] == "\n":  # a line continuation: the next line joins this one
                    row += 1
                    at_start[0] = True
                else:
                    out.append(text[i + 1])
                    at_start[0] = False
                i += 2
                continue
            if c == "`" and not quoted:  # a command substitution the grammar leaves in the text
                end = text.find("`", i + 1)
                end = len(text) - 1 if end < 0 else end
                construct = text[i:end + 1]
                out.append(construct.replace("\n", " "))  # (the text keeps its lines)
                unresolved.append((len(lines), construct.replace("\n", " "), construct))
                row += construct.count("\n")
                at_start[0] = False
                i = end + 1
                continue
            if c == "\t" and strip_tabs and at_start[0]:
                i += 1
                continue
            out.append(c)
            at_start[0] = c == "\n"
            if c == "\n":
                row += 1
                lines.append([row, []])
            i += 1

    def expansion(child: tree_sitter.Node) -> None:
        text = _source(src, child)
        if child.type == "command_substitution" and text.startswith("$((") and text.endswith("))"):
            parts = [_Part("arith", text[3:-2], True, _org(state, src, child))]  # the grammar's $((...)) in a body
        else:
            parts = _parts(state, src, child, quoted=True)
        segs = [x for k, f in enumerate(_expand_parts(state, parts, as_field=True))
                for x in ([_Seg(" ", False, _org(state, src, child))] if k else []) + f]
        word = _to_word(segs, _org(state, src, child), reason, _tested_unset(state))
        lines[-1][1].append(word)
        if word.unresolved:
            unresolved.append((len(lines), word.text, word.unresolved))
        elif word.uncertain:
            unresolved.append((len(lines), word.text, f"{text} ({word.uncertain})"))
        at_start[0] = False
        for ch in word.text:  # a value with a newline goes on with the same script line
            out.append(ch)
            if ch == "\n":
                lines.append([row, []])

    if body is not None:
        pos = body.start_byte
        for child in body.children if not quoted else ():
            if child.start_byte > pos:
                literal(src.data[pos:child.start_byte].decode("utf-8", "replace"))
            if child.type == "heredoc_content" or not child.is_named:
                literal(_text(child))
            else:
                expansion(child)
            pos = child.end_byte
        if pos < body.end_byte:
            literal(src.data[pos:body.end_byte].decode("utf-8", "replace"))
    state.heredocs.append(HereDoc(
        target, _origin(state, line), "".join(out),
        tuple(HereDocLine(_origin(state, _line(src, r)), tuple(v)) for r, v in lines),
        tuple(unresolved), reason, append, len(state.commands)))


def _guarded(state: _State, src: _Src, node: tree_sitter.Node, value: bool | None, org: Origin, line: int,
             tested: str | None = None) -> None:
    """Run `node` only if `value` (a condition's result) is True; under an uncertain block if it is unknown; what it
    sets says the job's environment may set `tested` where a test read that variable unset."""
    if value is False:
        return
    state.frames.append(["on" if value else "uncertain", True, org])
    _set_tested(state.frames[-1], tested)
    try:
        _statement(state, src, node, line)
    finally:
        state.frames.pop()


def _read_herestring(state: _State, src: _Src, node: tree_sitter.Node, line: int) -> bool:
    """`IFS=',' read -r TP PP EP <<< "$CONFIG"`: bash's read of a here-string (its first line, after expansion),
    split at IFS (the command's own `IFS=` prefix, else the script's, else space, tab and newline: whitespace of
    IFS runs together, each other character ends a field), each name a field and the last the rest of the line
    (bash(1) SHELL BUILTIN COMMANDS, read; Word Splitting).  Where the string or IFS is not known, or read takes an
    option other than -r, the names are unknown, set by that line.  True where `node` is such a read (a QA trial:
    Megatron-Bridge's examples/models/gpt_oss/slurm_pretrain.sh reads its TP, PP, EP, CP and SP so, and the audit
    asked for --env TP=VALUE as if nothing set them).  Returns False for any other command."""
    command = node
    here = [c for c in node.children if c.type == "herestring_redirect"]
    if len(here) != 1:
        return False
    words = [c for i, c in enumerate(command.children) if command.field_name_for_child(i) in ("name", "argument")]
    if not words or _text(words[0]) != "read":
        return False
    org = _origin(state, line)
    texts = [_text(w) for w in words[1:]]
    options = [t for t in texts if t.startswith("-")]
    names = [t for t in texts if not t.startswith("-")]
    if not names or any(not re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
        return False
    ifs: list[_Seg] | None = None
    for c in command.children:
        if c.type == "variable_assignment" and (n := c.child_by_field_name("name")) is not None and _text(n) == "IFS":
            ifs = _assigned(state, src, c.child_by_field_name("value"), None)
    if ifs is None:
        var = state.vars.get("IFS")
        ifs = var.value if var is not None and var.value is not None else [_Seg(" \t\n", False, org)]
    value_node = next((c for c in here[0].children if c.is_named), None)
    fields = _expand_parts(state, _parts(state, src, value_node), as_field=True) if value_node is not None else []
    segs = [x for f in fields for x in f]
    unknown = (options not in ([], ["-r"]) or any(x.unresolved or x.uncertain for x in segs + ifs)
               or (options != ["-r"] and any("\\" in x.text for x in segs)))
    reason = _mode(state)[1]
    if unknown:
        why = next((x.unresolved or x.uncertain for x in segs + ifs if x.unresolved or x.uncertain), None)
        for name in names:
            state.vars[name] = _Var(value=[_Seg(f"${name}", False, org, unresolved=f"${name}, which `{org.text}` "
                                                                                    f"reads from {why}" if why else
                                                    f"${name}, which `{org.text}` reads")])
        return True
    text = "".join(x.text for x in segs).split("\n", 1)[0]
    separators = "".join(x.text for x in ifs)
    white = "".join(ch for ch in separators if ch in " \t\n")
    text = text.strip(white)
    values: list[str] = []
    k = 0
    while len(values) < len(names) - 1 and k <= len(text):
        j = k
        while j < len(text) and text[j] not in separators:
            j += 1
        values.append(text[k:j])
        if j >= len(text):
            k = len(text) + 1
            break
        k = j + 1  # past the separator, and the IFS whitespace around it
        while k < len(text) and text[k] in white:
            k += 1
    rest = (text[k:] if k <= len(text) else "").rstrip(white)
    if rest and rest[-1] in separators and not any(ch in separators for ch in rest[:-1].rstrip(white)):
        rest = rest[:-1].rstrip(white)  # one field and its delimiter: the delimiter goes (bash: "1,2," gives b=2)
    values.append(rest)
    values += [""] * (len(names) - len(values))
    at = Origin(org.path, org.line, org.text)
    for name, value in zip(names, values, strict=True):
        state.vars[name] = _Var(value=[_Seg(value, False, at, None, reason)])
    return True


def _command(state: _State, src: _Src, node: tree_sitter.Node, line: int) -> None:
    """Run one simple command.  `NAME=value cmd`: NAME is set in cmd's environment only, after cmd's words are
    expanded, and keeps its old value (or none) after it (bash(1) SIMPLE COMMAND EXPANSION)."""
    if _read_herestring(state, src, node, line):
        return
    assignments = [c for c in node.children if c.type == "variable_assignment"]
    names = {_text(n) for c in assignments if (n := c.child_by_field_name("name")) is not None}
    saved = {name: (state.vars.get(name), name in state.exported) for name in names}
    try:
        _simple_command(state, src, node, line, assignments, names)
    finally:
        for name, (var, exported) in saved.items():
            if var is None:
                state.vars.pop(name, None)
            else:
                state.vars[name] = var
            if not exported:
                state.exported.discard(name)


def _simple_command(state: _State, src: _Src, node: tree_sitter.Node, line: int,
                    assignments: list[tree_sitter.Node], prefixed: set[str]) -> None:
    reason = _mode(state)[1]
    org = _origin(state, line)
    words = [child for i, child in enumerate(node.children) if node.field_name_for_child(i) in ("name", "argument")]
    raw = [_parts(state, src, w) for w in words]
    if raw and _plain(raw[0]) == "eval":
        raw = raw[1:]
    fields: list[Word] = []
    segments: list[list[_Seg]] = []
    for w in raw:
        site = w[0].origin if w else org
        expanded = list(_expand_parts(state, w))
        segments += expanded
        fields += [_to_word(f, site, reason, _tested_unset(state)) for f in expanded]
    for child in assignments:
        _assign(state, src, child, reason)
    inner = _shell_string(fields)
    if inner is not None and state.depth < MAX_NESTED_SHELLS:
        # `srun ... bash -c "$LAUNCHER --node_rank \$SLURM_PROCID $CMD"`: the string is what runs (and it is
        # uncertain if the string is), once per srun task
        # a new process: it sees the variables the script exported, the ones given on the command's line and SLURM's
        # (srun passes its caller's environment, srun(1) --export default ALL), not the others (bash(1) ENVIRONMENT);
        # what it sets ends with it
        # `bash -c STRING NAME ARG...`: NAME is the string's $0 and the ARGs its $1 ... $@ (bash(1), OPTIONS, -c)
        string = fields[inner]
        state.depth += 1
        state.frames.append(["uncertain" if string.uncertain else "on", True, org, string.uncertain])
        outer, state.srun = state.srun, _srun_words(fields) or state.srun
        parent, withheld, dropped = _enter_child(state, prefixed), state.withheld, state.dropped
        _srun_exports(state, list(_srun_words(fields)))
        _step_environment(state, _srun_words(fields))
        given = [[_Seg(w.text, False, w.origin, w.unresolved, w.uncertain)] for w in fields[inner + 1:]]
        state.calls.append(_Call(given[1:]))
        zero, state.zero = state.zero, given[0] if given else None
        posix, state.posix = state.posix, _runs_sh(fields, inner)
        try:
            sub = _Src(string.text.encode(), org.line, _byte_origins(segments[inner], org))
            tree = _parse(state, sub, org)
            if state.posix:
                _refuse_bash_only(state, sub, tree)
                state.sh_functions = set(state.functions)
            _block(state, sub, tree.children)
        finally:
            state.posix = posix
            state.calls.pop()
            state.zero = zero
            state.depth -= 1
            state.frames.pop()
            state.srun = outer
            state.withheld, state.dropped = withheld, dropped
            _leave_child(state, parent)
        return
    if fields and fields[0].text in state.functions and not fields[0].unresolved:
        if state.posix and fields[0].text in state.sh_functions and reason is None:
            at = _org(state, *reversed(state.functions[fields[0].text]))
            raise InputError(f"{org}: runs {fields[0].text}, a function {at.path}:{at.line} exports with `export -f`, "
                             f"in the string `sh -c` runs: only bash imports exported functions (bash(1) ENVIRONMENT), "
                             f"so where /bin/sh is dash (Debian and Ubuntu, the NGC containers' base) it finds no "
                             f"command {fields[0].text} and the job does not start, and where it is bash (RHEL) it "
                             f"runs; the audit cannot tell which the nodes have: expected `bash -c`")
        _call(state, fields, org)
        return
    if fields and fields[0].text in state.hidden_functions and not fields[0].unresolved and reason is None:
        at = state.hidden_functions[fields[0].text]
        raise InputError(f"{org}: runs {fields[0].text}, a function {at.path}:{at.line} defines without exporting "
                         f"it, in a new shell (`bash -c`, or the script run again), which sees only exported "
                         f"functions: there bash finds no command {fields[0].text} and the job does not start; "
                         f"expected `export -f {fields[0].text}` after its definition (bash(1), ENVIRONMENT)")
    again = _runs_itself(state, fields)
    if again is not None and state.depth < MAX_NESTED_SHELLS:
        state.commands.append(Command(tuple(fields), org, _environment(state, prefixed, org, reason), state.srun,
                                      state.withheld))
        outer, state.srun = state.srun, _srun_words(fields[:again]) or state.srun
        if _runs_sh(fields, again):
            # `sh SCRIPT` reads the file with /bin/sh, whatever its #! line says (a QA trial: `srun sh job.sh
            # --task` of a script with `[[` and arrays was read as bash runs it)
            assert state.src is not None
            _refuse_bash_only(state, state.src, _parse(state, state.src, None), script=fields[again].text)
        try:
            _run_again(state, fields[again + 1:], org, reason, prefixed)
        finally:
            state.srun = outer
        return
    if fields and fields[0].text == "shift" and state.calls:  # inside a function: drop its first arguments
        call = state.calls[-1]
        n = fields[1].text if len(fields) > 1 else "1"
        if n.isdigit() and not fields[-1].unresolved:
            call.args = call.args[int(n):]
        else:
            call.args = [[_Seg(f"${k + 1}", False, org, unresolved=f"the arguments after `{org.text}`")]
                         for k in range(len(call.args))]
    if fields and fields[0].text == "set":
        _set_options(state, fields[1:])
    if fields:
        exported = _srun_exports(state, fields)
        state.commands.append(Command(tuple(fields), org, _environment(state, prefixed, org, reason), state.srun,
                                      state.withheld))
        if exported is not None:
            state.vars, state.exported = exported
            state.withheld, state.dropped = (), {}
        if fields[0].text == "exec" and len(fields) > 1 and reason is None and state.reruns:
            state.stopped = True  # the process is now CMD (bash(1), exec): the rest of this run is not read


def _srun_words(fields: list[Word]) -> tuple[Word, ...]:
    """`srun` and its options where `fields` start with srun and run a shell (`srun ... bash ...`): the words before
    the shell; else ()."""
    if not fields or fields[0].text.rsplit("/", 1)[-1] != "srun":
        return ()
    shell = next((i for i, w in enumerate(fields) if w.text.rsplit("/", 1)[-1] in ("bash", "sh")), len(fields))
    return tuple(fields[:shell])


def _runs_itself(state: _State, fields: list[Word]) -> int | None:
    """The index of SCRIPT in `[srun ...] bash|sh [-OPTS] SCRIPT [ARGS]` or `srun [...] SCRIPT [ARGS]` where SCRIPT
    is the file being read, by name: a batch script that starts itself once per node, as placement's launch.sbatch
    does (`srun ... bash "$PLAN_DIR/launch.sbatch" --task`)."""
    name = Path(state.path).name
    srun = bool(fields) and fields[0].text.rsplit("/", 1)[-1] == "srun"
    for i, w in enumerate(fields):
        base = w.text.rsplit("/", 1)[-1]
        if base in ("bash", "sh"):
            j, string = _shell_options(fields, i + 1)
            return j if not string and j < len(fields) and fields[j].text.rsplit("/", 1)[-1] == name else None
        if srun and i > 0 and base == name:
            return i
    return None


def _enter_child(state: _State, prefixed: set[str]) -> tuple:
    """Make `state` the environment of a process a command starts (`bash -c STRING`, the script run again): the
    variables the script exported, those assigned on the command's line (`TP=4 bash -c ...`, exported to it) and
    SLURM's, which srun and sbatch give every task; not the others, nor arrays, which bash does not export
    (bash(1) ENVIRONMENT, Arrays); and the functions `export -f` marked, not the others.  Returns what
    `_leave_child` restores."""
    saved = (state.vars, state.exported, state.hidden, state.allexport, state.functions, state.exported_functions,
             state.hidden_functions)
    state.hidden_functions = {**state.hidden_functions, **{
        k: _org(state, src, body) for k, (body, src) in state.functions.items() if k not in state.exported_functions}}
    state.functions = {k: v for k, v in state.functions.items() if k in state.exported_functions}
    state.exported_functions = set(state.exported_functions)
    passed = state.exported | prefixed
    state.vars = {k: v for k, v in state.vars.items()
                  if (k in passed or k.startswith(SLURM_PREFIX)) and v.items is None}
    state.hidden = {**state.hidden, **{k: at for k, v in saved[0].items()
                                       if k not in state.vars and (at := _var_origin(v)) is not None}}
    state.exported = set(passed)
    state.allexport = False
    return saved


_SRUN_VALUE_OPTIONS = frozenset({
    "-N", "-n", "-c", "-w", "-x", "-p", "-J", "-o", "-e", "-i", "-t", "-m", "-G", "-A", "-q", "-D", "-C", "-d",
    "--nodes", "--ntasks", "--ntasks-per-node", "--cpus-per-task", "--gpus-per-node", "--gpus", "--gpus-per-task",
    "--nodelist", "--exclude", "--partition", "--job-name", "--output", "--error", "--input", "--time",
    "--distribution", "--account", "--qos", "--mpi", "--cpu-bind", "--gres", "--mem", "--chdir", "--constraint",
    "--dependency", "--container-image", "--container-mounts", "--container-name", "--container-workdir",
    "--container-env"})
"""srun options whose value may be the next word (srun(1))."""


def _srun_exports(state: _State, fields: list[Word]) -> tuple[dict[str, _Var], set[str]] | None:
    """Where `fields` are an srun command with `--export=...` before what it runs, make `state` the environment srun
    gives its tasks (srun(1) --export): `NONE` none of the caller's variables, a list without `ALL` only SLURM's and
    the listed ones, `NAME=value` items set where the caller does not (with `ALL`) or always (without); `ALL` alone,
    srun's default, the caller's.  Returns the caller's (vars, exported) to put back, or None where nothing changed.
    A QA trial: `srun --export=ALL,CUDA_DEVICE_MAX_CONNECTIONS=1 python pretrain_gpt.py ...` was told the launch
    files do not set CUDA_DEVICE_MAX_CONNECTIONS, which Megatron-LM asserts under tp > 1; and `srun --export=NONE`
    passed on the NCCL settings the script exported."""
    if not fields or fields[0].text.rsplit("/", 1)[-1] != "srun":
        return None
    word, k = None, 1
    while k < len(fields):
        t = fields[k].text
        if t.startswith("--export="):
            word = dataclasses.replace(fields[k], text=t.removeprefix("--export="))
            break
        if t == "--export" and k + 1 < len(fields):
            word = fields[k + 1]
            break
        if not t.startswith("-") or t == "--":
            break
        k += 2 if t in _SRUN_VALUE_OPTIONS else 1
    inherited = next((state.vars[n] for n in ("SRUN_EXPORT_ENV", "SLURM_EXPORT_ENV") if n in state.vars
                      and (n in state.exported or n.startswith(SLURM_PREFIX))), None)
    if word is None and inherited is not None and inherited.value is not None:
        # srun reads SRUN_EXPORT_ENV, else SLURM_EXPORT_ENV, as its --export (src/srun/opt.c env_vars), and sbatch
        # sets SLURM_EXPORT_ENV from its own --export (src/sbatch/opt.c): `#SBATCH --export=NONE` is every srun's
        # (srun(1) --export: "To avoid steps inheriting environment export settings (e.g. "NONE") from sbatch
        # command, either set --export=ALL or the environment variable SLURM_EXPORT_ENV should be set to "ALL"")
        word = _to_word(inherited.value, fields[0].site, None)
    if word is None or word.unresolved or word.text.upper() == "ALL":
        return None
    saved = (state.vars, state.exported)
    items = [x for x in word.text.split(",") if x]
    # srun reads the list in order, ALL and NONE in any case, and stops at NONE: `--export=NONE,X=1` sets no X
    # (slurm src/srun/launch.c _build_user_env: xstrcasecmp(tok, "NONE") breaks the loop)
    items = items[:next((i for i, x in enumerate(items) if x.upper() == "NONE"), len(items))]
    everything = any(x.upper() == "ALL" for x in items)
    named = {x.partition("=")[0]: (x.partition("=")[2] if "=" in x else None)
             for x in items if x.upper() not in ("ALL", "NIL")}
    if not everything:
        state.vars = {k: v for k, v in state.vars.items() if k.startswith(SLURM_PREFIX) or (
            k in named and named[k] is None and k in state.exported)}
        state.exported = {k for k in state.exported if k in state.vars}
    else:
        state.vars, state.exported = dict(state.vars), set(state.exported)
    for name, value in named.items():
        if value is not None and not (everything and name in state.exported and name in state.vars):
            state.vars[name] = _Var(value=[_Seg(value, False, word.origin)])
            state.exported.add(name)
    before, exported = saved
    srun_line = fields[0].site
    state.dropped = {**state.dropped, **{
        name: (at, srun_line, word.text) for name, var in before.items()
        if name in exported and name not in state.vars and (at := _var_origin(var)) is not None}}
    state.withheld = tuple(
        (name, _to_word(var.value, word.origin, None), word) for name, var in sorted(before.items())
        if name in exported and var.value is not None and name not in state.vars
        and (name in WATCHED_ENVIRONMENT or name.startswith(WATCHED_PREFIXES)))
    return saved


_STEP_COUNTS = {"-N": "SLURM_NNODES", "--nodes": "SLURM_NNODES", "-n": "SLURM_NTASKS", "--ntasks": "SLURM_NTASKS"}
"""srun's node and task count options and the job variable each sets, for the step, in its tasks' environment."""


def _step_environment(state: _State, srun: tuple[Word, ...]) -> None:
    """Inside a task of `srun -N 2 [-n 16] bash ...`: srun sets SLURM_NNODES and SLURM_NTASKS to the step's node and
    task counts, where the batch script's are the job's (slurm src/common/env.c env_array_for_step, unless
    --preserve-env / -E keeps them); SLURM_JOB_NUM_NODES stays the job's.  A count srun gives as a word the reader
    does not know (`-N $N`, `-N 2-4`) leaves the variable unknown, as SLURM's are where nothing fixes them.  A QA
    trial: `#SBATCH --nodes=4` with `srun -N 2 bash -c "torchrun --nnodes=\\$SLURM_NNODES ..."` was refused as
    torchrun counting 4 nodes on srun's 2, where the task sees 2 and the job runs."""
    words = list(srun[1:])
    given: dict[str, Word] = {}
    k = 0
    while k < len(words):
        t = words[k].text
        if t in ("-E", "--preserve-env"):
            return
        m = re.fullmatch(r"(--nodes|--ntasks)=(.*)|(-N|-n)(\S+)|(--nodes|--ntasks|-N|-n)", t)
        if m and m.group(5) is None:
            name, text = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            given[_STEP_COUNTS[name]] = dataclasses.replace(words[k], text=text)
        elif m and k + 1 < len(words):
            given[_STEP_COUNTS[m.group(5)]] = words[k + 1]
            k += 1
        k += 1
    for name, word in given.items():
        if word.unresolved or not word.text.isdigit():
            state.vars.pop(name, None)
        else:
            state.vars[name] = _Var(value=[_Seg(word.text, False, word.origin)])


def _leave_child(state: _State, saved: tuple) -> None:
    """Back to the parent's variables and functions: nothing the child set, defined or exported outlives it."""
    (state.vars, state.exported, state.hidden, state.allexport, state.functions, state.exported_functions,
     state.hidden_functions) = saved


def _var_origin(var: _Var) -> Origin | None:
    """Where a variable's value was written (its first segment's origin), if it has one."""
    segs = var.value if var.items is None else next((x for x in var.items if x), [])
    return next((x.origin for x in segs or []), None)


def _set_options(state: _State, args: list[Word]) -> None:
    """`set -a` / `set -o allexport` (and `+a`, `+o allexport`): bash exports every variable assigned while it is on
    (bash(1), set); the other options change nothing the reader tracks."""
    k = 0
    while k < len(args):
        t = args[k].text
        if t in ("--", "-") or len(t) < 2 or t[0] not in "-+" or not t[1:].isalpha():
            return
        if "o" in t[1:] and k + 1 < len(args) and args[k + 1].text == "allexport":
            state.allexport = t[0] == "-"
        if "a" in t[1:]:
            state.allexport = t[0] == "-"
        k += 1 + ("o" in t[1:])


def _run_again(state: _State, args: list[Word], org: Origin, reason: str | None, prefixed: set[str]) -> None:
    """Read the script again as the process the command starts: the call's words as $1 ... $@, the variables the
    script exported (and SLURM's, and those given on the command's line) as its environment, up to a certain `exec`
    that replaces it."""
    assert state.src is not None
    parent = _enter_child(state, prefixed)
    _srun_exports(state, list(state.srun))
    _step_environment(state, state.srun)
    state.depth += 1
    state.reruns += 1
    state.calls.append(_Call([[_Seg(w.text, False, w.origin, w.unresolved, w.uncertain)] for w in args]))
    state.frames.append(["uncertain" if reason else "on", True, org, reason])
    try:
        _block(state, state.src, _parse(state, state.src, None).children)
    finally:
        state.frames.pop()
        state.calls.pop()
        state.depth -= 1
        state.reruns -= 1
        _leave_child(state, parent)
        state.stopped = False


def _environment(state: _State, prefixed: set[str], org: Origin, reason: str | None) -> tuple[tuple[str, Word], ...]:
    """The watched variables a command inherits (exported) or is given on its line, with their values."""
    out = []
    prefixed_names = sorted(n for n in state.vars if n.startswith(WATCHED_PREFIXES))
    for name in (*WATCHED_ENVIRONMENT, *SLURM_JOB_ENVIRONMENT, *prefixed_names):
        var = state.vars.get(name)
        # sbatch puts its job variables in every command's environment; the others only where exported or prefixed
        inherited = name in SLURM_JOB_ENVIRONMENT or name in state.exported or name in prefixed
        if inherited and var is not None and var.value is not None:
            out.append((name, _to_word(var.value, org, reason)))
    return tuple(out)


def _call(state: _State, fields: list[Word], org: Origin) -> None:
    """Run a function where it is called: its body with the call's words as $1 ... $@."""
    if len(state.calls) >= MAX_CALL_DEPTH:
        raise InputError(f"{org}: function {fields[0].text} runs inside {MAX_CALL_DEPTH} nested function calls "
                         f"(a recursion); expected a launch script whose functions end")
    state.num_calls += 1
    if state.num_calls > MAX_CALLS:
        raise InputError(f"{org}: the script calls its functions more than {MAX_CALLS:,} times; expected a launch "
                         f"script that runs each a few times")
    body, src = state.functions[fields[0].text]
    args = [[_Seg(w.text, False, w.origin, w.unresolved, w.uncertain)] for w in fields[1:]]
    state.calls.append(_Call(args))
    try:
        _statement(state, src, body)
    finally:
        call = state.calls.pop()
        for name, var in call.saved.items():
            if var is None:
                state.vars.pop(name, None)
            else:
                state.vars[name] = var


def _byte_origins(segments: list[_Seg], at: Origin) -> tuple[tuple[int, Origin], ...]:
    """(first byte, origin) of each segment of a `bash -c` STRING, in the string's UTF-8 bytes; a string written
    on the command's own line has that line throughout."""
    out, k = [], 0
    for seg in segments:
        if seg.text:
            out.append((k, seg.origin or at))
            k += len(seg.text.encode())
    return tuple(out) or ((0, at),)


_SHELL_OPTION_ARGUMENT = frozenset("oO")
"""Single-letter options of bash(1) that take the next word as their argument (`-o pipefail`, `-O extglob`)."""
_SHELL_LONG_OPTION_ARGUMENT = frozenset({"--rcfile", "--init-file"})


def _shell_options(fields: list[Word], start: int) -> tuple[int, bool]:
    """(index of the first word after bash's options, whether they include -c) for the words from `start`:
    bash reads options up to the first word that is not one (or `--`), single letters may be grouped (`-lc`,
    `-ex`, `+x`), `-o`/`-O` and `--rcfile`/`--init-file` take the next word, and with -c "commands are read from
    the first non-option argument" (bash(1), OPTIONS)."""
    j, string = start, False
    while j < len(fields):
        t = fields[j].text
        if t == "--" or t == "-":
            return j + 1, string
        if t.startswith("--"):
            j += 2 if t in _SHELL_LONG_OPTION_ARGUMENT else 1
            continue
        if len(t) < 2 or t[0] not in "-+" or not t[1:].isalpha():
            return j, string
        string = string or (t[0] == "-" and "c" in t[1:])
        j += 1 + sum(1 for ch in t[1:] if ch in _SHELL_OPTION_ARGUMENT)
    return j, string


def _runs_sh(fields: list[Word], inner: int) -> bool:
    """Whether the shell that runs the string at `inner` (`_shell_string`) is `sh`, not bash."""
    shell = next((w for w in reversed(fields[:inner]) if w.text.rsplit("/", 1)[-1] in ("bash", "sh")), None)
    return shell is not None and shell.text.rsplit("/", 1)[-1] == "sh"


_BASH_ONLY_NODES = {"array": "an array", "subscript": "an array subscript", "ansi_c_string": "a $'...' string",
                    "process_substitution": "a process substitution", "herestring_redirect": "a here-string (<<<)"}
"""tree-sitter-bash nodes of constructs bash has and POSIX sh (dash) does not (POSIX.1-2017 XCU 2, Shell Command
Language; dash(1))."""
_BASH_ONLY_COMMANDS = {"source": "`source` (POSIX sh has `.`)", "declare": "`declare`", "typeset": "`typeset`",
                       "let": "`let`", "shopt": "`shopt`", "mapfile": "`mapfile`", "readarray": "`readarray`"}
"""Builtins bash has and dash does not (dash(1), Builtins)."""
_BASH_ONLY_EXPANSIONS = {"/": "a ${V/x/y} substitution", "//": "a ${V//x/y} substitution",
                         ":": "a ${V:offset} substring", "^": "a ${V^} case change", "^^": "a ${V^^} case change",
                         ",": "a ${V,} case change", ",,": "a ${V,,} case change", "!": "an indirect ${!V}"}
"""Parameter expansions bash has and POSIX sh does not (POSIX.1-2017 XCU 2.6.2 lists the others)."""


def _bash_only(node: tree_sitter.Node) -> str | None:
    """What bash-only construct `node` is, or None."""
    kind = node.type
    if kind in _BASH_ONLY_NODES:
        return _BASH_ONLY_NODES[kind]
    if kind == "test_command" and node.children and node.children[0].type == "[[":
        return "a [[ ... ]] test"
    if kind == "compound_statement" and node.children and node.children[0].type == "((":
        return "a (( ... )) arithmetic command"
    if kind == "function_definition" and node.children and node.children[0].type == "function":
        return "the `function` keyword"
    if kind == "file_redirect" and node.children and node.children[0].type in ("&>", "&>>"):
        return f"a {node.children[0].type} redirection"
    if kind in ("command_name", "declaration_command"):
        word = node.text.decode("utf-8", "replace").split()[0] if node.text.strip() else ""
        return _BASH_ONLY_COMMANDS.get(word)
    if kind == "expansion":
        ops = [c.type for c in node.children[1:-1]]
        return next((_BASH_ONLY_EXPANSIONS[t] for t in ops[:2] if t in _BASH_ONLY_EXPANSIONS), None)
    return None


def _refuse_bash_only(state: _State, src: _Src, tree: tree_sitter.Node, script: str | None = None) -> None:
    """The string of `sh -c STRING` may use only what POSIX sh has: /bin/sh is dash on Debian and Ubuntu (the NGC
    containers' base), which stops at bash's arrays, `[[`, `source`... with a syntax error or "not found", and bash
    in POSIX mode on RHEL, which runs them; the audit cannot tell which the job's nodes (or its container) have, so a
    string that needs bash is an error naming the construct, not a job read as bash (a QA trial: `srun sh -c
    'ARGS=(...); run "${ARGS[@]}"'` was priced as bash runs it).  So may the script `sh SCRIPT` runs (`script`, its
    word): sh reads the file itself, its `#!/bin/bash` line a comment to it (dash(1): a file operand is read as
    commands), from the top, so every line of it."""
    for node in _descendants(tree):
        what = _bash_only(node)
        if what is not None:
            text = node.text.decode("utf-8", "replace").split("\n")[0][:60]
            if script is None:
                raise InputError(f"{_org(state, src, node)}: `sh -c` runs a string with {what} (`{text}`), which "
                                 f"only bash has: /bin/sh is dash on Debian and Ubuntu (the NGC containers' base), "
                                 f"which refuses it and the job does not start, and bash on RHEL, which runs it; the "
                                 f"audit cannot tell which the nodes have: expected `bash -c`, or a string in POSIX "
                                 f"sh")
            raise InputError(f"{_org(state, src, node)}: `sh {script}` runs this script again with /bin/sh, which "
                             f"reads the whole file whatever its #! line says, and it has {what} (`{text}`), which "
                             f"only bash has: /bin/sh is dash on Debian and Ubuntu (the NGC containers' base), which "
                             f"refuses it and the job does not start, and bash on RHEL, which runs it; the audit "
                             f"cannot tell which the nodes have: expected `bash {script}`, or a script in POSIX sh")


def _shell_string(fields: list[Word]) -> int | None:
    """The index of STRING in `[wrapper ...] bash|sh [OPTIONS] -c [OPTIONS] STRING`, if the command runs one
    (`bash -c`, `bash -lc`, `bash -x -c`, `bash -eo pipefail -c`)."""
    for i, w in enumerate(fields[:-1]):
        if w.text.rsplit("/", 1)[-1] in ("bash", "sh"):
            j, string = _shell_options(fields, i + 1)
            if string and j < len(fields):
                return j
    return None


def _plain(parts: list[_Part]) -> str:
    return "".join(p.text for p in parts if p.kind == "lit" and not p.quoted) if all(
        p.kind == "lit" for p in parts) else ""


def _declare(state: _State, src: _Src, node: tree_sitter.Node) -> None:
    """`export A=1 B`, `local X=2`, `declare -a ARGS=(...)`: the assignments (local ones end with their function)."""
    keyword = node.children[0].type if node.children else ""
    call = state.calls[-1] if state.calls and keyword in _DECLARE_LOCAL else None
    flags = [_text(c) for c in node.named_children if c.type == "word" and _text(c)[:1] in "-+"]
    if any(f[0] == "-" and "f" in f for f in flags):  # `export -f NAME`, `declare -fx`: functions, not variables
        # `export -f` / `declare -fx` export them to the shells the script starts, `export -fn` / `declare -f +x`
        # no longer (bash(1) SHELL BUILTIN COMMANDS)
        if keyword == "export":
            export_f = not any(f[0] == "-" and "n" in f for f in flags)
        elif any("x" in f for f in flags):
            export_f = any(f[0] == "-" and "x" in f for f in flags)
        else:  # `declare -f NAME` prints it
            return
        for child in node.named_children:
            if child.type in ("word", "variable_name") and _text(child)[:1] not in "-+":
                (state.exported_functions.add if export_f else state.exported_functions.discard)(_text(child))
        return
    # `export NAME`, `declare -x NAME` / `local -x` / `typeset -x` export it, `export -n` and `declare +x` no longer
    # (bash(1) SHELL BUILTIN COMMANDS)
    export: bool | None = True if keyword == "export" else None
    for f in flags:
        if keyword == "export" and f[0] == "-" and "n" in f:
            export = False
        elif keyword in _DECLARE_LOCAL and "x" in f:
            export = f[0] == "-"
    for child in node.named_children:
        name = child.child_by_field_name("name") if child.type == "variable_assignment" else (
            child if child.type == "variable_name" else None)
        if name is None:
            continue
        if export:
            state.exported.add(_text(name))
        elif export is False:
            state.exported.discard(_text(name))
        if call is not None and _text(name) not in call.saved:
            call.saved[_text(name)] = state.vars.get(_text(name))
        if child.type == "variable_assignment":
            _assign(state, src, child, _mode(state)[1])


def _assign(state: _State, src: _Src, node: tree_sitter.Node, uncertain: str | None) -> None:
    name_node = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    if name_node is None:
        return
    append = any(c.type == "+=" for c in node.children)
    if name_node.type == "subscript":  # A[i]=x
        _assign_element(state, src, name_node, value, append, uncertain)
        return
    name = _text(name_node)
    if state.allexport:  # `set -a`: every assignment exports its variable
        state.exported.add(name)
    var = state.vars.get(name)
    if value is not None and value.type == "array":
        items: list[list[_Seg]] = []
        for element in value.named_children:
            if element.type == "comment":
                continue
            for f in _expand_parts(state, _parts(state, src, element)):
                items.append([_copy(x, uncertain, _tested_unset(state)) for x in f])
        if append and var is not None:
            base = var.items if var.items is not None else ([var.value] if var.value else [])
            items = [*base, *items]  # element lists are never changed in place: share them
        state.vars[name] = _Var(items=items)
        return
    segs = _assigned(state, src, value, uncertain)
    if append and var is not None:
        if var.items is not None:
            state.vars[name] = _Var(items=[*var.items, segs])
            return
        segs = list(var.value or []) + segs
    state.vars[name] = _Var(value=segs)


def _assigned(state: _State, src: _Src, value: tree_sitter.Node | None, uncertain: str | None) -> list[_Seg]:
    """The segments an assignment's value stores: one field, where a quoted "${A[@]}" inside it joins its elements
    with a space, as "${A[*]}" does (an assignment splits no words, bash(1) Special Parameters); a user trial's
    `CMD="torchrun ${ARGS[@]} ..."` glued every argument into one word."""
    segs: list[_Seg] = []
    for k, f in enumerate(_expand_parts(state, _parts(state, src, value) if value is not None else [],
                                        as_field=True)):
        if k:
            segs.append(_Seg(" ", False, _org(state, src, value)))
        segs.extend(f)
    return [_copy(x, uncertain, _tested_unset(state)) for x in segs]


def _assign_element(state: _State, src: _Src, subscript: tree_sitter.Node, value: tree_sitter.Node | None,
                    append: bool, uncertain: str | None) -> None:
    """`A[3]=x`: the element of a known array at a literal index next to its end; otherwise the array becomes
    unknown."""
    name_node, index = subscript.child_by_field_name("name"), subscript.child_by_field_name("index")
    if name_node is None:
        return
    name = _text(name_node)
    var = state.vars.get(name)
    segs = _assigned(state, src, value, uncertain)
    k = int(_text(index)) if index is not None and _text(index).isdigit() else None
    items = var.items if var is not None and var.items is not None else (
        [var.value] if var is not None and var.value else ([] if var is None else [[]]))
    if k is not None and k <= len(items) and not (var is None and k):
        items = [list(x) for x in items]
        if k == len(items):
            items.append(segs)
        else:
            items[k] = (items[k] + segs) if append else segs
        state.vars[name] = _Var(items=items)
        return
    org = _org(state, src, subscript)
    state.vars[name] = _Var(value=[_Seg(f"${{{name}[@]}}", False, org, unresolved=f"{_text(subscript)} ({org})")])


def _arith_command(state: _State, src: _Src, node: tree_sitter.Node) -> None:
    """`(( N = N * 2 ))`, `(( i++ ))`: the variables it assigns become unknown (the reader does not run it)."""
    org = _org(state, src, node)
    for inner in _descendants(node):
        target = None
        if inner.type in ("binary_expression", "postfix_expression", "unary_expression"):
            ops = [c.type for c in inner.children if not c.is_named]
            if any(op in ("=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^=", "++", "--")
                   for op in ops):
                target = next((c for c in inner.named_children if c.type in ("variable_name", "word")), None)
        if target is not None:
            name = _text(target)
            state.vars[name] = _Var(value=[_Seg(f"${name}", False, org, unresolved=f"{_text(node)} ({org})")])


# ---------------------------------------------------------------------------------------------------
# Compound commands: if, for, while/until, case


def _if(state: _State, src: _Src, node: tree_sitter.Node) -> None:
    org = _org(state, src, node)
    cond, body = _clause(node)
    _open_if(state, "if", _condition_words(state, src, cond), org)
    try:
        _block(state, src, body)
        for clause in node.named_children:
            if clause.type == "elif_clause":
                cond, body = _clause(clause)
                _open_if(state, "elif", _condition_words(state, src, cond), _org(state, src, clause))
                _block(state, src, body)
            elif clause.type == "else_clause":
                _else(state, _org(state, src, clause))
                _block(state, src, clause.children)
    finally:
        state.frames.pop()


def _clause(node: tree_sitter.Node) -> tuple[list[tree_sitter.Node], list[tree_sitter.Node]]:
    """The condition (between `if`/`elif` and `then`) and the body (after `then`) of an if or elif clause."""
    cond: list[tree_sitter.Node] = []
    body: list[tree_sitter.Node] = []
    then = False
    for child in node.children:
        if child.type == "then":
            then = True
        elif child.type in ("elif_clause", "else_clause"):
            break
        elif child.is_named:
            (body if then else cond).append(child)
    return cond, body


def _condition_words(state: _State, src: _Src, nodes: list[tree_sitter.Node]) -> list[list[_Part]]:
    """A condition as the words bash's `test` reads: operators as plain words, operands as parts; a glob
    pattern (`[[ $X == fp8* ]]`) is a value the reader does not match, so it is unknown."""
    words: list[list[_Part]] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        if node.type == "comment" or node.type in (";", "&", "\n"):
            continue
        if node.type in ("extglob_pattern", "regex") and re.search(r"[*?\[(]", _text(node)):
            words.append([_Part("cmdsub", _text(node), False, _org(state, src, node))])
        elif node.type in _WORDS or not node.is_named or node.type == "variable_name":
            words.append(_parts(state, src, node))
        else:
            stack.extend(reversed(node.children))
    return words


def _for(state: _State, src: _Src, node: tree_sitter.Node) -> None:
    """`for x in a b c; do ...; done`: the body once per word when the words are known and no `break` or
    `continue` can cut a run short; otherwise once, as uncertain, with x unknown."""
    org = _org(state, src, node)
    var = node.child_by_field_name("variable")
    body = node.child_by_field_name("body")
    if var is None or body is None:
        return
    name = _text(var)
    values = node.children_by_field_name("value")
    call = state.calls[-1] if state.calls else None
    if any(c.type == "in" for c in node.children):
        fields = [f for v in values for f in _expand_parts(state, _parts(state, src, v))]
    else:  # `for x; do`: the arguments
        fields = [list(a) for a in call.args] if call else []
    jumps = any(n.type == "command_name" and _text(n) in ("break", "continue") and not _cuts_nothing(n, body)
                for n in _descendants(body))
    known = not jumps and state.loop_runs + len(fields) <= MAX_LOOP_RUNS and not any(
        x.unresolved or x.uncertain for f in fields for x in f)
    reason = _mode(state)[1]
    if known:
        state.loop_runs += len(fields)
        for f in fields:
            state.vars[name] = _Var(value=[_Seg(x.text, False, x.origin, None, reason) for x in f])
            _block(state, src, body.children)
        return
    state.vars[name] = _Var(value=[_Seg(f"${name}", False, org, unresolved=f"${name}, the loop variable of "
                                                                            f"{org.path}:{org.line}")])
    _unknown_body(state, src, body, org)


_LOOPS = frozenset({"for_statement", "c_style_for_statement", "while_statement"})
_CLAUSE_ENDS = frozenset({"elif_clause", "else_clause", "fi", "done", "esac", "}", ")", ";;", "comment", ";", "&",
                          "\n", "&&", "||"})
"""What may follow the last command run in a sequence without running after it: the other branches of an `if`,
the words that close a block, comments and separators."""


def _cuts_nothing(name: tree_sitter.Node, body: tree_sitter.Node) -> bool:
    """Whether the `continue` whose command name is `name` skips nothing of a run of the loop `body`: no command
    follows it in any sequence up to the body's end (`if [ $RC -ne 0 ]; then continue; fi` as the body's last
    statement, as Megatron-Bridge's examples/models/*/slurm_pretrain.sh write it), or it belongs to a loop inside
    the body.  A `break` always may cut the runs short.  A QA trial: such a script's launch, before that `if`, was
    refused as set inside a block whose condition cannot be evaluated."""
    if _text(name) != "continue" or name.parent is None:
        return False
    node = name.parent
    while node.parent is not None and node.parent != body:
        parent = node.parent
        if parent.type in _LOOPS:
            return True  # an inner loop's continue
        after = parent.children[[c.id for c in parent.children].index(node.id) + 1:]
        if any(c.type not in _CLAUSE_ENDS for c in after):
            return False
        node = parent
    if node.parent is None:
        return False
    after = body.children[[c.id for c in body.children].index(node.id) + 1:]
    return all(c.type in _CLAUSE_ENDS for c in after)


def _getopts_loop(state: _State, src: _Src, node: tree_sitter.Node) -> bool:
    """`while getopts OPTSTRING NAME; do ... done` over arguments the reader knows (the script's, which
    `--script-args` gives, or a function's): the body once per option, with NAME and OPTARG as bash's getopts sets
    them, and OPTIND after (bash(1), SHELL BUILTIN COMMANDS, getopts: options end at the first non-option or `--`;
    a letter followed by `:` takes the rest of its word or the next word as OPTARG; an unknown letter, or one
    missing its argument, sets NAME to `?`, or under a leading `:` to `?`/`:` with OPTARG the letter).  False where
    the loop is not such a one, or its words or arguments are not all known: read as any other loop."""
    conds = [c for c in node.children_by_field_name("condition") if c.type not in (";", "\n", "&")]
    body = node.child_by_field_name("body")
    if len(conds) != 1 or conds[0].type != "command" or body is None:
        return False
    words = [c for i, c in enumerate(conds[0].children) if conds[0].field_name_for_child(i) in ("name", "argument")]
    fields = [f for w in words for f in _expand_parts(state, _parts(state, src, w))]
    if len(fields) != 3 or any(x.unresolved or x.uncertain for f in fields for x in f):
        return False
    command, optstring, name = ("".join(x.text for x in f) for f in fields)
    args = state.calls[-1].args if state.calls else []
    if command != "getopts" or any(x.unresolved or x.uncertain for a in args for x in a):
        return False
    org = _org(state, src, node)
    silent = optstring.startswith(":")
    texts = ["".join(x.text for x in a) for a in args]
    runs: list[tuple[str, str | None]] = []
    # getopts goes on from OPTIND (1 at the start), which a loop before leaves where it stopped
    start = state.vars.get("OPTIND")
    index = "".join(x.text for x in start.value) if start is not None and start.value else "1"
    if not index.isdigit() or any(x.unresolved or x.uncertain for x in (start.value if start and start.value else [])):
        return False
    # an OPTIND past the last argument (a loop before it, then `shift`) stops at the end: OPTIND is then $# + 1, as
    # bash sets it (tests/test_shell_vs_bash.py runs these loops under bash)
    i = min(max(int(index) - 1, 0), len(texts))
    while i < len(texts) and texts[i].startswith("-") and texts[i] != "-":
        if texts[i] == "--":
            i += 1
            break
        letters, j = texts[i][1:], 0
        while j < len(letters):
            c, j = letters[j], j + 1
            k = optstring.find(c)
            if c == ":" or k < 0:
                runs.append(("?", c if silent else None))
            elif optstring[k + 1:k + 2] == ":":
                if j < len(letters):
                    runs.append((c, letters[j:]))
                elif i + 1 < len(texts):
                    i += 1
                    runs.append((c, texts[i]))
                else:
                    runs.append((":" if silent else "?", c if silent else None))
                break
            else:
                runs.append((c, None))
        i += 1
    if state.loop_runs + len(runs) > MAX_LOOP_RUNS:
        return False
    state.loop_runs += len(runs)
    reason = _mode(state)[1]
    for opt, optarg in runs:
        state.vars[name] = _Var(value=[_Seg(opt, False, org, None, reason)])
        if optarg is None:
            state.vars.pop("OPTARG", None)
        else:
            state.vars["OPTARG"] = _Var(value=[_Seg(optarg, False, org, None, reason)])
        _block(state, src, body.children)
    state.vars["OPTIND"] = _Var(value=[_Seg(str(i + 1), False, org, None, reason)])
    return True


def _unknown_loop(state: _State, src: _Src, node: tree_sitter.Node) -> None:
    """`while`, `until`, `for ((;;))`: the body read once, as uncertain; the loop's counters are unknown (but for
    a getopts loop over known arguments: `_getopts_loop`)."""
    if node.type == "while_statement" and _getopts_loop(state, src, node):
        return
    org = _org(state, src, node)
    for child in node.children:
        if child.type == "variable_assignment" and child.child_by_field_name("name") is not None:
            name = _text(child.child_by_field_name("name"))
            state.vars[name] = _Var(value=[_Seg(f"${name}", False, org, unresolved=f"${name}, the loop variable "
                                                                                   f"of {org.path}:{org.line}")])
    body = node.child_by_field_name("body")
    if body is not None:
        _unknown_body(state, src, body, org)


def _unknown_body(state: _State, src: _Src, body: tree_sitter.Node, org: Origin) -> None:
    state.frames.append(["uncertain", True, org])
    try:
        _block(state, src, body.children)
    finally:
        state.frames.pop()


def _case(state: _State, src: _Src, node: tree_sitter.Node) -> None:
    """`case WORD in PATTERN) ...;; esac`: the first branch whose pattern matches a known WORD; a branch whose
    pattern or WORD is unknown, and every one after it, is uncertain."""
    value = node.child_by_field_name("value")
    subject = None
    if value is not None:
        fields = _expand_parts(state, _parts(state, src, value), as_field=True)
        segs = fields[0] if fields else []
        if not any(x.unresolved or x.uncertain for x in segs):
            subject = "".join(x.text for x in segs)
    items = [c for c in node.named_children if c.type == "case_item"]
    fallthrough = any(c.type in (";&", ";;&") for item in items for c in item.children)
    unsure = subject is None or fallthrough
    for item in items:
        patterns = item.children_by_field_name("value")
        matched: bool | None = False
        for pattern in patterns:
            m = None if unsure else _case_match(state, src, pattern, subject or "")
            if m is None:
                matched = None
            elif m:
                matched = True
                break
        if matched is False:
            continue
        after = next((k for k, c in enumerate(item.children) if c.type == ")"), -1)
        body = [c for c in item.children[after + 1:] if c not in patterns]
        if matched and not unsure:
            _block(state, src, body)
            return
        state.frames.append(["uncertain", True, _org(state, src, item)])
        try:
            _block(state, src, body)
        finally:
            state.frames.pop()
        unsure = True


def _case_match(state: _State, src: _Src, pattern: tree_sitter.Node, subject: str) -> bool | None:
    """Whether a case pattern matches: unquoted text is a glob (*, ?, [...]), quoted text and the values of
    quoted expansions are literal; an unknown value or an extended glob is None."""
    regex = ""
    for part in _parts(state, src, pattern):
        if part.kind == "lit":
            text = part.text
            quoted = part.quoted
        else:
            fields = _expand_parts(state, [part], as_field=True)
            segs = fields[0] if fields else []
            if any(x.unresolved or x.uncertain for x in segs):
                return None
            text, quoted = "".join(x.text for x in segs), part.quoted
        if quoted:
            regex += re.escape(text)
            continue
        glob = _glob_regex(text)
        if glob is None:
            return None
        regex += glob
    return re.fullmatch(regex, subject, re.S) is not None


def _glob_regex(text: str) -> str | None:
    out = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c in "?*+@!" and i + 1 < len(text) and text[i + 1] == "(":
            return None  # extglob
        if c == "*":
            out += ".*"
        elif c == "?":
            out += "."
        elif c == "[":
            j = text.find("]", i + 2)
            if j < 0:
                out += re.escape(c)
            else:
                body = text[i + 1:j]
                if body.startswith("[:") or "[:" in body:
                    return None  # character classes: not followed
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                out += "[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]"
                i = j
        else:
            out += re.escape(c)
        i += 1
    return out


# ---------------------------------------------------------------------------------------------------
# Conditions: [[ A == B ]], [ A != B ], -z, -n, -eq..., !, joined by || and &&; anything else is unknown.


def _open_if(state: _State, kw: str, words: list[list[_Part]], org: Origin) -> None:
    cond = []
    for w in words:
        if _plain(w) == "then":
            break
        cond.append(w)
    outer = state.frames[:-1] if kw == "elif" else state.frames
    outer_off = any(frame[0] == "off" for frame in outer)
    if kw == "elif":
        if not state.frames:
            raise InputError(f"{org}: `elif` without `if`; expected a balanced if/elif/else/fi")
        frame = state.frames[-1]
        if frame[1] is True or outer_off:
            frame[0] = "off"
            return
        value, tested = (None, None) if frame[1] is None else _condition_read(state, cond)
        frame[0], frame[2] = _frame_mode(value), org
        frame[1] = True if value is True else (None if value is None else frame[1])
        _set_tested(frame, tested)
        return
    value, tested = (None, None) if outer_off else _condition_read(state, cond)
    state.frames.append([_frame_mode(value), True if value is True else (None if value is None else False), org])
    _set_tested(state.frames[-1], tested)


def _set_tested(frame: list, tested: str | None) -> None:
    """Keep on an if's frame the variable a test read unset (`_tested_unset`): the branch taken and the others
    alike depend on it; frames are [mode, taken, origin, (reason), (tested)]."""
    if tested:
        frame.extend([None] * (4 - len(frame)) if len(frame) < 4 else [])
        frame[4:] = [tested]


def _frame_mode(value: bool | None) -> str:
    return {True: "on", False: "off", None: "uncertain"}[value]


def _else(state: _State, org: Origin) -> None:
    if not state.frames:
        raise InputError(f"{org}: `else` without `if`; expected a balanced if/elif/else/fi")
    frame = state.frames[-1]
    if frame[1] is True:
        frame[0] = "off"
    elif frame[1] is None:
        frame[0], frame[2] = "uncertain", org
    else:
        frame[0] = "on"


def _unset_text(state: _State, parts: list[_Part]) -> tuple[str, list[str]] | None:
    """The text of a word whose only unknowns are plain `$V` / `${V}` of variables the files never set (not SLURM's),
    read as bash reads them in a clean environment (empty), and those names; None for any other unknown."""
    out, names = [], []
    for p in parts:
        if p.kind == "lit":
            out.append(p.text)
        elif (p.kind == "param" and p.arg == "\0" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p.text)
              and p.text not in state.vars and not p.text.startswith(SLURM_PREFIX)):
            names.append(p.text)
        else:
            fields = _expand_parts(state, [p], as_field=True)
            f = fields[0] if fields else []
            if any(x.unresolved for x in f):
                return None
            out.append("".join(x.text for x in f))
    return "".join(out), names


def _condition_read(state: _State, words: list[list[_Part]]) -> tuple[bool | None, str | None]:
    """(value, the variable read unset) of a test: `[ -z $V ]` / `[ -n "$V" ]` of a variable the files never set
    reads it empty, as bash does in a clean environment, and names it (TESTED_UNSET) so that what the branch sets
    says the job's environment may set it (as `${V:-x}` does); other unknowns leave the value None."""
    texts: list[str | None] = []
    unset: dict[int, tuple[str, list[str]]] = {}
    for w in words:
        plain = _plain(w)
        if plain in ("||", "&&", "[[", "]]", "[", "]", "!", "test"):
            texts.append(plain)
            continue
        fields = _expand_parts(state, w, as_field=True)
        f = fields[0] if fields else []
        known = not any(x.unresolved for x in f)
        texts.append("".join(x.text for x in f) if known else None)
        read = None if known else _unset_text(state, w)
        if read is not None and read[1]:
            unset[len(texts) - 1] = read
    tested: list[str] = []
    result: bool | None = None
    op = None
    group: list[str | None] = []
    at: list[int] = []
    for k, t in enumerate([*texts, "||"]):
        if t in ("||", "&&"):
            test = [j for j, x in zip(at, group, strict=True) if x not in ("[[", "]]", "[", "]", "test", "!")]
            if len(test) == 2 and texts[test[0]] in ("-z", "-n") and test[1] in unset:
                group[at.index(test[1])] = unset[test[1]][0]
                tested += unset[test[1]][1]
            value = _test(group)
            if op is None:
                result = value
            elif op == "||":
                result = True if (result is True or value is True) else (
                    None if (result is None or value is None) else False)
            else:
                result = False if (result is False or value is False) else (
                    None if (result is None or value is None) else True)
            op, group, at = t, [], []
        else:
            group.append(t)
            at.append(k)
    return result, (TESTED_UNSET + tested[0] if tested and result is not None else None)


def _test(group: list[str | None]) -> bool | None:
    g = [t for t in group if t not in ("[[", "]]", "[", "]", "test")]
    negate = False
    while g and g[0] == "!":
        negate, g = not negate, g[1:]
    value: bool | None = None
    if len(g) == 3 and g[1] in ("==", "=", "!="):
        if g[0] is not None and g[2] is not None:
            value = (g[0] == g[2]) != (g[1] == "!=")
    elif len(g) == 3 and g[1] in ("-eq", "-ne", "-gt", "-lt", "-ge", "-le"):
        try:
            a, b = int(g[0]), int(g[2])  # type: ignore[arg-type]
            value = {"-eq": a == b, "-ne": a != b, "-gt": a > b, "-lt": a < b, "-ge": a >= b, "-le": a <= b}[g[1]]
        except (TypeError, ValueError):
            value = None
    elif len(g) == 2 and g[0] in ("-z", "-n") and g[1] is not None:
        value = (g[1] == "") == (g[0] == "-z")
    if value is None:
        return None
    return value != negate
