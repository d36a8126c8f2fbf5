"""Read a SLURM ``topology.conf`` into a SlurmTree (topology/tree) or SlurmBlocks (topology/block).

The format is the topology.conf(5) man page's (Slurm 23.11 to 26.11; SchedMD/slurm
``doc/man/man5/topology.conf.5``), read the way Slurm's own parser (``src/common/parse_config.c``) reads it:

- one definition per line, as whitespace-separated ``Key=Value`` pairs; keys are case-insensitive;
- ``#`` starts a comment that runs to the end of the physical line (``\\#`` is a literal ``#``);
- a line whose last non-blank character is an odd number of backslashes continues on the next physical
  line: the backslash is dropped and the next line appended as is (so keep the whitespace that separates
  two pairs, e.g. at the start of the continuation line);
- topology/tree: ``SwitchName=`` (required, at most 64 characters) with either ``Nodes=`` (a leaf switch)
  or ``Switches=`` (child switches), and an optional ``LinkSpeed=`` (an integer whose unit SLURM leaves
  to the site);
- topology/block: ``BlockName=`` with ``Nodes=``, and one ``BlockSizes=`` line: the planning base block
  size, then any larger enforced sizes, each a power of two times the one before; every block holds at
  least the base size.

``scontrol show topology`` output (tree plugin) reads as topology.conf: its ``Level=`` on every switch marks it, and
there a parent switch's ``Nodes=`` lists every node below it, which its ``Switches=`` already place, so it is not read.

``Nodes=`` and ``Switches=`` are hostlist expressions, expanded in written order by
placement.loaders.hostlist.  The topology/ring plugin (``RingName=``) is not read.

topology.yaml (Slurm 25.05+, topology.yaml(5); SchedMD/slurm ``doc/man/man5/topology.yaml.5``), which Slurm reads
instead of topology.conf where both exist, is a YAML list of named topologies, each ``tree:`` (``switches:``, each
``switch:`` with ``children:`` or ``nodes:``), ``block:`` (``block_sizes:`` and ``blocks:``, each ``block:`` with
``nodes:``) or ``flat: true``; one of them may be ``cluster_default: true``, the one Slurm uses for a partition
that names none.  Each switch or block is read as the topology.conf line it stands for, with the same checks.  The
file's one tree or block topology is read; of several, the cluster_default one, and the output says which.

Stricter than SLURM where SLURM would misplace jobs silently: a file mixing tree and block lines, an
unknown key, a ``Switches=`` name no line defines, a switch defined twice or listed under two parents, a
node under two leaf switches or in two blocks, a cycle of switches, and a tree with more than one top
switch (SLURM never places a job across disconnected trees) are each an InputError that names the file,
the line, the value and the fix.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

from placement.errors import InputError
from placement.loaders.files import read_text
from placement.loaders.hostlist import expand_hostlist
from placement.specs.fabric import SlurmBlock, SlurmBlocks, SlurmSwitch, SlurmTree

MAX_SWITCH_NAME_CHARS: Final = 64
"""topology.conf(5): SwitchName "cannot be longer than 64 characters"."""

MAX_DIGITS: Final = 18
"""Longest LinkSpeed= or BlockSizes= number read (Python refuses to convert more than 4,300 digits)."""
_WHOLE: Final = re.compile(r"[0-9]+")
"""ASCII digits only: str.isdigit() also accepts `²`, which int() refuses."""

_TREE_KEYS: Final = ("SwitchName", "Switches", "Nodes", "LinkSpeed", "Level")
"""Level= is `scontrol show topology`'s (0 for a leaf switch), never topology.conf's."""
_BLOCK_KEYS: Final = ("BlockName", "Nodes")
_BLOCK_SIZES_KEYS: Final = ("BlockSizes",)
_KNOWN_KEYS: Final = {key.lower(): key for key in (*_TREE_KEYS, *_BLOCK_KEYS, *_BLOCK_SIZES_KEYS)}

_TREE_EXAMPLE: Final = "`SwitchName=s0 Nodes=gpu[001-032]` or `SwitchName=spine Switches=s[0-3]`"
_BLOCK_EXAMPLE: Final = "`BlockName=rack1 Nodes=nvl[001-018]` and one `BlockSizes=18,36` line"
_KIND_NAMES: Final = {"tree": "SwitchName=", "block": "BlockName=", "sizes": "BlockSizes="}


@dataclass(frozen=True)
class _Line:
    """One logical line: its first physical line number and its pairs (key lower-cased -> value)."""

    number: int
    pairs: dict[str, str]
    spelled: dict[str, str]
    """Lower-cased key -> the key as written, for messages."""
    kind: str = ""
    """The line's kind: tree (SwitchName=), block (BlockName=), sizes (BlockSizes=), or empty if blank."""


