"""launch.sbatch: `bash -n` passes, and under a stub `srun` (one task per host name) each host starts
torchrun with the node rank hosts.txt gives it (issue: launch files that run exactly what was priced)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

DATA = Path(__file__).parent / "data"
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")

STUB_SRUN = """#!/bin/bash
# stub srun: run the command once per host of STUB_HOSTS, as SLURM would on each node
while [[ "$1" == --* ]]; do shift; done
for h in $STUB_HOSTS; do SLURMD_NODENAME="$h" "$@" || exit $?; done
"""
STUB_TORCHRUN = """#!/bin/bash
echo "$SLURMD_NODENAME $*" >> "$STUB_LOG"
"""


def _plan(out: Path, *emit: str, framework: str | None = None) -> None:
    result = CliRunner().invoke(main, [
        "plan", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64", "--top-k", "1",
        "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
        "--node-type", "dgx-h100", "--out", str(out), *(["--emit", ",".join(emit)] if emit else []),
        *(["--framework", framework] if framework else [])])
    assert result.exit_code == 0, result.output


def _stubs(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """srun and torchrun stubs on PATH, and `extra` launchers (name -> script) beside them."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, text in {"srun": STUB_SRUN, "torchrun": STUB_TORCHRUN, **(extra or {})}.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(tmp / "torchrun.log")}


