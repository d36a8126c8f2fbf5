"""`plan` end to end: search every layout, map the best few onto the machine, re-rank by mapped cost."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placement.cost.step import RecipeChoices, estimate
from placement.mapping.config import SolverConfig
from placement.mapping.groups import group_kinds
from placement.mapping.mapper import TIE_REL, baseline_mappings, block_order, map_layout
from placement.mapping.report import compact_mapping, crossings, rank_table
from placement.plan import Plan, make_plan, plan_recipe
from placement.search import SearchConfig, SearchResult, search
from placement.specs import ModelSpec, TrainingSpec
from placement.topology import Topology, intra_node_order
from placement.workload import workload


@dataclass(frozen=True)
class Planned:
    plans: list[Plan]
    search: SearchResult
    gpu_of_rank: list[np.ndarray]
    """The mapping of each plan, in plan order."""


RANK_TABLES_FOR_EVERY_PLAN_MAX_GPUS = 16_384
MAPPED_AT_LEAST = 5
"""Candidates the mapper re-ranks on an allocation whatever --top-k asks for (the default top-k): the best plan of a
smaller --top-k is the default's."""
RANK_TABLE_MAX_GPUS = 65_536
"""The full rank table (`mapping`, about 100 bytes a rank) goes in PLAN JSON for every plan up to the first
size and for the best one up to the second; past them `mapping_compact` alone (O(hosts)) keeps `plan --json`
under 10 MB at 131,072 GPUs; the other plans' rank tables are written as launch files with --plan-index K
--out DIR."""