def parse_topology_conf(path: Path) -> SlurmTree | SlurmBlocks:
    """Parse a topology.conf; the plugin (tree or block) is the one its lines define."""
    path = Path(path)
    text = read_text(path, "topology file", "pass the path of SLURM's topology.conf (a UTF-8 text file)")
    if _is_yaml(path, text):
        return _parse_topology_yaml(path, text)
    lines = [_parse_pairs(number, logical, path) for number, logical in _logical_lines(text)]
    lines = [line for line in lines if line.kind]
    if not lines:
        raise InputError(
            f"{path}: no SwitchName= or BlockName= lines (the file is empty or only comments); write "
            f"topology/tree lines like {_TREE_EXAMPLE}, or topology/block lines like {_BLOCK_EXAMPLE}."
        )
    first_tree = next((line for line in lines if line.kind == "tree"), None)
    first_block = next((line for line in lines if line.kind != "tree"), None)
    if first_tree is not None and first_block is not None:
        later, earlier = sorted((first_tree, first_block), key=lambda line: line.number, reverse=True)
        raise InputError(
            f"{path}:{later.number}: a {_KIND_NAMES[later.kind]} line in a file whose line {earlier.number} "
            f"is a {_KIND_NAMES[earlier.kind]} line; a topology.conf describes one plugin, topology/tree "
            "(SwitchName= lines) or topology/block (BlockName= and BlockSizes= lines): keep one kind of line."
        )
    if first_tree is not None:
        return _tree(lines, path)
    return _blocks(lines, path)


# --- reading lines -------------------------------------------------------------------------------


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) per logical line: comments stripped, continuations joined."""
    logical: list[tuple[int, str]] = []
    buffer = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        line = _strip_comment(raw).rstrip()
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buffer += line[:-1]
            continue
        logical.append((start, (buffer + line).replace("\\#", "#")))
        buffer = ""
    if buffer:
        logical.append((start, buffer.replace("\\#", "#")))
    return logical


def _strip_comment(line: str) -> str:
    """The line up to its first ``#`` not escaped by an odd number of backslashes (parse_config.c rule)."""
    backslashes = 0
    for index, char in enumerate(line):
        if char == "#" and backslashes % 2 == 0:
            return line[:index]
        backslashes = backslashes + 1 if char == "\\" else 0
    return line


def _parse_pairs(number: int, text: str, path: Path) -> _Line:
    pairs: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for token in text.split():
        key, equals, value = token.partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z0-9_.]+", key):
            raise InputError(
                f"{path}:{number}: cannot read `{token}`; expected Key=Value pairs separated by whitespace "
                f"with no spaces around `=`, e.g. {_TREE_EXAMPLE}."
            )
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if not value:
            raise InputError(f"{path}:{number}: `{key}=` has no value; give it one (no space after `=`), or remove it.")
        lower = key.lower()
        if lower in pairs:
            raise InputError(
                f"{path}:{number}: `{key}=` appears twice on one line (`{spelled[lower]}={pairs[lower]}` and "
                f"`{token}`); give each key once per line."
            )
        pairs[lower] = value
        spelled[lower] = key
    line = _Line(number=number, pairs=pairs, spelled=spelled)
    return _Line(number=number, pairs=pairs, spelled=spelled, kind=_kind(line, path)) if pairs else line


