"""A sliding-window layer's fused causal kernel executes its whole window for every query past the first w - 1: s w -
w (w - 1) / 2 query-key pairs, where a full causal layer executes s (s + 1) / 2.  The window's keys had been priced at
the full layer's executed fraction (half), so a windowed layer's attention core cost half what it runs."""

from __future__ import annotations

import pytest

from placement.cost.layer import attention_forward
from placement.specs import Layout
from tests.test_cost_terms import _ctx, _f, _model


def _core(model, seq_len: int) -> float:
    ctx = _ctx(model, "dgx-h100", 8, Layout(dp=8, micro_batch_size=1), seq_len=seq_len, global_batch=8)
    return _f(attention_forward(ctx)[1])


@pytest.mark.parametrize(("window", "seq_len"), [(4096, 32768), (128, 4096), (1024, 8192)])
def test_a_window_layer_executes_its_window_for_every_query(window: int, seq_len: int) -> None:
    full = _model("llama3-8b")
    windowed = full.model_copy(update={"sliding_window": window, "sliding_window_layers": full.num_layers})
    pairs_window = seq_len * window - window * (window - 1) / 2
    pairs_full = seq_len * seq_len / 2  # the full layer's executed half of the s x s it is counted at
    assert _core(windowed, seq_len) / _core(full, seq_len) == pytest.approx(pairs_window / pairs_full, rel=1e-9)


def test_a_window_as_long_as_the_sequence_is_full_attention() -> None:
    full = _model("llama3-8b")
    windowed = full.model_copy(update={"sliding_window": 8192, "sliding_window_layers": 16})
    assert _core(windowed, 4096) == pytest.approx(_core(full, 4096), rel=1e-12)
