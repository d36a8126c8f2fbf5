"""A tied embedding (one matrix for the input embedding and the LM head) under pipeline parallelism: the first rank
holds the embedding, the last keeps its own copy as its head (Megatron-Core LanguageModule
setup_embeddings_and_output_layer; DeepSpeed's TiedLayerSpec), and after every step the two all-reduce that
gradient, after the DP reduction and beside no compute (finalize_model_grads `_allreduce_word_embedding_grads`;
DeepSpeed's ReduceTiedGrads).  Before, a tied model's last stage held no head at all and nothing was sent."""

from __future__ import annotations

import numpy as np
import pytest

from placement.calibration.validate import load_runs, predict
from placement.catalog import load_model
from placement.cost import dp
from placement.cost.step import _stage_kinds, _stage_params
from placement.specs import Layout
from tests.test_cost_terms import _ctx, _est, _f

GPT3 = load_model("gpt3-175b")


def _kinds(model, pp: int):
    x = _ctx(model, "dgx-h100", 256, Layout(tp=8, pp=pp, dp=256 // (8 * pp), sequence_parallel=True),
             global_batch=512)
    st = _stage_kinds(x.w, x.b, x.recipe)
    params = _stage_params(x, st)
    layer = x.w.dense_layer_shard(8)  # a layer as _stage_params counts it
    beside_layers = params.dense_kinds[:, 0] - st.dense[:, 0] * layer
    return st, beside_layers


def test_the_last_rank_keeps_its_own_copy_of_a_tied_head() -> None:
    assert GPT3.tied_embeddings
    copy = GPT3.vocab_size * GPT3.hidden_size / 8
    st, beside = _kinds(GPT3, 4)
    first, last = int(np.flatnonzero(st.embed[:, 0])[0]), int(np.flatnonzero(st.loss[:, 0])[0])
    assert first != last
    assert beside[first] == pytest.approx(copy, rel=1e-12)  # the embedding
    assert beside[last] == pytest.approx(copy, rel=1e-12)  # its copy, the head
    # untied, the last rank holds a head of the same size: the tied model's last rank is no lighter
    _, untied = _kinds(GPT3.model_copy(update={"tied_embeddings": False}), 4)
    assert untied[last] == pytest.approx(beside[last], rel=1e-12)


def test_without_a_pipeline_the_one_matrix_is_held_once() -> None:
    _, beside = _kinds(GPT3, 1)
    assert beside[0] == pytest.approx(GPT3.vocab_size * GPT3.hidden_size / 8, rel=1e-12)
    _, untied = _kinds(GPT3.model_copy(update={"tied_embeddings": False}), 1)
    assert untied[0] == pytest.approx(2.0 * beside[0], rel=1e-12)


def test_the_two_copies_all_reduce_their_gradient_behind_no_compute() -> None:
    """Tied and untied at pp 4 hold the same parameters on every rank; the tied one adds the all-reduce between
    the pipeline's ends, all of it exposed: at least its fp32 gradient (Megatron's main_grad under
    grad_reduce_fp32) over one NIC of 50 GB/s, each end sending its whole copy to the other."""
    from placement.specs.recipe import Recipe

    lay = Layout(tp=8, pp=4, dp=8, sequence_parallel=True, zero_stage=1)
    recipe = Recipe(grad_reduce_fp32=True)
    tied = _est(GPT3, "dgx-h100", 256, lay, recipe, global_batch=512)
    untied = _est(GPT3.model_copy(update={"tied_embeddings": False}), "dgx-h100", 256, lay, recipe,
                  global_batch=512)
    added = _f(tied.dp_exposed_s) - _f(untied.dp_exposed_s)
    assert added == pytest.approx(_f(tied.dp_s) - _f(untied.dp_s), rel=1e-9)  # all of it exposed
    nbytes = GPT3.vocab_size * GPT3.hidden_size / 8 * 4
    assert nbytes / 50e9 <= added <= 2.0 * nbytes / 50e9
    no_pipe = Layout(tp=8, pp=1, dp=32, sequence_parallel=True, zero_stage=1)
    assert _f(_est(GPT3, "dgx-h100", 256, no_pipe, recipe, global_batch=512).dp_s) < _f(
        _est(GPT3.model_copy(update={"tied_embeddings": False}), "dgx-h100", 256, no_pipe, recipe,
             global_batch=512).dp_s)  # one matrix, not two, reduced without a pipeline


def test_mlperf_11616_gpu_row_pays_the_tied_all_reduce(monkeypatch) -> None:
    """MLPerf v4.0's GPT-3 175B (tied embeddings, pipelined) on 11,616 H100 steps in under a second, so the pipeline
    ends' all-reduce of the embedding gradient moves the row by more than half a point."""
    run = {r.id: r for r in load_runs()}["mlperf-v4.0-nvidia-h100-gpt3-175b-11616gpu"]
    assert load_model(run.model).tied_embeddings and run.layout["pp"] > 1
    priced = predict(run).error
    monkeypatch.setattr(dp, "tied_embedding_s", lambda x, grad_b: np.zeros(np.shape(x.b.pp)))
    assert predict(run).error < priced - 0.005
