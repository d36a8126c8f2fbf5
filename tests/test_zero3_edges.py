"""ZeRO-3 / FSDP: the step's first gather and last reduce-scatter have no compute beside them
(`dp.shard_edges_s`), and the reduce-scatter moves the gradient at its reduce width (FSDP2 reduce_dtype float32
in torchtitan).  Tested on the torchtitan rows they move, and on dp_term alone."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest
from click.testing import CliRunner

from placement.calibration.validate import load_runs, predict
from placement.cli import evaluate_command, main
from placement.cost import collectives as coll
from placement.cost import dp
from placement.cost.dp import StageParams, dp_term
from placement.specs import Layout
from tests.test_cost_terms import _ctx

TRAINY = [r for r in load_runs() if r.id.startswith("torchtitan-trainy-h200")]


def _no_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dp, "shard_edges_s", lambda dense, expert, p, wt_b, grad_b: (np.zeros_like(p.dense),) * 2)


def test_the_trainy_rows_are_two() -> None:
    assert [r.num_gpus for r in TRAINY] == [32, 64]
    assert all(r.layout["zero_stage"] == 3 and r.layout["dp_shard"] == r.num_gpus for r in TRAINY)


@pytest.mark.parametrize("run", TRAINY, ids=lambda r: r.id)
def test_fsdp_edges_move_the_torchtitan_rows_toward_the_published_step(run, monkeypatch) -> None:
    """With the edges the row is slower by about their seconds and nearer the published step; without them the
    model hides every FSDP collective behind compute."""
    with_edge = predict(run)
    _no_edge(monkeypatch)
    without = predict(run)
    assert with_edge.predicted_step_time_s > without.predicted_step_time_s
    assert abs(with_edge.error) < abs(without.error)


def test_the_exposed_dp_time_is_the_edges_when_compute_hides_the_rest() -> None:
    """The Llama 3 8B FSDP row: all but the edges hides behind compute, so exposed DP = the gather of the root
    (embedding, norm, head) and the first block at 2 bytes plus their reduce-scatter at 4 (float32)."""
    run = TRAINY[0]
    res = predict(run)
    argv = shlex.split(evaluate_command(run, res.layout, res.recipe))[1:]
    out = CliRunner().invoke(main, [*argv, "--json"])
    assert out.exit_code == 0, out.output
    exposed = json.loads(out.stdout)["breakdown"]["exposed"]["dp"]
    # llama3-8b: one block (attention 4096 x (4096 + 2 x 1024) + 4096 x 4096, MLP 3 x 4096 x 14336) plus the
    # embedding and head (128256 x 4096 each); over 32 ranks
    block = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336
    edge = block + 2 * 128256 * 4096
    assert exposed > 0
    ctx = _ctx("llama3-8b", "dgx-h200", 32, Layout(dp=32, zero_stage=3, micro_batch_size=2), global_batch=64)
    group = coll.Groups(ctx.levels, ctx.b.tp, ctx.b.cp * ctx.b.dp_shard)
    expect = float(group.reduce_scatter(np.array([edge * 2.0]))[0] + group.reduce_scatter(np.array([edge * 4.0]))[0])
    assert exposed == pytest.approx(expect, rel=0.02)


def _term(edge: float, comp: float, zero: int = 3, **recipe):
    p = StageParams(dense=np.array([8.0e9]), expert=np.array([0.0]), dense_shard=np.array([32.0]),
                    expert_shard=np.array([1.0]), edge_dense=np.array([edge]), edge_expert=np.array([0.0]))
    ctx = _ctx("llama3-8b", "dgx-h100", 32, Layout(dp=32, zero_stage=zero), global_batch=32, **recipe)
    return dp_term(ctx, p, np.array([comp]))


def test_dp_term_zero3_edges_stay_exposed_behind_any_compute() -> None:
    total = float(_term(0.0, 1.0).total_s[0])
    assert float(_term(0.0, 100.0 * total).exposed_s[0]) == 0.0
    exposed = float(_term(1.0e9, 100.0 * total).exposed_s[0])
    assert exposed > 0
    # 1/8 of the parameters at the edges: 1/8 of one gather and one reduce-scatter, against the step's two
    # gathers and one reduce-scatter (all 16-bit here): 1/8 x 2/3 of the total's bytes, and a latency each (NCCL's
    # ring over 32 GPUs of 4 nodes, 31 steps: the two edges pay two of the step's three)
    ctx = _ctx("llama3-8b", "dgx-h100", 32, Layout(dp=32, zero_stage=3), global_batch=32)
    lat = float(coll.Groups(ctx.levels, ctx.b.tp, ctx.b.cp * ctx.b.dp_shard).reduce_scatter(np.array([0.0]))[0])
    assert exposed == pytest.approx((total - 3 * lat) / 8 * 2 / 3 + 2 * lat, rel=1e-3)
    # short compute: the edges do not add to what is exposed anyway
    assert float(_term(1.0e9, 0.0).exposed_s[0]) == pytest.approx(total, rel=1e-9)


def test_zero3_reduces_at_the_gradient_width() -> None:
    """Two 16-bit gathers and one reduce-scatter: in float32 the reduce-scatter doubles, 4/3 of the 16-bit total."""
    from placement.specs.recipe import Recipe

    bf16 = float(_term(0.0, 1.0).total_s[0])
    fp32 = float(_term(0.0, 1.0, recipe=Recipe(grad_reduce_fp32=True)).total_s[0])
    assert fp32 / bf16 == pytest.approx(4.0 / 3.0, rel=1e-3)  # bandwidth terms; latency is the same


def test_zero2_has_the_same_edges() -> None:
    """ZeRO-2 (FSDP2 without resharding after forward) gathers once and reduce-scatters each micro-batch: behind long
    compute only the first unit's gather and the last unit's reduce-scatter stay, as under ZeRO-3."""
    total = float(_term(0.0, 1.0, zero=2).total_s[0])
    assert float(_term(0.0, 100.0 * total, zero=2).exposed_s[0]) == 0.0
    edges = float(_term(1.0e9, 100.0 * total, zero=2).exposed_s[0])
    assert edges == pytest.approx(float(_term(1.0e9, 100.0 * total, zero=3).exposed_s[0]), rel=1e-9)


def test_each_micro_batch_has_its_edges() -> None:
    """FSDP2 waits for each backward's reduce-scatters before the next micro-batch and gathers its first units again:
    behind long compute, m micro-batches expose m times one micro-batch's edges."""
    def exposed(batch: int) -> float:
        p = StageParams(dense=np.array([8.0e9]), expert=np.array([0.0]), dense_shard=np.array([32.0]),
                        expert_shard=np.array([1.0]), edge_dense=np.array([1.0e9]), edge_expert=np.array([0.0]))
        ctx = _ctx("llama3-8b", "dgx-h100", 32, Layout(dp=32, zero_stage=3), global_batch=32 * batch)
        return float(dp_term(ctx, p, np.array([100.0])).exposed_s[0])

    assert exposed(4) == pytest.approx(4.0 * exposed(1), rel=1e-9)


def test_a_chunked_loss_leaves_the_head_out_of_the_edges() -> None:
    """torchtitan 0.3.0 wraps [norm, lm_head] as a unit of its own and reduce-scatters it at the loss's last chunk, at
    the start of backward: the edges are the embedding and the first block."""
    from placement.cost.step import _stage_kinds, _stage_params
    from placement.specs.recipe import Recipe

    def edge(chunks: int) -> float:
        recipe = Recipe(loss_chunks=chunks)
        ctx = _ctx("llama3-8b", "dgx-h200", 32, Layout(dp=32, zero_stage=3), recipe=recipe, global_batch=32)
        return float(_stage_params(ctx, _stage_kinds(ctx.w, ctx.b, recipe)).as_stage().edge_dense[0])

    head = 128256 * 4096
    assert edge(1) - edge(8) == pytest.approx(head, rel=1e-6)
