"""The search covers every layout `evaluate` prices (issue: exact means exact): interleaving up to the layers of
a stage, micro-batches up to the local batch, every TP and CP degree the layout rules allow."""

from __future__ import annotations

import numpy as np

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.evaluate import evaluate_layout
from placement.search import SearchConfig, search
from placement.specs import Layout, TrainingSpec
from placement.topology import Topology

GPT3 = load_model("gpt3-175b")
TRAIN = TrainingSpec(seq_len=2048, global_batch=1536)
_SPEC = load_cluster("dgx-a100-80g")
TOPO = Topology(_SPEC, load_accelerator(_SPEC.accelerator), num_gpus=1024)


def test_gpt3_175b_plan_is_no_slower_than_a_hand_picked_vpp_12():
    """GPT-3 175B on 1,024 A100: interleaving each 12-layer stage into 12 chunks (what Calculon picks, and
    what `evaluate --vpp 12` prices) was outside the old vpp <= 8 bound; the plan is at least as fast."""
    best = search(GPT3, TRAIN, TOPO, SearchConfig(top_k=1))
    plan = float(best.estimates.step_time_s[best.ranked[0]])
    by_hand = evaluate_layout(GPT3, TRAIN, TOPO, Layout(tp=4, pp=8, vpp=12, dp=32, micro_batch_size=2,
                                                        sequence_parallel=True))
    assert by_hand.fits
    assert plan <= by_hand.step_time_s + 5e-5  # the plan's own step, rounded to the 0.1 ms Plan prints
    assert int(best.batch.vpp[best.ranked[0]]) > 8  # the best interleaving is past the old bound


def test_gpt3_175b_plan_is_the_best_of_every_layout_evaluate_accepts(monkeypatch):
    """The exhaustive space (nothing pruned as dominated, ZeRO-0 included) holds every layout the rules and the
    Layout validator accept; the default search's best plan is its best fitting one."""
    import placement.search as search_mod

    monkeypatch.setattr(search_mod, "PRICE_CHUNK_ROWS", 10**8)  # priced at once: `every.batch` is the whole space
    best = search(GPT3, TRAIN, TOPO, SearchConfig(top_k=1))
    every = search(GPT3, TRAIN, TOPO, SearchConfig(top_k=1, prune_dominated=False, zero_stages=(0, 1, 2, 3)))
    fits = every.estimates.valid & every.estimates.fits
    assert float(best.estimates.step_time_s[best.ranked[0]]) <= float(np.min(every.estimates.step_time_s[fits])) + 1e-9
    # the space reaches the local batch and the stage's layers
    assert int(every.batch.mbs.max()) == TRAIN.global_batch // int(every.batch.dp[every.batch.mbs.argmax()])
    assert int(every.batch.vpp.max()) == 96 // 2  # pp 2: 48 layers per stage, one per chunk


def test_plan_exhaustive_states_what_it_does_not_search():
    import json

    from click.testing import CliRunner

    from placement.cli import main

    job = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "4096",
           "--global-batch", "64"]
    out = CliRunner().invoke(main, [*job, "--exhaustive"]).output
    assert "bound: selective recompute: only the module lists core_attn" in out
    assert "bound: ZeRO-0" not in out  # --exhaustive prices ZeRO-0
    data = json.loads(CliRunner().invoke(main, [*job, "--json"]).stdout)
    assert any(b.startswith("ZeRO-0 left out") for b in data["search"]["bounds"])
    assert not any("up to" in b for b in data["search"]["bounds"])  # no degree is capped
