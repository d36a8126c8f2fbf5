"""SLURM's topology.yaml (Slurm 25.05+, topology.yaml(5); Slurm reads it instead of topology.conf where both exist):
a YAML list of named tree, block or flat topologies.  A QA trial's `--slurm-topology topology.yaml` was refused as
a topology.conf ("cannot read `---`; expected Key=Value pairs"); it is now read as the topology.conf lines each
switch or block stands for, with the same checks, and the output names the topology it read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.errors import InputError
from placement.loaders.slurm import parse_topology_conf
from placement.specs.fabric import SlurmBlocks, SlurmTree

DATA = Path(__file__).parent / "data" / "slurm"
MAN_EXAMPLE = """- topology: topo1
  cluster_default: True
  tree:
    switches:
    - switch: sw_root
      nodes: node[01-04]
- topology: topo2
  cluster_default: False
  block:
    block_sizes:
      - 4
      - 16
    blocks:
    - block: b1
      nodes: node[01-04]
    - block: b2
      nodes: node[05-08]
    - block: b3
      nodes: node[09-12]
    - block: b4
      nodes: node[13-16]
- topology: topo3
  cluster_default: False
  flat: True
"""
"""topology.yaml(5) EXAMPLE, as the man page gives it (SchedMD/slurm doc/man/man5/topology.yaml.5)."""


def _write(tmp_path: Path, text: str, name: str = "topology.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_man_pages_example_reads_its_cluster_default(tmp_path: Path) -> None:
    conf = parse_topology_conf(_write(tmp_path, MAN_EXAMPLE))
    assert isinstance(conf, SlurmTree)
    assert [(s.name, s.nodes, s.line) for s in conf.switches] == [("sw_root", ("node01", "node02", "node03",
                                                                                "node04"), 5)]
    assert "topology `topo1`, the file's cluster_default" in conf.choice and "`topo2`" in conf.choice


def test_the_tree_is_the_one_its_topology_conf_gives() -> None:
    conf = parse_topology_conf(DATA / "topology-5leaf.yaml")
    same = parse_topology_conf(DATA / "tree-5leaf.conf")
    assert isinstance(conf, SlurmTree)
    assert [(s.name, s.nodes, s.switches) for s in conf.switches] == [(s.name, s.nodes, s.switches)
                                                                       for s in same.switches]
    assert conf.switches[0].line == 8 and conf.switches[-1].line == 18


def test_a_file_whose_one_placed_topology_is_a_block_reads_it(tmp_path: Path) -> None:
    text = (DATA / "topology-5leaf.yaml").read_text()
    racks = text[text.index("- topology: racks"):]  # the racks and the flat one: no cluster_default needed
    conf = parse_topology_conf(_write(tmp_path, racks, "topo"))  # a YAML by its first line, whatever its name
    same = parse_topology_conf(DATA / "block-nvl72.conf")
    assert isinstance(conf, SlurmBlocks)
    assert conf.block_sizes == same.block_sizes == (18, 36)
    assert [(b.name, b.nodes) for b in conf.blocks] == [(b.name, b.nodes) for b in same.blocks]
    assert conf.choice == "topology `racks`, its one tree or block topology"


@pytest.mark.parametrize(("text", "said"), [
    ("- topology: a\n  flat: true\n", "every topology is flat (a)"),
    (MAN_EXAMPLE.replace("cluster_default: True", "cluster_default: False"),
     "2 tree or block topologies (`topo1` (line 1), `topo2` (line 7)) and none of them is `cluster_default: true`"),
    ("- topology: t\n  tree:\n    switches:\n    - switch: s\n      node: n[1-2]\n",
     "topology.yaml:5: unknown key `node` in a switch of topology `t`; the keys allowed there are switch, "
     "children, nodes"),
    ("- topology: t\n  tree:\n    switches:\n    - switch: s1\n      nodes: n[1-2]\n    - switch: s2\n"
     "      nodes: n[2-3]\n    - switch: top\n      children: s[1-2]\n",
     "topology.yaml:6: node `n2` is under leaf switch `s2` and under `s1` (line 4)"),
    ("- topology: t\n  tree:\n    switches:\n    - switch: top\n      children: s9\n",
     "topology.yaml:4: switch `top` lists `s9` in Switches=, but no line defines a switch `s9`"),
    ("- topology: t\n  tree: {}\n  block: {}\n", "topology `t` defines block and tree of block, flat and tree"),
    ("- topology: t\n  tree: [\n", "topology.yaml:3: malformed YAML"),
    ("- cluster_default: true\n  tree: {}\n", "a topology without `topology: NAME`"),
])
def test_a_malformed_file_is_an_error_naming_its_line(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(InputError) as err:
        parse_topology_conf(_write(tmp_path, text))
    assert said in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_the_plan_says_which_topology_it_read(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "512",
                                    "--slurm-topology", str(DATA / "topology-5leaf.yaml"),
                                    "--nodelist", "gpu[0030-0045]", "--node-type", "dgx-h100",
                                    "--oversubscription", "2", "--top-k", "1"])
    assert out.exit_code == 0, out.output
    fabric = next(line for line in out.output.splitlines() if line.startswith("fabric:"))
    assert re.search(r"--slurm-topology \S+topology-5leaf\.yaml \(topology `tree5`, the file's cluster_default; "
                     r"a partition whose Topology= names `racks` runs on that one instead", fabric), fabric
    assert "2:1 oversubscribed" in fabric
