"""The search's branch and bound is exact: the step bound never exceeds the step `estimate` prices, and the
bounded search returns the same plans as pricing every layout."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cost.step import default_choices, estimate, step_lower_bound
from placement.search import SearchConfig, enumerate_layouts, hsdp_spans, search
from placement.specs import ModelSpec, MoESpec, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology
from placement.workload import workload


def _topo(cluster: str, n: int) -> Topology:
    spec = load_cluster(cluster)
    return Topology(spec, load_accelerator(spec.accelerator), num_gpus=n)


@st.composite
def jobs(draw):
    heads = draw(st.sampled_from([4, 8, 16, 32]))
    layers = draw(st.integers(2, 40))
    moe = None
    if draw(st.booleans()):
        moe = MoESpec(num_experts=draw(st.sampled_from([8, 16, 64])), top_k=draw(st.sampled_from([1, 2, 8])),
                      expert_ffn_hidden_size=draw(st.sampled_from([256, 1024])),
                      num_dense_layers=draw(st.integers(0, min(layers - 1, 3))))
    kv = draw(st.sampled_from([h for h in (1, 2, 4) if heads % h == 0]))
    model = ModelSpec(name="m", num_layers=layers, hidden_size=128 * heads, ffn_hidden_size=512 * heads,
                      num_attention_heads=heads, num_kv_heads=kv, vocab_size=draw(st.sampled_from([32000, 128000])),
                      moe=moe)
    recipe = Recipe(pipeline_schedule=draw(st.sampled_from(["1f1b", "dualpipe", "zero_bubble"])),
                    mtp_layers=draw(st.sampled_from([0, 1])), moe_dispatcher=draw(st.sampled_from(
                        ["alltoall", "deepep"])), ep_comm_overlap=draw(st.booleans()),
                    tp_comm_overlap=draw(st.booleans()))
    cluster = draw(st.sampled_from(["dgx-h100", "gb200-nvl72"]))
    n = draw(st.sampled_from([8, 16, 64]))
    train = TrainingSpec(seq_len=draw(st.sampled_from([2048, 8192])), global_batch=draw(st.sampled_from([64, 96, 256])),
                         precision=draw(st.sampled_from(["bf16", "fp8"])))
    return model, recipe, cluster, n, train, draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=jobs())
def test_step_bound_never_exceeds_the_priced_step(job):
    model, recipe, cluster, n, train, open_choices = job
    topo = _topo(cluster, n)
    choices = default_choices(model.moe is not None, topo, recipe, pinned=frozenset()) if open_choices else None
    cfg = SearchConfig(recipe=recipe, choices=choices)
    w = workload(model)
    b = enumerate_layouts(w, model, train, n, cfg, min(topo.cluster.gpus_per_node, n), hsdp_spans(topo))
    if not len(b):
        return
    est = estimate(w, train, topo, b, recipe, choices)
    lb = step_lower_bound(w, train, topo, b, recipe, choices)
    ok = est.valid
    assert np.all(lb[ok] <= est.step_time_s[ok] * (1 + 1e-12))
    assert np.all(np.isinf(lb[~ok]) | ~ok[~ok])


CASES = [  # (model, cluster, GPUs, seq, global batch, precision): each has more layouts than the first priced chunk
    ("gpt3-175b", "dgx-a100-80g", 1024, 2048, 1536, "bf16"),
    ("llama3-405b", "dgx-h100", 512, 8192, 512, "bf16"),  # memory binds: the lowest bounds do not fit
    ("mixtral-8x22b", "dgx-h100", 256, 4096, 1024, "bf16"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("plan_choices", [False, True], ids=["pinned", "choices"])
def test_bounded_search_returns_the_plans_of_pricing_everything(case, plan_choices):
    name, cluster, n, seq, gbs, precision = case
    model, topo = load_model(name), _topo(cluster, n)
    train = TrainingSpec(seq_len=seq, global_batch=gbs, precision=precision)
    choices = default_choices(model.moe is not None, topo, Recipe(), pinned=frozenset()) if plan_choices else None
    bounded = search(model, train, topo, SearchConfig(top_k=5, choices=choices))
    full = search(model, train, topo, SearchConfig(top_k=5, choices=choices, bound=False))
    assert bounded.num_candidates < full.num_candidates  # the bound did leave layouts unpriced
    space = enumerate_layouts(workload(model), model, train, n, SearchConfig(choices=choices),
                              min(topo.cluster.gpus_per_node, n), hsdp_spans(topo))
    assert bounded.num_enumerated == full.num_enumerated == len(space)  # ... of the same space

    def plans(res):
        return [(round(float(res.estimates.step_time_s[i]), 9), res.batch.layout(i), res.batch.modules(i))
                for i in res.ranked]

    assert plans(bounded) == plans(full)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=jobs())
def test_memory_floor_never_exceeds_the_priced_peak(job):
    """`memory_floor` is `estimate`'s memory without the CUDA-graph pools: never above the priced peak, and the same
    validity, so a candidate whose floor is over capacity cannot fit."""
    from placement.cost.step import memory_floor

    model, recipe, cluster, n, train, _ = job
    topo = _topo(cluster, n)
    w = workload(model)
    b = enumerate_layouts(w, model, train, n, SearchConfig(recipe=recipe), min(topo.cluster.gpus_per_node, n),
                          hsdp_spans(topo))
    if len(b) == 0:
        return
    est = estimate(w, train, topo, b, recipe)
    valid, floor, capacity = memory_floor(w, train, topo, b, recipe)
    assert np.array_equal(valid, est.valid)
    assert capacity == est.memory_capacity_bytes
    assert np.all(floor[valid] <= est.peak_memory_bytes[valid] * (1 + 1e-12))
    assert not np.any(est.fits[valid] & (floor[valid] > capacity))


INFEASIBLE = [  # each over 2 x FIRST_PRICED layouts, so the bounded search runs and finds nothing fits
    ("llama3-405b", "dgx-h100", 64, 8192, 2048), ("mixtral-8x22b", "dgx-h100", 16, 4096, 1024),
    ("qwen3-235b-a22b", "dgx-h100", 16, 4096, 1024),
]


@pytest.mark.parametrize("case", INFEASIBLE, ids=[c[0] for c in INFEASIBLE])
def test_an_infeasible_job_names_the_leanest_layout_of_pricing_everything(case):
    """Where nothing of the first chunk fits and no layout left can (by its memory floor), the bounded search prices
    only the leanest of them: the message, which names the leanest layout of the whole space, is the same as
    pricing every layout gives."""
    from placement.errors import PlacementInfeasible

    name, cluster, n, seq, gbs = case
    model, topo = load_model(name), _topo(cluster, n)
    train = TrainingSpec(seq_len=seq, global_batch=gbs)
    messages = []
    for bound in (True, False):
        with pytest.raises(PlacementInfeasible) as err:
            search(model, train, topo, SearchConfig(top_k=1, bound=bound))
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "the leanest layout" in messages[0]
