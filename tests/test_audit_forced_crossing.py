"""A group the allocation forces across its blocks: partial NVL72 racks whose tray counts the TP groups do not tile.
No host order keeps every group inside, so the finding says the allocation forces it and prices the smaller group
that tiles every rack (a user trial: 21 of 512 TP groups of 8 straddled racks of 15 and 17 trays, and the finding
read 0.000 s, "keeping the groups inside costs more elsewhere than the crossing does")."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

RACKS = {"rack1": "nvl[01-17]", "rack2": "nvl[18-33]", "rack3": "nvl[34-48]", "rack4": "nvl[49-64]"}
"""Four racks of 17, 16, 15 and 16 trays (4 GPUs each): TP groups of 8 (two trays) tile only the even ones."""


def audit(tmp_path: Path, racks: dict[str, str], nodes: str, tp: int) -> dict:
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nnodes 64 --nproc_per_node 4 pretrain_gpt.py --tensor-model-parallel-size {tp} "
                      "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
                      "--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm "
                      "--position-embedding-type rope --vocab-size 128256 --untie-embeddings-and-output-weights "
                      "--disable-bias-linear --seq-length 4096 "
                      "--micro-batch-size 1 --global-batch-size 256 --bf16 --sequence-parallel\n")
    topo = tmp_path / "topology.conf"
    topo.write_text("".join(f"BlockName={name} Nodes={hosts}\n" for name, hosts in racks.items()) + "BlockSizes=1\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                       str(topo), "--nodelist", nodes, "--node-type", "gb200-nvl72", "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_racks_the_tp_groups_do_not_tile_force_the_crossing_and_the_finding_says_so(tmp_path: Path) -> None:
    data = audit(tmp_path, RACKS, "nvl[01-64]", 8)
    crossing = next(f for f in data["findings"] if f["kind"] == "tp_crosses_node")
    assert "the allocation forces it: 2 of its 4" in crossing["message"]
    assert "hold 60, 68 of the job's GPUs" in crossing["message"]
    assert "the best layout with tp <= 4" in crossing["message"]
    assert "costs more elsewhere" not in crossing["message"]


def test_racks_the_groups_tile_are_no_forced_crossing(tmp_path: Path) -> None:
    even = {"rack1": "nvl[01-16]", "rack2": "nvl[17-32]", "rack3": "nvl[33-48]", "rack4": "nvl[49-64]"}
    data = audit(tmp_path, even, "nvl[01-64]", 8)
    assert not [f for f in data["findings"] if f["kind"] == "tp_crosses_node"]
