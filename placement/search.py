"""Exact search over the layout space, vectorized: enumerate every valid layout as numpy arrays, price
them all in one cost-model pass, mask the ones that do not fit, sort.

The space is small enough to enumerate (divisors of the GPU count that respect heads, layers, experts
and the batch), so no heuristic is needed: the best layout found is the best the cost model knows.
Ties are broken by the layout fields, so the ranking is deterministic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Final

import numpy as np

from placement.cost import rules
from placement.cost.batch import RECOMPUTE_CODES, LayoutBatch, concat_batches, mask_modules, module_mask, pipe_policy_of
from placement.cost.constants import MEMORY_RESERVE_BYTES, GiB
from placement.cost.pipeline import accounted_units, check_layout_text
from placement.cost.stages import stage_layers
from placement.cost.step import (
    NOT_RUN_S,
    Estimates,
    RecipeChoices,
    concat_estimates,
    estimate,
    memory_floor,
    step_lower_bound,
    take_estimates,
)
from placement.errors import InputError, PlacementInfeasible
from placement.frameworks import Capability
from placement.specs import AttentionKernel, ModelSpec, Recompute, TrainingSpec
from placement.specs.recipe import Recipe, RecomputeModule
from placement.topology import MAX_GPUS, Topology
from placement.workload import Workload, workload


@dataclass(frozen=True)
class FixNames:
    """How an infeasible message spells each fix: `plan`'s flags by default; a sweep names its file's fields.
    Each is a format string taking the value."""

    gpus: str | None = "--gpus {}"
    """None: the GPU count is not the caller's to change (a real allocation's is its host list's)."""
    global_batch: str = "--global-batch"
    seq_len: str = "--seq-len {}"
    headroom: str = "--memory-headroom-gib {}"
    headroom_source: str = "--memory-headroom-gib"
    """What set the headroom the capacity is net of."""
    recompute: str = "--recompute full"
    zero: str = "--zero 3"
    micro_batch: str = "--mbs {}"
    framework: str = "dropping --framework {}"
    whole_domains: bool = False
    """A GPU count suggested is whole scale-up domains (a sweep design buys whole NVL72 racks), not whole nodes."""


SWEEP_FIX_NAMES: Final = FixNames(gpus="`gpus: {}` in the design", global_batch="a workload `global_batch`",
                                  seq_len="`seq_len: {}` in the workload",
                                  headroom="`memory_headroom_gib: {}` in the workload",
                                  headroom_source="the workload's memory_headroom_gib", whole_domains=True)
"""A sweep cell's fixes, named as the sweep file's fields (a sweep takes no --gpus or --memory-headroom-gib)."""
SUGGEST_TRIES: Final = 4
"""GPU counts (doubling) searched before a memory message suggests one: it names a count only where the search
finds a layout that fits, never a guess."""


@dataclass(frozen=True)
class SearchConfig:
    top_k: int = 5
    recompute: tuple[Recompute, ...] = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
    zero_stages: tuple[int, ...] = (1, 2, 3)
    """ZeRO-0 (plain DDP) is left out by default: in this cost model ZeRO-1 moves the same bytes
    (reduce-scatter + all-gather = all-reduce) with less memory and a smaller optimizer step, so it
    is never worse.  Pin it with zero_stages or `fixed` to price it (`default_zero_stages` keeps it for a framework
    without ZeRO-1)."""
    max_micro_batch_size: int | None = None
    """Largest micro-batch tried; None: every divisor of the local batch (global batch / dp)."""
    max_tp: int | None = None
    """Largest TP degree tried; None: every one the layout rules allow (divisors of the heads)."""
    max_cp: int | None = None
    """Largest CP degree tried; None: every one the layout rules allow (2 x cp divides the sequence)."""
    max_vpp: int | None = None
    """Most model chunks per pipeline rank tried; None: up to the layers of a stage, as the rules allow."""
    min_vpp: int = 1
    """Fewest model chunks per pipeline rank tried (2: interleaved only, as a source that says so)."""
    hsdp: bool = True
    """Also try ZeRO-3 sharded over part of the data-parallel group (HSDP)."""
    bound: bool = True
    """Branch and bound: price a layout only where a lower bound of its step lets it rank (exact; False prices
    every layout, for tests and benchmarks)."""
    prune_dominated: bool = True
    """Leave out two options the cost model prices as never faster and never smaller than a sibling the
    search keeps: selective recompute under fused attention when none is allowed (same memory, extra
    attention-core forward) and sequence parallelism off with tp > 1 (same TP bytes, more element-wise
    work and activation memory).  False enumerates them as well: the exhaustive space, for benchmarks and
    for checking that the pruning loses nothing."""
    fixed: dict[str, int | bool | str] = field(default_factory=dict)
    """Degrees pinned by the caller (validate, evaluate): name -> value."""
    recipe: Recipe = field(default_factory=Recipe)
    """The recipe's fixed fields, and its choice fields where `choices` is None."""
    choices: RecipeChoices | None = None
    """Recipe options to choose between per candidate (dispatcher, overlaps, CUDA graphs); None prices the
    recipe's own values."""
    pipeline_policies: tuple[int, ...] | None = None
    """Pipeline splits to try where the recipe leaves the split open (LayoutBatch.pipe_policy: 0 Megatron's
    default, 1 the embedding and loss counted as a layer each); None: both."""
    module_sets: tuple[tuple[RecomputeModule, ...], ...] | None = None
    """Selective-recompute module lists to try; None: the useful ones for the model (`module_sets`), or the
    recipe's own list when it names one."""
    framework: Capability | None = None
    """Only layouts this framework runs exactly as priced (`plan --framework`; placement/frameworks.py)."""
    fix_names: FixNames = FixNames()
    """How an infeasible message names its fixes (flags, or a sweep file's fields)."""


def default_zero_stages(framework: Capability | None) -> tuple[int, ...]:
    """The ZeRO stages a search tries unless told: SearchConfig.zero_stages, and ZeRO-0 too where `framework` has no
    ZeRO-1 (torchtitan: DDP), since ZeRO-0 is left out only as ZeRO-1's twin with more memory; the framework's
    own stages decide the rest (Capability.sharding_mask)."""
    stages = SearchConfig.zero_stages
    if framework is not None and 1 not in framework.zero_stages and 0 in framework.zero_stages:
        stages = (0, *stages)
    return stages


SEARCHED_FIELDS: Final = {"moe_dispatcher": "dispatchers", "cuda_graphs": "cuda_graphs",
                           "tp_comm_overlap": "tp_comm_overlap", "ep_comm_overlap": "ep_comm_overlap"}
"""Recipe fields a search chooses per layout where the recipe leaves them open (RecipeChoices field of each)."""

_SPLIT_FIELDS: Final = frozenset({"pipeline_layout", "account_for_embedding", "account_for_loss"})


def searched_sources(cfg: SearchConfig, sources: dict[str, str]) -> dict[str, str]:
    """`sources` (recipe field -> where its value came from: a file, a flag, a framework) with the fields `cfg`
    leaves open marked "searched": each choice field with more than one option, the recompute modules, and the
    pipeline split (account_for_embedding/loss) where no split is pinned and both are tried.  `plan` and a
    sweep cell both take their plans' `recipe_sources` from here, so the same search says the same."""
    out = dict(sources)
    if cfg.choices is not None:
        for name, attr in SEARCHED_FIELDS.items():
            if name not in out and len(getattr(cfg.choices, attr)) > 1:
                out[name] = "searched"
    out.setdefault("recompute_modules", "searched")
    if not _SPLIT_FIELDS & set(sources) and (cfg.pipeline_policies is None or len(cfg.pipeline_policies) > 1):
        out["account_for_embedding"] = out["account_for_loss"] = "searched"
    return out


