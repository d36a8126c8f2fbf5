"""A sweep cell's error band: runs of the cell's precision within its family, and a slow end no faster than the best
published run of its kind where the plan is priced above all of them (a trial found searched plans 19-68 % above
published runs behind a +-9-17 % band, and a dense Blackwell band made of FP8 rows on BF16 cells)."""

from __future__ import annotations

import pytest

from placement.sweep.band import band
from placement.sweep.run import anchored_band

ROWS = (
    {"id": "h-bf16-a", "moe": False, "accelerator": "h100-sxm", "precision": "bf16", "error": -0.20},
    {"id": "h-bf16-b", "moe": False, "accelerator": "h100-sxm", "precision": "bf16", "error": 0.05},
    {"id": "h-fp8", "moe": False, "accelerator": "h100-sxm", "precision": "fp8", "error": 0.09},
    {"id": "b-fp8", "moe": False, "accelerator": "b200", "precision": "fp8", "error": -0.04},
)


def test_a_cell_takes_the_runs_of_its_own_precision_in_its_family():
    bf16 = band(ROWS, False, "h100-sxm", "d", "bf16")
    assert (bf16["num_rows"], bf16["error_low"], bf16["error_high"], bf16["note"]) == (2, -0.20, 0.05, "")
    fp8 = band(ROWS, False, "h200", "d", "fp8")
    assert (fp8["num_rows"], fp8["error_low"], fp8["error_high"]) == (1, 0.0, 0.09)


def test_a_family_with_runs_at_another_precision_only_says_so():
    """The dense Blackwell rows are FP8: a BF16 B200 cell's band is theirs, and its note says it."""
    got = band(ROWS, False, "b200", "d", "bf16")
    assert got["num_rows"] == 1 and got["group"] == "dense / Blackwell"
    assert got["note"] == "no bf16 dense Blackwell runs in validate; its fp8 runs"


def test_a_plan_above_every_published_run_of_its_kind_gets_a_slow_end_at_the_best_one():
    base = band(ROWS, False, "h100-sxm", "d", "fp8")  # error_low 0.0
    best = {"above": True, "ratio": 1.3, "best_run": "h-fp8", "best_mfu": 0.40, "group": "dense / h100-sxm / fp8"}
    got = anchored_band(base, best)
    assert got["error_low"] == pytest.approx(1 / 1.3 - 1)  # the step at the best published MFU: predicted x 1.3
    assert got["published_anchor"] == {"run": "h-fp8", "mfu": 0.40, "ratio": 1.3} and "h-fp8" in got["note"]
    assert got["error_high"] == base["error_high"]
    # below every published run, or a band already wider, stays as it is
    assert anchored_band(base, {**best, "above": False, "ratio": 0.9}) == base
    wide = band(ROWS, False, "h100-sxm", "d", "bf16")  # error_low -0.20, wider than 1/1.1 - 1
    assert anchored_band(wide, {**best, "ratio": 1.1}) == wide
