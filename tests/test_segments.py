"""SLURM segments on GB200 NVL72 (`sbatch --segment N`): a job's trays come N at a time from one rack, so a
256-GPU job with segment 16 lands as 4 racks x 64 GPUs and an EP group of up to 64 stays inside NVLink."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from placement.catalog import load_accelerator, load_cluster
from placement.cli import main
from placement.errors import InputError
from placement.fabric import topology_from_slurm
from placement.loaders.slurm import parse_topology_conf
from placement.topology import Topology

SLURM = Path(__file__).parent / "data" / "slurm"
NVL72 = load_cluster("gb200-nvl72")
GB200 = load_accelerator(NVL72.accelerator)
NODES_256 = "1, 2, 4, 8, 16"
"""The divisors of 64 nodes (256 GPUs) that fit one 18-tray rack."""


def nvl72(num_gpus: int, segment_nodes: int | None = None) -> Topology:
    return Topology(NVL72, GB200, num_gpus=num_gpus, segment_nodes=segment_nodes)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# -- the layout -------------------------------------------------------------------------------------


@pytest.mark.parametrize("segment", [None, 16])  # None: the catalog default, 16
def test_256_gpus_in_segments_of_16_are_four_racks_of_64(segment: int | None) -> None:
    t = nvl72(256, segment)
    assert NVL72.segment_nodes == 18 and t.segment_nodes == 16
    assert [lv.block_gpus for lv in t.levels] == [64, 256]
    racks, counts = (x.tolist() for x in np.unique(t.block_of[0], return_counts=True))
    assert racks == [0, 1, 2, 3] and counts == [64] * 4
    assert sum(1 for _, d in t.graph.nodes(data=True) if d["kind"] == "scale_up_switch") == 4


def test_segment_zero_fills_racks_as_before() -> None:
    t = nvl72(256, 0)
    assert t.segment_nodes is None
    assert [lv.block_gpus for lv in t.levels] == [72, 256]  # 72 + 72 + 72 + 40


@pytest.mark.parametrize("ep", [32, 64])
def test_ep_group_innermost_stays_on_nvlink_with_segments_and_straddles_without(ep: int) -> None:
    """EP laid innermost (tp 1, etp 1): groups of `ep` consecutive ranks."""
    inside = nvl72(256, 16).span(1, ep)
    assert inside.members_within[0] == ep and inside.top_level() == 0
    filled = nvl72(256, 0).span(1, ep)
    assert filled.members_within[0] < ep and filled.top_level() == 1  # a group straddles the 72-GPU boundary
    assert 0.0 < filled.crossing[1] <= 1.0 and inside.crossing[1] == 0.0


def test_cluster_default_is_the_largest_divisor_of_the_node_count_that_fits_a_rack() -> None:
    """Megatron-Bridge's launcher rule: --segment = the largest divisor of the node count <= 18."""
    assert nvl72(144).segment_nodes is None  # 36 trays: 18 divides them, so racks fill whole
    assert [lv.block_gpus for lv in nvl72(144).levels] == [72, 144]
    assert nvl72(72).segment_nodes is None
    assert nvl72(64).segment_nodes is None  # 16 trays: the whole job is one segment in one rack
    assert nvl72(576).segment_nodes is None and [lv.block_gpus for lv in nvl72(576).levels] == [72, 576]
    odd = nvl72(80)  # 20 trays: segments of 10, two racks of 40 GPUs
    assert odd.segment_nodes == 10 and [lv.block_gpus for lv in odd.levels] == [40, 80]


def test_explicit_segment_that_fills_a_rack_equals_no_segment() -> None:
    assert [lv.block_gpus for lv in nvl72(144, 18).levels] == [lv.block_gpus for lv in nvl72(144, 0).levels]


