"""HSDP (ZeRO-3 over dp_shard of the dp ranks) shards the experts as it shards the dense weights: over the stage's
tp x cp x dp_shard ranks, ep x etp of which hold different experts, and replicates them over dp / dp_shard
(torchtitan 0.3.0's sparse mesh (pp, dp_replicate, efsdp, ep), efsdp = dp_shard x cp x tp / ep; MaxText's expert
weights over expert, fsdp and context but not data).  A user trial found plans priced with the experts sharded
over all dp ranks: qwen3-30b-a3b z3/hsdp8 on 64 H100 "40.1 of 78.1 GiB", ranked first, which holds about 87."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost import collectives as coll
from placement.cost.dp import StageParams, dp_term, gather_bytes, grad_bytes
from placement.specs import Layout
from tests.test_cost_terms import _ctx, _est, _f

QWEN = "qwen3-30b-a3b"


@pytest.mark.parametrize("ep", [1, 2])
def test_hsdp_holds_the_experts_sharded_over_the_shard_group_only(ep: int) -> None:
    """Every parameter, dense or expert, is held 1/8 under dp_shard 8 and 1/64 under dp_shard 64: the optimizer
    state (and the weights and gradients) of HSDP 8 are exactly 8 times those of full sharding.  With the experts
    priced over all 64 ranks, the ratio is far below 8 (the experts are most of the model)."""
    hsdp = _est(QWEN, "dgx-h100", 64, Layout(dp=64, ep=ep, zero_stage=3, dp_shard=8, micro_batch_size=1))
    full = _est(QWEN, "dgx-h100", 64, Layout(dp=64, ep=ep, zero_stage=3, micro_batch_size=1))
    for part in ("optimizer_bytes", "weights_bytes", "grads_bytes"):
        assert _f(getattr(hsdp, part)) / _f(getattr(full, part)) == pytest.approx(8.0, rel=1e-6), part


def test_the_plan_no_longer_ranks_an_hsdp_layout_that_does_not_fit() -> None:
    """The trial's plan: the HSDP 8 layout it ranked first at 40.1 GiB holds over 78.1 GiB, so it does not fit."""
    out = CliRunner().invoke(main, ["evaluate", "--model", QWEN, "--cluster", "dgx-h100", "--gpus", "64",
                                    "--framework", "torchtitan", "--zero", "3", "--dp-shard", "8", "--mbs", "16",
                                    "--recompute", "full", "--json"])
    assert out.exit_code == 1, out.output  # evaluate exits 1 on a layout that does not fit
    res = json.loads(out.stdout)
    assert res["fits"] is False
    assert res["peak_memory_bytes"] > res["memory_capacity_bytes"]


def test_the_replicas_all_reduce_the_expert_gradients_too() -> None:
    """DP traffic of experts alone (no dense parameters) under HSDP: the expert shard group's gathers and
    reduce-scatters plus the replicas' all-reduce of each expert shard's gradients, priced exactly so."""
    ctx = _ctx(QWEN, "dgx-h100", 64, Layout(dp=64, ep=2, zero_stage=3, dp_shard=8), global_batch=64)
    expert = 1.0e9
    p = StageParams(dense=np.array([0.0]), expert=np.array([expert]), dense_shard=np.array([8.0]),
                    expert_shard=np.array([4.0]), edge_dense=np.array([0.0]), edge_expert=np.array([0.0]))
    term = dp_term(ctx, p, np.array([10.0]))
    lv, m = ctx.levels, float(np.asarray(ctx.m).ravel()[0])
    shard_group = coll.Groups(lv, 2, 4)  # within a replica: ep 2 x edp_shard 4 = tp x cp x dp_shard 8
    replicas = coll.Groups(lv, 8, 8)
    grad_b, wt_b = grad_bytes(ctx), gather_bytes(ctx)
    gather = float(shard_group.reduce_scatter(np.array([expert * wt_b]))[0])
    reduce = float(shard_group.reduce_scatter(np.array([expert * grad_b]))[0])
    replica = float(replicas.all_reduce(np.array([expert / 4.0 * grad_b]))[0])
    # the dense shard group's collectives move no bytes here but still pay their latency
    dense_latency = float(coll.Groups(lv, 1, 8).reduce_scatter(np.array([0.0]))[0])
    assert replica > 0
    expected = 2.0 * m * (gather + dense_latency) + m * (reduce + dense_latency) + replica
    assert _f(term.total_s) == pytest.approx(expected, rel=1e-9)
    assert _f(term.replica_bytes) == pytest.approx(2.0 * expert / 4.0 * grad_b)


def test_ep_must_divide_the_shard_group() -> None:
    with pytest.raises(ValueError, match=r"does not divide tp \(1\) \* cp \(1\) \* dp_shard \(2\) = 2"):
        Layout(dp=64, ep=4, zero_stage=3, dp_shard=2)
    assert Layout(dp=64, ep=4, zero_stage=3, dp_shard=8).edp_shard == 2
    assert Layout(dp=64, ep=4, zero_stage=1).edp_shard == 16


def test_the_count_of_a_space_is_the_layouts_it_expands_to() -> None:
    """`sharding_count` counts without expanding: per distinct (tp x cp, dp, ep x etp), since whether an HSDP group
    holds the experts depends on ep x etp too."""
    from placement.catalog import load_accelerator, load_cluster, load_model
    from placement.search import SearchConfig, enumerate_layouts, expand_sharding, hsdp_spans, sharding_count
    from placement.specs import TrainingSpec
    from placement.topology import Topology
    from placement.workload import workload

    model = load_model(QWEN)
    cluster = load_cluster("dgx-h100")
    t = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=64)
    cfg = SearchConfig(zero_stages=(1, 2, 3))
    base = enumerate_layouts(workload(model), model, TrainingSpec(seq_len=4096, global_batch=256), 64, cfg, 8,
                             hsdp_spans(t), sharded=False)
    whole = expand_sharding(base, cfg, 64, 8, hsdp_spans(t))
    assert sharding_count(base, cfg, 64, 8, hsdp_spans(t)) == len(whole)
    hsdp = (whole.zero == 3) & (whole.dp_shard < whole.dp)
    assert hsdp.any() and ((whole.tp * whole.cp * whole.dp_shard)[hsdp] % (whole.ep * whole.etp)[hsdp] == 0).all()
