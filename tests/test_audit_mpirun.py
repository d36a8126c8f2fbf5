"""`mpirun -np 16 ... python pretrain_gpt.py` starts one rank per MPI process: its process count is the world size and
its processes per node (`-npernode`, `-N`, `--map-by ppr:N:node`, Hydra's `-ppn`) the ranks per node (Open MPI
mpirun(1)).  A QA trial: `mpirun -np 16 --hostfile hosts --map-by ppr:8:node python pretrain_gpt.py ...` (tp 4) was
priced on the cluster's 1,024 GPUs (dp 256, 0.274 s) instead of its 16 (dp 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch

ARGS = ("--tensor-model-parallel-size 4 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 256 --bf16")


@pytest.mark.parametrize(("flags", "world", "per_node"), [
    ("-np 16 --hostfile hosts --map-by ppr:8:node:PE=4 --bind-to none", 16, 8),
    ("-n 32 -npernode 8", 32, 8),
    ("--np=16 -N 8", 16, 8),
    ("-np 16 -ppn 4", 16, 4),
    ("-np 8", 8, None),
    ("-np $NP --npernode 8", None, 8),
])
def test_mpirun_fixes_the_world_size(tmp_path: Path, flags: str, world: int | None, per_node: int | None) -> None:
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\nmpirun {flags} -x MASTER_ADDR=node01 python pretrain_gpt.py {ARGS}\n")
    lay = parse_launch([path])
    assert lay.world_size == world and lay.gpus_per_node == per_node
    if world is not None:
        assert "(mpirun starts one rank per process)" in lay.sources["world_size"]
    if "--hostfile" in flags:
        assert any("mpirun hosts" in x and "give --hosts hosts" in x for x in lay.ignored)
