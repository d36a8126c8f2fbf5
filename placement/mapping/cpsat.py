"""CP-SAT model: which blocks of ranks go to which bins of hosts, so heavy groups stay low in the tree.

Decision.  Ranks come in node blocks (`gpus_per_host` consecutive ranks, one host each).  Hosts sit in
bins: the smallest level whose blocks hold more than one host (the leaf switch on DGX clusters, the
NVLink rack on GB200 NVL72).  Hosts inside one bin are interchangeable for every level above it, so
the model decides only how many and which node blocks each bin gets; within a bin, blocks fill its
hosts in allocation order.

Size.  Node blocks move in chunks of q consecutive blocks, q = gcd of the bin capacities (q = 1 on
irregular allocations, so the model is exact there; a regular cluster of 32-node leaves has q = 32 and
the 16,384-GPU model has 64 chunks).  Groups that touch the same set of chunks are merged with their
multiplicity.

Objective.  For every kind of group (tp, cp, ep, dp, edp, pp) and every level j at or above the bins,
the number of level-j units a group spans, times its members, times the time one member's traffic
per step takes at the bandwidth of level j + 1 (the links its traffic crosses when it leaves a level-j
unit, oversubscription included): the traffic the mapping pushes up the tree, in seconds.  Groups of
one kind run at once and share the uplinks, so fewer split groups means less contention even when
the worst group is split either way.  Scaled to integers by OBJECTIVE_RESOLUTION_S.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
import ortools
from ortools.sat.python import cp_model

from placement.mapping.config import SolverConfig
from placement.mapping.groups import GroupKind
from placement.topology import Topology

MAX_ASSIGNMENT_VARIABLES = 40_000
"""Above this many chunk-to-bin variables (thousands of hosts in hundreds of uneven leaves) the CP-SAT
model is not built: the greedy packing is returned with status GREEDY and no bound.  Regular clusters
never get there (their chunks are whole leaves)."""
OBJECTIVE_RESOLUTION_S = 1e-6
"""Objective unit: one microsecond of modeled traffic time per step; finer resolutions only slow the
solver (objective values are whole numbers)."""


@dataclass(frozen=True)
class MappingSolution:
    gpu_of_rank: np.ndarray
    host_of_block: np.ndarray
    """Host index (allocation order) of each node block of ranks."""
    status: str
    objective_s: float
    bound_s: float
    wall_s: float
    chunk_blocks: int
    num_variables: int
    solver: str


@dataclass
class _Vars:
    """x[c][b]: chunk c goes to bin b."""

    x: list[list[cp_model.IntVar]]

    def extract(self, solver: cp_model.CpSolver) -> np.ndarray:
        return np.array([next(b for b, v in enumerate(row) if solver.value(v)) for row in self.x], dtype=np.int64)


def _host_blocks(topo: Topology) -> np.ndarray:
    """host_blocks[j, h]: level-j block of host h."""
    return topo.block_of[:, :: topo.gpus_per_host]


def _bin_level(hb: np.ndarray) -> int:
    for j in range(hb.shape[0]):
        if len(np.unique(hb[j])) < hb.shape[1]:
            return j
    return hb.shape[0] - 1


def solve_mapping(topo: Topology, kinds: list[GroupKind], cfg: SolverConfig | None = None) -> MappingSolution:
    cfg = cfg or SolverConfig()
    start = time.perf_counter()
    gph = topo.gpus_per_host
    num_ranks = topo.num_gpus
    hb = _host_blocks(topo)
    num_hosts = hb.shape[1]
    jb = _bin_level(hb)
    bins, bin_of_host = np.unique(hb[jb], return_inverse=True)
    cap = np.bincount(bin_of_host, minlength=len(bins))
    q = math.gcd(*cap.tolist())
    # When every bin holds exactly one chunk, which chunk sits in which bin of the same parent changes
    # no cost at the bin level (each group touches as many bins as chunks): decide at the parent level.
    lifted = []
    while np.all(cap == q) and jb + 1 < hb.shape[0] and len(np.unique(hb[jb + 1])) > 1:
        lifted.append(jb)
        jb += 1
        bins, bin_of_host = np.unique(hb[jb], return_inverse=True)
        cap = np.bincount(bin_of_host, minlength=len(bins))
    num_chunks = num_hosts // q
    bin_order = np.argsort([np.flatnonzero(bin_of_host == b)[0] for b in range(len(bins))], kind="stable")

    # Greedy hint: whole groups of the heaviest-traffic kind that fits in a bin, first fit into bins in
    # allocation order; what is left spreads over the roomiest bins.
    room_max = int(cap.max()) // q
    fitting = [(k, _chunk_sets(k.ranks(num_ranks), gph * q)) for k in kinds]
    fitting = [(k, sets) for k, sets in fitting if sets and max(len(m) for m in sets) <= room_max]
    atoms = list(max(fitting, key=lambda ks: ks[0].bytes_per_step)[1]) if fitting else []
    hint = _first_fit(num_chunks, q, cap, bin_order, atoms)
    if num_chunks * len(bins) > MAX_ASSIGNMENT_VARIABLES:
        host_of_block = _fill(hint, q, bin_of_host, len(bins))
        return MappingSolution(
            gpu_of_rank=_gpu_of_rank(host_of_block, gph, num_ranks), host_of_block=host_of_block, status="GREEDY",
            objective_s=proxy_objective_s(topo, kinds, host_of_block) if q == 1 else float("nan"),
            bound_s=float("nan"), wall_s=time.perf_counter() - start, chunk_blocks=q,
            num_variables=num_chunks * len(bins), solver="greedy first-fit (model above MAX_ASSIGNMENT_VARIABLES)",
        )

    model = cp_model.CpModel()
    x = [[model.new_bool_var(f"assign_c{c}_b{b}") for b in range(len(bins))] for c in range(num_chunks)]
    v = _Vars(x)

    # Each chunk of node blocks goes to exactly one bin.
    for c in range(num_chunks):
        model.add_exactly_one(x[c])

    # Each bin receives exactly as many node blocks as it has allocated hosts.
    for b in range(len(bins)):
        model.add(sum(x[c][b] for c in range(num_chunks)) * q == int(cap[b]))

    # Interchangeable bins (same capacity, same blocks above) are ordered by their chunk-index sums.
    classes: dict[tuple, list[int]] = {}
    for b in bin_order:
        hosts = np.flatnonzero(bin_of_host == b)
        key = (int(cap[b]), tuple(int(hb[j, hosts[0]]) for j in range(jb + 1, hb.shape[0])))
        classes.setdefault(key, []).append(int(b))
    if cfg.break_symmetries:
        for same in classes.values():
            for b1, b2 in itertools.pairwise(same):
                for c in range(num_chunks):
                    model.add(x[c][b2] <= sum(x[e][b1] for e in range(c)))

    # Each group pays, at every level from the bins up, for every unit it touches.
    objective = []
    levels_above = []
    for j in range(jb, hb.shape[0]):
        unit_of_bin = np.array([hb[j, np.flatnonzero(bin_of_host == b)[0]] for b in range(len(bins))])
        units = np.unique(unit_of_bin)
        if len(units) > 1:
            levels_above.append((j, [np.flatnonzero(unit_of_bin == u) for u in units]))
    num_vars = num_chunks * len(bins)
    constant_s = 0.0  # lifted levels: every group touches one bin per chunk, whatever the assignment
    for kind in kinds:
        weights = kind.seconds_at(topo)
        chunk_sets = _chunk_sets(kind.ranks(num_ranks), gph * q)
        for members, count in chunk_sets.items():
            for j in lifted:
                constant_s += count * kind.size * weights[j + 1] * len(members)
            for j, unit_bins in levels_above:
                w = round(count * kind.size * weights[j + 1] / OBJECTIVE_RESOLUTION_S)
                if w == 0:
                    continue
                ys = []
                for ui, ubins in enumerate(unit_bins):
                    # y = 1 when any chunk of the group lands in this unit
                    y = model.new_bool_var(f"span_{kind.name}_{'-'.join(map(str, members[:4]))}_l{j}_u{ui}")
                    num_vars += 1
                    inside = [x[c][int(b)] for c in members for b in ubins]
                    for lit in inside:
                        model.add_implication(lit, y)
                    # the same rule summed: a unit holds at most min(group, unit room) of its chunks
                    # (redundant, but it tightens the linear relaxation and so the bound)
                    room = min(len(members), int(cap[ubins].sum()) // q)
                    model.add(sum(inside) <= room * y)
                    ys.append(y)
                    objective.append(w * y)
                # a group needs at least ceil(chunks / largest unit room) units (redundant bound)
                largest = max(int(cap[ub].sum()) // q for ub in unit_bins)
                model.add(sum(ys) >= -(-len(members) // largest))
    model.minimize(sum(objective))

    if cfg.break_symmetries:
        hint = _sorted_within_classes(hint, classes)
    for c in range(num_chunks):
        for b in range(len(bins)):
            model.add_hint(x[c][b], int(hint[c] == b))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = cfg.time_limit_s
    solver.parameters.max_deterministic_time = cfg.deterministic_time_limit
    solver.parameters.num_workers = cfg.num_workers
    solver.parameters.interleave_search = cfg.interleave_search
    solver.parameters.random_seed = cfg.random_seed
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        chunk_bin = v.extract(solver)
        objective_s = solver.objective_value * OBJECTIVE_RESOLUTION_S + constant_s
        bound_s = solver.best_objective_bound * OBJECTIVE_RESOLUTION_S + constant_s
    else:  # no solution within the limit: keep the hint, which always satisfies the constraints
        chunk_bin = hint
        objective_s = float("nan")
        bound_s = solver.best_objective_bound * OBJECTIVE_RESOLUTION_S + constant_s
    host_of_block = _fill(chunk_bin, q, bin_of_host, len(bins))
    return MappingSolution(
        gpu_of_rank=_gpu_of_rank(host_of_block, gph, num_ranks), host_of_block=host_of_block,
        status=solver.status_name(status),
        objective_s=objective_s, bound_s=bound_s, wall_s=time.perf_counter() - start, chunk_blocks=q,
        num_variables=num_vars, solver=f"ortools {ortools.__version__} CP-SAT",
    )


def proxy_objective_s(topo: Topology, kinds: list[GroupKind], host_of_block: np.ndarray) -> float:
    """The model's objective for an assignment of node blocks to hosts, counted directly: a check on
    the CP-SAT model and the brute force of the tests (equal to the solver's objective when
    chunk_blocks is 1)."""
    hb = _host_blocks(topo)
    jb = _bin_level(hb)
    total = 0.0
    for kind in kinds:
        weights = kind.seconds_at(topo)
        blocks = kind.ranks(topo.num_gpus) // topo.gpus_per_host
        multi = np.array([len(np.unique(row)) > 1 for row in blocks])
        hosts = np.asarray(host_of_block)[blocks[multi]]
        for j in range(jb, hb.shape[0]):
            if len(np.unique(hb[j])) < 2:
                continue
            touched = sum(len(np.unique(hb[j][row])) for row in hosts)
            total += touched * kind.size * weights[j + 1]
    return total


def _gpu_of_rank(host_of_block: np.ndarray, gph: int, num_ranks: int) -> np.ndarray:
    ranks = np.arange(num_ranks)
    return (host_of_block[ranks // gph] * gph + ranks % gph).astype(np.int64)


def _chunk_sets(groups: np.ndarray, ranks_per_chunk: int) -> dict[tuple[int, ...], int]:
    """Distinct sets of chunks touched by groups (2+ chunks only), with how many groups share each."""
    rows, counts = np.unique(np.sort(groups // ranks_per_chunk, axis=1), axis=0, return_counts=True)
    sets: dict[tuple[int, ...], int] = {}
    for row, n in zip(rows, counts, strict=True):
        members = tuple(np.unique(row).tolist())
        if len(members) > 1:
            sets[members] = sets.get(members, 0) + int(n)
    return sets


def _first_fit(num_chunks: int, q: int, cap: np.ndarray, bin_order: np.ndarray,
               atoms: list[tuple[int, ...]]) -> np.ndarray:
    """Place each atom (a group of the heaviest kind) whole into the first bin with room, in rank order;
    then spread what is left over the bins with most room first (fewest pieces)."""
    room = {int(b): int(cap[b]) // q for b in bin_order}
    hint = np.full(num_chunks, -1, dtype=np.int64)
    for atom in sorted(atoms):
        free = [c for c in atom if hint[c] < 0]
        fit = next((b for b in room if room[b] >= len(free)), None)
        if fit is not None and free:
            hint[free] = fit
            room[fit] -= len(free)
    for c in np.flatnonzero(hint < 0):
        b = max(room, key=lambda k: (room[k], -list(room).index(k)))
        hint[c] = b
        room[b] -= 1
    return hint


def _sorted_within_classes(hint: np.ndarray, classes: dict[tuple, list[int]]) -> np.ndarray:
    """Relabel interchangeable bins so their first chunks increase (the symmetry-breaking order)."""
    out = hint.copy()
    for same in classes.values():
        firsts = [int(np.flatnonzero(hint == b)[0]) if np.any(hint == b) else len(hint) for b in same]
        for target, source in zip(same, [same[i] for i in np.argsort(firsts, kind="stable")], strict=True):
            out[hint == source] = target
    return out


def _fill(chunk_bin: np.ndarray, q: int, bin_of_host: np.ndarray, num_bins: int) -> np.ndarray:
    """Blocks of each bin's chunks (in rank order) onto its hosts (in allocation order)."""
    host_of_block = np.empty(len(chunk_bin) * q, dtype=np.int64)
    for b in range(num_bins):
        hosts = np.flatnonzero(bin_of_host == b)
        blocks = np.concatenate([np.arange(c * q, (c + 1) * q) for c in np.flatnonzero(chunk_bin == b)]) \
            if np.any(chunk_bin == b) else np.array([], dtype=np.int64)
        host_of_block[blocks] = hosts
    return host_of_block