# -- bad segments -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("num_gpus", "segment", "message"), [
    (256, 12, "--segment 12: the job's 64 nodes are not a whole number of 12-node segments (SLURM requires the "
              "node count to be a multiple of --segment); use a divisor of 64 that fits one gb200-nvl72 NVLink "
              f"domain (18 nodes): {NODES_256}"),
    (256, 20, "--segment 20: 20 nodes x 4 GPUs = 80 GPUs is more than one gb200-nvl72 NVLink domain holds "
              "(72 GPUs = 18 nodes), and a segment lies inside one domain; use a divisor of the job's 64 nodes "
              f"that fits: {NODES_256}"),
    (256, -1, "--segment -1: a segment is a number of nodes, at least 1 (0 = no segment)"),
    (2, 4, "--segment 4: the job's 2 GPUs are less than one gb200-nvl72 node (4 GPUs), and a segment is whole "
           "nodes: drop --segment or ask for 4 GPUs"),
])
def test_bad_segment_is_an_input_error_naming_value_and_fix(num_gpus: int, segment: int, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        nvl72(num_gpus, segment)


def test_segment_on_an_8_gpu_node_cluster_is_an_input_error() -> None:
    dgx = load_cluster("dgx-h100")
    with pytest.raises(InputError, match=re.escape(
            "--segment 2: a dgx-h100 scale-up domain (8 GPUs) is no more than one node (8 GPUs), so each node is "
            "already a segment of its own")):
        Topology(dgx, load_accelerator(dgx.accelerator), num_gpus=64, segment_nodes=2)
    assert Topology(dgx, load_accelerator(dgx.accelerator), num_gpus=64, segment_nodes=0).segment_nodes is None


def test_cluster_file_segment_is_validated() -> None:
    with pytest.raises(ValidationError, match=re.escape(
            "segment_nodes (19) x gpus_per_node (4) = 76 GPUs is more than one scale-up domain holds "
            "(scale_up.size 72 = 18 nodes); a segment lies inside one domain: use at most 18")):
        NVL72.model_validate(NVL72.model_dump() | {"segment_nodes": 19})
    dgx = load_cluster("dgx-h100")
    with pytest.raises(ValidationError, match=re.escape("segment_nodes (2) is set but one scale-up domain (8 GPUs)")):
        dgx.model_validate(dgx.model_dump() | {"segment_nodes": 2})


@pytest.mark.parametrize(("args", "needle"), [
    (["--cluster", "gb200-nvl72", "--gpus", "256", "--segment", "12"], "use a divisor of 64"),
    (["--cluster", "gb200-nvl72", "--gpus", "256", "--segment", "20"], "80 GPUs is more than one"),
    (["--cluster", "dgx-h100", "--gpus", "64", "--segment", "2"], "drop it"),
])
def test_cli_bad_segment_exits_2(args: list[str], needle: str) -> None:
    code, out, err = run("plan", "--model", "llama3-8b", *args)
    assert code == 2 and out == ""
    assert err.startswith("placement: --segment ") and needle in err and "Traceback" not in err


# -- SLURM topology/block ---------------------------------------------------------------------------


def block_topo(hosts: str, segment: int | None) -> Topology:
    from placement.loaders.hostlist import expand_hostlist

    return topology_from_slurm(parse_topology_conf(SLURM / "block-nvl72.conf"), expand_hostlist(hosts), NVL72,
                               GB200, segment_nodes=segment)


def test_block_allocation_records_a_segment_it_agrees_with() -> None:
    t = block_topo("nvl[001-016,019-034]", 16)  # 16 trays from each of two racks
    assert t.segment_nodes == 16
    assert block_topo("nvl[001-016,019-034]", None).segment_nodes is None


@pytest.mark.parametrize(("hosts", "segment", "needle"), [
    ("nvl[001-012]", 8, "the job's 12 hosts are not a whole number of 8-node segments"),
    ("nvl[001-018,019-036]", 36, "more nodes than the base block size 18"),
    ("nvl[001-012,019-030]", 8, "block `rack1`"),  # 12 + 12 hosts: a multiple of 8 in all, not per rack
])
def test_block_allocation_that_disagrees_with_the_segment_is_an_input_error(hosts: str, segment: int,
                                                                           needle: str) -> None:
    with pytest.raises(InputError, match=re.escape(needle)):
        block_topo(hosts, segment)


def test_segment_with_a_tree_topology_exits_2() -> None:
    code, _, err = run("plan", "--model", "llama3-8b", "--slurm-topology", str(SLURM / "tree-5leaf.conf"),
                       "--nodelist", "gpu[0001-0004]", "--node-type", "dgx-h100", "--segment", "2")
    assert code == 2 and "topology/tree file" in err


# -- the must-show: DeepSeek-V3 on 256 GB200 GPUs -------------------------------------------


def test_deepseek_v3_256_gpus_keeps_every_ep_group_in_one_rack() -> None:
    # the EP all-to-all exposed (no 1F1B A2A overlap, which Megatron runs only interleaved under a pipeline): the
    # best plan keeps each group of 64 in one 16-tray segment
    code, out, err = run("--reproducible", "plan", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus",
                         "256", "--no-ep-comm-overlap", "--json")
    assert code == 0, err
    best = json.loads(out)["plans"][0]
    assert best["segment_nodes"] == 16
    lay = best["layout"]
    assert lay["ep"] * lay["etp"] <= 64  # a group wider than one segment could not stay in a rack
    ep = best["crossings"]["ep"]
    assert ep["highest_level"]["nvlink5-nvl72"] == ep["groups"] and ep["highest_level"]["leaf"] == 0
    # the rank table says the same: every EP group's GPUs share one NVLink rack
    rack_of = nvl72(256).block_of[0]
    racks: dict[tuple[int, int, int], set[int]] = {}
    for row in best["mapping"]:
        c = row["coords"]
        gpu = int(row["host"].removeprefix("host")) * NVL72.gpus_per_node + row["local_gpu"]
        racks.setdefault((c["pp"], c["etp"], c["edp"]), set()).add(int(rack_of[gpu]))
    assert len(racks) == ep["groups"] and all(len(r) == 1 for r in racks.values())


def test_plan_table_names_the_segment() -> None:
    code, out, _ = run("plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--gpus", "256", "--top-k", "1")
    assert code == 0 and "(gb200-nvl72, segment 16 nodes)" in out
    code, out, _ = run("plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--gpus", "64", "--top-k", "1",
                       "--segment", "0")
    assert code == 0 and "segment" not in out.splitlines()[0]


def test_launch_sbatch_asks_for_whole_nodes_and_no_segment_its_pinned_hosts_break(tmp_path) -> None:
    """A user trial: a GB200 plan priced on 9 + 9 trays of two racks wrote `#SBATCH --segment=18` (a whole rack)
    beside `#SBATCH --nodelist=nvl[001-009,019-027]`, which no block can hold, and asked for no CPUs while its price
    binds every rank to its NUMA node."""
    from click.testing import CliRunner

    from placement.cli import main

    conf = Path(__file__).parent / "data" / "slurm" / "block-nvl72.conf"
    got = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--slurm-topology", str(conf), "--nodelist",
                                    "nvl[001-009,019-027]", "--node-type", "gb200-nvl72", "--seq-len", "8192",
                                    "--global-batch", "128", "--top-k", "1", "--emit", "megatron", "--out",
                                    str(tmp_path)])
    assert got.exit_code == 0, got.output
    sbatch = (tmp_path / "launch.sbatch").read_text().splitlines()
    assert "#SBATCH --nodelist=nvl[001-009,019-027]" in sbatch
    assert not any(line.startswith("#SBATCH --segment") for line in sbatch)
    assert "#SBATCH --exclusive" in sbatch and "#SBATCH --mem=0" in sbatch
