"""Heterogeneous SLURM jobs: each `#SBATCH hetjob` line starts the next component's options (src/sbatch/opt.c
_opt_batch_script), the batch script's SLURM_* variables are component 0's, and srun runs on component 0 unless
--het-group says otherwise (srun(1) --het-group: "The default value is --het-group=0").  QA trials: the last
component's `#SBATCH --nodes=1 --ntasks-per-node=1` was read as the job's, so `srun python` on component 0's 2 nodes
of 8 was refused as 1 rank; `srun --het-group=0,1` (24 ranks over both components) was priced as 16; `srun A : B`
was priced as its first command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu "
        "--ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 --seq-length 4096 --micro-batch-size 1 "
        "--global-batch-size 64 --bf16")
HET = "#SBATCH --nodes=2 --ntasks-per-node=8\n#SBATCH hetjob\n#SBATCH --nodes=1 --ntasks-per-node=1\n"


def _script(tmp_path: Path, header: str, srun: str) -> Path:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}{srun} python pretrain_gpt.py {ARGS}\n")
    return script


@pytest.mark.parametrize("srun", ["srun", "srun --het-group=0"])
def test_srun_runs_on_component_zero_whose_header_lines_are_read(tmp_path: Path, srun) -> None:
    lay = parse_launch([_script(tmp_path, HET, srun)])
    assert (lay.world_size, lay.gpus_per_node) == (16, 8)
    assert "job.sh:2: #SBATCH --nodes=2 --ntasks-per-node=8" in lay.sources["world_size"]


@pytest.mark.parametrize(("header", "srun", "facts"), [
    (HET, "srun --het-group=0,1", ("srun --het-group 0,1", "job.sh:3: #SBATCH hetjob", "a job of 2 components")),
    (HET, "srun --het-group=1", ("srun --het-group 1",)),
    ("#SBATCH --nodes=2 --ntasks-per-node=8\n", f"srun -N 1 -n 8 python pretrain_gpt.py {ARGS} : -N 1 -n 8",
     ("standalone ':'", "heterogeneous step")),
])
def test_a_step_over_other_components_is_an_error_naming_the_line_and_the_fix(tmp_path, header, srun, facts) -> None:
    script = _script(tmp_path, header, srun)
    with pytest.raises(InputError) as err:
        parse_launch([script])
    for fact in (*facts, "job.sh:"):
        assert fact in str(err.value), (fact, str(err.value))
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100"])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
