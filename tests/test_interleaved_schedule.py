"""Megatron-Core's interleaved 1F1B schedule, simulated, against what the cost model charges for it.

The schedule (core_r0.8.0 pipeline_parallel/schedules.py `forward_backward_pipelining_with_interleaving`, the same
order in later releases): a rank runs m x v chunk passes; virtual micro-batch k is model chunk
(k mod p v) // p of micro-batch (k // p v) p + k mod p (`get_model_chunk_id`, `get_microbatch_id_in_model_chunk`),
backwards in the mirrored chunk order; rank r warms up with (p - r - 1) x 2 + (v - 1) x p forwards, all of them
where m equals p (`all_warmup_microbatches`), then alternates one forward and one backward, then cools down.
A chunk's forward needs the same chunk of the micro-batch from the rank before, or the previous chunk from the last
rank (the wrap); a backward the gradient from the rank after, or the next chunk's from the first rank.  Under
`overlap_p2p_comm` no transfer blocks compute: a pass starts when its rank is free and its input has arrived, one
transfer time after the pass that produced it ended.

The cost model prices the step as m micro-batch times at a pace that includes the transfers each chunk's compute
does not hide (`pp_exposed_per_microbatch`), the (p - 1)/v bubble at that pace (cost.step `_bubble_s`), and the
transfers the warm-up and cool-down wait for (`pp_ramp_s`).

What the simulation leaves out (a second reading of core_r0.8.0 against a finer simulation): r0.8 waits on a
send's handle as on a receive's, posts the next forward's receive after the current forward, and runs the
cool-down's exchanges blocking (schedules.py:819-821, 1115).  For m above pp the finer simulation's step is this
one's to the last digit; at m = pp this one lets the last rank run its cool-down back to back, 2 (pp - 1)
transfers short (0.7 % at MLPerf's pp 6 x vpp 8), so there the priced step is slightly fast.  Megatron-Core 0.10+
can group more micro-batches than pp (`microbatch_group_size_per_vp_stage`, whose default is pp); no reader takes
it, and a larger group hides part of the warm-up's wait that this prices."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from placement.cost.comm import PpTerm, pp_exposed_per_microbatch, pp_ramp_s
from placement.specs.recipe import PipelineSchedule


def _passes(rank: int, pp: int, vpp: int, m: int) -> list[tuple[str, int, int]]:
    """(F or B, chunk, micro-batch) in the order one rank runs them."""
    total = m * vpp

    def chunk(k: int, forward: bool) -> int:
        c = (k % (pp * vpp)) // pp
        return c if forward else vpp - 1 - c

    def micro_batch(k: int) -> int:
        return (k // (pp * vpp)) * pp + k % pp

    warmup = total if m == pp else min((pp - rank - 1) * 2 + (vpp - 1) * pp, total)
    out = [("F", chunk(k, True), micro_batch(k)) for k in range(warmup)]
    forward, backward = warmup, 0
    for _ in range(total - warmup):
        out.append(("F", chunk(forward, True), micro_batch(forward)))
        out.append(("B", chunk(backward, False), micro_batch(backward)))
        forward, backward = forward + 1, backward + 1
    out += [("B", chunk(k, False), micro_batch(k)) for k in range(backward, total)]
    return out


def simulate(pp: int, vpp: int, m: int, forward_s: float, backward_s: float, transfer_s: float) -> float:
    """Seconds from the first pass to the last, every rank running its passes in order."""
    programs = [_passes(r, pp, vpp, m) for r in range(pp)]
    done: dict[tuple[str, int, int, int], float] = {}
    free, nxt = [0.0] * pp, [0] * pp
    moved = True
    while moved:
        moved = False
        for r in range(pp):
            while nxt[r] < len(programs[r]):
                kind, c, mb = programs[r][nxt[r]]
                if kind == "F":
                    dep = ("F", r - 1, c, mb) if r > 0 else (("F", pp - 1, c - 1, mb) if c > 0 else None)
                    took = forward_s
                else:
                    dep = (("B", r + 1, c, mb) if r < pp - 1
                           else (("B", 0, c + 1, mb) if c < vpp - 1 else ("F", r, c, mb)))
                    took = backward_s
                if dep is not None and dep not in done:
                    break
                arrives = 0.0 if dep is None else done[dep] + (transfer_s if dep[1] != r else 0.0)
                free[r] = max(free[r], arrives) + took
                done[(kind, r, c, mb)] = free[r]
                nxt[r] += 1
                moved = True
    assert all(nxt[r] == len(programs[r]) for r in range(pp)), "the schedule deadlocked"
    return max(free)


def priced(pp: int, vpp: int, m: int, forward_s: float, backward_s: float, transfer_s: float,
           ramp: bool = True) -> float:
    """The cost model's step for the same pipeline: one layer per chunk, each transfer `transfer_s`."""
    recipe = SimpleNamespace(pp_comm_overlap=True, pipeline_p2p_blocking=False,
                             pipeline_schedule=PipelineSchedule.ONE_F_ONE_B)
    x = SimpleNamespace(recipe=recipe, b=SimpleNamespace(pp=np.array([pp])), pp=np.array([float(pp)]),
                        vpp=np.array([float(vpp)]), m=np.array([float(m)]), full=np.array([0.0]),
                        full_layers_share=1.0, w=SimpleNamespace(num_layers=pp * vpp))
    t = np.array([transfer_s])
    term = PpTerm(per_microbatch_s=vpp * 2 * t, bytes_per_step=np.zeros(1), bubble_credit_s=np.zeros(1),
                  forward_transfer_s=t, backward_transfer_s=t)
    layer_s = np.array([forward_s + backward_s])
    # the model's backward is twice its forward (`pp_exposed_per_microbatch`)
    assert backward_s == pytest.approx(2 * forward_s)
    pace = vpp * layer_s + pp_exposed_per_microbatch(x, term, layer_s)
    step = m * pace + (pp - 1) / vpp * pace
    if ramp:
        step = step + pp_ramp_s(x, term, layer_s)
    return float(step[0])


