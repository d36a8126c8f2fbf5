"""srun's task layout where its tasks and nodes do not make whole nodes: fewer tasks than nodes run one a node on as
many nodes as tasks (src/srun/opt.c _opt_verify: "can't run %d processes on %d nodes, setting nnodes to %d"), and
tasks its nodes do not divide run different counts on different nodes (src/common/slurm_step_layout.c
_task_layout_block: `srun -N 2 -n 9` puts 5 on the first and 4 on the second).  QA trials: `srun -N 4 -n 2` with tp 2
was priced with both ranks on one node's NVLink; `srun -N 2 -n 9` was refused as '--gpus 9 is not a whole number of
dgx-h100 nodes', naming a flag the user never gave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu "
        "--ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 --seq-length 4096 --micro-batch-size 1 "
        "--global-batch-size 64 --bf16")


def _script(tmp_path: Path, header: str, srun: str) -> Path:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}{srun} python pretrain_gpt.py {ARGS}\n")
    return script


@pytest.mark.parametrize(("header", "srun"), [
    ("#SBATCH --nodes=4\n#SBATCH --gpus-per-node=8\n", "srun -N 4 -n 2"),
    ("#SBATCH --nodes=4\n#SBATCH --gpus-per-node=8\n", "srun -n 2"),  # the job's 4 nodes are srun's -N
    ("#SBATCH --nodes=4 --ntasks=2\n", "srun"),
])
def test_fewer_tasks_than_nodes_run_one_a_node_so_tp_crosses_nodes(tmp_path: Path, header, srun) -> None:
    lay = parse_launch([_script(tmp_path, header, srun)])
    assert (lay.world_size, lay.gpus_per_node) == (2, 1)
    assert "setting nnodes to 2" in lay.sources["gpus_per_node"]
    out = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "job.sh"), "--model", "llama3-8b",
                                    "--cluster", "dgx-h100", "--json"])
    assert out.exit_code in (0, 1), out.output
    mapping = json.loads(out.stdout)["estimate"]["mapping"]
    assert len({r["host"] for r in mapping}) == 2  # the TP pair spans two nodes, as srun runs it


@pytest.mark.parametrize(("header", "srun", "facts"), [
    ("", "srun -N 2 -n 9", ("srun -N 2 -n 9", "5 on the first and 4 on the second", "srun -n a task count", "8 or 10")),
    ("#SBATCH --nodes=4\n", "srun -n 18", ("srun -n 18", "5 on each of the first 2 and 4 on the other 2", "16 or 20")),
    ("#SBATCH --nodes=2\n#SBATCH --ntasks=9\n", "srun", ("#SBATCH --ntasks=9", "#SBATCH --ntasks a task count")),
    ("", "srun -N 2 --ntasks-per-node=8 -n 9", ("5 on the first and 4 on the second",)),
])
def test_tasks_the_nodes_do_not_divide_are_an_error_naming_the_counts_and_the_fix(tmp_path, header, srun,
                                                                                  facts) -> None:
    script = _script(tmp_path, header, srun)
    with pytest.raises(InputError) as err:
        parse_launch([script])
    for fact in (*facts, "job.sh:", "_task_layout_block"):
        assert fact in str(err.value), (fact, str(err.value))
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100"])
    assert out.exit_code == 2 and "Traceback" not in out.output and "--gpus" not in out.output, out.output


def test_a_gpu_flag_over_the_files_own_count_says_so_beside_the_flag(tmp_path: Path) -> None:
    """--gpus over a world size the files fix prices another job; the source says both (a QA trial: `srun -N 1 -n 8`
    with --gpus 16 was priced as dp 8 on 16 GPUs under the source '--gpus 16', the files' 8 unsaid)."""
    script = _script(tmp_path, "", "srun -N 1 -n 8")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "16", "--json"])
    assert out.exit_code in (0, 1), out.output
    said = json.loads(out.stdout)["layout"]["sources"]["num_gpus"]
    assert said.startswith("--gpus 16, over the launch files' 8 processes") and "srun -N 1 -n 8" in said, said
    same = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                     "dgx-h100", "--gpus", "8", "--json"])
    assert "over the launch files'" not in json.loads(same.stdout)["layout"]["sources"].get("num_gpus", "")


@pytest.mark.parametrize(("header", "srun", "world", "per_node"), [
    # the batch script's SLURM_NTASKS is 16 (env.c env_array_for_batch_job), srun reads it as -n and ignores its
    # own --ntasks-per-node 4 ("can't honor --ntasks-per-node": src/srun/opt.c _opt_verify)
    ("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n", "srun --ntasks-per-node=4", 16, 8),
    ("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n", "srun --ntasks-per-node=8", 8, 4),  # -n 8, 8 a node at most
    ("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n", "srun -N 2 --ntasks-per-node=4", 8, 4),  # its own -N: N x 4
])
def test_the_jobs_task_count_stands_over_sruns_own_tasks_per_node(tmp_path: Path, header, srun, world,
                                                                   per_node) -> None:
    lay = parse_launch([_script(tmp_path, header, srun)])
    assert (lay.world_size, lay.gpus_per_node) == (world, per_node), lay.sources


def test_srun_torchrun_whose_tasks_per_node_srun_ignores_is_refused_with_a_fix_that_holds(tmp_path: Path) -> None:
    """A QA trial: `srun --ntasks-per-node=1 torchrun --nproc_per_node 8` under `#SBATCH --nodes=2
    --ntasks-per-node=8` was priced as one torchrun a node, where srun starts the job's 16 tasks, 8 torchruns a node."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n"
                      "srun --ntasks-per-node=1 torchrun --nproc_per_node 8 --nnodes 2 --node_rank $SLURM_NODEID "
                      f"--master_addr node01 --master_port 29500 pretrain_gpt.py {ARGS}\n")
    lay = parse_launch([script])
    assert (lay.tasks_per_node, lay.gpus_per_node) == (8, 64)
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100"])
    assert out.exit_code == 2 and "srun -N $SLURM_NNODES --ntasks-per-node=1" in out.output, out.output
    script.write_text(script.read_text().replace("srun --ntasks", "srun -N $SLURM_NNODES --ntasks"))
    fixed = parse_launch([script])
    assert (fixed.tasks_per_node, fixed.gpus_per_node, fixed.world_size) == (None, 8, 16)
