"""CP-SAT model: which blocks of ranks go to which bins of hosts, so heavy groups stay low in the tree.

Decision.  Ranks come in node blocks (`gpus_per_host` consecutive ranks, one host each).  Hosts sit in
bins: the smallest level whose blocks hold more than one host (the leaf switch on DGX clusters, the
NVLink rack on GB200 NVL72).  Hosts inside one bin are interchangeable for every level above it, so
the model decides only how many and which node blocks each bin gets; within a bin, blocks fill its
hosts in allocation order.

Size.  Node blocks move in chunks of q consecutive blocks, q = gcd of the bin capacities (q = 1 on
most irregular allocations, where the model is exact; when the capacities share a factor, as leaves of
32 and 64 hosts do, it is exact among assignments that keep chunks whole, and so is the chunk model of
a regular cluster, whose q is a whole leaf).  Groups that touch the same set of chunks are merged
with their multiplicity.

Objective.  For every kind of group (tp, cp, ep, dp, edp, pp) and every level j at or above the bins,
the number of level-j units a group spans, times its members, times the time one member's traffic
per step takes at the bandwidth of level j + 1 (the links its traffic crosses when it leaves a level-j
unit, oversubscription included): the traffic the mapping pushes up the tree, in seconds.  Groups of
one kind run at once and share the uplinks, so fewer split groups means less contention even when
the worst group is split either way.  Scaled to integers by OBJECTIVE_RESOLUTION_S.

Regular clusters.  On a regular tree (every unit of a level holds as many hosts, groups are boxes of
the rank mesh) regular.py bounds the objective over every host assignment, level by level, and tiles
the hierarchy with nested boxes of the mesh; when the tiling meets the bound it is optimal (the proof
is in regular.py's docstring) and the chunk model is not built.  That objective counts every level,
the leaves included, at node-block granularity (chunk_blocks 1).  When the tiling misses the bound the
chunk model runs too, with single-host chunks where that model stays under MAX_ASSIGNMENT_VARIABLES (the
leaves' gcd would make each leaf one chunk and leave nothing inside it to arrange), the cheaper mapping
is kept, and its gap to the bound is stated.

Limits.  The deterministic limit ends the search the same way on any machine; `time_limit_s` is a
wall-clock ceiling over the whole solve.  A search stopped by either returns its best mapping with
status FEASIBLE and gap = (objective - bound) / objective.
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
from placement.mapping.regular import RegularTree, best_tiling, host_of_block, level_bound, regular_tree
from placement.topology import Topology

MAX_ASSIGNMENT_VARIABLES = 40_000
"""Above this many chunk-to-bin variables (thousands of hosts in hundreds of uneven leaves) the CP-SAT
model is not built: the greedy packing is returned with status GREEDY and no bound.  Regular clusters
never get there (their chunks are whole leaves)."""
OBJECTIVE_RESOLUTION_S = 1e-6
"""Objective unit: one microsecond of modeled traffic time per step; finer resolutions only slow the
solver (objective values are whole numbers)."""
MIN_SOLVE_S = 0.01
"""When model building has used up the wall-clock ceiling, CP-SAT still gets this long (it returns the
hint, which is feasible, and a bound)."""


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
    gap: float
    """(objective - bound) / objective: 0 when OPTIMAL, NaN without a bound (GREEDY)."""


def optimality_gap(status: str, objective_s: float, bound_s: float) -> float:
    if status == "OPTIMAL":
        return 0.0
    if not (math.isfinite(objective_s) and math.isfinite(bound_s)) or objective_s <= 0:
        return float("nan")
    return max(0.0, (objective_s - bound_s) / objective_s)


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
    deadline = start + cfg.time_limit_s
    tree = regular_tree(topo, kinds, OBJECTIVE_RESOLUTION_S) if cfg.exploit_regularity else None
    if tree is not None:
        return _solve_regular(topo, kinds, tree, cfg, start, deadline)
    return _solve_chunks(topo, kinds, cfg, start, deadline)


def _solve_regular(topo: Topology, kinds: list[GroupKind], tree: RegularTree, cfg: SolverConfig, start: float,
                   deadline: float) -> MappingSolution:
    """Bound every level over all host assignments, tile with nested boxes, and compare (regular.py)."""
    tiling = best_tiling(tree)
    bounds = [level_bound(tree, p, cfg, deadline, tiling[0][p] if tiling else None) for p in range(len(tree.levels))]
    bound = sum(b.bound for b in bounds)
    num_vars = sum(b.num_variables for b in bounds)
    method = f"ortools {ortools.__version__} CP-SAT: regular-tree bound"
    candidates = []  # (objective, host_of_block, how it was found)
    if tiling is not None:
        candidates.append((tiling[1], host_of_block(tree, topo, tiling[0]), "nested box tiling"))
    if not candidates or candidates[0][0] > bound:
        # the tiling left a gap: the chunk model, at single-host chunks when that model is small enough
        # (the leaves' gcd would make each leaf one chunk and hide the arrangement inside it)
        chunks = _solve_chunks(topo, kinds, cfg, start, deadline, single_host_chunks=True)
        hb = _host_blocks(topo)
        cost = tree.cost([hb[j][chunks.host_of_block] for j in tree.levels])
        candidates.append((cost, chunks.host_of_block, f"chunk model ({chunks.status})"))
        num_vars += chunks.num_variables
    cost, hosts, how = min(candidates, key=lambda c: c[0])  # ties keep the tiling
    status = "OPTIMAL" if cost <= bound else "FEASIBLE"
    objective_s, bound_s = cost * OBJECTIVE_RESOLUTION_S, bound * OBJECTIVE_RESOLUTION_S
    return MappingSolution(
        gpu_of_rank=_gpu_of_rank(hosts, topo.gpus_per_host, topo.num_gpus), host_of_block=hosts, status=status,
        objective_s=objective_s, bound_s=bound_s, wall_s=time.perf_counter() - start, chunk_blocks=1,
        num_variables=num_vars, solver=f"{method} + {how}", gap=optimality_gap(status, objective_s, bound_s),
    )


def _solve_chunks(topo: Topology, kinds: list[GroupKind], cfg: SolverConfig, start: float,
                  deadline: float, single_host_chunks: bool = False) -> MappingSolution:
    """The chunk model of the module docstring (any allocation)."""
    gph = topo.gpus_per_host
    num_ranks = topo.num_gpus
    hb = _host_blocks(topo)
    num_hosts = hb.shape[1]
    jb = _bin_level(hb)
    bins, bin_of_host = np.unique(hb[jb], return_inverse=True)
    cap = np.bincount(bin_of_host, minlength=len(bins))
    q = math.gcd(*cap.tolist())
    if single_host_chunks and num_hosts * len(bins) <= MAX_ASSIGNMENT_VARIABLES:
        q = 1
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
            gap=float("nan"),
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

    levels_above = []  # (level, unit of each bin, bins of each unit) where the level has several units
    for j in range(jb, hb.shape[0]):
        unit_of_bin = np.array([hb[j, np.flatnonzero(bin_of_host == b)[0]] for b in range(len(bins))])
        units = np.unique(unit_of_bin)
        if len(units) > 1:
            levels_above.append((j, unit_of_bin, [np.flatnonzero(unit_of_bin == u) for u in units]))
    terms = []  # (weight, chunks of a group, index into levels_above, kind): the objective, solver or not
    constant_s = 0.0  # lifted levels: every group touches one bin per chunk, whatever the assignment
    for kind in kinds:
        weights = kind.seconds_at(topo)
        for members, count in _chunk_sets(kind.ranks(num_ranks), gph * q).items():
            for j in lifted:
                constant_s += count * kind.size * weights[j + 1] * len(members)
            for li, (j, _, _) in enumerate(levels_above):
                w = round(count * kind.size * weights[j + 1] / OBJECTIVE_RESOLUTION_S)
                if w:
                    terms.append((w, members, li, kind.name))
    largest = [max(int(cap[ub].sum()) // q for ub in unit_bins) for _, _, unit_bins in levels_above]
    # a group needs at least ceil(chunks / largest unit room) units: a bound even before the search
    counting_bound = sum(w * -(-len(members) // largest[li]) for w, members, li, _ in terms)

    # Each group pays, at every level from the bins up, for every unit it touches.
    objective = []
    num_vars = num_chunks * len(bins)
    built = True
    for w, members, li, name in terms:
        if time.perf_counter() > deadline:  # the wall-clock ceiling: keep the hint, skip the search
            built = False
            break
        j, _, unit_bins = levels_above[li]
        ys = []
        for ui, ubins in enumerate(unit_bins):
            # y = 1 when any chunk of the group lands in this unit
            y = model.new_bool_var(f"span_{name}_{'-'.join(map(str, members[:4]))}_l{j}_u{ui}")
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
        # the counting bound above, per group (redundant)
        model.add(sum(ys) >= -(-len(members) // largest[li]))
    model.minimize(sum(objective))

    if cfg.break_symmetries:
        hint = _sorted_within_classes(hint, classes)
    for c in range(num_chunks):
        for b in range(len(bins)):
            model.add_hint(x[c][b], int(hint[c] == b))

    solver = cp_model.CpSolver()
    # the wall-clock ceiling covers building the model too; the deterministic limit alone is reproducible
    solver.parameters.max_time_in_seconds = max(deadline - time.perf_counter(), MIN_SOLVE_S)
    solver.parameters.max_deterministic_time = cfg.deterministic_time_limit
    solver.parameters.num_workers = cfg.num_workers
    solver.parameters.interleave_search = cfg.interleave_search
    solver.parameters.random_seed = cfg.random_seed
    status = solver.solve(model) if built else cp_model.UNKNOWN
    bound = max(counting_bound, solver.best_objective_bound if built else 0)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        chunk_bin = v.extract(solver)
    elif status == cp_model.UNKNOWN:  # stopped before a solution: the hint satisfies every constraint
        chunk_bin = hint
    else:
        raise RuntimeError(f"CP-SAT mapping model is {solver.status_name(status)}: the hint should satisfy it")
    # counted from the assignment: a stopped search may leave a span variable on over an empty unit
    objective = sum(w * len(np.unique(levels_above[li][1][chunk_bin[list(members)]])) for w, members, li, _ in terms)
    status_name = "OPTIMAL" if objective <= bound else "FEASIBLE"
    objective_s = objective * OBJECTIVE_RESOLUTION_S + constant_s
    bound_s = min(bound, objective) * OBJECTIVE_RESOLUTION_S + constant_s
    host_of_block = _fill(chunk_bin, q, bin_of_host, len(bins))
    return MappingSolution(
        gpu_of_rank=_gpu_of_rank(host_of_block, gph, num_ranks), host_of_block=host_of_block, status=status_name,
        objective_s=objective_s, bound_s=bound_s, wall_s=time.perf_counter() - start, chunk_blocks=q,
        num_variables=num_vars, solver=f"ortools {ortools.__version__} CP-SAT",
        gap=optimality_gap(status_name, objective_s, bound_s),
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
