"""The layout rules, each stated once as a vectorized predicate with its reason and its error message.

`search.enumerate_layouts` keeps the candidates every rule holds for; `evaluate.check_layout` reports the
first rule a given layout breaks.  A rule reads named columns of int64 arrays (tp, cp, ep, etp, pp, vpp,
dp, mbs; one row per candidate, any mapping that returns arrays by name) and the model/job `Facts`.

What is not here: the degrees multiplying into the GPU count (the search derives dp from it, `Layout`
checks it against the cluster), the `Layout` validator's field rules (vpp needs pp, SP needs tp, HSDP
needs ZeRO-3), and the search's optional caps (SearchConfig.max_tp, max_cp, max_vpp,
max_micro_batch_size; none by default), which are choices of what to try, not rules of what can run.

Pipeline split (placement/cost/stages.py, placement/cost/pipeline.py `default_layout`): middle ranks
take ceil(L / pp) layers and the first and last share the rest (floor(L / pp), the first and last the heavier
rest, where ceil would leave them less than a layer each); interleaving splits each rank's layers
ceil/floor over its vpp model chunks.  Megatron-Core's default split needs pp and vpp to divide the
layers; uneven ranks and chunks are what its --decoder-first/last-pipeline-num-layers and
--pipeline-model-parallel-layout express (Llama 3 ran interleaved 1F1B on 126 layers over 16 stages).
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np

from placement.cost.stages import stage_layers
from placement.specs import Layout, ModelSpec, TrainingSpec
from placement.specs.recipe import CpCommType, Recipe

Columns = Mapping[str, np.ndarray]
"""Candidate columns by axis name: tp, cp, ep, etp, pp, vpp, dp, mbs (int64 arrays of equal length)."""


@dataclass(frozen=True)
class Facts:
    """What the rules read from the model and the job."""

    model_name: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    num_experts: int
    """Routed experts per MoE layer; 0 for a dense model."""
    seq_len: int
    global_batch: int
    explicit_pipeline: bool = False
    """An explicit pipeline layout places the layers: the default-split rules (pp_layers, vpp_layers) give way to
    the layout's own checks (cost.pipeline.parse_layout)."""
    split_units: tuple[int, ...] = (0,)
    """The default splits a layout may use, by the units they add to the layers: 0 Megatron's plain split, 1 or 2
    the embedding and/or loss counted as a layer each (--account-for-embedding/loss-in-pipeline-split).  A layout
    holds the pipeline rules when one of them splits it (the search prices each; an accounted one is written as a
    --pipeline-model-parallel-layout where Megatron's own division would not take it)."""

    cp_refused: str = ""
    """Why context parallelism cannot run as priced for this model ("" where it can): Transformer Engine's
    attention, whose ring (p2p), all-gather and all-to-all (a2a) exchanges the cost model prices, refuses a sliding
    window beside the ring and a softmax with sinks beside the first two (attn_forward_func_with_cp,
    TransformerEngine d0067d0da transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py:
    5054-5067: "Context parallelism
    does not support sliding window attention with cp_comm_type='p2p'", "only supports softmax_type='learnable'
    with cp_comm_type = 'a2a'"); under torchtitan, its varlen attention, which refuses context parallelism whatever
    the exchange (emit.torchtitan.cp_refused: its gpt_oss configs)."""
    cp_a2a: bool = False
    """Context parallelism is Ulysses' all-to-all over heads (CpCommType.A2A): each rank of a TP x CP group computes
    whole heads."""
    cp_a2a_te: bool = False
    """Transformer Engine runs that all-to-all, which splits each TP rank's K/V heads over the CP ranks too
    (AttnFuncWithCPAndQKVOA2A: k.shape[-2] % cp_size == 0), so tp x cp divides the K/V heads."""
    torch_pipeline: bool = False
    """torch.distributed.pipelining's schedules run the pipeline (torchtitan): Schedule1F1B needs at least pp
    micro-batches (torch 2.13 distributed/pipelining/schedules.py:1020-1024, raised at start-up), and
    ScheduleInterleaved1F1B runs any count that its rounds, max(1, m // pp), divide (schedules.py:2935-2942; fewer
    than pp run as one round, whose bubble cost.step prices), where Megatron's interleaving needs m % pp == 0."""
    two_stage_interleaving: bool = True
    """An interleaved schedule may run on 2 pipeline stages.  False where Megatron-LM runs the plan with its
    pipeline transfers exposed: it refuses that pair (core_v0.19.0 megatron/training/arguments.py:972-975)."""

    @classmethod
    def of(cls, model: ModelSpec, train: TrainingSpec, recipe: Recipe | None = None,
           open_units: tuple[int, ...] = (), framework: str | None = None, runs_te: bool | None = None) -> Facts:
        """`open_units`: the accounted splits the search may choose where the recipe states none; `framework`: the
        framework a search plans for ("megatron" also for a search for none, whose files are Megatron's by default),
        None where no framework's start-up checks apply (a layout priced as given)."""
        accounted = int(recipe.account_for_embedding) + int(recipe.account_for_loss) if recipe is not None else 0
        units = (accounted,) if accounted else (0, *open_units)
        exposed = recipe is not None and not recipe.pp_comm_overlap
        ring = recipe is None or recipe.cp_comm_type is CpCommType.P2P
        if runs_te is None:  # Transformer Engine's attention: Megatron's files, the default ones
            runs_te = framework in ("megatron", None)
        cp_refused = ""
        a2a = recipe is not None and recipe.cp_comm_type is CpCommType.A2A
        if runs_te and model.attention_sinks and not a2a:
            cp_refused = (f"{model.name}'s attention sinks: Transformer Engine runs context parallelism beside a "
                          f"softmax with sinks only as cp_comm_type a2a (context_parallel.py:5064-5066); "
                          f"--cp-comm-type a2a runs it")
        elif runs_te and model.sliding_window is not None and ring:
            cp_refused = (f"{model.name}'s sliding window ({model.sliding_window} keys): Transformer Engine refuses "
                          f"ring (p2p) context parallelism beside it (context_parallel.py:5054-5060); "
                          f"--cp-comm-type all_gather runs it")
        if framework == "torchtitan" and not cp_refused:  # its own attention, by the config that runs the model
            from placement.emit.torchtitan import cp_refused as torchtitan_cp_refused

            cp_refused = torchtitan_cp_refused(model)
        return cls(model_name=model.name, num_layers=model.num_layers, num_heads=model.num_attention_heads,
                   num_kv_heads=model.kv_heads, num_experts=model.moe.num_experts if model.moe else 0,
                   seq_len=train.seq_len, global_batch=train.global_batch,
                   explicit_pipeline=recipe is not None and recipe.pipeline_layout is not None,
                   split_units=units, two_stage_interleaving=not (exposed and framework == "megatron"),
                   torch_pipeline=framework == "torchtitan",
                   cp_refused=cp_refused, cp_a2a=a2a, cp_a2a_te=a2a and runs_te)


