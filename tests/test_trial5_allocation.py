"""From user trial 5, on a real allocation (4 leaves of 32 DGX H100 hosts under 2 spines and a core):
pipeline traffic over an oversubscribed leaf uplink, a host list that is not the launched job's, the flags
errors name, overlapping --node-type hostlists, and the labels of a --node-topo or mixed allocation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.catalog import load_accelerator, load_cluster
from placement.cli import main
from placement.fabric import topology_from_slurm
from placement.loaders.hostlist import compress_hostlist, expand_hostlist
from placement.loaders.slurm import parse_topology_conf
from placement.topology import _group_ranks, _span, _span_listed

DATA = Path(__file__).parent / "data"
TP16 = DATA / "report" / "megatron_tp16.sh"  # NNODES=4 x 8: 32 ranks, tp16 pp2

TREE = """# 4 leaves of 32 DGX H100 nodes, 2 spines, a core
SwitchName=leaf01 Nodes=gpu-[001-032] LinkSpeed=400
SwitchName=leaf02 Nodes=gpu-[033-064] LinkSpeed=400
SwitchName=leaf03 Nodes=gpu-[065-096] LinkSpeed=400
SwitchName=leaf04 Nodes=gpu-[097-128] LinkSpeed=400
SwitchName=spine01 Switches=leaf[01-02]
SwitchName=spine02 Switches=leaf[03-04]
SwitchName=core Switches=spine[01-02]
"""

TRAIN_16_NODES = """#!/bin/bash
#SBATCH --nodes=16
#SBATCH --gpus-per-node=8
GPUS_PER_NODE=8
NNODES=$SLURM_NNODES
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $SLURM_NODEID pretrain_gpt.py \\
    --num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 \\
    --group-query-attention --num-query-groups 8 --swiglu \\
    --seq-length 8192 --max-position-embeddings 8192 \\
    --tensor-model-parallel-size 8 --sequence-parallel \\
    --pipeline-model-parallel-size 4 \\
    --micro-batch-size 1 --global-batch-size 128 \\
    --use-distributed-optimizer --bf16 --recompute-activations
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def tree(tmp_path: Path) -> str:
    path = tmp_path / "tree.conf"
    path.write_text(TREE)
    return str(path)


# -- A: pipeline point-to-point over an oversubscribed leaf uplink -------------------------------------------

def test_pipeline_crossing_counts_the_boundary_ranks_not_the_whole_group(tree):
    """tp4 pp4 on 8 + 8 hosts of two leaves: stages 0-1 under one leaf, 2-3 under the other.  Only stage 1 (and,
    backwards, stage 2) sends across: half of each leaf's GPUs; an interleaved pipeline's wrap-around from the
    last stage to the first makes it all of them."""
    hosts = expand_hostlist("gpu-[001-008,033-040]")
    cluster = load_cluster("dgx-h100")
    topo = topology_from_slurm(parse_topology_conf(Path(tree)), hosts, cluster, load_accelerator(cluster.accelerator),
                               oversubscription=2.0)
    span = topo.span(32, 4)  # pp groups: tp x cp x dp = 4 x 1 x 8 ranks apart
    top = span.top_level()
    assert span.crossing[top] == 1.0  # every group is split (what collectives share)
    assert span.chain_crossing[top] == 0.5
    assert span.ring_crossing[top] == 1.0


def _pp_seconds(tree: str, ratio: str, vpp: int) -> float:
    code, out, err = run("evaluate", "--model", "llama3-70b", "--seq-len", "8192", "--global-batch", "128",
                         "--slurm-topology", tree, "--nodelist", "gpu-[001-008,033-040]", "--node-type", "dgx-h100",
                         "--tp", "4", "--pp", "4", "--vpp", str(vpp), "--recompute", "full", "--oversubscription",
                         ratio, "--json")
    assert code == 0, err
    return json.loads(out)["breakdown"]["pp"]


