"""How many layers each pipeline stage holds, uneven first/last stages included (vectorized).

Even split when pp divides the layer count.  Otherwise every middle stage holds ceil(L/pp) layers and
the first and last stages share the rest, as Megatron's --decoder-first/last-pipeline-num-layers and
Llama 3's "first and last stage carry one layer less" do (Llama 3 §3.3.2), interleaved or not.  Leading dense layers of
an MoE model sit on the first stage.
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


def stage_layers(num_layers: int, pp: np.ndarray, vpp: np.ndarray) -> StageLayers:
    pp = np.asarray(pp, dtype=np.int64)
    vpp = np.asarray(vpp, dtype=np.int64)
    even = num_layers % pp == 0
    per = -(-num_layers // pp)  # ceil
    rest = num_layers - np.maximum(pp - 2, 0) * per
    first_uneven = rest // 2
    last_uneven = rest - first_uneven
    first = np.where(even, num_layers // pp, first_uneven)
    last = np.where(even, num_layers // pp, last_uneven)
    first = np.where(pp == 1, num_layers, first)
    last = np.where(pp == 1, num_layers, last)
    middle = np.where(pp > 2, per, np.maximum(first, last))
    # interleaving needs every model chunk to hold a layer and the full stages in equal chunks (Megatron's
    # default split); the lighter first and last stages may split unevenly (Llama 3 ran interleaved 1F1B on
    # 126 layers over 16 stages, the first and last one layer short)
    valid = (pp <= num_layers) & ((pp == 1) | (first >= 1)) & ((vpp == 1) | ((np.minimum(first, last) >= vpp)
                                                                            & (per % vpp == 0)))
    return StageLayers(first=first, middle=middle, last=last, valid=valid)
