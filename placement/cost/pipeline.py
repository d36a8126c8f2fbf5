"""Pipeline layouts: which layers each virtual pipeline stage holds, written as Megatron-Core does.

A layout is a list of virtual stages, each a list of layer codes:

    E  embedding            t  decoder (transformer) layer
    m  multi-token-prediction (MTP) layer      L  loss (final norm, LM head, cross-entropy)

Virtual stage i runs on pipeline rank i % pp as that rank's model chunk i // pp, and layer order is
virtual-stage order (Megatron-Core `PipelineParallelLayerLayout`: `layout[vpp_rank * pp + pp_rank]`,
megatron/core/transformer/pipeline_parallel_layer_layout.py).  The text form is Megatron's
`--pipeline-model-parallel-layout`: `|` between virtual stages, `(...)*N` and `x*N` repeats, commas
ignored; e.g. DeepSeek-V3's `Et|(tt|)*30L` is 32 virtual stages (pp 8 x vpp 4).

`default_layout` is the split placement prices when no layout is given; `stage_kinds` reduces a
layout to the distinct kinds of pipeline rank, vectorized over candidates, for the cost model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import numpy as np

from placement.cost.stages import balanced_ranks

EMBED: Final = "E"
DECODER: Final = "t"
MTP: Final = "m"
LOSS: Final = "L"
LAYER_CODES: Final = (EMBED, DECODER, MTP, LOSS)

MAX_LAYOUT_CHARS: Final = 1 << 20
"""Longest expanded layout accepted (1,048,576 layer codes; real layouts hold a few hundred): a longer
expansion is a typo such as `(t|)*99999999`, refused before it is built."""

POLICY_DEFAULT: Final = 0
"""`stage_kinds` policy code: placement's default split (`default_layout` with no flags)."""
POLICY_ACCOUNT: Final = 1
"""`stage_kinds` policy code: embedding and loss each count as one layer in the split
(Megatron's --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split)."""
POLICY_ACCOUNT_EMBEDDING: Final = 2
"""`stage_kinds` policy code: only the embedding counts as a layer (--account-for-embedding-in-pipeline-split)."""
POLICY_ACCOUNT_LOSS: Final = 3
"""`stage_kinds` policy code: only the loss counts as a layer (--account-for-loss-in-pipeline-split)."""
POLICY_EXPLICIT: Final = 4
"""`stage_kinds` policy code 4 + i: the explicit layout string layouts[i]."""
_ACCOUNTED: Final = {POLICY_DEFAULT: (False, False), POLICY_ACCOUNT: (True, True),
                     POLICY_ACCOUNT_EMBEDDING: (True, False), POLICY_ACCOUNT_LOSS: (False, True)}
"""Policy code -> (embedding accounted, loss accounted) of the default split."""


def accounted_units(policy: int) -> int:
    """Units a default-split policy adds to the layers: one each for an accounted embedding and loss."""
    return sum(_ACCOUNTED[policy])


def split_policy(account_for_embedding: bool, account_for_loss: bool) -> int:
    """The policy code of the default split with these accounting flags."""
    return next(code for code, flags in _ACCOUNTED.items() if flags == (account_for_embedding, account_for_loss))

# Megatron's parse_str_to_list unrolls `(...)*N` first, then single-character `x*N`; one pass each, so
# parentheses do not nest, and the order matters: `(t*4|)*14` must lose its parentheses before `)*14`
# could be read as the character `)` repeated.
_GROUP_REPEAT = re.compile(r"\(([^)]+)\)\*(\d+)")
_CHAR_REPEAT = re.compile(r"(.)\*(\d+)")


def _unroll(pattern: re.Pattern[str], text: str, source: str) -> str:
    grown = 0

    def repeat(match: re.Match[str]) -> str:
        nonlocal grown
        body, count = match.group(1), int(match.group(2))
        grown += len(body) * count - len(match.group(0))
        if len(text) + grown > MAX_LAYOUT_CHARS:
            raise ValueError(
                f"pipeline layout {source!r}: {match.group(0)!r} expands to {len(body)} x {count} = "
                f"{len(body) * count} characters, past the {MAX_LAYOUT_CHARS} a layout may hold; check the repeat count"
            )
        return body * count

    return pattern.sub(repeat, text)


