"""Pipeline layouts (placement/cost/pipeline.py): Megatron's layout strings, the default split, and the
kinds of pipeline rank the cost model prices.

Virtual stage i runs on pipeline rank i % pp (Megatron-Core PipelineParallelLayerLayout), so the
expected per-rank contents below are worked out by hand from that rule.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from placement.cost.pipeline import (
    MAX_LAYOUT_CHARS,
    POLICY_ACCOUNT,
    POLICY_ACCOUNT_EMBEDDING,
    POLICY_ACCOUNT_LOSS,
    POLICY_DEFAULT,
    POLICY_EXPLICIT,
    StageKinds,
    default_layout,
    expand_layout,
    format_layout,
    parse_layout,
    stage_kinds,
)
from placement.cost.stages import stage_layers

DEEPSEEK_V3 = "Et|(tt|)*30L"
"""61 layers (3 dense first) on pp 8 x vpp 4: the embedding with layer 0, then two layers per virtual stage."""
QWEN3_235B = "E|(t|)*94L"
"""94 layers on pp 32 x vpp 3 = 96 virtual stages: an embedding-only first stage, a loss-only last one."""
MLPERF_DSV3 = "Et*4|(t*4|)*14tmL"
"""MLPerf's DeepSeek-V3 layout, 61 layers + 1 MTP layer on pp 4 x vpp 4."""


def layers_of_rank(stages: list[list[str]], pp: int, rank: int) -> list[int]:
    """Decoder layer indices (layer order = virtual-stage order) held by one pipeline rank."""
    out, index = [], 0
    for i, stage in enumerate(stages):
        for code in stage:
            if code == "t":
                if i % pp == rank:
                    out.append(index)
                index += 1
    return out


def kinds_of(k: StageKinds, j: int = 0) -> list[tuple[int, ...]]:
    """Candidate j's kinds as (rank, num_ranks, dense, moe, mtp, embed, loss), padding dropped."""
    return [(int(k.rank[s, j]), int(k.num_ranks[s, j]), int(k.dense[s, j]), int(k.moe[s, j]), int(k.mtp[s, j]),
             int(k.embed[s, j]), int(k.loss[s, j])) for s in range(k.num_kinds) if k.num_ranks[s, j] > 0]


# -- Megatron's string syntax ------------------------------------------------------------------------------


def test_megatron_docstring_example() -> None:
    # parse_str_to_list's own example: "Ettt|(tt|)*29,m|L" -> [E,t,t,t] + [t,t]*29 + [m], [L]
    assert expand_layout("Ettt|(tt|)*29,m|L") == [["E", "t", "t", "t"]] + [["t", "t"]] * 29 + [["m"], ["L"]]


@pytest.mark.parametrize(("text", "expected"), [
    ("E(tt)*3L", [["E"] + ["t"] * 6 + ["L"]]),
    ("E(t|)*2,tL", [["E", "t"], ["t"], ["t", "L"]]),
    ("(|t)*2,L", [[], ["t"], ["t", "L"]]),
    ("Et*3|t*2L", [["E", "t", "t", "t"], ["t", "t", "L"]]),
    ("E(t*2|)*2L", [["E", "t", "t"], ["t", "t"], ["L"]]),  # x*N inside a group: groups unroll first
    ("Et*12|L", [["E"] + ["t"] * 12, ["L"]]),  # multi-digit counts
])
def test_repeats_unroll_as_megatron_does(text: str, expected: list[list[str]]) -> None:
    assert expand_layout(text) == expected


def test_deepseek_v3_layout_rank_by_rank() -> None:
    stages = parse_layout(DEEPSEEK_V3, pp=8, vpp=4, num_layers=61, mtp_layers=0)
    assert len(stages) == 32
    # rank 0 holds virtual stages 0, 8, 16, 24: E + layer 0, then layers 15-16, 31-32, 47-48
    assert stages[0] == ["E", "t"]
    assert layers_of_rank(stages, 8, 0) == [0, 15, 16, 31, 32, 47, 48]
    assert layers_of_rank(stages, 8, 1) == [1, 2, 17, 18, 33, 34, 49, 50]
    assert layers_of_rank(stages, 8, 7) == [13, 14, 29, 30, 45, 46]
    assert stages[31] == ["L"]  # rank 7's last chunk
    k = stage_kinds(61, 3, 0, np.array([8]), np.array([4]), np.array([POLICY_EXPLICIT]), (DEEPSEEK_V3,))
    assert k.valid.tolist() == [True]
    # (rank, num_ranks, dense, moe, mtp, embed, loss): dense layers are 0, 1, 2
    assert kinds_of(k) == [(0, 1, 1, 6, 0, 1, 0), (1, 1, 2, 6, 0, 0, 0), (2, 5, 0, 8, 0, 0, 0), (7, 1, 0, 6, 0, 0, 1)]
    assert k.max_chunk_layers.tolist() == [2]


