"""Reading a user's file: one place that turns every read failure into an InputError."""

from __future__ import annotations

import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from placement.errors import InputError

MAX_INPUT_BYTES = 64 * 2**20
"""Most bytes placement reads from one input file (64 MiB: a 100,000-host topology.conf is a few MiB); past it
the read stops and names the limit, so /dev/zero or a wrong huge file is an error, not a memory exhaustion."""


PIPE_WAIT_S = 10.0
"""Longest wait for a named pipe's writer to send more (process substitution `<(cmd)` sends at once); a FIFO
nobody writes to is an error after it, not a wait forever."""
_PIPES: dict[str, bytes] = {}
"""What each pipe sent: a pipe reads once, and a reader may look at a file twice (to detect, then to read)."""


def read_bytes(path: Path, what: str, expected: str) -> bytes:
    """The bytes of `path`, at most MAX_INPUT_BYTES: past them an InputError names the limit (an OSError of the
    read itself is left to the caller, which words it)."""
    if stat.S_ISFIFO(os.stat(path).st_mode):
        data = _PIPES.get(str(path))
        if data is None:
            data = _PIPES[str(path)] = _read_pipe(path, what)
    else:
        with open(path, "rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"{what} `{path}` is larger than the {MAX_INPUT_BYTES // 2**20} MiB placement reads from "
                         f"one file; {expected}.")
    return data


def _read_pipe(path: Path, what: str) -> bytes:
    """A named pipe, opened without blocking (a FIFO without a writer would block `open` forever) and read until
    its writer closes it, MAX_INPUT_BYTES + 1 bytes, or PIPE_WAIT_S without data."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= MAX_INPUT_BYTES:
            ready, _, _ = select.select([fd], [], [], PIPE_WAIT_S)
            if not ready:
                raise InputError(f"{what} `{path}` is a pipe that sent nothing for {PIPE_WAIT_S:g} s; give a file, "
                                 f"or a pipe whose writer finishes")
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: Path, what: str, expected: str) -> str:
    """The UTF-8 text of `path`, at most MAX_INPUT_BYTES; a failure names the file, the reason and what was
    `expected`."""
    try:
        data = read_bytes(path, what, expected)
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it
    except UnicodeDecodeError as err:
        # the line, not a byte offset (a user trial's script had one Latin-1 byte in a comment)
        line = err.object[:err.start].count(b"\n") + 1
        raise InputError(f"{what} `{path}`:{line}: byte 0x{err.object[err.start]:02x} is not UTF-8, which placement "
                         f"reads files as; re-save the file as UTF-8 (iconv -f latin1 -t utf-8, say); "
                         f"{expected}.") from None
    except OSError as err:
        raise InputError(f"{what} `{path}` cannot be read ({err}); {expected}.") from err


def json_limit_problem(err: ValueError | RecursionError) -> str:
    """Why Python's json reader stopped on text that is not a syntax error: nesting past the recursion limit,
    or an integer past `sys.get_int_max_str_digits()` digits (CPython >= 3.11 refuses to convert it)."""
    if isinstance(err, RecursionError):
        return (
            "the JSON nests arrays or objects deeper than the reader can follow (Python's recursion limit, "
            f"{sys.getrecursionlimit()}): look for unclosed or repeated brackets"
        )
    if "digits" in str(err):
        return (
            f"a JSON integer has more than {sys.get_int_max_str_digits()} digits, more than Python converts: "
            "no setting needs that many, fix the number"
        )
    return f"the JSON cannot be read ({err})"


class DuplicateKey(ValueError):
    """A mapping states one key twice (`key`, and where each is, as text)."""


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise DuplicateKey(f"key {key!r} appears twice in one object")
        seen.add(key)
    return dict(pairs)


def parse_json(text: str, path: Path, expected: str, syntax_error: Callable[[json.JSONDecodeError], str],
               unique_keys: str | None = None) -> Any:
    """`json.loads`, every failure an InputError: a syntax error worded by the caller (it names the line),
    nesting or numbers past Python's limits as "{path}: {why}; {expected}".  `unique_keys`: why a key stated twice
    is an error (its reader refuses it; None: the last one wins, as `json.load` reads it)."""
    try:
        return json.loads(text, object_pairs_hook=unique_pairs if unique_keys else None)
    except DuplicateKey as err:
        raise InputError(f"{path}: {err}: {unique_keys}; keep one") from None
    except json.JSONDecodeError as err:
        raise InputError(syntax_error(err)) from None
    except (ValueError, RecursionError) as err:
        raise InputError(f"{path}: {json_limit_problem(err)}; {expected}") from None


class PlacementLoader(yaml.SafeLoader):
    """yaml.SafeLoader without YAML 1.1's base-60 numbers: `1:1` is the text it looks like, not 61 (a user trial's
    `oversubscription: 1:1` was priced as a 61:1 network, with no error); YAML 1.2 has no sexagesimal form."""


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
PlacementLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NUMBER_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
PlacementLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"""^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"""),
    list("-+0123456789"))
PlacementLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"""
               r"""|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"""),
    list("-+0123456789."))


