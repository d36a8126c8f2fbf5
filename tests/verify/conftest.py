"""Checks against the frameworks' own code (the `verify` extra: torch CPU, torchtitan).

These tests import the frameworks at module level on purpose: when the extra is missing they fail at
collection instead of skipping, so CI cannot pass without running them.
"""
