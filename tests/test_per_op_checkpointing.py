"""torchtitan's per-op selective activation checkpointing (RecomputeModule.PER_OP; torchtitan 0.3.0
distributed/activation_checkpoint.py SelectiveAC): in each block it saves the matmul, attention-kernel and
reduce-scatter / all-to-all outputs except every second matmul, and recomputes the rest.  0.3.0 builds every
attention with one fused wqkv (models/common/attention.py FusedQKVLinear), so Llama's block (wqkv, wo, w1, w3, w2)
recomputes wo and w3 with every element-wise op; the routed experts' grouped GEMMs and the router of an MoE block
are recomputed whole, and a biased projection (addmm) is always saved."""

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


def test_llama_block_recomputes_wo_w3_and_its_elementwise_ops() -> None:
    w, train, topo, batch, recipe = _setup("llama3-8b", 2, "selective", "per_op")
    x = context(w, train, topo, batch, recipe)
    attn, mlp, _ = per_op_gemms(x)
    assert [g.saved for g in attn] == [True, False]  # wqkv, wo
    assert [g.saved for g in mlp] == [True, False, True]  # w1, w3, w2 (counted on from the attention's 2)
    *_, none_batch, none_recipe = _setup("llama3-8b", 2, "none")
    plain = layer_compute(context(w, train, topo, none_batch, none_recipe)).dense_s
    per_op = layer_compute(x).dense_s
    h, tokens = w.hidden, SEQ
    redo = (gemm_time(tokens, h, w.out_dim / 2, 1, x.gemm) + gemm_time(tokens, w.dense_ffn / 2, h, 1, x.gemm)
            + elementwise_time(tokens, h, x.sp_shard, x.tp, x.hbm_bw, w.dropout))
    assert float(per_op[0] - plain[0]) == pytest.approx(float(np.asarray(redo).ravel()[0]), rel=1e-9)


def test_llama_block_keeps_its_input_saved_outputs_and_reduce_scatters() -> None:
    """Per token at tp 2 with sequence parallelism: the input's shard (2 h / 2), wqkv's output, the attention output
    and its log-sum-exp, wo's and w2's reduce-scattered outputs, w1's output and w2's whole-width partial sums
    (before its reduce-scatter)."""
    w, train, topo, batch, recipe = _setup("llama3-8b", 2, "selective", "per_op")
    kept = float(layer_activations(context(w, train, topo, batch, recipe)).dense[0])
    h, q, kv, ffn, heads = w.hidden, w.q_dim, w.kv_dim, w.dense_ffn, w.num_heads
    per_token = (2 * h / 2 + 2 * (q + kv) / 2 + (2 * w.out_dim + 4 * heads) / 2 + 2 * 2 * h / 2
                 + 2 * ffn / 2 + 2 * h)
    assert kept == pytest.approx(SEQ * per_token, rel=1e-12)
    # between no recompute and a full one
    none = layer_activations(context(w, train, topo, *_setup("llama3-8b", 2, "none")[3:])).dense[0]
    assert layer_activations(context(w, train, topo, batch, recipe)).layer_input[0] < kept < none


def test_biased_projections_are_always_kept() -> None:
    """GPT-OSS's projections carry biases: each runs as addmm, which the policy saves and does not count."""
    w, train, topo, batch, recipe = _setup("gpt-oss-120b", 1, "selective", "per_op", ep=8)
    attn, _, _ = per_op_gemms(context(w, train, topo, batch, recipe))
    assert attn and all(g.saved for g in attn)


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
    pairs = SEQ * w.top_k * float(np.asarray(x.expert_load).ravel()[0])
    assert kept > 4.0 * w.hidden * pairs  # the two all-to-all outputs


TORCHTITAN_TP = ("--sp-saves-gathered-inputs", "--no-tp-async-backward")
"""How torchtitan, whose policy per-op checkpointing is, runs tensor parallelism (frameworks.CAPABILITIES)."""


def _evaluate(*extra: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--tp", "2", "--seq-len", str(SEQ), "--global-batch", "32", "--json",
                                       *TORCHTITAN_TP, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


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
    # without sequence parallelism the recompute all-reduces both row-parallel outputs again: 6 all-reduces, not 4
    plain = _evaluate("--recompute", "none", "--no-sequence-parallel")
    redone = _evaluate("--recompute", "selective", "--recompute-modules", "per_op", "--no-sequence-parallel")
    assert redone["breakdown"]["tp"] == pytest.approx(plain["breakdown"]["tp"] * 6 / 4, abs=2e-6)


def test_per_op_gathers_the_context_parallel_kv_again() -> None:
    """With context parallelism the attention output is kept but the K/V all-gather (flex attention's
    cplib::flex_cp_allgather) is not: the recompute gathers again, with no attention core to hide behind."""
    base = ["--cp", "2", "--seq-len", "32768", "--gpus", "8", "--global-batch", "8", "--cp-comm-type", "all_gather"]
    plain = _evaluate_at(*base, "--recompute", "none")
    redone = _evaluate_at(*base, "--recompute", "selective", "--recompute-modules", "per_op")
    assert redone["breakdown"]["cp"] == pytest.approx(plain["breakdown"]["cp"] * 4 / 3, abs=2e-6)


def _evaluate_at(*args: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "2",
                                       "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


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
    plan = json.loads(result.stdout)
    best = plan["plans"][0] if "plans" in plan else plan
    assert best["recipe"]["recompute_modules"] == ["per_op"]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2",
                                       "--recompute", "selective", "--recompute-modules", "per_op",
                                       "--emit", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "megatron.sh").read_text()
    assert "--recompute-modules core_attn" in text and "selective recompute of core_attn (not per_op)" in text


def _run(*args: str):
    return CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--zero", "2",
                                     "--recompute", "selective", *args])


