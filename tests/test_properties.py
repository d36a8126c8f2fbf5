"""Properties of the search and the cost model that must hold for any input (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from placement.catalog import load_accelerator, load_cluster
from placement.cost.step import estimate
from placement.errors import PlacementInfeasible
from placement.search import SearchConfig, enumerate_layouts, search
from placement.specs import FfnKind, ModelSpec, MoESpec, TrainingSpec
from placement.topology import Topology
from placement.workload import workload

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])

MODELS = [
    ModelSpec(name="dense-gqa", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
              num_kv_heads=4, vocab_size=32000),
    ModelSpec(name="dense-mha-gelu", num_layers=12, hidden_size=2048, ffn_hidden_size=8192, ffn_kind=FfnKind.GELU,
              num_attention_heads=16, vocab_size=50304, tied_embeddings=True, dropout=True),
    ModelSpec(name="moe-8x", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
              num_kv_heads=4, vocab_size=32000, moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=2048)),
    ModelSpec(name="moe-16x-shared", num_layers=6, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
              num_kv_heads=2, vocab_size=32000,
              moe=MoESpec(num_experts=16, top_k=4, expert_ffn_hidden_size=512, num_shared_experts=1,
                          num_dense_layers=1)),
    ModelSpec(name="mid-23b", num_layers=24, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
              num_kv_heads=8, vocab_size=128256),
]
MID = MODELS[-1]
MOE_MODELS = [m for m in MODELS if m.moe is not None]

H100 = load_accelerator("h100-sxm")
DGX = load_cluster("dgx-h100")

models = st.sampled_from(MODELS)
gpu_counts = st.sampled_from([8, 16, 24, 32, 64, 128])
seq_lens = st.sampled_from([1024, 2048, 4096])
global_batches = st.sampled_from([16, 32, 48, 64, 96, 128, 256])


def run(model: ModelSpec, train: TrainingSpec, topo: Topology, top_k: int = 20):
    try:
        return search(model, train, topo, SearchConfig(top_k=top_k))
    except PlacementInfeasible:
        assume(False)  # nothing returned, nothing to check


@SETTINGS
@given(model=models, n=gpu_counts, seq=seq_lens, gb=global_batches)
def test_degrees_multiply_to_the_gpu_count(model: ModelSpec, n: int, seq: int, gb: int) -> None:
    res = run(model, TrainingSpec(seq_len=seq, global_batch=gb), Topology(DGX, H100, n))
    b = res.batch
    # every candidate, and so every returned plan
    assert np.all(b.tp * b.cp * b.pp * b.dp == n)
    assert np.all((b.tp * b.cp * b.dp) % (b.ep * b.etp) == 0)
    for i in res.ranked:
        lay = b.layout(int(i))
        assert lay.num_gpus == n
        assert (lay.tp * lay.cp * lay.dp) % (lay.ep * lay.etp) == 0
        assert gb % (lay.dp * lay.micro_batch_size) == 0
        if model.moe is None:
            assert lay.ep == lay.etp == 1
        else:
            assert model.moe.num_experts % lay.ep == 0 and lay.etp in (1, lay.tp)


@SETTINGS
@given(model=st.sampled_from(MOE_MODELS), n=st.sampled_from([8, 16, 32, 64, 128, 256]), gb=global_batches)
def test_moe_plans_shard_experts_over_the_stage(model: ModelSpec, n: int, gb: int) -> None:
    res = run(model, TrainingSpec(seq_len=2048, global_batch=gb), Topology(DGX, H100, n), top_k=50)
    b = res.batch
    r = res.ranked
    assert np.all(b.tp[r] * b.cp[r] * b.pp[r] * b.dp[r] == n)
    assert np.all((b.tp[r] * b.cp[r] * b.dp[r]) % (b.ep[r] * b.etp[r]) == 0)
    assert np.any(b.ep > 1)  # expert parallelism is really on offer


@SETTINGS
@given(model=models, n=st.sampled_from([8, 16, 32]), seq=seq_lens, gb=global_batches)
def test_every_returned_plan_fits(model: ModelSpec, n: int, seq: int, gb: int) -> None:
    res = run(model, TrainingSpec(seq_len=seq, global_batch=gb), Topology(DGX, H100, n))
    est = res.estimates
    assert est.memory_capacity_bytes < H100.hbm_bytes
    r = res.ranked
    assert r.size > 0
    assert np.all(est.valid[r])
    assert np.all(est.peak_memory_bytes[r] <= est.memory_capacity_bytes)
    parts = est.weights_bytes + est.grads_bytes + est.optimizer_bytes + est.activations_bytes + est.other_bytes
    assert np.allclose(parts[r], est.peak_memory_bytes[r], rtol=1e-12)
    # and `fits` is exactly that comparison for every candidate
    assert np.array_equal(est.fits, est.peak_memory_bytes <= est.memory_capacity_bytes)


def _best(model: ModelSpec, train: TrainingSpec, hbm: int, n: int) -> float | None:
    acc = H100.model_copy(update={"hbm_bytes": hbm})
    cluster = DGX.model_copy(update={"accelerator": acc.name})
    try:
        res = search(model, train, Topology(cluster, acc, n), SearchConfig(top_k=1))
    except PlacementInfeasible:
        return None
    est = res.estimates
    exact = float(est.step_time_s[est.valid & est.fits].min())
    best = float(est.step_time_s[res.ranked[0]])
    assert best == pytest.approx(exact, abs=1e-9)  # ties are broken on step times rounded to 1 ns
    return exact


@SETTINGS
@given(model=st.sampled_from([MID, MODELS[1], MODELS[3]]), n=st.sampled_from([8, 16, 32]),
       seq=seq_lens, gb=st.sampled_from([32, 64, 128]),
       hbm_gb=st.floats(8.0, 80.0), factor=st.floats(1.0, 4.0))
def test_more_memory_never_makes_the_best_plan_slower(model: ModelSpec, n: int, seq: int, gb: int, hbm_gb: float,
                                                     factor: float) -> None:
    train = TrainingSpec(seq_len=seq, global_batch=gb)
    less = int(hbm_gb * 1e9)
    more = int(less * factor)
    small, large = _best(model, train, less, n), _best(model, train, more, n)
    if small is not None:
        assert large is not None  # whatever fits in less memory fits in more
        assert large <= small + 1e-12


def test_memory_really_binds_for_the_mid_model() -> None:
    """The property above is only tested if memory decides somewhere in its input range."""
    train = TrainingSpec(seq_len=2048, global_batch=64)
    small, large = _best(MID, train, 40_000_000_000, 16), _best(MID, train, 160_000_000_000, 16)
    assert small is not None and large is not None and large < small
    assert _best(MID, train, 8_000_000_000, 8) is None


@st.composite
def faster_link(draw):
    """(base cluster, cluster with one link made better, what changed)."""
    ratios = [draw(st.floats(1.0, 4.0)) for _ in DGX.tiers]
    tiers = tuple(t.model_copy(update={"oversubscription": r}) for t, r in zip(DGX.tiers, ratios, strict=False))
    base = DGX.model_copy(update={"tiers": tiers})
    which = draw(st.sampled_from(["scale_up", "nic", "oversubscription"]))
    factor = draw(st.floats(1.0, 10.0))
    if which == "scale_up":
        su = base.scale_up.model_copy(update={"bandwidth_bytes_per_s": base.scale_up.bandwidth_bytes_per_s * factor})
        better = base.model_copy(update={"scale_up": su})
    elif which == "nic":
        better = base.model_copy(update={"nic_bandwidth_bytes_per_s": base.nic_bandwidth_bytes_per_s * factor})
    else:
        j = draw(st.integers(0, len(tiers) - 1))
        tier = tiers[j].model_copy(update={"oversubscription": max(1.0, tiers[j].oversubscription / factor)})
        better = base.model_copy(update={"tiers": (*tiers[:j], tier, *tiers[j + 1:])})
        which = f"oversubscription of {tiers[j].name}"
    return base, better, which


@SETTINGS
@given(model=models, n=st.sampled_from([16, 24, 32, 64, 128, 256]), seq=seq_lens, gb=global_batches,
       links=faster_link(), data=st.data())
def test_a_faster_link_never_makes_a_layout_slower(model: ModelSpec, n: int, seq: int, gb: int, links,
                                                   data) -> None:
    base, better, which = links
    train = TrainingSpec(seq_len=seq, global_batch=gb)
    w = workload(model)
    cfg = SearchConfig(zero_stages=(0, 1, 2, 3))
    everything = enumerate_layouts(w, model, train, n, cfg, DGX.gpus_per_node)
    assume(len(everything) > 0)
    pick = np.array(data.draw(st.lists(st.integers(0, len(everything) - 1), min_size=1, max_size=64)))
    layouts = everything.take(pick)
    slow = estimate(w, train, Topology(base, H100, n), layouts)
    fast = estimate(w, train, Topology(better, H100, n), layouts)
    assert np.array_equal(slow.valid, fast.valid)
    worse = fast.step_time_s > slow.step_time_s * (1 + 1e-12)
    assert not worse.any(), (which, [layouts.layout(int(i)) for i in np.flatnonzero(worse)])
    assert np.array_equal(slow.peak_memory_bytes, fast.peak_memory_bytes)  # links do not change memory


@SETTINGS
@given(model=models, n=gpu_counts, seq=seq_lens, gb=global_batches)
def test_step_time_positive_and_mfu_a_fraction(model: ModelSpec, n: int, seq: int, gb: int) -> None:
    res = run(model, TrainingSpec(seq_len=seq, global_batch=gb), Topology(DGX, H100, n))
    est = res.estimates
    ok = est.valid
    assert ok.any()
    assert np.all(np.isfinite(est.step_time_s[ok]))
    assert np.all(est.step_time_s[ok] > 0)
    assert np.all((est.mfu[ok] > 0) & (est.mfu[ok] < 1))
    assert np.all(est.hfu[ok] >= est.mfu[ok] * (1 - 1e-12))  # recompute only adds hardware FLOPs
    r = res.ranked
    assert np.all(est.step_time_s[r] > 0) and np.all((est.mfu[r] > 0) & (est.mfu[r] < 1))
