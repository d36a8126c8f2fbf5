"""Which GPU count a design runs a workload on: every whole-node count it can buy, chosen exactly.

The rule (README "Choosing the GPU count"):

1. Candidates: every count of whole nodes up to what the design buys (`candidate_counts`).
2. Layouts: a count is kept only when the planner's own layout rules admit a layout on it (the
   search's `enumerate_layouts`: tp divides the heads, tp*cp*pp divides the count, pp splits the layers,
   dp = count/(tp*cp*pp) divides the global batch, the experts' rules...).  No plan is run for this, and
   `may_have_layout` rules out about half the counts by arithmetic before any enumeration.
3. Bound: each kept count gets a lower bound of its best step (`step_lower_bound`, the bound the search's
   own branch and bound relies on, minimized over the count's layouts), hence of its time to train and of
   any objective (each is non-decreasing in the time to train for a fixed count).
4. Branch and bound: counts are planned in the order of their objective bound; planning stops when the next
   bound is above the best objective found (ties within `TIE_REL`).  A count left unplanned cannot beat the
   chosen one, so the choice is the one planning every count would make, without planning most of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from placement.errors import InputError, PlacementInfeasible
from placement.specs import AcceleratorSpec, ClusterSpec, ModelSpec, TrainingSpec
from placement.sweep.price import bought_gpus, meets, price, score
from placement.sweep.spec import DesignSpec, Objective, SweepSpec, WorkloadSpec
from placement.topology import MAX_GPUS

TIE_REL = 1e-5
"""Plans print 6 significant digits: a count whose bound is within this of the best is planned, not skipped."""


def purchase_unit(cluster: ClusterSpec) -> int:
    """GPUs a budget buys at a time: a whole scale-up domain (a DGX node, an NVL72 rack)."""
    return max(cluster.gpus_per_node, cluster.scale_up.size)


def racks_for(cluster: ClusterSpec, gpus: int, segment: int | None) -> int:
    """Purchase units (`purchase_unit`) a job of `gpus` occupies: its nodes in runs of `segment` (SLURM `sbatch
    --segment`), each run inside one scale-up domain, so a domain of R nodes holds R // segment runs (an NVL72 rack
    of 18 trays one 16-tray segment: 1,408 trays in segments of 16 take 88 racks, not the 79 they would fill);
    None: domains filled whole."""
    unit = purchase_unit(cluster)
    gph = cluster.gpus_per_node
    if unit <= gph or not segment:
        return -(-gpus // unit)
    runs = -(-(gpus // gph) // segment)
    return -(-runs // (unit // gph // segment))


def sweep_segment(cluster: ClusterSpec, gpus: int, units: int) -> int | None:
    """The segment a sweep plans `gpus` with on a design of `units` purchase units: the cluster's default (None,
    Topology's rule: the largest divisor of the node count up to segment_nodes) where its runs fit in those units,
    else 0, the job's nodes on whole domains in order (the design is the buyer's own: nothing else holds its racks).
    A user trial: 5,632 GB200 GPUs were priced in 16-tray segments, 88 racks' worth, on a budget of 85."""
    from placement.topology import _resolve_segment

    if purchase_unit(cluster) <= cluster.gpus_per_node or cluster.segment_nodes is None:
        return None
    return None if racks_for(cluster, gpus, _resolve_segment(cluster, gpus, None)) <= units else 0


def units_for(cluster: ClusterSpec, gpus: int, units: int) -> int:
    """Purchase units a job of `gpus` takes with the segment the sweep plans it with (sweep_segment)."""
    from placement.topology import _resolve_segment

    seg = sweep_segment(cluster, gpus, units)
    return racks_for(cluster, gpus, _resolve_segment(cluster, gpus, None) if seg is None else None)


def not_whole_units(design: str, gpus: int, cluster: ClusterSpec, unit: int) -> str:
    """Why a design's `gpus` cannot be bought: a purchase is whole units (`purchase_unit`), a node or, where the
    scale-up domain spans several nodes (an NVL72 rack: 18 trays of 4 GPUs), a whole domain.  Names the nearest
    counts that can be, below (when there is one) and above."""
    node = cluster.gpus_per_node
    if unit == node:
        what, one, many = f"{cluster.name} nodes ({node} GPUs each)", "node", "nodes"
    else:
        what = (f"{cluster.name} scale-up domains ({unit} GPUs each: {unit // node} nodes of {node} GPUs on one "
                f"{cluster.scale_up.name} domain, a rack)")
        one, many = "rack", "racks"
    below, above = gpus // unit, gpus // unit + 1
    options = [f"{k * unit} ({k} {one if k == 1 else many})" for k in (below, above) if k >= 1]
    return (f"design {design!r}: gpus {gpus} is not a whole number of {what}; a purchase study buys whole "
            f"{many}, so use {' or '.join(options)}")