def test_pipeline_slows_only_where_the_boundary_ranks_oversubscribe_the_uplink(tree):
    """bandwidth x r / max(1, r x f) with f = 0.5: no slowdown at 2:1, half the bandwidth at 4:1 (the trial priced
    2x and 4x, as if every GPU of the leaf sent across)."""
    one, two, four = (_pp_seconds(tree, r, 1) for r in ("1", "2", "4"))
    assert two == pytest.approx(one, rel=1e-3)
    assert four == pytest.approx(2 * one, rel=1e-2)  # the bandwidth term doubles, the latency stays
    # interleaved: the last stage sends back to the first, so every stage of each leaf has a crossing link
    one_v, two_v = (_pp_seconds(tree, r, 2) for r in ("1", "2"))
    assert two_v == pytest.approx(2 * one_v, rel=1e-2)


@pytest.mark.parametrize(("blocks", "num_gpus", "stride", "size"), [
    ((8, 64, 256), 256, 32, 8), ((8, 64, 256), 256, 64, 4), ((8, 64, 256), 256, 8, 2), ((8, 32, 256), 256, 16, 16),
    ((8, 128, 512), 512, 64, 8), ((72, 144, 288), 288, 16, 18), ((72, 288), 288, 4, 72), ((8, 16, 64), 64, 1, 64),
    ((8, 64), 64, 8, 8), ((8, 64), 64, 2, 4),
])
def test_regular_span_arithmetic_matches_listing_every_group(blocks, num_gpus, stride, size):
    """The catalog cluster's aligned shortcut for the boundary shares is the listed count."""
    arithmetic = _span(blocks, num_gpus, stride, size)
    g = np.arange(num_gpus)
    listed = _span_listed(np.stack([g // b for b in blocks]), _group_ranks(num_gpus, stride, size))
    assert arithmetic.chain_crossing == pytest.approx(listed.chain_crossing)
    assert arithmetic.ring_crossing == pytest.approx(listed.ring_crossing)
    assert arithmetic.members_within == listed.members_within


# -- B and C: the launched job against the allocation -----------------------------------------------------------

def test_a_nodelist_bigger_than_the_launched_job_is_an_error_naming_both(tree):
    code, _, err = run("audit", "--launch", str(TP16), "--model", "llama3-70b", "--slurm-topology", tree,
                       "--nodelist", "gpu-[031-038]", "--node-type", "dgx-h100")
    assert code == 2 and "Traceback" not in err
    assert "32 processes" in err and "NNODES=4" in err  # the files' world size, with its source
    assert "--nodelist gpu-[031-038] gives 8 hosts x 8 GPUs = 64" in err
    assert "--nodelist 'gpu-[031-034]'" in err  # the fix: the job's own hosts
    # fewer hosts than the job: the same error, not "--gpus", which a real allocation refuses
    code, _, err = run("audit", "--launch", str(TP16), "--model", "llama3-70b", "--slurm-topology", tree,
                       "--nodelist", "gpu-[031-036]", "--node-type", "dgx-h100")
    assert code == 2 and "6 hosts x 8 GPUs = 48" in err and "(--gpus)" not in err
    code, out, err = run("audit", "--launch", str(TP16), "--model", "llama3-70b", "--slurm-topology", tree,
                         "--nodelist", "gpu-[031-034]", "--node-type", "dgx-h100", "--json")
    assert code in (0, 1), err  # 1: an error-level finding (tp16 across nodes), not bad input
    data = json.loads(out)
    assert data["estimate"]["num_gpus"] == 32
    assert not any(f["kind"] == "world_size_differs" for f in data["findings"])


def test_sbatch_nodes_against_a_longer_nodelist_says_both_node_counts(tree, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(TRAIN_16_NODES)
    code, _, err = run("audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology", tree,
                       "--nodelist", "gpu-[001-020]", "--node-type", "dgx-h100")
    assert code == 2
    assert "#SBATCH --nodes=16" in err and "20 hosts" in err and "--nodelist 'gpu-[001-016]'" in err
    assert "not a multiple of dp" not in err


def test_a_layout_that_does_not_divide_an_allocation_asks_for_the_nodelist(tree, tmp_path):
    """No world size in the files: the layout check names the host list, not --gpus."""
    script = tmp_path / "train.sh"
    script.write_text(TP16.read_text().replace("torchrun $DISTRIBUTED_ARGS", "python"))
    code, _, err = run("audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology", tree,
                       "--nodelist", "gpu-[031-036]", "--node-type", "dgx-h100")
    assert code == 2
    assert "does not divide the 48 GPUs" in err and "--nodelist" in err and "(--gpus)" not in err
    assert "multiple of 4 hosts" in err


@pytest.mark.parametrize("node_type", [["dgx-h1000"], ["dgx-h100", "gpu-[001-008]=dgx-h300"]])
def test_an_unknown_node_type_is_named_as_node_type(tree, node_type):
    flags = [x for t in node_type for x in ("--node-type", t)]
    code, _, err = run("evaluate", "--model", "llama3-70b", "--slurm-topology", tree, "--nodelist", "gpu-[001-016]",
                       *flags, "--tp", "8", "--pp", "2")
    assert code == 2
    assert "--node-type" in err and "--cluster" not in err and "no cluster of that name" in err
    assert node_type[-1].split("=")[-1] in err


# -- D: overlapping --node-type hostlists ------------------------------------------------------------------------

def test_overlapping_node_type_hostlists_are_an_error(tree):
    code, _, err = run("evaluate", "--model", "llama3-70b", "--slurm-topology", tree, "--nodelist", "gpu-[001-016]",
                       "--node-type", "gpu-[001-010]=dgx-h100", "--node-type", "gpu-[009-016]=dgx-h200",
                       "--tp", "8", "--pp", "2")
    assert code == 2
    assert "gpu-009, gpu-010" in err
    assert "--node-type gpu-[001-010]=dgx-h100" in err and "--node-type gpu-[009-016]=dgx-h200" in err


# -- E: labels ----------------------------------------------------------------------------------------------------

def test_a_pcie_node_topo_labels_the_in_node_level_from_the_matrix(tree):
    args = ["audit", "--launch", str(TP16), "--model", "llama3-70b", "--slurm-topology", tree, "--nodelist",
            "gpu-[031-034]", "--node-type", "dgx-h100"]
    matrix = str(DATA / "nvsmi" / "pcie-8x4090.txt")
    code, out, err = run(*args, "--node-topo", matrix, "--json")
    assert code in (0, 1), err  # 1: an error-level finding (tp16 across nodes), not bad input
    est = json.loads(out)["estimate"]
    assert {k: est["node_topo"][k] for k in ("path", "in_node_level")} == {"path": matrix, "in_node_level": "pcie"}
    assert "where dgx-h100's nodes are one nvlink4 domain at 450 GB/s" in est["node_topo"]["note"]
    levels = est["crossings"]["tp"]["highest_level"]
    assert "pcie" in levels and "nvlink4" not in levels
    code, text, _ = run(*args, "--node-topo", matrix)
    assert f"in-node links from --node-topo {matrix} (pcie)" in text
    code, out, _ = run(*args, "--node-topo", str(DATA / "nvsmi" / "pcie-8x-nvbridge-pairs.txt"), "--json")
    assert json.loads(out)["estimate"]["node_topo"]["in_node_level"] == "nvlink bridge"
    code, out, _ = run(*args, "--json")
    est = json.loads(out)["estimate"]
    assert est["node_topo"] is None and "nvlink4" in est["crossings"]["tp"]["highest_level"]


def test_a_mixed_allocation_header_names_its_design_once(tree):
    code, out, err = run("evaluate", "--model", "llama3-70b", "--slurm-topology", tree, "--nodelist", "gpu-[001-016]",
                         "--node-type", "gpu-[001-008]=dgx-h100", "--node-type", "gpu-[009-016]=dgx-h200",
                         "--tp", "8", "--pp", "2")
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("llama3-70b on 128 x mixed(dgx-h100+dgx-h200), seq")
    assert first.count("mixed(") == 1


@pytest.mark.parametrize("hosts", [
    ["gpu-031", "gpu-032", "gpu-033", "gpu-035", "login1"], ["n9", "n10", "n11"], ["n3", "n1", "n2"],
    ["a1b3", "a1b4"], ["x"], ["n08", "n09", "n10", "n07"],
])
def test_compress_hostlist_round_trips_in_order(hosts):
    assert expand_hostlist(compress_hostlist(hosts)) == hosts


def test_a_pipeline_pays_the_leaf_uplinks_under_a_non_blocking_spine_too(tmp_path: Path) -> None:
    """A user trial: four 32-node leaves with 2:1 uplinks, tp8 pp4 with one stage per leaf. Under one spine the
    pipeline term doubled at 2:1; with two non-blocking spines and a core above the same leaves it stayed at the 1:1
    price (the hop was priced at the core's crossing share, 0.5, alone). Every stage boundary crosses a 2:1 leaf
    uplink either way: both fabrics now price the same pipeline."""
    leaves = "".join(f"SwitchName=leaf{i} Nodes=h[{32 * i - 31:03d}-{32 * i:03d}]\n" for i in range(1, 5))
    confs = {"tree": leaves + "SwitchName=spine1 Switches=leaf[1-2]\nSwitchName=spine2 Switches=leaf[3-4]\n"
                              "SwitchName=core Switches=spine[1-2]\n",
             "flat": leaves + "SwitchName=spine Switches=leaf[1-4]\n"}
    pp = {}
    for name, text in confs.items():
        conf = tmp_path / f"{name}.conf"
        conf.write_text(text)
        for ratio in ("1", "2"):
            code, out, err = run("evaluate", "--model", "llama3-70b", "--slurm-topology", str(conf), "--nodelist",
                                 "h[017-032],h[049-064],h[081-096],h[113-128]", "--node-type", "dgx-h100",
                                 "--oversubscription", ratio, "--tp", "8", "--pp", "4", "--mbs", "1", "--seq-len",
                                 "8192", "--global-batch", "512", "--recompute", "selective", "--json")
            assert code == 0, err
            pp[name, ratio] = json.loads(out)["breakdown"]["pp"]
    assert pp["tree", "2"] == pytest.approx(pp["flat", "2"], rel=1e-9)
    assert pp["tree", "2"] > 1.9 * pp["tree", "1"]


def test_a_mixed_allocation_prices_each_tier_as_its_weakest_design():
    """A QA run: a mixed allocation took its network tiers from the first design by name alone (an oversubscribed
    design of the user's, sorting second, was priced 1:1), and its fabric line named "cluster mixed(...)'s file",
    which does not exist.  Each tier is now the largest oversubscription and latency of the designs."""
    from placement.fabric import mixed_design

    h100, h200 = load_cluster("dgx-h100"), load_cluster("dgx-h200")
    slow = h200.model_copy(update={"name": "zz-h200-2to1", "tiers": [
        h200.tiers[0].model_copy(update={"oversubscription": 2.0, "latency_s": 6e-6}), *h200.tiers[1:]]})
    mixed, _ = mixed_design([(h100, load_accelerator(h100.accelerator)), (slow, load_accelerator(slow.accelerator))])
    assert mixed.name == "mixed(dgx-h100+zz-h200-2to1)"
    assert mixed.tiers[0].oversubscription == 2.0 and mixed.tiers[0].latency_s == 6e-6
    assert h100.tiers[0].oversubscription == 1.0  # the first design's, which the mix had taken


def test_a_mixed_allocation_fabric_line_names_the_designs_files():
    out = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--slurm-topology", str(DATA / "slurm" /
                                    "tree-5leaf.conf"), "--nodelist", "gpu[0030-0037]", "--node-type", "dgx-h100",
                                    "--node-type", "gpu[0034-0037]=dgx-h200", "--seq-len", "4096",
                                    "--global-batch", "64"])
    assert out.exit_code == 0, out.output
    fabric = next(x for x in out.stdout.splitlines() if x.startswith("fabric:"))
    assert "the node designs' files, the largest of dgx-h100, dgx-h200" in fabric and "mixed(" not in fabric
