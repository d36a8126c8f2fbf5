"""`reshard_after_backward`: FSDP2's ZeRO-2 frees its gathered weights after every backward, so each accumulation
micro-batch's forward gathers them again (torchtitan 0.3.0), where DeepSpeed's ZeRO-2 gathers once a step.  Tested in
the DP term, through `--framework torchtitan`, and not where it cannot apply (ZeRO-3, one micro-batch, a pipeline
that keeps the weights gathered)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.dp import StageParams, dp_term
from placement.specs import Layout
from placement.specs.recipe import Recipe
from tests.test_cost_terms import _ctx


def _term(zero: int, regather: bool, global_batch: int, comp: float = 1.0, pp: int = 1, defer: bool = False):
    p = StageParams(dense=np.array([4.0e9]), expert=np.array([0.0]), dense_shard=np.array([8.0]),
                    expert_shard=np.array([1.0]), edge_dense=np.array([2.0e8]), edge_expert=np.array([0.0]))
    recipe = Recipe(reshard_after_backward=regather, pipeline_unsharded_grads=defer, grad_reduce_fp32=True)
    ctx = _ctx("llama3-8b", "dgx-h100", 64, Layout(tp=4, pp=pp, dp=16 // pp, zero_stage=zero,
                                                   sequence_parallel=True),
               recipe=recipe, global_batch=global_batch)
    return ctx.m, dp_term(ctx, p, np.array([comp]))


def test_every_micro_batch_gathers_the_weights_again() -> None:
    """From the term's own totals: one micro-batch gives rs + ag, m give m rs + ag without it and m (rs + ag) with
    it; so the extra is (m - 1) gathers, and the bytes each member sends grow by the same (m - 1) weight copies."""
    one, off1 = _term(2, False, 16)
    _, on1 = _term(2, True, 16)
    m, off = _term(2, False, 256)
    _, on = _term(2, True, 256)
    assert one == 1 and m == 16
    assert float(on1.total_s[0]) == float(off1.total_s[0])  # one micro-batch: nothing to gather again
    rs = (float(off.total_s[0]) - float(off1.total_s[0])) / (m - 1)
    ag = float(off1.total_s[0]) - rs
    assert ag > 0
    assert float(on.total_s[0]) - float(off.total_s[0]) == pytest.approx((m - 1) * ag, rel=1e-9)
    weights = 4.0e9 * 2.0  # the rank's 16-bit weights
    assert float(on.dense_bytes[0]) - float(off.dense_bytes[0]) == pytest.approx((m - 1) * weights, rel=1e-9)


def test_each_gather_leaves_its_first_units_exposed() -> None:
    """However long the compute, every micro-batch's gather of the first units (embedding, head, first layer) has
    nothing before it to hide behind: m of them exposed with it, one without."""
    m, off = _term(2, False, 256, comp=1.0e6)
    _, on = _term(2, True, 256, comp=1.0e6)
    extra = float(on.exposed_s[0]) - float(off.exposed_s[0])
    assert extra > 0
    _, edge_only = _term(2, False, 16, comp=1.0e6)  # m = 1: one edge gather and one edge reduce-scatter
    _, edge_rs = _term(2, False, 32, comp=1.0e6)  # m = 2: one edge gather, two edge reduce-scatters
    rs_edge = float(edge_rs.exposed_s[0]) - float(edge_only.exposed_s[0])
    gather_edge = float(edge_only.exposed_s[0]) - rs_edge
    assert extra == pytest.approx((m - 1) * gather_edge, rel=1e-9)


@pytest.mark.parametrize(("zero", "pp", "defer"), [(3, 1, False), (1, 1, False), (2, 2, True)])
def test_nothing_changes_where_it_cannot_apply(zero: int, pp: int, defer: bool) -> None:
    """ZeRO-3 gathers every micro-batch anyway, ZeRO-1 keeps whole weights, and under torch pipelining's deferred
    reduction the weights stay gathered between micro-batches."""
    a, b = _term(zero, True, 256, pp=pp, defer=defer)[1], _term(zero, False, 256, pp=pp, defer=defer)[1]
    assert float(a.total_s[0]) == float(b.total_s[0]) and float(a.exposed_s[0]) == float(b.exposed_s[0])


BASE = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192",
        "--global-batch", "256", "--tp", "8", "--pp", "1", "--mbs", "1", "--zero", "2", "--recompute", "full", "--json"]


def _run(*extra: str) -> tuple[int, dict | str]:
    out = CliRunner().invoke(main, [*BASE, *extra])
    return out.exit_code, (json.loads(out.stdout) if out.exit_code in (0, 1) and out.output.startswith("{")
                           else out.output)


def test_torchtitan_runs_it_and_says_so() -> None:
    code, out = _run("--framework", "torchtitan", "--no-reshard-after-backward")
    assert code == 2 and "reshard_after_backward" in out and "trainer.py:905-907" in out
    code, on = _run("--framework", "torchtitan")
    assert code == 0 and on["recipe"]["reshard_after_backward"] is True
    _, off = _run("--grad-reduce-fp32", "--no-reshard-after-backward")
    assert on["breakdown"]["dp"] > off["breakdown"]["dp"]
