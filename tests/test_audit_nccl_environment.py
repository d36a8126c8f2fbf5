"""What a launch's environment and rendezvous say that the estimate does not price, said rather than passed over (a
user trial: NCCL_IB_HCA=mlx5_0, one of eight NICs, NCCL_P2P_DISABLE=1 and a c10d rendezvous that ignores --node-rank
left the audit's estimate, findings and host order as they were, without a word)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from placement.cli import main
from tests.megatron_scripts import MIXTRAL_8X7B


def _audit(tmp_path, script: str) -> dict:
    path = tmp_path / "train.sh"
    path.write_text(script)
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "mixtral-8x7b",
                                       "--gpus", "64", "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _warnings(got: dict) -> list[str]:
    return [f["message"] for f in got["findings"] if f["kind"] == "not_priced_as_run"]


def test_an_nccl_setting_that_changes_the_collectives_is_a_warning_and_the_rest_are_listed(tmp_path):
    base = _audit(tmp_path, f"#!/bin/bash\n{MIXTRAL_8X7B}\n")
    got = _audit(tmp_path, "#!/bin/bash\nexport NCCL_IB_HCA=mlx5_0\nexport NCCL_P2P_DISABLE=1\n"
                           f"export NCCL_DEBUG=INFO\nNCCL_ALGO=Ring {MIXTRAL_8X7B}\n")
    warned = _warnings(got)
    assert any(w.startswith("NCCL_IB_HCA=mlx5_0 (") and "restricts NCCL to the listed InfiniBand HCAs" in w
               for w in warned), warned
    assert any(w.startswith("NCCL_P2P_DISABLE=1 (") and "train.sh:3" in w for w in warned), warned
    assert any(w.startswith("NCCL_ALGO=Ring (") for w in warned), warned  # given on the command's own line
    assert not any("NCCL_DEBUG" in w for w in warned)
    assert any(x.startswith("NCCL_DEBUG=INFO: an NCCL setting, not modelled (") for x in got["layout"]["ignored"])
    # not priced: the estimate is the same as without them, and each says so
    assert got["estimate"]["step_time_s"] == base["estimate"]["step_time_s"]
    assert all("the estimate prices NCCL's defaults" in w for w in warned if w.startswith("NCCL_"))
    assert not any(w.startswith("NCCL_") for w in _warnings(base))
    # a variable the script sets but does not export is not in the command's environment
    unexported = _audit(tmp_path, f"#!/bin/bash\nNCCL_IB_HCA=mlx5_0\n{MIXTRAL_8X7B}\n")
    assert not any(w.startswith("NCCL_IB_HCA") for w in _warnings(unexported))


def test_a_dynamic_rendezvous_says_no_file_fixes_the_host_order(tmp_path):
    c10d = MIXTRAL_8X7B.replace("torchrun ", "torchrun --rdzv_backend c10d --rdzv_endpoint head:29500 ", 1)
    got = _warnings(_audit(tmp_path, f"#!/bin/bash\n{c10d}\n"))
    assert any(w.startswith("torchrun --rdzv-backend c10d (") and "ignores --node-rank" in w
               and "--hosts" in w for w in got), got
    static = MIXTRAL_8X7B.replace("torchrun ", "torchrun --rdzv-backend static --node-rank 0 ", 1)
    assert not any("rendezvous" in w for w in _warnings(_audit(tmp_path, f"#!/bin/bash\n{static}\n")))
    one_node = c10d.replace("--nnodes 8", "--nnodes 1")
    (tmp_path / "one.sh").write_text(f"#!/bin/bash\n{one_node}\n")
    single = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "one.sh"), "--model", "mixtral-8x7b",
                                       "--gpus", "8", "--json"])
    assert single.exit_code in (0, 1), single.output
    assert not any("rendezvous" in w for w in _warnings(json.loads(single.stdout)))


def test_the_audit_says_which_groups_cross_which_tier_and_which_fabric_it_priced(tmp_path):
    """A user trial: "which group crosses the slow network" was answered only in the JSON's crossings, and the 2:1
    spine the answer hung on was named nowhere.  The text gives each group kind's highest tier with its bytes and
    exposed time, and the sources say the fabric priced, tier by tier, and where it came from."""
    path = tmp_path / "train.sh"
    path.write_text(f"#!/bin/bash\n{MIXTRAL_8X7B}\n")
    job = ["audit", "--launch", str(path), "--model", "mixtral-8x7b", "--gpus", "64"]
    text = CliRunner().invoke(main, job).stdout
    got = json.loads(CliRunner().invoke(main, [*job, "--json"]).stdout)
    crossings, exposed = got["estimate"]["crossings"], got["estimate"]["breakdown"]["exposed"]
    assert "where the groups' traffic goes (groups by the highest tier of the network they cross):" in text
    for kind, c in crossings.items():
        top = [lv for lv, n in c["highest_level"].items() if n][-1]
        row = next(line for line in text.splitlines() if line.startswith(f"{kind} ") and "x" in line)
        assert f"{c['groups']:,} x {c['group_size']}" in row and f" {top} " in row
        # expert-DP groups have no term of their own (their time is dp's): "-"
        assert f"{c['bytes_per_member_per_step'] / 1e9:,.2f}" in row
        assert row.endswith(f"{exposed[kind]:.3f}" if kind in exposed else "-")
    fabric = got["layout"]["sources"]["fabric"]
    assert fabric.startswith("nvlink4: blocks of 8 GPUs, ") and "(cluster dgx-h100's catalog file; " in fabric
    assert "oversubscribed" not in fabric
    topology = tmp_path / "topology.conf"
    topology.write_text("SwitchName=leaf0 Nodes=node[01-04]\nSwitchName=leaf1 Nodes=node[05-08]\n"
                        "SwitchName=spine Switches=leaf[0-1]\n")
    spine = json.loads(CliRunner().invoke(main, [*job[:-2], "--slurm-topology", str(topology), "--nodelist",
                                                 "node[01-08]", "--node-type", "dgx-h100", "--oversubscription", "2",
                                                 "--json"]).stdout)
    fabric = spine["layout"]["sources"]["fabric"]
    tiers = re.fullmatch(r"nvlink4: blocks of 8 GPUs, ([\d.]+) GB/s per GPU; leaf: ([\d.]+) GB/s per GPU; spine: "
                         r"([\d.]+) GB/s per GPU, 2:1 oversubscribed \(--slurm-topology (.+); --oversubscription 2; "
                         r"an oversubscribed switch's uplinks are shared by the job's GPUs under it .*\)", fabric)
    assert tiers, fabric
    assert float(tiers[2]) == pytest.approx(2 * float(tiers[3]), abs=0.1)  # the 2:1 spine halves the leaf's share
    assert tiers[4] == str(topology)


def _audit_out(tmp_path, script_text: str, *extra: str):
    """(the CLI result, the written megatron.sh) of `audit --out` on a Mixtral script with `script_text`."""
    script, out = tmp_path / "train.sh", tmp_path / "out"
    script.write_text(script_text)
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                       "--gpus", "64", "--out", str(out), *extra])
    assert result.exit_code in (0, 1), result.output
    return result, (out / "megatron.sh").read_text()


def test_the_best_plans_files_name_the_jobs_runtime_variables_they_do_not_set(tmp_path):
    """A user trial: audit --out wrote megatron.sh without the job's NCCL_IB_*, NVTE_* and TORCH_* exports, and without
    a word.  The audit lists each one it does not price; the file's header names those it does not set (not the ones
    it exports itself, NCCL_GRAPH_REGISTER under partial CUDA graphs) and says its prediction runs without them."""
    result, text = _audit_out(tmp_path, "#!/bin/bash\nexport NCCL_IB_QPS_PER_CONNECTION=4\n"
                                        "export NVTE_FWD_LAYERNORM_SM_MARGIN=16\n"
                                        "export TORCH_NCCL_AVOID_RECORD_STREAMS=1\nexport NCCL_GRAPH_REGISTER=0\n"
                                        f"OMP_NUM_THREADS=4 {MIXTRAL_8X7B} --ddp-average-in-collective\n", "--json")
    ignored = json.loads(result.stdout)["layout"]["ignored"]
    for line in ("NVTE_FWD_LAYERNORM_SM_MARGIN=16: a Transformer Engine setting, not modelled (",
                 "TORCH_NCCL_AVOID_RECORD_STREAMS=1: a PyTorch setting, not modelled (",
                 "OMP_NUM_THREADS=4: an OpenMP setting, not modelled ("):
        assert any(x.startswith(line) for x in ignored), (line, ignored)
    exports = re.findall(r"^export (\w+)=", text, re.M)
    # the best plan runs partial CUDA graphs (the collective averaging, one pass over the distributed optimizer's
    # gradient buffer fewer, keeps it on the distributed optimizer): the file sets it itself
    assert "NCCL_GRAPH_REGISTER" in exports
    named = re.search(r"^# not set here, though the audited job's launch sets them: (.*?); the prediction above runs "
                      r"without them", text, re.M)
    assert named, text[:2000]
    assert named.group(1).split() == ["NCCL_IB_QPS_PER_CONNECTION=4", "NVTE_FWD_LAYERNORM_SM_MARGIN=16",
                                      "OMP_NUM_THREADS=4", "TORCH_NCCL_AVOID_RECORD_STREAMS=1"]
    for name in ("NCCL_IB_QPS_PER_CONNECTION", "NVTE_FWD_LAYERNORM_SM_MARGIN", "TORCH_NCCL_AVOID_RECORD_STREAMS"):
        assert name not in exports


def test_a_plan_without_an_audited_job_names_no_runtime_variables(tmp_path):
    out = tmp_path / "plan"
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "mixtral-8x7b", "--gpus", "64",
                                       "--emit", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "not set here, though the audited job" not in (out / "megatron.sh").read_text()


def test_a_runtime_value_with_spaces_or_a_newline_stays_one_commented_word(tmp_path):
    """A review: a value with a newline (`export NVTE_X="a<newline>b"`) put an uncommented line into the written
    megatron.sh, and `NCCL_DEBUG_SUBSYS=INIT COLL` read as two variables: each value is quoted, on one line."""
    import shlex
    import subprocess

    _, text = _audit_out(tmp_path, '#!/bin/bash\nexport NVTE_X="a\nb"\nexport NCCL_DEBUG_SUBSYS="INIT COLL"\n'
                                   'export XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true"\n'
                                   f"{MIXTRAL_8X7B}\n")
    named = re.search(r"^# not set here, though the audited job's launch sets them: (.*?); the prediction", text, re.M)
    assert named and shlex.split(named.group(1)) == [
        "NCCL_DEBUG_SUBSYS=INIT COLL", "NVTE_X=a b", "XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true"]
    assert subprocess.run(["bash", "-n", str(tmp_path / "out" / "megatron.sh")]).returncode == 0
