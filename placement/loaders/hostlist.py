"""Expand SLURM hostlist expressions (``gpu[001-004,010],login1``) into host names, in written order.

The syntax is SLURM's (``scontrol show hostnames``): top-level commas separate components; in a
component, each ``[...]`` holds comma-separated numbers or ``lo-hi`` ranges; several brackets in one
component expand as a cartesian product, the first bracket outermost (``a[1-2]b[3-4]`` is a1b3, a1b4,
a2b3, a2b4); zero padding is kept (``n[08-10]`` is n08, n09, n10), its width the low end's, as SLURM's (``n[09-100]`` is
n09 .. n99, n100).

Order matters here: the host order of an allocation decides which node gets which ranks, so the
expansion keeps the order the user wrote.  ClusterShell's ``NodeSet`` sorts a whole set
(``NodeSet("n[3,1-2]")`` iterates n1, n2, n3; ``NodeSet("b,a")`` iterates a, b), and it reads digits
written just before a bracket as part of the range (``NodeSet("n1[0-10]")`` is n10..n110, where SLURM
gives n10..n19, n110), so we do not hand it the expression.  We split the expression at its top-level
commas ourselves, split each bracket at its commas, and expand each single number or ``lo-hi`` range with
ClusterShell's ``RangeSet`` (which checks the numbers and the zero padding: ``001-3`` is a padding
mismatch).  One range expands in ascending order either way, so concatenating the pieces gives the
written order: ``n[3,1-2]`` is n3, n1, n2.

Stricter than ClusterShell, as SLURM is: no ``lo-hi/step`` ranges, no negative numbers, no whitespace
inside an expression, no empty components (``a,,b``), no two brackets without text between them
(``n[1-2][3]``, which ClusterShell rejects too), and a host named twice is an error rather than silently
dropped.  Every failure is an InputError naming the source, the expression and what was expected.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Final

from ClusterShell.RangeSet import RangeSet, RangeSetException

from placement.errors import InputError
from placement.loaders.files import read_text

MAX_HOSTS: Final = 1 << 20
"""Largest expansion we accept (1,048,576 hosts, far above any real cluster); guards against
``n[0-99999999999]`` exhausting memory."""

_RANGE_PIECE = re.compile(r"([0-9]+)(?:-([0-9]+))?")
"""One comma-separated piece inside brackets: a number or ``lo-hi``, in ASCII digits (``\\d`` also takes other
scripts' digits, which SLURM does not)."""

MAX_DIGITS: Final = 64
"""Longest number inside brackets; Python refuses to convert more than 4,300 digits, and no host needs 65."""

_EXPECTED = (
    "expected comma-separated host names, each optionally with [...] brackets of comma-separated "
    "numbers or lo-hi ranges, e.g. gpu[001-004,010],login1"
)


def expand_hostlist(expr: str, *, source: str = "hostlist") -> list[str]:
    """Host names of a SLURM hostlist expression, in the order written.

    >>> expand_hostlist("gpu[001-003,010],login1")
    ['gpu001', 'gpu002', 'gpu003', 'gpu010', 'login1']
    >>> expand_hostlist("n[3,1-2]")
    ['n3', 'n1', 'n2']
    >>> expand_hostlist("a[1-2]b[3-4]")
    ['a1b3', 'a1b4', 'a2b3', 'a2b4']
    """
    text = expr.strip()
    if not text:
        raise InputError(f"{source}: the hostlist expression is empty; {_EXPECTED}.")
    hosts: list[str] = []
    first_component: dict[str, str] = {}
    for component in _split_top_level(text, source):
        for host in _expand_component(component, text, source, budget=MAX_HOSTS - len(hosts)):
            if host in first_component:
                where = (
                    f"in `{component}`"
                    if first_component[host] == component
                    else f"in `{first_component[host]}` and in `{component}`"
                )
                raise InputError(f"{source}: `{text}` names host `{host}` twice ({where}); list each host once.")
            first_component[host] = component
            hosts.append(host)
    return hosts


def read_nodelist(arg: str) -> list[str]:
    """Hosts of a ``--nodelist`` argument: ``@path`` reads a file, anything else is an expression.

    The file holds one host name or hostlist expression per line; blank lines and ``#`` comments (whole
    lines or trailing) are ignored.  A host named twice, on one line or on two, is an error.
    """
    if not arg.startswith("@"):
        return expand_hostlist(arg, source="nodelist")
    path = Path(arg[1:])
    text = read_text(path, "nodelist file",
                     "pass @PATH to a UTF-8 text file with one host or hostlist expression per line")
    hosts: list[str] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        for host in expand_hostlist(line, source=f"{path}:{number}"):
            if host in first_line:
                raise InputError(
                    f"{path}:{number}: host `{host}` is already listed on line {first_line[host]}; list each host once."
                )
            first_line[host] = number
            hosts.append(host)
    if not hosts:
        raise InputError(
            f"nodelist file `{path}` lists no hosts (only blank lines or comments); write one host or "
            "hostlist expression per line."
        )
    return hosts


def _split_top_level(text: str, source: str) -> list[str]:
    """Components between commas outside brackets; checks bracket balance and stray characters."""
    components: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "[":
            if depth:
                raise InputError(
                    f"{source}: `{text}` opens a bracket inside another at position {index + 1}; "
                    f"brackets do not nest; {_EXPECTED}."
                )
            depth = 1
        elif char == "]":
            if not depth:
                raise InputError(
                    f"{source}: `{text}` closes a bracket that was never opened at position {index + 1}; {_EXPECTED}."
                )
            depth = 0
        elif char == "," and not depth:
            components.append(text[start:index])
            start = index + 1
        elif char.isspace():
            raise InputError(
                f"{source}: `{text}` contains whitespace at position {index + 1}; separate hosts "
                f"with commas, not spaces; {_EXPECTED}."
            )
    if depth:
        raise InputError(f"{source}: `{text}` has an unclosed `[`; {_EXPECTED}.")
    components.append(text[start:])
    for component in components:
        if not component:
            raise InputError(
                f"{source}: `{text}` has an empty component (a leading, trailing or doubled comma); {_EXPECTED}."
            )
    return components


def _expand_component(component: str, text: str, source: str, *, budget: int) -> list[str]:
    """Cartesian product of one component's literal parts and bracket expansions, first bracket outermost."""
    parts: list[list[str]] = []
    size = 1
    # re.split with one capture group alternates literal text (even indices) and bracket contents (odd).
    pieces = re.split(r"\[([^\]]*)\]", component)
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            if piece:
                parts.append([piece])
            elif 0 < index < len(pieces) - 1:
                raise InputError(
                    f"{source}: `{text}` has two brackets with nothing between them in `{component}`; separate "
                    f"them with text (as in a[1-2]b[3-4]) or merge them into one; {_EXPECTED}."
                )
            continue
        # the bracket may hold at most budget // size numbers; it is counted before it is expanded
        numbers = _expand_bracket(piece, component, text, source, limit=budget // size)
        size *= len(numbers)
        parts.append(numbers)
    return ["".join(combo) for combo in itertools.product(*parts)]


def _expand_bracket(bracket: str, component: str, text: str, source: str, *, limit: int) -> list[str]:
    """The numbers of one ``[...]``, in written order, each range expanded by ClusterShell's RangeSet.

    More than `limit` numbers (what is left of MAX_HOSTS) is refused by arithmetic, before any is listed."""
    if not bracket:
        raise InputError(f"{source}: `{text}` has an empty bracket `[]` in `{component}`; {_EXPECTED}.")
    numbers: list[str] = []
    count = 0
    for piece in bracket.split(","):
        match = _RANGE_PIECE.fullmatch(piece)
        if match is None:
            raise InputError(
                f"{source}: `{text}` has `{piece}` inside the brackets of `{component}`; "
                "expected a number or a lo-hi range of numbers, e.g. [001-004,010]."
            )
        low, high = match.group(1), match.group(2)
        longest = max(len(low), len(high or ""))
        if longest > MAX_DIGITS:
            raise InputError(
                f"{source}: `{component}` has a {longest}-digit number inside its brackets; host numbers have at "
                f"most {MAX_DIGITS} digits: check for a typo."
            )
        if high is not None and int(high) < int(low):
            raise InputError(
                f"{source}: `{text}` has the descending range `{piece}` in `{component}`; "
                f"write it low to high, `{high}-{low}`."
            )
        count += 1 if high is None else int(high) - int(low) + 1
        if count > limit:
            raise InputError(
                f"{source}: `{text}` expands to more than {MAX_HOSTS:,} hosts (range `{piece}`); "
                "check the range for a typo."
            )
        if high is not None and len(high) > len(low) and low.startswith("0"):
            # SLURM takes a range's width from its low end and prints wider numbers whole (hostlist.c: width =
            # strlen(lo), "%0*lu"), so a zero-padded range may run into more digits: n[09-100] is n09 .. n99,
            # n100, which SLURM itself writes into SLURM_JOB_NODELIST (ClusterShell calls it a padding mismatch)
            numbers.extend(f"{n:0{len(low)}d}" for n in range(int(low), int(high) + 1))
            continue
        try:
            numbers.extend(RangeSet(piece).striter())  # ascending, padding kept
        except RangeSetException as err:
            raise InputError(
                f"{source}: `{text}` has the range `{piece}` in `{component}` that cannot be "
                f"expanded ({err}); give both ends the same zero padding, e.g. 001-010 or 1-10."
            ) from err
    return numbers


_NUMBERED = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$")


def hostlist_sort_key(name: str | int) -> tuple:
    """Key of SLURM's host order (hostlist_sort; slurmctld sorts its node table so, by strnatcmp, and SLURM_NODEID
    follows that table: src/slurmctld/read_config.c _sort_node_record_table_ptr, unless slurm.conf's TopologyParam
    ranks the nodes by leaf switch or block): text compared as text and each run of digits as a number, so node2
    comes before node10 (a user trial: a plain string sort put node10-node16 between node1 and node2)."""
    return tuple(int(piece) if piece.isdigit() else piece for piece in re.split(r"(\d+)", str(name)))


def compress_hostlist(hosts: list[str]) -> str:
    """A hostlist expression that `expand_hostlist` turns back into `hosts`, in the same order: neighbouring
    hosts with the same name around a number of the same width share one bracket, runs as lo-hi.

    >>> compress_hostlist(['gpu-031', 'gpu-032', 'gpu-033', 'gpu-035', 'login1'])
    'gpu-[031-033,035],login1'
    """
    parts: list[str] = []
    i = 0
    while i < len(hosts):
        m = _NUMBERED.match(hosts[i])
        if m is None:
            parts.append(hosts[i])
            i += 1
            continue
        prefix, digits, suffix = m.groups()
        numbers = [digits]
        i += 1
        while i < len(hosts):
            n = _NUMBERED.match(hosts[i])
            if n is None or (n.group(1), len(n.group(2)), n.group(3)) != (prefix, len(digits), suffix):
                break
            numbers.append(n.group(2))
            i += 1
        if len(numbers) == 1:
            parts.append(hosts[i - 1])
            continue
        runs: list[list[str]] = []
        for d in numbers:
            if runs and int(d) == int(runs[-1][-1]) + 1:
                runs[-1][1:] = [d]
            else:
                runs.append([d])
        inside = ",".join(r[0] if len(r) == 1 else f"{r[0]}-{r[1]}" for r in runs)
        parts.append(f"{prefix}[{inside}]{suffix}")
    return ",".join(parts)