def candidate_counts(sweep: SweepSpec, design: DesignSpec, cluster: ClusterSpec) -> tuple[tuple[int, ...], int, int]:
    """(GPU counts the job may use, ascending; GPUs per purchase unit; most GPUs the design buys).  A job runs
    on whole nodes (hosts) of the GPUs bought; a given `gpus` must be whole purchase units and is bought as given."""
    node = cluster.gpus_per_node
    if design.gpus is not None:
        if design.gpus > MAX_GPUS:
            raise InputError(
                f"design {design.name!r}: gpus {design.gpus:,} is more than the {MAX_GPUS:,} placement plans; "
                "check the number for a typo"
            )
        unit = purchase_unit(cluster)
        if design.gpus % unit:
            raise InputError(not_whole_units(design.name, design.gpus, cluster, unit))
        if sweep.budget is not None and design.capex_per_gpu is not None \
                and design.gpus * design.capex_per_gpu > sweep.budget:
            # a user trial: `--set budget=10000000` printed the budget while every design bought 27-38 M of GPUs
            raise InputError(
                f"design {design.name!r}: gpus {design.gpus:,} x capex_per_gpu {design.capex_per_gpu:,.0f} = "
                f"{design.gpus * design.capex_per_gpu:,.0f}, more than the budget {sweep.budget:,.0f}; drop the "
                f"design's gpus to let the budget decide, or raise the budget")
        return tuple(range(node, design.gpus + 1, node)), unit, design.gpus
    unit = purchase_unit(cluster)
    affordable = sweep.budget / design.capex_per_gpu
    if affordable > MAX_GPUS:
        raise InputError(
            f"design {design.name!r}: budget {sweep.budget:,.0f} buys {affordable:,.0f} GPUs at "
            f"{design.capex_per_gpu:,} each, more than the {MAX_GPUS:,} placement plans; check the budget and "
            "capex_per_gpu, or give gpus"
        )
    units = math.floor(sweep.budget / (design.capex_per_gpu * unit))
    if units < 1:
        raise InputError(
            f"design {design.name!r}: budget {sweep.budget:,.0f} buys {affordable:,.1f} GPUs, "
            f"less than one {unit}-GPU unit of {cluster.name}; raise the budget or give gpus"
        )
    return tuple(range(node, units * unit + 1, node)), unit, units * unit


def count_bounds(model: ModelSpec, train: TrainingSpec, cluster: ClusterSpec, acc: AcceleratorSpec,
                 counts: tuple[int, ...], units: int | None = None) -> dict[int, float | None]:
    """Per count: a lower bound (s) of the best plan's step, or None when no layout exists on it; `units`: the
    purchase units the design buys, so each count is bounded on the segment it is planned with (sweep_segment)."""
    from placement.cost.step import step_lower_bound
    from placement.search import enumerate_layouts
    from placement.topology import Topology
    from placement.workload import workload

    w = workload(model)
    recipe, _ = _model_recipe(model)
    out: dict[int, float | None] = {}
    for n in counts:
        topo = Topology(cluster, acc, num_gpus=n,
                        segment_nodes=None if units is None else sweep_segment(cluster, n, units))
        cfg = _search_config(model, topo, recipe)
        if not may_have_layout(model, train, n):
            out[n] = None
            continue
        base = enumerate_layouts(w, model, train, n, cfg, min(cluster.gpus_per_node, n), None, sharded=False)
        if len(base) == 0:
            out[n] = None
            continue
        lb = step_lower_bound(w, train, topo, base, cfg.recipe, cfg.choices)
        out[n] = float(lb.min())
    return out


def _search_config(model: ModelSpec, topo, recipe, **kw):
    """What a sweep cell searches: as `plan` does with no recipe pinned, the layouts and the recipe choices the
    machine runs (cost.step.default_choices: MoE dispatchers, CUDA-graph scopes, TP and EP overlaps), under `recipe`,
    what the model file declares (_model_recipe: its MTP modules)."""
    from placement.cost.step import default_choices
    from placement.search import SearchConfig

    return SearchConfig(top_k=1, choices=default_choices(model.is_moe, topo, recipe), recipe=recipe, **kw)


