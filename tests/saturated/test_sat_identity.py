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


def _same(classes: np.ndarray) -> np.ndarray:
    """Which elements share a class with which: the partition, whatever the numbering."""
    flat = classes.reshape(-1)
    return flat[:, None] == flat[None, :]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([(), (1,), (2,), (2, 3)]), st.integers(1, 6),
       st.integers(1, 6), st.integers(1, 4))
def test_sparse_product_classes_are_the_multisets_of_pairs(seed: int, batch: tuple[int, ...], m: int,
                                                           k: int, n: int) -> None:
    """Two elements of weights @ values share a class exactly when the multisets of (weight
    class, value class) over their nonzero terms are equal: checked against those multisets
    built one element at a time, with rows of no, one and several terms, equal values at
    different positions, and values shared by every matrix of the batch."""
    rng = np.random.default_rng(seed)
    left = rng.integers(0, 2, size=(*batch, m, k))
    zeros = rng.random((*batch, m, k)) < rng.choice([0.2, 0.6, 0.95])
    right = rng.integers(0, 3, size=(k, n) if rng.random() < 0.3 else (*batch, k, n))
    classes = identity.sparse_products(left, zeros, right)
    assert classes.shape == (*batch, m, n)
    values = np.broadcast_to(right, (*batch, k, n))
    multisets = np.empty((*batch, m, n), dtype=object)
    for index in np.ndindex(*batch, m, n):
        *matrix, row, column = index
        terms = [(int(left[(*matrix, row, j)]), int(values[(*matrix, j, column)]))
                 for j in range(k) if not zeros[(*matrix, row, j)]]
        multisets[index] = tuple(sorted(terms))
    assert np.array_equal(_same(classes), _same(multisets))


def test_a_product_with_no_terms_is_one_class() -> None:
    """An empty inner dimension: every element is the empty sum; empty outputs stay empty."""
    classes = identity.sparse_products(np.zeros((2, 3, 0), dtype=np.int64), np.zeros((2, 3, 0), dtype=bool),
                                       np.zeros((2, 0, 4), dtype=np.int64))
    assert classes.shape == (2, 3, 4) and not classes.any()
    empty = identity.sparse_products(np.zeros((0, 2)), np.zeros((0, 2), dtype=bool), np.zeros((2, 5)))
    assert empty.shape == (0, 5)
