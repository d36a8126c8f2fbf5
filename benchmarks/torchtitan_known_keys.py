"""Regenerate placement/audit/readers/torchtitan_keys.py: the config keys torchtitan takes, as `section.key`.

torchtitan 0.2.x reads its TOML into the JobConfig dataclass (config/job_config.py) and refuses a key that is no
field of it (config/manager.py ConfigManager._dict_to_dataclass: "Invalid field names"); its command line is tyro's
over the same dataclass, which refuses unknown flags.  torchtitan 0.3.0 has no TOML: `--module M --config F` names a
config function returning a Trainer.Config (trainer.py), whose fields are the dataclasses of config/configs.py and
the `Config` dataclasses of swappable components (BaseDataLoader.Config, ...), and tyro parses `--section.key` flags
over it.  This script reads, with `ast` (nothing is imported or run), the fields of JobConfig at the 0.2.x tags of a
torchtitan clone, and the fields of Trainer.Config in an unpacked 0.3.0 wheel, each section expanded to the fields of
its dataclass and of every dataclass that subclasses it anywhere in the package (a config function may put any of
them there: HuggingFaceTextDataLoader.Config for dataloader, ...), nested dataclasses as dotted sections.  Fields
hidden from tyro (Annotated[..., tyro.conf.Suppress], init=False, ClassVar) are left out.  It also reads JobConfig at
every commit of the main line that touched its file (HISTORY) and writes each key's first and last such commit
(SPANS), which date a TOML file or 0.2.x command line by its keys.  Only names are kept (facts, no code).

    python benchmarks/torchtitan_known_keys.py GIT_DIR_OF_A_TORCHTITAN_CLONE UNPACKED_0.3.0_WHEEL_DIR [WHEEL_FILE]
"""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "placement" / "audit" / "readers" / "torchtitan_keys.py"
TAGS = ("v0.1.0", "v0.2.0", "v0.2.1", "v0.2.2")
JOB_CONFIGS = ("torchtitan/config_manager.py", "torchtitan/config/job_config.py")
"""JobConfig's file: config_manager.py up to 34d815c0 (2025-07-22), then config/job_config.py until 0.3.0 removed it
(9810191b, 2026-02-23)."""
MAX_DEPTH = 8
"""Deepest section nesting followed (0.2.x: quantize.linear.float8.x; cycles are cut where a class recurs)."""


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], capture_output=True, text=True, check=True).stdout


class Klass:
    """A class read: whether it is a @dataclass, its bases as written, and (name, annotation) of the fields tyro
    shows, in order."""

    def __init__(self, dataclass: bool, bases: list[str]):
        self.dataclass, self.bases = dataclass, bases
        self.fields: list[tuple[str, ast.expr | None]] = []


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def is_dataclass(node: ast.ClassDef) -> bool:
    return any(dotted(d.func if isinstance(d, ast.Call) else d) in ("dataclass", "dataclasses.dataclass")
               for d in node.decorator_list)


def hidden(annotation: ast.expr, value: ast.expr | None) -> bool:
    """A field tyro does not show: ClassVar, Annotated with tyro.conf.Suppress, or field(init=False)."""
    text = ast.unparse(annotation)
    if "ClassVar" in text or "Suppress" in text:
        return True
    return (isinstance(value, ast.Call) and dotted(value.func) in ("field", "dataclasses.field")
            and any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in value.keywords))


def read_classes(sources: dict[str, str], classes: dict[str, list[Klass]], aliases: dict[str, list[ast.expr]]) -> None:
    """Every class of `sources` under its qualified name in its module (Outer.Config), and module-level type
    aliases (Name = expr)."""
    for path, text in sources.items():
        tree = ast.parse(text, path)

        def visit(body: list[ast.stmt], prefix: str) -> None:
            for node in body:
                if isinstance(node, ast.ClassDef):
                    k = Klass(is_dataclass(node), [b for b in map(dotted, node.bases) if b])
                    for s in node.body:
                        if (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                                and not hidden(s.annotation, s.value)):
                            k.fields.append((s.target.id, s.annotation))
                    classes.setdefault(prefix + node.name, []).append(k)
                    visit(node.body, f"{prefix}{node.name}.")

        visit(tree.body, "")
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                aliases.setdefault(node.targets[0].id, []).append(node.value)


