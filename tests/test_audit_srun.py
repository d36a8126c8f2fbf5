"""`srun python train.py` starts one rank per SLURM task: the world size is srun's task count, from its own flags or
the job's #SBATCH header (a user trial's `#SBATCH --nodes=8 --ntasks-per-node=8` job was priced on the cluster's
default 1,024 GPUs, "the launch files do not fix it")."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch

ARGS = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 512 --bf16")


@pytest.mark.parametrize(("header", "srun", "world", "per_node", "said"), [
    ("#SBATCH --nodes=8\n#SBATCH --ntasks-per-node=8\n", "srun", 64, 8, "#SBATCH --nodes=8"),
    ("#SBATCH -N 4\n", "srun --ntasks-per-node 8", 32, 8, "#SBATCH -N 4"),
    ("", "srun -N 2 --ntasks-per-node=8", 16, 8, "srun -N 2"),
    ("#SBATCH --nodes=8\n", "srun -n 24", 24, None, "srun -n 24"),
    ("", "srun", None, None, None),  # nothing fixes the task count: left to --gpus / the allocation
])
def test_srun_python_runs_one_rank_per_task(tmp_path: Path, header, srun, world, per_node, said) -> None:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}{srun} python pretrain_gpt.py {ARGS}\n")
    lay = parse_launch([script])
    assert lay.world_size == world and lay.gpus_per_node == per_node
    if said is not None:
        assert said in lay.sources["world_size"] and "srun starts one rank per task" in lay.sources["world_size"]
