"""How many layers each pipeline stage holds, uneven first/last stages included (vectorized).

Even split when pp divides the layer count.  Otherwise every middle stage holds ceil(L/pp) layers and
the first and last stages share the rest, as Megatron's --decoder-first/last-pipeline-num-layers and
Llama 3's "first and last stage carry one layer less" do (Llama 3 §3.3.2), interleaved or not.  Where that leaves
the first and last less than a layer each (pp near L: 80 layers on 19 stages, 17 x 5 = 85), every rank holds
floor(L/pp) and the L mod pp layers left go one each to the middle ranks from the second on (80 on 19: 4, then four
ranks of 5, then 4s), the last rank next; Megatron runs it as its --pipeline-model-parallel-layout.  Leading dense
layers of an MoE model sit on the first stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StageLayers:
    first: np.ndarray
    middle: np.ndarray
    last: np.ndarray
    valid: np.ndarray
    """False where pp cannot split the layers (a stage would be empty)."""
    fullest: np.ndarray
    """The most layers on one rank (the middle ranks', or the first and last's where they take the heavier rest)."""
    lightest: np.ndarray
    """The fewest layers on one rank."""


def stage_layers(num_layers: int, pp: np.ndarray, vpp: np.ndarray) -> StageLayers:
    pp = np.asarray(pp, dtype=np.int64)
    vpp = np.asarray(vpp, dtype=np.int64)
    even = num_layers % pp == 0
    per = -(-num_layers // pp)  # ceil
    rest = num_layers - np.maximum(pp - 2, 0) * per
    first_uneven = rest // 2
    last_uneven = rest - first_uneven
    # ceil(L / pp) on every middle rank leaves the first and last less than a layer each: floor(L / pp) everywhere,
    # the rest one each to the middle ranks, then to the last (`balanced_ranks`)
    short = (pp > 2) & ~even & (rest < 2)
    floor, left = num_layers // pp, num_layers % pp
    first = np.where(even, num_layers // pp, np.where(short, floor, first_uneven))
    last = np.where(even, num_layers // pp, np.where(short, floor + (left == pp - 1), last_uneven))
    per = np.where(short, floor + (left > 0), per)
    first = np.where(pp == 1, num_layers, first)
    last = np.where(pp == 1, num_layers, last)
    middle = np.where(pp > 2, per, np.maximum(first, last))
    fullest = np.maximum(np.maximum(first, last), np.where(pp > 2, per, 0))
    lightest = np.minimum(np.minimum(first, last), np.where(pp > 2, per, fullest))  # short: the first's floor
    # interleaving needs every model chunk to hold a layer and the fullest stages in equal chunks (Megatron's
    # default split); the lighter stages may split unevenly (Llama 3 ran interleaved 1F1B on 126 layers over 16
    # stages, the first and last one layer short)
    valid = (pp <= num_layers) & ((pp == 1) | (lightest >= 1)) & ((vpp == 1) | ((lightest >= vpp)
                                                                                & (fullest % vpp == 0)))
    return StageLayers(first=first, middle=middle, last=last, valid=valid, fullest=fullest, lightest=lightest)


def balanced_ranks(units: int, pp: int) -> list[int] | None:
    """Units per pipeline rank where ceil(units / pp) on the middle ranks would leave the first and last less than
    one each (pp > 2, pp not dividing the units): floor(units / pp) on every rank, the remainder one each to ranks
    1, 2, ... and then the last; None where the ceil split holds (stage_layers' `short` case, as a list)."""
    if pp <= 2 or units % pp == 0 or units - (pp - 2) * -(-units // pp) >= 2:
        return None
    floor, left = divmod(units, pp)
    ranks = [floor] * pp
    for r in [*range(1, pp - 1), pp - 1][:left]:
        ranks[r] += 1
    return ranks
