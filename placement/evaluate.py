"""Estimate one given layout: the same vectorized cost model on an array of one."""

from __future__ import annotations

from placement.cost import rules
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.errors import InputError
from placement.plan import Plan, make_plan
from placement.specs import Layout, ModelSpec, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology
from placement.workload import workload


def check_layout(model: ModelSpec, train: TrainingSpec, layout: Layout) -> None:
    """The rules the search enumerates by (placement/cost/rules.py), as errors that name the value and the fix."""
    message = rules.layout_error(model, train, layout)
    if message is not None:
        raise InputError(message)


def evaluate_layout(model: ModelSpec, train: TrainingSpec, topo: Topology, layout: Layout,
                    recipe: Recipe | None = None, recipe_sources: dict[str, str] | None = None) -> Plan:
    """The layout priced under `recipe`, pinned (its recompute modules are the layout's selective ones)."""
    if layout.num_gpus != topo.num_gpus:
        raise InputError(f"layout uses {layout.num_gpus} GPUs but the cluster has {topo.num_gpus}")
    check_layout(model, train, layout)
    recipe = recipe or Recipe()
    batch = LayoutBatch.from_layouts([layout], recipe)
    est = estimate(workload(model), train, topo, batch, recipe)
    return make_plan(batch, est, 0, model, train, topo, recipe_sources)
