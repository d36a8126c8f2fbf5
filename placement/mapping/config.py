"""Solver settings for the mapper, kept apart from the CP-SAT model so importing them stays cheap."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SolverConfig:
    time_limit_s: float = 10.0
    """Wall-clock ceiling over the whole solve, model building included (a safety net; the deterministic
    limit below normally ends the search).  A search it stops returns its best mapping as FEASIBLE with
    the gap, and may differ from run to run."""
    deterministic_time_limit: float = 1.0
    """CP-SAT deterministic time units, per solve: the same input gives the same answer on any machine
    load."""
    num_workers: int = 8
    """Portfolio workers (LNS needs several); run interleaved on one thread, which is deterministic."""
    interleave_search: bool = True
    random_seed: int = 0
    break_symmetries: bool = True
    """Order interchangeable bins by their first chunk: a chunk may open bin k of a class only if an
    earlier chunk sits in bin k - 1.  This does not always help, but it removes the permutations of
    equal bins from the search (on a regular cluster, all of them)."""
    exploit_regularity: bool = True
    """On a regular tree, bound every level over all host assignments and tile it with nested boxes of the
    mesh (regular.py), proving optimality when the tiling meets the bound.  Off: the chunk model only."""
