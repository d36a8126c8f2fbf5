"""SLURM topology.conf -> SlurmTree / SlurmBlocks: the samples in tests/data/slurm/, the man page's own
examples, and every malformed file a user can give (each message pinned: file, line, value, fix)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.errors import InputError
from placement.loaders.slurm import parse_topology_conf
from placement.specs.fabric import SlurmBlocks, SlurmTree

DATA = Path(__file__).parent / "data" / "slurm"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topology.conf"
    path.write_text(text)
    return path


# --- well-formed files ----------------------------------------------------------------------------


def test_tree_with_uneven_leaves() -> None:
    path = DATA / "tree-5leaf.conf"
    tree = parse_topology_conf(path)
    assert isinstance(tree, SlurmTree)
    assert tree.source == str(path)
    assert [switch.name for switch in tree.switches] == ["leaf0", "leaf1", "leaf2", "leaf3", "leaf4", "spine"]
    assert [len(switch.nodes) for switch in tree.switches] == [37, 64, 27, 64, 64, 0]
    assert [switch.line for switch in tree.switches] == [6, 7, 8, 9, 10, 11]
    leaf2 = tree.switches[2]
    assert (leaf2.nodes[0], leaf2.nodes[-1], leaf2.link_speed, leaf2.switches) == ("gpu0102", "gpu0128", 400, ())
    spine = tree.switches[-1]
    assert spine.switches == ("leaf0", "leaf1", "leaf2", "leaf3", "leaf4")
    assert spine.link_speed == 800
    all_nodes = [node for switch in tree.switches for node in switch.nodes]
    assert all_nodes == [f"gpu{i:04d}" for i in range(1, 257)]


def test_block_nvl72_racks() -> None:
    blocks = parse_topology_conf(DATA / "block-nvl72.conf")
    assert isinstance(blocks, SlurmBlocks)
    assert blocks.block_sizes == (18, 36)
    assert [(block.name, len(block.nodes), block.line) for block in blocks.blocks] == [
        ("rack1", 18, 6),
        ("rack2", 18, 7),
        ("rack3", 18, 8),
        ("rack4", 18, 9),
    ]
    assert blocks.blocks[1].nodes[0] == "nvl019"
    assert blocks.blocks[3].nodes[-1] == "nvl072"


def test_continuation_lines_comments_and_key_case() -> None:
    tree = parse_topology_conf(DATA / "continued.conf")
    assert isinstance(tree, SlurmTree)
    leaf1, leaf2, core = tree.switches
    assert (leaf1.name, leaf1.line, leaf1.link_speed) == ("ib-leaf1", 4, None)
    assert leaf1.nodes == ("node01", "node02", "node03", "node04", "node09", "node10")
    assert (leaf2.name, leaf2.line, leaf2.link_speed) == ("ib-leaf2", 6, 200)
    assert leaf2.nodes == ("node05", "node06", "node07", "node08")
    # `Switches=ib-leaf2,\` + `ib-leaf1`: joined without a space, as SLURM's parser joins them.
    assert (core.name, core.line, core.switches, core.nodes) == ("ib-core", 10, ("ib-leaf2", "ib-leaf1"), ())


def test_man_page_tree_example(tmp_path: Path) -> None:
    """The topology/tree EXAMPLE of topology.conf(5) (SchedMD/slurm doc/man/man5/topology.conf.5)."""
    path = write(
        tmp_path,
        "##################################################################\n"
        "# Slurm's network topology configuration file for use with the\n"
        "# topology/tree plugin\n"
        "##################################################################\n"
        "SwitchName=s0 Nodes=dev[0-5]\n"
        "SwitchName=s1 Nodes=dev[6-11]\n"
        "SwitchName=s2 Nodes=dev[12-17]\n"
        "SwitchName=s3 Switches=s[0-2]\n",
    )
    tree = parse_topology_conf(path)
    assert isinstance(tree, SlurmTree)
    assert tree.switches[3].switches == ("s0", "s1", "s2")
    assert tree.switches[1].nodes == tuple(f"dev{i}" for i in range(6, 12))


def test_man_page_block_example(tmp_path: Path) -> None:
    """The topology/block EXAMPLE of topology.conf(5): BlockSizes=30,120 (120 = 30 x 4)."""
    path = write(
        tmp_path,
        "BlockName=block1 Nodes=node[1-32]\n"
        "BlockName=block2 Nodes=node[33-64]\n"
        "BlockName=block3 Nodes=node[65-96]\n"
        "BlockName=block4 Nodes=node[97-128]\n"
        "BlockSizes=30,120\n",
    )
    blocks = parse_topology_conf(path)
    assert isinstance(blocks, SlurmBlocks)
    assert blocks.block_sizes == (30, 120)
    assert [len(block.nodes) for block in blocks.blocks] == [32, 32, 32, 32]


def test_blocks_without_block_sizes(tmp_path: Path) -> None:
    blocks = parse_topology_conf(write(tmp_path, "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\n"))
    assert isinstance(blocks, SlurmBlocks)
    assert blocks.block_sizes is None


def test_quoted_value_and_escaped_hash(tmp_path: Path) -> None:
    tree = parse_topology_conf(write(tmp_path, 'SwitchName="sw\\#1" Nodes="n[1-2]"  # the only switch\n'))
    assert isinstance(tree, SlurmTree)
    assert (tree.switches[0].name, tree.switches[0].nodes) == ("sw#1", ("n1", "n2"))


# --- malformed files ------------------------------------------------------------------------------

TREE_ERRORS = {
    "mixed plugins": (
        "SwitchName=s0 Nodes=n[1-4]\nBlockName=b1 Nodes=n[5-8]\n",
        "topology.conf:2: a BlockName= line in a file whose line 1 is a SwitchName= line; a topology.conf "
        "describes one plugin, topology/tree (SwitchName= lines) or topology/block (BlockName= and BlockSizes= "
        "lines): keep one kind of line.",
    ),
    "mixed plugins, block first": (
        "BlockSizes=4\nBlockName=b1 Nodes=n[1-4]\n\nSwitchName=s0 Nodes=n[5-8]\n",
        "topology.conf:4: a SwitchName= line in a file whose line 1 is a BlockSizes= line",
    ),
    "switch and block on one line": (
        "SwitchName=s0 BlockName=b0 Nodes=n[1-4]\n",
        "topology.conf:1: one line defines both a switch (`SwitchName=`) and a block (`BlockName=`)",
    ),
    "unknown key": (
        "SwitchName=s0 Nodes=n[1-4] Speed=100\n",
        "topology.conf:1: unknown key `Speed` on a SwitchName= line; the keys allowed there are SwitchName, "
        "Switches, Nodes, LinkSpeed, Level (case-insensitive): correct the spelling or remove it.",
    ),
    "tree key on a block line": (
        "BlockName=b1 Nodes=n[1-4] LinkSpeed=10\n",
        "topology.conf:1: unknown key `LinkSpeed` on a BlockName= line; the keys allowed there are BlockName, Nodes",
    ),
    "neither switch nor block": (
        "SwitchName=s0 Nodes=n[1-4]\nNodes=n[5-8] LinkSpeed=1\n",
        "topology.conf:2: `Nodes=n[5-8] LinkSpeed=1` defines neither a switch nor a block; every line starts with "
        "SwitchName=",
    ),
    "ring plugin": (
        "RingName=ring0 Nodes=node[01-08]\n",
        "topology.conf:1: `RingName=` is the topology/ring plugin, which placement does not read",
    ),
    "not key=value": (
        "SwitchName s0 Nodes=n[1-4]\n",
        "topology.conf:1: cannot read `SwitchName`; expected Key=Value pairs separated by whitespace with no "
        "spaces around `=`",
    ),
    "space after equals": (
        "SwitchName= s0 Nodes=n[1-4]\n",
        "topology.conf:1: `SwitchName=` has no value; give it one (no space after `=`), or remove it.",
    ),
    "key twice": (
        "SwitchName=s0 Nodes=n[1-4] nodes=n[5-8]\n",
        "topology.conf:1: `nodes=` appears twice on one line (`Nodes=n[1-4]` and `nodes=n[5-8]`)",
    ),
    "malformed hostlist": (
        "SwitchName=s0 Nodes=gpu[001-004\n",
        "topology.conf:1: Nodes=: `gpu[001-004` has an unclosed `[`; expected comma-separated host names",
    ),
    "descending range": (
        "SwitchName=s0 Nodes=gpu[010-001]\n",
        "topology.conf:1: Nodes=: `gpu[010-001]` has the descending range `010-001` in `gpu[010-001]`; write it "
        "low to high, `001-010`.",
    ),
    "undefined child switch": (
        "SwitchName=s0 Nodes=n[1-4]\nSwitchName=top Switches=s[0-1]\n",
        "topology.conf:2: switch `top` lists `s1` in Switches=, but no line defines a switch `s1`; add "
        "`SwitchName=s1 Nodes=...` or correct the name.",
    ),
    "switch defined twice": (
        "SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[5-8]\nSwitchName=s0 Nodes=n[9-12]\n",
        "topology.conf:3: switch `s0` is already defined on line 1; define each switch once (merge the two lines).",
    ),
    "node under two leaves": (
        "SwitchName=s0 Nodes=gpu[01-08]\nSwitchName=s1 Nodes=gpu[08-16]\nSwitchName=top Switches=s[0-1]\n",
        "topology.conf:2: node `gpu08` is under leaf switch `s1` and under `s0` (line 1); a node hangs off one "
        "leaf switch: remove it from one Nodes= list.",
    ),
    "switch under two parents": (
        "SwitchName=s0 Nodes=n[1-4]\nSwitchName=a Switches=s0\nSwitchName=b Switches=s0\nSwitchName=top Switches=a,b\n",
        "topology.conf:3: switch `s0` is listed under `b` and under `a` (line 2); in a tree each switch has one "
        "parent: keep it in one Switches= list.",
    ),
    "cycle": (
        "SwitchName=s0 Nodes=n[1-4]\nSwitchName=a Switches=s0,b\nSwitchName=b Switches=a\n",
        "topology.conf:2: the switches form a cycle, each listing the next in Switches=: b (line 3) -> a (line 2) "
        "-> b; a tree has no cycles: remove one of these Switches= entries.",
    ),
    "switch lists itself": (
        "SwitchName=s0 Nodes=n[1-4]\nSwitchName=top Switches=s0,top\n",
        "topology.conf:2: the switches form a cycle, each listing the next in Switches=: top (line 2) -> top",
    ),
    "nodes and switches": (
        "SwitchName=s0 Nodes=n[1-4]\nSwitchName=top Nodes=n5 Switches=s0\n",
        "topology.conf:2: switch `top` lists both Nodes= and Switches=; SLURM reads a switch as a leaf (Nodes=) "
        "or as a parent of switches (Switches=)",
    ),
    "no children": (
        "SwitchName=s0 LinkSpeed=100\n",
        "topology.conf:1: switch `s0` has no children; give it Nodes= (a leaf switch, e.g. `Nodes=gpu[001-032]`) "
        "or Switches= (e.g. `Switches=s[0-3]`).",
    ),
    "link speed not a number": (
        "SwitchName=s0 Nodes=n[1-4] LinkSpeed=100G\n",
        "topology.conf:1: `LinkSpeed=100G` is not a whole number; LinkSpeed= takes a non-negative integer",
    ),
    "switch name with brackets": (
        "SwitchName=s[0-1] Nodes=n[1-4]\n",
        "topology.conf:1: `SwitchName=s[0-1]` names more than one thing; it takes one name per line",
    ),
    "switch name too long": (
        f"SwitchName={'s' * 65} Nodes=n[1-4]\n",
        f"topology.conf:1: SwitchName `{'s' * 65}` has 65 characters; SLURM allows at most 64: shorten it.",
    ),
    "error on a continued line names its first line": (
        "# leaf\nSwitchName=s0 \\\n  Nodes=n[1-4] \\\n  Speed=1\n",
        "topology.conf:2: unknown key `Speed` on a SwitchName= line",
    ),
    "only comments": (
        "# nothing here yet\n\n   # still nothing\n",
        "topology.conf: no SwitchName= or BlockName= lines (the file is empty or only comments)",
    ),
}

BLOCK_ERRORS = {
    "node in two blocks": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockName=r2 Nodes=nvl[018-035]\n",
        "topology.conf:2: node `nvl018` is in block `r2` and in block `r1` (line 1); a node belongs to one block: "
        "remove it from one.",
    ),
    "block defined twice": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockName=r1 Nodes=nvl[019-036]\n",
        "topology.conf:2: block `r1` is already defined on line 1; define each block once.",
    ),
    "block without nodes": (
        "BlockName=r1\n",
        "topology.conf:1: block `r1` has no Nodes=; list its nodes, e.g. `BlockName=r1 Nodes=nvl[001-018]`.",
    ),
    "block smaller than base size": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockName=r2 Nodes=nvl[019-034]\nBlockSizes=18,36\n",
        "topology.conf:2: block `r2` has 16 nodes, fewer than the base block size 18 (BlockSizes= on line 3); every "
        "block holds at least the base size: add nodes to it, or lower the first BlockSizes= value.",
    ),
    "block sizes not a power-of-two multiple": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockSizes=18,54\n",
        "topology.conf:2: BlockSizes=18,54: 54 is not a power of two times 18; each size after the first is the one "
        "before times 2, 4, 8, ... (e.g. 18,36,72).",
    ),
    "block sizes not numbers": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockSizes=18,rack\n",
        "topology.conf:2: `BlockSizes=18,rack` is not a comma-separated list of positive whole numbers; write e.g. "
        "`BlockSizes=18,36`.",
    ),
    "block sizes zero": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockSizes=0\n",
        "topology.conf:2: `BlockSizes=0` is not a comma-separated list of positive whole numbers",
    ),
    "block sizes twice": (
        "BlockSizes=18\nBlockName=r1 Nodes=nvl[001-018]\nblocksizes=18,36\n",
        "topology.conf:3: a second BlockSizes= line (the first is line 1); give BlockSizes= once.",
    ),
    "block sizes on a block line": (
        "BlockName=r1 Nodes=nvl[001-018] BlockSizes=18\n",
        "topology.conf:1: `BlockSizes=` on a BlockName= line; it applies to the whole file: move it to a line of "
        "its own, e.g. `BlockSizes=18,36`.",
    ),
    "block sizes without blocks": (
        "# sizes only\nBlockSizes=18,36\n",
        "topology.conf:2: BlockSizes= but no BlockName= lines; define the blocks",
    ),
    "unknown key on the sizes line": (
        "BlockName=r1 Nodes=nvl[001-018]\nBlockSizes=18 Nodes=nvl019\n",
        "topology.conf:2: unknown key `Nodes` on a BlockSizes= line; the keys allowed there are BlockSizes",
    ),
}


@pytest.mark.parametrize(
    ("text", "message"), [*TREE_ERRORS.values(), *BLOCK_ERRORS.values()], ids=[*TREE_ERRORS, *BLOCK_ERRORS]
)
def test_malformed_file_is_input_error(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    # Every message starts with the full path; the pinned text starts at the file name.
    with pytest.raises(InputError, match=re.escape(f"{tmp_path}/{message}")):
        parse_topology_conf(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.conf"
    with pytest.raises(InputError, match=re.escape(f"topology file `{path}` cannot be read (")):
        parse_topology_conf(path)


def test_separate_fabrics_are_read_and_a_job_inside_one_is_placed(tmp_path: Path) -> None:
    """Two switches with no common parent are two fabrics (islands), which SLURM accepts: the file was refused as a
    whole, even for a job inside one of them (a user trial); a job whose hosts span both is the error."""
    from placement.catalog import load_accelerator, load_cluster
    from placement.fabric import topology_from_slurm

    conf = parse_topology_conf(write(tmp_path, "SwitchName=l1 Nodes=n[01-04]\nSwitchName=l2 Nodes=n[05-08]\n"))
    cluster = load_cluster("dgx-h100")
    acc = load_accelerator(cluster.accelerator)
    topo = topology_from_slurm(conf, [f"n0{i}" for i in range(1, 5)], cluster, acc)
    assert topo.num_gpus == 32
    with pytest.raises(InputError, match=r"under 2 switches with no parent \(l1 \(e\.g\. n03\), l2 \(e\.g\. n05\)\)"):
        topology_from_slurm(conf, ["n03", "n04", "n05", "n06"], cluster, acc)


def test_scontrol_show_topology_output_reads_as_the_tree_it_prints(tmp_path: Path) -> None:
    """`scontrol show topology` (tree plugin) prints Level= on every switch and a parent's Nodes= beside its
    Switches= (Slurm's _print_topo_record); a user trial's copy was refused as a misspelt key, then as a switch with
    both children kinds.  Its parent's nodes are the children's: the tree is topology.conf's."""
    printed = tmp_path / "scontrol.txt"
    printed.write_text("SwitchName=leaf0 Level=0 LinkSpeed=1 Nodes=gpu[0001-0004]\n"
                       "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[0005-0008]\n"
                       "SwitchName=spine Level=1 LinkSpeed=1 Nodes=gpu[0001-0008] Switches=leaf[0-1]\n")
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=leaf0 Nodes=gpu[0001-0004]\nSwitchName=leaf1 Nodes=gpu[0005-0008]\n"
                    "SwitchName=spine Switches=leaf[0-1]\n")
    read, written = parse_topology_conf(printed), parse_topology_conf(conf)
    assert isinstance(read, SlurmTree)
    assert [(s.name, s.switches, s.nodes) for s in read.switches] == [
        (s.name, s.switches, s.nodes) for s in written.switches]
    # a node the parent lists and no child holds is named, not dropped (a review)
    cut = tmp_path / "cut.txt"
    cut.write_text(printed.read_text().replace("Nodes=gpu[0001-0008]", "Nodes=gpu[0001-0009]"))
    with pytest.raises(InputError, match="lists gpu0009 in Nodes="):
        parse_topology_conf(cut)
    # without Level=, both kinds of children on one switch stay a topology.conf error
    bad = tmp_path / "both.conf"
    bad.write_text("SwitchName=leaf0 Nodes=gpu[0001-0004]\nSwitchName=spine Nodes=gpu[0001-0004] Switches=leaf0\n")
    with pytest.raises(InputError, match="lists both Nodes= and Switches="):
        parse_topology_conf(bad)