class Keys:
    """The dotted keys under a root dataclass, over the classes read."""

    def __init__(self, classes: dict[str, list[Klass]], aliases: dict[str, list[ast.expr]]):
        self.classes, self.aliases = classes, aliases
        self.children: dict[str, set[str]] = {}
        for name, ks in classes.items():
            for k in ks:
                for b in k.bases:
                    base = self.resolve(b)
                    if base:
                        self.children.setdefault(base, set()).add(name)

    def resolve(self, name: str) -> str | None:
        """A class name as written (module.Outer.Config) -> the qualified name read, dropping leading parts."""
        parts = name.split(".")
        for i in range(len(parts)):
            if ".".join(parts[i:]) in self.classes:
                return ".".join(parts[i:])
        return None

    def subclasses(self, name: str) -> list[str]:
        out, todo = [], [name]
        while todo:
            n = todo.pop()
            if n not in out:
                out.append(n)
                todo += sorted(self.children.get(n, ()))
        return out

    def types(self, node: ast.expr, seen: frozenset = frozenset()) -> list[str]:
        """The dataclasses an annotation names (X, X | None, Optional[X], Union[...], Annotated[X, ...], aliases);
        [] for anything else (int, list[...], dict[...])."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.types(node.left, seen) + self.types(node.right, seen)
        if isinstance(node, ast.Subscript):
            head = (dotted(node.value) or "").rsplit(".", 1)[-1]
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Annotated":
                return self.types(args[0], seen)
            if head in ("Union", "Optional"):
                return [t for a in args for t in self.types(a, seen)]
            return []
        name = dotted(node)
        if name is None:
            return []
        resolved = self.resolve(name)
        if resolved is not None:
            return [resolved] if any(k.dataclass for k in self.classes[resolved]) else []
        short = name.rsplit(".", 1)[-1]
        if short in self.aliases and short not in seen:
            return [t for v in self.aliases[short] for t in self.types(v, seen | {short})]
        return []

    def fields(self, name: str, seen: frozenset = frozenset()) -> list[tuple[str, ast.expr | None]]:
        """A class's fields with those it inherits."""
        out = []
        for k in self.classes.get(name, []):
            for b in k.bases:
                base = self.resolve(b)
                if base and base not in seen:
                    out += self.fields(base, seen | {name})
            out += k.fields
        return out

    def keys(self, roots: list[str], prefix: str = "", path: tuple[str, ...] = ()) -> set[str]:
        out: set[str] = set()
        for root in roots:
            for cls in self.subclasses(root):
                if cls in path or len(path) >= MAX_DEPTH:
                    continue
                for name, annotation in self.fields(cls):
                    inner = self.types(annotation) if annotation is not None else []
                    if inner:
                        out |= self.keys(inner, f"{prefix}{name}.", (*path, cls))
                    else:
                        out.add(prefix + name)
        return out


def keys_of(sources: dict[str, str], root: str) -> set[str]:
    """The dotted keys under class `root`, and those of `add_argument("--section.key")` calls (the argparse
    JobConfig of config_manager.py before its dataclasses, 2024)."""
    classes: dict[str, list[Klass]] = {}
    aliases: dict[str, list[ast.expr]] = {}
    read_classes(sources, classes, aliases)
    out = Keys(classes, aliases).keys([root]) if root in classes else set()
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text, path)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).startswith("--") and "." in str(node.args[0].value)):
                out.add(str(node.args[0].value)[2:].replace("-", "_"))
    return out


def history(repo: str) -> tuple[list[tuple[str, str]], dict[str, tuple[str, str]], list[str]]:
    """(every commit that touched JobConfig's file, oldest first, with its date; key -> (first commit, last commit)
    whose JobConfig has it; the file versions that did not parse)."""
    log = [line.split() for line in git(repo, "log", "--format=%H %cs", "--", *JOB_CONFIGS).splitlines() if line]
    log.reverse()
    span: dict[str, tuple[str, str]] = {}
    unparsed = []
    for commit, _ in log:
        files = set(git(repo, "ls-tree", "-r", "--name-only", commit, "--", *JOB_CONFIGS).split())
        path = JOB_CONFIGS[1] if JOB_CONFIGS[1] in files else JOB_CONFIGS[0] if JOB_CONFIGS[0] in files else None
        if path is None:
            continue
        try:
            found = keys_of({path: git(repo, "show", f"{commit}:{path}")}, "JobConfig")
        except SyntaxError:
            unparsed.append(f"{commit[:8]}:{path}")
            continue
        for k in found:
            span[k] = (span.get(k, (commit[:8],))[0], commit[:8])
    return [(c[:8], d) for c, d in log], span, unparsed


