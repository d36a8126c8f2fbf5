"""A job whose launch files start fewer processes per node than the catalog cluster's nodes hold runs on part of
each node: the audit lays it out so (hosts of that many GPUs), not packed onto full nodes, and says so in the value's
source.  From a user trial: BLOOM's tr11f-6B3 script runs 4 processes on each of 32 nodes (GPUS_PER_NODE=4) and was
audited as 16 full 8-GPU nodes, with pipeline neighbours that cross nodes in the real job sharing one."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

SCRIPT = """#!/bin/bash
GPUS_PER_NODE={gpn}
NNODES={nodes}
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 \\
    --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 \\
    --seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --bf16
"""


def _audit(tmp_path: Path, gpn: int, nodes: int) -> tuple[int, dict | str]:
    path = tmp_path / "train.sh"
    path.write_text(SCRIPT.format(gpn=gpn, nodes=nodes), encoding="utf-8")
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--json"])
    return out.exit_code, (json.loads(out.stdout) if out.output.startswith("{") else out.output)


def test_four_processes_a_node_are_laid_out_on_hosts_of_four(tmp_path: Path) -> None:
    code, out = _audit(tmp_path, 4, 4)
    assert code in (0, 1), out
    hosts = {}
    for r in out["estimate"]["mapping"]:
        hosts.setdefault(r["host"], set()).add(r["local_gpu"])
    assert len(hosts) == 4 and all(gpus == {0, 1, 2, 3} for gpus in hosts.values())
    assert "4 of each dgx-h100 node's 8 GPUs" in out["layout"]["sources"]["gpus_per_node"]
    code, full = _audit(tmp_path, 8, 2)
    assert len({r["host"] for r in full["estimate"]["mapping"]}) == 2
    # the same 16 ranks: on 4 hosts the pipeline's sends cross the network, on 2 the TP x DP x PP grid packs
    assert out["estimate"]["step_time_s"] != full["estimate"]["step_time_s"]


def test_more_processes_than_a_node_holds_is_an_error(tmp_path: Path) -> None:
    code, out = _audit(tmp_path, 16, 1)
    assert code == 2 and "start 16 processes per node" in out and "nodes have 8 GPUs" in out


def test_a_plan_on_part_of_one_node_audits_at_its_own_price(tmp_path: Path) -> None:
    """`plan --gpus 7` on 8-GPU nodes lays the job on one node's first 7 GPUs and writes --nproc-per-node 7; the
    audit of that file refused it (hosts of 7 GPUs cannot tile the cluster), though one node needs no tiling.
    Several nodes of 7 still need a cluster file whose nodes have 7 GPUs."""
    plan = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "7",
                                     "--framework", "megatron", "--out", str(tmp_path), "--json"])
    assert plan.exit_code == 0, plan.output
    priced = json.loads(plan.output[plan.output.index("{"):])["plans"][0]["step_time_s"]
    out = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "megatron.sh"), "--model", "llama3-8b",
                                    "--cluster", "dgx-h100", "--gpus", "7", "--json"])
    assert out.exit_code in (0, 1), out.output
    assert json.loads(out.stdout)["estimate"]["step_time_s"] == priced
    code, text = _audit(tmp_path, 7, 2)
    assert code == 2 and "placement cannot lay out part of each node there" in str(text)
