"""`srun python train.py` starts one rank per SLURM task: the world size is srun's task count, from its own flags or
the job's #SBATCH header (a user trial's `#SBATCH --nodes=8 --ntasks-per-node=8` job was priced on the cluster's
default 1,024 GPUs, "the launch files do not fix it")."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 512 --bf16")


@pytest.mark.parametrize(("header", "srun", "world", "per_node", "said"), [
    ("#SBATCH --nodes=8\n#SBATCH --ntasks-per-node=8\n", "srun", 64, 8, "#SBATCH --nodes=8"),
    ("#SBATCH -N 4\n", "srun --ntasks-per-node 8", 32, 8, "#SBATCH -N 4"),
    ("", "srun -N 2 --ntasks-per-node=8", 16, 8, "srun -N 2"),
    # srun reads the job's SLURM_JOB_NUM_NODES as its -N and deals its 24 tasks evenly, 3 a node (a QA trial: `srun -n
    # 16` on a 4-node job was priced 8 a node)
    ("#SBATCH --nodes=8\n", "srun -n 24", 24, 3, "srun -n 24"),
    ("#SBATCH --nodes=4\n", "srun -n 16 -c 8", 16, 4, "srun -n 16"),
    # -n takes precedence, --ntasks-per-node beside it is a maximum (srun(1)) and the block layout deals the 8 over
    # -N's 2 nodes, 4 a node (a QA trial: priced as 8 ranks on one node); -n above -N x it drops it (opt.c _opt_verify)
    ("", "srun -N 2 --ntasks-per-node=8 --ntasks=8", 8, 4, "srun -N 2 --ntasks-per-node=8 --ntasks=8"),
    ("#SBATCH --nodes=2 --ntasks-per-node=8\n", "srun -n 8", 8, 4, "srun -n 8"),
    ("", "srun -N 2 --ntasks-per-node=4 -n 16", 16, 8, "srun -N 2 --ntasks-per-node=4 -n 16"),
    ("", "srun", None, None, None),  # nothing fixes the task count: left to --gpus / the allocation
])
def test_srun_python_runs_one_rank_per_task(tmp_path: Path, header, srun, world, per_node, said) -> None:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}{srun} python pretrain_gpt.py {ARGS}\n")
    lay = parse_launch([script])
    assert lay.world_size == world and lay.gpus_per_node == per_node
    if said is not None:
        assert said in lay.sources["world_size"] and "srun starts one rank per task" in lay.sources["world_size"]


TORCHRUN = ("srun torchrun --nproc_per_node 8 --nnodes {nnodes} --node_rank $SLURM_NODEID --master_addr node01 "
            "--master_port 29500 pretrain_gpt.py --pipeline-model-parallel-size 2 " + ARGS + "\n")


def _sbatch(tmp_path: Path, nodes: int, tasks: int, nnodes: str = "2") -> Path:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --ntasks-per-node={tasks}\n"
                      f"#SBATCH --gpus-per-node=8\n{TORCHRUN.format(nnodes=nnodes)}")
    return script


def _refusal(argv: list[str]) -> str:
    result = CliRunner().invoke(main, ["audit", *argv])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    return result.output


def test_each_srun_task_runs_a_torchrun_so_its_processes_count_per_task(tmp_path: Path) -> None:
    """A user trial: `#SBATCH --ntasks-per-node=8` with `srun torchrun --nproc_per_node 8` starts 8 torchruns on
    each node, 64 processes on 8 GPUs, and was audited as 8 per node."""
    lay = parse_launch([_sbatch(tmp_path, 2, 8)])
    assert (lay.gpus_per_node, lay.tasks_per_node) == (64, 8)
    assert "job.sh:3: #SBATCH --ntasks-per-node=8" in lay.sources["tasks_per_node"]
    assert "srun torchrun --nproc_per_node 8" in lay.sources["gpus_per_node"]
    one = parse_launch([_sbatch(tmp_path, 2, 1)])  # one task per node: torchrun starts the node's 8
    assert (one.gpus_per_node, one.tasks_per_node, one.world_size) == (8, None, 16)
    # srun's own -n over the header's 2 nodes is 1 a node whatever its --ntasks-per-node (a maximum beside -n)
    script = tmp_path / "job.sh"
    script.write_text(script.read_text().replace("srun torchrun", "srun -n 2 --ntasks-per-node=8 torchrun"))
    lay = parse_launch([script])
    assert (lay.gpus_per_node, lay.tasks_per_node, lay.world_size) == (8, None, 16)


@pytest.mark.parametrize("where", ["catalog", "allocation"])
def test_more_processes_than_gpus_from_srun_tasks_is_an_error_naming_the_lines_and_the_fix(tmp_path, where) -> None:
    script = _sbatch(tmp_path, 2, 8)
    topology = tmp_path / "topology.conf"
    topology.write_text("SwitchName=leaf0 Nodes=node[01-02]\n")
    on = (["--cluster", "dgx-h100", "--gpus", "16"] if where == "catalog" else
          ["--slurm-topology", str(topology), "--nodelist", "node[01-02]", "--node-type", "dgx-h100"])
    said = _refusal(["--launch", str(script), "--model", "llama3-8b", *on])
    for fact in ("64 processes per node", "job.sh:3: #SBATCH --ntasks-per-node=8", "job.sh:5: srun torchrun",
                 "--ntasks-per-node=1", "8 GPUs"):
        assert fact in said, (fact, said)


def test_a_launch_with_sbatch_scripts_srun_bash_c_torchrun_counts_its_tasks(tmp_path: Path) -> None:
    """Megatron-Bridge scripts/training/launch_with_sbatch.sh (at 08aaf5c7): `#SBATCH --ntasks-per-node=8`, a torchrun
    command built in CMD with --node_rank=\\$SLURM_PROCID, run as `srun ... bash -c "$CMD"`: 8 torchruns per node,
    whose node ranks run to 8 x the nodes; with --ntasks-per-node=1 the same script starts 8 per node."""
    text = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node={tasks}\n#SBATCH --gpus-per-node=8\n"
            'CMD="torchrun"\nCMD="$CMD --nproc_per_node=$SLURM_GPUS_PER_NODE"\n'
            'CMD="$CMD --nnodes=$SLURM_JOB_NUM_NODES"\nCMD="$CMD --node_rank=\\$SLURM_PROCID"\n'
            'CMD="$CMD --master_addr=\\$(scontrol show hostname \\$SLURM_NODELIST | head -n1)"\n'
            f'CMD="$CMD pretrain_gpt.py {ARGS}"\n'
            'SRUN_CMD="srun --mpi=pmix --container-image=/images/nemo.sqsh"\n$SRUN_CMD bash -c "$CMD"\n')
    script = tmp_path / "launch_with_sbatch.sh"
    script.write_text(text.format(tasks=8))
    lay = parse_launch([script])
    assert (lay.gpus_per_node, lay.tasks_per_node) == (64, 8)
    assert "$SLURM_PROCID" in lay.sources["gpus_per_node"] and "0 to 15" in lay.sources["gpus_per_node"]
    said = _refusal(["--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"])
    assert "launch_with_sbatch.sh:3 gives 8" in said and "--ntasks-per-node=1" in said
    script.write_text(text.format(tasks=1))
    one = parse_launch([script])
    assert (one.gpus_per_node, one.tasks_per_node, one.world_size) == (8, None, 16)


@pytest.mark.parametrize(("header", "srun"), [("#SBATCH --nodes=1\n", "srun"), ("", "srun -N 1")])
def test_srun_nodes_other_than_torchruns_nnodes_is_an_error_naming_both_lines(tmp_path, header, srun) -> None:
    """A user trial: `#SBATCH --nodes=256` beside a literal `torchrun --nnodes 512` was audited silently as 512
    nodes; torchrun's rendezvous waits for nodes srun never starts it on."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}{srun} {TORCHRUN.format(nnodes=2).removeprefix('srun ')}")
    with pytest.raises(InputError) as err:
        parse_launch([script])
    said = str(err.value)
    line = 3 if header else 2
    # srun's -N is its step's count, which srun sets $SLURM_NNODES to in its tasks only (slurm env_array_for_step)
    where = "the job's 1 nodes" if header else "its step's 1 nodes"
    for fact in ("torchrun --nnodes 2", f"job.sh:{line}: {srun} torchrun", where,
                 "torchrun --nnodes 1", "--nnodes $SLURM_NNODES"):
        assert fact in said, (fact, said)
    assert ("job.sh:2: #SBATCH --nodes=1" in said and "#SBATCH --nodes=2" in said) if header else \
        ("srun -N 2" in said)
    script.write_text(f"#!/bin/bash\n{header}{srun} {TORCHRUN.format(nnodes='$SLURM_NNODES').removeprefix('srun ')}")
    if header:  # the job's own count: no conflict
        assert parse_launch([script]).world_size == 8