def test_qwen3_235b_embedding_and_loss_stages() -> None:
    stages = parse_layout(QWEN3_235B, pp=32, vpp=3, num_layers=94, mtp_layers=0)
    assert len(stages) == 96 and stages[0] == ["E"] and stages[95] == ["L"]
    # rank 0: stages 0 (E), 32, 64; rank 31: stages 31, 63, 95 (L); the others three layers each
    assert layers_of_rank(stages, 32, 0) == [31, 63]
    assert layers_of_rank(stages, 32, 31) == [30, 62]
    assert all(len(layers_of_rank(stages, 32, r)) == 3 for r in range(1, 31))
    k = stage_kinds(94, 0, 0, np.array([32]), np.array([3]), np.array([POLICY_EXPLICIT]), (QWEN3_235B,))
    assert kinds_of(k) == [(0, 1, 0, 2, 0, 1, 0), (1, 30, 0, 3, 0, 0, 0), (31, 1, 0, 2, 0, 0, 1)]
    # the same split is Megatron's --account-for-embedding/loss-in-pipeline-split: 96 units over 96 stages
    assert default_layout(94, 32, 3, account_for_embedding=True, account_for_loss=True) == stages
    policy1 = stage_kinds(94, 0, 0, np.array([32]), np.array([3]), np.array([1]))
    assert kinds_of(policy1) == kinds_of(k)


def test_mlperf_deepseek_v3_layout_with_mtp() -> None:
    stages = parse_layout(MLPERF_DSV3, pp=4, vpp=4, num_layers=61, mtp_layers=1)
    assert len(stages) == 16 and stages[0] == ["E", "t", "t", "t", "t"] and stages[15] == ["t", "m", "L"]
    assert layers_of_rank(stages, 4, 0) == [0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51]
    k = stage_kinds(61, 3, 1, np.array([4]), np.array([4]), np.array([POLICY_EXPLICIT]), (MLPERF_DSV3,))
    assert kinds_of(k) == [(0, 1, 3, 13, 0, 1, 0), (1, 2, 0, 16, 0, 0, 0), (3, 1, 0, 13, 1, 0, 1)]
    assert k.max_chunk_layers.tolist() == [4]


def test_format_round_trips() -> None:
    for text, pp, vpp, layers, mtp in ((DEEPSEEK_V3, 8, 4, 61, 0), (QWEN3_235B, 32, 3, 94, 0),
                                       (MLPERF_DSV3, 4, 4, 61, 1), ("Ettt|(tt|)*29,m|L", 16, 2, 61, 1)):
        stages = parse_layout(text, pp, vpp, layers, mtp)
        assert parse_layout(format_layout(stages), pp, vpp, layers, mtp) == stages
    assert format_layout(parse_layout(DEEPSEEK_V3, 8, 4, 61, 0)) == "Et|(t*2|)*30L"
    assert format_layout(default_layout(94, 32, 3, True, True)) == QWEN3_235B


