"""torchtitan's per-op selective activation checkpointing (RecomputeModule.PER_OP; torchtitan 0.3.0
distributed/activation_checkpoint.py SelectiveAC): in each block it saves the matmul, attention-kernel and
reduce-scatter / all-to-all outputs except every second matmul, and recomputes the rest.  For Llama's block
(wq, wk, wv, wo, w1, w3, w2) that is wk, wo and w3 recomputed, with every element-wise op; the routed experts'
grouped GEMMs and the router of an MoE block are recomputed whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cli import main
from placement.cost.batch import LayoutBatch
from placement.cost.compute import elementwise_time, gemm_time
from placement.cost.context import context
from placement.cost.layer import layer_compute, per_op_gemms
from placement.cost.memory import layer_activations
from placement.specs import Layout, Recompute, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology
from placement.workload import workload

SEQ = 8192


def _setup(model: str, tp: int, recompute: str, modules: str = "", gpus: int = 8, ep: int = 1):
    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus)
    spec = load_model(model)
    recipe = Recipe(recompute_modules=modules) if modules else Recipe()
    layout = Layout(tp=tp, pp=1, dp=gpus // tp, ep=ep, micro_batch_size=1, zero_stage=1,
                    recompute=Recompute(recompute), sequence_parallel=tp > 1)
    train = TrainingSpec(seq_len=SEQ, global_batch=32)
    w = workload(spec)
    batch = LayoutBatch.from_layouts([layout], recipe)
    return w, train, topo, batch, recipe


def test_llama_block_recomputes_wk_wo_w3_and_its_elementwise_ops() -> None:
    w, train, topo, batch, recipe = _setup("llama3-8b", 2, "selective", "per_op")
    x = context(w, train, topo, batch, recipe)
    attn, mlp, _ = per_op_gemms(x)
    assert [g.saved for g in attn] == [True, False, True, False]  # wq, wk, wv, wo
    assert [g.saved for g in mlp] == [True, False, True]  # w1, w3, w2 (counted on from the attention's 4)
    *_, none_batch, none_recipe = _setup("llama3-8b", 2, "none")
    plain = layer_compute(context(w, train, topo, none_batch, none_recipe)).dense_s
    per_op = layer_compute(x).dense_s
    h, tokens = w.hidden, SEQ
    redo = (gemm_time(tokens, w.kv_dim / 2 / 2, h, 1, x.gemm) + gemm_time(tokens, h, w.out_dim / 2, 1, x.gemm)
            + gemm_time(tokens, w.dense_ffn / 2, h, 1, x.gemm)
            + elementwise_time(tokens, h, x.sp_shard, x.hbm_bw))
    assert float(per_op[0] - plain[0]) == pytest.approx(float(np.asarray(redo).ravel()[0]), rel=1e-9)


def test_llama_block_keeps_its_input_saved_outputs_and_reduce_scatters() -> None:
    """Per token at tp 2 with sequence parallelism: the input's shard (2 h / 2), wq's and wv's outputs, the
    attention output and its log-sum-exp, wo's and w2's reduce-scattered outputs, w1's output and w2's whole-width
    partial sums (before its reduce-scatter)."""
    w, train, topo, batch, recipe = _setup("llama3-8b", 2, "selective", "per_op")
    kept = float(layer_activations(context(w, train, topo, batch, recipe)).dense[0])
    h, q, kv, ffn, heads = w.hidden, w.q_dim, w.kv_dim, w.dense_ffn, w.num_heads
    per_token = (2 * h / 2 + 2 * q / 2 + 2 * (kv / 2) / 2 + (2 * w.out_dim + 4 * heads) / 2 + 2 * 2 * h / 2
                 + 2 * ffn / 2 + 2 * h)
    assert kept == pytest.approx(SEQ * per_token, rel=1e-12)
    # between no recompute and a full one
    none = layer_activations(context(w, train, topo, *_setup("llama3-8b", 2, "none")[3:])).dense[0]
    assert layer_activations(context(w, train, topo, batch, recipe)).layer_input[0] < kept < none


def test_moe_block_recomputes_its_router_and_routed_experts() -> None:
    """Qwen3-30B-A3B: the routed experts' grouped GEMMs and the router rerun whole; with experts on other ranks
    the dispatch and combine outputs are kept instead of the experts' activations."""
    w, train, topo, batch, recipe = _setup("qwen3-30b-a3b", 1, "selective", "per_op", ep=8)
    x = context(w, train, topo, batch, recipe)
    _, *_, nb, nr = _setup("qwen3-30b-a3b", 1, "none", ep=8)
    y = context(w, train, topo, nb, nr)
    per_op, plain = layer_compute(x), layer_compute(y)
    attn_redo = float(per_op.attn_s[0] - plain.attn_s[0])
    assert float(per_op.moe_s[0] - plain.moe_s[0]) > attn_redo + 0.5 * float(plain.experts_s[0]) / 3
    kept, full = layer_activations(x).moe[0], layer_activations(y).moe[0]
    assert kept < full
    pairs = SEQ * w.top_k * float(x.expert_load)
    assert kept > 4.0 * w.hidden * pairs  # the two all-to-all outputs


def _evaluate(*extra: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--tp", "2", "--seq-len", str(SEQ), "--global-batch", "32", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_per_op_sits_between_no_recompute_and_full() -> None:
    none = _evaluate("--recompute", "none")
    per_op = _evaluate("--recompute", "selective", "--recompute-modules", "per_op")
    full = _evaluate("--recompute", "full")
    assert none["step_time_s"] < per_op["step_time_s"] < full["step_time_s"]
    assert full["memory"]["activations_bytes"] < per_op["memory"]["activations_bytes"] \
        < none["memory"]["activations_bytes"]
    # its recompute counts as hardware FLOPs, not model FLOPs; and its one extra TP all-gather pair per layer
    assert per_op["hfu"] > per_op["mfu"] and none["hfu"] == pytest.approx(none["mfu"], rel=1e-3)
    assert per_op["breakdown"]["tp"] == pytest.approx(none["breakdown"]["tp"] * 5 / 4, abs=2e-6)


def test_per_op_takes_no_megatron_module_beside_it() -> None:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--recompute", "selective",
                                       "--recompute-modules", "per_op,mlp"])
    assert result.exit_code != 0
    assert "per_op is torchtitan's whole per-op policy" in result.output and "Traceback" not in result.output


def test_torchtitan_plans_price_per_op_and_megatron_files_cannot_run_it(tmp_path) -> None:
    """--framework torchtitan searches selective recompute as torchtitan runs it; a per-op plan emitted for
    Megatron-LM writes core_attn, warns, and its header prices that."""
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "8", "--seq-len", str(SEQ),
                                       "--global-batch", "32", "--framework", "torchtitan", "--recompute",
                                       "selective", "--top-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    best = plan["plans"][0] if "plans" in plan else plan
    assert best["recipe"]["recompute_modules"] == ["per_op"]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2",
                                       "--recompute", "selective", "--recompute-modules", "per_op",
                                       "--emit", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "megatron.sh").read_text()
    assert "--recompute-modules core_attn" in text and "selective recompute of core_attn (not per_op)" in text
