"""`fp8_recasts_weights`: torchao's Float8Linear / MXFP8Linear (torchtitan) cast each 16-bit weight to FP8 in every
forward and again for the input gradient in every backward, each micro-batch, and keep no FP8 copy; Transformer
Engine casts once a step and keeps the 1-byte copy.  Priced in compute (HBM bytes of the casts) and in memory."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from placement.catalog import catalog_root
from placement.cli import main
from placement.cost.constants import FP8_WEIGHT_CAST_BYTES_PER_ELEMENT

JOB = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "8192",
       "--global-batch", "16", "--tp", "1", "--pp", "1", "--zero", "1", "--mbs", "1", "--recompute", "none",
       "--precision", "fp8", "--fp8-recipe", "tensorwise", "--json"]


def _run(*extra: str) -> dict:
    out = CliRunner().invoke(main, [*JOB, *extra])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.stdout)


def test_each_micro_batch_casts_every_weight_twice() -> None:
    """Without recompute: a forward cast and a backward cast of each of the layers' weights per micro-batch, at
    the recipe's bytes per element, over HBM; the head stays 16-bit (no fp8_lm_head)."""
    on, off = _run("--fp8-recasts-weights"), _run("--no-fp8-recasts-weights")
    model = yaml.safe_load((catalog_root() / "models" / "llama3-8b.yaml").read_text())
    h, ffn, layers = model["hidden_size"], model["ffn_hidden_size"], model["num_layers"]
    kv = model["num_kv_heads"] * h // model["num_attention_heads"]
    per_layer = h * h * 2 + 2 * h * kv + 3 * h * ffn  # q, o; k, v; gate, up, down
    acc = yaml.safe_load((catalog_root() / "hardware" / "accelerators" / "h100-sxm.yaml").read_text())
    m = on["layout"]["num_microbatches"]
    cast = FP8_WEIGHT_CAST_BYTES_PER_ELEMENT["tensorwise"]
    expected = m * layers * per_layer * cast * 2 / float(acc["hbm_bandwidth_bytes_per_s"])
    assert on["breakdown"]["compute"] - off["breakdown"]["compute"] == pytest.approx(expected, rel=0.01)


def test_no_fp8_weight_copy_is_kept() -> None:
    on, off = _run("--fp8-recasts-weights"), _run("--no-fp8-recasts-weights")
    # ZeRO-1 keeps every weight: 2 bytes with recasts, 2 + 1 with Transformer Engine's copy
    assert on["memory"]["weights_bytes"] == pytest.approx(off["memory"]["weights_bytes"] * 2 / 3, rel=1e-6)


def test_bf16_prices_nothing() -> None:
    bf16 = [a if a != "fp8" else "bf16" for a in JOB]
    bf16 = bf16[:bf16.index("--fp8-recipe")] + bf16[bf16.index("--fp8-recipe") + 2:]
    a = json.loads(CliRunner().invoke(main, [*bf16, "--fp8-recasts-weights"]).stdout)
    b = json.loads(CliRunner().invoke(main, bf16).stdout)
    assert a["step_time_s"] == b["step_time_s"] and a["peak_memory_bytes"] == b["peak_memory_bytes"]
