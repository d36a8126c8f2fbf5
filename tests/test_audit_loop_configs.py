"""A batch script that runs its parallelism configs in a loop, as Megatron-Bridge's
examples/models/gpt_oss/slurm_pretrain.sh does: `for CONFIG in "${PARALLELISM_CONFIGS[@]}"`, each config read with
`IFS=',' read -r TP PP EP CP SP <<< "$CONFIG"`, the loop ending in `if [ $RUN_EXIT -ne 0 ]; then ... continue; fi`.
A QA trial: with one config the audit refused the launch as set 'inside the block ... whose condition cannot be
evaluated' (the trailing continue, which skips nothing), and then asked for --env TP=VALUE (the read was not
followed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

ARGS = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
        "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 1024 --bf16")


def _script(tmp_path: Path, config: str, tail: str, before: str = "") -> Path:
    path = tmp_path / "slurm_pretrain.sh"
    path.write_text(f"""#!/bin/bash
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
PARALLELISM_CONFIGS=({config})
for CONFIG in "${{PARALLELISM_CONFIGS[@]}}"; do
    IFS=',' read -r TP PP EP <<< "$CONFIG"
{before}    srun python pretrain_gpt.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP {ARGS}
    RUN_EXIT=$?
{tail}done
""")
    return path


CONTINUE = "    if [ $RUN_EXIT -ne 0 ]; then\n        echo failed\n        continue\n    fi\n"


def test_one_config_read_from_a_here_string_is_the_job(tmp_path: Path) -> None:
    lay = parse_launch([_script(tmp_path, '"2,4,1"', CONTINUE)])
    assert (lay.tp, lay.pp, lay.world_size) == (2, 4, 32)
    assert "slurm_pretrain.sh:6:" in lay.sources["tp"] or "read -r TP PP EP" in lay.sources["tp"]


def test_two_configs_are_two_jobs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="two launch commands with different arguments"):
        parse_launch([_script(tmp_path, '"2,4,1" "4,2,1"', CONTINUE)])


@pytest.mark.parametrize(("before", "tail"), [
    ("    if [ -f /x/$TP ]; then continue; fi\n", ""),  # skips the launch of some runs
    ("", "    if [ $RUN_EXIT -ne 0 ]; then\n        break\n    fi\n"),  # a break may end the runs
])
def test_a_jump_that_may_skip_a_launch_leaves_the_loop_unknown(tmp_path: Path, before: str, tail: str) -> None:
    with pytest.raises(InputError, match=r"depends on \$TP, which `IFS=',' read -r TP PP EP <<< \"\$CONFIG\"` reads "
                                         r"from \$CONFIG, the loop variable of .*slurm_pretrain.sh:5"):
        parse_launch([_script(tmp_path, '"2,4,1"', tail, before)])


def test_a_read_of_a_value_the_files_do_not_give_names_the_read(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n"
                    f"IFS=',' read -r TP PP <<< \"$SITE_CONFIG\"\n"
                    f"srun python pretrain_gpt.py --tensor-model-parallel-size $TP {ARGS}\n")
    with pytest.raises(InputError, match=r"\$TP, which `IFS=',' read -r TP PP <<< \"\$SITE_CONFIG\"` reads"):
        parse_launch([path])
