"""`placement audit` after a user trial on real allocations (SLURM topology files and host lists with real launch
files): what the files start per host must be what the hosts hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from megatron_scripts import mixtral_script

from placement.cli import main

SLURM = Path(__file__).parent / "data" / "slurm"
TORCHTITAN = Path(__file__).parent / "data" / "audit" / "torchtitan"
GB200 = ["--slurm-topology", str(SLURM / "block-nvl72.conf"), "--nodelist", "nvl[001-016]",
         "--node-type", "gb200-nvl72", "--model", "mixtral-8x7b"]


def _audit(script: Path, *extra: str):
    return CliRunner().invoke(main, ["audit", "--launch", str(script), *GB200, *extra])


def test_eight_processes_per_four_gpu_tray_are_refused(tmp_path: Path) -> None:
    """Megatron-LM's Mixtral example starts `torchrun --nproc_per_node 8`; on GB200 trays of 4 GPUs local ranks 4-7
    have no GPU and the job does not start.  It was priced as 4 ranks per tray, with findings and a best plan."""
    script = tmp_path / "train.sh"
    script.write_text(mixtral_script(tmp_path, "").read_text().replace("--nnodes 8", "--nnodes $SLURM_NNODES"))
    res = _audit(script)
    assert res.exit_code == 2, res.output
    assert "start 8 processes per node" in res.stderr and "hosts have 4 GPUs each (gb200-nvl72 nodes)" in res.stderr
    assert "local ranks 4-7 of every host would have no GPU" in res.stderr
    assert "torchrun --nproc_per_node 4" in res.stderr
    # the same script started 4 per tray is audited
    four = tmp_path / "four.sh"
    four.write_text(script.read_text().replace("--nproc-per-node 8", "--nproc-per-node 4"))
    ok = _audit(four, "--json")
    assert ok.exit_code in (0, 1), ok.output
    assert "processes per node" not in ok.stderr


def test_fewer_processes_than_a_host_holds_are_refused_on_an_allocation(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(mixtral_script(tmp_path, "").read_text().replace("--nproc-per-node 8", "--nproc-per-node 2")
                      .replace("--nnodes 8", "--nnodes $SLURM_NNODES"))
    res = _audit(script)
    assert res.exit_code == 2, res.output
    assert "start 2 processes per node" in res.stderr and "leave 2 GPUs of each host idle" in res.stderr


def test_a_crossing_whose_remedy_is_slower_says_so_with_both_prices(tmp_path: Path) -> None:
    """DeepSeek-V3 with ep 64 across 8 nodes: its EP all-to-all leaves the node, and the best layout with ep <= 8 is
    slower; the finding said that layout "saves 0.000 s per step" (a negative saving clamped)."""
    toml = (TORCHTITAN / "deepseek_v3_671b.toml").read_text()
    toml = re.sub(r"(?m)^expert_parallel_degree = .*$", "expert_parallel_degree = 64", toml)
    toml = re.sub(r"(?m)^tensor_parallel_degree = .*$", "tensor_parallel_degree = 8", toml)
    toml = re.sub(r"(?m)^pipeline_parallel_degree = .*$", "pipeline_parallel_degree = 1", toml)
    toml = re.sub(r"(?m)^local_batch_size = .*$", "local_batch_size = 8", toml)
    path = tmp_path / "dsv3.toml"
    path.write_text(toml)
    res = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "deepseek-v3", "--slurm-topology",
                                    str(SLURM / "tree-5leaf.conf"), "--nodelist", "gpu[0038-0101]",
                                    "--node-type", "dgx-h100", "--json"])
    assert res.exit_code in (0, 1), res.output
    out = json.loads(res.stdout)
    ep = [f for f in out["findings"] if f["kind"] == "ep_crosses_node"]
    assert ep, [f["kind"] for f in out["findings"]]
    msg = ep[0]["message"]
    m = re.search(r"is no faster \(([\d.]+) s per step against the job's ([\d.]+) s\)", msg)
    assert m and float(m.group(1)) >= float(m.group(2)), msg
    assert "saves 0.000" not in msg and ep[0]["cost_s"] == 0.0


NVSMI = Path(__file__).parent / "data" / "nvsmi"
TP8 = """GPUS_PER_NODE=8
NNODES=4
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK pretrain_gpt.py \\
    --num-layers 80 --hidden-size 8192 --num-attention-heads 64 \\
    --swiglu --ffn-hidden-size 28672 --group-query-attention --num-query-groups 8 \\
    --seq-length 8192 --max-position-embeddings 8192 \\
    --tensor-model-parallel-size 8 --sequence-parallel --pipeline-model-parallel-size 2 \\
    --micro-batch-size 1 --global-batch-size 64 --use-distributed-optimizer --bf16
