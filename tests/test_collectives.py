"""The cost model's grouping of candidates by (stride, size): the O(K) path must equal np.unique."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.cost.collectives import _divisors, _unique_pairs


@settings(max_examples=60, deadline=None)
@given(num_gpus=st.sampled_from([1, 8, 24, 1000, 1024, 131072, 1000000]), k=st.integers(0, 400),
       seed=st.integers(0, 2**32 - 1), off_divisor=st.booleans())
def test_unique_pairs_equals_numpy_unique(num_gpus: int, k: int, seed: int, off_divisor: bool) -> None:
    rng = np.random.default_rng(seed)
    divs = _divisors(num_gpus)
    stride, size = rng.choice(divs, k), rng.choice(divs, k)
    if off_divisor and k:  # a value that does not divide the GPU count takes the np.unique path
        size[rng.integers(k)] = num_gpus + 1
    uniq, inverse = _unique_pairs(stride, size, num_gpus)
    want_uniq, want_inverse = np.unique(stride * (num_gpus + 1) + size, return_inverse=True)
    assert uniq.tolist() == want_uniq.tolist()
    assert inverse.reshape(-1).tolist() == want_inverse.reshape(-1).tolist()


def test_divisors() -> None:
    assert _divisors(12).tolist() == [1, 2, 3, 4, 6, 12]
    assert _divisors(1).tolist() == [1]
