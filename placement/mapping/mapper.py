"""Map a planned layout onto the machine, price it as mapped, and price the plain launch orders.

Baselines, each the same layout priced on the same machine:
- `allocation_order`: ranks fill hosts in the order the allocation lists them (node_rank = position
  in the host list), as torchrun or srun would launch them.
- `megatron_order`: Megatron-Core's default rank order (tp-cp-ep-dp-pp, tp innermost) on hosts sorted
  by name, as a launcher that sorts its node list does.  With a sorted host list the two coincide.
Besides CP-SAT's answer and the baselines, `pipeline_order` (whole pipelines side by side in each leaf) is priced too;
the cheapest of them all is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from placement.cost.batch import LayoutBatch
from placement.cost.step import Estimates, estimate
from placement.loaders.hostlist import hostlist_sort_key
from placement.mapping.config import SolverConfig
from placement.mapping.groups import group_kinds
from placement.specs import Layout, TrainingSpec
from placement.topology import Topology
from placement.workload import Workload

if TYPE_CHECKING:
    from placement.mapping.cpsat import MappingSolution


@dataclass(frozen=True)
class MappedLayout:
    layout: Layout
    solution: MappingSolution
    chosen: str
    """Which mapping was kept: "cpsat", or a baseline the exact cost model prices faster."""
    gpu_of_rank: np.ndarray
    estimate: Estimates
    """Estimate of the layout on the mapped machine (arrays of one)."""
    baselines: dict[str, float]
    """Step time of the same layout under each plain launch order."""
    topo: Topology
    """The machine with the mapping applied."""


def _price(w: Workload, train: TrainingSpec, topo: Topology, layout: Layout) -> Estimates:
    return estimate(w, train, topo, LayoutBatch.from_layouts([layout]))


def host_order_mapping(topo: Topology, host_order: np.ndarray) -> np.ndarray:
    """gpu_of_rank when node block k runs on host host_order[k] with local GPUs in order."""
    gph = topo.gpus_per_host
    ranks = np.arange(topo.num_gpus)
    return (np.asarray(host_order)[ranks // gph] * gph + ranks % gph).astype(np.int64)


def hosts_by_block(topo: Topology) -> np.ndarray:
    """The hosts sorted by their blocks: the top tier first, then each tier below down to the scale-up domain, so
    that every block's hosts are consecutive; hosts of the same blocks keep the allocation order (a stable sort)."""
    blocks = topo.block_of[:, ::topo.gpus_per_host]  # each host's block at every level (its first GPU's)
    return np.lexsort(tuple(blocks[j] for j in range(blocks.shape[0])))  # the last key (top tier) sorts first


def block_order(topo: Topology) -> np.ndarray:
    """gpu_of_rank with the hosts in block order (`hosts_by_block`): the order a scheduler gives a contiguous
    allocation in, whatever order the host list came in."""
    return host_order_mapping(topo, hosts_by_block(topo))


PREFERENCE = ("allocation_order", "megatron_order", "block_order", "cpsat", "pipeline_order")
"""Which mapping is kept among those that price the same: the one that moves fewest hosts."""
TIE_REL = 1e-9
"""Step times this close (relative) price the same: the ranking's rounding, as the search's TIE_S."""


def baseline_mappings(topo: Topology) -> dict[str, np.ndarray]:
    num_hosts = -(-topo.num_gpus // topo.gpus_per_host)  # a job on part of one node still has its host
    by_name = np.array(sorted(range(num_hosts), key=lambda h: hostlist_sort_key(topo.host_names[h])))
    return {"allocation_order": host_order_mapping(topo, np.arange(num_hosts)),
            "megatron_order": host_order_mapping(topo, by_name)}


def pipeline_order(topo: Topology, layout: Layout) -> np.ndarray | None:
    """gpu_of_rank with each pipeline's stages side by side: the hosts sorted by their blocks (leaf, then the tiers
    above, so that a leaf's hosts are consecutive), and node k of pipeline stage s (k-th of its stage's nodes, pp
    outermost in rank order) on the (k x pp + s)-th of them, so a leaf holds whole pipelines and the point-to-point
    sends stay inside it while the data-parallel groups spread over the leaves.  CP-SAT's proxy weighs each group's
    bytes, not what of them the step hides, so where the gradients' reduction hides behind backward and the pipeline's
    sends do not it keeps the stages apart (a user trial: a leaf-aligned pipeline order priced 0.018 s a step below
    the mapper's on 4,096 H100 under a 2:1 spine).  None where a stage is not whole nodes."""
    gph = topo.gpus_per_host
    per_stage = layout.num_gpus // layout.pp
    num_hosts = -(-topo.num_gpus // gph)
    if layout.pp < 2 or per_stage % gph or num_hosts * gph != layout.num_gpus:
        return None
    nodes = per_stage // gph
    by_block = hosts_by_block(topo)
    n = np.arange(num_hosts)  # rank-space node blocks: stage n // nodes, its (n % nodes)-th node
    return host_order_mapping(topo, by_block[(n % nodes) * layout.pp + n // nodes])


def map_layout(w: Workload, train: TrainingSpec, topo: Topology, layout: Layout, est: Estimates, i: int,
               cfg: SolverConfig | None = None,
               price: Callable[[Topology], Estimates] | None = None) -> MappedLayout:
    """Solve the mapping for candidate `i` (priced unmapped in `est`) and price it mapped.

    The solver's objective is a proxy (traffic pushed up the tree); the exact cost model has the last
    word, so a plain launch order that it prices faster or the same is kept instead (and reported as
    chosen): a reordering must pay for itself.  `price` prices the layout on a mapped machine under the plan's
    own recipe (default: the default recipe), so the order kept is the one that is fastest as the plan runs (a
    pipeline whose transfers overlap compute gains nothing from an order that shortens them).
    """
    from placement.mapping.cpsat import solve_mapping  # OR-Tools loads only when a mapping is solved

    solution = solve_mapping(topo, group_kinds(layout, est, i), cfg or SolverConfig())
    options = {"cpsat": solution.gpu_of_rank, **baseline_mappings(topo), "block_order": block_order(topo)}
    aligned = pipeline_order(topo, layout)
    if aligned is not None:
        options["pipeline_order"] = aligned
    price = price or (lambda t: _price(w, train, t, layout))
    priced = {name: price(topo.with_mapping(g)) for name, g in options.items()}
    steps = {name: float(e.step_time_s[0]) for name, e in priced.items()}
    # a reordering is kept only when it prices faster: ties (within TIE_REL) keep the allocation order, then
    # Megatron's order, so hosts.txt does not move hosts for nothing
    best = min(steps.values())
    chosen = next(name for name in PREFERENCE if steps.get(name, np.inf) <= best * (1.0 + TIE_REL))
    return MappedLayout(layout=layout, solution=solution, chosen=chosen, gpu_of_rank=options[chosen],
                        estimate=priced[chosen],
                        baselines={k: v for k, v in steps.items() if k in ("allocation_order", "megatron_order")},
                        topo=topo.with_mapping(options[chosen]))