def test_srun_reads_the_jobs_task_count(tmp_path) -> None:
    """srun reads SLURM_NTASKS (`#SBATCH --ntasks=32`) as its -n (srun(1) INPUT ENVIRONMENT VARIABLES), and block
    deals 32 tasks on 4 nodes 8 a node (slurm_step_layout.c _task_layout_block): a QA trial's `#SBATCH --nodes=4
    --ntasks=32` with `srun python` was priced on the cluster's 1,024 GPUs.  srun's own -N without -n keeps that
    count (slurm src/srun/opt.c _opt_verify resets an environment -n only beside a tasks-per-node): a QA trial's
    `#SBATCH --nodes=2 --ntasks=16` with `srun -N 2 python` was left open and priced on 1,024 GPUs."""
    script = tmp_path / "job.sh"
    body = ("pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 "
            "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
            "--global-batch-size 1024 --bf16\n")
    script.write_text("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks=32\nsrun python " + body)
    lay = parse_launch([script])
    assert lay.world_size == 32 and lay.gpus_per_node == 8
    assert "#SBATCH --ntasks=32" in lay.sources["world_size"]
    script.write_text("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks=32\nsrun -N 2 python " + body)
    lay = parse_launch([script])
    assert (lay.world_size, lay.gpus_per_node) == (32, 16)  # 32 tasks on srun's 2 nodes (the audit refuses 16 a node)
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks=16\nsrun -N 2 python " + body)
    lay = parse_launch([script])
    assert (lay.world_size, lay.gpus_per_node) == (16, 8)
    assert "#SBATCH --ntasks=16" in lay.sources["world_size"]
    script.write_text("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n#SBATCH --ntasks=32\n"
                      "srun -N 2 python " + body)  # srun's -N beside a tasks-per-node: N x 8, not the job's 32
    lay = parse_launch([script])
    assert (lay.world_size, lay.gpus_per_node) == (16, 8)