def main(repo: str, wheel_dir: str, wheel: str | None = None, out: Path = OUT) -> None:
    versions: dict[str, set[str]] = {}
    tag_commits = {}
    for tag in TAGS:
        tag_commits[tag] = git(repo, "rev-list", "-n", "1", tag).strip()[:8]
        files = git(repo, "ls-tree", "-r", "--name-only", tag, "--", *JOB_CONFIGS).split()
        path = JOB_CONFIGS[1] if JOB_CONFIGS[1] in files else JOB_CONFIGS[0]
        versions[tag.lstrip("v")] = keys_of({path: git(repo, "show", f"{tag}:{path}")}, "JobConfig")
    package = Path(wheel_dir) / "torchtitan"
    sources = {str(p.relative_to(wheel_dir)): p.read_text() for p in sorted(package.rglob("*.py"))}
    versions["0.3.0"] = keys_of(sources, "Trainer.Config")
    log, span, unparsed = history(repo)
    every = sorted(set().union(*versions.values(), span))
    names = list(versions)

    def row(k: str) -> str:
        have = [v for v in names if k in versions[v]] or [f"{span[k][0]}..{span[k][1]}"]
        return f'    "{k}": {tuple(have)!r},'

    rows = [row(k) for k in every]
    commits = [f'    ("{c}", "{d}"),' for c, d in log]
    spans = [f'    "{k}": ("{span[k][0]}", "{span[k][1]}"),' for k in sorted(span)]
    digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest() if wheel else None
    about = textwrap.fill(
        f"Up to 0.2.x: the fields of JobConfig and its nested dataclasses ({' and '.join(JOB_CONFIGS)}) at the tags "
        f"{', '.join(f'{t} ({c})' for t, c in tag_commits.items())} of pytorch/torchtitan, and at each of the "
        f"{len(log)} commits of its main line that touched those files, from {log[0][0]} ({log[0][1]}) to "
        f"{log[-1][0]} ({log[-1][1]}), for the TOML files of main between releases (with the argparse "
        f"`add_argument(\"--section.key\")` keys of config_manager.py before its dataclasses; {len(unparsed)} file "
        f"versions did not parse{': ' + ', '.join(unparsed) if unparsed else ''}).  torchtitan refuses any other "
        f"TOML key since eadca483 (2025-08-28, before 0.2.0; config/manager.py ConfigManager._dict_to_dataclass: "
        f"\"Invalid field names\"; before, it dropped it) unless job.custom_config_module extends JobConfig, and "
        f"its tyro command line any other flag.  0.3.0: the fields "
        f"of trainer.py Trainer.Config (and of its subclasses), each section expanded to the fields of its "
        f"dataclass and of every dataclass subclassing it in the package (config/configs.py TrainingConfig, "
        f"ParallelismConfig..., components' Configurable Config classes), read from the torchtitan 0.3.0 wheel"
        f"{f' (torchtitan-0.3.0-py3-none-any.whl, sha256 {digest})' if digest else ''}; its tyro command line "
        f"refuses any other flag.  Fields tyro hides (tyro.conf.Suppress, init=False, ClassVar) are left out.  "
        f"tyro reads a flag's `-` as `_`; a TOML key is read as written.",
        width=116, break_on_hyphens=False, break_long_words=False)
    text = f'''"""torchtitan's config keys, as `section.key` (nested sections dotted): every field its JobConfig (up to
0.2.x) and Trainer.Config (0.3.0) dataclasses show (generated by benchmarks/torchtitan_known_keys.py; do not edit by
hand).

{about}
"""

from __future__ import annotations

VERSIONS = {tuple(names)!r}
"""The torchtitan versions read."""

KEYS: dict[str, tuple[str, ...]] = {{
{chr(10).join(rows)}
}}
"""Dotted key (with _) -> the releases read that take it, or for a key of main between releases only, the first and
the last commit whose JobConfig has it ("first..last")."""

HISTORY: tuple[tuple[str, str], ...] = (
{chr(10).join(commits)}
)
"""The commits of torchtitan's main line that touched JobConfig's file, oldest first, with their dates: the JobConfig
versions a TOML file or 0.2.x command line can be written for (SPANS names them)."""

SPANS: dict[str, tuple[str, str]] = {{
{chr(10).join(spans)}
}}
"""Dotted key (with _) -> the first and the last commit of HISTORY whose JobConfig has it (a key removed and added
again spans the gap): what a key stated in a TOML file or a 0.2.x flag says of the torchtitan that runs it."""
'''
    out.write_text(text)
    print(f"wrote {out}: {len(every)} keys ({', '.join(f'{v}: {len(versions[v])}' for v in names)})",
          file=sys.stderr)


if __name__ == "__main__":
    main(*(sys.argv[1:] or ["/work/.mirror/pytorch+torchtitan/repo", "/tmp/tt/x",
                            "/tmp/tt/torchtitan-0.3.0-py3-none-any.whl"]))
