"""Node ranks that SLURM gives (torchrun --node_rank $SLURM_NODEID under srun, or srun's own tasks as ranks) run over
the job's nodes in SLURM's host order (hostlist_sort: SLURM_NODEID numbers the nodes so), whatever order --nodelist is
written in.  A QA trial audited `srun torchrun --node_rank $SLURM_NODEID ...` (tp 8, pp 4, dp 4 on 16 H100 nodes under
a 4:1 tree) with `--nodelist 'gpu[0036-0039],gpu[0030-0035],gpu[0040-0045]'`: it was priced on the written order
(17.455 s, half its data-parallel groups across the spine) and told to move 10 of 16 node ranks to gpu0030,
gpu0031, ..., the order the job already runs in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

TOPOLOGY = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"
ARGS = ("pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --num-layers 80 "
        "--hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 --num-query-groups 8 "
        "--group-query-attention --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 512 --bf16 --swiglu --normalization RMSNorm --position-embedding-type rope "
        "--untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 128256 "
        "--use-distributed-optimizer --sequence-parallel")
LAUNCHES = {
    "torchrun": ("#!/bin/bash\n#SBATCH --nodes=16\n#SBATCH --ntasks-per-node=1\nsrun torchrun --nproc_per_node 8 "
                 "--nnodes 16 --node_rank $SLURM_NODEID --master_addr gpu0030 --master_port 29500 " + ARGS + "\n"),
    "srun python": ("#!/bin/bash\n#SBATCH --nodes=16\n#SBATCH --ntasks-per-node=8\nsrun python " + ARGS + "\n"),
}
WRITTEN = "gpu[0036-0039],gpu[0030-0035],gpu[0040-0045]"


def _audit(tmp_path: Path, launch: str, nodelist: str) -> dict:
    script = tmp_path / "job.sh"
    script.write_text(LAUNCHES[launch])
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology",
                                    str(TOPOLOGY), "--nodelist", nodelist, "--node-type", "dgx-h100",
                                    "--oversubscription", "4", "--json"])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    return json.loads(out.stdout)


@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_slurms_node_ranks_run_in_slurms_host_order(tmp_path: Path, launch: str) -> None:
    written = _audit(tmp_path, launch, WRITTEN)
    sorted_ = _audit(tmp_path, launch, "gpu[0030-0045]")
    est = written["estimate"]
    # the price does not depend on how the nodelist is written: SLURM numbers the nodes the same
    assert est["step_time_s"] == sorted_["estimate"]["step_time_s"]
    assert est["mapping_compact"]["host_order"] == [f"gpu{i:04d}" for i in range(30, 46)]
    # each pipeline stage's 4 nodes (gpu0030-0033, ...) share a leaf: no data-parallel group crosses the spine
    assert est["crossings"]["dp"]["highest_level"]["spine"] == 0
    text = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "job.sh"), "--model", "llama3-70b",
                                     "--slurm-topology", str(TOPOLOGY), "--nodelist", WRITTEN, "--node-type",
                                     "dgx-h100", "--oversubscription", "4"]).output
    assert "the node ranks are SLURM's" in text and "however --nodelist is written" in text
    assert "gpu0036 gpu0037 gpu0038 gpu0039 gpu0030" not in text  # no move proposed from the written order


def test_the_assumption_names_slurms_numbering_however_the_nodelist_is_written(tmp_path: Path) -> None:
    """A nodelist written in name order was said to run in 'the allocation's order', as if the written order were
    what SLURM_NODEID follows; slurmctld numbers a job's nodes by its node table, which it sorts by name
    (src/slurmctld/read_config.c _sort_node_record_table_ptr)."""
    said = _audit(tmp_path, "torchrun", "gpu[0030-0045]")["layout"]["unstated"]["host_order"]
    assert "the node ranks are SLURM's" in said and "node table's order, by name" in said, said
    assert "SwitchAsNodeRank" not in said  # the file's leaves are in name order: the ranking changes nothing


SWAPPED = ("SwitchName=leafA Nodes=gpu[0009-0016]\nSwitchName=leafB Nodes=gpu[0001-0008]\n"
           "SwitchName=spine Switches=leafA,leafB\n")


@pytest.mark.parametrize(("conf", "param"), [
    (SWAPPED, "TopologyParam=SwitchAsNodeRank"),
    ("BlockName=b1 Nodes=gpu[0009-0016]\nBlockName=b2 Nodes=gpu[0001-0008]\nBlockSizes=8,16\n",
     "TopologyParam=BlockAsNodeRank"),
])
def test_a_topology_whose_leaves_are_not_in_name_order_names_slurms_ranking_by_leaf(tmp_path: Path, conf: str,
                                                                                     param: str) -> None:
    """slurm.conf's TopologyParam=SwitchAsNodeRank (BlockAsNodeRank) makes slurmctld number the nodes leaf switch by
    leaf switch (block by block) in the file's order (topology_p_generate_node_ranking): with leafA (gpu0009-0016)
    listed before leafB (gpu0001-0008) node rank 0 is then gpu0009, not gpu0001; the audit, which cannot read
    slurm.conf, says both."""
    topology = tmp_path / "topology.conf"
    topology.write_text(conf)
    script = tmp_path / "job.sh"
    script.write_text(LAUNCHES["torchrun"].replace("gpu0030", "gpu0001"))
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology",
                                    str(topology), "--nodelist", "gpu[0001-0016]", "--node-type", "dgx-h100",
                                    "--json"])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    said = json.loads(out.stdout)["layout"]["unstated"]["host_order"]
    assert "assumed node rank k on the k-th of them (gpu0001, gpu0002, gpu0003 ...)" in said, said
    assert f"unless slurm.conf's {param}, which numbers them " in said and ": gpu0009, gpu0010, gpu0011 ..." in said


INTERLEAVED = "SwitchName=leafA Nodes=gpu[01,03,05,07]\nSwitchName=leafB Nodes=gpu[02,04,06,08]\n" \
              "SwitchName=spine Switches=leafA,leafB\n"


@pytest.mark.parametrize("param", [None, "SwitchAsNodeRank", "Dragonfly,switchasnoderank"])
def test_slurm_conf_switch_as_node_rank_is_priced(tmp_path: Path, param: str | None) -> None:
    """slurm.conf's TopologyParam=SwitchAsNodeRank numbers a job's nodes leaf switch by leaf switch (slurm
    src/plugins/topology/tree/topology_tree.c topology_p_generate_node_ranking; SLURM matches it case-insensitively).
    A QA trial: leaves of gpu[01,03,05,07] and gpu[02,04,06,08], `srun python pretrain_gpt.py` (tp 8, pp 2, dp 4) on
    gpu[01-08] at 4:1 was priced in name order, each data-parallel group across the spine (2.970 s), with the
    ranking only named; given the cluster's slurm.conf (--slurm-conf) the audit prices the order SLURM gives, each
    group inside a leaf, and without the option the price is the name order's, as before."""
    topology = tmp_path / "topology.conf"
    topology.write_text(INTERLEAVED)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=8\n#SBATCH --ntasks-per-node=8\nsrun python "
                      + ARGS.replace("--pipeline-model-parallel-size 4", "--pipeline-model-parallel-size 2") + "\n")
    flags = ["audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology", str(topology),
             "--nodelist", "gpu[01-08]", "--node-type", "dgx-h100", "--oversubscription", "4", "--json"]
    plain = json.loads(CliRunner().invoke(main, flags).stdout)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c1\nTopologyPlugin=topology/tree\n"
                    + (f"TopologyParam={param}\n" if param else "") + "NodeName=gpu[01-08] Gres=gpu:8\n")
    out = CliRunner().invoke(main, [*flags, "--slurm-conf", str(conf)])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    doc = json.loads(out.stdout)
    assert plain["estimate"]["crossings"]["dp"]["highest_level"]["spine"] == 16
    said = doc["layout"]["unstated"]["host_order"]
    if param is None:
        assert doc["estimate"]["step_time_s"] == plain["estimate"]["step_time_s"]
        assert f"{conf}: no TopologyParam" in said and "unless" not in said
        return
    assert doc["estimate"]["mapping_compact"]["host_order"] == [f"gpu0{i}" for i in (1, 3, 5, 7, 2, 4, 6, 8)]
    assert doc["estimate"]["crossings"]["dp"]["highest_level"]["spine"] == 0
    assert doc["estimate"]["step_time_s"] < plain["estimate"]["step_time_s"]
    assert f"{conf}:3: TopologyParam={param}" in said


def test_slurm_conf_needs_a_topology_and_key_value_lines(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(LAUNCHES["srun python"])
    conf = tmp_path / "slurm.conf"
    conf.write_text("TopologyParam=SwitchAsNodeRank\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-70b", "--cluster",
                                    "dgx-h100", "--slurm-conf", str(conf)])
    assert out.exit_code == 2 and "give that topology with --slurm-topology" in out.output
    conf.write_text("# nothing here\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology",
                                    str(TOPOLOGY), "--nodelist", "gpu[0030-0045]", "--node-type", "dgx-h100",
                                    "--slurm-conf", str(conf)])
    assert out.exit_code == 2 and "is not a slurm.conf" in out.output and "Traceback" not in out.output