def _kind(line: _Line, path: Path) -> str:
    """The line's kind (tree, block or sizes), its keys checked against that kind's keys."""
    keys = line.pairs.keys()
    if "ringname" in keys:
        raise InputError(
            f"{path}:{line.number}: `{line.spelled['ringname']}=` is the topology/ring plugin, which placement "
            f"does not read; give a topology/tree file ({_TREE_EXAMPLE}) or a topology/block file "
            f"({_BLOCK_EXAMPLE})."
        )
    if "switchname" in keys and "blockname" in keys:
        raise InputError(
            f"{path}:{line.number}: one line defines both a switch (`SwitchName=`) and a block "
            "(`BlockName=`); a line defines one or the other, and a file uses only one of the two kinds."
        )
    if "switchname" in keys:
        kind, allowed = "tree", _TREE_KEYS
    elif "blockname" in keys:
        if "blocksizes" in keys:
            raise InputError(
                f"{path}:{line.number}: `BlockSizes=` on a BlockName= line; it applies to the whole file: "
                "move it to a line of its own, e.g. `BlockSizes=18,36`."
            )
        kind, allowed = "block", _BLOCK_KEYS
    elif "blocksizes" in keys:
        kind, allowed = "sizes", _BLOCK_SIZES_KEYS
    else:
        written = " ".join(f"{line.spelled[key]}={value}" for key, value in line.pairs.items())
        raise InputError(
            f"{path}:{line.number}: `{written}` defines neither a switch nor a block; every line starts with "
            f"SwitchName= (topology/tree, e.g. {_TREE_EXAMPLE}) or BlockName= (topology/block), or is a "
            "single BlockSizes= line."
        )
    for key in keys:
        if _KNOWN_KEYS.get(key) not in allowed:
            raise InputError(
                f"{path}:{line.number}: unknown key `{line.spelled[key]}` on a {_KIND_NAMES[kind]} line; the "
                f"keys allowed there are {', '.join(allowed)} (case-insensitive): correct the spelling or "
                "remove it."
            )
    return kind


def _check_digits(number: str, line: _Line, key: str, path: Path) -> None:
    if len(number) > MAX_DIGITS:
        raise InputError(
            f"{path}:{line.number}: `{line.spelled[key]}=` holds a {len(number)}-digit number; the values it takes "
            f"have at most {MAX_DIGITS} digits: check for a typo."
        )


def _hosts(line: _Line, key: str, path: Path) -> tuple[str, ...]:
    return tuple(expand_hostlist(line.pairs[key], source=f"{path}:{line.number}: {line.spelled[key]}="))


def _single_name(line: _Line, key: str, path: Path) -> str:
    name = line.pairs[key]
    if any(char in name for char in "[],"):
        raise InputError(
            f"{path}:{line.number}: `{line.spelled[key]}={name}` names more than one thing; it takes one "
            "name per line (children go in Switches= or Nodes=, which take hostlist expressions)."
        )
    return name


# --- topology/tree -------------------------------------------------------------------------------


def _tree(lines: list[_Line], path: Path) -> SlurmTree:
    switches: dict[str, SlurmSwitch] = {}
    for line in lines:
        switch = _switch(line, path)
        if switch.name in switches:
            raise InputError(
                f"{path}:{line.number}: switch `{switch.name}` is already defined on line "
                f"{switches[switch.name].line}; define each switch once (merge the two lines)."
            )
        switches[switch.name] = switch
    parent = _parents(switches, path)
    _check_leaf_nodes(switches, path)
    _check_cycles(switches, parent, path)
    _check_listed_below(lines, switches, path)
    # several tops are separate fabrics (islands), which SLURM accepts ("jobs can only span nodes connected by
    # the same switch fabric", topology.conf(5)): a job inside one is planned, one across them is refused where its
    # hosts are placed (fabric.topology_from_slurm)
    return SlurmTree(switches=tuple(switches.values()), source=str(path))


def _check_listed_below(lines: list[_Line], switches: dict[str, SlurmSwitch], path: Path) -> None:
    """`scontrol show topology` lists a parent's nodes beside its switches; the tree reads them from the children, so
    a node the parent lists and no switch below it holds would be dropped: an error naming it."""
    def below(name: str) -> set[str]:
        s = switches[name]
        return set(s.nodes).union(*(below(c) for c in s.switches)) if s.switches else set(s.nodes)

    for line in lines:
        if "level" in line.pairs and "nodes" in line.pairs and "switches" in line.pairs:
            name = line.pairs["switchname"]
            extra = [n for n in _hosts(line, "nodes", path) if n not in below(name)]
            if extra:
                raise InputError(
                    f"{path}:{line.number}: switch `{name}` lists {extra[0]} in Nodes= ({len(extra)} such node(s)), "
                    f"which no switch below it holds; `scontrol show topology` lists under a parent the nodes of "
                    f"its children: give the output whole, or the topology.conf it came from.")


