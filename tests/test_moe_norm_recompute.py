"""`--recompute-modules layernorm` frees an MoE layer's pre-MLP norm output only where Megatron-Core keeps that
recompute: with per-layer CUDA graphs capturing the router it drops it unless the dispatcher is alltoall
(megatron-core 0.19.2 transformer/transformer_layer.py:456-498, "Disabling pre_mlp_layernorm recompute").  A user
trial: qwen3-235b-a22b on 128 H100 `--framework megatron` offered layernorm recompute with the flex dispatcher and
partial graphs at 77.9 of 78.1 GiB, which holds 79.4 once the norm is kept."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.specs import Layout
from placement.specs.recipe import CudaGraphs, Dispatcher, Recipe, RecomputeModule
from tests.test_cost_terms import _est, _f

LAYOUT = Layout(tp=2, dp=8, ep=8, zero_stage=1, sequence_parallel=True, recompute="selective")


def _activations(graphs: CudaGraphs, dispatcher: Dispatcher) -> float:
    recipe = Recipe(cuda_graphs=graphs, moe_dispatcher=dispatcher,
                    recompute_modules=(RecomputeModule.MOE_ACT, RecomputeModule.LAYERNORM))
    return _f(_est("qwen3-30b-a3b", "dgx-h100", 16, LAYOUT, recipe, global_batch=64).activations_bytes)


@pytest.mark.parametrize("dispatcher", [Dispatcher.DEEPEP, Dispatcher.ALLGATHER])
def test_partial_graphs_with_another_dispatcher_keep_the_moe_norm(dispatcher: Dispatcher) -> None:
    assert _activations(CudaGraphs.PARTIAL, dispatcher) > _activations(CudaGraphs.NONE, dispatcher)


def test_alltoall_or_no_partial_graphs_free_it() -> None:
    assert _activations(CudaGraphs.PARTIAL, Dispatcher.ALLTOALL) == _activations(CudaGraphs.NONE, Dispatcher.ALLTOALL)
    assert _activations(CudaGraphs.FULL, Dispatcher.DEEPEP) == _activations(CudaGraphs.NONE, Dispatcher.DEEPEP)


def test_the_plans_offered_never_price_a_recompute_megatron_drops() -> None:
    out = CliRunner().invoke(main, ["plan", "--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "128",
                                    "--seq-len", "4096", "--global-batch", "1024", "--framework", "megatron",
                                    "--top-k", "5", "--json"])
    assert out.exit_code == 0, out.output
    plans = json.loads(out.stdout)["plans"]
    with_norm = [p for p in plans if "layernorm" in p["recipe"]["recompute_modules"]]
    assert with_norm  # the trial's best plans recompute it
    for p in with_norm:
        assert p["recipe"]["cuda_graphs"] != "partial" or p["recipe"]["moe_dispatcher"] == "alltoall", p["recipe"]


def test_the_audit_says_megatron_drops_the_recompute_the_files_ask_for(tmp_path) -> None:
    from tests.test_audit_framework_defaults import MOE_SCRIPT, _audit

    def findings(dispatcher: str) -> list[dict]:
        script = tmp_path / f"{dispatcher}.sh"
        script.write_text(MOE_SCRIPT.replace("--moe-token-dispatcher-type alltoall", "").format(
            extra=f"--moe-token-dispatcher-type {dispatcher} --moe-flex-dispatcher-backend deepep "
                  "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router moe_preprocess "
                  "--recompute-granularity selective --recompute-modules moe_act layernorm "
                  "--ffn-hidden-size 14336 --kv-channels 128 --moe-grouped-gemm"))
        audit = _audit(script, "--model", "mixtral-8x7b", "--gpus", "64")
        assert audit["estimate"]["recipe"]["recompute_modules"] == ["moe_act", "layernorm"]
        return [f for f in audit["findings"] if f["kind"] == "layernorm_recompute_dropped"]

    dropped = findings("flex")
    assert len(dropped) == 1 and "GiB a GPU at the peak rank" in dropped[0]["message"]
    assert float(dropped[0]["message"].split(" GiB a GPU")[0].rsplit(" ", 1)[1]) > 0
    assert findings("alltoall") == []