def load_scalar(text: str):
    """One YAML scalar as placement's own files read it (PlacementLoader: no base-60 numbers)."""
    return yaml.load(text, Loader=PlacementLoader)


class _UniqueKeyLoader(PlacementLoader):
    """yaml.SafeLoader that refuses a mapping stating one key twice (PyYAML keeps the last, silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            lines: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in lines:  # by key, not by line: a flow mapping `{a: 1, a: 2}` states both on one
                        raise DuplicateKey(f"line {line}: key {key!r} is stated again (first at line {lines[key]})")
                    lines[key] = line
                except TypeError:  # an unhashable key: yaml refuses it below
                    continue
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, path: Path, what: str, unique_keys: bool = True, loader: Any = None) -> Any:
    """`yaml.safe_load`, every failure an InputError naming the line and column, or the nesting limit.  A key
    stated twice in one mapping is an error naming both lines (`unique_keys`; False for a framework's own file,
    whose loader keeps the last, as PyYAML does).  `loader`: the framework's own loader class, where it reads
    scalars otherwise (MaxText's OmegaConf), used as it is."""
    try:
        if loader is not None:
            return yaml.load(text, Loader=loader)
        return yaml.load(text, Loader=_UniqueKeyLoader) if unique_keys else yaml.safe_load(text)
    except DuplicateKey as err:
        raise InputError(f"{path}: {err}: a {what} states each field once; keep the one you mean") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f": line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{path}{where}: malformed YAML: {problem}; fix the syntax there") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise InputError(
            f"{path}: the YAML nests collections deeper than the reader can follow (Python's recursion limit, "
            f"{sys.getrecursionlimit()}); a {what} is a mapping of fields a few levels deep: look for "
            "unclosed or repeated brackets"
        ) from None


LAUNCHER_PREFIXES = (re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:"),  # mpirun --tag-output: [job,rank]<stdout>:
                     re.compile(r"^\[(?:default|rank)\d+\]:"),  # torchrun --tee / --log-line-prefix: [default0]:
                     re.compile(r"^\[[\w.\-]+:\d+\]\s?"),  # [host:rank] (mpirun --output-filename style, pdsh-like)
                     re.compile(r"^\s*\d+:\s"),  # srun --label: `0: `
                     re.compile(r"^\[\d+\]\s"))  # MPICH/Hydra mpiexec -prepend-rank: `[0] ` (NVIDIA/nccl#1453)
"""Prefixes a launcher writes before each line of a rank's output (nccl-tests outputs and training logs alike)."""


def yaml_kind(data: Any) -> str:
    """What a parsed YAML document is, in words, for an error that expected a mapping: an empty file is `nothing`,
    not `NoneType` (a user trial)."""
    if data is None:
        return "nothing (the file is empty or only comments)"
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(data), f"a {type(data).__name__}")


def unprefixed(line: str) -> str:
    """`line` without the launcher prefix it starts with (LAUNCHER_PREFIXES), if any."""
    for pattern in LAUNCHER_PREFIXES:
        m = pattern.match(line)
        if m:
            return line[m.end():]
    return line
