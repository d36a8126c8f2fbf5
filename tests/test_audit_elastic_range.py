"""An elastic `torchrun --nnodes MIN:MAX` that no srun starts leaves its node count to the audit's, which must lie in
the range: below MIN torch's rendezvous never completes, above MAX it runs MAX nodes and keeps the rest idle as spares
(torch/distributed/elastic/rendezvous/dynamic_rendezvous.py).  A QA trial: `torchrun --nnodes=2:4
--nproc_per_node=8` on a 6-host --nodelist was priced on all 48 GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

MODEL = ("--tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
         "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm "
         "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
         "--seq-length 4096 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 480 --bf16")


def _files(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "train.sh"
    script.write_text(f"#!/bin/bash\ntorchrun --nnodes=2:4 --nproc_per_node=8 --rdzv-backend c10d "
                      f"--rdzv-endpoint node01:29500 pretrain_gpt.py {MODEL}\n")
    topology = tmp_path / "topology.conf"
    topology.write_text("SwitchName=leaf0 Nodes=node[01-06]\n")
    return script, topology


@pytest.mark.parametrize(("on", "facts"), [
    (["--nodelist", "node[01-06]"], ("--nodelist node[01-06] gives 6 hosts", "runs the first 4 nodes to join",
                                     "keeps the other 2 idle as spares")),
    (["--gpus", "8"], ("--gpus 8 is 1 node of 8", "waits for 2 nodes", "never completes")),
    ([], ("the dgx-h100 cluster's default 1,024 GPUs are 128 nodes of 8", "keeps the other 124 idle")),
])
def test_an_elastic_range_outside_the_audits_nodes_is_an_error(tmp_path: Path, on: list[str], facts) -> None:
    script, topology = _files(tmp_path)
    where = (["--slurm-topology", str(topology), "--node-type", "dgx-h100", *on] if "--nodelist" in on else
             ["--cluster", "dgx-h100", *on])
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", *where])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    for fact in ("elastic torchrun --nnodes 2:4", "train.sh:2", "2 to 4 (--gpus 16 to 32", *facts):
        assert fact in result.output, (fact, result.output)


def test_an_elastic_range_holding_the_audits_nodes_is_priced_on_them(tmp_path: Path) -> None:
    script, topology = _files(tmp_path)
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                       str(topology), "--nodelist", "node[01-04]", "--node-type", "dgx-h100"])
    assert result.exit_code in (0, 1), result.output
    assert "llama3-8b on 32 x h100-sxm" in result.output