def test_srun_nodes_without_a_task_count_start_one_task_a_node(tmp_path) -> None:
    """`srun -N 2 python` where nothing gives a task count (no -n, no --ntasks-per-node, no #SBATCH --ntasks) starts
    one task per node (slurm src/srun/opt.c _opt_verify, "1 proc / node default"): two ranks, not a world left to
    the cluster's 1,024 GPUs."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\nsrun -N 2 python pretrain_gpt.py --num-layers 32 "
                      "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
                      "--micro-batch-size 1 --global-batch-size 1024 --bf16\n")
    lay = parse_launch([script])
    assert (lay.world_size, lay.gpus_per_node) == (2, 1)
    assert "one task per node" in lay.sources["gpus_per_node"]


def test_a_layout_that_does_not_divide_the_ranks_srun_starts_names_them(tmp_path) -> None:
    """`srun -N 2 python` with tp 4 starts 2 ranks (one task a node): the framework refuses the job, and the error
    names the ranks the files start rather than asking for --gpus, which cannot change what srun starts."""
    from click.testing import CliRunner

    from placement.cli import main

    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\nsrun -N 2 python pretrain_gpt.py --tensor-model-parallel-size 4 "
                      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                      "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 1024 --bf16\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "does not divide the 2 GPUs, the ranks they start" in out.output
    assert "srun's default of one task" in out.output
    assert "(--gpus)" not in out.output


def _elastic(tmp_path: Path, nodes: int) -> Path:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --ntasks-per-node=1\nsrun torchrun "
                      f"--nnodes=2:4 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=node1:29500 "
                      f"pretrain_gpt.py --tensor-model-parallel-size 4 --num-layers 32 --hidden-size 4096 "
                      f"--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
                      f"--micro-batch-size 1 --global-batch-size 256 --bf16\n")
    return script


@pytest.mark.parametrize(("nodes", "world"), [(4, 32), (2, 16)])
def test_an_elastic_torchrun_under_srun_runs_on_sruns_nodes(tmp_path, nodes: int, world: int) -> None:
    """`srun torchrun --nnodes=2:4` starts a torchrun agent on each of srun's nodes at once, and the elastic
    rendezvous admits them all up to its maximum (torch dynamic_rendezvous.py _add_to_participants): on 4 (or 2)
    nodes the world is theirs.  A QA trial priced the 4-node job on the cluster's 1,024 GPUs."""
    lay = parse_launch([_elastic(tmp_path, nodes)])
    assert lay.world_size == world
    assert "elastic --nnodes 2:4, and srun starts a torchrun on each of its" in lay.sources["world_size"]


