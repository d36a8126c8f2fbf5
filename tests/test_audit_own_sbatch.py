"""Auditing placement's own launch.sbatch: the script reads each host's GPU order from cuda_visible_devices.txt in its
own folder at run time, and the audit reads the same file there, with its source (a user trial: the audit priced
GPUs 0..7 in numbered order, 5.566 s against the plan's 3.208 s, and raised a gpu_order error for it)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

NVBRIDGE = Path(__file__).parent / "data" / "nvsmi" / "pcie-8x-nvbridge-pairs.txt"


def test_the_audit_of_launch_sbatch_reads_the_gpu_order_file_beside_it(tmp_path) -> None:
    topo = tmp_path / "topo.conf"
    topo.write_text("SwitchName=leafA Nodes=n[01,03]\nSwitchName=leafB Nodes=n[02,04]\n"
                    "SwitchName=spine Switches=leafA,leafB\n")
    alloc = ["--model", "llama3-8b", "--slurm-topology", str(topo), "--nodelist", "n[01-04]", "--node-type",
             "dgx-h100", "--node-topo", str(NVBRIDGE)]
    out = tmp_path / "plan"
    ev = CliRunner().invoke(main, ["evaluate", *alloc, "--seq-len", "8192", "--global-batch", "64", "--tp", "2",
                                   "--pp", "2", "--zero", "1", "--recompute", "full", "--emit", "megatron", "--out",
                                   str(out), "--json"])
    assert ev.exit_code == 0, ev.output
    planned = json.loads(ev.stdout)["step_time_s"]
    orders = (out / "cuda_visible_devices.txt").read_text()
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" not in orders  # the bridged pairs: not the numbered order
    got = CliRunner().invoke(main, ["audit", "--launch", str(out / "launch.sbatch"), "--hosts",
                                    str(out / "hosts.txt"), *alloc, "--json"])
    assert got.exit_code in (0, 1), got.output
    report = json.loads(got.stdout)
    assert abs(report["estimate"]["step_time_s"] / planned - 1) < 1e-3
    assert not any(f["kind"] == "gpu_order" for f in report["findings"])
    assert "cuda_visible_devices.txt" in report["layout"]["sources"]["cuda_visible_devices"]
    assert "cuda_visible_devices" not in report["layout"]["unstated"]


def test_a_gpu_order_file_found_for_other_hosts_is_set_aside_and_said(tmp_path) -> None:
    """A review: a catalog plan's file (placeholder hosts) beside launch.sbatch, audited on a real allocation, was an
    error telling the user to pass a file they never passed; found, not given, it is set aside with a word."""
    out = tmp_path / "plan"
    ev = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "32", "--node-topo", str(NVBRIDGE),
                                   "--seq-len", "8192", "--global-batch", "64", "--tp", "2", "--pp", "2", "--zero", "1",
                                   "--recompute", "full", "--emit", "megatron", "--out", str(out)])
    assert ev.exit_code == 0, ev.output
    topo = tmp_path / "topo.conf"
    topo.write_text("SwitchName=leafA Nodes=n[01-04]\n")
    got = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--launch", str(out / "launch.sbatch"),
                                    "--slurm-topology", str(topo), "--nodelist", "n[01-04]", "--node-type", "dgx-h100",
                                    "--node-topo", str(NVBRIDGE), "--seq-len", "8192", "--global-batch", "64",
                                    "--json"])
    assert got.exit_code in (0, 1), got.output
    report = json.loads(got.stdout)
    assert "set aside: it names none of the job's hosts" in report["layout"]["sources"]["gpu order file"]
    assert "pass the file it is read from" in report["layout"]["unstated"]["cuda_visible_devices"]