def expand_layout(text: str) -> list[list[str]]:
    """The virtual stages of a layout string, repeats unrolled exactly as Megatron's parse_str_to_list.

    >>> expand_layout("Et*2|(t|)*2,L")
    [['E', 't', 't'], ['t'], ['t'], ['L']]
    """
    flat = text.replace(",", "")  # commas are cosmetic
    flat = _unroll(_GROUP_REPEAT, flat, text)
    flat = _unroll(_CHAR_REPEAT, flat, text)
    stages = [list(stage) for stage in flat.split("|")]
    for i, stage in enumerate(stages):
        bad = sorted(set(stage) - set(LAYER_CODES))
        if bad:
            raise ValueError(
                f"pipeline layout {text!r}: virtual stage {i} ({''.join(stage)!r}) holds {bad}, not a layer code; "
                f"use E (embedding), t (decoder layer), m (MTP layer), L (loss), | between stages, (...)*N or x*N"
            )
    return stages


def check_layout_text(text: str, num_layers: int, mtp_layers: int) -> None:
    """ValueError unless the layout string parses and holds the model's layers (whatever pp and vpp)."""
    _check_contents(expand_layout(text), num_layers, mtp_layers, text)


def _check_contents(stages: list[list[str]], num_layers: int, mtp_layers: int, text: str) -> None:
    """Megatron's validate_layer_layout, the parts that do not depend on pp: one E first, one L last,
    every decoder and MTP layer placed once, decoder layers before MTP layers, MTP in one stage."""
    flat = [code for stage in stages for code in stage]
    counts = {code: flat.count(code) for code in LAYER_CODES}
    for code, name in ((EMBED, "embedding"), (LOSS, "loss")):
        if counts[code] != 1:
            raise ValueError(f"pipeline layout {text!r} holds {counts[code]} {name} {code!r}, expected exactly 1")
    if flat[0] != EMBED:
        raise ValueError(f"pipeline layout {text!r} starts with {flat[0]!r}: the first layer must be the embedding E")
    if flat[-1] != LOSS:
        raise ValueError(f"pipeline layout {text!r} ends with {flat[-1]!r}: the last layer must be the loss L")
    if counts[DECODER] != num_layers:
        raise ValueError(
            f"pipeline layout {text!r} holds {counts[DECODER]} decoder layers 't', expected num_layers {num_layers}"
        )
    if counts[MTP] != mtp_layers:
        raise ValueError(f"pipeline layout {text!r} holds {counts[MTP]} MTP layers 'm', expected {mtp_layers}")
    if counts[MTP]:
        if DECODER in flat[flat.index(MTP):]:
            raise ValueError(f"pipeline layout {text!r}: decoder layers 't' must all come before the MTP layers 'm'")
        holding = [i for i, stage in enumerate(stages) if MTP in stage]
        if len(holding) > 1:
            raise ValueError(
                f"pipeline layout {text!r}: the {counts[MTP]} MTP layers are spread over virtual stages {holding}; "
                f"Megatron needs them all in one virtual stage"
            )


def _check_placement(stages: list[list[str]], pp: int, vpp: int, text: str) -> None:
    """The parts that depend on pp and vpp: pp x vpp stages, MTP in a rank's last model chunk."""
    if len(stages) != pp * vpp:
        raise ValueError(
            f"pipeline layout {text!r} has {len(stages)} virtual stages, expected pp ({pp}) * vpp ({vpp}) = "
            f"{pp * vpp}" + (f"; with pp {pp} it is vpp {len(stages) // pp}" if len(stages) % pp == 0 else "")
        )
    for i, stage in enumerate(stages[: pp * (vpp - 1)]):
        if MTP in stage:
            raise ValueError(
                f"pipeline layout {text!r}: virtual stage {i} holds MTP layers but is chunk {i // pp} of the {vpp} on "
                f"pipeline rank {i % pp}; Megatron puts MTP in a rank's last chunk (virtual stages {pp * (vpp - 1)} "
                f"to {pp * vpp - 1})"
            )


