"""Classes of equal values in the ball pass (saturated.precision.identity): an elementwise op's
output classes are the distinct tuples of its operands' classes, numbered in their order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from saturated.precision import identity


def _tuple_ranks(columns: list[np.ndarray]) -> np.ndarray:
    """Independent reference: each position's rank among the distinct tuples, in lexicographic
    order (numpy's sort of whole rows)."""
    _, inverse = np.unique(np.stack(columns, axis=-1), axis=0, return_inverse=True)
    return inverse.reshape(-1)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.lists(st.integers(1, 10**6), min_size=2, max_size=3),
       st.integers(0, 2**32 - 1))
def test_combined_classes_number_the_distinct_tuples_in_order(size: int, spans: list[int], seed: int) -> None:
    """Small key ranges (read from a table) and large ones (sorted) give the same numbering as
    sorting the tuples; equal tuples share a class and different ones do not."""
    rng = np.random.default_rng(seed)
    columns = [rng.integers(0, span, size=size) + int(rng.integers(0, 5)) for span in spans]
    combined = identity.combine(*columns)
    assert combined.dtype == np.int64
    assert np.array_equal(combined, _tuple_ranks(columns))


def test_both_ways_of_numbering_are_taken() -> None:
    """A range a few times the element count is read from a table; a wider one is sorted (the
    table would be mostly empty). Both number alike."""
    rng = np.random.default_rng(0)
    narrow = [rng.integers(0, 30, size=5000), rng.integers(0, 20, size=5000)]
    wide = [rng.integers(0, 10**5, size=5000), rng.integers(0, 10**5, size=5000)]
    for columns in (narrow, wide):
        assert np.array_equal(identity.combine(*columns), _tuple_ranks(columns))
    key = narrow[0] * 20 + narrow[1]
    assert np.array_equal(identity._dense_ids(key, 600), np.unique(key, return_inverse=True)[1])
