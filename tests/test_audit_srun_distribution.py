"""`srun -m/--distribution` decides which node each rank of an `srun python ...` launch (one rank per task) runs on:
block (srun's default) keeps consecutive ranks on one node, cyclic deals them one a node round robin, plane=P P at a
time (srun(1) -m).  A QA run: `srun --distribution=cyclic` on 512 nodes was priced with every TP group of 8 inside
its node (tp over nvlink, 4.979 s a step), where each ran over 8 nodes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.audit.core import task_slots
from placement.audit.launch import parse_launch
from placement.audit.readers.reading import LaunchLayout
from placement.cli import main
from placement.errors import InputError

ARGS = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 --sequence-parallel --num-layers 32 "
        "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
        "--num-query-groups 8 --swiglu --normalization RMSNorm --position-embedding-type rope "
        "--untie-embeddings-and-output-weights --disable-bias-linear --seq-length 8192 "
        "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 64 --bf16")


def _script(tmp_path: Path, srun: str, header: str = "") -> Path:
    script = tmp_path / "job.sbatch"
    tail = '"' if srun.endswith("$SLURM_LOCALID") else ""
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n{header}"
                      f"export CUDA_DEVICE_MAX_CONNECTIONS=1\n{srun} python pretrain_gpt.py {ARGS}{tail}\n")
    return script


def _audit(script: Path) -> dict:
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "32", "--json"])
    assert result.exit_code in (0, 1) and "Traceback" not in result.output, result.output
    return json.loads(result.output)


@pytest.mark.parametrize(("srun", "header", "dist", "said"), [
    ("srun --distribution=cyclic", "", "cyclic", "job.sbatch:5: srun --distribution=cyclic"),
    ("srun -m cyclic:block", "", "cyclic", "srun -m cyclic:block"),
    ("srun -m plane=2", "", "plane=2", "srun -m plane=2"),
    ("srun", "#SBATCH --distribution=cyclic\n", "cyclic", "#SBATCH --distribution=cyclic"),
    ("srun --distribution=block", "", "block", "srun --distribution=block"),
    # srun's tasks each running a shell that starts the rank (RANK=$SLURM_PROCID ...): the same dealing
    ('srun -m cyclic bash -c "RANK=\\$SLURM_PROCID LOCAL_RANK=\\$SLURM_LOCALID', "", "cyclic",
     "srun -m cyclic bash -c"),
    ("srun", "", None, None),
])
def test_srun_distribution_is_read_with_its_evidence(tmp_path: Path, srun, header, dist, said) -> None:
    lay = parse_launch([_script(tmp_path, srun, header)])
    assert lay.task_distribution == dist and lay.world_size == 32, (lay.task_distribution, lay.world_size)
    if said is not None:
        assert said in lay.sources["task_distribution"], lay.sources["task_distribution"]


def test_task_slots_deal_the_ranks_as_srun_does() -> None:
    """srun(1) -m on 4 nodes of 8: cyclic puts rank r on node r mod 4; plane=2 ranks 0-1 on node 0, 2-3 on node 1,
    ..., 8-9 on node 0 again."""
    lay = LaunchLayout(framework="megatron", task_distribution="cyclic")
    slots = task_slots(lay, 32, 8)
    assert (slots // 8).tolist()[:9] == [0, 1, 2, 3, 0, 1, 2, 3, 0] and sorted(slots.tolist()) == list(range(32))
    plane = task_slots(lay.model_copy(update={"task_distribution": "plane=2"}), 32, 8)
    assert (plane // 8).tolist()[:10] == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0] and plane[8] == 2
    block = task_slots(lay.model_copy(update={"task_distribution": "block"}), 32, 8)
    assert np.array_equal(block, np.arange(32))


def test_cyclic_distribution_prices_tp_groups_across_nodes_and_says_the_fix(tmp_path: Path) -> None:
    block = _audit(_script(tmp_path, "srun"))
    cyclic = _audit(_script(tmp_path, "srun --distribution=cyclic"))
    tp_block = block["estimate"]["crossings"]["tp"]["highest_level"]
    tp_cyclic = cyclic["estimate"]["crossings"]["tp"]["highest_level"]
    assert tp_block["leaf"] == 0 and tp_cyclic["leaf"] == 4, (tp_block, tp_cyclic)  # 4 TP groups, each on 4 nodes
    assert cyclic["estimate"]["step_time_s"] > block["estimate"]["step_time_s"] * 1.2
    kinds = {f["kind"] for f in cyclic["findings"]}
    assert "tp_crosses_node" in kinds, kinds
    change = cyclic["changes"][0]
    assert (change["argument"], change["from"], change["to"]) == ("srun --distribution", "cyclic", "block")
    assert "job.sbatch:5" in change["note"]
    # the host order and each node's GPU order are the job's as launched: no change reorders them for srun's dealing
    assert not any("CUDA_VISIBLE_DEVICES" in c["argument"] for c in cyclic["changes"]), cyclic["changes"]
    assert not any(c["argument"] == "srun --distribution" for c in block["changes"])


def test_a_plane_that_does_not_fill_a_node_evenly_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", "--launch", str(_script(tmp_path, "srun -m plane=3")), "--model",
                                       "llama3-8b", "--cluster", "dgx-h100", "--gpus", "32"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    # plane=3 deals 32 tasks over 4 nodes 3 a turn: 9, 9, 8 and 6 (slurm_step_layout.c _task_layout_plane)
    assert "srun -m plane=3" in result.output and "9, 9, 8, 6 a node" in result.output


@pytest.mark.parametrize(("line", "bound"), [("mpirun -np 32 --bind-to none", False),
                                             ("mpirun -np 32 --bind-to=core", True),
                                             ("mpiexec -n 32 -bind-to none", False),
                                             ("export OMPI_MCA_hwloc_base_binding_policy=none\nmpirun -np 32", False)])
def test_mpirun_bind_to_decides_the_binding(tmp_path: Path, line: str, bound: bool) -> None:
    """Open MPI's mpirun(1) --bind-to and MPICH Hydra's -bind-to (or OMPI_MCA_hwloc_base_binding_policy): `none`
    runs each rank unbound, priced so with the flag as evidence (a QA note: it was priced bound, 'as the MPI
    launcher decides')."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n{line} python pretrain_gpt.py {ARGS}\n")
    layout = parse_launch([script])
    assert layout.recipe["cpu_affinity"] is bound
    assert "bind" in layout.sources["recipe.cpu_affinity"]


@pytest.mark.parametrize(("srun", "dist", "noted"), [
    ("srun --distribution=pack", "block", True),  # pack alone: the default method, packed (proc_args.c)
    ("srun -m block,Pack", "block", True),
    ("srun --distribution=cyclic,pack", "cyclic", False),  # pack only changes block's counts
    ("srun -m block,NoPack", "block", False),
])
def test_the_node_packing_flag_is_read_and_its_block_layout_said(tmp_path: Path, srun, dist, noted) -> None:
    """A QA trial: `srun --distribution=pack`, which srun accepts (src/common/proc_args.c verify_dist_type), was
    refused as no method, and `-m block,Pack` (each node's CPUs filled first: slurm_step_layout.c
    _task_layout_block) was read as block with nothing said."""
    lay = parse_launch([_script(tmp_path, srun)])
    assert lay.task_distribution == dist
    assert any("Pack fills each node's CPUs" in i for i in lay.ignored) == noted, lay.ignored


def test_a_plane_that_deals_the_nodes_different_counts_is_an_error_naming_them(tmp_path: Path) -> None:
    """plane=4 deals 4 tasks a node in turn (slurm_step_layout.c _task_layout_plane): 12 tasks on 2 nodes run 8 and
    4.  A QA trial: read as 6 a node and refused as 'placement cannot lay out part of each node'."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=2 --ntasks=12\nsrun -m plane=4 python pretrain_gpt.py {ARGS}\n")
    with pytest.raises(InputError) as err:
        parse_launch([script])
    for fact in ("job.sh:3: srun -m plane=4", "8, 4 a node", "_task_layout_plane", "a multiple of 8"):
        assert fact in str(err.value), (fact, str(err.value))
    script.write_text(script.read_text().replace("--ntasks=12", "--ntasks=16"))
    lay = parse_launch([script])
    assert (lay.world_size, lay.gpus_per_node, lay.task_distribution) == (16, 8, "plane=4")