def parse_layout(text: str, pp: int, vpp: int, num_layers: int, mtp_layers: int) -> list[list[str]]:
    """The virtual stages of Megatron layout `text`, checked as Megatron checks it.

    Raises ValueError naming the count found and the count expected.  What Megatron requires
    (PipelineParallelLayerLayout.__init__ and validate_layer_layout): a stage count divisible by pp (here:
    exactly pp x vpp); exactly one E and it is the first layer in layer order, exactly one L and it is the
    last (so E need not open virtual stage 0 if empty stages precede it, and empty stages may follow L);
    exactly num_layers t and mtp_layers m; no t after the first m; all m in one virtual stage, which is
    the last model chunk of its rank.  Empty virtual stages are accepted, as Megatron accepts them.

    >>> [len(s) for s in parse_layout("Et|(tt|)*30L", pp=8, vpp=4, num_layers=61, mtp_layers=0)][:3]
    [2, 2, 2]
    """
    stages = expand_layout(text)
    _check_contents(stages, num_layers, mtp_layers, text)
    _check_placement(stages, pp, vpp, text)
    return stages


def format_layout(stages: list[list[str]]) -> str:
    """A layout string for `stages` in Megatron's syntax: runs of one code as x*N, runs of equal virtual
    stages as (...|)*N; parse_layout(format_layout(s), ...) == s.

    >>> format_layout([["E", "t"], ["t", "t"], ["t", "t"], ["L"]])
    'Et|(t*2|)*2L'
    """
    texts = [re.sub(r"(.)\1+", lambda m: f"{m.group(1)}*{len(m.group(0))}", "".join(s)) for s in stages]
    body, parts, i = texts[:-1], [], 0  # every stage but the last is followed by |
    while i < len(body):
        j = i
        while j < len(body) and body[j] == body[i]:
            j += 1
        run = j - i
        parts.append(f"({body[i]}|)*{run}" if run > 1 and body[i] else (body[i] + "|") * run)
        i = j
    return "".join(parts) + texts[-1]


# --- the default split -----------------------------------------------------------------------------------