# -- bad strings ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "pp", "vpp", "layers", "mtp", "message"), [
    ("Et|(tt|)*29L", 8, 4, 59, 0, "has 31 virtual stages, expected pp (8) * vpp (4) = 32"),
    ("Et|(tt|)*30L", 8, 2, 61, 0, "has 32 virtual stages, expected pp (8) * vpp (2) = 16; with pp 8 it is vpp 4"),
    ("Et|(tt|)*30L", 8, 4, 60, 0, "holds 61 decoder layers 't', expected num_layers 60"),
    ("Et|(tt|)*30L", 8, 4, 61, 1, "holds 0 MTP layers 'm', expected 1"),
    ("t|(tt|)*30L", 8, 4, 61, 0, "holds 0 embedding 'E', expected exactly 1"),
    ("EEt|(tt|)*30L", 8, 4, 61, 0, "holds 2 embedding 'E', expected exactly 1"),
    ("Et|(tt|)*30", 8, 4, 61, 0, "holds 0 loss 'L', expected exactly 1"),
    ("tE|(tt|)*30L", 8, 4, 61, 0, "starts with 't': the first layer must be the embedding E"),
    ("Et|(tt|)*30Lt", 8, 4, 62, 0, "ends with 't': the last layer must be the loss L"),
    ("Et|(tt|)*29,mt|L", 8, 4, 60, 1, "decoder layers 't' must all come before the MTP layers 'm'"),
    ("Et|(tx|)*30L", 8, 4, 61, 0, "virtual stage 1 ('tx') holds ['x'], not a layer code"),
    ("Et| (tt|)*30L", 8, 4, 61, 0, "virtual stage 1 (' tt') holds [' '], not a layer code"),
])
def test_bad_layouts_name_the_counts(text: str, pp: int, vpp: int, layers: int, mtp: int, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_layout(text, pp, vpp, layers, mtp)


def test_mtp_outside_a_ranks_last_chunk_is_refused() -> None:
    # 12 stages on pp 4 x vpp 3: stage 7 is chunk 1 of rank 3, not its last chunk (empty stages follow L)
    with pytest.raises(ValueError, match=re.escape(
            "virtual stage 7 holds MTP layers but is chunk 1 of the 3 on pipeline rank 3; Megatron puts MTP in a "
            "rank's last chunk (virtual stages 8 to 11)")):
        parse_layout("Et|t|t|t|t|t|t|m|L|||", 4, 3, 7, 1)


def test_mtp_spread_over_stages_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("the 2 MTP layers are spread over virtual stages [2, 3]")):
        parse_layout("Et|t|m|mL", 4, 1, 2, 2)


def test_runaway_repeat_is_refused_before_it_is_built() -> None:
    with pytest.raises(ValueError, match=re.escape(f"past the {MAX_LAYOUT_CHARS} a layout may hold")):
        expand_layout("E(t|)*999999999999L")
    with pytest.raises(ValueError, match="past the"):
        expand_layout("Et*99999999999|L")


def test_megatron_accepts_empty_stages_and_so_do_we() -> None:
    assert parse_layout("Et||tL", 3, 1, 2, 0) == [["E", "t"], [], ["t", "L"]]


# -- the default split -----------------------------------------------------------------------------------


def test_default_layout_matches_stage_layers() -> None:
    """Per-rank layer counts and validity equal placement/cost/stages.py's, so today's numbers do not move."""
    for layers in range(1, 41):
        for pp in range(1, 17):
            for vpp in range(1, 7):
                st = stage_layers(layers, np.array([pp]), np.array([vpp]))
                try:
                    stages = default_layout(layers, pp, vpp)
                except ValueError:
                    assert not st.valid[0], (layers, pp, vpp)
                    continue
                assert st.valid[0], (layers, pp, vpp)
                per_rank = [len(layers_of_rank(stages, pp, r)) for r in range(pp)]
                if pp == 1:
                    assert per_rank == [layers]
                else:  # the ends as stages.py says, the fullest middle its `middle`, the middles a layer apart
                    middles = per_rank[1:-1] or [max(per_rank)]
                    assert (per_rank[0], max(middles), per_rank[-1]) == (
                        int(st.first[0]), int(st.middle[0]), int(st.last[0])), (layers, pp, vpp)
                    assert max(middles) - min(middles) <= 1 and sum(per_rank) == layers
                    assert (max(per_rank), min(per_rank)) == (int(st.fullest[0]), int(st.lightest[0]))
                chunks = [s.count("t") for s in stages]
                assert min(chunks) >= 1 and sum(chunks) == layers
                for r in range(pp):  # a rank's chunks differ by at most one layer
                    mine = chunks[r::pp]
                    assert max(mine) - min(mine) <= 1


def test_default_split_with_accounting_is_megatrons_when_it_divides() -> None:
    """Megatron's get_num_layers_to_build: (L + E + L) / pp per rank, / vpp per chunk, minus one for the
    embedding on the first virtual stage and one for the loss on the last."""
    for layers in range(1, 64):
        for pp in (2, 4, 8):
            for vpp in (1, 2, 3):
                for e, lo in ((True, False), (False, True), (True, True)):
                    units = layers + e + lo
                    if units % pp or (units // pp) % vpp:
                        continue
                    per_chunk = units // pp // vpp
                    stages = default_layout(layers, pp, vpp, e, lo)
                    expected = [per_chunk] * (pp * vpp)
                    expected[0] -= e
                    expected[-1] -= lo
                    assert [s.count("t") for s in stages] == expected
                    assert stages[0][0] == "E" and stages[-1][-1] == "L"


def test_default_layout_message_shows_the_split() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "94 layers cannot be split over pp 32 x vpp 3 = 96 virtual stages with one on each: the pipeline ranks "
            "would hold 2/3/2 (first/middle/last); each needs at least vpp (3)")):
        default_layout(94, 32, 3)


