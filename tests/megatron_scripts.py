"""A Megatron-LM launch script of Mixtral 8x7B on 64 GPUs (8 nodes, EP 8), written for a test with extra arguments
(tests/test_graphs_recompute.py, tests/test_audit_moe_routing.py, tests/test_audit_changes.py), and the audit of a
launch file on H100s as JSON (tests/test_audit_moe_fusion_pair.py, tests/test_audit_shared_expert_overlap.py)."""

from __future__ import annotations

import json
from pathlib import Path

BRIDGE_DSV3 = Path(__file__).parent / "data" / "audit" / "bridge" / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"
"""Megatron-Bridge's DeepSeek-V3 H100 FP8 recipe config, as its run dumped it."""

MIXTRAL_8X7B = ("torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py --disable-bias-linear --num-layers 32 "
                "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --normalization RMSNorm "
                "--position-embedding-type rope --rotary-base 1000000 --swiglu --untie-embeddings-and-output-weights "
                "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 "
                "--micro-batch-size 1 --global-batch-size 256 --bf16 --num-experts 8 --moe-router-topk 2 "
                "--moe-grouped-gemm --expert-model-parallel-size 8")
"""Its arguments as Megatron-LM's examples/mixtral script states the model (the catalog's mixtral-8x7b)."""


def mixtral_script(tmp_path: Path, extra: str) -> Path:
    """train.sh in `tmp_path`: MIXTRAL_8X7B and `extra`."""
    script = tmp_path / "train.sh"
    script.write_text(f"{MIXTRAL_8X7B} {extra}\n")
    return script


def audit_json(path: Path, model: str, gpus: str) -> dict:
    """`placement --reproducible audit --launch PATH --model MODEL --cluster dgx-h100 --gpus GPUS --json`."""
    from click.testing import CliRunner

    from placement.cli import main

    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", model,
                                       "--cluster", "dgx-h100", "--gpus", gpus, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)