@pytest.mark.parametrize(("nodes", "facts"), [
    (8, ("admits the first 4 to join and keeps the other 4 idle as spares", "ask for 4 nodes", "--nnodes 2:8")),
    (1, ("waits for 2 nodes and 1 join", "never completes", "ask for 2 to 4 nodes", "--nnodes 1:4")),
])
def test_an_elastic_torchrun_on_nodes_outside_its_range_is_an_error(tmp_path, nodes: int, facts) -> None:
    """A QA trial: `srun torchrun --nnodes=2:4` on 8 nodes (or 1) left the world size open, then priced on the
    cluster's GPUs; on 8 the rendezvous runs 4 of them, which is not fixed, and on 1 it never completes."""
    script = _elastic(tmp_path, nodes)
    said = _refusal(["--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100"])
    for fact in ("elastic torchrun --nnodes 2:4", "job.sh:4: srun torchrun", f"job.sh:2: #SBATCH --nodes={nodes}",
                 *facts):
        assert fact in said, (fact, said)


@pytest.mark.parametrize(("header", "world", "per_node", "line"), [
    ("#SBATCH --nodes=2 --ntasks-per-node=8\n", 16, 8, "job.sh:2: #SBATCH --nodes=2 --ntasks-per-node=8"),
    ("#SBATCH -N 2 -n 16  # two nodes\n", 16, 8, "job.sh:2: #SBATCH -N 2 -n 16"),
    ("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --nodes=4\n", 32, 8, "job.sh:4: #SBATCH --nodes=4"),
    ("#SBATCH --job-name='a # b' --nodes 2\n#SBATCH --ntasks-per-node=8\n", 16, 8, "#SBATCH --job-name"),
    ("#SLURM --nodes=2\n#SBATCH --ntasks-per-node=8\n", 16, 8, "job.sh:2: #SLURM --nodes=2"),
])
def test_the_header_is_read_as_sbatch_reads_it(tmp_path: Path, header, world, per_node, line) -> None:
    """sbatch passes every argument of every #SBATCH line to getopt in order (slurm src/sbatch/opt.c
    _opt_batch_script, get_argument: quotes group, an unquoted # ends the line): a line may hold several options, and
    of one given twice the last counts.  A QA trial: `#SBATCH --nodes=2 --ntasks-per-node=8` left the world size
    open, and `--nodes=2` then `--nodes=4` was priced on 2 nodes."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}srun python pretrain_gpt.py {ARGS}\n")
    lay = parse_launch([script])
    assert (lay.world_size, lay.gpus_per_node) == (world, per_node)
    assert line in lay.sources["world_size"]
