"""An `--oversubscription` no traffic of the job meets is said to price nothing.  A QA trial gave
`--oversubscription 4` to a job on 4 nodes of one leaf (tests/data/slurm/tree-5leaf.conf's leaf0): its fabric line read
'--oversubscription 4' as if priced, while the step was to the digit the 1:1 one (every host under one leaf, no
traffic crosses its uplinks); likewise 4 nodes of one block of a block-plugin topology.conf."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

TREE = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"
BLOCKS = "BlockName=b1 Nodes=gpu[0001-0008]\nBlockName=b2 Nodes=gpu[0009-0016]\nBlockSizes=8,16\n"


def _evaluate(topology: Path, nodelist: str, ratio: str, node_type: str = "dgx-h100") -> str:
    out = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--slurm-topology", str(topology),
                                    "--nodelist", nodelist, "--node-type", node_type, "--oversubscription", ratio,
                                    "--tp", "2", "--global-batch", "256"])
    assert out.exit_code == 0, out.output
    return out.output


def _step(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("step "))


def _fabric(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("fabric: "))


@pytest.mark.parametrize(("conf", "nodelist", "node_type", "under"), [
    (None, "gpu[0001-0004]", "dgx-h100", "leaf"),
    (BLOCKS, "gpu[0001-0004]", "dgx-h100", "leaf"),
    (BLOCKS, "gpu[0001-0004]", "gb200-nvl72", "nvlink5-nvl72"),
])
def test_a_ratio_the_job_never_meets_is_said_to_price_nothing(tmp_path: Path, conf: str | None, nodelist: str,
                                                              node_type: str, under: str) -> None:
    topology = TREE
    if conf is not None:
        topology = tmp_path / "topology.conf"
        topology.write_text(conf)
    four, one = _evaluate(topology, nodelist, "4", node_type), _evaluate(topology, nodelist, "1", node_type)
    assert _step(four) == _step(one)  # the ratio changes nothing: every host under one switch
    fabric = _fabric(four)
    assert (f"--oversubscription 4, which prices nothing here: the job's 4 hosts sit under one {under} and no "
            f"traffic of the job crosses its uplinks, so the step is the 1:1 one") in fabric, fabric
    assert "uplinks are shared by the job's GPUs" not in fabric


@pytest.mark.parametrize(("conf", "nodelist"), [(None, "gpu[0036-0039]"), (BLOCKS, "gpu[0001-0016]")])
def test_a_ratio_the_job_meets_gets_no_such_note(tmp_path: Path, conf: str | None, nodelist: str) -> None:
    topology = TREE
    if conf is not None:
        topology = tmp_path / "topology.conf"
        topology.write_text(conf)
    fabric = _fabric(_evaluate(topology, nodelist, "4"))
    assert "--oversubscription 4;" in fabric and "prices nothing" not in fabric
    assert "uplinks are shared by the job's GPUs" in fabric


def test_the_audit_says_it_too(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=4\nsrun torchrun --nproc_per_node 8 --nnodes 4 --node_rank "
                      "$SLURM_NODEID pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 32 --hidden-size 4096 "
                      "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
                      "--global-batch-size 256 --bf16 --ffn-hidden-size 14336 --swiglu --num-query-groups 8 "
                      "--group-query-attention --normalization RMSNorm --position-embedding-type rope "
                      "--untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 128256\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                    str(TREE), "--nodelist", "gpu[0001-0004]", "--node-type", "dgx-h100",
                                    "--oversubscription", "4"])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert "--oversubscription 4, which prices nothing here: the job's 4 hosts sit under one leaf" in out.output
