"""The 1F1B A2A overlap (`--overlap-moe-expert-parallel-comm`) pairs one micro-batch's forward with another's
backward; the warm-up forwards and cool-down backwards have no partner and run their all-to-alls exposed
(Megatron-Core pipeline_parallel/combined_1f1b.py: "The forward step for the first microbatch is executed alone, no a2a
overlapping").  A user trial saw a 4-micro-batch DeepSeek-V3 plan priced with 95 % of its EP traffic hidden."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.comm import unpaired_share
from placement.specs import Layout
from tests.test_cost_terms import _ctx


@pytest.mark.parametrize(("pp", "vpp", "batch", "share"), [
    (1, 1, 4, 1 / 4),            # the first forward and the last backward of 4 micro-batches
    (1, 1, 32, 1 / 32),
    (4, 1, 8, 3 / 8),            # pp - 1 warm-up forwards and cool-down backwards of 8
    (4, 2, 8, (3 * 2 + 1 * 4) / 16),  # Megatron's interleaved warm-up, of 8 x 2 chunk passes
    (4, 2, 4, 1.0),              # all warm-up and cool-down
])
def test_the_unpaired_share(pp: int, vpp: int, batch: int, share: float) -> None:
    ep = 8
    dp = 64 // (pp * 2)
    lay = Layout(tp=2, ep=ep, pp=pp, vpp=vpp, dp=dp, sequence_parallel=True)
    x = _ctx("qwen3-30b-a3b", "dgx-h100", 64, lay, global_batch=batch * dp)
    assert float(np.asarray(x.m).ravel()[0]) == batch
    assert float(np.asarray(unpaired_share(x)).ravel()[0]) == pytest.approx(share)


def _ep(batch: int) -> tuple[float, float]:
    out = CliRunner().invoke(main, ["evaluate", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16",
                                    "--ep", "16", "--mbs", "1", "--seq-len", "4096", "--global-batch",
                                    str(16 * batch), "--ep-comm-overlap", "--moe-dispatcher", "alltoall", "--json"])
    assert out.exit_code in (0, 1), out.output
    b = json.loads(out.stdout)["breakdown"]
    return b["exposed"]["ep"], b["ep"]


def test_fewer_micro_batches_expose_more_of_the_all_to_all() -> None:
    exposed_2, total_2 = _ep(2)
    exposed_32, total_32 = _ep(32)
    assert exposed_2 / total_2 > 0.5 > exposed_32 / total_32