def _switch(line: _Line, path: Path) -> SlurmSwitch:
    name = _single_name(line, "switchname", path)
    if len(name) > MAX_SWITCH_NAME_CHARS:
        raise InputError(
            f"{path}:{line.number}: SwitchName `{name}` has {len(name)} characters; SLURM allows at most "
            f"{MAX_SWITCH_NAME_CHARS}: shorten it."
        )
    has_nodes, has_switches = "nodes" in line.pairs, "switches" in line.pairs
    if "level" in line.pairs:  # `scontrol show topology` output (a user trial's was refused as a misspelling)
        level = line.pairs["level"]
        if not _WHOLE.fullmatch(level):
            raise InputError(f"{path}:{line.number}: `{line.spelled['level']}={level}` is not a whole number; "
                             f"`scontrol show topology` prints each switch's Level as one (0 for a leaf switch)")
        # a parent's Nodes= there lists every node below it, which its Switches= place: the children say where
        has_nodes = has_nodes and not has_switches
    if has_nodes and has_switches:
        raise InputError(
            f"{path}:{line.number}: switch `{name}` lists both Nodes= and Switches=; SLURM reads a switch as "
            "a leaf (Nodes=) or as a parent of switches (Switches=) and ignores Switches= on a leaf: move the "
            "nodes to a leaf switch of their own and list that switch in Switches= (`scontrol show topology` "
            "output, which lists a parent's nodes too, keeps its Level= on every line and reads as it is)."
        )
    if not has_nodes and not has_switches:
        raise InputError(
            f"{path}:{line.number}: switch `{name}` has no children; give it Nodes= (a leaf switch, e.g. "
            "`Nodes=gpu[001-032]`) or Switches= (e.g. `Switches=s[0-3]`)."
        )
    link_speed = None
    if "linkspeed" in line.pairs:
        written = line.pairs["linkspeed"]
        if not _WHOLE.fullmatch(written):
            raise InputError(
                f"{path}:{line.number}: `{line.spelled['linkspeed']}={written}` is not a whole number; "
                "LinkSpeed= takes a non-negative integer (a relative speed, e.g. LinkSpeed=100), or remove it."
            )
        _check_digits(written, line, "linkspeed", path)
        link_speed = int(written)
    return SlurmSwitch(
        name=name,
        switches=_hosts(line, "switches", path) if has_switches else (),
        nodes=_hosts(line, "nodes", path) if has_nodes else (),
        link_speed=link_speed,
        line=line.number,
    )


def _parents(switches: dict[str, SlurmSwitch], path: Path) -> dict[str, SlurmSwitch]:
    """Child switch name -> the switch that lists it; each child defined and listed once."""
    parent: dict[str, SlurmSwitch] = {}
    for switch in switches.values():
        for child in switch.switches:
            if child not in switches:
                raise InputError(
                    f"{path}:{switch.line}: switch `{switch.name}` lists `{child}` in Switches=, but no line "
                    f"defines a switch `{child}`; add `SwitchName={child} Nodes=...` or correct the name."
                )
            if child in parent:
                raise InputError(
                    f"{path}:{switch.line}: switch `{child}` is listed under `{switch.name}` and under "
                    f"`{parent[child].name}` (line {parent[child].line}); in a tree each switch has one "
                    "parent: keep it in one Switches= list."
                )
            parent[child] = switch
    return parent


def _check_leaf_nodes(switches: dict[str, SlurmSwitch], path: Path) -> None:
    leaf_of: dict[str, SlurmSwitch] = {}
    for switch in switches.values():
        for node in switch.nodes:
            if node in leaf_of:
                other = leaf_of[node]
                raise InputError(
                    f"{path}:{switch.line}: node `{node}` is under leaf switch `{switch.name}` and under "
                    f"`{other.name}` (line {other.line}); a node hangs off one leaf switch: remove it from one "
                    "Nodes= list."
                )
            leaf_of[node] = switch