def _model_recipe(model: ModelSpec):
    """The recipe and its sources a sweep cell prices `model` with: what `plan` takes with no flag or file."""
    from placement.frameworks import model_recipe
    from placement.specs.recipe import Recipe

    return model_recipe(model, Recipe(), {})


def may_have_layout(model: ModelSpec, train: TrainingSpec, n: int) -> bool:
    """False when the layout rules rule `n` GPUs out by arithmetic alone (no enumeration): a prime factor of
    n / gcd(n, batch) divides tp*cp*pp (dp divides both), so it must divide the heads (tp does), or half the
    sequence (2*cp divides it), or be at most the layers (pp: a layer on every stage).  A 1,048,576-GPU budget
    has 131,072 node counts; this skips about half of them at no cost."""
    rest = n // math.gcd(n, train.global_batch)
    return all(model.num_attention_heads % q == 0 or (train.seq_len // 2) % q == 0 or q <= model.num_layers + 2
               for q in _primes(rest))


def _primes(m: int) -> set[int]:
    out, p = set(), 2
    while p * p <= m:
        while m % p == 0:
            out.add(p)
            m //= p
        p += 1
    return out | ({m} if m > 1 else set())


def plan_count(model: ModelSpec, train: TrainingSpec, cluster: ClusterSpec, acc: AcceleratorSpec, n: int,
               segment: int | None = None) -> dict:
    """The best plan on `n` GPUs as a cache entry: {status, binding, message, plan}; `segment`: sweep_segment's."""
    from placement.planner import plan_job
    from placement.search import SWEEP_FIX_NAMES, searched_sources
    from placement.topology import Topology

    topo = Topology(cluster, acc, num_gpus=n, segment_nodes=segment)
    recipe, sources = _model_recipe(model)
    cfg = _search_config(model, topo, recipe, fix_names=SWEEP_FIX_NAMES)
    try:  # the plan's recipe_sources say what was searched, as `plan`'s do for the same job
        planned = plan_job(model, train, topo, cfg, None, with_rank_table=False,
                           recipe_sources=searched_sources(cfg, sources))
    except PlacementInfeasible as err:
        return {"status": "infeasible", "binding": err.binding, "message": str(err), "plan": None}
    return {"status": "ok", "binding": "", "message": "", "plan": planned.plans[0].model_dump(mode="json")}


class NeedPlan(Exception):
    """`choose` needs the plan of a count its plan source does not hold (the caller plans it, or asks a worker)."""


@dataclass(frozen=True)
class Choice:
    num_gpus: int
    """The count chosen (the largest count when none has a plan)."""
    num_gpus_bought: int
    entry: dict
    """Its plan entry (`plan_count`); status "infeasible" when no count has a plan."""
    deadline_met: bool | None
    counts: dict
    """How the candidates fared: considered, with_layout, planned, planned_ok, largest_with_layout."""
    idle_reason: str | None


def choose(design: DesignSpec, work: WorkloadSpec, train: TrainingSpec, objective: Objective,
           deadline_days: float | None, counts: tuple[int, ...], unit: int, most: int,
           bounds: dict[int, float | None], plan_of: Callable[[int], dict],
           units_of: Callable[[int], int] | None = None) -> Choice:
    """The count the objective picks (module docstring); `plan_of(n)` gives a count's plan entry or raises
    NeedPlan; `units_of(n)`: the purchase units a count takes (units_for; None: as many as its GPUs fill).
    Deadline: counts over it are not chosen; when every count is over it, the fastest is, flagged."""
    tokens_per_step = train.global_batch * train.seq_len
    laid = [n for n in counts if bounds.get(n) is not None]
    planned: dict[int, dict] = {}

    def bought_of(n: int) -> int:
        return bought_gpus(design, objective, n, unit, most, None if units_of is None else units_of(n))

    def fields(n: int, tokens_per_s: float) -> dict:
        return price(design, work, bought_of(n), n, tokens_per_s)

    def search(obj: Objective, deadline: float | None) -> int | None:
        cands = []
        for n in laid:
            f = fields(n, tokens_per_step / max(bounds[n], 1e-12))  # the bound's speed: no plan is faster
            if meets(deadline, f["time_to_train_s"]):
                cands.append((score(obj, f), n))
        cands.sort()
        best: tuple[float, int] | None = None
        for bound, n in cands:
            if best is not None and bound > best[0] * (1 + TIE_REL):
                break
            if n not in planned:
                planned[n] = plan_of(n)
            entry = planned[n]
            if entry["status"] != "ok":
                continue
            f = fields(n, entry["plan"]["tokens_per_s"])
            if not meets(deadline, f["time_to_train_s"]):
                continue
            if best is None or (score(obj, f), n) < best:
                best = (score(obj, f), n)
        return None if best is None else best[1]

    chosen, met = search(objective, deadline_days), None if deadline_days is None else True
    if chosen is None and deadline_days is not None:
        chosen = search(Objective.TIME, None)
        met = None if chosen is None else False
    summary = {"considered": len(counts), "with_layout": len(laid), "planned": len(planned),
               "planned_ok": sum(e["status"] == "ok" for e in planned.values()),
               "largest_with_layout": laid[-1] if laid else None}
    if chosen is None:
        n = counts[-1]
        return Choice(n, most, _no_plan(work, train, counts, laid, planned), met, summary, None)
    bought = bought_of(chosen)
    reason = None
    if bought > chosen:  # past a missed deadline the count was chosen by time to train, and so were the others passed
        reason = _idle_reason(work, train, Objective.TIME if met is False else objective, chosen, bought, counts,
                              bounds, planned, unit, design)
    return Choice(chosen, bought, planned[chosen], met, summary, reason)


def _no_plan(work: WorkloadSpec, train: TrainingSpec, counts: tuple[int, ...], laid: list[int],
             planned: dict[int, dict]) -> dict:
    if not laid:
        msg = (f"no GPU count from {counts[0]:,} to {counts[-1]:,} has a layout for global batch "
               f"{train.global_batch} and sequence {train.seq_len}: each degree must divide the count and dp the "
               f"batch; change global_batch or the design's size")
        return {"status": "infeasible", "binding": "divisibility", "message": msg, "plan": None}
    largest = max(planned) if planned else laid[-1]
    why = planned.get(largest, {}).get("message", "")
    msg = (f"none of the {len(laid)} GPU counts with a layout (largest {laid[-1]:,}) has a plan; "
           f"on {largest:,} GPUs: {why}")
    return {"status": "infeasible", "binding": planned.get(largest, {}).get("binding", "memory"), "message": msg,
            "plan": None}


def _idle_reason(work: WorkloadSpec, train: TrainingSpec, objective: Objective, used: int, bought: int,
                 counts: tuple[int, ...], bounds: dict[int, float | None], planned: dict[int, dict], unit: int,
                 design: DesignSpec) -> str:
    """Why the job leaves `bought - used` GPUs idle, counting what happened to every larger count."""
    larger = [n for n in counts if used < n <= bought]
    if not larger:  # a cost objective buys whole units: the rest of the last one
        filled = -(-used // unit) * unit
        if bought > filled:  # its segments take more units than its GPUs fill (racks_for)
            return (f"{bought - used:,} GPUs idle: the job uses {used:,} in SLURM segments (sbatch --segment, "
                    f"plan's default) of which each {unit}-GPU scale-up domain holds whole ones only, so it takes "
                    f"{bought // unit:,} domains where its GPUs would fill {filled // unit:,}; the row's command "
                    f"with --segment 0 prices it on whole domains")
        return (f"{bought - used:,} GPUs idle: the job uses {used:,}; GPUs are bought in whole {unit}-GPU units "
                f"(the scale-up domain)")
    no_layout = [n for n in larger if bounds.get(n) is None]
    no_fit = [n for n in larger if n in planned and planned[n]["status"] != "ok"]
    worse = [n for n in larger if n in planned and planned[n]["status"] == "ok"]
    bounded = [n for n in larger if bounds.get(n) is not None and n not in planned]
    parts = []
    if no_layout:
        parts.append(f"{len(no_layout)} {'has' if len(no_layout) == 1 else 'have'} no layout for global batch "
                     f"{train.global_batch} at sequence "
                     f"{train.seq_len} (each degree must divide the count, dp the batch)")
    if no_fit:
        parts.append(f"{len(no_fit)} {'has' if len(no_fit) == 1 else 'have'} no plan that fits in memory")
    if worse or bounded:
        by = "time to train" if objective is Objective.TIME else f"the {objective.value} objective"
        many = len(worse) + len(bounded)
        parts.append(f"{many} {'is' if many == 1 else 'are'} no better by {by} ({len(bounded)} shown by the step bound "
                     f"without planning)")
    with_layout = [n for n in larger if bounds.get(n) is not None]
    tail = (f"; the largest count with a layout is {with_layout[-1]:,}" if with_layout
            else f"; the largest count with a layout is {used:,}")
    return (f"{bought - used:,} of {bought:,} GPUs idle: of the {len(larger)} whole-node counts above "
            f"{used:,}, " + ", ".join(parts) + tail)
