"""The exhaustive space (`SearchConfig.prune_dominated=False`, ZeRO 0-3) and the top-k ranking shortcut.

benchmarks/bench_search.py times the search over this space; these tests pin that it is the brute
force's whole space and that pruning it loses nothing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_search import CORE, DENSE, MOE, TIGHT, batch_keys, brute_force_layouts, key, topo

from placement.search import SearchConfig, hsdp_spans, rank, search
from placement.specs import Recompute, TrainingSpec

FULL = {"zero_stages": (0, 1, 2, 3), "prune_dominated": False}

CASES = [
    pytest.param(DENSE, 8, 32, SearchConfig(
        module_sets=CORE, pipeline_policies=(0,), max_micro_batch_size=4), id="dense-8gpu"),
    pytest.param(TIGHT, 8, 32, SearchConfig(
        module_sets=CORE, pipeline_policies=(0,), max_micro_batch_size=2), id="tight-8gpu"),
    pytest.param(MOE, 8, 32, SearchConfig(
        module_sets=CORE, pipeline_policies=(0,), max_micro_batch_size=2,
        recompute=(Recompute.NONE, Recompute.SELECTIVE)),
                 id="moe-8gpu"),
]


@pytest.mark.parametrize(("model", "n", "gb", "cfg"), CASES)
def test_full_space_is_the_brute_force_superset(model, n: int, gb: int, cfg: SearchConfig) -> None:
    train = TrainingSpec(seq_len=2048, global_batch=gb)
    t = topo(n)
    full_cfg = dataclasses.replace(cfg, **FULL)
    full = search(model, train, t, full_cfg)
    everything, _ = brute_force_layouts(model, train, n, hsdp_spans(t), full_cfg, superset=True)
    keys = batch_keys(full.batch, range(len(full.batch)))
    assert len(set(keys)) == len(keys)
    assert set(keys) == {key(lay) for lay in everything}
    # it really holds what the default leaves out
    sp_off = (full.batch.tp > 1) & (full.batch.sp == 0)
    assert sp_off.any() and (full.batch.zero == 0).any() and (full.batch.recompute == 1).any()
    # and the default search, over the pruned space, finds the same optimum
    pruned = search(model, train, t, cfg)
    assert len(pruned.batch) < len(full.batch)
    assert float(pruned.estimates.step_time_s[pruned.ranked[0]]) == pytest.approx(
        float(full.estimates.step_time_s[full.ranked[0]]), rel=1e-12)


@pytest.mark.parametrize("top_k", [1, 2, 5, 17, 60])
def test_top_k_is_the_prefix_of_the_full_order_even_with_ties(top_k: int) -> None:
    """rank() sorts only the candidates at or below the k-th step time; with step times rounded to
    tenths of the best (many ties, broken by the layout fields) it must still return the full order's
    first k."""
    res = search(DENSE, TrainingSpec(seq_len=2048, global_batch=64), topo(16), SearchConfig(**FULL))
    mask = res.estimates.valid & res.estimates.fits
    coarse = np.round(res.estimates.step_time_s / res.estimates.step_time_s[mask].min(), 1)
    est = dataclasses.replace(res.estimates, step_time_s=coarse)
    everything = rank(res.batch, est, mask, int(mask.sum()))
    assert everything.size > 60
    steps = est.step_time_s[everything]
    assert steps[top_k - 1] == steps[top_k]  # a tie straddles the cut, so the tie-break decides
    assert rank(res.batch, est, mask, top_k).tolist() == everything[:top_k].tolist()



def test_cli_exhaustive_searches_the_full_space_with_the_same_best_plan():
    import json

    from click.testing import CliRunner

    from placement.cli import main

    args = ["--reproducible", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len",
            "4096", "--global-batch", "128", "--top-k", "1", "--json"]
    default = json.loads(CliRunner().invoke(main, args).stdout)
    full = json.loads(CliRunner().invoke(main, [*args, "--exhaustive"]).stdout)
    assert full["search"]["candidates"] > default["search"]["candidates"]
    assert full["plans"][0]["step_time_s"] == default["plans"][0]["step_time_s"]