def _hosts(out: Path) -> list[str]:
    lines = [x.split() for x in (out / "hosts.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert [int(k) for k, _ in lines] == list(range(len(lines)))
    return [h for _, h in lines]


@pytest.mark.parametrize("framework", ["megatron", "torchtitan"])
def test_each_node_starts_with_its_planned_node_rank(tmp_path, framework):
    out = tmp_path / "plan"
    _plan(out, "megatron", "torchtitan")
    script = out / "launch.sbatch"
    assert subprocess.run([BASH, "-n", str(script)], check=False).returncode == 0
    hosts = _hosts(out)
    allocation = sorted(hosts)  # SLURM starts tasks in its own node order, not the plan's
    env = os.environ | _stubs(tmp_path) | {"STUB_HOSTS": " ".join(allocation), "SLURM_SUBMIT_DIR": str(out)}
    proc = subprocess.run([BASH, str(script), framework], env=env, capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    started = {}
    for line in (tmp_path / "torchrun.log").read_text().splitlines():
        host, *args = line.split()
        started[host] = args
    assert set(started) == set(hosts)
    for rank, host in enumerate(hosts):
        args = started[host]
        assert args[args.index("--node-rank") + 1] == str(rank)
        assert args[args.index("--master-addr") + 1] == hosts[0]
        assert args[args.index("--nnodes") + 1] == str(len(hosts))
        expected = "pretrain_gpt.py" if framework == "megatron" else "torchtitan.train"
        assert expected in args
    if framework == "megatron":  # the PLACEMENT_ARGS array reaches torchrun expanded
        assert "--tensor-model-parallel-size" in started[hosts[0]]
        assert "--hidden-size" in started[hosts[0]]


def test_a_node_the_plan_does_not_know_stops_the_job_with_its_name(tmp_path):
    out = tmp_path / "plan"
    _plan(out)
    env = os.environ | _stubs(tmp_path) | {"STUB_HOSTS": "gpu9999", "SLURM_SUBMIT_DIR": str(out)}
    proc = subprocess.run([BASH, str(out / "launch.sbatch")], env=env, capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 1
    assert "node gpu9999 is not in" in proc.stderr and "hosts.txt" in proc.stderr


def test_deepspeed_nodes_start_their_own_launcher_as_the_deepspeed_file_writes_it(tmp_path):
    """`sbatch launch.sbatch deepspeed`: each node execs the deepspeed launcher without ssh for its own node rank,
    bound, with the plan's hostfile: the line deepspeed.sh writes for that host, with the plan folder's paths."""
    out = tmp_path / "plan"
    _plan(out, "megatron", "deepspeed")
    script = out / "launch.sbatch"
    assert subprocess.run([BASH, "-n", str(script)], check=False).returncode == 0
    stubs = _stubs(tmp_path, {"deepspeed": STUB_TORCHRUN})
    hosts = _hosts(out)
    env = os.environ | stubs | {"STUB_HOSTS": " ".join(sorted(hosts)), "SLURM_SUBMIT_DIR": str(out)}
    proc = subprocess.run([BASH, str(script), "deepspeed"], env=env, capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    started = {line.split()[0]: line.split()[1:] for line in (tmp_path / "torchrun.log").read_text().splitlines()}
    assert set(started) == set(hosts)
    file_lines = [x.split() for x in (out / "deepspeed.sh").read_text().splitlines() if x.startswith("deepspeed ")]
    for rank, host in enumerate(hosts):
        args = started[host]
        assert args[args.index("--node_rank") + 1] == str(rank)
        assert "--no_ssh" in args and "--bind_cores_to_rank" in args
        assert args[args.index("--hostfile") + 1] == f"{out}/hostfile"
        assert args[args.index("--master_addr") + 1] == hosts[0]
        local = [a.replace(f"{out}/", "").replace('"', "") for a in args]
        assert local == [a.replace('"', "").replace("${TRAIN_SCRIPT:-train.py}", "train.py")
                         for a in file_lines[rank][1:]]


def test_a_plan_on_real_hosts_pins_them_in_the_batch_script(tmp_path):
    """`sbatch launch.sbatch` must get the nodes the plan was priced on (a trial's job got other nodes and stopped
    at the hosts.txt lookup): the script asks SLURM for exactly hosts.txt's hosts; a catalog plan's placeholder
    names are not pinned."""
    from placement.loaders.hostlist import expand_hostlist

    _plan(tmp_path / "real")
    head = (tmp_path / "real" / "launch.sbatch").read_text().splitlines()
    pinned = [x.split("=", 1)[1] for x in head if x.startswith("#SBATCH --nodelist=")]
    hosts = [x.split()[1] for x in (tmp_path / "real" / "hosts.txt").read_text().splitlines() if x and x[0] != "#"]
    assert len(pinned) == 1 and sorted(expand_hostlist(pinned[0])) == sorted(hosts)
    catalog = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--out",
                                        str(tmp_path / "catalog"), "--emit", "megatron"])
    assert catalog.exit_code == 0, catalog.output
    assert "#SBATCH --nodelist" not in (tmp_path / "catalog" / "launch.sbatch").read_text()


def _audit(folder: Path, *files: str) -> dict:
    import json

    result = CliRunner().invoke(main, [
        "audit", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64",
        "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
        "--node-type", "dgx-h100", "--hosts", str(folder / "hosts.txt"), "--json",
        *[a for f in files for a in ("--launch", str(folder / f))]])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("framework", "own"), [("megatron", ["megatron.sh"]), ("torchtitan", ["torchtitan.sh"]),
                                                ("deepspeed", ["deepspeed.sh", "ds_config.json"])])
def test_the_batch_script_audits_as_its_framework_file(tmp_path, framework, own):
    """`placement audit --launch launch.sbatch` reads the job the batch script starts: the script runs itself once
    per node (`srun ... bash "$PLAN_DIR/launch.sbatch" --task`), and that run's `exec` line is the launch.  It was
    refused ("no launch command"): the reader took `$1` as empty and never entered the per-node branch.  The audit
    of the batch script and of the framework's own file are the same job at the same step time."""
    out = tmp_path / "plan"
    _plan(out, framework)
    extra = ["ds_config.json", "hostfile"] if framework == "deepspeed" else []
    batch, file = _audit(out, "launch.sbatch", *extra), _audit(out, *own)
    assert batch["layout"]["framework"].endswith(framework)
    for key in ("tp", "cp", "pp", "vpp", "dp", "micro_batch_size", "zero_stage", "recompute"):
        assert batch["layout"][key] == file["layout"][key], key
    assert batch["estimate"]["step_time_s"] == file["estimate"]["step_time_s"]


def test_the_batch_script_of_several_frameworks_is_read_as_the_one_it_runs(tmp_path):
    """With a branch per framework the script runs the first (`sbatch launch.sbatch` with no argument): its text
    names torchtitan and DeepSpeed too, and the audit read it as torchtitan ("--use-distributed-optimizer is
    missing its value"); the framework is the launch command's."""
    out = tmp_path / "plan"
    _plan(out, "megatron", "torchtitan", "deepspeed")
    assert "torchtitan.train" in (out / "launch.sbatch").read_text()
    assert _audit(out, "launch.sbatch")["layout"]["framework"] == "megatron"


def test_the_batch_script_audits_with_the_gpu_order_file_it_reads(tmp_path):
    """On nodes whose GPUs pair over NVLink bridges the plan orders each node's GPUs (cuda_visible_devices.txt),
    which launch.sbatch reads at run time.  The audit of launch.sbatch alone priced the GPUs in numbered order
    (a user trial: 12.5 s against the plan's 8.8 s) and told the user to set the variable the script sets; with
    the file, given or beside the script, it prices the plan's step, and without it says the value comes from a
    file it was not given."""
    import json

    job = ["--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "64",
           "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
           "--node-type", "dgx-h100", "--node-topo", str(DATA / "nvsmi" / "pcie-8x-nvbridge-pairs.txt")]
    out = tmp_path / "plan"
    planned = CliRunner().invoke(main, ["plan", *job, "--top-k", "1", "--out", str(out), "--emit", "megatron",
                                        "--json"])
    assert planned.exit_code == 0, planned.output
    orders = (out / "cuda_visible_devices.txt").read_text()
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" not in orders  # the plan does reorder

    def audit(*files: str) -> dict:
        result = CliRunner().invoke(main, ["audit", *job, "--hosts", str(out / "hosts.txt"), "--json",
                                           *[a for f in files for a in ("--launch", str(out / f))]])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)

    promised = audit("megatron.sh")["estimate"]["step_time_s"]  # the per-node lines state the order
    with_file = audit("launch.sbatch", "cuda_visible_devices.txt")
    assert with_file["estimate"]["step_time_s"] == promised
    assert "gpu_order" not in {f["kind"] for f in with_file["findings"]}
    # launch.sbatch alone: the audit reads the file where the script reads it, in its own folder (a user trial's
    # audit of its own launch.sbatch priced the numbered order and raised gpu_order for it)
    alone = audit("launch.sbatch")
    assert alone["estimate"]["step_time_s"] == promised
    assert "gpu_order" not in {f["kind"] for f in alone["findings"]}
    assert "cuda_visible_devices.txt" in alone["layout"]["sources"]["cuda_visible_devices"]
    # ...and without the file there, the value is one the files do not hold: numbered order, said
    (out / "cuda_visible_devices.txt").unlink()
    missing = audit("launch.sbatch")
    assert missing["estimate"]["step_time_s"] > promised * 1.1
    assert "gpu_order" in {f["kind"] for f in missing["findings"]}
    assert "pass the file it is read from with --launch" in missing["layout"]["unstated"]["cuda_visible_devices"]


def test_a_gpu_order_file_alone_or_of_other_hosts_is_refused(tmp_path):
    (tmp_path / "cuda_visible_devices.txt").write_text("nodeX CUDA_VISIBLE_DEVICES=1,0,2,3,4,5,6,7\n")
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--launch",
                                       str(tmp_path / "cuda_visible_devices.txt")])
    assert result.exit_code == 2 and "pass the launch script that reads it" in result.stderr
    out = tmp_path / "plan"
    _plan(out, "megatron")
    result = CliRunner().invoke(main, [
        "audit", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64",
        "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
        "--node-type", "dgx-h100", "--launch", str(out / "launch.sbatch"),
        "--launch", str(tmp_path / "cuda_visible_devices.txt")])
    assert result.exit_code == 2 and "names none of the job's hosts (gpu0036" in result.stderr


