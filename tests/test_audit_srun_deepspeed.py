"""`srun deepspeed ...` runs the deepspeed launcher once per srun task, each a whole launcher (DeepSpeed
launcher/runner.py main): without a hostfile its own job on its node's GPUs (master 127.0.0.1), with one every host's
ranks again; only --no_ssh starts just its node's.  A QA trial: `#SBATCH --nodes=2 --ntasks-per-node=8` with `srun
deepspeed --num_gpus 8` was priced as one job of 8 ranks, where srun starts 16 launchers."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

ARGS = ("pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --bf16 "
        "--deepspeed --deepspeed_config ds.json")


def _files(tmp_path: Path, header: str, srun: str, launcher: str = "--num_gpus 8") -> list[Path]:
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, '
                                      '"bf16": {"enabled": true}, "zero_optimization": {"stage": 1}}')
    (tmp_path / "hostfile").write_text("node01 slots=8\nnode02 slots=8\n")
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\n{header}{srun} deepspeed {launcher} {ARGS}\n")
    return [script, tmp_path / "ds.json"]


@pytest.mark.parametrize(("header", "srun", "facts"), [
    ("#SBATCH --nodes=2 --ntasks-per-node=8\n", "srun",
     ("16 tasks", "job.sbatch:2: #SBATCH --nodes=2 --ntasks-per-node=8", "8 launchers on each node")),
    ("#SBATCH --nodes=2 --ntasks-per-node=1\n", "srun", ("2 tasks", "one launcher a node", "127.0.0.1")),
    ("", "srun -N 2", ("at least one task on each of its 2 nodes", "srun -N 2")),
])
def test_srun_starting_several_deepspeed_launchers_is_an_error_naming_the_lines_and_the_fix(
        tmp_path, header, srun, facts) -> None:
    with pytest.raises(InputError) as err:
        parse_launch(_files(tmp_path, header, srun))
    said = str(err.value)
    for fact in (*facts, "job.sbatch:", f"`{srun} deepspeed ...`", "deepspeed --hostfile hostfile",
                 "srun --ntasks-per-node=1 deepspeed --no_ssh --node_rank=$SLURM_NODEID"):
        assert fact in said, (fact, said)


def test_one_launcher_or_one_no_ssh_launcher_a_node_is_read_as_before(tmp_path) -> None:
    one = parse_launch(_files(tmp_path, "#SBATCH --nodes=1 --ntasks=1\n", "srun"))
    assert one.world_size == 8
    files = _files(tmp_path, "#SBATCH --nodes=2 --ntasks-per-node=1\n", "srun",
                   "--no_ssh --node_rank=$SLURM_NODEID --master_addr=node01 --hostfile hostfile")
    each = parse_launch([*files, tmp_path / "hostfile"])
    assert (each.world_size, each.gpus_per_node) == (16, 8)
    with pytest.raises(InputError, match="8 launchers on each node"):  # --no_ssh, but 8 of them a node
        parse_launch(_files(tmp_path, "#SBATCH --nodes=2 --ntasks-per-node=8\n", "srun",
                            "--no_ssh --node_rank=$SLURM_NODEID --master_addr=node01 --hostfile hostfile"))


def test_fewer_srun_tasks_than_nodes_start_that_many_launchers(tmp_path) -> None:
    """`srun -n 1 deepspeed` in a 2-node job starts one launcher (srun sets its nodes to its tasks: src/srun/opt.c
    _opt_verify "setting nnodes to 1"); a QA trial's was refused as one launcher on each of the 2 nodes."""
    one = parse_launch(_files(tmp_path, "#SBATCH --nodes=2\n", "srun -n 1"))
    assert one.world_size == 8


def test_launchers_whose_nodes_are_unsaid_are_not_said_to_run_one_a_node(tmp_path) -> None:
    with pytest.raises(InputError) as err:
        parse_launch(_files(tmp_path, "#SBATCH --ntasks=2\n", "srun"))
    said = str(err.value)
    assert "2 launchers, on one node or several" in said and "one launcher a node" not in said, said


def test_srun_with_no_task_count_says_it_starts_a_launcher_on_each_node(tmp_path) -> None:
    """Nothing fixes srun's count: it starts one task on each of the allocation's nodes, which the files do not size;
    the audit prices one launcher and says so (a QA trial's was priced with nothing said)."""
    lay = parse_launch(_files(tmp_path, "", "srun"))
    assert any("srun starts one deepspeed launcher on each node of the job's allocation" in i for i in lay.ignored)
    quiet = parse_launch(_files(tmp_path, "#SBATCH --nodes=1\n", "srun"))
    assert not any("srun's task count" in i for i in quiet.ignored)