def test_default_layout_puts_mtp_before_the_loss() -> None:
    stages = default_layout(61, 4, 1, mtp_layers=1)
    assert stages[-1][-2:] == ["m", "L"]
    assert parse_layout(format_layout(stages), 4, 1, 61, 1) == stages


# -- stage kinds, vectorized ------------------------------------------------------------------------------


def test_stage_kinds_gathers_per_candidate() -> None:
    layouts = (DEEPSEEK_V3, "Et*4|(t*4|)*14tL")
    rng = np.random.default_rng(0)
    pp = rng.choice([1, 2, 4, 8, 16], size=400)
    vpp = rng.choice([1, 2, 3, 4], size=400)
    policy = rng.choice([POLICY_DEFAULT, POLICY_ACCOUNT, POLICY_ACCOUNT_EMBEDDING, POLICY_ACCOUNT_LOSS, POLICY_EXPLICIT,
                         POLICY_EXPLICIT + 1], size=400)
    k = stage_kinds(61, 3, 0, pp, vpp, policy, layouts)
    for j in range(400):
        p, v, pol = int(pp[j]), int(vpp[j]), int(policy[j])
        alone = stage_kinds(61, 3, 0, np.array([p]), np.array([v]), np.array([pol]), layouts)
        assert bool(k.valid[j]) == bool(alone.valid[0])
        assert kinds_of(k, j) == kinds_of(alone)
        if k.valid[j]:
            assert sum(n for _, n, *_ in kinds_of(k, j)) == p  # every rank has a kind
            assert sum(n * (dense + moe) for _, n, dense, moe, *_ in kinds_of(k, j)) == 61
        else:
            assert not k.num_ranks[:, j].any()


def test_stage_kinds_validity() -> None:
    pp = np.array([8, 8, 8, 4, 16, 2])
    vpp = np.array([4, 2, 1, 4, 1, 1])
    e = POLICY_EXPLICIT
    policy = np.array([e, e, 0, e, 0, 0])
    k = stage_kinds(61, 3, 0, pp, vpp, policy, (DEEPSEEK_V3,))
    # the layout has 32 virtual stages: only pp x vpp = 32 fits; 61 layers split over 16 ranks (4 each) fine
    assert k.valid.tolist() == [True, False, True, False, True, True]


def test_stage_kinds_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=re.escape("holds 61 decoder layers 't', expected num_layers 60")):
        stage_kinds(60, 0, 0, np.array([8]), np.array([4]), np.array([POLICY_EXPLICIT]), (DEEPSEEK_V3,))
    with pytest.raises(ValueError, match=re.escape(f"pipeline policy codes run from 0 to {POLICY_EXPLICIT - 1} (0 "
                                                   f"explicit layouts)")):
        stage_kinds(60, 0, 0, np.array([8]), np.array([4]), np.array([POLICY_EXPLICIT]))


def test_stage_kinds_default_matches_stage_layers_dense_and_moe_counts() -> None:
    """For the default split the kinds carry the same per-rank layer counts as stage_layers."""
    pp = np.array([1, 2, 3, 4, 8, 8, 16])
    vpp = np.array([1, 1, 1, 2, 1, 2, 1])
    k = stage_kinds(61, 3, 0, pp, vpp, np.zeros_like(pp))
    st = stage_layers(61, pp, vpp)
    for j in range(len(pp)):
        kinds = kinds_of(k, j)
        assert kinds[0][2] + kinds[0][3] == st.first[j]  # rank 0
        last = max(kinds, key=lambda x: x[0])
        assert last[2] + last[3] == (st.last[j] if pp[j] > 1 else st.first[j])
        assert kinds[0][5] == 1 and last[6] == 1
    # 61 layers on pp 8 x vpp 3: ranks of 6/8/7 layers, chunks of 2/3/3 at most
    assert k.max_chunk_layers.tolist() == [61, 31, 21, 8, 8, 4, 4]
