"""A whole space priced in chunks (`search._price_all`, PRICE_CHUNK_ROWS) ranks, counts and explains exactly as
pricing it at once: only memory changes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_search import DENSE, MOE, TIGHT, topo

import placement.search as search_mod
from placement.errors import PlacementInfeasible
from placement.search import SearchConfig, search
from placement.specs import TrainingSpec
from placement.specs.recipe import Recipe, RecomputeModule

FULL = SearchConfig(top_k=5, zero_stages=(0, 1, 2, 3), prune_dominated=False)


def _plans(res) -> list[tuple]:
    return [(round(float(res.estimates.step_time_s[i]), 9), res.batch.layout(int(i)), res.batch.modules(int(i)))
            for i in res.ranked]


@pytest.mark.parametrize(("model", "n", "gb", "chunk", "kept"), [
    pytest.param(DENSE, 16, 64, 500, 3, id="dense-16gpu"),
    pytest.param(MOE, 8, 32, 300, 8, id="moe-8gpu"),
    pytest.param(DENSE, 16, 64, 1, 1024, id="dense-one-row-chunks"),
])
def test_chunked_pricing_ranks_as_pricing_at_once(monkeypatch, model, n: int, gb: int, chunk: int, kept: int):
    train = TrainingSpec(seq_len=2048, global_batch=gb)
    whole = search(model, train, topo(n), FULL)
    assert len(whole.batch) == whole.num_candidates > chunk  # priced at once: every layout kept
    monkeypatch.setattr(search_mod, "PRICE_CHUNK_ROWS", chunk)
    monkeypatch.setattr(search_mod, "KEPT_WHEN_CHUNKED", kept)
    chunked = search(model, train, topo(n), FULL)
    assert _plans(chunked) == _plans(whole)
    assert chunked.num_candidates == whole.num_candidates == chunked.num_enumerated  # every layout was priced
    assert len(chunked.batch) < len(whole.batch)  # ... and only the best were held
    fits = chunked.estimates.valid & chunked.estimates.fits
    assert fits.sum() >= max(kept, FULL.top_k) or fits.sum() == (whole.estimates.valid & whole.estimates.fits).sum()


def test_chunked_pricing_keeps_ties_with_the_last_kept(monkeypatch):
    """Layouts whose steps tie to the ranking's rounding are all kept, so the tie-break by layout fields (rank)
    sees the same set."""
    train = TrainingSpec(seq_len=2048, global_batch=64)
    whole = search(DENSE, train, topo(16), FULL)
    ok = whole.estimates.valid & whole.estimates.fits
    steps = np.round(whole.estimates.step_time_s[ok], 9)
    values, counts = np.unique(steps, return_counts=True)
    tied = np.flatnonzero(counts > 1)
    assert tied.size, "the case needs tied steps"
    place = int(np.sum(counts[:tied[0]])) + 1  # keep_n landing on the first member of the first tie
    monkeypatch.setattr(search_mod, "PRICE_CHUNK_ROWS", 200)
    monkeypatch.setattr(search_mod, "KEPT_WHEN_CHUNKED", place)
    chunked = search(DENSE, train, topo(16), dataclasses.replace(FULL, top_k=1))
    kept = np.round(chunked.estimates.step_time_s[chunked.estimates.valid & chunked.estimates.fits], 9)
    assert np.sum(kept == values[tied[0]]) == counts[tied[0]]


def test_chunked_pricing_names_the_same_leanest_layout_when_nothing_fits(monkeypatch):
    train = TrainingSpec(seq_len=2048, global_batch=32)  # 23B on 2 x 80 GB: no layout fits
    with pytest.raises(PlacementInfeasible) as whole:
        search(TIGHT, train, topo(2), FULL)
    monkeypatch.setattr(search_mod, "PRICE_CHUNK_ROWS", 20)
    with pytest.raises(PlacementInfeasible) as chunked:
        search(TIGHT, train, topo(2), FULL)
    assert str(chunked.value) == str(whole.value)
    assert chunked.value.binding == whole.value.binding == "memory"


def test_chunked_pricing_of_a_pruned_space_keeps_what_selective_recompute_extends(monkeypatch):
    """With the bound off and the space pruned (SearchConfig(bound=False), the reference of the branch-and-bound
    tests), selective recompute is added afterwards to layouts that do not fit without recompute: chunking must keep
    those, or the best plan (here selective recompute of the layernorms, run unfused as MaxText runs them: fused
    into their projections, as Megatron-Core's TE spec runs a dense model's, they free nothing) is lost."""
    train = TrainingSpec(seq_len=4096, global_batch=64)
    M = RecomputeModule
    cfg = SearchConfig(top_k=5, bound=False, recipe=Recipe(norms_fused=False),
                       module_sets=((M.CORE_ATTN,), (M.LAYERNORM,), (M.MLP,), (M.LAYERNORM, M.MLP)))
    whole = search(TIGHT, train, topo(16), cfg)
    assert any(m for i in whole.ranked for m in [whole.batch.modules(int(i))])  # a selective plan ranks
    monkeypatch.setattr(search_mod, "PRICE_CHUNK_ROWS", 50)
    chunked = search(TIGHT, train, topo(16), cfg)
    assert _plans(chunked) == _plans(whole)
    assert chunked.num_candidates == whole.num_candidates


def test_a_framework_space_is_counted_in_chunks_to_the_same_count(monkeypatch):
    """With --framework the count expands the layouts (its rules depend on more than tp x cp and dp); it does so
    a chunk at a time, to the count of expanding them all at once."""
    from placement.frameworks import CAPABILITIES
    from placement.search import enumerate_layouts, expand_sharding, hsdp_spans, sharding_count
    from placement.workload import workload

    cfg = SearchConfig(framework=CAPABILITIES["torchtitan"], zero_stages=(1, 2, 3))
    t = topo(16)
    base = enumerate_layouts(workload(MOE), MOE, TrainingSpec(seq_len=2048, global_batch=64), 16, cfg, 8,
                             hsdp_spans(t), sharded=False)
    whole = len(expand_sharding(base, cfg, 16, 8, hsdp_spans(t)))
    monkeypatch.setattr(search_mod, "PRICE_CHUNK_ROWS", 32)  # chunks of 2 base rows
    assert len(base) > 2 and sharding_count(base, cfg, 16, 8, hsdp_spans(t)) == whole > 0


@pytest.mark.parametrize(("model", "n", "gb"), [pytest.param(DENSE, 64, 256, id="dense"),
                                                pytest.param(MOE, 64, 256, id="moe")])
def test_step_bounds_in_chunks_bound_as_at_once(monkeypatch, model, n: int, gb: int):
    """The branch and bound's step bounds computed in chunks of BOUND_CHUNK_ROWS (1.5 GB resident for DeepSeek-V3 on
    131,072 GPUs at once, 0.5 GB in chunks) price and rank the same layouts."""
    train = TrainingSpec(seq_len=2048, global_batch=gb)
    at_once = search(model, train, topo(n), SearchConfig(top_k=5))
    monkeypatch.setattr(search_mod, "BOUND_CHUNK_ROWS", 7)
    calls = []
    bound = search_mod.step_lower_bound
    monkeypatch.setattr(search_mod, "step_lower_bound", lambda *a, **k: calls.append(len(a[3])) or bound(*a, **k))
    chunked = search(model, train, topo(n), SearchConfig(top_k=5))
    assert calls.count(7) > 1  # the bounded path, in chunks
    assert _plans(chunked) == _plans(at_once)
    assert chunked.num_candidates == at_once.num_candidates and chunked.num_enumerated == at_once.num_enumerated
