"""SLURM's task counts given through GPUs: `--ntasks-per-gpu=N` starts N tasks for every GPU the job (or srun's step)
asks for, and `--gpus=X --gpus-per-task=Y` X / Y tasks (slurm src/interfaces/gres.c gres_job_state_validate and
_handle_ntasks_per_tres_step; sbatch's job then has that SLURM_NTASKS, src/common/env.c env_array_for_batch_job).
A QA trial: `#SBATCH --nodes=2 --gpus-per-node=8 --ntasks-per-gpu=1` with `srun python pretrain_gpt.py` left the
world size to --gpus, which then priced the job on 64 GPUs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 512 --bf16")


def _job(tmp_path: Path, header: str, srun: str = "srun") -> Path:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}{srun} python pretrain_gpt.py {ARGS}\n")
    return script


@pytest.mark.parametrize(("header", "srun", "world", "per_node", "said"), [
    ("#SBATCH --nodes=2\n#SBATCH --ntasks-per-gpu=1\n#SBATCH --gpus-per-node=8\n", "srun", 16, 8,
     "#SBATCH --ntasks-per-gpu=1, 1 a GPU of the job's 16"),
    ("#SBATCH --nodes=4\n#SBATCH --gres=gpu:4\n#SBATCH --ntasks-per-gpu=2\n", "srun", 32, 8,
     "#SBATCH --ntasks-per-gpu=2, 2 a GPU of the job's 16"),
    ("#SBATCH -N 2\n#SBATCH --gpus=h100:16\n#SBATCH --gpus-per-task=1\n", "srun", 16, 8,
     "#SBATCH --gpus-per-task=1, of the job's 16 GPUs"),
    ("#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n", "srun --ntasks-per-gpu=1", 16, 8, "srun --ntasks-per-gpu=1"),
    ("#SBATCH --nodes=2\n#SBATCH --ntasks=4\n#SBATCH --ntasks-per-gpu=1\n", "srun", 4, 2, "#SBATCH --ntasks=4"),
])
def test_tasks_given_through_gpus_are_the_world(tmp_path: Path, header, srun, world, per_node, said) -> None:
    lay = parse_launch([_job(tmp_path, header, srun)])
    assert (lay.world_size, lay.gpus_per_node) == (world, per_node)
    assert said in lay.sources["world_size"] and "srun starts one rank per task" in lay.sources["world_size"]


@pytest.mark.parametrize(("header", "facts"), [
    ("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --ntasks-per-gpu=1\n#SBATCH --gpus-per-node=8\n",
     ("job.sh:3: #SBATCH --ntasks-per-node=8", "job.sh:4: #SBATCH --ntasks-per-gpu=1", "keep one of the two")),
    ("#SBATCH --nodes=2\n#SBATCH --gpus=12\n#SBATCH --gpus-per-task=8\n",
     ("job.sh:3: #SBATCH --gpus=12", "12 GPUs are not a whole number of tasks of 8", "multiple of 8 GPUs")),
])
def test_a_header_sbatch_refuses_is_an_error(tmp_path: Path, header, facts) -> None:
    with pytest.raises(InputError) as e:
        parse_launch([_job(tmp_path, header)])
    for fact in facts:
        assert fact in str(e.value), (fact, str(e.value))
    assert re.search(r"slurm src/(common/slurm_opt|interfaces/gres)\.c", str(e.value))


def _torchrun(tmp_path: Path, header_per_task: str, srun: str = "srun", procs: str = "8") -> Path:
    """torchtitan's multinode_trainer.slurm (at 76d5c72e2^): `#SBATCH --ntasks=4 --nodes=4 --gpus-per-task=8`, one
    torchrun a node."""
    script = tmp_path / "job.slurm"
    script.write_text(f"#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --nodes=4\n{header_per_task}"
                      f"{srun} torchrun --nnodes 4 --nproc_per_node {procs} --rdzv_backend c10d "
                      f"--rdzv_endpoint node01:29500 pretrain_gpt.py {ARGS}\n")
    return script


@pytest.mark.parametrize(("header", "srun"), [("#SBATCH --gpus-per-task=4\n", "srun"),
                                              ("", "srun --gpus-per-task=4")])
def test_torchrun_starting_more_processes_than_its_tasks_gpus_is_an_error(tmp_path: Path, header, srun) -> None:
    """--gpus-per-task binds each srun task to its GPUs (--tres-bind=gres/gpu:per_task, srun(1)): a torchrun task
    with 4 starting 8 processes leaves local ranks 4-7 without a GPU.  A QA trial priced it on 32 GPUs."""
    with pytest.raises(InputError, match=re.escape("but srun binds each task to 4 GPUs")) as e:
        parse_launch([_torchrun(tmp_path, header, srun)])
    for fact in ("local ranks 4 to 7 find no GPU", "--nproc_per_node 4, or --gpus-per-task=8",
                 "#SBATCH --gpus-per-task=4" if header else "srun --gpus-per-task=4"):
        assert fact in str(e.value), (fact, str(e.value))


def test_torchrun_on_its_tasks_gpus_is_read(tmp_path: Path) -> None:
    lay = parse_launch([_torchrun(tmp_path, "#SBATCH --gpus-per-task=8\n")])
    assert (lay.world_size, lay.gpus_per_node) == (32, 8)
    gpu = parse_launch([_torchrun(tmp_path, "#SBATCH --gpus-per-task=4\n", procs="gpu")])
    assert (gpu.world_size, gpu.gpus_per_node) == (16, 4)  # torch.cuda.device_count() is the task's 4


@pytest.mark.parametrize("srun", ["srun --gpus-per-node=4", "srun --gres=gpu:4", "srun --gpus-per-node h100:4"])
def test_torchrun_starting_more_processes_than_sruns_step_holds_is_an_error(tmp_path: Path, srun: str) -> None:
    """srun's own --gpus-per-node (--gres=gpu:G) sizes its step: its tasks see those GPUs, not the job's 8 (srun(1)
    --gpus-per-node).  A QA trial: `srun --gpus-per-node=4 torchrun --nproc_per_node 8` was priced 8 a node."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n#SBATCH --ntasks-per-node=1\n"
                      f"{srun} torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py {ARGS}\n")
    with pytest.raises(InputError, match=re.escape("but srun's step holds 4 GPUs a node")) as e:
        parse_launch([script])
    assert "local ranks 4 to 7" in str(e.value) and "srun --gpus-per-node=8" in str(e.value)
    script.write_text(script.read_text().replace("--nproc_per_node 8", "--nproc_per_node gpu"))
    assert (parse_launch([script]).world_size, parse_launch([script]).gpus_per_node) == (8, 4)