def rank_units(units: int, pp: int) -> list[int]:
    """Units (layers) per pipeline rank in placement's default split (placement/cost/stages.py stage_layers):
    even when pp divides the units; otherwise every middle rank holds ceil(units / pp) and the first and
    last share the rest, the first taking the smaller half (Llama 3 §3.3.2: first and last stages carry
    fewer layers), or `balanced_ranks` where ceil would leave them less than a unit each.  Counts below 1 mean the
    split is impossible."""
    if pp == 1:
        return [units]
    if units % pp == 0:
        return [units // pp] * pp
    balanced = balanced_ranks(units, pp)
    if balanced is not None:
        return balanced
    per = -(-units // pp)
    rest = units - (pp - 2) * per
    return [rest // 2] + [per] * (pp - 2) + [rest - rest // 2]


def _chunk_units(units: int, vpp: int) -> list[int]:
    """A rank's units over its vpp model chunks: ceil on the first units % vpp chunks, floor on the rest."""
    return [units // vpp + (c < units % vpp) for c in range(vpp)]


def default_stage_units(num_layers: int, pp: int, vpp: int, account_for_embedding: bool = False,
                        account_for_loss: bool = False) -> list[int]:
    """Split units per virtual stage (virtual stage i = chunk i // pp of rank i % pp): the layers, plus
    one each for the embedding and loss when they are accounted for."""
    units = num_layers + int(account_for_embedding) + int(account_for_loss)
    chunks = [_chunk_units(n, vpp) for n in rank_units(units, pp)]
    return [chunks[i % pp][i // pp] for i in range(pp * vpp)]


def _describe_ranks(per_rank: list[int]) -> str:
    if len(per_rank) <= 3:
        return "/".join(map(str, per_rank))
    return f"{per_rank[0]}/{per_rank[1]}/{per_rank[-1]} (first/middle/last)"


def default_layout(num_layers: int, pp: int, vpp: int, account_for_embedding: bool = False,
                   account_for_loss: bool = False, mtp_layers: int = 0) -> list[list[str]]:
    """The layout placement prices when none is given.

    Layers go to pipeline ranks as `rank_units` says (Megatron's even split when pp divides them), and a
    rank's layers to its vpp model chunks ceil/floor (Megatron's own default needs vpp to divide them; the
    uneven chunks are expressible with its --pipeline-model-parallel-layout).  With `account_for_embedding`
    (`account_for_loss`) the embedding (loss) counts as one layer of the first (last) virtual stage, as
    Megatron's --account-for-embedding/loss-in-pipeline-split do in get_num_layers_to_build.  MTP layers
    sit in the last virtual stage before the loss, outside the split, where Megatron builds them by default.
    Every virtual stage must get a unit (a layer, or the accounted embedding or loss); else ValueError.

    >>> default_layout(10, pp=4, vpp=1)
    [['E', 't', 't'], ['t', 't', 't'], ['t', 't', 't'], ['t', 't', 'L']]
    """
    units = num_layers + int(account_for_embedding) + int(account_for_loss)
    if pp > units or min(rank_units(units, pp)) < vpp or max(rank_units(units, pp)) % vpp:
        what = f"{num_layers} layers" + (f" + {units - num_layers} (embedding, loss) = {units} units"
                                         if units != num_layers else "")
        held = _describe_ranks(rank_units(units, pp)) if pp <= units else "less than one each"
        raise ValueError(
            f"{what} cannot be split over pp {pp} x vpp {vpp} = {pp * vpp} virtual stages with one on each: "
            f"the pipeline ranks would hold {held}; each needs at least vpp ({vpp}) and the fullest must split "
            f"into vpp equal chunks (Megatron's default split; an explicit layout can be uneven)"
        )
    stages: list[list[str]] = []
    last = pp * vpp - 1
    for i, n in enumerate(default_stage_units(num_layers, pp, vpp, account_for_embedding, account_for_loss)):
        embed, loss = i == 0, i == last
        decoders = n - (embed and account_for_embedding) - (loss and account_for_loss)
        stages.append([EMBED] * embed + [DECODER] * decoders + [MTP] * (mtp_layers * loss) + [LOSS] * loss)
    return stages


# --- kinds of pipeline rank, vectorized over candidates ---------------------------------------------------


@dataclass(frozen=True)
class StageKinds:
    """The distinct kinds of pipeline rank of K candidates, as (S, K) arrays.

    A kind is what one pipeline rank holds over all its model chunks.  Kinds are ordered by the lowest
    rank holding them (kind 0 is rank 0's); candidates with fewer than S kinds are padded with empty
    kinds (all counts 0, num_ranks 0, rank 0), which cost nothing.
    """

    dense: np.ndarray
    """Dense decoder layers on the rank: a model's first num_dense_layers layers, in layer order, are dense."""
    moe: np.ndarray
    """MoE decoder layers on the rank (the layers after the dense ones)."""
    mtp: np.ndarray
    """MTP layers on the rank."""
    embed: np.ndarray
    """1 where the rank holds the embedding."""
    loss: np.ndarray
    """1 where the rank holds the loss (final norm, LM head, cross-entropy)."""
    rank: np.ndarray
    """Lowest pipeline rank of that kind: under 1F1B it keeps pp - rank micro-batches in flight."""
    num_ranks: np.ndarray
    """Pipeline ranks of that kind (0 for padding); sums to pp over the kinds of a valid candidate."""
    max_chunk_layers: np.ndarray
    """(K,) decoder and MTP layers in the fullest virtual stage.  With uneven chunks interleaved 1F1B's
    warm-up and cool-down run at this chunk's pace; the step model does not use it yet (its bubble runs at
    the rank's layers / vpp), so an uneven explicit layout's bubble is priced slightly low."""
    valid: np.ndarray
    """(K,) False where the split is impossible (a default split leaves a virtual stage without a layer, or
    an explicit layout does not have pp x vpp virtual stages or puts MTP outside a rank's last chunk);
    the kinds of an invalid candidate are all padding."""

    @property
    def num_kinds(self) -> int:
        return int(self.dense.shape[0])


_KIND_FIELDS: Final = ("dense", "moe", "mtp", "embed", "loss")


def _rank_table(stages: list[list[str]], pp: int, num_dense_layers: int) -> np.ndarray:
    """(pp, 5) counts per pipeline rank: dense, moe, mtp, embed, loss."""
    table = np.zeros((pp, len(_KIND_FIELDS)), dtype=np.int64)
    first = 0  # index of the stage's first decoder layer in layer order
    for i, stage in enumerate(stages):
        n = stage.count(DECODER)
        dense = min(max(num_dense_layers - first, 0), n)
        table[i % pp] += (dense, n - dense, stage.count(MTP), stage.count(EMBED), stage.count(LOSS))
        first += n
    return table


def _kinds(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of a rank table, ordered by the lowest rank holding each: rows, ranks, counts."""
    rows, first_rank, counts = np.unique(table, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first_rank, kind="stable")
    return rows[order], first_rank[order], counts[order]


def _stages_for(policy: int, pp: int, vpp: int, num_layers: int, mtp_layers: int,
                explicit: list[tuple[str, list[list[str]]]]) -> list[list[str]] | None:
    """The virtual stages of one (pp, vpp, policy), or None where that split is impossible."""
    try:
        if policy in _ACCOUNTED:
            return default_layout(num_layers, pp, vpp, *_ACCOUNTED[policy], mtp_layers)
        text, stages = explicit[policy - POLICY_EXPLICIT]
        _check_placement(stages, pp, vpp, text)
        return stages
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _kinds_of_split(policy: int, pp: int, vpp: int, num_layers: int, num_dense_layers: int, mtp_layers: int,
                    layouts: tuple[str, ...], bidirectional: bool = False):
    """(kinds, fullest chunk) of one (pp, vpp, policy) split, memoized: a search prices the same few splits
    for hundreds of thousands of candidates, and twice (cost.step, search._selective_candidates)."""
    explicit = [(text, expand_layout(text)) for text in layouts]
    stages = _stages_for(policy, pp, vpp, num_layers, mtp_layers, explicit)
    if stages is None:
        return None, 0
    table = _rank_table(stages, pp, num_dense_layers)
    if bidirectional:  # DualPipe: rank i also holds the other copy's stage pp - 1 - i
        table = table + table[::-1]
    return _kinds(table), max(st.count(DECODER) + st.count(MTP) for st in stages)


def stage_kinds(num_layers: int, num_dense_layers: int, mtp_layers: int, pp: np.ndarray, vpp: np.ndarray,
                policy: np.ndarray, layouts: tuple[str, ...] = (), bidirectional: bool = False) -> StageKinds:
    """The kinds of pipeline rank for K candidates (pp, vpp, policy), vectorized.

    `bidirectional` (DualPipe): rank i holds stage i of one copy of the model and stage pp - 1 - i of the
    other, and micro-batches enter from both ends (DeepSeek-V3 §3.2.1; Table 2: 2x parameters).  A rank's
    counts are then the sum of both stages; half the micro-batches pass each, which the step model prices
    as half the counts per micro-batch.

    policy 0 is `default_layout`, 1 the default with embedding and loss accounted for, 2 + i the explicit
    layout string layouts[i].  A malformed layout string, or one whose layer counts do not match the
    model, raises ValueError (it is bad input, whatever the candidate); a candidate whose pp x vpp does
    not fit a layout is only marked invalid.  Each distinct (pp, vpp, policy) is laid out once and the
    result gathered to the candidates, so the cost is O(K) plus the few distinct splits.
    """
    pp = np.asarray(pp, dtype=np.int64)
    vpp = np.asarray(vpp, dtype=np.int64)
    policy = np.asarray(policy, dtype=np.int64)
    pp, vpp, policy = np.broadcast_arrays(pp, vpp, policy)
    if pp.size and (pp.min() < 1 or vpp.min() < 1):
        raise ValueError(f"pp and vpp must be at least 1; the smallest given are pp {int(pp.min())} and vpp "
                         f"{int(vpp.min())}")
    if policy.size and (policy.min() < 0 or policy.max() >= POLICY_EXPLICIT + len(layouts)):
        raise ValueError(
            f"pipeline policy codes run from 0 to {POLICY_EXPLICIT + len(layouts) - 1} ({len(layouts)} explicit "
            f"layouts), got {int(policy.min())}..{int(policy.max())}"
        )
    explicit = []
    for text in layouts:
        stages = expand_layout(text)
        _check_contents(stages, num_layers, mtp_layers, text)
        explicit.append((text, stages))

    # one key per candidate; the distinct keys are few (divisors of the GPU count x vpp options x policies)
    vpp_span = int(vpp.max(initial=0)) + 1
    policy_span = POLICY_EXPLICIT + len(layouts)
    key = ((pp * vpp_span + vpp) * policy_span + policy).ravel()
    distinct, inverse = _distinct(key)

    per_key, fullest = [], []
    for k in distinct.tolist():
        p, v, pol = k // (vpp_span * policy_span), (k // policy_span) % vpp_span, k % policy_span
        kinds, most = _kinds_of_split(pol, p, v, num_layers, num_dense_layers, mtp_layers, tuple(layouts),
                                      bidirectional)
        per_key.append(kinds)
        fullest.append(most)

    num_kinds = max((len(kinds[1]) for kinds in per_key if kinds is not None), default=1)
    table = np.zeros((len(_KIND_FIELDS) + 2, num_kinds, len(distinct)), dtype=np.int64)
    ok = np.zeros(len(distinct), dtype=bool)
    for j, kinds in enumerate(per_key):
        if kinds is None:
            continue
        rows, ranks, counts = kinds
        s = len(ranks)
        table[: len(_KIND_FIELDS), :s, j] = rows.T
        table[len(_KIND_FIELDS), :s, j] = ranks
        table[len(_KIND_FIELDS) + 1, :s, j] = counts
        ok[j] = True
    fields = {name: np.take(table[f], inverse, axis=1)
              for f, name in enumerate((*_KIND_FIELDS, "rank", "num_ranks"))}
    return StageKinds(**fields, max_chunk_layers=np.array(fullest, dtype=np.int64)[inverse], valid=ok[inverse])


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(key, return_inverse=True) for non-negative keys; through a lookup table when the keys
    span a small range (30x faster than sorting a million keys)."""
    if key.size == 0 or int(key.max()) > 4 * key.size + (1 << 16):
        return np.unique(key, return_inverse=True)
    seen = np.zeros(int(key.max()) + 1, dtype=bool)
    seen[key] = True
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]


def rank_layer_counts(num_layers: int, pp: int, vpp: int, recipe_layout: str | None = None,
                      account_for_embedding: bool = False, account_for_loss: bool = False,
                      mtp_layers: int = 0) -> list[int]:
    """Decoder layers on each pipeline rank (over all its model chunks) of one split: the recipe's explicit
    layout, or the default split (with the embedding and/or the loss accounted for as a layer)."""
    if recipe_layout is not None:
        stages = parse_layout(recipe_layout, pp, vpp, num_layers, mtp_layers)
    else:
        stages = default_layout(num_layers, pp, vpp, account_for_embedding, account_for_loss, mtp_layers)
    counts = [0] * pp
    for i, stage in enumerate(stages):
        counts[i % pp] += stage.count(DECODER)
    return counts