"""


def test_tp_inside_a_node_of_nvlink_pairs_is_named_as_ringing_over_pcie(tmp_path: Path) -> None:
    """A user trial: on nodes whose GPUs share NVLink only in pairs (the rest PCIe), TP 8 stays in the node but rings
    over PCIe; the crossings said it stayed in an "nvlink bridge" block at the catalog's 369 GB/s, the fabric line
    too, and no finding named it, nor the matrix's contradiction of --node-type dgx-h100."""
    script = tmp_path / "train.sh"
    script.write_text(TP8)
    pairs = str(NVSMI / "pcie-8x-nvbridge-pairs.txt")
    args = ["audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology",
            str(SLURM / "tree-5leaf.conf"), "--nodelist", "gpu[0001-0004]", "--node-type", "dgx-h100",
            "--node-topo", pairs]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code in (0, 1), res.output
    out = json.loads(res.stdout)
    ring = out["estimate"]["crossings"]["tp"]["in_node"]
    assert ring == {"gpus": 8, "bandwidth_bytes_per_s": 24e9, "link": "PCIe"}
    assert out["estimate"]["node_topo"]["note"].startswith(f"--node-topo {pairs}: a ring of all 8 GPUs")
    finding = next(f for f in out["findings"] if f["kind"] == "tp_over_pcie")
    assert "ring over PCIe" in finding["message"] and "where 2 GPUs share NVLink at 100 GB/s" in finding["message"]
    assert "the best layout with tp <= 2" in finding["message"] and finding["cost_s"] > 0
    text = CliRunner().invoke(main, args)
    assert "nvlink bridge: PCIe 24 GB/s" in text.stdout  # the crossings table's slowest tier
    assert "rings of 2 at 100 GB/s, of 4 and 8 at 24 GB/s per GPU (raw link rate" in text.stdout  # the fabric line
    assert "where dgx-h100's nodes are one nvlink4 domain at 450 GB/s" in text.stderr
    # on the node type's own links (NVSwitch, every pair NV18) nothing of it
    hgx = CliRunner().invoke(main, [*args[:-1], str(NVSMI / "h100-hgx.txt"), "--json"])
    got = json.loads(hgx.stdout)
    assert not any(f["kind"] == "tp_over_pcie" for f in got["findings"])
    assert got["estimate"]["node_topo"]["note"] is None and "one nvlink4 domain" not in hgx.stderr


MAXTEXT_RUN = ("python3 -m maxtext.trainers.pre_train.train ${MAXTEXT_REPO_ROOT:-$PWD}/src/maxtext/configs/models/"
               "llama3.1_405b.yml run_name=r model_name=llama3.1-405b per_device_batch_size=1 "
               "max_target_length=8192 ici_fsdp_parallelism=8 dcn_fsdp_parallelism=4 remat_policy=full\n")


def test_a_maxtext_yaml_the_command_does_not_load_is_refused(tmp_path: Path) -> None:
    """A user trial: beside a script whose command loads configs/models/llama3.1_405b.yml, another model's YAML
    (model_name llama3-70b, per_device_batch_size 4) was merged in and priced, named nowhere."""
    from placement.audit.launch import parse_launch
    from placement.errors import InputError

    script = tmp_path / "run.sh"
    script.write_text(MAXTEXT_RUN)
    other = tmp_path / "gpu_llama3_70b.yml"
    other.write_text('model_name: "llama3-70b"\nper_device_batch_size: 4\n')
    try:
        parse_launch([script, other])
    except InputError as err:
        msg = str(err)
    else:
        raise AssertionError("another model's YAML was accepted")
    assert "trains with config" in msg and "llama3.1_405b.yml" in msg and str(other) in msg
    assert "--launch with a file named llama3.1_405b.yml" in msg
    own = tmp_path / "llama3.1_405b.yml"
    own.write_text('model_name: "llama3.1-405b"\nper_device_batch_size: 2\nscan_layers: true\n')
    launch = parse_launch([script, own])
    said = [x for x in launch.ignored if x.startswith(f"{own}:")]
    assert said and "override its model_name, per_device_batch_size (2 of its 3 keys)" in said[0]


def test_a_topology_files_link_speeds_are_said_to_be_seen_not_priced(tmp_path: Path) -> None:
    """A user trial: LinkSpeed=400/800 of a tree topology.conf were dropped without a word."""
    script = tmp_path / "train.sh"
    script.write_text(TP8)
    args = ["audit", "--launch", str(script), "--model", "llama3-70b", "--slurm-topology",
            str(SLURM / "tree-5leaf.conf"), "--nodelist", "gpu[0001-0004]", "--node-type", "dgx-h100", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code in (0, 1), res.output
    fabric = json.loads(res.stdout)["layout"]["sources"]["fabric"]
    assert "its LinkSpeed= values (400, 800) seen, not priced" in fabric
    bare = tmp_path / "bare.conf"
    bare.write_text(re.sub(r" LinkSpeed=\d+", "", (SLURM / "tree-5leaf.conf").read_text()))
    res = CliRunner().invoke(main, [*args[:6], str(bare), *args[7:]])
    assert "LinkSpeed" not in json.loads(res.stdout)["layout"]["sources"]["fabric"]
