"""Regenerate placement/audit/readers/megatron_flags.py: the command-line flags Megatron-LM's entry scripts take, in
every version.

Megatron-LM parses its arguments with argparse (megatron/training/arguments.py parse_args, formerly
megatron/arguments.py): a flag no `add_argument` defines stops the job ("unrecognized arguments") unless the entry
script adds it through `extra_args_provider`.  This script reads the history of every .py file of the given
repositories (Megatron-LM, and the Megatron-DeepSpeed forks whose launches the audit reads, which add DeepSpeed's
own `--deepspeed*` flags from deepspeed/__init__.py) for the flags their `add_argument` calls add, and writes the
union: a flag any version took is known.  Only flag names and commit ids are kept (facts, no code).

    python benchmarks/megatron_known_flags.py MEGATRON_LM_GIT_DIR [MEGATRON_DEEPSPEED_GIT_DIR ...] \
        --deepspeed DEEPSPEED_GIT_DIR
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "placement" / "audit" / "readers" / "megatron_flags.py"
FLAG = re.compile(r"""(?<![\w-])['"](--[A-Za-z][\w.-]*)['"]""")
CALL_LINES = 12
"""Added lines an `add_argument(` call is read over at most (its parentheses unbalanced by a string, say)."""


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], capture_output=True, text=True, check=True).stdout


def flags_added(repo: str, paths: tuple[str, ...] = ("*.py",)) -> tuple[set[str], int, str]:
    """(every flag an `add_argument` call adds in any commit of `repo`'s history, commits read, the HEAD read): the
    call's added lines from `add_argument(` until its parentheses close (at most CALL_LINES), its flag strings, and
    under `argparse.BooleanOptionalAction` each one's `--no-` form, which argparse adds."""
    out: set[str] = set()
    commits = 0
    call: list[str] = []
    depth = 0

    def close() -> None:
        text = " ".join(call)
        flags = FLAG.findall(text)
        out.update(flags)
        if "BooleanOptionalAction" in text:
            out.update("--no-" + f[2:] for f in flags if f.startswith("--"))
        call.clear()

    diff = git(repo, "log", "-p", "-G", "add_argument", "--format=@@@ %h", "--", *paths)
    for line in diff.splitlines():
        if line.startswith("@@@ "):
            commits += 1
        added = line.startswith("+") and not line.startswith("+++")
        if call and (not added or depth <= 0 or len(call) >= CALL_LINES):
            close()
        if not added:
            continue
        if call:
            call.append(line)
            depth += line.count("(") - line.count(")")
        elif "add_argument(" in line:
            call.append(line[line.index("add_argument("):])
            depth = call[0].count("(") - call[0].count(")")
    if call:
        close()
    return out, commits, git(repo, "rev-parse", "--short=8", "HEAD").strip()


GENERATED_SINCE = "72230d25ca"
"""The Megatron-LM commit (2025-12-10) that added megatron/training/argument_utils.py: since then arguments.py also
builds flags from config dataclasses (ArgumentGroupFactory: each field `f` becomes `--f` with `_` as `-`, a bool that
defaults True `--no-f` and `--disable-f`, or the names of its `argparse_meta` arg_names)."""
CONFIG_FILES = ("megatron/training/config/", "megatron/core/transformer/transformer_config.py",
                "megatron/core/model_parallel_config.py", "megatron/core/fault_injector.py")
"""Where the dataclasses ArgumentGroupFactory reads live (TransformerConfig and its ModelParallelConfig base,
TrainingConfig, LoggerConfig, CheckpointConfig, ... and FaultInjectorConfig)."""


def dataclass_fields(source: str) -> set[str]:
    """The annotated field names of the @dataclass classes in `source` (none where it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
                (isinstance(d, ast.Name) and d.id == "dataclass")
                or (isinstance(d, ast.Call) and getattr(d.func, "id", None) == "dataclass")
                or (isinstance(d, ast.Attribute) and d.attr == "dataclass")
                for d in node.decorator_list):
            out |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return out


def generated_flags(repo: str) -> tuple[set[str], int]:
    """The flags ArgumentGroupFactory builds at every commit since GENERATED_SINCE that touched its dataclasses (each
    field under all three spellings, and every `--` string of those files: arg_names metadata), and the commits read."""
    commits = git(repo, "log", "--format=%H", f"{GENERATED_SINCE}^..HEAD", "--", "megatron/training/argument_utils.py",
                  *CONFIG_FILES).split()
    out: set[str] = set()
    for commit in commits:
        for path in git(repo, "ls-tree", "-r", "--name-only", commit, "--", *CONFIG_FILES).split():
            if not path.endswith(".py"):
                continue
            source = git(repo, "show", f"{commit}:{path}")
            out |= set(FLAG.findall(source))
            for name in dataclass_fields(source):
                dashed = name.replace("_", "-")
                out |= {f"--{dashed}", f"--no-{dashed}", f"--disable-{dashed}"}
    return out, len(commits)


def main(argv: list[str], out: Path = OUT) -> None:
    deepspeed = None
    if "--deepspeed" in argv:
        i = argv.index("--deepspeed")
        deepspeed = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    known: set[str] = set()
    read = []
    for repo in argv:
        flags, commits, head = flags_added(repo)
        known |= flags
        name = Path(repo).resolve().parent.name.replace("+", "/") if Path(repo).name == "repo" else repo
        read.append(f"{name} ({commits} commits that add or change an add_argument call, up to {head})")
        if subprocess.run(["git", "--git-dir", repo, "cat-file", "-e", f"{GENERATED_SINCE}^{{commit}}"],
                          capture_output=True).returncode == 0:
            flags, commits = generated_flags(repo)
            known |= flags
            read.append(f"{name}'s config dataclasses, from which arguments.py builds flags since {GENERATED_SINCE} "
                        f"({commits} commits)")
    if deepspeed is not None:
        flags, commits, head = flags_added(deepspeed, ("deepspeed/__init__.py",))
        known |= flags
        name = Path(deepspeed).resolve().parent.name.replace("+", "/")
        read.append(f"{name} deepspeed/__init__.py ({commits} commits, up to {head}: add_config_arguments)")
    about = textwrap.fill("Read from the history of " + "; ".join(read) + ".", width=116)
    rows = "\n".join(f'    "{f}",' for f in sorted(known))
    out.write_text(
        '"""Megatron-LM\'s command-line flags: every flag an `add_argument` call added in any version (generated by\n'
        "benchmarks/megatron_known_flags.py; do not edit by hand).\n\n"
        f"{about}\n"
        "Megatron-LM's parser refuses a flag no version defines (argparse: 'unrecognized arguments') unless the entry\n"
        'script adds it through extra_args_provider.\n"""\n\n'
        "from __future__ import annotations\n\n"
        f"FLAGS: frozenset[str] = frozenset({{\n{rows}\n}})\n")
    print(f"{out}: {len(known)} flags")


if __name__ == "__main__":
    main(sys.argv[1:])