def plan_job(model: ModelSpec, train: TrainingSpec, topo: Topology, search_cfg: SearchConfig,
             mapping: SolverConfig | None, with_rank_table: bool = True,
             recipe_sources: dict[str, str] | None = None,
             progress: Callable[[int], None] | None = None,
             search_progress: Callable[[int, int], None] | None = None,
             model_sources: dict[str, str] | None = None) -> Planned:
    """`mapping` None: the default innermost-first mapping (a regular catalog cluster, whose host order
    already follows the hierarchy); otherwise CP-SAT maps each of the top candidates.  `recipe_sources`:
    recipe field -> where its value came from (the plans' `recipe_sources`).  `progress(1)` after each plan
    mapped; `search_progress(priced, total)` while a whole space is priced in chunks (search.search);
    `model_sources`: model field -> why `model` differs from the one the user gave (plan.make_plan)."""
    # on an allocation the search ranks the candidates with the hosts in block order, an order the mapper always
    # prices: ranked in the order the hosts came in, a host list far from any good order (trays listed alternately
    # across NVL72 racks) kept a candidate that only a reordering makes best out of a small --top-k (a user trial)
    searched_on = topo.with_mapping(block_order(topo)) if mapping is not None else topo
    # ...and the mapper re-ranks at least MAPPED_AT_LEAST of them, so a small --top-k gives the same best plan as the
    # default (a user trial: --top-k 1-3 returned a plan 0.25 % slower than --top-k 5, whose 4th candidate only
    # a host reordering made best)
    wide = search_cfg if mapping is None or search_cfg.top_k >= MAPPED_AT_LEAST else \
        dataclasses.replace(search_cfg, top_k=MAPPED_AT_LEAST)
    result = search(model, train, searched_on, wide, search_progress)
    w = workload(model)
    rows = []
    solve = ({int(i) for i in result.ranked if not _no_order_is_faster(w, train, topo, result, int(i))}
             if mapping is not None else set())
    if solve:  # one time budget for the whole plan, shared by the candidates that need a solve
        share = len(solve)
        mapping = dataclasses.replace(mapping, deterministic_time_limit=mapping.deterministic_time_limit / share,
                                      time_limit_s=mapping.time_limit_s / share)
    for order, i in enumerate(result.ranked):
        i = int(i)
        layout = result.batch.layout(i)
        kinds = group_kinds(layout, result.estimates, i)
        if mapping is None:
            plan = make_plan(result.batch, result.estimates, i, model, train, topo, recipe_sources, model_sources)
            gpu_of_rank = np.arange(topo.num_gpus)
            solver = {"status": "DEFAULT", "chosen": "innermost_first",
                      "note": "regular catalog cluster: ranks fill the hierarchy innermost-first"}
            base = {"allocation_order": plan.step_time_s, "megatron_order": plan.step_time_s}
        elif i not in solve:
            # the allocation order already prices as low as any host order can (the flat-fabric bound):
            # no solve can change this plan's step or rank
            one, priced = _pricer(w, train, result, i)
            plan = make_plan(one, priced(topo), 0, model, train, topo, recipe_sources, model_sources)
            gpu_of_rank = np.arange(topo.num_gpus)
            solver = {"status": "SKIPPED", "chosen": "allocation_order",
                      "note": "no host order prices below the allocation order (the step on a flat fabric is "
                              "the same): no CP-SAT solve"}
            base = {k: float(priced(topo.with_mapping(g)).step_time_s[0]) for k, g in baseline_mappings(topo).items()}
        else:
            # the mapper chooses among the orders as the candidate runs: its own recipe and recompute modules
            one, priced = _pricer(w, train, result, i)
            ml = map_layout(w, train, topo, layout, result.estimates, i, mapping, price=priced)
            sol = ml.solution
            mapped_est = ml.estimate  # priced by `priced` on the chosen mapping
            plan = make_plan(one, mapped_est, 0, model, train, topo, recipe_sources, model_sources)
            gpu_of_rank = ml.gpu_of_rank
            solver = {"status": sol.status, "chosen": ml.chosen, "objective_s": _f(sol.objective_s),
                      "bound_s": _f(sol.bound_s), "gap": _f(sol.gap), "wall_s": round(sol.wall_s, 3),
                      "chunk_blocks": sol.chunk_blocks,
                      "variables": sol.num_variables, "solver": sol.solver, "random_seed": mapping.random_seed,
                      "num_workers": mapping.num_workers, "deterministic_time_limit": mapping.deterministic_time_limit}
            base = {k: float(priced(topo.with_mapping(g)).step_time_s[0])
                    for k, g in baseline_mappings(topo).items() if k in ml.baselines}
        gpu_of_rank = intra_node_order(topo, layout.tp, gpu_of_rank)
        plan = plan.model_copy(update={
            "mapping_solver": solver,
            "baselines": {k: {"step_time_s": float(f"{v:.6g}")} for k, v in base.items()},
            "crossings": crossings(topo.with_mapping(gpu_of_rank), kinds),
        })
        rows.append((plan.step_time_s, order, plan, gpu_of_rank, layout))
        if progress is not None:
            progress(1)
    rows.sort(key=lambda r: (r[0], r[1]))  # re-rank by mapped step time; ties keep search order
    rows = rows[:search_cfg.top_k]
    plans = []
    for k, (_, _, plan, gpu_of_rank, layout) in enumerate(rows):
        if not with_rank_table:
            plans.append(plan)
            continue
        plan = plan.model_copy(update={"mapping_compact": compact_mapping(topo, gpu_of_rank)})
        if topo.num_gpus <= RANK_TABLES_FOR_EVERY_PLAN_MAX_GPUS or (k == 0 and topo.num_gpus <= RANK_TABLE_MAX_GPUS):
            plan = plan.model_copy(update={"mapping": rank_table(topo, gpu_of_rank, layout, model.is_moe)})
        else:
            limit = RANK_TABLE_MAX_GPUS if k == 0 else RANK_TABLES_FOR_EVERY_PLAN_MAX_GPUS
            plan = plan.model_copy(update={"mapping_solver": plan.mapping_solver | {
                "rank_table": f"left out above {limit:,} GPUs (mapping_compact holds the same mapping); "
                              f"--plan-index {k + 1} --out DIR writes this plan's host order and rankfile"}})
        plans.append(plan)
    return Planned(plans=plans, search=result, gpu_of_rank=[r[3] for r in rows])


def _no_order_is_faster(w, train: TrainingSpec, topo: Topology, result: SearchResult, i: int) -> bool:
    """Candidate i's step in allocation order equals its step on the flattened fabric, a lower bound over host
    orders (Topology.flattened): mapping it cannot help.  Never where the scale-up domain holds several hosts
    (GB200 NVL72): the host order decides which trays share NVLink, and the expert all-to-all's efficiencies inside
    and beyond the domain differ, so no flattened machine bounds every order (a user trial: trays listed alternately
    across two racks were skipped, and priced 8.9 % above the same hosts sorted; a review: flattening the rack level
    too priced a DeepEP layout below orders that run faster)."""
    if topo.scale_up_spans_hosts:
        return False
    flat = topo.flattened()
    if flat is topo:
        return True
    _, priced = _pricer(w, train, result, i)
    return float(priced(flat).step_time_s[0]) >= float(priced(topo).step_time_s[0]) * (1.0 - TIE_REL)


def _pricer(w, train: TrainingSpec, result: SearchResult, i: int):
    """(candidate i as a one-row batch, a function pricing it on a topology under its own recipe and recompute
    modules, pinned)."""
    one, recipe = result.batch.take(np.array([i])), plan_recipe(result.batch, result.estimates, i)

    def priced(t: Topology):
        return estimate(w, train, t, one, recipe, RecipeChoices.pinned(recipe))

    return one, priced


def _f(x: float) -> float | None:
    return None if x != x else round(float(x), 6)  # NaN (no solution) -> null
