"""Exact mapping on a regular tree: a lower bound over every host assignment, and a tiling that meets it.

Regular means: above the hosts, every unit of a level holds the same number of hosts (U_j for level j),
and every kind of group, seen at node-block granularity, is a box of a mixed-radix index (dp, cp, ep,
... groups) or a pair of neighbouring pipeline stages (pp).  The axes are the segments between the
breakpoints stride and stride * size of every kind, in node blocks; block n has coordinates
x_i = (n // B_i) % n_i.  The objective is the CP-SAT model's (cpsat.py): for every level j with more
than one unit, every group pays its weight w for each level-j unit it touches.

Claim 1 (per-unit form).  For a group g, units touched = |g| - sum over units u of (|g & u| - [g & u]).
Summed, the cost of level j is C_j - sum_u savings_j(u) with C_j = sum_g w_g |g| (fixed) and
savings_j(S) = sum_g w_g (|g & S| - [g & S nonempty]).  Every unit holds U_j blocks, so
cost_j >= C_j - (N / U_j) * M_j, where M_j = max of savings_j(S) over all sets of U_j blocks.  This
holds for every assignment of blocks to hosts, not only the tilings below.

Claim 2 (down-sets suffice).  Compressing S along axis i (in every line parallel to axis i, move
its points to the lowest coordinates) never lowers savings_j: a box kind saves |S| - |pi_k(S)|, and
a compression never enlarges a projection pi_k (along an axis of box k, pi_k does not change; along
another axis, each line section of pi_k(S) is a union of line sections of S, and compression turns
them into initial segments, whose union is the longest of them);
a pp pair saves 1 when both blocks are in S, and on two neighbouring stage lines compression turns
|A & B| common points into min(|A|, |B|) >= |A & B|, and along the pp axis m points into m - 1
neighbouring pairs, the most m points can hold.  Repeated compressions end in a down-set.  On a
down-set S, |pi_k(S)| is the number of points of S whose box-k coordinates are all 0, and the pp
pairs inside are the points with pp coordinate >= 1: savings_j is linear in the indicator of S, and
a down-set of U_j points lies in {x : prod(x_i + 1) <= U_j}.  M_j is that small integer program,
which CP-SAT solves exactly (a bound from a stopped search stays a valid bound).

Claim 3 (tiling).  A box shape a_j (a_ji divides n_i, product U_j) tiles the blocks, and shapes
nested level over level (a_ji divides a_(j+1)i) give one host assignment whose level-j cost is
C_j - (N / U_j) * savings_j(box a_j).  A dynamic program over nested shapes finds the cheapest.  When
its cost equals the sum of the bounds of Claim 1, no host assignment is cheaper: status OPTIMAL.
Otherwise the gap is stated.

Example.  16,384 H100 on the dgx-h100 catalog (2,048 hosts; leaves of 32, pods of 128), llama3-405b
with tp 8, dp 128, pp 16: one node block per TP group, axes (dp 128, pp 16), dp groups are boxes over
axis 0, pp pairs run along axis 1.  With global batch 2,048 the best down-sets are the boxes 32 x 1
(a leaf) and 128 x 1 (a pod): the plain rank order, proven optimal.  With global batch 16,384 the pp
pairs weigh more; the best pod by itself is 3 stages of about 43 replicas, which boxes cannot tile,
so the best tiling (32 x 4 pods) is stated with a 0.19 % gap.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from placement.mapping.config import SolverConfig
from placement.mapping.groups import GroupKind
from placement.topology import Topology

MAX_DOWNSET_POINTS = 20_000
"""Above this many candidate points (units of thousands of hosts over many axes) a level's program is
not built; its bound is then the counting one, each group touching at least ceil(|g| / U_j) units."""


@dataclass(frozen=True)
class BoxKind:
    name: str
    axes: tuple[int, ...]
    """Axes the groups extend over; the other coordinates name the group."""
    weight: tuple[int, ...]
    """Per priced level: the objective weight of one node-level group (scaled to integers)."""


@dataclass(frozen=True)
class PairKind:
    name: str
    axis: int
    weight: tuple[int, ...]


@dataclass(frozen=True)
class RegularTree:
    """The node-block index as mixed-radix axes, the kinds on them, and the priced levels."""

    sizes: tuple[int, ...]
    """Axis extents, least significant first; their product is the number of node blocks."""
    breaks: tuple[int, ...]
    """Node-block stride of each axis."""
    boxes: tuple[BoxKind, ...]
    pairs: tuple[PairKind, ...]
    levels: tuple[int, ...]
    """Topology levels with more than one unit above the hosts (the priced ones), innermost first."""
    unit_hosts: tuple[int, ...]
    """Hosts per unit of each priced level."""

    @property
    def num_blocks(self) -> int:
        return math.prod(self.sizes)

    def coords(self) -> np.ndarray:
        """coords[i, n]: axis-i coordinate of node block n."""
        n = np.arange(self.num_blocks, dtype=np.int64)
        return np.stack([(n // b) % s for b, s in zip(self.breaks, self.sizes, strict=True)])

    def fixed_cost(self, p: int) -> int:
        """C_p: every group's weight times its number of node blocks (Claim 1)."""
        total = 0
        for k in self.boxes:
            total += k.weight[p] * self.num_blocks
        for k in self.pairs:
            total += k.weight[p] * 2 * (self.num_blocks // self.sizes[k.axis]) * (self.sizes[k.axis] - 1)
        return total

    def box_savings(self, p: int, shape: tuple[int, ...]) -> int:
        """savings_p of one tile of the given shape."""
        u = math.prod(shape)
        total = sum(k.weight[p] * (u - u // math.prod(shape[i] for i in k.axes)) for k in self.boxes)
        return total + sum(k.weight[p] * (u - u // shape[k.axis]) for k in self.pairs)

    def counting_bound(self, p: int) -> int:
        """Each group touches at least ceil(|g| / U_p) units (weaker than Claim 2, but free)."""
        units = self.unit_hosts[p]
        total = 0
        for k in self.boxes:
            size = math.prod(self.sizes[i] for i in k.axes)
            total += k.weight[p] * (self.num_blocks // size) * -(-size // units)
        for k in self.pairs:
            total += k.weight[p] * (self.num_blocks // self.sizes[k.axis]) * (self.sizes[k.axis] - 1)
        return total

    def box_cost(self, p: int, shape: tuple[int, ...]) -> int:
        return self.fixed_cost(p) - self.num_blocks // math.prod(shape) * self.box_savings(p, shape)

    def cost(self, unit_of_block: list[np.ndarray]) -> int:
        """The objective of any assignment, given the priced-level unit of every node block."""
        x = self.coords()
        total = 0
        for p, unit in enumerate(unit_of_block):
            width = int(unit.max()) + 1
            for k in self.boxes:
                others = [i for i in range(len(self.sizes)) if i not in k.axes]
                gid = np.zeros(self.num_blocks, dtype=np.int64)
                for i in others:
                    gid = gid * self.sizes[i] + x[i]
                total += k.weight[p] * len(np.unique(gid * width + unit))
            for k in self.pairs:
                low = np.flatnonzero(x[k.axis] < self.sizes[k.axis] - 1)
                high = low + self.breaks[k.axis]
                total += k.weight[p] * int(2 * len(low) - np.count_nonzero(unit[low] == unit[high]))
        return total


def regular_tree(topo: Topology, kinds: list[GroupKind], resolution_s: float) -> RegularTree | None:
    """The regular structure of this machine and these groups, or None when either is irregular."""
    gph = topo.gpus_per_host
    hb = topo.block_of[:, ::gph]
    num_blocks = hb.shape[1]
    levels, unit_hosts = [], []
    for j in range(hb.shape[0]):
        _, counts = np.unique(hb[j], return_counts=True)
        if counts.max() == 1 or len(counts) == 1:
            continue  # one host per unit, or one unit: the same cost for every assignment
        if counts.min() != counts.max():
            return None
        if unit_hosts and counts[0] % unit_hosts[-1]:
            return None
        levels.append(j)
        unit_hosts.append(int(counts[0]))
    if not levels:
        return None
    for j_low, j_high in itertools.pairwise(levels):  # each unit sits inside one unit of the level above
        pairs = np.unique(np.stack([hb[j_low], hb[j_high]]), axis=1)
        if pairs.shape[1] != len(np.unique(hb[j_low])):
            return None

    spans = []  # (kind, its groups' node blocks, low break, high break in node blocks)
    for kind in kinds:
        rows = kind.ranks(topo.num_gpus) // gph
        if np.all(rows == rows[:, :1]):
            continue  # every group inside one host
        stride, extent = kind.stride, kind.stride * kind.size
        if kind.name == "pp":
            if stride % gph:
                return None
            spans.append((kind, rows, stride // gph, extent // gph))
        else:
            if (stride % gph and gph % stride) or extent % gph:
                return None
            spans.append((kind, rows, max(stride // gph, 1), extent // gph))
    breaks = sorted({1, num_blocks, *(b for _, _, lo, hi in spans for b in (lo, hi))})
    if any(b % a for a, b in itertools.pairwise(breaks)) or breaks[-1] != num_blocks:
        return None
    sizes = tuple(b // a for a, b in itertools.pairwise(breaks))
    axis_of = {b: i for i, b in enumerate(breaks[:-1])}

    boxes, pair_kinds = [], []
    for kind, rows, lo, hi in spans:
        weights = kind.seconds_at(topo)
        if kind.name == "pp":
            i = axis_of[lo]
            if breaks[i + 1] != hi or not np.all(rows[:, 1] - rows[:, 0] == lo):
                return None
            first = rows[:, 0]
            valid = np.flatnonzero((np.arange(num_blocks) // lo) % sizes[i] < sizes[i] - 1)
            per_pair = np.bincount(first, minlength=num_blocks)
            if np.any(per_pair[valid] != per_pair[valid[0]]) or per_pair.sum() != per_pair[valid[0]] * len(valid):
                return None
            mult = int(per_pair[valid[0]])
            w = tuple(round(mult * kind.size * weights[j + 1] / resolution_s) for j in levels)
            pair_kinds.append(PairKind(kind.name, i, w))
            continue
        # a box: every group covers exactly the hi / lo blocks that share its coordinates off [lo, hi)
        gid = (rows // hi) * lo + rows % lo
        size = hi // lo
        distinct = 1 + np.count_nonzero(np.diff(np.sort(rows, axis=1), axis=1), axis=1)
        if not (np.all(gid == gid[:, :1]) and np.all(distinct == size)):
            return None
        per_group = np.bincount(gid[:, 0], minlength=num_blocks // size)
        if np.any(per_group != per_group[0]):
            return None
        w = tuple(round(int(per_group[0]) * kind.size * weights[j + 1] / resolution_s) for j in levels)
        boxes.append(BoxKind(kind.name, tuple(range(axis_of[lo], axis_of[hi] if hi in axis_of else len(sizes))), w))
    return RegularTree(sizes=sizes, breaks=tuple(breaks[:-1]), boxes=tuple(boxes), pairs=tuple(pair_kinds),
                       levels=tuple(levels), unit_hosts=tuple(unit_hosts))


def _shapes(sizes: tuple[int, ...], units: int) -> list[tuple[int, ...]]:
    """Box shapes with a_i dividing n_i and product `units`."""
    if not sizes:
        return [()] if units == 1 else []
    g = math.gcd(sizes[0], units)
    out = []
    for d in sorted({f for k in range(1, math.isqrt(g) + 1) if g % k == 0 for f in (k, g // k)}):
        out.extend((d, *rest) for rest in _shapes(sizes[1:], units // d))
    return out


def best_tiling(tree: RegularTree) -> tuple[list[tuple[int, ...]], int] | None:
    """Cheapest chain of nested box shapes (Claim 3), or None when no box has a level's unit size.

    Ties go to the chain whose shapes fill the low axes first (the plain rank order when it is best).
    """
    best: dict[tuple[int, ...], tuple[int, tuple, list]] = {}
    for p, units in enumerate(tree.unit_hosts):
        layer = {}
        for shape in _shapes(tree.sizes, units):
            cost = tree.box_cost(p, shape)
            prefer = tuple(-a for a in shape)
            if p == 0:
                layer[shape] = (cost, prefer, [shape])
                continue
            below = [v for s, v in best.items() if all(b % a == 0 for a, b in zip(s, shape, strict=True))]
            if below:
                c, pref, chain = min(below, key=lambda v: (v[0], v[1]))
                layer[shape] = (c + cost, (*pref, *prefer), [*chain, shape])
        if not layer:
            return None
        best = layer
    cost, _, chain = min(best.values(), key=lambda v: (v[0], v[1]))
    return chain, cost


@dataclass(frozen=True)
class LevelBound:
    bound: int
    """A lower bound on the level's cost over every assignment (Claim 1 with Claim 2's M)."""
    proven: bool
    """M was solved to optimality (else the search's bound on M was used: still a valid bound)."""
    num_variables: int


def level_bound(tree: RegularTree, p: int, cfg: SolverConfig, deadline: float,
                hint: tuple[int, ...] | None = None) -> LevelBound:
    """Claim 1's bound on level p's cost, with M from Claim 2's program (or the counting bound)."""
    units = tree.unit_hosts[p]
    best = max_unit_savings(tree, p, cfg, deadline, hint)
    if best is None:
        return LevelBound(bound=tree.counting_bound(p), proven=False, num_variables=0)
    savings, proven, num_vars = best
    bound = max(tree.fixed_cost(p) - tree.num_blocks // units * savings, tree.counting_bound(p))
    return LevelBound(bound=bound, proven=proven, num_variables=num_vars)


def max_unit_savings(tree: RegularTree, p: int, cfg: SolverConfig, deadline: float,
                     hint: tuple[int, ...] | None = None) -> tuple[int, bool, int] | None:
    """Claim 2's program for level p: the down-set of U_p points with the largest savings.  Returns an
    upper bound on M_p (M_p itself when proven), whether it is proven, and the number of variables;
    None when there are more than MAX_DOWNSET_POINTS candidate points."""
    units = tree.unit_hosts[p]
    points = _downset_points(tree.sizes, units, MAX_DOWNSET_POINTS + 1)
    if len(points) > MAX_DOWNSET_POINTS:
        return None
    index = {x: t for t, x in enumerate(points)}
    model = cp_model.CpModel()
    z = [model.new_bool_var(f"in_{'_'.join(map(str, x))}") for x in points]

    # The unit holds exactly U node blocks.
    model.add(sum(z) == units)

    # S is a down-set: a point is in only if each of its lower neighbours is.
    for t, x in enumerate(points):
        for i, xi in enumerate(x):
            if xi:
                model.add_implication(z[t], z[index[(*x[:i], xi - 1, *x[i + 1:])]])

    # Savings: a box kind saves U minus the points with its box coordinates all 0 (the groups S
    # touches); a pp pair is saved by each point with a pp coordinate >= 1 (its lower neighbour is in).
    coef = [0] * len(points)
    for t, x in enumerate(points):
        coef[t] -= sum(k.weight[p] for k in tree.boxes if all(x[i] == 0 for i in k.axes))
        coef[t] += sum(k.weight[p] for k in tree.pairs if x[k.axis] >= 1)
    constant = units * sum(k.weight[p] for k in tree.boxes)
    model.maximize(sum(c * v for c, v in zip(coef, z, strict=True) if c))

    if hint is not None:
        for t, x in enumerate(points):
            model.add_hint(z[t], all(xi < a for xi, a in zip(x, hint, strict=True)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(deadline - time.perf_counter(), 0.01)
    solver.parameters.max_deterministic_time = cfg.deterministic_time_limit
    solver.parameters.num_workers = cfg.num_workers
    solver.parameters.interleave_search = cfg.interleave_search
    solver.parameters.random_seed = cfg.random_seed
    status = solver.solve(model)
    # savings are whole numbers, so the floor of the search's upper bound is still an upper bound (an
    # integral bound is first rounded: float noise must not push it below the integer)
    top = solver.best_objective_bound
    savings = (round(top) if abs(top - round(top)) <= 1e-9 * max(1.0, abs(top)) else math.floor(top)) + constant
    return savings, status == cp_model.OPTIMAL, len(points)


def _downset_points(sizes: tuple[int, ...], units: int, limit: int) -> list[tuple[int, ...]]:
    """Points x with x_i < n_i and prod(x_i + 1) <= units: where a down-set of `units` points can lie
    (at most `limit` of them are listed)."""
    if not sizes:
        return [()]
    out: list[tuple[int, ...]] = []
    for xi in range(min(sizes[0], units)):
        out.extend((xi, *rest) for rest in _downset_points(sizes[1:], units // (xi + 1), limit - len(out)))
        if len(out) >= limit:
            break
    return out


def host_of_block(tree: RegularTree, topo: Topology, chain: list[tuple[int, ...]]) -> np.ndarray:
    """Tiles of the chain onto the hierarchy: the k-th level-j tile (tiles ordered outermost level first,
    then block index) runs on the k-th level-j unit (hosts ordered by their blocks, outermost first)."""
    hb = topo.block_of[:, :: topo.gpus_per_host]
    hosts = np.lexsort([np.arange(hb.shape[1]), *hb])  # lexsort: last key is the primary one
    x = tree.coords()
    keys = [np.arange(tree.num_blocks)]
    for shape in chain:
        tile = np.zeros(tree.num_blocks, dtype=np.int64)
        for i in reversed(range(len(tree.sizes))):
            tile = tile * (tree.sizes[i] // shape[i]) + x[i] // shape[i]
        keys.append(tile)
    blocks = np.lexsort(keys)
    out = np.empty(tree.num_blocks, dtype=np.int64)
    out[blocks] = hosts
    return out
