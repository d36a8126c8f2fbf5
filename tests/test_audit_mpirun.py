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


@pytest.mark.parametrize("flags", ["-np 16 --map-by node", "-np 16 --bynode", "-np 16 -npernode 8 --rank-by node",
                                   "-np 16 --map-by=node:PE=2"])
def test_mpirun_by_node_deals_ranks_round_robin(tmp_path: Path, flags: str) -> None:
    """Open MPI mpirun(1): --map-by node (--bynode) launches processes "one per node, cycling by node in a
    round-robin fashion" and assigns MPI_COMM_WORLD ranks so, as --rank-by node does: rank r on node r mod N, srun's
    cyclic.  A QA trial: `mpirun -np 16 --map-by node` was priced with each TP group inside a node."""
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\nmpirun {flags} python pretrain_gpt.py {ARGS}\n")
    lay = parse_launch([path])
    assert (lay.task_distribution, lay.task_dealer, lay.world_size) == ("cyclic", "mpirun", 16)
    assert "mpirun places rank r on node r mod N" in lay.sources["task_distribution"]


def test_mpirun_by_node_is_priced_dealt_and_changed_with_mpiruns_flag(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from placement.cli import main

    args = ("--tensor-model-parallel-size 8 --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
            "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm "
            "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
            "--vocab-size 128256 --seq-length 4096 --max-position-embeddings 8192 --micro-batch-size 1 "
            "--global-batch-size 256 --bf16")
    out = {}
    for flags in ("--map-by node", "--map-by ppr:8:node"):
        path = tmp_path / "job.sh"
        path.write_text(f"#!/bin/bash\nmpirun -np 16 {flags} python pretrain_gpt.py {args}\n")
        result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "llama3-8b",
                                           "--cluster", "dgx-h100", "--json"])
        assert result.exit_code in (0, 1), result.output
        out[flags] = json.loads(result.stdout)
    dealt, block = out["--map-by node"], out["--map-by ppr:8:node"]
    # each TP group of 8 runs over both nodes by node, inside one node in blocks
    assert dealt["estimate"]["step_time_s"] > block["estimate"]["step_time_s"]
    change = next(c for c in dealt["changes"] if c["argument"].startswith("mpirun"))
    assert (change["argument"], change["from"], change["to"]) == ("mpirun --map-by", "node", "ppr:8:node")
    assert not any(c["argument"].startswith("srun") for c in dealt["changes"])
