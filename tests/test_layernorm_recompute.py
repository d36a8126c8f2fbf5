"""`--recompute-modules layernorm` frees a norm's output only where the norm is a module of its own: Megatron-Core's
Transformer Engine spec fuses the attention's and a dense MLP's norm into the projection after it (IdentityOp in the
layer), so only MLA's input norm and an MoE layer's pre-MLP norm are recomputed (core_v0.19.0 transformer_layer.py
:451, :499); MaxText's norms are all ops of their own (recipe norms_fused False)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main
from placement.search import module_sets
from placement.specs.recipe import RecomputeModule

DENSE = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "8192",
         "--global-batch", "2048", "--tp", "4", "--pp", "2", "--vpp", "8", "--mbs", "1", "--zero", "1", "--json"]


def _est(args: list[str], *extra: str) -> dict:
    result = CliRunner().invoke(main, [*args, *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout.splitlines()[0])


def _acts(args, *extra) -> float:
    return _est(args, *extra)["memory"]["activations_bytes"]


def test_on_a_dense_te_model_layernorm_recompute_runs_as_none() -> None:
    """The user trial's plan: llama3-70b tp4 pp2x8 at selective(layernorm) was priced at 77.1 of 78.1 GiB; Megatron
    recomputes nothing there, and the layout needs what no recompute needs (82.4 GiB)."""
    ln = _est(DENSE, "--recompute", "selective", "--recompute-modules", "layernorm")
    none = _est(DENSE, "--recompute", "none")
    assert ln["peak_memory_bytes"] == pytest.approx(none["peak_memory_bytes"], rel=1e-9)
    assert ln["step_time_s"] == pytest.approx(none["step_time_s"], rel=1e-9)
    assert not ln["fits"]


def test_unfused_norms_are_all_recomputed() -> None:
    """With every norm an op of its own (MaxText), both norm outputs (2 x 2 bytes x hidden a token, over SP) go."""
    w = load_model("llama3-70b")
    kept = _acts(DENSE, "--recompute", "selective", "--recompute-modules", "layernorm", "--no-norms-fused")
    none = _acts(DENSE, "--recompute", "none", "--no-norms-fused")
    per_layer_token = 2 * 2.0 * w.hidden_size / 4  # sequence parallel over tp 4
    assert none - kept > 0
    in_flight_layers = (none - kept) / (8192 * per_layer_token)
    assert in_flight_layers == pytest.approx(round(in_flight_layers), abs=1e-3)  # whole layers' worth, nothing else


MOE = ["evaluate", "--model", "{m}", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
       "--global-batch", "256", "--tp", "1", "--ep", "8", "--pp", "4", "--mbs", "1", "--zero", "1", "--json"]


@pytest.mark.parametrize(("model", "norms"), [("qwen3-30b-a3b", 1), ("deepseek-v3", 2)])
def test_moe_layers_free_their_pre_mlp_norm_and_mla_its_input_norm(model: str, norms: int) -> None:
    """GQA MoE (Qwen3): the router's norm only; MLA MoE (DeepSeek-V3): both norms of every MoE layer."""
    args = [a.replace("{m}", model) for a in MOE]
    ln = _acts(args, "--recompute", "selective", "--recompute-modules", "layernorm")
    none = _acts(args, "--recompute", "none")
    unfused = _acts(args, "--recompute", "selective", "--recompute-modules", "layernorm", "--no-norms-fused")
    freed, all_freed = none - ln, none - unfused
    assert freed > 0
    assert freed / all_freed == pytest.approx(norms / 2, rel=0.05)


def test_plan_offers_layernorm_recompute_only_where_it_frees_something() -> None:
    M = RecomputeModule
    dense = {m for s in module_sets(load_model("llama3-70b")) for m in s}
    assert M.LAYERNORM not in dense
    for name in ("qwen3-30b-a3b", "deepseek-v3"):
        assert M.LAYERNORM in {m for s in module_sets(load_model(name)) for m in s}