@dataclass(frozen=True)
class SearchResult:
    batch: LayoutBatch
    estimates: Estimates
    ranked: np.ndarray
    """Indices of fitting candidates, best first (at most top_k)."""
    num_candidates: int
    """Layouts priced and kept (selective-recompute variants included); the length of `batch`, except where a
    whole space too big to hold was priced in chunks (PRICE_CHUNK_ROWS), of which `batch` keeps the best."""
    seconds: float | None
    """Wall-clock time of the search; None when left out (`--reproducible`)."""
    bounds: tuple[str, ...] = ()
    """What the search does not try, in words (`search_bounds`): printed by `plan --exhaustive`, in PLAN JSON."""
    num_enumerated: int | None = None
    """Layouts in the searched space, those bounded out without pricing included (num_candidates: those priced,
    selective-recompute variants kept included)."""


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _expand(cols: dict[str, np.ndarray], name: str, options_for) -> dict[str, np.ndarray]:
    """Cartesian-expand every row by its own option list `options_for(cols) -> (row_index, values)`."""
    rows, values = options_for(cols)
    out = {k: v[rows] for k, v in cols.items()}
    out[name] = values
    return out


def _per_row(cols: dict[str, np.ndarray], candidates: np.ndarray, ok) -> tuple[np.ndarray, np.ndarray]:
    """All (row, candidate) pairs with ok(row_cols, candidate_values) true, vectorized."""
    n = len(next(iter(cols.values())))
    rows = np.repeat(np.arange(n), len(candidates))
    vals = np.tile(candidates, n)
    keep = ok(_Gathered(cols, rows), vals)
    return rows[keep], vals[keep]