def test_the_batch_script_is_audited_with_the_arguments_it_was_started_with(tmp_path):
    """`sbatch launch.sbatch deepspeed` runs the DeepSpeed arm; the files do not say so.  Audited with DeepSpeed's
    files the reader took the Megatron arm (the one that runs with no argument) as DeepSpeed's layout (a user
    trial: vpp 5 from Megatron's arguments, 13.7 s against the DeepSpeed file's 10.1 s).  Now that is an error
    naming --script-args, and with it the audit is the DeepSpeed file's."""
    out = tmp_path / "plan"
    _plan(out, "megatron", "deepspeed")
    files = ["launch.sbatch", "ds_config.json", "hostfile", "ds_topology.py"]
    result = CliRunner().invoke(main, [
        "audit", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64",
        "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
        "--node-type", "dgx-h100", *[a for f in files for a in ("--launch", str(out / f))]])
    assert result.exit_code == 2
    assert "runs megatron when started as the audit reads it" in result.stderr
    assert "--script-args deepspeed" in result.stderr
    started = _audit_args(out, ["--script-args", "deepspeed"], *files)
    own = _audit(out, "deepspeed.sh", "ds_config.json", "hostfile", "ds_topology.py")
    assert started["layout"]["framework"] == own["layout"]["framework"] == "deepspeed"
    assert started["estimate"]["step_time_s"] == own["estimate"]["step_time_s"]


