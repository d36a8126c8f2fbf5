"""torchtitan's pipeline is torch.distributed.pipelining's, whose micro-batch rules are not Megatron's: Schedule1F1B
raises with fewer micro-batches than stages (torch 2.13 schedules.py:1020-1024), and ScheduleInterleaved1F1B runs any
count its rounds, max(1, m // pp), divide (schedules.py:2931-2942), fewer than pp as one round with a larger bubble.
Megatron's rule (m % pp == 0 under interleaving) and prices are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main
from placement.cost import rules
from placement.specs import TrainingSpec

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--zero", "3", "--mbs", "1"]


def _evaluate(*argv: str, out: Path | None = None):
    extra = ["--out", str(out)] if out is not None else []
    return CliRunner().invoke(main, ["evaluate", *JOB, *argv, "--json", *extra])


def _broken(global_batch: int, torch_pipeline: bool, **layout) -> str | None:
    model = load_model("llama3-8b")
    train = TrainingSpec(seq_len=8192, global_batch=global_batch)
    facts = rules.Facts.of(model, train, framework="torchtitan" if torch_pipeline else "megatron")
    rule = rules.first_broken(facts, {"tp": 1, "cp": 1, "ep": 1, "etp": 1, "vpp": 1, "mbs": 1} | layout)
    return None if rule is None else rule.name


@pytest.mark.parametrize("m, megatron, torch", [
    (2, "vpp_microbatches", None),  # fewer than pp: one round under torch
    (4, None, None),
    (6, "vpp_microbatches", None),  # one round of 6
    (9, "vpp_microbatches", "vpp_microbatches"),  # 2 rounds do not divide 9: torch raises too
    (10, "vpp_microbatches", None),  # 2 rounds of 5
])
def test_interleaving_rule_is_torchs_for_torchtitan_and_megatrons_otherwise(m, megatron, torch):
    layout = {"pp": 4, "vpp": 2, "dp": 2}
    assert _broken(2 * m, False, **layout) == megatron
    assert _broken(2 * m, True, **layout) == torch


def test_plain_1f1b_needs_as_many_microbatches_as_stages_under_torch_only():
    assert _broken(4, True, pp=4, dp=2) == "pp_microbatches"  # 2 micro-batches on 4 stages
    assert _broken(4, False, pp=4, dp=2) is None  # Megatron's 1F1B warms up min(pp - rank - 1, m)
    assert _broken(8, True, pp=4, dp=2) is None


def test_evaluate_framework_torchtitan_refuses_1f1b_with_fewer_microbatches_than_stages():
    result = _evaluate("--pp", "4", "--global-batch", "8", "--framework", "torchtitan")
    assert result.exit_code == 2, result.output
    assert "Schedule1F1B" in result.output and "fewer micro-batches (2) than stages (4)" in result.output


def test_a_torchtitan_file_of_1f1b_with_fewer_microbatches_than_stages_does_not_start(tmp_path):
    """Without --framework the plan is Megatron's, which runs it; the torchtitan file says torch refuses it."""
    result = _evaluate("--pp", "4", "--global-batch", "8", "--emit", "torchtitan", out=tmp_path)
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["files_not_starting"] == ["torchtitan.sh"]
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "# this file does not start" in text and "Schedule1F1B" in text


def _plan(gb: int) -> dict:
    result = _evaluate("--tp", "2", "--pp", "4", "--vpp", "2", "--global-batch", str(gb), "--framework", "torchtitan")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_torchtitan_interleaving_with_fewer_microbatches_than_stages_is_priced_with_its_bubble():
    """m = 2 on pp 4 x vpp 2: (pp - m) + (m - 1)/vpp = 2.5 micro-batch times, against (pp - 1)/vpp = 1.5 at m = 4;
    the micro-batch's pace is the same."""
    two, four = _plan(4), _plan(8)
    assert two["layout"]["num_microbatches"] == 2 and four["layout"]["num_microbatches"] == 4
    pace2, pace4 = two["breakdown"]["bubble"] / 2.5, four["breakdown"]["bubble"] / 1.5
    assert pace2 == pytest.approx(pace4, rel=0.02)


def test_the_bubble_formula_is_torchs_schedule():
    """torch's own ScheduleInterleaved1F1B action lists, run with forward 1 and backward 2 time units a chunk, idle
    (pp - 1)/vpp + (pp - m)(1 - 1/vpp) micro-batch times: what cost.step prices."""
    sched = pytest.importorskip("torch.distributed.pipelining.schedules")

    def idle(pp: int, vpp: int, m: int) -> float:
        s = object.__new__(sched.ScheduleInterleaved1F1B)
        s.pp_group_size, s.n_local_stages, s._n_microbatches = pp, vpp, m
        s.number_of_rounds = max(1, m // pp)  # as its __init__ (schedules.py:2931-2932)
        s.microbatches_per_round = m // s.number_of_rounds
        ops = {r: [a for a in s._calculate_single_rank_operations(r) if a is not None] for r in range(pp)}
        sched._validate_schedule(ops, pp, pp * vpp, m)
        done: dict = {}
        clock, at = dict.fromkeys(ops, 0.0), dict.fromkeys(ops, 0)
        moved = True
        while moved:
            moved = False
            for r, acts in ops.items():
                while at[r] < len(acts):
                    a = acts[at[r]]
                    fwd = a.computation_type == sched.F
                    dep = ((a.stage_index - 1, True, a.microbatch_index) if a.stage_index else None) if fwd else (
                        (a.stage_index, True, a.microbatch_index) if a.stage_index == pp * vpp - 1
                        else (a.stage_index + 1, False, a.microbatch_index))
                    if dep is not None and dep not in done:
                        break
                    clock[r] = max(clock[r], done.get(dep, 0.0)) + (1.0 if fwd else 2.0)
                    done[(a.stage_index, fwd, a.microbatch_index)] = clock[r]
                    at[r] += 1
                    moved = True
        assert all(at[r] == len(ops[r]) for r in ops)
        return (max(clock.values()) - 3.0 * vpp * m) / (3.0 * vpp)

    from placement.cost.step import _interleaved_shortfall

    for pp, vpp in ((4, 2), (4, 4), (8, 2)):
        for m in range(1, 2 * pp + 1):
            x = type("X", (), {"pp": np.float64(pp), "vpp": np.float64(vpp), "m": np.float64(m)})()
            want = (pp - 1) / vpp + float(_interleaved_shortfall(x))
            assert idle(pp, vpp, m) == pytest.approx(want), (pp, vpp, m)


def test_interleaved_microbatches_in_flight_follow_torchs_warmup():
    """torch warms up (vpp - 1) rounds of m // max(1, m // pp) micro-batches (schedules.py:2884): with 6 on pp 4 x
    vpp 2 rank 0 runs all 12 chunk forwards before a backward, so it holds 6 micro-batches, not Megatron's 5.5; where
    pp divides m the count is Megatron's."""
    from types import SimpleNamespace

    from placement.cost.memory import in_flight
    from placement.specs.recipe import Recipe

    def held(m: int) -> float:
        f = np.float64
        x = SimpleNamespace(pp=np.array([f(4)]), vpp=np.array([f(2)]), m=np.array([f(m)]), recipe=Recipe(),
                            b=SimpleNamespace(vpp=np.array([2])))
        return float(in_flight(x, np.array([0.0]))[0])

    assert held(6) == 6.0
    assert held(8) == (3 * 2 + 1 * 4 + 1) / 2  # Megatron's interleaved warm-up