class _Gathered:
    """cols[k][rows] for the columns a rule reads, gathered on first use (rules read two or three)."""

    def __init__(self, cols: dict[str, np.ndarray], rows: np.ndarray) -> None:
        self._cols, self._rows, self._seen = cols, rows, {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._seen:
            self._seen[key] = self._cols[key][self._rows]
        return self._seen[key]


def enumerate_layouts(w: Workload, model: ModelSpec, train: TrainingSpec, num_gpus: int,
                      cfg: SearchConfig, gpus_per_node: int = 1,
                      hsdp_spans: tuple[int, ...] | None = None, sharded: bool = True) -> LayoutBatch:
    """Every valid layout as arrays.  HSDP shard groups span whole nodes; with `hsdp_spans` (the GPUs of
    one block at each level of the machine) they span exactly one such block: shard inside a fast
    domain, replicate across it.  `sharded=False`: ZeRO-1 over the whole DP group only, the rest left to
    `expand_sharding`."""
    fixed = cfg.fixed
    divs = np.array(_divisors(num_gpus), dtype=np.int64)
    facts = rules.Facts.of(model, train, cfg.recipe, tuple(accounted_units(p) for p in _open_split(cfg)),
                           framework=cfg.framework.name if cfg.framework is not None else "megatron")

    def pick(name: str, default: np.ndarray) -> np.ndarray:
        return np.array([int(fixed[name])], dtype=np.int64) if name in fixed else default

    def by_rules(name: str, cols: dict[str, np.ndarray], also=None):
        """ok(rows, values) adding column `name`: the layout rules it completes (placement/cost/rules.py)."""
        ok = rules.admit(facts, name, cols.keys())
        return ok if also is None else (lambda r, v: also(r, v) & ok(r, v))

    tp_opts = pick("tp", divs[divs <= (cfg.max_tp or num_gpus)])
    tp_opts = tp_opts[by_rules("tp", {})({}, tp_opts)]
    cp_opts = pick("cp", divs[(divs <= (cfg.max_cp or num_gpus)) | (divs == 1)])
    cols = {"tp": tp_opts}
    cols = _expand(cols, "cp", lambda c: _per_row(c, cp_opts, by_rules(
        "cp", c, lambda r, v: num_gpus % (r["tp"] * v) == 0)))
    cols = _expand(cols, "pp", lambda c: _per_row(c, pick("pp", divs), by_rules(
        "pp", c, lambda r, v: num_gpus % (r["tp"] * r["cp"] * v) == 0)))
    cols["dp"] = num_gpus // (cols["tp"] * cols["cp"] * cols["pp"])
    if "dp" in fixed:
        keep = cols["dp"] == int(fixed["dp"])
        cols = {k: v[keep] for k, v in cols.items()}
    keep = train.global_batch % cols["dp"] == 0
    cols = {k: v[keep] for k, v in cols.items()}

    # micro-batches: the divisors of the local batch (the batch_split rule), up to max_micro_batch_size
    mbs_all = np.array(_divisors(train.global_batch), dtype=np.int64)
    mbs_opts = pick("micro_batch_size", mbs_all[mbs_all <= (cfg.max_micro_batch_size or train.global_batch)])
    cols = _expand(cols, "mbs", lambda c: _per_row(c, mbs_opts, by_rules("mbs", c)))
    # model chunks per rank: up to the layers of a stage (the vpp_layers rule), or max_vpp
    vpp_max = min(cfg.max_vpp or model.num_layers, model.num_layers)
    if cfg.recipe.pipeline_layout is None:  # the default split: vpp divides the fullest stage's layers
        pps = np.unique(cols["pp"])
        full = set(stage_layers(model.num_layers, pps, np.ones_like(pps)).fullest.tolist())
        vpp_all = np.array(sorted({d for f in full for d in _divisors(f)} | {1}), dtype=np.int64)
    else:
        vpp_all = np.arange(1, model.num_layers + 1, dtype=np.int64)
    vpp_opts = pick("vpp", vpp_all[(vpp_all <= vpp_max) & (vpp_all >= cfg.min_vpp)])
    cols = _expand(cols, "vpp", lambda c: _per_row(c, vpp_opts, by_rules("vpp", c)))
    # a model without experts keeps ep = etp = 1 by the rules, like every other degree
    # options no row can take are dropped before the per-row expansion (a dense model: ep = etp = 1; experts:
    # divisors of the expert count; etp: 1 or a tp value); the rules still decide per row
    experts = model.moe.num_experts if model.moe else 1
    etp_opts = pick("etp", divs[(divs == 1) | np.isin(divs, cols["tp"])] if model.moe else divs[:1])
    ep_opts = pick("ep", divs[experts % divs == 0])
    cols = _expand(cols, "etp", lambda c: _per_row(c, etp_opts, by_rules("etp", c)))
    cols = _expand(cols, "ep", lambda c: _per_row(c, ep_opts, by_rules("ep", c)))
    allowed = cfg.recompute
    if cfg.prune_dominated and cfg.recipe.attention_kernel is not AttentionKernel.UNFUSED and Recompute.NONE in allowed:
        # with fused attention no s x s tensor is kept, so selective recompute saves no memory and
        # only adds the attention core's forward: it is never better than none here
        allowed = tuple(r for r in allowed if r is not Recompute.SELECTIVE)
    rec_codes = [RECOMPUTE_CODES.index(Recompute(fixed["recompute"]))] if "recompute" in fixed \
        else [RECOMPUTE_CODES.index(r) for r in allowed]
    # selective recompute comes as (code 1, module mask) pairs, one per module list tried
    sets = _module_sets(model, cfg) if 1 in rec_codes else ()
    pairs = [(c, 0) for c in rec_codes if c != 1] + [(1, module_mask(ms)) for ms in sets]
    pairs.sort()
    rec_opts = np.arange(len(pairs), dtype=np.int64)
    cols = _expand(cols, "recompute", lambda c: _per_row(c, rec_opts, lambda r, v: np.ones_like(v, dtype=bool)))
    pair_code = np.array([p[0] for p in pairs], dtype=np.int64)
    pair_mask = np.array([p[1] for p in pairs], dtype=np.int64)
    cols["rc_modules"] = pair_mask[cols["recompute"]]
    cols["recompute"] = pair_code[cols["recompute"]]
    # Sequence parallelism moves the same bytes as plain TP (Korthikanti §4) and only shrinks memory and
    # element-wise work, so with tp > 1 it is on unless pinned off; with tp = 1 it does not exist.
    # It splits each CP rank's share of the sequence over the TP ranks, so only where tp divides it (rules.sp_splits;
    # a user trial: llama3-70b at --seq-len 8191 was planned tp4 with SP)
    def sp_splits(c: dict[str, np.ndarray]) -> np.ndarray:
        return rules.sp_splits(train.seq_len, c["tp"], c["cp"])

    if "sequence_parallel" in fixed:
        cols["sp"] = np.where(cols["tp"] > 1, int(bool(fixed["sequence_parallel"])), 0)
        keep = (cols["sp"] == 0) | sp_splits(cols)
        cols = {k: v[keep] for k, v in cols.items()}
    elif not cfg.prune_dominated:
        cols = _expand(cols, "sp", lambda c: _per_row(c, np.array([1, 0], dtype=np.int64),
                                                      lambda r, v: (v == 0) | ((r["tp"] > 1) & sp_splits(r))))
    else:
        cols["sp"] = ((cols["tp"] > 1) & sp_splits(cols)).astype(np.int64)
    n = len(cols["tp"])
    cols["pipe_policy"] = np.full(n, pipe_policy_of(cfg.recipe), dtype=np.int64)
    if _open_split(cfg):  # every open pipeline split is a candidate (priced where its bound lets it rank)
        splits = np.array((0, *_open_split(cfg)), dtype=np.int64)
        cols = _expand(cols, "pipe_policy", lambda c: _per_row(c, splits, lambda r, v: (v == 0) | (r["pp"] > 1)))
    # ZeRO stage and shard group last: nothing but the DP, optimizer and memory terms reads them, so the search
    # bounds the step of a layout before it multiplies it by them (expand_sharding)
    base = LayoutBatch(tp=cols["tp"], cp=cols["cp"], ep=cols["ep"], etp=cols["etp"], pp=cols["pp"],
                       vpp=cols["vpp"], dp=cols["dp"], mbs=cols["mbs"], zero=np.ones_like(cols["tp"]),
                       dp_shard=cols["dp"].copy(), recompute=cols["recompute"], sp=cols["sp"],
                       rc_modules=cols["rc_modules"], pipe_policy=cols["pipe_policy"])
    if cfg.framework is not None:  # only what the framework runs as priced (placement/frameworks.py)
        base = base.take(np.flatnonzero(cfg.framework.layout_mask(base, model.num_layers, model.kv_heads,
                                                                  train.seq_len)
                                        & cfg.framework.precision_mask(base, train.precision, train.global_batch)))
    return expand_sharding(base, cfg, num_gpus, gpus_per_node, hsdp_spans) if sharded else base


def _sharding(cfg: SearchConfig, num_gpus: int, gpus_per_node: int, hsdp_spans: tuple[int, ...] | None):
    """(ZeRO stages, the shard-group test ok(rows, values) or None where the shard group is the whole DP)."""
    fixed = cfg.fixed
    zero_opts = np.array([int(fixed["zero_stage"])] if "zero_stage" in fixed else cfg.zero_stages, dtype=np.int64)
    if "dp_shard" in fixed or not cfg.hsdp:
        return zero_opts, None
    spans = np.array(sorted(hsdp_spans), dtype=np.int64) if hsdp_spans else None

    def shard_ok(r, v):
        span = r["tp"] * r["cp"] * v
        whole = np.isin(span, spans) if spans is not None else span % gpus_per_node == 0
        # HSDP shards the experts over the tp x cp x dp_shard ranks too: ep x etp must divide them (Layout)
        experts = (r["tp"] * r["cp"] * v) % (r["ep"] * r["etp"]) == 0
        return ((r["zero"] == 3) & (r["dp"] % v == 0) & (v > 1) & whole & experts) | (v == r["dp"])

    return zero_opts, shard_ok


def expand_sharding(b: LayoutBatch, cfg: SearchConfig, num_gpus: int, gpus_per_node: int = 1,
                    hsdp_spans: tuple[int, ...] | None = None) -> LayoutBatch:
    """Each layout of `b` once per ZeRO stage and, under ZeRO-3, per shard group (HSDP inside one block of a
    level of the machine)."""
    zero_opts, shard_ok = _sharding(cfg, num_gpus, gpus_per_node, hsdp_spans)
    cols = {f.name: getattr(b, f.name) for f in fields(LayoutBatch) if f.name not in ("zero", "dp_shard")}
    cols = _expand(cols, "zero", lambda c: _per_row(c, zero_opts, lambda r, v: np.ones_like(v, dtype=bool)))
    if "dp_shard" in cfg.fixed:
        # a fixed shard group only where it divides the row's dp (Layout's rule): the dp a free cp or tp leaves can
        # be smaller than it (a user check: a ZeRO-3 run on 8 GPUs, dp_shard 8 and cp left free, priced cp 2 x
        # dp_shard 8 = 16 of 8 GPUs and crashed reshaping its rank groups)
        shard = int(cfg.fixed["dp_shard"])
        cols = _expand(cols, "dp_shard", lambda c: _per_row(
            c, np.array([shard], dtype=np.int64), lambda r, v: (r["zero"] != 3) | (r["dp"] % v == 0)))
        cols["dp_shard"] = np.where(cols["zero"] == 3, shard, cols["dp"])
    elif shard_ok is not None:
        divs = np.array(_divisors(num_gpus), dtype=np.int64)
        cols = _expand(cols, "dp_shard", lambda c: _per_row(c, divs, shard_ok))
    else:
        cols["dp_shard"] = cols["dp"].copy()
    out = LayoutBatch(**cols)
    return out if cfg.framework is None else out.take(np.flatnonzero(cfg.framework.sharding_mask(out)))


def sharding_count(b: LayoutBatch, cfg: SearchConfig, num_gpus: int, gpus_per_node: int = 1,
                   hsdp_spans: tuple[int, ...] | None = None) -> int:
    """How many layouts `expand_sharding` makes of `b`, without making them (the count depends on tp x cp, dp and
    ep x etp only: counted once per distinct triple)."""
    if cfg.framework is not None:  # its rules depend on more than tp x cp and dp: count what expands, in chunks
        step = max(1, PRICE_CHUNK_ROWS // 16)  # of base rows, so the count never holds a whole expanded space
        return sum(len(expand_sharding(b.take(np.arange(i, min(i + step, len(b)))), cfg, num_gpus, gpus_per_node,
                                       hsdp_spans)) for i in range(0, len(b), step))
    zero_opts, shard_ok = _sharding(cfg, num_gpus, gpus_per_node, hsdp_spans)
    if shard_ok is None or 3 not in zero_opts.tolist():
        return len(b) * len(zero_opts)
    divs = np.array(_divisors(num_gpus), dtype=np.int64)
    d = len(divs)
    pair = np.searchsorted(divs, b.tp * b.cp) * d + np.searchsorted(divs, b.dp)
    key = pair * d + np.searchsorted(divs, b.ep * b.etp)
    keys, per_key = np.unique(key, return_counts=True)  # the distinct triples only (d ** 3 bins would be large)
    ones = np.ones(keys.size * d, dtype=np.int64)
    rows = {"tp": np.repeat(divs[keys // (d * d)], d), "cp": ones, "dp": np.repeat(divs[keys // d % d], d),
            "ep": np.repeat(divs[keys % d], d), "etp": ones, "zero": np.full(keys.size * d, 3, dtype=np.int64)}
    shards = shard_ok(rows, np.tile(divs, keys.size)).reshape(keys.size, d).sum(axis=1)
    return int(np.sum(per_key * (len(zero_opts) - 1 + shards)))


def module_sets(model: ModelSpec, norms_fused: bool = True) -> tuple[tuple[RecomputeModule, ...], ...]:
    """The selective-recompute module lists `plan` tries: Korthikanti's core_attn, and those of the
    Megatron-Bridge and Megatron-Core recipes for the model's parts (norms; dense MLPs; the MoE
    activation, shared experts or the whole MoE layer; MLA's up-projections)."""
    M = RecomputeModule
    # `layernorm` frees something only where a norm is a module of its own in Megatron-Core's layer spec (MLA's
    # input norm, an MoE layer's pre-MLP norm: cost.memory.norms_recomputed), or everywhere the norms run unfused
    # (recipe norms_fused False); on a dense GQA model under Megatron it runs as none
    own_norms = model.moe is not None or model.mla is not None or not norms_fused
    sets: list[tuple[RecomputeModule, ...]] = [(M.CORE_ATTN,)] + ([(M.LAYERNORM,)] if own_norms else [])
    dense_mlp = model.moe is None or model.moe.num_dense_layers > 0
    if dense_mlp:
        sets += [(M.MLP,)] + ([(M.LAYERNORM, M.MLP)] if own_norms else [])
    if model.moe is not None:
        sets += [(M.MOE_ACT,), (M.LAYERNORM, M.MOE_ACT), (M.MOE,)]
        if dense_mlp:
            sets.append((M.MLP, M.MOE_ACT))
        if model.moe.num_shared_experts:
            sets.append((M.SHARED_EXPERTS, M.MOE_ACT))
    if model.mla is not None:
        sets += [(M.MLA_UP_PROJ,), (M.MLA_UP_PROJ, M.MLP) if dense_mlp else (M.MLA_UP_PROJ, M.MOE_ACT)]
    return tuple(sets)


def _module_sets(model: ModelSpec, cfg: SearchConfig) -> tuple[tuple[RecomputeModule, ...], ...]:
    if cfg.module_sets is not None:
        return cfg.module_sets
    if cfg.recipe.recompute_modules:
        return (tuple(cfg.recipe.recompute_modules),)
    return module_sets(model, cfg.recipe.norms_fused)


def hsdp_spans(topo: Topology) -> tuple[int, ...]:
    """GPUs an HSDP shard group may span below the whole machine: one block at each level, and a power of two of
    scale-up domains, so that the shard groups tried do not depend on how many domains a leaf holds (a user trial:
    a 2:1 fabric with two-rack leaves was priced faster than the 1:1 one, whose search never tried a 144-GPU shard
    group of two NVL72 racks)."""
    sizes = {lv.block_gpus for lv in topo.levels if 0 < lv.block_gpus < topo.num_gpus}
    domain = max(1, min(topo.levels[0].block_gpus, topo.num_gpus))  # one scale-up domain as the job lies in it
    while domain < topo.num_gpus:
        sizes.add(domain)
        domain *= 2
    return tuple(sorted(s for s in sizes if s < topo.num_gpus))


def rank(batch: LayoutBatch, est: Estimates, mask: np.ndarray, top_k: int) -> np.ndarray:
    """Indices of `mask`ed candidates by step time, ties broken by the layout fields (deterministic)."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return idx
    steps = np.round(est.step_time_s[idx], 9)
    if 0 < top_k < idx.size:
        # only candidates at or below the k-th smallest step time can be in the top k, ties included:
        # sorting just those gives the same order as sorting all of them
        kth = np.partition(steps, top_k - 1)[top_k - 1]
        if not np.isnan(kth):
            near = steps <= kth
            idx, steps = idx[near], steps[near]
    keys = [batch.sp[idx], batch.recompute[idx], batch.dp_shard[idx], batch.zero[idx], batch.mbs[idx],
            batch.vpp[idx], batch.etp[idx], batch.ep[idx], batch.pp[idx], batch.cp[idx], batch.tp[idx], steps]
    order = np.lexsort(keys)
    return idx[order[:top_k]]


def search(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig = SearchConfig(),
           progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """The best `cfg.top_k` layouts that fit.  `progress(priced, total)` is called after each chunk where a whole
    space is priced in chunks (`_price_all`; minutes for the largest `--exhaustive` spaces)."""
    start = time.perf_counter()
    w = workload(model)
    if cfg.recipe.pipeline_layout is not None:  # a layout that cannot hold this model is bad input, for any pp
        try:
            check_layout_text(cfg.recipe.pipeline_layout, model.num_layers, cfg.recipe.mtp_layers)
        except ValueError as err:
            raise InputError(f"pipeline_layout {cfg.recipe.pipeline_layout!r} for {model.name}: {err}") from None
    gpn, spans = min(topo.cluster.gpus_per_node, topo.num_gpus), hsdp_spans(topo)
    base = enumerate_layouts(w, model, train, topo.num_gpus, cfg, gpn, spans, sharded=False)
    if len(base) == 0:
        raise PlacementInfeasible(_framework_refuses_message(w, model, train, topo, cfg, gpn, spans)
                                  or _no_layout_message(model, train, topo.num_gpus, cfg, topo.gpus_per_host,
                                                        topo.regular), binding="divisibility")
    batch, est, enumerated, priced = _price_bounded(w, train, topo, base, cfg,
                                                    _Sharding(cfg, topo.num_gpus, gpn, spans), progress)
    found = _selective_candidates(w, model, train, topo, cfg, batch, est)  # an exact, pruned extension of the space
    if found is not None:
        twins, more = found
        extra = estimate(w, train, topo, more, cfg.recipe, cfg.choices)
        # keep what can still rank: faster than the k-th best fitting plan so far, and, beside a twin that fits
        # without recompute, faster than it (a slower one is dominated: `bounds`)
        kth = _kth_fitting(est, cfg.top_k)
        beats_twin = ~est.fits[twins] | (extra.step_time_s < est.step_time_s[twins])
        keep = np.flatnonzero(extra.valid & (extra.step_time_s < kth) & beats_twin)
        batch, est = concat_batches(batch, more.take(keep)), concat_estimates(est, take_estimates(extra, keep))
        priced += keep.size
    if not est.valid.any():  # e.g. no pipeline split of the layers fits the GPU count's factors
        raise PlacementInfeasible(_no_layout_message(model, train, topo.num_gpus, cfg, topo.gpus_per_host,
                                                     topo.regular), binding="divisibility")
    # a candidate priced as not running (a recipe its framework refuses on that layout: step.NOT_RUN_S) is no plan
    runs = est.step_time_s < NOT_RUN_S
    feasible = est.valid & est.fits & runs
    ranked = rank(batch, est, feasible, cfg.top_k)
    if ranked.size == 0 and (est.valid & est.fits).any():
        raise PlacementInfeasible(_recipe_message(batch, est, model, cfg), binding="recipe")
    if ranked.size == 0:
        raise PlacementInfeasible(_memory_message(batch, est, model, train, topo, cfg), binding="memory")
    return SearchResult(batch=batch, estimates=est, ranked=ranked, num_candidates=priced,
                        seconds=time.perf_counter() - start, bounds=search_bounds(model, cfg),
                        num_enumerated=enumerated)


@dataclass(frozen=True)
class _Sharding:
    """expand_sharding and sharding_count for one search."""

    cfg: SearchConfig
    num_gpus: int
    gpus_per_node: int
    spans: tuple[int, ...] | None

    def __call__(self, b: LayoutBatch) -> LayoutBatch:
        return expand_sharding(b, self.cfg, self.num_gpus, self.gpus_per_node, self.spans)

    def count(self, b: LayoutBatch) -> int:
        return sharding_count(b, self.cfg, self.num_gpus, self.gpus_per_node, self.spans)


TIE_S = 1e-9
"""`rank` compares steps rounded to 1e-9 s: a layout within that of the k-th best could tie with it, so the
bound keeps it."""
FIRST_PRICED = 256
"""Candidates of lowest step bound priced first (then twice as many, until top_k fit): they set the k-th best
step that bounds out the rest."""
PRICE_CHUNK_ROWS = 250_000
"""Most layouts priced at once where every layout is priced (`--exhaustive`, or the bound off): a bigger space is
priced in chunks of about this many, keeping of each only what can still matter (KEPT_WHEN_CHUNKED), so memory
stays bounded.  DeepSeek-V3's exhaustive space on the 1,024 H100 of `dgx-h100` is 31.3 M layouts: priced at once
it ran out of an 18,000,000 kB address space (17.7 GB resident); in chunks it peaks at 1.5 GB resident
(benchmarks/README.md, "Exhaustive search in chunks")."""
KEPT_WHEN_CHUNKED = 1024
"""Of a space priced in chunks, the fastest fitting layouts kept (at least top_k, and every layout tied with the
last of them to the ranking's rounding, TIE_S), plus the leanest layout for the message when none fits: the
ranking and that message are those of pricing every layout at once."""
BOUND_CHUNK_ROWS = 250_000
"""Most layouts whose step bound is computed at once: the bound's intermediate arrays of a whole space held about
0.9 KB a layout (DeepSeek-V3 on 131,072 H800: 1.4 M base layouts, 1.5 GB resident, past the 1,024 MiB target of
benchmarks/README.md); each layout's bound is its own, so the chunks give the same bounds."""
LEANEST_PRICED = 64
"""Where no candidate can fit, how many of the leanest (by `memory_floor`) are priced for the message that names
the leanest layout."""


def _price_bounded(w: Workload, train: TrainingSpec, topo: Topology, base: LayoutBatch, cfg: SearchConfig,
                   expand, progress: Callable[[int, int], None] | None = None
                   ) -> tuple[LayoutBatch, Estimates, int, int]:
    """(layouts kept, their estimates, layouts in the space, layouts priced): branch and bound over the layouts,
    exact.

    `base` holds each layout once, before `expand` multiplies it by its ZeRO stages and shard groups, which
    move only the DP, optimizer and memory terms.  Every base layout gets a lower bound of its step
    (`step_lower_bound`: a fraction of `estimate`'s work, and the same for all its ZeRO variants).  They are
    priced, expanded, in the order of their bounds, in chunks (FIRST_PRICED, then twice as many each time)
    of those whose bound is at most the k-th best fitting step found so far, until the next bound is above
    it.  A layout left out has a step above that k-th best (by more than the ranking's rounding, TIE_S), so
    it cannot rank, not even on a tie; nor can its selective-recompute variants (recomputing only adds time).
    `prune_dominated=False` (`--exhaustive`) prices every layout (`_price_all`)."""
    n = len(base)
    if not (cfg.bound and cfg.prune_dominated) or n <= 2 * FIRST_PRICED:
        return _price_all(w, train, topo, base, cfg, expand, progress)
    lb = np.concatenate([step_lower_bound(w, train, topo, base.take(np.arange(i, min(i + BOUND_CHUNK_ROWS, n))),
                                          cfg.recipe, cfg.choices) for i in range(0, n, BOUND_CHUNK_ROWS)])
    order = np.argsort(lb, kind="stable")
    done, size = 0, FIRST_PRICED
    batch, est = None, None
    left = np.ones(n, dtype=bool)
    while done < n:
        kth = np.inf if est is None else _kth_fitting(est, cfg.top_k) + TIE_S
        if lb[order[done]] > kth:  # every layout left is bounded out
            break
        chunk = order[done:done + size]
        chunk = chunk[lb[chunk] <= kth]
        done, size = min(done + size, n), size * 2
        left[chunk] = False
        more = expand(base.take(np.sort(chunk)))
        priced = estimate(w, train, topo, more, cfg.recipe, cfg.choices)
        batch = more if batch is None else concat_batches(batch, more)
        est = priced if est is None else concat_estimates(est, priced)
        if done == len(chunk) and done < n and not est.fits.any() and _full_recompute_is_leanest(cfg):
            # nothing of the first chunk fits: if no layout left can fit either, price only the leanest of them
            rest = expand(base.take(np.flatnonzero(left)))
            valid, floor, capacity = memory_floor(w, train, topo, rest, cfg.recipe)
            if not (valid & (floor <= capacity)).any():
                lean = np.flatnonzero(valid) if valid.any() else np.arange(len(rest))
                pick = np.sort(lean[np.argsort(floor[lean], kind="stable")[:LEANEST_PRICED]])
                priced = estimate(w, train, topo, rest.take(pick), cfg.recipe, cfg.choices)
                return (concat_batches(batch, rest.take(pick)), concat_estimates(est, priced),
                        len(batch) + len(rest), len(batch) + pick.size)
    return batch, est, len(batch) + expand.count(base.take(np.flatnonzero(left))), len(batch)


def _price_all(w: Workload, train: TrainingSpec, topo: Topology, base: LayoutBatch, cfg: SearchConfig,
               expand, progress: Callable[[int, int], None] | None = None) -> tuple[LayoutBatch, Estimates, int, int]:
    """Every layout of the space priced, at once where it holds fewer than PRICE_CHUNK_ROWS; else in chunks of
    `base` rows in their enumeration order, each chunk's result cut to what can still matter (`_keep_best`)
    before the next, so the kept set, its ranking and the no-fit message do not depend on the chunk size."""
    total = expand.count(base)
    if total <= PRICE_CHUNK_ROWS:
        batch = expand(base)
        return batch, estimate(w, train, topo, batch, cfg.recipe, cfg.choices), len(batch), len(batch)
    rows = max(1, len(base) * PRICE_CHUNK_ROWS // total)
    keep_n = max(cfg.top_k, KEPT_WHEN_CHUNKED)
    batch, est, priced = None, None, 0
    for start in range(0, len(base), rows):
        more = expand(base.take(np.arange(start, min(start + rows, len(base)))))
        more_est = estimate(w, train, topo, more, cfg.recipe, cfg.choices)
        priced += len(more)
        if batch is not None:
            more, more_est = concat_batches(batch, more), concat_estimates(est, more_est)
        keep = _keep_best(more_est, keep_n, cfg.top_k, more if cfg.prune_dominated else None,
                          lambda rows: step_lower_bound(w, train, topo, rows, cfg.recipe, cfg.choices))
        batch, est = more.take(keep), take_estimates(more_est, keep)
        if progress is not None:
            progress(priced, total)
    return batch, est, priced, priced


def _keep_best(est: Estimates, keep_n: int, top_k: int, batch: LayoutBatch | None = None,
               lower_bound: Callable[[LayoutBatch], np.ndarray] | None = None) -> np.ndarray:
    """Indices (sorted) of the fitting candidates at most TIE_S slower than the keep_n-th fastest, and of the
    leanest valid one (the leanest of all where none is valid), which `_memory_message` names if nothing fits.
    With `batch` (a pruned space, which `_selective_candidates` extends afterwards) also the layouts it extends:
    valid, not fitting without recompute, and with a step bound (`lower_bound`, the test `_selective_candidates`
    applies; the priced step without it) below the top_k-th fitting step so far, which is never below the final
    one, so none it would extend is dropped.  The bound, not the priced step: recompute frees memory in which a
    faster option can fit, so a selective variant can beat its own unfitting twin (a test found Mixtral 8x22B's
    full search missing a plan the bounded search ranked 5th)."""
    ok = est.valid & est.fits
    keep = ok if ok.sum() <= keep_n else ok & (est.step_time_s <= _kth_fitting(est, keep_n) + TIE_S)
    if batch is not None:
        kth = _kth_fitting(est, top_k)
        rows = np.flatnonzero(est.valid & ~est.fits & (batch.recompute == 0))
        bound = est.step_time_s[rows] if lower_bound is None or rows.size == 0 else lower_bound(batch.take(rows))
        keep[rows[bound < kth + TIE_S]] = True
    valid = np.flatnonzero(est.valid)
    leanest = valid[np.argmin(est.peak_memory_bytes[valid])] if valid.size else int(np.argmin(est.peak_memory_bytes))
    keep[leanest] = True
    return np.flatnonzero(keep)


def _full_recompute_is_leanest(cfg: SearchConfig) -> bool:
    """Whether the space holds each layout's leanest recompute: full recompute of every layer (or a recompute the
    user pinned), leaner than any selective module list `_selective_candidates` may add later."""
    return cfg.recipe.recompute_num_layers is None and ("recompute" in cfg.fixed or Recompute.FULL in cfg.recompute)


def search_bounds(model: ModelSpec, cfg: SearchConfig) -> tuple[str, ...]:
    """What the search leaves untried, in words.  The degrees (tp, cp, ep, etp, pp, vpp, micro-batch) run over
    every value the layout rules allow unless a max_* bound is set; what is pruned as dominated is priced by
    `--exhaustive` (prune_dominated=False), so only the choices below remain."""
    out = []
    for name, value in (("tp", cfg.max_tp), ("cp", cfg.max_cp), ("vpp", cfg.max_vpp),
                        ("micro-batch", cfg.max_micro_batch_size)):
        if value is not None:
            out.append(f"{name} up to {value} (SearchConfig.max_*)")
    if cfg.min_vpp > 1:
        out.append(f"vpp from {cfg.min_vpp} (interleaved only)")
    if cfg.framework is not None:
        out.append(f"only layouts {cfg.framework.version} runs as priced: {cfg.framework.why}")
    if 0 not in cfg.zero_stages and "zero_stage" not in cfg.fixed:
        out.append("ZeRO-0 left out: ZeRO-1 moves the same bytes with less memory (give --zero 0 or --exhaustive)")
    if cfg.prune_dominated:
        out.append("left out as never faster nor smaller than a twin (--exhaustive prices them): sequence "
                   "parallelism off with tp > 1, selective recompute under fused attention where none is allowed; "
                   "selective module lists are priced only where the layout's step bound without recompute could "
                   "rank, and kept beside one that fits without recompute only where faster than it")
        if cfg.bound:
            out.append("branch and bound (exact): a layout whose step bound is above the k-th best fitting step is "
                       "not priced")
    if _open_split(cfg):
        out.append("pipeline splits: only Megatron's default and the embedding and loss counted as a layer each; "
                   "other uneven splits as a given --pipeline-layout")
    elif cfg.recipe.pipeline_layout is None and not (cfg.recipe.account_for_embedding or cfg.recipe.account_for_loss):
        out.append("pipeline split: Megatron's default only (the emitted formats state no other)")
    if "recompute" not in cfg.fixed and Recompute.SELECTIVE in cfg.recompute:
        sets = _module_sets(model, cfg)
        out.append("selective recompute: only the module lists " + "; ".join(",".join(m.value for m in ms)
                                                                     for ms in sets) if sets else
                   "selective recompute: none (no module list every format emitted launches as priced)")
    if cfg.hsdp and "dp_shard" not in cfg.fixed:
        out.append("HSDP: only shard groups of one block of a level of the machine (node, NVLink domain, leaf) or a "
                   "power of two of scale-up domains")
    out.append("recompute_num_layers and the pipeline schedule: priced as given, not searched")
    return tuple(out)


def _open_split(cfg: SearchConfig) -> tuple[int, ...]:
    """The pipeline splits the search may choose: none where the recipe states one."""
    if cfg.recipe.pipeline_layout is not None or cfg.recipe.account_for_embedding or cfg.recipe.account_for_loss:
        return ()
    return tuple(p for p in (cfg.pipeline_policies or (0, 1)) if p != 0)


def _kth_fitting(est: Estimates, top_k: int) -> float:
    steps = est.step_time_s[est.valid & est.fits]
    return np.partition(steps, top_k - 1)[top_k - 1] if steps.size >= top_k else np.inf


def _selective_candidates(w: Workload, model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig,
                          batch: LayoutBatch, est: Estimates) -> tuple[np.ndarray, LayoutBatch] | None:
    """Selective recompute, priced only where it can matter (exact pruning).

    Recomputing modules only adds time (their forwards, host work) under the same recipe options, so a module
    list can only enter the top k for a layout whose no-recompute step bound under any option
    (`step_lower_bound`) is below the k-th best fitting step found so far.  Not only where the no-recompute
    layout does not fit: the memory it frees can let a faster option fit (partial CUDA graphs, whose buffers a
    no-recompute DeepSeek-V3 on 512 GB200 could not hold: a user trial found `--top-k 1` 3 % slower than the best
    plan of `--top-k 5`, which had priced the selective variant because its 5th best was slower).  Those layouts
    are expanded by every module list; `prune_dominated=False` (`--exhaustive`) enumerates all of them up front
    instead, and tests check both give the same plans."""
    if not cfg.prune_dominated or "recompute" in cfg.fixed or Recompute.SELECTIVE not in cfg.recompute \
            or Recompute.NONE not in cfg.recompute:
        return None
    flash = cfg.recipe.attention_kernel is not AttentionKernel.UNFUSED
    sets = [ms for ms in _module_sets(model, cfg) if not (flash and tuple(ms) == (RecomputeModule.CORE_ATTN,))]
    if not sets:
        return None
    kth = _kth_fitting(est, cfg.top_k)
    rows = np.flatnonzero(est.valid & (batch.recompute == 0))
    if rows.size == 0:
        return None
    # the no-recompute step under its fastest option, fitting or not, bounds every module list's from below
    bound = step_lower_bound(w, train, topo, batch.take(rows), cfg.recipe, cfg.choices)
    rows = rows[bound < kth + TIE_S]
    if rows.size == 0:
        return None
    twins = np.repeat(rows, len(sets))
    base = batch.take(twins)
    masks = np.tile(np.array([module_mask(ms) for ms in sets], dtype=np.int64), rows.size)
    return twins, LayoutBatch(**{**{f: getattr(base, f) for f in ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs",
                                                                  "zero", "dp_shard", "sp", "pipe_policy")},
                                 "recompute": np.ones(len(masks), dtype=np.int64), "rc_modules": masks})


def _framework_refuses_message(w, model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig, gpn: int,
                               spans) -> str | None:
    """Where layouts split over the GPUs but the framework runs none of them as priced: which, and what it refuses
    on the first (a user trial: llama3-70b on 100 GB200 under --framework torchtitan was told the generic rules, which
    tp 2 x pp 25 x dp 2 meets, where torchtitan's pipeline split was the limit); None where none splits anyway."""
    if cfg.framework is None:
        return None
    free = enumerate_layouts(w, model, train, topo.num_gpus, replace(cfg, framework=None), gpn, spans, sharded=False)
    if len(free) == 0:
        return None
    fw = cfg.framework
    lay = free.layout(0)
    degrees = sorted({f"tp {x.tp} cp {x.cp} pp {x.pp} dp {x.dp}"
                      for x in (free.layout(i) for i in range(min(len(free), 200)))})
    shown = ", ".join(degrees[:4]) + (", ..." if len(degrees) > 4 or len(free) > 200 else "")
    # (the ZeRO stage is chosen after this enumeration: its rules are not what refuses the layout)
    why = "; ".join(r for r in fw.broken_rules(free.take(np.array([0])), model.num_layers, model.kv_heads,
                                               train.seq_len) if not r.startswith("ZeRO-")) or fw.why
    return (f"no layout of {model.name} over {topo.num_gpus} GPUs runs under --framework {fw.name} as placement "
            f"prices it: layouts split ({shown}), but {fw.version} runs none of them "
            f"(on tp {lay.tp} cp {lay.cp} pp {lay.pp} (vpp {lay.vpp}) dp {lay.dp}: {why}); drop --framework to plan "
            f"them, or try another GPU count")


def _no_layout_message(model: ModelSpec, train: TrainingSpec, num_gpus: int, cfg: SearchConfig,
                       unit: int = 1, regular: bool = True) -> str:
    pinned = ", ".join(f"{k}={v}" for k, v in sorted(cfg.fixed.items()))
    units = max(num_gpus // unit, 1)
    below = unit * (1 << (units.bit_length() - 1))
    counts = sorted(c for c in {below, below * 2} - {num_gpus} if c <= MAX_GPUS)
    names = cfg.fix_names
    mbs = cfg.fixed.get("micro_batch_size")
    # a pinned micro-batch that does not divide the global batch: no GPU count helps (a user trial was told
    # `--gpus 128` for micro-batch 3 and batch 512)
    gpus = ([names.gpus.format(c) for c in counts]
            if names.gpus is not None and regular and not (mbs and train.global_batch % mbs) else [])
    per = f" x the micro-batch {mbs}" if mbs else ""
    mbs_fix = f", or {names.micro_batch.format(1)}" if mbs and mbs > 1 else ""
    return (
        f"no layout of {model.name} splits over {num_gpus} GPUs with global batch {train.global_batch} and "
        f"sequence {train.seq_len}{' with ' + pinned if pinned else ''}: tp must divide the "
        f"{model.num_attention_heads} heads, tp*cp*pp must divide {num_gpus}, pp must split the "
        f"{model.num_layers} layers with a layer on every stage, and dp = {num_gpus}/(tp*cp*pp){per} must divide "
        f"the global batch; try {''.join(g + ' or ' for g in gpus)}{names.global_batch} that "
        f"shares the GPU count's factors{mbs_fix}"
    )


def _recipe_message(batch: LayoutBatch, est: Estimates, model: ModelSpec, cfg: SearchConfig) -> str:
    """Why no layout that fits runs the pinned recipe: the framework's refusal on the leanest such layout (the EP
    overlap's conditions, per-layer CUDA graphs beside full or `moe` recompute)."""
    from placement.evaluate import ep_overlap_error, full_graph_moe_error, graphs_recompute_error

    fits = np.flatnonzero(est.valid & est.fits)
    i = int(fits[np.argmin(est.peak_memory_bytes[fits])])
    lay = batch.layout(i)
    recipe = cfg.recipe.model_copy(update={"recompute_modules": mask_modules(int(batch.rc_modules[i])),
                                           "cuda_graphs": cfg.choices.cuda_graphs[0],
                                           "ep_comm_overlap": cfg.choices.ep_comm_overlap[0]})
    why = [m for m in (graphs_recompute_error(lay, recipe, model.is_moe), full_graph_moe_error(recipe, model.is_moe),
                       ep_overlap_error(lay, recipe) if recipe.ep_comm_overlap and model.is_moe else None) if m]
    reason = "; ".join(why) if why else "its framework refuses the recipe on each of them"
    shown = (f"tp {lay.tp}, cp {lay.cp}, ep {lay.ep}, pp {lay.pp} (vpp {lay.vpp}), dp {lay.dp}, recompute "
             f"{lay.recompute.value}")
    return (f"no layout that fits runs the recipe given ({int((est.valid & est.fits).sum()):,} fit); on the leanest, "
            f"{shown}: {reason}")


def _memory_message(batch: LayoutBatch, est: Estimates, model: ModelSpec, train: TrainingSpec, topo: Topology,
                    cfg: SearchConfig) -> str:
    valid = np.flatnonzero(est.valid)
    i = valid[np.argmin(est.peak_memory_bytes[valid])] if valid.size else int(np.argmin(est.peak_memory_bytes))
    need, cap = est.peak_memory_bytes[i], est.memory_capacity_bytes
    lay = batch.layout(int(i))
    state = est.weights_bytes[i] + est.grads_bytes[i] + est.optimizer_bytes[i]
    n = topo.num_gpus
    names = cfg.fix_names
    fixes = []
    more, tried = (_fitting_count(model, train, topo, cfg, need, cap) if names.gpus is not None and topo.regular
                   else (None, 0))
    if more is not None:
        fixes.append(names.gpus.format(more))
    if Recompute.FULL not in cfg.recompute and "recompute" not in cfg.fixed:
        fixes.append(names.recompute)
    if 3 not in cfg.zero_stages and "zero_stage" not in cfg.fixed:
        fixes.append(names.zero)
    if est.activations_bytes[i] > state:
        seq = _fitting_seq(model, train, topo, cfg)
        if seq is not None:
            fixes.append(names.seq_len.format(seq))
    if cfg.framework is not None and cfg.framework.why:
        # the framework's limits narrow the layouts (a user trial: DeepSpeed's ep 1 made an MoE model "never fit",
        # told to try a smaller model)
        fw = cfg.framework
        why = fw.why
        if fw.fp8_accumulation and str(train.precision) == "fp8":  # a review: the rule that made it lean went unsaid
            why += (f"; at FP8 one micro-batch a step ({fw.fp8_accumulation}), so each rank takes global batch / dp "
                    f"sequences at once: bf16 precision or a smaller global batch lifts it")
        fixes.append(names.framework.format(fw.name) + f" ({fw.version} as placement prices it runs {why})")
    headroom = train.memory_headroom_bytes
    if headroom and (need <= cap + headroom or cap <= 0):
        fixes.append(names.headroom.format(
            f"{max(math.floor((cap + headroom - need) / GiB * 10) / 10, 0.0):.1f}"))
    if not fixes:
        if not topo.regular:
            why = f"this allocation's {n} GPUs (its host list) hold no layout of it"
        elif tried:
            why = f"no GPU count from {n} to {tried:,} holds a layout of it"
        else:  # no smaller model, sequence or micro-batch helps either (a QA run with a 2 GiB accelerator was told so)
            why = None
            fixes.append(f"an accelerator with more memory: a GPU's reserve ({MEMORY_RESERVE_BYTES / GiB:.2f} GiB, "
                         f"the CUDA context and communication buffers) alone passes its {cap / GiB:.2f} GiB capacity, "
                         f"whatever the model, sequence or GPU count")
        if why is not None:
            fixes.append(f"a smaller model, sequence or micro-batch: {why}")
    return (
        f"{model.name} on {n} x {topo.accelerator.name} does not fit: the leanest layout (tp {lay.tp}, cp {lay.cp}, "
        f"ep {lay.ep}, pp {lay.pp}, dp {lay.dp}, ZeRO-{lay.zero_stage}, recompute {lay.recompute.value}, "
        f"micro-batch {lay.micro_batch_size}) needs {need / GiB:.1f} GiB per GPU "
        f"(weights+grads+optimizer {state / GiB:.1f}, activations {est.activations_bytes[i] / GiB:.1f}, "
        f"{_other_text(est, i)}), "
        # a headroom past what the GPU holds leaves no capacity: said so, not as a negative capacity (a QA run's
        # sweep read "capacity -21.9 GiB (after the 100.0 GiB ...)")
        + (f"but the {headroom / GiB:.1f} GiB {names.headroom_source} keeps free is more than the "
           f"{(cap + headroom) / GiB:.1f} GiB each GPU holds for the job" if headroom and cap <= 0 else
           f"capacity {cap / GiB:.1f} GiB"
           + (f" (after the {headroom / GiB:.1f} GiB {names.headroom_source} keeps free)" if headroom else ""))
        + f"; try {' or '.join(fixes)}"
    )


def other_memory_text(other_bytes: float, logits_bytes: float | None, unsplit: str) -> str:
    """The memory besides state and activations, as the infeasible messages of plan and evaluate give it: the loss's
    logits named where the estimate has them (a user trial at 1M tokens read 95.9 GiB of "buffers" that were almost
    all logits), else the lump under `unsplit`."""
    if logits_bytes is None:
        return f"{unsplit} {other_bytes / GiB:.1f}"
    return (f"logits held for the loss {logits_bytes / GiB:.1f}, reserve and buffers "
            f"{(other_bytes - logits_bytes) / GiB:.1f}")


def _other_text(est, i: int) -> str:
    """other_memory_text of candidate `i`."""
    logits = (None if est.logits_bytes is None
              else float(np.broadcast_to(est.logits_bytes, np.shape(est.other_bytes))[i]))
    return other_memory_text(float(est.other_bytes[i]), logits, "buffers")


def _fitting_seq(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig) -> int | None:
    """The longest sequence, halving from the job's, on which the search finds a layout that fits (a user trial: 1M
    tokens on 8 GPUs was told to try 524,288, which did not fit either); None within SUGGEST_TRIES halvings."""
    quiet = replace(cfg, top_k=1, fix_names=replace(cfg.fix_names, gpus=None))
    seq = train.seq_len
    for _ in range(SUGGEST_TRIES):
        seq //= 2
        if seq < 1:
            return None
        if _fits_on(model, train.model_copy(update={"seq_len": seq}), topo, quiet):
            return seq
    return None


def _fitting_count(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig, need: float,
                   cap: float) -> tuple[int | None, int]:
    """(count, largest tried): the fewest GPUs, doubling from the count the peak over the capacity asks for and
    then halving the gap to the last count that did not fit (whole nodes), on which the search finds a layout that
    fits (the least such count where fitting grows with the count); None when no count up to MAX_GPUS does within
    SUGGEST_TRIES, or none can (the reserve every GPU keeps, MEMORY_RESERVE_BYTES, is no smaller on more GPUs, so a
    capacity at or below it fits on none: largest tried 0)."""
    if cap <= MEMORY_RESERVE_BYTES:
        return None, 0
    n, gpn = topo.num_gpus, topo.cluster.gpus_per_node
    if cfg.fix_names.whole_domains:  # a sweep design's count is whole purchase units (sweep.counts.purchase_unit)
        gpn = max(gpn, topo.cluster.scale_up.size)
    count = n * 2 ** math.ceil(math.log2(max(need / cap, 1.0) * 1.05))
    quiet = replace(cfg, top_k=1, fix_names=replace(cfg.fix_names, gpus=None))  # no suggestion of its own
    tried, below = n, n  # `below`: the largest count tried on which nothing fits

    def fits(c: int) -> bool:
        return _fits_on(model, train, Topology(topo.cluster, topo.accelerator, num_gpus=c), quiet)

    for _ in range(SUGGEST_TRIES):
        if count > gpn:
            count = -(-count // gpn) * gpn  # whole nodes
        if count > MAX_GPUS:
            break
        tried = count
        if fits(count):
            # then halve the gap to the last count that did not fit, in whole nodes: the doubling alone suggested
            # 64 B200 and 128 H100 for Llama 3 405B where 40 and 96 fit (a sweep user trial)
            node = topo.cluster.gpus_per_node  # whole domains above one, whole nodes above one, else any count
            step = gpn if count >= gpn else node if count >= node else 1
            lo, hi = below // step, count // step  # in steps: lo * step did not fit (or is below what did not)
            for _ in range(SUGGEST_TRIES):
                if hi - lo <= 1:
                    break
                mid = (lo + hi) // 2
                if fits(mid * step):
                    hi = mid
                else:
                    lo = mid
            return hi * step, tried
        below = count
        count *= 2
    return None, tried


def _fits_on(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig) -> bool:
    """Whether `search` finds a layout that fits on `topo`, at a fraction of its work where `_leanest_fit` settles
    it; else the whole search runs."""
    quick = None
    if cfg.recipe.pipeline_layout is None:  # else the search may refuse the layout text: its answer decides
        try:
            quick = _leanest_fit(model, train, topo, cfg)
        except (PlacementInfeasible, InputError):
            quick = None
    if quick is not None:
        return quick
    try:
        search(model, train, topo, cfg)
        return True
    except (PlacementInfeasible, InputError):
        return False


def _leanest_fit(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig) -> bool | None:
    """The search's answer where the leanest layouts give it: the LEANEST_PRICED layouts of lowest memory floor
    (`memory_floor`, a lower bound of the peak; the space's floors taken in chunks of about PRICE_CHUNK_ROWS) are
    priced, and one of them fitting is the search's answer too (it ranks every valid layout that fits): True; no
    floor at or under the capacity, with full recompute in the space, means none can fit: False.  None where
    neither settles it."""
    w = workload(model)
    n, gpn, spans = topo.num_gpus, min(topo.cluster.gpus_per_node, topo.num_gpus), hsdp_spans(topo)
    base = enumerate_layouts(w, model, train, n, cfg, gpn, spans, sharded=False)
    rows = max(1, len(base) * PRICE_CHUNK_ROWS // max(sharding_count(base, cfg, n, gpn, spans), 1))
    lean, lean_floor = None, np.empty(0)
    for start in range(0, len(base), rows):
        space = expand_sharding(base.take(np.arange(start, min(start + rows, len(base)))), cfg, n, gpn, spans)
        valid, floor, capacity = memory_floor(w, train, topo, space, cfg.recipe)
        can = np.flatnonzero(valid & (floor <= capacity))
        space, floor = space.take(can), np.concatenate([lean_floor, floor[can]])
        space = space if lean is None else concat_batches(lean, space)
        keep = np.sort(np.argsort(floor, kind="stable")[:LEANEST_PRICED])
        lean, lean_floor = space.take(keep), floor[keep]
    if len(lean_floor) == 0:
        return False if _full_recompute_is_leanest(cfg) else None
    est = estimate(w, train, topo, lean, cfg.recipe, cfg.choices)
    return True if (est.valid & est.fits).any() else None
