"""srun's --export decides the environment of its tasks (srun(1) --export): `ALL` (the default) the caller's,
`NONE` none of it, a list without `ALL` SLURM's and the listed variables, `NAME=value` items set (under `ALL` where the
caller does not).  A QA trial's `srun --export=ALL,CUDA_DEVICE_MAX_CONNECTIONS=1 python pretrain_gpt.py ...` (tp 2)
was told the launch files do not set CUDA_DEVICE_MAX_CONNECTIONS, which Megatron-LM asserts; and
`srun --export=NONE` passed on the variables the script exported."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch

ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 1024 --bf16")
HEADER = "#!/bin/bash\n#SBATCH -N 4\n#SBATCH --ntasks-per-node=8\n"


def _read(tmp_path: Path, export: str, setting: str = "export CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_IB_HCA=mlx5_0\n",
          shell: bool = False):
    path = tmp_path / "job.sh"
    run = f"python pretrain_gpt.py {ARGS}"
    if shell:
        run = f'bash -c "{run} --seed \\${{SEED:-7}}"'
    path.write_text(f"{HEADER}{setting}srun -l --mpi=pmix {export} {run}\n")
    return parse_launch([path])


@pytest.mark.parametrize(("export", "connections", "nccl"), [
    ("", "1", True),
    ("--export=ALL", "1", True),
    ("--export=NONE", None, False),
    ("--export=CUDA_DEVICE_MAX_CONNECTIONS", "1", False),
    ("--export NCCL_IB_HCA", None, True),
    ("--export=ALL,CUDA_DEVICE_MAX_CONNECTIONS=8", "1", True),  # the caller's value wins under ALL
    ("--export=CUDA_DEVICE_MAX_CONNECTIONS=8", "8", False),
    ("--export=all,NCCL_DEBUG=INFO", "1", True),  # srun takes ALL and NONE in any case (src/srun/launch.c)
    ("--export=NONE,CUDA_DEVICE_MAX_CONNECTIONS=1", None, False),  # ... and stops reading the list at NONE
    ("--export=CUDA_DEVICE_MAX_CONNECTIONS=8,none", "8", False),
])
@pytest.mark.parametrize("shell", [False, True])
def test_the_tasks_get_what_srun_exports(tmp_path: Path, export: str, connections: str | None, nccl: bool,
                                         shell: bool) -> None:
    lay = _read(tmp_path, export, shell=shell)
    assert lay.device_max_connections == connections, lay.sources.get("device_max_connections")
    assert any("NCCL_IB_HCA" in x for x in lay.launch_environment or ()) is nccl


def test_an_export_sets_a_variable_the_script_does_not(tmp_path: Path) -> None:
    lay = _read(tmp_path, "--export=ALL,CUDA_DEVICE_MAX_CONNECTIONS=1", setting="")
    assert lay.device_max_connections == "1"
    assert "--export=ALL,CUDA_DEVICE_MAX_CONNECTIONS=1" in lay.sources["device_max_connections"]


@pytest.mark.parametrize("shell", [False, True])
def test_a_withheld_export_is_blamed_on_the_srun_line(tmp_path: Path, shell: bool) -> None:
    """A QA trial: `export CUDA_DEVICE_MAX_CONNECTIONS=1` and `export PYTORCH_CUDA_ALLOC_CONF=...` above an
    `srun --export=NONE python pretrain_gpt.py ...` (tp 2) were told the launch files do not set them and to export
    them in the launch file, which it does: srun's --export keeps them from the ranks, and the findings now name the
    srun line and how it passes them on."""
    from placement.audit.core import _allocator_note, _check_megatron_connections
    from placement.catalog import load_accelerator, load_cluster
    from placement.specs import Layout
    from placement.topology import Topology

    lay = _read(tmp_path, "--export=NONE", shell=shell,
                setting="export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                        "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    assert lay.device_max_connections is None and lay.allocator_conf == ""
    for name, line in (("device_max_connections", 4), ("allocator_conf", 5)):
        assert f"exported at {tmp_path / 'job.sh'}:{line} does not reach the ranks" in lay.sources[name]
        assert f"srun at {tmp_path / 'job.sh'}:6 (`--export=NONE`)" in lay.sources[name]
    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=32)
    found = _check_megatron_connections(lay, Layout(tp=2, dp=16), topo)
    assert found is not None and "launch files do not set" not in found.message
    assert "srun line" in found.message and "--export=ALL" in found.message
    note = _allocator_note(lay)
    assert note is not None and "in the launch file" not in note.message and "srun line" in note.message


@pytest.mark.parametrize(("header", "export", "connections"), [
    ("#SBATCH --export=NONE\n", "", None),
    ("#SBATCH --export=NONE\n", "--export=ALL", "1"),
    ("#SBATCH --export=ALL\n", "", "1"),
    ("#SBATCH --export=CUDA_DEVICE_MAX_CONNECTIONS\n", "", "1"),
])
@pytest.mark.parametrize("shell", [False, True])
def test_srun_inherits_the_batch_scripts_export(tmp_path: Path, header: str, export: str, connections: str | None,
                                                shell: bool) -> None:
    """sbatch passes its --export (other than ALL) to srun as SLURM_EXPORT_ENV, which srun reads as its own
    (slurm src/sbatch/opt.c, src/srun/opt.c env_vars; srun(1) --export: steps inherit "NONE" from sbatch).  A QA
    trial: `#SBATCH --export=NONE` above `export CUDA_DEVICE_MAX_CONNECTIONS=1` and `srun python pretrain_gpt.py`
    was read as the ranks running with it."""
    path = tmp_path / "job.sh"
    run = f"python pretrain_gpt.py {ARGS}"
    if shell:
        run = f'bash -c "{run}"'
    path.write_text(f"{HEADER}{header}export CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_IB_HCA=mlx5_0\nsrun {export} {run}\n")
    lay = parse_launch([path])
    assert lay.device_max_connections == connections, lay.sources.get("device_max_connections")
    if connections is None:
        assert f"from {path}:4: sbatch passes its --export to srun as SLURM_EXPORT_ENV" in \
            lay.sources["device_max_connections"]


@pytest.mark.parametrize(("header", "export"), [("", "--export=NONE"), ("#SBATCH --export=NONE\n", "")])
def test_a_layout_variable_srun_withholds_names_the_srun_line(tmp_path: Path, header: str, export: str) -> None:
    """A QA trial: `export TP=4` above `srun --export=NONE bash -c "python pretrain_gpt.py
    --tensor-model-parallel-size \\$TP ..."` was told TP is a variable 'the files do not set ...; set it in the
    script', which it does: srun keeps it from its tasks, and the error now names both lines and srun's fix."""
    from placement.errors import InputError

    path = tmp_path / "job.sh"
    args = ARGS.replace("--tensor-model-parallel-size 2", "--tensor-model-parallel-size \\$TP")
    path.write_text(f"{HEADER}{header}export TP=4\nsrun {export} bash -c \"python pretrain_gpt.py {args}\"\n")
    set_at, srun_at = (4, 5) if not header else (5, 6)
    with pytest.raises(InputError) as e:
        parse_launch([path])
    said = str(e.value)
    assert f"withheld by srun: {path}:{set_at} exports it, but srun at {path}:{srun_at}" in said
    assert "pass it on that srun line: --export=ALL" in said and "set it in the script" not in said
    path.write_text(path.read_text().replace(f"srun {export}", "srun --export=ALL"))
    assert parse_launch([path]).tp == 4


def test_a_default_srun_leaves_in_place_of_the_scripts_export_says_so(tmp_path: Path) -> None:
    """`export TP=4` above `srun --export=NONE bash -c "... \\${TP:-2}"`: the tasks run at the default 2, which is
    priced, and its source now says the script's 4 is withheld by srun, not only 'the job's environment may set
    TP' (a QA trial)."""
    path = tmp_path / "job.sh"
    args = ARGS.replace("--tensor-model-parallel-size 2", "--tensor-model-parallel-size \\${TP:-8}")
    path.write_text(f"{HEADER}export TP=4\nsrun --export=NONE bash -c \"python pretrain_gpt.py {args}\"\n")
    lay = parse_launch([path])
    assert lay.tp == 8
    assert f"(withheld by srun: {path}:4 exports it, but srun at {path}:5" in lay.sources["tp"]
    path.write_text(path.read_text().replace("--export=NONE", "--export=ALL"))
    assert parse_launch([path]).tp == 4
