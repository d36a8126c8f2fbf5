"""Two terms that bring the PTD-P and Korthikanti rows within 3 % mean and 7 % max (issue: every published dense run
within 10 %), each tested on the rows it fixes:

- sequence parallelism splits only the ops on the whole hidden state (two norms, two bias-dropout-adds) over the TP
  group; the rest of a layer's element-wise traffic is split over it with or without SP (`compute.elementwise_time`).
  Korthikanti's Table 4 measures SP saving 3 % of the 22B layer (19.6 -> 19.0 ms);
- a synchronous step waits for its slowest GPU: the accelerator's `speed_variability` times the expected largest of
  N normal draws (`step.variability_s`), which the PTD-P weak-scaling rows of 1,024-3,072 GPUs need.
"""

from __future__ import annotations

import json
import shlex
import statistics

import numpy as np
import pytest
from click.testing import CliRunner

import placement.catalog as catalog
from placement.calibration.validate import load_runs, predict
from placement.cli import main
from placement.cost import compute
from placement.cost.constants import ELEMENTWISE_BYTES_PER_HIDDEN
from placement.cost.step import expected_slowest, variability_s

RUNS = {r.id: r for r in load_runs()}
GROUPS = ("ptdp-2021-table1", "korthikanti-2022-table5")


def _errors(runs) -> list[float]:
    return [predict(r).error for r in runs]


def _group() -> list:
    return [r for r in RUNS.values() if r.group in GROUPS]


@pytest.fixture
def sp_splits_everything(monkeypatch):
    """The old element-wise term: sequence parallelism splitting all of it."""
    monkeypatch.setattr(compute, "sp_sharded_bytes_per_hidden", lambda dropout: ELEMENTWISE_BYTES_PER_HIDDEN)


def _sp_saving(run_id: str) -> float:
    """How much shorter the row's step is with sequence parallelism, recompute none (Korthikanti Table 4's rows
    "Baseline no recompute" and "Sequence Parallelism")."""
    run = RUNS[run_id]
    recipe = run.recipe.model_copy(update={"recompute_modules": None})

    def step(sp: bool) -> float:
        layout = {**run.layout, "recompute": "none", "sequence_parallel": sp}
        return predict(run.model_copy(update={"layout": layout, "recipe": recipe}))

    off, on = step(False), step(True)
    return 1.0 - on.predicted_step_time_s / off.predicted_step_time_s


def test_sequence_parallelism_saves_what_korthikanti_table_4_measures() -> None:
    # Table 4, 22B (TP 8, 8 A100s): 19.6 ms a layer without SP, 19.0 with it: 3 % shorter
    saving = _sp_saving("korthikanti-2022-22b-sp-selective")
    assert saving == pytest.approx(0.6 / 19.6, abs=0.015)


def test_splitting_every_elementwise_op_would_save_three_times_that(sp_splits_everything) -> None:
    assert _sp_saving("korthikanti-2022-22b-sp-selective") > 0.08


def test_the_group_is_within_its_bounds_only_with_the_split(sp_splits_everything) -> None:
    """Splitting all of it makes every layer without SP dearer than with it by 7/8 of 48 bytes a hidden element: the
    full-recompute baselines (no SP) come out slow beside their SP rows, Korthikanti's 1T baseline 8.7 % slow."""
    errors = _errors(_group())
    assert max(errors) > 0.08
    assert statistics.mean(abs(e) for e in errors) > 0.035
    # ...while a model's SP + selective row stays on the fast side of its baseline by 5-9 points
    for size in ("22b", "175b", "530b"):
        full, sp = (predict(RUNS[f"korthikanti-2022-{size}-{kind}"]).error
                    for kind in ("full-recompute-baseline", "sp-selective"))
        assert full - sp > 0.04, size