def _audit_args(folder: Path, extra: list[str], *files: str) -> dict:
    import json

    result = CliRunner().invoke(main, [
        "audit", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64",
        "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
        "--node-type", "dgx-h100", "--hosts", str(folder / "hosts.txt"), "--json", *extra,
        *[a for f in files for a in ("--launch", str(folder / f))]])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


STUB_PYTHON = """#!/bin/bash
echo "$SLURMD_NODENAME JAX_COORDINATOR_IP=$JAX_COORDINATOR_IP JAX_COORDINATOR_PORT=$JAX_COORDINATOR_PORT \
NNODES=$NNODES NODE_RANK=$NODE_RANK $*" >> "$STUB_LOG"
"""


def test_maxtext_nodes_start_maxtexts_train_command_with_its_jax_process_ids(tmp_path):
    """A QA round: `--emit maxtext,devicemesh` wrote a launch.sbatch whose only case was `megatron)` (sbatch.py fell
    back to Megatron-LM, which was not emitted) and priced it.  Now each node execs MaxText's train command on the
    plan's maxtext.yml with the variables MaxText's GPU start reads (utils/max_utils.py:318-346: JAX_COORDINATOR_IP,
    JAX_COORDINATOR_PORT, NNODES, NODE_RANK), node rank k on hosts.txt's k-th host, and no torchrun."""
    out = tmp_path / "plan"
    _plan(out, "maxtext", "devicemesh", framework="maxtext")
    script = out / "launch.sbatch"
    text = script.read_text()
    assert subprocess.run([BASH, "-n", str(script)], check=False).returncode == 0
    assert "megatron" not in text and "pretrain_gpt.py" not in text and "torchrun" not in text
    assert "# usage, from this folder: sbatch launch.sbatch [maxtext]   (default maxtext)" in text
    assert "# not launched from here: device_mesh.py is a module your own training program imports" in text
    runs = [x for x in (out / "maxtext.yml").read_text().splitlines() if x.startswith("# this file runs")]
    assert [x for x in text.splitlines() if x.startswith("# maxtext: ")] == [x.replace("#", "# maxtext:", 1)
                                                                              for x in runs]
    stubs = _stubs(tmp_path, {"python3": STUB_PYTHON})
    hosts = _hosts(out)
    env = os.environ | stubs | {"STUB_HOSTS": " ".join(sorted(hosts)), "SLURM_SUBMIT_DIR": str(out)}
    proc = subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    started = {line.split()[0]: line.split()[1:] for line in (tmp_path / "torchrun.log").read_text().splitlines()}
    assert set(started) == set(hosts)
    for rank, host in enumerate(hosts):
        args = started[host]
        assert args[:4] == [f"JAX_COORDINATOR_IP={hosts[0]}", "JAX_COORDINATOR_PORT=1234", f"NNODES={len(hosts)}",
                            f"NODE_RANK={rank}"]
        assert args[4:7] == ["-m", "maxtext.trainers.pre_train.train", f"{out}/maxtext.yml"]
        assert "run_name=placement-llama3-8b" in args


