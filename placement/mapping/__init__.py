"""Rank-to-GPU mapping: decide which host runs which block of ranks (OR-Tools CP-SAT)."""
