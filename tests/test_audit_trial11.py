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