def _check_cycles(switches: dict[str, SlurmSwitch], parent: dict[str, SlurmSwitch], path: Path) -> None:
    """Walk up from every switch; with one parent each, a walk that revisits a switch is a cycle."""
    cleared: set[str] = set()
    for start in switches:
        walk: list[str] = []
        seen: set[str] = set()
        name: str | None = start
        while name is not None and name not in cleared:
            if name in seen:
                cycle = walk[walk.index(name) :]
                chain = " -> ".join(f"{parent[child].name} (line {parent[child].line})" for child in cycle)
                raise InputError(
                    f"{path}:{switches[name].line}: the switches form a cycle, each listing the next in "
                    f"Switches=: {chain} -> {parent[cycle[0]].name}; a tree has no cycles: remove one of "
                    "these Switches= entries."
                )
            seen.add(name)
            walk.append(name)
            name = parent[name].name if name in parent else None
        cleared.update(walk)


# --- topology/block ------------------------------------------------------------------------------


def _blocks(lines: list[_Line], path: Path) -> SlurmBlocks:
    blocks: dict[str, SlurmBlock] = {}
    block_of: dict[str, SlurmBlock] = {}
    sizes: tuple[int, ...] | None = None
    sizes_line = 0
    for line in lines:
        if line.kind == "sizes":
            if sizes is not None:
                raise InputError(
                    f"{path}:{line.number}: a second BlockSizes= line (the first is line {sizes_line}); give "
                    "BlockSizes= once."
                )
            sizes, sizes_line = _block_sizes(line, path), line.number
            continue
        block = _block(line, path)
        if block.name in blocks:
            raise InputError(
                f"{path}:{line.number}: block `{block.name}` is already defined on line "
                f"{blocks[block.name].line}; define each block once."
            )
        for node in block.nodes:
            if node in block_of:
                other = block_of[node]
                raise InputError(
                    f"{path}:{line.number}: node `{node}` is in block `{block.name}` and in block "
                    f"`{other.name}` (line {other.line}); a node belongs to one block: remove it from one."
                )
            block_of[node] = block
        blocks[block.name] = block
    if not blocks:
        raise InputError(
            f"{path}:{sizes_line}: BlockSizes= but no BlockName= lines; define the blocks, e.g. {_BLOCK_EXAMPLE}."
        )
    if sizes is not None:
        for block in blocks.values():
            if len(block.nodes) < sizes[0]:
                raise InputError(
                    f"{path}:{block.line}: block `{block.name}` has {len(block.nodes)} nodes, fewer than the base "
                    f"block size {sizes[0]} (BlockSizes= on line {sizes_line}); every block holds at least the "
                    "base size: add nodes to it, or lower the first BlockSizes= value."
                )
    return SlurmBlocks(blocks=tuple(blocks.values()), block_sizes=sizes, source=str(path))


def _block(line: _Line, path: Path) -> SlurmBlock:
    name = _single_name(line, "blockname", path)
    if "nodes" not in line.pairs:
        raise InputError(
            f"{path}:{line.number}: block `{name}` has no Nodes=; list its nodes, e.g. `BlockName={name} "
            "Nodes=nvl[001-018]`."
        )
    return SlurmBlock(name=name, nodes=_hosts(line, "nodes", path), line=line.number)


def _block_sizes(line: _Line, path: Path) -> tuple[int, ...]:
    written = line.pairs["blocksizes"]
    pieces = written.split(",")
    for piece in pieces:
        if _WHOLE.fullmatch(piece):
            _check_digits(piece, line, "blocksizes", path)
    if not all(_WHOLE.fullmatch(piece) and int(piece) > 0 for piece in pieces):
        raise InputError(
            f"{path}:{line.number}: `{line.spelled['blocksizes']}={written}` is not a comma-separated list of "
            "positive whole numbers; write e.g. `BlockSizes=18,36`."
        )
    sizes = tuple(int(piece) for piece in pieces)
    for smaller, larger in itertools.pairwise(sizes):
        ratio = larger // smaller
        if larger % smaller or ratio < 2 or ratio & (ratio - 1):
            raise InputError(
                f"{path}:{line.number}: BlockSizes={written}: {larger} is not a power of two times {smaller}; "
                "each size after the first is the one before times 2, 4, 8, ... (e.g. 18,36,72)."
            )
    return sizes


# --- topology.yaml -------------------------------------------------------------------------------