def test_a_framework_prices_only_the_selective_recompute_it_runs() -> None:
    """--framework torchtitan recomputes with its per-op policy whatever is asked (another list is refused, naming
    both); Megatron-LM and MaxText cannot run torchtitan's policy."""
    ok = _run("--framework", "torchtitan", "--json")
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["recipe"]["recompute_modules"] == ["per_op"]
    assert "per-op policy" in data["recipe_sources"]["recompute_modules"]
    for framework, modules in (("torchtitan", "mlp"), ("megatron", "per_op"), ("maxtext", "per_op")):
        bad = _run("--framework", framework, "--recompute-modules", modules)
        assert bad.exit_code == 2 and f"--recompute-modules {modules}" in bad.output, (framework, bad.output)
        assert "Traceback" not in bad.output


def test_torchtitan_prices_its_flex_attention_as_flashattention_2() -> None:
    ok = _run("--framework", "torchtitan", "--json")
    data = json.loads(ok.stdout)
    assert data["recipe"]["attention_kernel"] == "flash2"
    assert "FlexAttention" in data["recipe_sources"]["attention_kernel"]
    fa3 = json.loads(_run("--recompute-modules", "per_op", "--zero", "2", "--json").stdout)
    assert data["step_time_s"] > fa3["step_time_s"]  # on Hopper FlashAttention-2 reaches less of the peak


@pytest.mark.parametrize(("modules", "more"), [("mlp", True), ("core_attn,mlp", True), ("layernorm", False)])
def test_hfu_counts_each_recomputed_modules_matmuls(modules: str, more: bool) -> None:
    """HFU adds what selective recompute reruns: the MLP's matmuls under `mlp`; `layernorm` reruns element-wise
    work only."""
    data = json.loads(_run("--recompute-modules", modules, "--json").stdout)
    base = json.loads(_run("--recompute-modules", "layernorm", "--json").stdout)
    ratio = data["hfu"] / data["mfu"]
    assert (ratio > base["hfu"] / base["mfu"] + 0.05) is more


def test_framework_torchtitan_keeps_no_recompute_as_none() -> None:
    """--framework torchtitan sets per_op for selective recompute only: a layout priced without recompute stays
    without it (a named module list would otherwise read as selective)."""
    data = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2",
                                                "--zero", "2", "--recompute", "none", "--framework", "torchtitan",
                                                "--json"]).stdout)
    assert data["layout"]["recompute"] == "none" and not data["recipe"].get("recompute_modules")


def test_torchtitan_keeps_gathered_inputs_and_16bit_inputs_under_fp8() -> None:
    """torchtitan saves each projection's gathered, whole-sequence input under sequence parallelism (2 of the 4 h
    bytes per token of the two norms' outputs are the shard's otherwise, at tp 2), and torchao's Float8Linear
    saves the 16-bit input, not an FP8 copy."""
    def acts(*extra: str, precision: str = "bf16") -> float:
        result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--zero",
                                           "2", "--recompute", "none", "--seq-len", str(SEQ), "--precision",
                                           precision, "--json", *extra])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)["memory"]["activations_bytes"]

    model = load_model("llama3-8b")
    gathered = acts("--sp-saves-gathered-inputs") - acts()
    assert gathered == pytest.approx(model.num_layers * SEQ * 4 * model.hidden_size / 2, abs=1e4)
    assert acts("--fp8-saves-16bit-inputs", precision="fp8") > acts(precision="fp8")
    assert acts("--fp8-saves-16bit-inputs") == acts()  # nothing under BF16


def test_a_torchtitan_audit_finds_its_checkpointing_subcommand_in_the_file(tmp_path) -> None:
    """`activation-checkpoint:selective` on the line states the setting the TOML spells [activation_checkpoint]: a
    change to it is not marked as missing from the launch files."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--zero", "2",
                                       "--recompute", "selective", "--framework", "torchtitan", "--emit",
                                       "torchtitan", "--out", str(out)])
    assert result.exit_code == 0, result.output
    audit = CliRunner().invoke(main, ["audit", "--launch", str(out / "torchtitan.sh"), "--model", "llama3-8b",
                                      "--gpus", "8", "--json"])
    change = next(c for c in json.loads(audit.stdout)["changes"] if c["argument"] == "activation-checkpoint")
    assert change["from"] == "selective" and "note" not in change
