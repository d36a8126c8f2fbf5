"""A Megatron-LM script's --recompute-activations sets selective recompute in validate_args, over any
--recompute-granularity (core_v0.19.0 arguments.py:589-591): a best plan without selective recompute must remove it,
or the changed job still recomputes (a trial: Llama-3 70B on 320 H100 was told `- --recompute-granularity selective`,
a line its script does not have, and kept its --recompute-activations)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

SCRIPT = ("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
          "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 32 "
          "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
          "--num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --swiglu --normalization RMSNorm "
          "--position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights "
          "--sequence-parallel --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer "
          "--overlap-grad-reduce --overlap-param-gather --recompute-activations\n")


def test_a_best_plan_without_selective_recompute_removes_the_switch(tmp_path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "8", "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert data["estimate"]["layout"]["recompute"] == "selective"
    assert data["best"]["layout"]["recompute"] != "selective"
    rows = data["changes"] or data["changes_withheld"]
    (row,) = [c for c in rows if c["argument"] == "--recompute-activations"]
    assert row["from"] == "true" and row["to"] is None
    assert "core_v0.19.0 :589-591" in row["note"]