def test_sp_split_counts_the_norms_and_residual_adds() -> None:
    assert compute.sp_sharded_bytes_per_hidden(dropout=True) == 22.0
    assert compute.sp_sharded_bytes_per_hidden(dropout=False) == 20.0
    # without SP the whole-hidden part runs on every TP rank, the rest is split; with SP all of it is split
    kw = dict(tokens=np.array([1000.0]), hidden=1000, hbm_bytes_per_s=1e12, dropout=True)
    unsplit = compute.elementwise_time(sp_shard=1, tp=8, **kw)
    split = compute.elementwise_time(sp_shard=8, tp=8, **kw)
    assert float(unsplit[0]) == pytest.approx(1e6 * (22 + 26 / 8) / 1e12)
    assert float(split[0]) == pytest.approx(1e6 * 48 / 8 / 1e12)
    assert float(compute.elementwise_time(sp_shard=1, tp=1, **kw)[0]) == pytest.approx(1e6 * 48 / 1e12)


def test_ptdp_and_korthikanti_groups_meet_the_issue_bounds() -> None:
    errors = [abs(e) for e in _errors(_group())]
    assert len(errors) == 18
    assert statistics.mean(errors) <= 0.03
    assert max(errors) <= 0.07


def test_without_the_slowest_gpu_the_large_weak_scaling_rows_are_priced_too_fast(mean_speed_gpus) -> None:
    big = [r for r in _group() if r.group == "ptdp-2021-table1" and r.num_gpus >= 1024]
    assert len(big) == 5
    errors = _errors(big)
    assert statistics.mean(errors) < -0.07
    assert statistics.mean(abs(e) for e in _errors(_group())) > 0.04


def test_expected_slowest_matches_a_seeded_draw() -> None:
    rng = np.random.default_rng(7)
    for n in (8, 64, 512):
        drawn = rng.standard_normal((20000, n)).max(axis=1).mean()
        assert float(expected_slowest(np.array([n]))[0]) == pytest.approx(drawn, rel=0.02)
    # two GPUs: the exact mean of the larger of two is 1 / sqrt(pi); Blom's approximation is 4 % above it
    assert float(expected_slowest(np.array([2]))[0]) == pytest.approx(1 / np.sqrt(np.pi), rel=0.05)
    assert float(expected_slowest(np.array([1]))[0]) == 0.0


def test_variability_grows_with_the_gpu_count_and_is_zero_without_a_spread() -> None:
    paced = np.array([10.0, 10.0, 10.0])
    out = variability_s(0.02, np.array([8, 1024, 16384]), paced)
    assert out[0] < out[1] < out[2]
    assert float(out[1]) == pytest.approx(0.02 * 10.0 * float(expected_slowest(np.array([1024]))[0]))
    assert not variability_s(0.0, np.array([8, 1024]), np.array([10.0, 10.0])).any()


def test_evaluate_prints_the_term_the_step_adds(monkeypatch) -> None:
    """The breakdown's `variability` is the difference between the step priced with the part's spread and without."""
    run = RUNS["megatron-ptdp-2021-t1-gpt76p1b"]
    result = CliRunner().invoke(main, ["--reproducible", "validate", "--json"])
    row = next(r for r in json.loads(result.stdout)["runs"] if r["id"] == run.id)
    plan = CliRunner().invoke(main, [*shlex.split(row["command"])[1:], "--json"])
    breakdown = json.loads(plan.stdout)["breakdown"]
    with monkeypatch.context() as m:
        read = catalog.read_yaml
        m.setattr(catalog, "read_yaml", lambda path, schema, what: (
            read(path, schema, what).model_copy(update={"speed_variability": 0.0}) if what == "accelerator"
            else read(path, schema, what)))
        flat = predict(run).predicted_step_time_s
    assert breakdown["variability"] > 0.05 * flat
    assert breakdown["variability"] == pytest.approx(predict(run).predicted_step_time_s - flat, rel=1e-3)
    text = CliRunner().invoke(main, shlex.split(row["command"])[1:]).output
    assert "GPU variability (slowest GPU)" in text


def test_an_invalid_splits_infinite_pace_stays_infinite_not_nan() -> None:
    """A split with no rank is priced at an infinite pace; the slowest-GPU term keeps it infinite (and 0 for one GPU),
    never NaN, which would win an argmin."""
    out = variability_s(0.02, np.array([1, 8, 8]), np.array([np.inf, np.inf, 2.0]))
    assert out[0] == 0.0 and np.isinf(out[1]) and np.isfinite(out[2])
    assert not np.isnan(out).any()
