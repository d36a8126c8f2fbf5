"""A plan of fewer GPUs than a node's launches that many processes on one node.  A user trial: `--gpus 4` on
8-GPU nodes wrote `#SBATCH --nodes=0` and `torchrun --nproc-per-node 8` (world 8: Megatron ran dp 8 where dp 4
was priced, torchtitan refused its dp_shard 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main


@pytest.mark.parametrize("gpus", [4, 8])
def test_launch_files_start_the_planned_number_of_processes(tmp_path: Path, gpus: int) -> None:
    out = tmp_path / "plan"
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", str(gpus),
                                    "--seq-len", "4096", "--global-batch", "64", "--top-k", "1", "--out", str(out),
                                    "--emit", "megatron,torchtitan"])
    assert res.exit_code == 0, res.output
    sbatch = (out / "launch.sbatch").read_text()
    assert "#SBATCH --nodes=1\n" in sbatch and "\nNNODES=1\n" in sbatch
    assert f"#SBATCH --gpus-per-node={gpus}\n" in sbatch and f"\nGPUS_PER_NODE={gpus}\n" in sbatch
    for name in ("megatron.sh", "torchtitan.sh"):
        procs = re.findall(r"torchrun --nnodes (\d+) --nproc-per-node (\d+) ", (out / name).read_text())
        assert procs == [("1", str(gpus))], name


def test_the_header_names_the_segment_the_plan_was_priced_with(tmp_path: Path) -> None:
    """A user trial: a GB200 plan priced with `--segment 9` wrote megatron.sh without it (only launch.sbatch had
    `#SBATCH --segment=9`), so a launch by hand could take trays from other racks than priced."""
    out = tmp_path / "gb"
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "18",
                                    "--segment", "9", "--seq-len", "4096", "--global-batch", "288", "--top-k", "1",
                                    "--out", str(out), "--emit", "megatron,torchtitan"])
    assert res.exit_code == 0, res.output
    for name in ("megatron.sh", "torchtitan.sh"):
        assert "segment 9 nodes (sbatch --segment=9)" in (out / name).read_text().split("\n")[1], name


@pytest.mark.parametrize(("nodes", "segment"), [(144, 18), (9, 9), (2, None)])
def test_a_plan_of_whole_racks_asks_slurm_for_them(tmp_path: Path, nodes: int, segment) -> None:
    """A user trial: a 576-GPU GB200 plan, priced on whole NVL72 racks, wrote launch.sbatch with no --segment, so
    SLURM's block plugin could place it best-fit across partial racks.  Now it asks for whole racks (or one rack for
    a job smaller than one); DGX H100, whose domain is a node, gets none."""
    cluster = "gb200-nvl72" if segment else "dgx-h100"
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", cluster, "--nodes", str(nodes),
                                    "--seq-len", "4096", "--global-batch", str(8 * nodes * 4), "--top-k", "1",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    sbatch = (out / "launch.sbatch").read_text()
    if segment:
        assert f"#SBATCH --segment={segment}\n" in sbatch and "whole scale-up domains" in sbatch
    else:
        assert "--segment" not in sbatch


def test_a_default_segment_below_the_racks_trays_is_said_with_its_domain(tmp_path: Path) -> None:
    """A user trial: 19 GB200 trays (76 GPUs) took the default `--segment 1` (19's largest divisor up to 18) without a
    word, every NVLink domain priced as one tray's 4 GPUs.  The default is named with the domain it prices and the
    fix, in the JSON's job_defaults and on stderr; a segment given by flag is not."""
    import json

    job = ["plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--gpus", "76", "--seq-len", "4096",
           "--global-batch", "76", "--json"]
    res = CliRunner().invoke(main, job)
    assert res.exit_code == 0, res.output[-2000:]
    said = json.loads(res.stdout)["job_defaults"]["segment_nodes"]
    assert said.startswith("1: the largest divisor of the job's 19 nodes") and "4 GPUs" in said
    assert "--segment 0" in said and "segment nodes 1" in res.stderr
    given = CliRunner().invoke(main, [*job, "--segment", "1"])
    assert "segment_nodes" not in json.loads(given.stdout)["job_defaults"]


@pytest.mark.parametrize("gpus", [4, 8])
def test_a_maxtext_job_on_part_of_a_host_lists_its_gpus_for_jax(tmp_path: Path, gpus: int) -> None:
    """JAX's one process per host takes every GPU it sees and MaxText counts them all as the slice (create_device_mesh:
    len(jax.devices()) // num_slices; fill_unspecified_mesh_axes asserts the ICI product equals it), so a 4-GPU plan's
    ICI of 4 on an 8-GPU host needs CUDA_VISIBLE_DEVICES: the launch line and jax_mesh.py list its 4 GPUs (a QA run:
    neither did, and MaxText would have seen 8 devices against an ICI product of 4)."""
    import math

    import yaml

    out = tmp_path / "plan"
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", str(gpus),
                                    "--seq-len", "4096", "--global-batch", "64", "--top-k", "1", "--out", str(out),
                                    "--emit", "maxtext"])
    assert res.exit_code in (0, 1), res.output
    text = (out / "maxtext.yml").read_text()
    cfg = yaml.safe_load(text)
    ici = math.prod(v for k, v in cfg.items() if k.startswith("ici_") and k.endswith("_parallelism"))
    lines = re.findall(r"^#\s+host0: (?:CUDA_VISIBLE_DEVICES=(\S+) )?NODE_RANK=0 ", text, re.M)
    seen = len(lines[0].split(",")) if lines[0] else 8  # JAX sees the host's 8 GPUs where nothing is listed
    assert ici == gpus == seen
    scope: dict = {}
    source = (out / "jax_mesh.py").read_text()
    exec(compile(source.split("def initialize", 1)[0].replace("import jax\n", "").replace(
        "from jax.experimental import mesh_utils\n", "").replace("from jax.sharding import Mesh\n", ""),
        "jax_mesh.py", "exec"), scope)
    assert scope["CUDA_VISIBLE_DEVICES"] == ({"host0": "0,1,2,3"} if gpus == 4 else {})
    # the audit reads the list back (it took only a permutation of all 8 GPUs) and prices what the header says
    import json

    audit = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", str(gpus),
                                      "--seq-len", "4096", "--global-batch", "64", "--launch", str(out / "maxtext.yml"),
                                      "--launch", str(out / "jax_mesh.py"), "--hosts", str(out / "hosts.txt"),
                                      "--json"])
    assert audit.exit_code == 0, audit.output
    header = re.search(r"^# this file runs .*?: ([\d.]+) s/step", text, re.M) or re.search(
        r"^# predicted: ([\d.]+) s/step", text, re.M)
    assert json.loads(audit.stdout)["estimate"]["step_time_s"] == pytest.approx(float(header.group(1)), abs=1e-3)
