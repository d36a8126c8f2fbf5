"""The communicating groups of a layout, in rank space, with what crossing each level costs them.

Ranks follow the layout's mesh (tp innermost, then cp, dp, pp; experts etp, ep, edp), as
Megatron-Core's RankGenerator orders them (reference/frameworks.md).  A group kind's weight at level j
is the time one member's traffic per step would take at level j's bandwidth: crossing into level j
is what the mapper tries to avoid for the heaviest groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost.step import Estimates
from placement.specs import Layout
from placement.topology import Topology


@dataclass(frozen=True)
class GroupKind:
    name: str
    stride: int
    size: int
    bytes_per_step: float
    """Bytes one member sends per step for this kind of group."""
    wrap: bool = False
    """Point-to-point only: the last stage also sends to the first (interleaved virtual stages: Megatron-Core's next
    rank wraps, core_v0.19.0 parallel_state.py `_PIPELINE_GLOBAL_RANKS[(rank_in_pipeline + 1) % world_size]`, what
    cost.comm.pp_term prices); not DualPipe, whose two directions run along the chain."""

    def ranks(self, num_ranks: int) -> np.ndarray:
        """Rows = groups of this kind, columns = member ranks (the pipeline's neighbouring pairs along the chain:
        what the mapper weighs)."""
        if self.name == "pp":  # point-to-point: each neighbouring pair of stages is its own group
            stages = np.arange(num_ranks).reshape(self.size, -1)  # pp outermost
            return np.stack([stages[:-1].ravel(), stages[1:].ravel()], axis=1)
        return (np.arange(num_ranks, dtype=np.int64).reshape(-1, self.size, self.stride)
                .transpose(0, 2, 1).reshape(-1, self.size))

    def links(self, num_ranks: int) -> np.ndarray:
        """The groups the job's traffic runs over, as `ranks`, with the pipeline's wrap-around pairs (last stage to
        first) where `wrap`: what the crossings table and the audit's examples count."""
        rows = self.ranks(num_ranks)
        if self.name != "pp" or not self.wrap:
            return rows
        stages = np.arange(num_ranks).reshape(self.size, -1)
        return np.concatenate([rows, np.stack([stages[-1], stages[0]], axis=1)])

    def seconds_at(self, topo: Topology) -> np.ndarray:
        """Per level: this kind's per-member traffic at that level's bandwidth (the mapper's weights)."""
        return np.array([self.bytes_per_step / lv.bandwidth_bytes_per_s for lv in topo.levels])


def group_kinds(layout: Layout, est: Estimates, i: int) -> list[GroupKind]:
    """The group kinds of candidate `i` that move bytes (size > 1)."""
    t = {k: float(v[i]) for k, v in est.traffic_bytes.items()}
    shard = layout.cp * (layout.shard_degree if layout.zero_stage == 3 else layout.dp)
    kinds = [
        GroupKind("tp", 1, layout.tp, t["tp"]),
        GroupKind("cp", layout.tp, layout.cp, t["cp"]),
        GroupKind("ep", layout.etp, layout.ep, t["ep"]),
        GroupKind("dp", layout.tp, shard, t["dp"]),  # HSDP: the shard group carries the ZeRO-3 traffic
        GroupKind("dp_replica", layout.tp * shard, layout.dp * layout.cp // shard, t["dp_replica"]),
        GroupKind("edp", layout.ep * layout.etp, layout.edp_shard, t["edp"]),  # HSDP: the experts' shard group
        GroupKind("pp", layout.tp * layout.cp * layout.dp, layout.pp, t["pp"],
                  wrap=layout.vpp > 1 and layout.pp > 2 and not _dualpipe(est)),
    ]
    return [k for k in kinds if k.size > 1 and k.bytes_per_step > 0]


def _dualpipe(est: Estimates) -> bool:
    """Whether the estimate's recipe runs DualPipe (no wrap-around link: cost.comm.pp_term)."""
    from placement.specs.recipe import PipelineSchedule

    return est.recipe.pipeline_schedule is PipelineSchedule.DUALPIPE
