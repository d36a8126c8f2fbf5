"""Process binding as the launch line states it (recipe cpu_affinity): read by the audit, priced, and a finding
with its cost where the ranks run unbound."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

ARGS = ("pretrain_gpt.py --tensor-model-parallel-size 4 --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --bf16\n")


def _read(tmp_path, line: str):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\n" + line + ARGS)
    return parse_launch([script])


@pytest.mark.parametrize(("line", "bound", "evidence"), [
    ("torchrun --nnodes 2 --nproc-per-node 8 --numa-binding node ", True, "--numa-binding node"),
    ("torchrun --nnodes 2 --nproc-per-node 8 --numa_binding=socket ", True, "--numa_binding=socket"),
    ("torchrun --nnodes 2 --nproc-per-node 8 ", False, "torchrun without --numa-binding"),
    # a wrapper binds torchrun as a whole, not each rank to its GPU
    ("numactl --cpunodebind=0 torchrun --nnodes 2 --nproc-per-node 8 ", False, "torchrun without --numa-binding"),
    ("python -m torch.distributed.run --nnodes 2 --nproc-per-node 8 ", False, "torchrun without --numa-binding"),
    # one host: runner.py starts launch.py itself, which binds under the flag
    ("deepspeed --num_nodes 1 --num_gpus 8 --bind_cores_to_rank ", True, "--num_nodes 1 --num_gpus 8 --bind"),
    ("deepspeed --num_nodes 1 --num_gpus 8 ", False, "deepspeed without --bind_cores_to_rank"),
    ("deepspeed --no_ssh --node_rank 0 --num_gpus 8 --bind_cores_to_rank ", True, "--no_ssh --node_rank 0"),
    # several hosts: the pdsh runner (the default) drops the flag; IMPI passes it on
    ("deepspeed --num_nodes 2 --num_gpus 8 --bind_cores_to_rank ", False, "dropped: DeepSpeed's pdsh runner"),
    ("deepspeed --force_multi --num_gpus 8 --bind_cores_to_rank ", False, "dropped: DeepSpeed's pdsh runner"),
    ("deepspeed --num_nodes 2 --num_gpus 8 --launcher IMPI --bind_cores_to_rank ", True, "--launcher IMPI"),
    ("deepspeed --num_nodes 2 --num_gpus 8 ", False, "deepspeed without --bind_cores_to_rank"),
])
def test_audit_reads_process_binding_from_the_launch_line(tmp_path, line: str, bound: bool, evidence: str) -> None:
    layout = _read(tmp_path, line)
    assert layout.recipe["cpu_affinity"] is bound
    assert evidence in layout.sources["recipe.cpu_affinity"]


@pytest.mark.parametrize(("line", "bound", "evidence"), [
    # srun(1) --cpu-bind: `none` leaves each task unbound (a QA run's `srun --cpu-bind=none python ...` was priced
    # bound, "as the cluster's task plugin decides"); a binding type binds each task
    ("srun --ntasks-per-node 8 --cpu-bind=none python ", False, "srun --cpu-bind=none: each task runs unbound"),
    ("srun --ntasks-per-node 8 --cpu_bind=verbose,none python ", False, "srun --cpu-bind=none"),
    ("srun --ntasks-per-node 8 --cpu-bind no python ", False, "srun --cpu-bind=no"),
    ("export SLURM_CPU_BIND=none\nsrun --ntasks-per-node 8 python ", False, "SLURM_CPU_BIND=none"),
    ("srun --ntasks-per-node 8 --cpu-bind=cores python ", True, "srun --cpu-bind=cores binds each task"),
])
def test_srun_cpu_bind_decides_the_tasks_binding(tmp_path, line: str, bound: bool, evidence: str) -> None:
    layout = _read(tmp_path, line)
    assert layout.recipe["cpu_affinity"] is bound
    assert evidence in layout.sources["recipe.cpu_affinity"], layout.sources["recipe.cpu_affinity"]


@pytest.mark.parametrize(("line", "evidence"), [
    # mpirun or srun binds, as the cluster is set up
    ("deepspeed --num_nodes 2 --num_gpus 8 --launcher openmpi --bind_cores_to_rank ", "openmpi runner leaves binding"),
    ("deepspeed --num_nodes 2 --num_gpus 8 --launcher $RUNNER --bind_cores_to_rank ", "not fixed by the files"),
    ("srun --ntasks-per-node 8 python ", "SLURM task plugin"),
])
def test_binding_the_files_leave_to_the_cluster_is_priced_bound_and_says_why(tmp_path, line: str,
                                                                             evidence: str) -> None:
    layout = _read(tmp_path, line)
    assert layout.recipe["cpu_affinity"] is True
    assert evidence in layout.sources["recipe.cpu_affinity"] and "priced bound" in layout.sources["recipe.cpu_affinity"]


@pytest.mark.parametrize(("line", "note"), [
    # the host count is in a hostfile that is not among the files: the audited allocation decides
    ("deepspeed --hostfile hosts --bind_cores_to_rank ", "the files do not fix the host count"),
    ("torchrun --nnodes 2 --nproc-per-node 8 --numa-binding $MODE ", "--numa-binding: its value is not fixed"),
])
def test_binding_the_files_do_not_decide_is_left_open_and_said(tmp_path, line: str, note: str) -> None:
    layout = _read(tmp_path, line)
    assert "cpu_affinity" not in layout.recipe
    assert any(note in x for x in layout.ignored), layout.ignored


def test_a_deepspeed_job_on_several_hosts_that_states_no_binding_runs_unbound(tmp_path) -> None:
    """A DeepSpeed JSON and hostfile alone (no launch line): on several hosts the deepspeed launcher's pdsh runner
    starts the ranks, unbound, as `plan --framework deepspeed` prices them; on one host the default stands."""
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
                                  "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}))

    def audit(gpus: int) -> dict:
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"worker-{i} slots=8\n" for i in range(gpus // 8)))
        code, out, err = _run("audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", str(gpus),
                              "--seq-len", "4096", "--launch", str(config), "--launch", str(hostfile), "--json")
        assert code in (0, 1), err
        return json.loads(out)

    several = audit(16)["estimate"]
    assert several["recipe"]["cpu_affinity"] is False
    assert "pdsh runner" in several["recipe_sources"]["cpu_affinity"]
    assert audit(8)["estimate"]["recipe"]["cpu_affinity"] is True


@pytest.mark.parametrize(("hosts", "bound"), [(["worker-0 slots=8"], True),
                                              (["worker-0 slots=8", "worker-1 slots=8"], False)])
def test_a_hostfile_decides_whether_deepspeed_binds(tmp_path, hosts: list[str], bound: bool) -> None:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("\n".join(hosts) + "\n")
    script = tmp_path / "train.sh"
    # a Megatron-DeepSpeed job (--deepspeed): without it Megatron trains the model itself, not DeepSpeed
    script.write_text(f"deepspeed --hostfile {hostfile} --bind_cores_to_rank "
                      + ARGS.replace("--bf16", "--bf16 --deepspeed"))
    layout = parse_launch([script, hostfile])
    assert layout.recipe["cpu_affinity"] is bound
    assert not any("host count" in x for x in layout.ignored)


def test_a_numa_binding_torchrun_refuses_is_an_error_naming_its_choices(tmp_path) -> None:
    with pytest.raises(InputError, match=r"--numa-binding 'none' is not one of its choices node, socket, exclusive, "
                                         r"core-complex"):
        _read(tmp_path, "torchrun --nnodes 2 --nproc-per-node 8 --numa-binding none ")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_unbound_ranks_cost_what_binding_saves(tmp_path) -> None:
    """A plan's Megatron file binds its ranks (torchrun --numa-binding node) and audits at the plan's step; the same
    file without the flag runs unbound: slower by the host time, with a finding that names the fix and its saving."""
    job = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
           "--global-batch", "64"]
    code, out, err = _run("plan", *job, "--framework", "megatron", "--json", "--top-k", "1", "--emit", "megatron",
                          "--out", str(tmp_path))
    assert code == 0, err
    planned = json.loads(out)["plans"][0]
    script = tmp_path / "megatron.sh"
    assert "--numa-binding node" in script.read_text()

    def audit() -> dict:
        code, out, err = _run("audit", "--launch", str(script), "--hosts", str(tmp_path / "hosts.txt"), *job, "--json")
        assert code in (0, 1), err
        return json.loads(out)

    bound = audit()
    assert bound["estimate"]["step_time_s"] == planned["step_time_s"]
    assert not [f for f in bound["findings"] if f["kind"] == "unbound_processes"]
    script.write_text(script.read_text().replace("--numa-binding node ", ""))
    unbound = audit()
    assert "torchrun without --numa-binding" in unbound["layout"]["sources"]["recipe.cpu_affinity"]
    slower = unbound["estimate"]["step_time_s"] - bound["estimate"]["step_time_s"]
    assert unbound["estimate"]["breakdown"]["host"] > bound["estimate"]["breakdown"]["host"]
    [finding] = [f for f in unbound["findings"] if f["kind"] == "unbound_processes"]
    assert "--numa-binding node" in finding["message"] and "torchrun without --numa-binding" in finding["message"]
    assert finding["cost_s"] == pytest.approx(slower, abs=2e-5)  # steps print to 6 digits
    assert slower > 0.0005


def test_framework_deepspeed_binds_on_several_hosts_as_its_files_launch_them(tmp_path) -> None:
    """placement's DeepSpeed files start each node with its own launcher line (--no_ssh --node_rank k), which binds:
    `--framework deepspeed` prices a job on several hosts bound, and the audit of its files agrees; what the pdsh
    runner would run stays the audit's default for launch files that leave it to the launcher
    (test_a_deepspeed_job_on_several_hosts_that_states_no_binding_runs_unbound).  A recipe value the framework
    always runs is still refused when a flag asks for another."""
    job = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "2", "--pp", "2", "--seq-len", "4096",
           "--global-batch", "64", "--gpus", "16", "--framework", "deepspeed"]
    code, out, err = _run(*job, "--json")
    assert code in (0, 1), err
    priced = json.loads(out)
    assert priced["recipe"]["cpu_affinity"] is True and priced["recipe_sources"]["cpu_affinity"] == "default"
    out_dir = tmp_path / "out"
    code, _, err = _run(*job, "--out", str(out_dir), "--emit", "deepspeed")
    assert code in (0, 1), err
    code, out, err = _run("audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
                          "--launch", str(out_dir / "deepspeed.sh"), "--launch", str(out_dir / "ds_config.json"),
                          "--launch", str(out_dir / "ds_topology.py"), "--launch", str(out_dir / "hostfile"), "--json")
    assert code in (0, 1), err
    audited = json.loads(out)["estimate"]
    assert audited["recipe"]["cpu_affinity"] is True and "--no_ssh" in audited["recipe_sources"]["cpu_affinity"]
    assert audited["step_time_s"] == priced["step_time_s"]
    code, _, err = _run(*job, "--no-pipeline-p2p-blocking")
    assert code == 2 and "always runs pipeline_p2p_blocking = True" in err
    assert "drop --no-pipeline-p2p-blocking or --framework" in err and "Traceback" not in err


def test_a_long_launch_line_is_cited_by_its_launcher_not_in_full(tmp_path) -> None:
    """A user trial: a launch written on one long line was cited in full beside recipe.cpu_affinity (the other
    values cite their own flag); it is cited by its launcher and entry point."""
    line = "torchrun --nnodes 2 --nproc-per-node 8 " + "--log-interval 1 " * 40
    lay = _read(tmp_path, line)
    ev = lay.sources["recipe.cpu_affinity"]
    assert ev.endswith(": ... torchrun ... pretrain_gpt.py ...: torchrun without --numa-binding starts its ranks "
                       "unbound")
    assert "--log-interval" not in ev