_YAML_EXAMPLE: Final = ("`- topology: topo1` with `tree: {switches: [{switch: s1, nodes: \"gpu[001-032]\"}]}` or "
                        "`block: {block_sizes: [18], blocks: [{block: rack1, nodes: \"nvl[001-018]\"}]}`")
_YAML_TOPOLOGY_KEYS: Final = ("topology", "cluster_default", "block", "flat", "tree")
"""topology.yaml(5) PARAMETERS: a topology's attributes."""
_YAML_ITEM_KEYS: Final = {"switch": ("switch", "children", "nodes"), "block": ("block", "nodes")}
"""topology.yaml(5) Tree and Block definitions: a switch's and a block's attributes."""


def _is_yaml(path: Path, text: str) -> bool:
    """A topology.yaml: by its name, or by a first line that is YAML's (`---`, `- topology: ...`), which no
    topology.conf line can be."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return True
    first = next((line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")),
                 "")
    return first == "---" or first.startswith("- ") or first == "-"


def _yaml_where(path: Path, node: yaml.Node) -> str:
    return f"{path}:{node.start_mark.line + 1}"


def _yaml_mapping(path: Path, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, yaml.Node]:
    """A mapping's values by key, each key one of `allowed` and stated once."""
    if not isinstance(node, yaml.MappingNode):
        raise InputError(f"{_yaml_where(path, node)}: {what} is not a mapping of keys ({', '.join(allowed)}); "
                         f"write it as in topology.yaml(5), e.g. {_YAML_EXAMPLE}")
    out: dict[str, yaml.Node] = {}
    for key, value in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name not in allowed:
            raise InputError(f"{_yaml_where(path, key)}: unknown key `{name}` in {what}; the keys allowed there are "
                             f"{', '.join(allowed)} (topology.yaml(5)): correct the spelling or remove it")
        if name in out:
            raise InputError(f"{_yaml_where(path, key)}: `{name}` is stated twice in {what} (first at line "
                             f"{out[name].start_mark.line + 1}); keep one")
        out[name] = value
    return out


