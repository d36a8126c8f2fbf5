"""The cost model: a Layout on a Topology -> step time and memory, each term a small cited function.

Every function takes numpy arrays (one entry per candidate layout), so the exact search evaluates the
whole space in one pass and `evaluate` of a single layout runs the very same code on arrays of one.
"""
