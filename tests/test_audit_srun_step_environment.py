"""srun sets SLURM_NNODES and SLURM_NTASKS to its step's node and task counts in each task's environment (slurm
src/common/env.c env_array_for_step, unless --preserve-env), where the batch script's are the job's.  A QA trial's
`#SBATCH --nodes=4` job ran `srun -N 2 bash -c "torchrun --nnodes=\\$SLURM_NNODES ..."`: the task sees 2, and the
job runs on 2 nodes, but the audit refused it as torchrun counting the job's 4; and `srun -N 2 torchrun
--nnodes=$SLURM_NNODES` (the batch script's 4: it does not start) was told to use the $SLURM_NNODES it used."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 1024 --bf16")
HEADER = "#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n"


def _script(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "job.sh"
    path.write_text(HEADER + line + "\n")
    return path


@pytest.mark.parametrize("srun", ["srun -N 2", "srun -N2", "srun --nodes=2", "srun --nodes 2 --ntasks-per-node 1"])
def test_the_task_sees_its_steps_node_count(tmp_path: Path, srun: str) -> None:
    line = (f'{srun} bash -c "torchrun --nproc-per-node=8 --nnodes=\\$SLURM_NNODES --node_rank \\$SLURM_NODEID '
            f'pretrain_gpt.py {ARGS}"')
    lay = parse_launch([_script(tmp_path, line)])
    assert lay.world_size == 16, lay.sources.get("world_size")


def test_preserve_env_keeps_the_jobs_count(tmp_path: Path) -> None:
    line = (f'srun -N 2 --preserve-env bash -c "torchrun --nproc-per-node=8 --nnodes=\\$SLURM_NNODES --node_rank '
            f'\\$SLURM_NODEID pretrain_gpt.py {ARGS}"')
    with pytest.raises(InputError, match="torchrun's rendezvous counts 4 nodes"):
        parse_launch([_script(tmp_path, line)])


def test_the_batch_scripts_count_is_the_jobs_and_the_fix_says_where_to_expand_it(tmp_path: Path) -> None:
    line = (f"srun -N2 torchrun --nproc-per-node=8 --nnodes=$SLURM_NNODES --node_rank $SLURM_NODEID pretrain_gpt.py "
            f"{ARGS}")
    with pytest.raises(InputError) as err:
        parse_launch([_script(tmp_path, line)])
    said = str(err.value)
    assert "srun starts it on its step's 2 nodes" in said, said
    assert "`srun -N 2 bash -c '... --nnodes $SLURM_NNODES ...'`, which srun sets to the step's node count" in said
    assert "which SLURM sets to the job's node count" not in said
