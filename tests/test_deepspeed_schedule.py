"""DeepSpeed's pipeline schedule, simulated, against what the cost model assumes of it.

DeepSpeed's `TrainSchedule` (runtime/pipe/schedule.py; read at DeeperSpeed eb7f5cff, the GPT-NeoX-20B engine, and
DeepSpeed 0.19.8) runs 2 (m + p - 1) lock-steps: at an even step the even stages run a forward and the odd ones
a backward, at an odd step the other way round.  A forward step first receives its activation from the stage
before and sends that stage the gradient of its previous backward; a backward step first sends the stage after the
activation of its previous forward and receives its gradient.  Each send and receive is a blocking collective of
its own (`pipeline_p2p_blocking`): both stages wait for each other and are busy for the transfer.

The cost model prices this engine as 1F1B, (m + p - 1) micro-batch times of forward + backward
(cost.step `_bubble_s`), with four transfer times per micro-batch on a middle stage and two on a two-stage
pipeline (cost.comm `pp_term`), less the (2 p + 4) transfers the lock-step schedule does not run through its
bubble (`PpTerm.bubble_credit_s`).  The simulation below checks both on the schedule itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


def _commands(stage: int, stages: int, micro_batches: int) -> list[tuple[str, int, int]]:
    """(op, peer stage, micro-batch) in the order one stage runs them: "F"/"B" compute, "send_act"/"recv_act"/
    "send_grad"/"recv_grad" transfers."""
    def valid(mb: int) -> bool:
        return 0 <= mb < micro_batches

    out: list[tuple[str, int, int]] = []
    prev = -1
    for step in range(2 * (micro_batches + stages - 1)):
        forward = (step % 2) == (stage % 2)
        if forward:  # the forward micro-batch of this step: half the step count, later for later stage pairs
            mb = (step - (step % 2)) // 2 - stage // 2
        elif step % 2 == 0:
            mb = step // 2 - stages + (stage + 1) // 2
        else:
            mb = (step - 1) // 2 - stages + 1 + stage // 2
        if forward and stage > 0:
            if valid(mb):
                out.append(("recv_act", stage - 1, mb))
            if valid(prev):
                out.append(("send_grad", stage - 1, prev))
        if not forward and stage < stages - 1:
            if valid(prev):
                out.append(("send_act", stage + 1, prev))
            if valid(mb):
                out.append(("recv_grad", stage + 1, mb))
        if valid(mb):
            out.append(("F" if forward else "B", stage, mb))
        prev = mb
    return out


_PAIR = {"send_act": "recv_act", "recv_act": "send_act", "send_grad": "recv_grad", "recv_grad": "send_grad"}


def simulate(stages: int, micro_batches: int, forward_s: float, backward_s: float, transfer_s: float) -> float:
    """Seconds of one step: every stage runs its commands in order; a transfer starts when both stages reach it
    and holds both for `transfer_s`."""
    programs = [_commands(s, stages, micro_batches) for s in range(stages)]
    pc, clock = [0] * stages, [0.0] * stages
    while any(pc[s] < len(programs[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            while pc[s] < len(programs[s]):
                op, peer, mb = programs[s][pc[s]]
                if op in ("F", "B"):
                    clock[s] += forward_s if op == "F" else backward_s
                elif pc[peer] < len(programs[peer]) and programs[peer][pc[peer]] == (_PAIR[op], s, mb):
                    clock[s] = clock[peer] = max(clock[s], clock[peer]) + transfer_s
                    pc[peer] += 1
                else:
                    break
                pc[s] += 1
                moved = True
        assert moved, f"the schedule deadlocks at {pc}"
    return max(clock)


@pytest.mark.parametrize(("stages", "micro_batches"), [(2, 8), (4, 32), (12, 128), (4, 4), (7, 9)])
def test_every_micro_batch_runs_once_forward_and_once_backward_on_every_stage(stages, micro_batches) -> None:
    for s in range(stages):
        compute = [(op, mb) for op, _, mb in _commands(s, stages, micro_batches) if op in ("F", "B")]
        assert sorted(compute) == sorted([("F", mb) for mb in range(micro_batches)]
                                         + [("B", mb) for mb in range(micro_batches)])


@settings(max_examples=60, deadline=None)
@given(stages=st.integers(2, 12), micro_batches=st.integers(1, 40),
       forward_s=st.floats(0.1, 3.0), backward_ratio=st.floats(1.0, 4.0))
def test_the_lock_step_schedule_takes_1f1b_time(stages, micro_batches, forward_s, backward_ratio) -> None:
    """Without transfer time the lock-steps cost exactly 1F1B's (m + p - 1)(F + B): the model's bubble."""
    backward_s = forward_s * backward_ratio
    got = simulate(stages, micro_batches, forward_s, backward_s, 0.0)
    assert got == pytest.approx((micro_batches + stages - 1) * (forward_s + backward_s), rel=1e-9)


@pytest.mark.parametrize(("stages", "micro_batches"), [(2, 8), (3, 8), (4, 32), (8, 16), (12, 128)])
def test_blocking_transfers_cost_what_pipeline_p2p_blocking_prices(stages, micro_batches) -> None:
    """Per micro-batch, a middle stage's four transfers in turn (two on a two-stage pipeline): what `pp_term`
    prices.  Through the bubble the schedule adds only 2 (p - 4) transfers beyond 4 m (p > 2), not the
    4 (p - 1) that (p - 1) micro-batch times at that pace hold: (2 p + 4) fewer, what `bubble_credit_s` takes off,
    whatever the forward:backward ratio."""
    expected = 2 * micro_batches if stages == 2 else 4 * micro_batches + 2 * (stages - 4)
    for f, b in ((1.0, 3.0), (1.0, 2.0), (2.0, 1.0)):  # full recompute, none, a forward-heavy stage
        c = 0.01
        added = (simulate(stages, micro_batches, f, b, c) - simulate(stages, micro_batches, f, b, 0.0)) / c
        assert added == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("pp", [2, 3, 4, 8])
def test_the_models_deepspeed_step_is_the_simulated_schedule(pp) -> None:
    """placement's estimate of a DeepSpeed pipeline (blocking sends and receives) against the schedule simulated
    with the estimate's own micro-batch compute and one transfer of a stage's 1/tp activation share priced on
    its own (collectives.Groups.p2p): four transfers per micro-batch (two at p = 2) and 4 m + 2 (p - 4) in all
    (2 m), as the schedule runs them."""
    import numpy as np

    from placement.catalog import load_accelerator, load_cluster, load_model
    from placement.cost import collectives as coll
    from placement.cost.batch import LayoutBatch
    from placement.cost.constants import BYTES_PER_ACTIVATION
    from placement.cost.step import estimate
    from placement.specs import Layout, Recompute, TrainingSpec
    from placement.specs.recipe import GradAccumulation, Recipe
    from placement.topology import Topology
    from placement.workload import workload

    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=8 * pp)
    model = load_model("llama3-8b")
    train = TrainingSpec(seq_len=4096, global_batch=32)
    recipe = Recipe(pipeline_p2p_blocking=True, grad_accumulation=GradAccumulation.AUTOGRAD, dp_overlap=False)
    layout = Layout(tp=8, pp=pp, dp=1, micro_batch_size=1, zero_stage=1, recompute=Recompute.FULL,
                    sequence_parallel=True)
    est = estimate(workload(model), train, topo, LayoutBatch.from_layouts([layout], recipe), recipe)
    m = int(est.num_microbatches[0])
    pair = coll.Groups(coll.LevelArrays(topo), np.array([8]), np.array([pp]), pair=True)
    transfer = float(pair.p2p(np.array([4096 * model.hidden_size * BYTES_PER_ACTIVATION / 8]))[0])
    turns = 2 if pp == 2 else 4
    assert float(est.pp_s[0]) == pytest.approx(turns * m * transfer, rel=1e-9)  # per micro-batch, in turn
    compute = float(est.microbatch_s[0]) - turns * transfer  # forward + backward of one micro-batch on a stage
    simulated = simulate(pp, m, compute / 4, 3 * compute / 4, transfer)
    modelled = m * float(est.microbatch_s[0]) + float(est.bubble_s[0])
    assert modelled == pytest.approx(simulated, rel=1e-9)
