"""Under Megatron's --use-tp-pp-dp-mapping the job's node order and CUDA_VISIBLE_DEVICES are the launcher's, rank for
rank, not placement's rank order spelled as node ranks.  A QA run: a 16-GPU Llama 3 8B job (tp 2, pp 2) with the
mapping, node rank k on host k, was told `- node order host0 host0` and `- CUDA_VISIBLE_DEVICES 0,1,4,5,0,1,4,5` (a
GPU listed twice) beside a best plan on the same hosts in the same order."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

ARGS = ("pretrain_gpt.py --use-tp-pp-dp-mapping --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
        "--sequence-parallel --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
        "--micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer --swiglu "
        "--normalization RMSNorm --untie-embeddings-and-output-weights --disable-bias-linear "
        "--position-embedding-type rope")


def test_the_launched_node_order_is_the_launchers(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("export CUDA_DEVICE_MAX_CONNECTIONS=1\n" + "".join(
        f"# on host{k}\ntorchrun --nnodes 2 --nproc-per-node 8 --node-rank {k} --master-addr host0 {ARGS}\n"
        for k in range(2)))
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "16", "--json",
                                       "--launch", str(script)])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert doc["best"]["layout"]["pp"] != 2 or doc["changes"], "no better plan: the test shows nothing"
    changes = {c["argument"].split(" (")[0]: c for c in doc["changes"]}
    assert "--use-tp-pp-dp-mapping" in changes
    # the job runs node rank k on host k with its GPUs in numbered order, as the best plan's files do
    assert "node order" not in changes, changes.get("node order")
    assert "CUDA_VISIBLE_DEVICES" not in changes, changes.get("CUDA_VISIBLE_DEVICES")