def _per_node_variable(tmp_path: Path, gpus: str) -> Path:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH {gpus}\n"
                      f"srun torchrun --nnodes=$SLURM_JOB_NUM_NODES --nproc_per_node=$SLURM_GPUS_PER_NODE "
                      f"--rdzv-backend c10d --rdzv-endpoint node01:29500 pretrain_gpt.py {ARGS}\n")
    return script


def test_slurm_gpus_per_node_is_the_header_value_as_written(tmp_path: Path) -> None:
    """sbatch sets SLURM_GPUS_PER_NODE to --gpus-per-node as written and not from --gres (slurm src/common/env.c
    set_env_from_opts): `--gpus-per-node=h100:8` gives torchrun --nproc_per_node h100:8, which it refuses
    ("Unsupported nproc_per_node value"), and --gres=gpu:8 none; a QA trial read 8 from both."""
    assert parse_launch([_per_node_variable(tmp_path, "--gpus-per-node=8")]).world_size == 16
    with pytest.raises(InputError, match=re.escape("Unsupported nproc_per_node value: h100:8")) as e:
        parse_launch([_per_node_variable(tmp_path, "--gpus-per-node=h100:8")])
    assert "$SLURM_GPUS_ON_NODE, --nproc_per_node gpu, or the count" in str(e.value)
    gres = parse_launch([_per_node_variable(tmp_path, "--gres=gpu:8")])
    assert gres.world_size is None and any("$SLURM_GPUS_PER_NODE" in x for x in gres.ignored)