def _yaml_scalar(path: Path, node: yaml.Node, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or not node.value.strip():
        raise InputError(f"{_yaml_where(path, node)}: {what} takes one value (a name, a number or a hostlist "
                         f"expression such as \"gpu[001-032]\"); give it one")
    return node.value.strip()


def _yaml_hostlist(path: Path, node: yaml.Node, what: str) -> str:
    """A hostlist value: one expression, or a YAML list of them (joined as one comma-separated expression)."""
    if isinstance(node, yaml.SequenceNode):
        return ",".join(_yaml_scalar(path, item, what) for item in node.value)
    return _yaml_scalar(path, node, what)


def _yaml_bool(path: Path, node: yaml.Node, what: str) -> bool:
    value = _yaml_scalar(path, node, what).lower()
    if value not in ("true", "false"):
        raise InputError(f"{_yaml_where(path, node)}: {what} is `{node.value}`; it takes true or false")
    return value == "true"


def _parse_topology_yaml(path: Path, text: str) -> SlurmTree | SlurmBlocks:
    """Read a topology.yaml: its one tree or block topology, or of several its cluster_default one."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{path}{where}: malformed YAML ({problem}); a topology.yaml is a YAML list of "
                         f"topologies, e.g. {_YAML_EXAMPLE}") from None
    if not isinstance(root, yaml.SequenceNode) or not root.value:
        raise InputError(f"{path}: no topologies; a topology.yaml is a YAML list of them, e.g. {_YAML_EXAMPLE} "
                         f"(or give the topology.conf of a cluster without one)")
    found: list[tuple[str, str, bool, yaml.Node, yaml.Node]] = []  # name, kind, cluster_default, its node, body
    names: dict[str, int] = {}
    for item in root.value:
        fields = _yaml_mapping(path, item, "a topology", _YAML_TOPOLOGY_KEYS)
        if "topology" not in fields:
            raise InputError(f"{_yaml_where(path, item)}: a topology without `topology: NAME`; topology.yaml(5) "
                             f"requires each to be named, as its first attribute")
        name = _yaml_scalar(path, fields["topology"], "`topology:`")
        if name in names:
            raise InputError(f"{_yaml_where(path, item)}: topology `{name}` is defined again (first at line "
                             f"{names[name]}); topology names are unique")
        names[name] = item.start_mark.line + 1
        kinds = [k for k in ("block", "flat", "tree") if k in fields]
        if len(kinds) != 1:
            raise InputError(f"{_yaml_where(path, item)}: topology `{name}` defines "
                             f"{' and '.join(kinds) if kinds else 'none'} of block, flat and tree; topology.yaml(5) "
                             f"asks for exactly one")
        kind = kinds[0]
        if kind == "flat" and not _yaml_bool(path, fields["flat"], f"`flat:` of topology `{name}`"):
            raise InputError(f"{_yaml_where(path, fields['flat'])}: topology `{name}` has `flat: false` and no "
                             f"tree or block; give it `tree:` or `block:`, or `flat: true`")
        default = "cluster_default" in fields and _yaml_bool(path, fields["cluster_default"],
                                                              f"`cluster_default:` of topology `{name}`")
        found.append((name, kind, default, item, fields[kind]))
    placed = [t for t in found if t[1] != "flat"]
    if not placed:
        raise InputError(f"{path}: every topology is flat ({', '.join(t[0] for t in found)}): topology/flat knows "
                         f"no switches or blocks to price; give the tree or block topology the job's hosts sit in, "
                         f"or plan on a catalog --cluster")
    default = next((t for t in found if t[2]), None)
    if len(placed) == 1:
        chosen = placed[0]
        choice = f"topology `{chosen[0]}`" + (", its one tree or block topology" if len(found) > 1 else "")
    elif default is not None and default[1] != "flat":
        chosen = default
        others = ", ".join(f"`{t[0]}`" for t in placed if t is not chosen)
        choice = (f"topology `{chosen[0]}`, the file's cluster_default; a partition whose Topology= names "
                  f"{others} runs on that one instead: give a copy of the file holding only it")
    else:
        listed = ", ".join(f"`{t[0]}` (line {t[3].start_mark.line + 1})" for t in placed)
        raise InputError(f"{path}: {len(placed)} tree or block topologies ({listed}) and none of them is "
                         f"`cluster_default: true`; the job runs on the one its partition names (slurm.conf "
                         f"PartitionName=... Topology=NAME): give a copy of the file holding only that one")
    name, kind, _, _, body = chosen
    lines = _yaml_tree(path, body, name) if kind == "tree" else _yaml_block(path, body, name)
    conf = _tree(lines, path) if kind == "tree" else _blocks(lines, path)
    return conf.model_copy(update={"choice": choice})


def _yaml_items(path: Path, node: yaml.Node, key: str, what: str) -> list[yaml.Node]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise InputError(f"{_yaml_where(path, node)}: `{key}:` of {what} is not a list of "
                         f"{'switches' if key == 'switches' else 'blocks'}; write e.g. {_YAML_EXAMPLE}")
    return node.value


def _yaml_line(path: Path, node: yaml.Node, kind: str, what: str, pairs: dict[str, tuple[str, str]]) -> _Line:
    """The topology.conf line a switch or block stands for: {topology.conf key lower-cased: (YAML key, value)}."""
    return _Line(number=node.start_mark.line + 1, pairs={k: v for k, (_, v) in pairs.items()},
                 spelled={k: key for k, (key, _) in pairs.items()}, kind=kind)


def _yaml_named(path: Path, item: yaml.Node, kind: str, what: str) -> tuple[dict, dict]:
    """A switch's or block's fields, and its name as the topology.conf pair it stands for (SwitchName=, BlockName=);
    topology.yaml(5) requires the name."""
    fields = _yaml_mapping(path, item, f"a {kind} of {what}", _YAML_ITEM_KEYS[kind])
    if kind not in fields:
        raise InputError(f"{_yaml_where(path, item)}: a {kind} of {what} without `{kind}: NAME`; "
                         f"topology.yaml(5) requires it")
    return fields, {f"{kind}name": (kind, _yaml_scalar(path, fields[kind], f"`{kind}:`"))}


def _yaml_tree(path: Path, body: yaml.Node, name: str) -> list[_Line]:
    what = f"topology `{name}`"
    tree = _yaml_mapping(path, body, f"the tree of {what}", ("switches",))
    if "switches" not in tree:
        raise InputError(f"{_yaml_where(path, body)}: the tree of {what} has no `switches:`; list them, e.g. "
                         f"{_YAML_EXAMPLE}")
    lines = []
    for item in _yaml_items(path, tree["switches"], "switches", what):
        fields, pairs = _yaml_named(path, item, "switch", what)
        if "children" in fields:
            pairs["switches"] = ("children", _yaml_hostlist(path, fields["children"], "`children:`"))
        if "nodes" in fields:
            pairs["nodes"] = ("nodes", _yaml_hostlist(path, fields["nodes"], "`nodes:`"))
        lines.append(_yaml_line(path, item, "tree", what, pairs))
    return lines


def _yaml_block(path: Path, body: yaml.Node, name: str) -> list[_Line]:
    what = f"topology `{name}`"
    block = _yaml_mapping(path, body, f"the block of {what}", ("block_sizes", "blocks"))
    if "blocks" not in block:
        raise InputError(f"{_yaml_where(path, body)}: the block topology {what} has no `blocks:`; list them, e.g. "
                         f"{_YAML_EXAMPLE}")
    lines = []
    if "block_sizes" in block:
        sizes = block["block_sizes"]
        written = (",".join(_yaml_scalar(path, x, "`block_sizes:`") for x in sizes.value)
                   if isinstance(sizes, yaml.SequenceNode) else _yaml_scalar(path, sizes, "`block_sizes:`"))
        lines.append(_yaml_line(path, sizes, "sizes", what, {"blocksizes": ("block_sizes", written)}))
    for item in _yaml_items(path, block["blocks"], "blocks", what):
        fields, pairs = _yaml_named(path, item, "block", what)
        if "nodes" in fields:
            pairs["nodes"] = ("nodes", _yaml_hostlist(path, fields["nodes"], "`nodes:`"))
        lines.append(_yaml_line(path, item, "block", what, pairs))
    return lines


@dataclass(frozen=True)
class SlurmConfParams:
    """What placement reads of a ``slurm.conf``: its ``TopologyParam=`` options (slurm.conf(5): comma-separated,
    matched case-insensitively by SLURM, ``xstrcasestr``), with the line that sets them."""

    topology_params: tuple[str, ...]
    """The options as written (empty where the file sets no TopologyParam)."""
    source: str
    """`FILE:LINE: TopologyParam=...`, or `FILE: no TopologyParam ...`."""

    def has(self, param: str) -> bool:
        """Whether `param` is on (SLURM tests it with xstrcasestr on the whole value:
        src/plugins/topology/tree/topology_tree.c topology_p_generate_node_ranking)."""
        return any(param.lower() in p.lower() for p in self.topology_params)


def parse_slurm_conf(path: Path) -> SlurmConfParams:
    """The ``TopologyParam=`` of a slurm.conf, read as SLURM's parse_config.c reads the file (``Key=Value`` pairs,
    keys case-insensitive, ``#`` comments, ``\\`` continuations; the last line that sets a key wins).  ``Include``
    lines are not followed: where the file has some and sets no TopologyParam, the source says so.  A file with no
    ``Key=Value`` pair is not a slurm.conf: an error naming it."""
    text = read_text(path, "slurm.conf", "expected SLURM's slurm.conf (Key=Value lines, e.g. "
                                         "TopologyParam=SwitchAsNodeRank)")
    found: tuple[int, str] | None = None
    pairs = 0
    includes: list[int] = []
    for number, line in _logical_lines(text):
        tokens = line.split()
        if tokens and tokens[0].lower() == "include":
            includes.append(number)
            continue
        for token in tokens:
            key, equals, value = token.partition("=")
            if not equals or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
                continue
            pairs += 1
            if key.lower() == "topologyparam":
                found = (number, value.strip('"'))
    if not pairs:
        raise InputError(f"{path}: no Key=Value line is read from it, so it is not a slurm.conf; expected SLURM's "
                         f"slurm.conf (e.g. TopologyParam=SwitchAsNodeRank), or drop --slurm-conf")
    if found is None:
        more = (f" (its Include lines, {path}:{includes[0]}, are not read: pass the file that sets it)"
                if includes else "")
        return SlurmConfParams((), f"{path}: no TopologyParam{more}")
    number, value = found
    return SlurmConfParams(tuple(p for p in value.split(",") if p), f"{path}:{number}: TopologyParam={value}")