def test_m_equal_to_pp_waits_every_transfer():
    """Megatron-Core r0.8's 70B weak-scaling row as the search prices it (pp 2, one layer a chunk, 2 micro-batches):
    every pass is warm-up or cool-down, so every transfer waits; pricing them hidden misses 8 % of the step."""
    forward, transfer = 6.0e-3, 0.73e-3
    sim = simulate(2, 42, 2, forward, 2 * forward, transfer)
    assert sim == pytest.approx(2 * 42 * 3 * forward * (1 + 1 / 84) + 2 * 42 * 2 * transfer, rel=1e-3)
    assert priced(2, 42, 2, forward, 2 * forward, transfer) == pytest.approx(sim, rel=0.01)
    assert priced(2, 42, 2, forward, 2 * forward, transfer, ramp=False) < 0.93 * sim


def test_without_transfers_the_bubble_is_ptdp():
    """At zero transfer time the simulation is the (p - 1)/v bubble of PTD-P §2.2.2, which checks the simulation."""
    for pp, vpp, m in ((2, 42, 2), (4, 23, 8), (8, 12, 64), (6, 8, 6)):
        sim = simulate(pp, vpp, m, 1.0, 2.0, 0.0)
        assert sim == pytest.approx(3.0 * vpp * m * (1 + (pp - 1) / (vpp * m)))
        assert priced(pp, vpp, m, 1.0, 2.0, 0.0) == pytest.approx(sim)


def test_priced_within_4_percent_of_the_schedule():
    """Transfers up to 0.3 of a chunk's forward (an IB hop of one layer's activations is a tenth or less), over
    every pipeline of the grid: the model stays within 4 % of the simulated schedule, 1 % on average.  Past that it
    drifts (5.6 % at half a forward, two chunks a rank): the formula is not claimed there."""
    errors = []
    for pp in (2, 3, 4, 6, 8, 16):
        for vpp in (2, 3, 4, 8, 12):
            for groups in range(1, 7):
                m = groups * pp
                for share in (0.01, 0.05, 0.1, 0.2, 0.3):
                    sim = simulate(pp, vpp, m, 1.0, 2.0, share)
                    errors.append(abs(priced(pp, vpp, m, 1.0, 2.0, share) / sim - 1))
    assert max(errors) < 0.04
    assert sum(errors) / len(errors) < 0.01


def test_without_the_ramp_the_model_misses_the_warm_up():
    """The term is what closes the gap: over a grid of pipelines, dropping it leaves errors past 10 %."""
    worst_with, worst_without = 0.0, 0.0
    for pp in (2, 4, 8):
        for vpp in (2, 4, 12):
            for groups in (1, 2, 4):
                m = groups * pp
                sim = simulate(pp, vpp, m, 1.0, 2.0, 0.3)
                worst_with = max(worst_with, abs(priced(pp, vpp, m, 1.0, 2.0, 0.3) / sim - 1))
                worst_without = max(worst_without, abs(priced(pp, vpp, m, 1.0, 2.0, 0.3, ramp=False) / sim - 1))
    assert worst_with < 0.04
    assert worst_without > 0.10