def test_a_device_mesh_alone_launches_nothing_and_prices_no_framework(tmp_path):
    """A DeviceMesh is the user's program's module: launch.sbatch cannot start it.  It started Megatron-LM and priced
    it with Transformer Engine's rules, so a torchtitan plan of a model with attention sinks at cp 2 exited 2 with
    TE's sinks refusal after writing half the files.  Now the script says it launches nothing that was emitted and
    exits 2 when run; the command says so on stderr and exits 0."""
    model = tmp_path / "sinks.yaml"
    model.write_text("\n".join(x for x in (Path(__file__).parents[1] / "models" / "llama3-8b.yaml").read_text()
                               .splitlines() if not x.startswith("name:")) + "\nname: llama3-8b-sinks\n"
                     "attention_sinks: true\n")
    out = tmp_path / "plan"
    result = CliRunner().invoke(main, ["evaluate", "--model", str(model), "--gpus", "16", "--cp", "2", "--tp", "2",
                                       "--zero", "3", "--recompute", "full", "--seq-len", "8192", "--global-batch",
                                       "64", "--framework", "torchtitan", "--emit", "devicemesh", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Transformer Engine" not in result.output
    said = "launch.sbatch launches nothing that was emitted (device_mesh.py is a module your own training program"
    assert f"placement: note: {said}" in result.stderr
    text = (out / "launch.sbatch").read_text()
    assert said in text and "pretrain_gpt.py" not in text and "s/step" not in text and "srun" not in text
    proc = subprocess.run([BASH, str(out / "launch.sbatch")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and said in proc.stderr
    # no --emit at all: the script carries Megatron-LM's arguments itself, as before
    bare = tmp_path / "bare"
    assert CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--out",
                                     str(bare)]).exit_code == 0
    assert "  megatron)\n" in (bare / "launch.sbatch").read_text()


def test_the_maxtext_batch_script_audits_as_its_maxtext_files(tmp_path):
    out = tmp_path / "plan"
    _plan(out, "maxtext", framework="maxtext")
    batch, file = _audit(out, "launch.sbatch", "maxtext.yml"), _audit(out, "maxtext.yml", "jax_mesh.py")
    assert batch["layout"]["framework"] == file["layout"]["framework"] == "maxtext"
    for key in ("tp", "cp", "pp", "dp", "micro_batch_size", "zero_stage", "recompute"):
        assert batch["layout"][key] == file["layout"][key], key
    assert batch["estimate"]["step_time_s"] == file["estimate"]["step_time_s"]


def test_the_maxtext_batch_script_starts_where_the_newer_jax_pool_name_is_already_set(tmp_path):
    """A QA note: launch.sbatch exported XLA_PYTHON_CLIENT_MEM_FRACTION while a user environment may carry the newer
    XLA_CLIENT_MEM_FRACTION (AlphaFold 3's docs tell unified-memory users to set it), and jaxlib raises ValueError with
    both set (audit.readers.maxtext.JAX_FRACTION_READ): the job would not start.  The script unsets the newer name, so
    each task sees the priced pool alone, and its audit still reads that pool."""
    out = tmp_path / "plan"
    _plan(out, "maxtext", framework="maxtext")
    stub = ('#!/bin/bash\necho "$SLURMD_NODENAME new=${XLA_CLIENT_MEM_FRACTION-unset} '
            'old=${XLA_PYTHON_CLIENT_MEM_FRACTION-unset}" >> "$STUB_LOG"\n')
    env = os.environ | _stubs(tmp_path, {"python3": stub}) | {
        "STUB_HOSTS": " ".join(sorted(_hosts(out))), "SLURM_SUBMIT_DIR": str(out), "XLA_CLIENT_MEM_FRACTION": "0.5"}
    proc = subprocess.run([BASH, str(out / "launch.sbatch")], env=env, capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = [line.split()[1:] for line in (tmp_path / "torchrun.log").read_text().splitlines()]
    assert seen and all(new == "new=unset" and old.startswith("old=0.") for new, old in seen)
    pool = _audit(out, "launch.sbatch", "maxtext.yml")
    assert pool["estimate"]["memory_capacity_bytes"] == _audit(out, "maxtext.yml", "jax_mesh.py")[
        "estimate"]["memory_capacity_bytes"]
