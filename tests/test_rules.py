"""The layout rules (placement/cost/rules.py) are the search's and evaluate's one rule book.

Property: for random small models, jobs and GPU counts, every layout `enumerate_layouts` yields passes
`check_layout`, and every layout `check_layout` accepts (brute force over the degree grid) is enumerated.
Plus each rule's message, pinned.
"""

from __future__ import annotations

import itertools
import re
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from placement.catalog import load_accelerator, load_cluster
from placement.cost import rules
from placement.cost.pipeline import stage_kinds
from placement.cost.stages import stage_layers
from placement.errors import InputError
from placement.evaluate import check_layout
from placement.search import SearchConfig, enumerate_layouts
from placement.specs import Layout, ModelSpec, MoESpec, Recompute, TrainingSpec
from placement.topology import Topology
from placement.workload import workload

MAX_MBS = 3
CFG = SearchConfig(max_micro_batch_size=MAX_MBS, zero_stages=(1,), recompute=(Recompute.NONE,), hsdp=False,
                   pipeline_policies=(0,))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def models(draw) -> ModelSpec:
    heads = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]))
    kv = draw(st.sampled_from(_divisors(heads)))
    layers = draw(st.integers(1, 24))
    moe = None
    if draw(st.booleans()):
        experts = draw(st.sampled_from([2, 3, 4, 6, 8, 16]))
        moe = MoESpec(num_experts=experts, top_k=1, expert_ffn_hidden_size=256,
                      num_dense_layers=draw(st.integers(0, min(layers, 3))))
    return ModelSpec(name="m", num_layers=layers, hidden_size=64 * heads, ffn_hidden_size=256,
                     num_attention_heads=heads, num_kv_heads=kv, vocab_size=1000, moe=moe)


def key(tp, cp, ep, etp, pp, vpp, dp, mbs) -> tuple[int, ...]:
    return tuple(int(x) for x in (tp, cp, ep, etp, pp, vpp, dp, mbs))


def grid(model: ModelSpec, train: TrainingSpec, n: int):
    """Every (tp, cp, ep, etp, pp, vpp, dp, mbs) of the degree grid on n GPUs, with its Layout where Layout and
    check_layout accept it (None where either refuses)."""
    for tp, cp, pp in itertools.product(_divisors(n), repeat=3):
        if n % (tp * cp * pp):
            continue
        dp = n // (tp * cp * pp)
        for ep, etp, vpp, mbs in itertools.product(_divisors(n), _divisors(n), range(1, model.num_layers + 1),
                                                   range(1, MAX_MBS + 1)):
            try:
                # sequence parallelism where tp splits each CP rank's sequence, as the search turns it on
                lay = Layout(tp=tp, cp=cp, ep=ep, etp=etp, pp=pp, vpp=vpp, dp=dp, micro_batch_size=mbs,
                             sequence_parallel=tp > 1 and train.seq_len % (cp * tp) == 0)
                check_layout(model, train, lay)
            except (ValidationError, InputError):
                lay = None
            yield key(tp, cp, ep, etp, pp, vpp, dp, mbs), lay


def brute_force_accepted(model: ModelSpec, train: TrainingSpec, n: int) -> set[tuple[int, ...]]:
    """Every (tp, cp, ep, etp, pp, vpp, dp, mbs) on n GPUs that Layout and check_layout accept."""
    return {k for k, lay in grid(model, train, n) if lay is not None}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(), n=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]),
       seq=st.sampled_from([96, 512, 1000, 4096]), gb=st.integers(1, 48))