@dataclass(frozen=True)
class Rule:
    name: str
    reads: frozenset[str]
    """The columns the predicate reads; the search applies a rule once all of them exist."""
    reason: str
    holds: Callable[[Facts, Columns], np.ndarray]
    """(K,) bool: True where the rule holds."""
    message: Callable[[Facts, Mapping[str, int]], str]
    """The error for one layout that breaks the rule: the values, the arithmetic and a fix."""


def _ends(f: Facts, c: Columns, extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Units (layers, plus `extra` accounted embedding/loss) on the first and last pipeline ranks (the middle ranks
    hold ceil(U / pp), at least as many)."""
    st = stage_layers(f.num_layers + extra, c["pp"], np.ones_like(c["pp"]))
    return st.first, st.last


def _lighter_end(f: Facts, c: Columns, extra: int = 0) -> np.ndarray:
    """The fewest units on one pipeline rank (the first or last, or the middle ranks' where those take floor)."""
    return stage_layers(f.num_layers + extra, c["pp"], np.ones_like(c["pp"])).lightest


def _fullest(f: Facts, pp: np.ndarray | int, extra: int = 0) -> np.ndarray:
    """The most units on one pipeline rank."""
    pp = np.atleast_1d(np.asarray(pp, dtype=np.int64))
    return stage_layers(f.num_layers + extra, pp, np.ones_like(pp)).fullest


def _splits(f: Facts, c: Columns, vpp: np.ndarray | int = 1) -> np.ndarray:
    """True where one of the allowed default splits (Facts.split_units) gives every virtual stage a unit and splits
    the fullest rank into vpp equal chunks (cost.pipeline.default_layout's condition)."""
    ok = np.zeros(np.shape(c["pp"]), dtype=bool)
    for extra in f.split_units:
        st = stage_layers(f.num_layers + extra, c["pp"], np.ones_like(c["pp"]))
        ok |= (st.lightest >= vpp) & (st.fullest % vpp == 0)
    return ok


def _microbatches(f: Facts, c: Columns) -> np.ndarray:
    return f.global_batch // (c["dp"] * c["mbs"])


def _rounds(f: Facts, c: Columns) -> np.ndarray:
    """What the micro-batches of an interleaved schedule must divide into: pp (Megatron-Core asserts
    num_microbatches % pp == 0), or under torch's ScheduleInterleaved1F1B its rounds, max(1, m // pp)
    (torch 2.13 distributed/pipelining/schedules.py:2935-2942)."""
    if not f.torch_pipeline:
        return c["pp"]
    return np.maximum(_microbatches(f, c) // c["pp"], 1)


def _vpp_microbatches_message(f: Facts, v: Mapping[str, int]) -> str:
    m = int(_microbatches(f, _one(v))[0])
    if not f.torch_pipeline:
        return f"--vpp {v['vpp']}: interleaving needs micro-batches ({m}) divisible by pp ({v['pp']})"
    rounds = int(_rounds(f, _one(v))[0])
    return (f"--vpp {v['vpp']}: torch's ScheduleInterleaved1F1B, which torchtitan runs, needs micro-batches ({m}) "
            f"divisible by its rounds, max(1, {m} // pp {v['pp']}) = {rounds} (torch distributed/pipelining/"
            f"schedules.py:2935-2942); give micro-batches a multiple of pp, or fewer than 2 x pp")


def _split_text(f: Facts, pp: int) -> str:
    st = stage_layers(f.num_layers, np.array([pp]), np.array([1]))
    first, last = int(st.first[0]), int(st.last[0])
    if pp == 1:
        return f"one stage of {first}"
    middle = f" and {pp - 2} middle of {int(st.middle[0])}" if pp > 2 else ""
    return f"first {first}, last {last}{middle}"


def _rest_text(f: Facts, pp: int) -> str:
    """Why pp stages cannot each hold a layer: more stages than layers (any other pp splits, the middle ranks
    taking floor(L / pp) where ceil would leave the first and last nothing)."""
    return f"{pp} stages for {f.num_layers} layers"


def _pp_fix(f: Facts, pp: int) -> str:
    ok = next((p for p in range(min(pp - 1, f.num_layers), 1, -1) if _lighter_end(f, _one({"pp": p}))[0] >= 1), 1)
    return f"try --pp {ok}"


def _vpp_fix(f: Facts, v: Mapping[str, int]) -> str:
    most = int(_lighter_end(f, _one(v))[0])
    full = int(_fullest(f, v["pp"])[0])
    fits = [d for d in range(2, most + 1) if full % d == 0]
    accounted = ""
    if 0 in f.split_units and bool(_splits(dataclasses.replace(f, split_units=(2,)), _one(v), v["vpp"])[0]):
        units = f.num_layers + 2
        accounted = (f", or count the embedding and loss as a layer each (--account-for-embedding "
                     f"--account-for-loss: {units} units, {int(_fullest(f, v['pp'], 2)[0])} on the fullest rank)")
    if not fits:
        return "set --vpp 1, or give an explicit --pipeline-layout" + accounted
    return f"try --vpp {min(fits, key=lambda d: (abs(d - v['vpp']), d))}" + accounted


def _cp_fix(f: Facts, cp: int) -> str:
    """The nearest sequence length 2 x cp divides, and the largest divisor of cp that splits this one."""
    up = -(-f.seq_len // (2 * cp)) * 2 * cp
    smaller = next((c for c in range(cp - 1, 1, -1) if cp % c == 0 and f.seq_len % (2 * c) == 0), None)
    return f"try --seq-len {up}" + (f", or --cp {smaller}" if smaller else "")


def _batch_fix(global_batch: int, dp: int, mbs: int) -> str:
    """The nearest global batches dp x micro-batch divides (and micro-batch 1 when it divides dp's share)."""
    unit = dp * mbs
    down, up = global_batch // unit * unit, -(-global_batch // unit) * unit
    sizes = " or ".join(str(b) for b in dict.fromkeys(b for b in (down, up) if b > 0))
    fix = f"try --global-batch {sizes}"
    if mbs > 1 and global_batch % dp == 0:
        fix += ", or --mbs 1"
    return fix


def sp_splits(seq_len: int, tp, cp):
    """Whether sequence parallelism can split each CP rank's share of the sequence over the TP ranks (numbers or
    arrays): tp x cp divides the sequence (Megatron-Core asserts it at the first forward).  The search turns SP on
    only there (search.enumerate_layouts), and `evaluate` refuses it elsewhere (evaluate.check_layout)."""
    return seq_len % (np.asarray(cp) * np.asarray(tp)) == 0


def _a2a_heads_message(f: Facts, tp: int, cp: int) -> str:
    """Which heads tp x cp does not divide under Ulysses (the query heads, else Transformer Engine's K/V heads)."""
    queries = f.num_heads % (tp * cp) != 0
    what = (f"{f.num_heads} attention heads" if queries else f"{f.num_kv_heads} K/V heads (Transformer Engine's a2a "
                                                               f"splits each TP rank's K/V heads over the CP ranks)")
    return (f"--cp {cp} with --cp-comm-type a2a: tp x cp = {tp * cp} does not divide the {what} of {f.model_name}; "
            f"pick tp x cp from the divisors of {f.num_heads if queries else f.num_kv_heads}, or --cp-comm-type p2p")


def _divisors(n: int, keep=lambda d: True) -> str:
    """The divisors of n that `keep` accepts, in words ("1, 2, 4 or 8"): the values a degree that must divide n can
    take (an error names them as its fix)."""
    ds = [str(d) for d in range(1, n + 1) if n % d == 0 and keep(d)]
    return ds[0] if len(ds) == 1 else f"{', '.join(ds[:-1])} or {ds[-1]}"


def _rule(name: str, reads: str, reason: str, holds, message) -> Rule:
    return Rule(name=name, reads=frozenset(reads.split()), reason=reason, holds=holds, message=message)


RULES: tuple[Rule, ...] = (
    _rule("tp_heads", "tp",
          "each TP rank computes whole attention heads (Megatron splits the heads over tp)",
          lambda f, c: f.num_heads % c["tp"] == 0,
          lambda f, v: f"--tp {v['tp']} does not divide the {f.num_heads} attention heads of {f.model_name}; "
                       f"use --tp {_divisors(f.num_heads)}"),
    _rule("tp_kv_heads", "tp",
          "KV heads are split whole over TP ranks, or each is replicated on a whole number of them",
          lambda f, c: (f.num_kv_heads % c["tp"] == 0) | (c["tp"] % f.num_kv_heads == 0),
          lambda f, v: f"--tp {v['tp']} and the {f.num_kv_heads} KV heads of {f.model_name}: one must divide the "
                       f"other; use --tp "
                       f"{_divisors(f.num_heads, lambda d: f.num_kv_heads % d == 0 or d % f.num_kv_heads == 0)}"),
    _rule("cp_sequence", "cp",
          "load-balanced ring attention cuts the sequence into 2 x cp equal chunks",
          lambda f, c: (c["cp"] == 1) | (f.seq_len % (2 * c["cp"]) == 0),
          lambda f, v: f"--cp {v['cp']}: sequence {f.seq_len} must split into 2 x cp equal chunks; "
                       f"{_cp_fix(f, v['cp'])}"),
    _rule("cp_attention", "cp",
          "Transformer Engine's context parallelism runs the model's attention (no sinks; no ring beside a window)",
          lambda f, c: (c["cp"] == 1) | (not f.cp_refused),
          lambda f, v: f"--cp {v['cp']}: {f.cp_refused}; or use --cp 1"),
    _rule("cp_a2a_heads", "tp cp",
          "Ulysses' all-to-all gives each of the tp x cp ranks whole attention heads (DeepSpeed's DistributedAttention "
          "and Transformer Engine's a2a split the heads over the CP group)",
          lambda f, c: (c["cp"] == 1) | (not f.cp_a2a) | (
              (f.num_heads % (c["tp"] * c["cp"]) == 0)
              & ((not f.cp_a2a_te) | (f.num_kv_heads % (c["tp"] * c["cp"]) == 0))),
          lambda f, v: _a2a_heads_message(f, v["tp"], v["cp"])),
    _rule("dense_no_experts", "ep etp",
          "a model without experts has nothing to shard over ep or etp",
          lambda f, c: (f.num_experts > 0) | ((c["ep"] == 1) & (c["etp"] == 1)),
          lambda f, v: f"--ep {v['ep']} --etp {v['etp']}: {f.model_name} has no experts; both must be 1"),
    _rule("ep_experts", "ep",
          "each EP rank holds the same number of whole experts",
          lambda f, c: max(f.num_experts, 1) % c["ep"] == 0,
          lambda f, v: f"--ep {v['ep']} does not divide the {max(f.num_experts, 1)} experts of {f.model_name}; "
                       f"use --ep {_divisors(max(f.num_experts, 1))}"),
    _rule("etp_tp", "etp tp",
          "experts run unsharded (etp 1) or sharded like the dense layers (etp = tp)",
          lambda f, c: (c["etp"] == 1) | (c["etp"] == c["tp"]),
          lambda f, v: f"--etp {v['etp']}: expert tensor parallelism is 1 or equal to tp ({v['tp']})"),
    _rule("ep_ranks", "tp cp dp ep etp",
          "experts are sharded over the tp x cp x dp ranks of a stage (Megatron-Core's RankGenerator)",
          lambda f, c: (c["tp"] * c["cp"] * c["dp"]) % (c["ep"] * c["etp"]) == 0,
          lambda f, v: f"ep ({v['ep']}) * etp ({v['etp']}) = {v['ep'] * v['etp']} does not divide tp ({v['tp']}) * "
                       f"cp ({v['cp']}) * dp ({v['dp']}) = {v['tp'] * v['cp'] * v['dp']}: experts are sharded over the "
                       f"tp x cp x dp ranks of a stage; pick ep * etp from the divisors of "
                       f"{v['tp'] * v['cp'] * v['dp']}"),
    _rule("batch_split", "dp mbs",
          "every data-parallel replica runs the same whole number of micro-batches",
          lambda f, c: f.global_batch % (c["dp"] * c["mbs"]) == 0,
          lambda f, v: f"global batch {f.global_batch} is not a multiple of dp ({v['dp']}) * micro-batch "
                       f"({v['mbs']}) = {v['dp'] * v['mbs']}; {_batch_fix(f.global_batch, v['dp'], v['mbs'])}"),
    _rule("pp_layers", "pp",
          "every pipeline rank holds at least one layer (middle ranks ceil(L / pp), first and last the rest; floor "
          "where ceil leaves them none)",
          lambda f, c: _splits(f, c) | f.explicit_pipeline,
          lambda f, v: f"--pp {v['pp']} --vpp {v['vpp']}: {f.num_layers} layers cannot be split that way (every "
                       f"stage needs a layer; {_rest_text(f, v['pp'])}); {_pp_fix(f, v['pp'])}"),
    _rule("vpp_needs_pp", "vpp pp",
          "interleaving splits pipeline stages into model chunks, so it needs more than one stage",
          lambda f, c: (c["vpp"] == 1) | (c["pp"] > 1),
          lambda f, v: f"vpp ({v['vpp']}) > 1 needs pp > 1 (interleaving splits pipeline stages); set vpp 1"),
    _rule("vpp_layers", "vpp pp",
          "every virtual stage holds at least one layer and the full stages split evenly into vpp chunks "
          "(Megatron's default split asserts it; uneven chunks need an explicit --pipeline-layout)",
          lambda f, c: (c["vpp"] == 1) | f.explicit_pipeline | _splits(f, c, c["vpp"]),
          lambda f, v: f"--pp {v['pp']} --vpp {v['vpp']}: {f.num_layers} layers cannot be split that way "
                       f"(interleaving needs at least vpp layers on each stage and the full stages' "
                       f"{int(_fullest(f, v['pp'])[0])} layers in vpp equal chunks: {_split_text(f, v['pp'])}); "
                       f"{_vpp_fix(f, v)}"),
    _rule("vpp_two_stages", "vpp pp",
          "Megatron-LM interleaves 2 stages only with the pipeline transfers overlapped (overlap_p2p_comm)",
          lambda f, c: f.two_stage_interleaving | (c["pp"] != 2) | (c["vpp"] == 1),
          lambda f, v: f"--pp 2 --vpp {v['vpp']}: Megatron-LM refuses an interleaved schedule on 2 stages with the "
                       f"pipeline transfers exposed ('When interleaved schedule is used and p2p communication overlap "
                       f"is disabled, pipeline-model-parallel size should be greater than 2', core_v0.19.0 "
                       f"arguments.py:972-975); leave the overlap on, or use pp > 2 or vpp 1"),
    _rule("vpp_microbatches", "vpp pp dp mbs",
          "interleaved 1F1B runs micro-batches in groups of pp (Megatron: num_microbatches % pp == 0; torch's "
          "ScheduleInterleaved1F1B: in max(1, m // pp) equal rounds)",
          lambda f, c: (c["vpp"] == 1) | (_microbatches(f, c) % _rounds(f, c) == 0),
          lambda f, v: _vpp_microbatches_message(f, v)),
    _rule("pp_microbatches", "vpp pp dp mbs",
          "torch's Schedule1F1B (torchtitan without interleaving) needs at least pp micro-batches",
          lambda f, c: ~np.asarray(f.torch_pipeline) | (c["vpp"] > 1) | (_microbatches(f, c) >= c["pp"]),
          lambda f, v: f"--pp {v['pp']}: torch's Schedule1F1B, which torchtitan runs without interleaving, raises "
                       f"at start-up with fewer micro-batches ({int(_microbatches(f, _one(v))[0])}) than stages "
                       f"({v['pp']}) (torch distributed/pipelining/schedules.py:1020-1024); give a global batch of at "
                       f"least dp ({v['dp']}) x micro-batch ({v['mbs']}) x pp ({v['pp']}) = "
                       f"{v['dp'] * v['mbs'] * v['pp']}, or --vpp 2 (Interleaved1F1B runs fewer)"),
)
"""In the order `first_broken` checks them (cheapest to explain first; the wording of the messages is
pinned by tests)."""


def _one(values: Mapping[str, int]) -> dict[str, np.ndarray]:
    return {k: np.array([v], dtype=np.int64) for k, v in values.items()}


def layout_values(layout: Layout) -> dict[str, int]:
    """One layout as the rules' column names."""
    return {"tp": layout.tp, "cp": layout.cp, "ep": layout.ep, "etp": layout.etp, "pp": layout.pp,
            "vpp": layout.vpp, "dp": layout.dp, "mbs": layout.micro_batch_size}


def holds(facts: Facts, cols: Columns, rules: Collection[Rule] = RULES) -> np.ndarray:
    """(K,) True where every one of `rules` holds (all of them by default)."""
    ok = None
    for rule in rules:
        r = np.asarray(rule.holds(facts, cols), dtype=bool)
        ok = r if ok is None else ok & r
    if ok is None:
        return np.ones(len(next(iter(cols.values()))), dtype=bool)
    return ok


def completed_by(column: str, have: Collection[str]) -> tuple[Rule, ...]:
    """The rules that become checkable when `column` joins the columns `have`."""
    known = set(have) | {column}
    return tuple(r for r in RULES if column in r.reads and r.reads <= known)


def admit(facts: Facts, column: str, have: Collection[str]) -> Callable[[Columns, np.ndarray], np.ndarray]:
    """ok(rows, values) for the search's expansion step that adds `column` (with `values`) to rows that
    hold the columns `have`: the rules that step completes."""
    rules = completed_by(column, have)
    return lambda rows, values: holds(facts, ChainMap({column: values}, rows), rules)


def first_broken(facts: Facts, values: Mapping[str, int]) -> Rule | None:
    """The first rule one layout breaks, or None."""
    cols = _one(values)
    return next((r for r in RULES if not bool(np.asarray(r.holds(facts, cols)).reshape(-1)[0])), None)


def layout_error(model: ModelSpec, train: TrainingSpec, layout: Layout, recipe: Recipe | None = None,
                 runs_te: bool = True, torch_pipeline: bool = False) -> str | None:
    """The message of the first rule `layout` breaks for this model and job, or None if it breaks none; `runs_te`:
    the job's attention is Transformer Engine's (Megatron's files: False for torchtitan, DeepSpeed and MaxText);
    `torch_pipeline`: torch.distributed.pipelining runs the pipeline (torchtitan: Facts.torch_pipeline)."""
    framework = "torchtitan" if torch_pipeline else None  # a layout priced as given: no other start-up checks
    facts, values = Facts.of(model, train, recipe, framework=framework, runs_te=runs_te), layout_values(layout)
    rule = first_broken(facts, values)
    return None if rule is None else rule.message(facts, values)