def test_search_enumerates_exactly_what_check_layout_accepts(model: ModelSpec, n: int, seq: int, gb: int) -> None:
    train = TrainingSpec(seq_len=seq, global_batch=gb)
    b = enumerate_layouts(workload(model), model, train, n, CFG)
    enumerated = {key(*(getattr(b, f)[i] for f in ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs")))
                  for i in range(len(b))}
    for i in range(len(b)):  # every enumerated layout passes the scalar check
        check_layout(model, train, b.layout(i))
    assert enumerated == brute_force_accepted(model, train, n)


PAIRS_PER_JOB = 50
"""Each generated job checks at least this many (job, layout) pairs; with PAIR_JOBS jobs, >= 2,000 in all."""
PAIR_JOBS = 40


@settings(max_examples=PAIR_JOBS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(), n=st.sampled_from([4, 6, 8, 16]), seq=st.sampled_from([512, 1000, 4096]),
       gb=st.integers(4, 48))
def test_search_prices_every_layout_evaluate_accepts_as_evaluate_does(model: ModelSpec, n: int, seq: int,
                                                                      gb: int) -> None:
    """Every layout of the degree grid that `evaluate` accepts is a search candidate with the same step time
    (and memory), every candidate is accepted by `evaluate`, and nothing else is a candidate."""
    from placement.cost.batch import LayoutBatch
    from placement.cost.step import estimate

    train = TrainingSpec(seq_len=seq, global_batch=gb)
    topo = _topo(n)
    w = workload(model)
    b = enumerate_layouts(w, model, train, n, CFG)
    est = estimate(w, train, topo, b) if len(b) else None
    searched = {key(*(getattr(b, f)[i] for f in ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs"))): i
                for i in range(len(b))}
    accepted, checked = [], 0
    for k, lay in grid(model, train, n):
        checked += 1
        if lay is None:
            assert k not in searched
        else:
            accepted.append(lay)
    assert checked >= PAIRS_PER_JOB
    assert {key(lay.tp, lay.cp, lay.ep, lay.etp, lay.pp, lay.vpp, lay.dp, lay.micro_batch_size)
            for lay in accepted} == set(searched)
    if not accepted:
        return
    alone = estimate(w, train, topo, LayoutBatch.from_layouts(accepted))  # what `evaluate` prices, per layout
    for j, lay in enumerate(accepted):
        i = searched[key(lay.tp, lay.cp, lay.ep, lay.etp, lay.pp, lay.vpp, lay.dp, lay.micro_batch_size)]
        assert float(est.step_time_s[i]) == pytest.approx(float(alone.step_time_s[j]), rel=1e-9)
        assert float(est.peak_memory_bytes[i]) == pytest.approx(float(alone.peak_memory_bytes[j]), rel=1e-9)


@cache
def _topo(n: int) -> Topology:
    spec = load_cluster("dgx-h100")
    return Topology(spec, load_accelerator(spec.accelerator), num_gpus=n)


# -- the two forms of a rule agree -------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(model=models(), seq=st.sampled_from([96, 512, 4096]), gb=st.integers(1, 48))
def test_vectorized_and_scalar_forms_agree(model: ModelSpec, seq: int, gb: int) -> None:
    facts = rules.Facts.of(model, TrainingSpec(seq_len=seq, global_batch=gb))
    grid = np.array(list(itertools.product([1, 2, 3, 4], [1, 2], [1, 2, 4], [1, 2], [1, 2, 3, 5, 8],
                                           [1, 2, 3], [1, 2, 3], [1, 2])), dtype=np.int64)
    names = ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs")
    cols = dict(zip(names, grid.T, strict=True))
    ok = rules.holds(facts, cols)
    for i in range(0, len(grid), 7):
        broken = rules.first_broken(facts, dict(zip(names, grid[i].tolist(), strict=True)))
        assert (broken is None) == bool(ok[i])


def test_default_split_validity_is_the_pipeline_rules() -> None:
    """stage_kinds' default split (policy 0) and stages.py agree with the pp/vpp rules."""
    pipeline_rules = [r for r in rules.RULES if r.name in ("pp_layers", "vpp_layers")]
    for layers in range(1, 40):
        facts = rules.Facts(model_name="m", num_layers=layers, num_heads=1, num_kv_heads=1, num_experts=0,
                            seq_len=1, global_batch=1)
        pp, vpp = (a.ravel() for a in np.meshgrid(np.arange(1, 20), np.arange(1, 9)))
        ok = rules.holds(facts, {"pp": pp, "vpp": vpp}, pipeline_rules)
        assert np.array_equal(ok, stage_kinds(layers, 0, 0, pp, vpp, np.zeros_like(pp)).valid)
        assert np.array_equal(ok, stage_layers(layers, pp, vpp).valid)


def test_every_rule_has_a_reason_and_reads_known_columns() -> None:
    known = {"tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs"}
    assert len({r.name for r in rules.RULES}) == len(rules.RULES)
    for r in rules.RULES:
        assert r.reads <= known and r.reason


# -- messages, pinned --------------------------------------------------------------------------------------

DENSE = ModelSpec(name="d10", num_layers=10, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
                  num_kv_heads=4, vocab_size=32000)
MOE = DENSE.model_copy(update={"name": "moe10", "moe": MoESpec(num_experts=6, top_k=2, expert_ffn_hidden_size=512)})
DEEP = DENSE.model_copy(update={"name": "d96", "num_layers": 96})
TRAIN = TrainingSpec(seq_len=4096, global_batch=64)


@pytest.mark.parametrize(("model", "train", "layout", "message"), [
    (DENSE, TRAIN, Layout(tp=32), "--tp 32 does not divide the 16 attention heads of d10; use --tp 1, 2, 4, 8 or 16"),
    (DENSE.model_copy(update={"num_attention_heads": 12, "num_kv_heads": 3}), TRAIN, Layout(tp=2),
     "--tp 2 and the 3 KV heads of d10: one must divide the other; use --tp 1, 3, 6 or 12"),
    (DENSE, TrainingSpec(seq_len=1000, global_batch=64), Layout(cp=8),
     "--cp 8: sequence 1000 must split into 2 x cp equal chunks; try --seq-len 1008, or --cp 4"),
    (DENSE, TRAIN, Layout(tp=2, ep=2), "--ep 2 --etp 1: d10 has no experts; both must be 1"),
    (MOE, TRAIN, Layout(ep=4, dp=4), "--ep 4 does not divide the 6 experts of moe10; use --ep 1, 2, 3 or 6"),
    (MOE, TRAIN, Layout(tp=4, etp=2), "--etp 2: expert tensor parallelism is 1 or equal to tp (4)"),
    (DENSE, TrainingSpec(seq_len=4096, global_batch=30), Layout(dp=4),
     "global batch 30 is not a multiple of dp (4) * micro-batch (1) = 4; try --global-batch 28 or 32"),
    (DENSE, TRAIN, Layout(pp=16), "(every stage needs a layer; 16 stages for 10 layers); try --pp 10"),
    (DENSE, TRAIN, Layout(pp=4, vpp=3),
     "--pp 4 --vpp 3: 10 layers cannot be split that way (interleaving needs at least vpp layers on each stage "
     "and the full stages' 3 layers in vpp equal chunks: first 2, last 2 and 2 middle of 3); set --vpp 1, or give "
     "an explicit --pipeline-layout"),
    (DEEP, TRAIN, Layout(pp=8, vpp=5),
     "--pp 8 --vpp 5: 96 layers cannot be split that way (interleaving needs at least vpp layers on each stage "
     "and the full stages' 12 layers in vpp equal chunks: first 12, last 12 and 6 middle of 12); try --vpp 4"),
    (DEEP, TrainingSpec(seq_len=4096, global_batch=6), Layout(pp=4, vpp=2),
     "--vpp 2: interleaving needs micro-batches (6) divisible by pp (4)"),
])
def test_messages_name_the_value_and_the_fix(model, train, layout, message) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        check_layout(model, train, layout)


def test_rules_the_old_checks_disagreed_on() -> None:
    """evaluate and the search now agree: Megatron's default split needs the full stages in equal chunks, so pp 4
    x vpp 2 on 10 layers (3-layer stages) and pp 8 x vpp 5 on 96 (12-layer stages) are refused by both; an
    explicit pipeline layout prices the uneven chunks instead."""
    for model, layout in ((DENSE, Layout(pp=4, vpp=2)), (DEEP, Layout(pp=8, vpp=5))):
        with pytest.raises(InputError, match="cannot be split that way"):
            check_layout(model, TRAIN, layout)
        fixed = {"pp": layout.pp, "vpp": layout.vpp}
        assert len(enumerate_layouts(workload(model), model, TRAIN, layout.pp, SearchConfig(fixed=fixed))) == 0
    ok = enumerate_layouts(workload(DEEP), DEEP, TRAIN, 8, SearchConfig(fixed={"pp": 8, "vpp": 6}))
    assert len(ok) > 0


def test_ep_ranks_rule_matches_the_layout_validator() -> None:
    facts = rules.Facts.of(MOE, TRAIN)
    values = {"tp": 1, "cp": 1, "ep": 6, "etp": 1, "pp": 1, "vpp": 1, "dp": 4, "mbs": 1}
    rule = rules.first_broken(facts, values)
    assert rule is not None and rule.name == "ep_ranks"
    with pytest.raises(ValidationError, match=re.escape(rule.message(facts, values))):
        Layout(ep=6, dp=4)


def test_pp_near_the_layer_count_spreads_the_remainder_over_the_middle_ranks() -> None:
    """ceil(10 / 8) = 2 on 6 middle ranks leaves the first and last -2 layers; every rank takes floor = 1 and the 2
    left go to ranks 1 and 2 (80 layers on 19 ranks: 4, four 5s, 4s).  A user trial: llama3-70b on 76 GB200 (76 =
    4 x 19, so pp 19) was called infeasible, though Megatron runs such a split as its pipeline layout."""
    from placement.cost.pipeline import rank_layer_counts

    check_layout(DENSE, TRAIN, Layout(pp=8))  # no error
    per_rank = rank_layer_counts(10, 8, 1)
    assert sum(per_rank) == 10 and min(per_rank) == 10 // 8 and per_rank.count(2) == 10 % 8
    assert per_rank[0] == per_rank[-1] == 1  # the embedding's and the loss's ranks are not the fuller ones
    eighty = rank_layer_counts(80, 19, 1)
    assert sum(eighty) == 80 and sorted(set(eighty)) == [80 // 19, 80 // 19 + 1] and eighty.count(5) == 80 % 19
    # where the ceil split leaves the ends a layer, it stands (Llama 3's 126 layers on 16: 7, fourteen 8s, 7)
    assert rank_layer_counts(126, 16, 1) == [7] + [8] * 14 + [7]
