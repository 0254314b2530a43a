"""Identical sub-computations: proofs that two elements are equal at every order of c.

Balls can never prove two numbers equal (each keeps a radius), yet exact ties are common: two
occurrences of a token, without position information at the leading order, get the same key in
every layer. Such equalities follow from the computation itself: the same operations on equal
inputs give equal results. Each element of a value carries a *class* (an integer), such that
two elements of one tensor with the same class are equal as functions of c. Classes start from
exact values (equal floats are equal numbers) and each op derives its output's classes from the
classes its elements were computed from: an elementwise op from the operands' element classes, a
reduction or matrix product from the classes of the whole rows and columns it reads. Classes are
local to one tensor (they are compared only within it), so each op renumbers them.

>>> same = combine(np.array([0, 0, 1]), np.array([2, 2, 2]))
>>> bool(same[0] == same[1]), bool(same[0] == same[2])
(True, False)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["combine", "joined", "of_values", "rows", "sparse_products", "value_rows"]


def of_values(values: Tensor) -> np.ndarray:
    """Classes of exact values: equal floats share one (−0.0 and 0.0 included).

    >>> of_values(torch.tensor([1.5, -0.0, 1.5, 0.0])).tolist()
    [1, 0, 1, 0]
    """
    array = values.detach().to("cpu", torch.float64).numpy()
    if not array.size:
        return np.zeros(array.shape, dtype=np.int64)
    _, inverse = np.unique(array.reshape(-1), return_inverse=True)
    return inverse.reshape(array.shape).astype(np.int64)


def value_rows(values: Tensor, axes: tuple[int, ...]) -> np.ndarray:
    """Classes of whole rows of exact values along ``axes``, as :func:`rows` of
    :func:`of_values` gives them, read from the floats' bits (no sort of every element: a
    weight matrix has millions).

    >>> value_rows(torch.tensor([[1.0, -0.0], [1.0, 0.0], [2.0, 0.0]]), (1,)).tolist()
    [0, 0, 1]
    """
    array = (values.detach().to("cpu", torch.float64) + 0.0).numpy()  # + 0.0: −0.0 becomes 0.0
    return rows(array.view(np.int64), axes)


def combine(*classes: np.ndarray) -> np.ndarray:
    """Classes of an elementwise op's outputs from its operands' (broadcast): equal tuples of
    operand classes give equal outputs."""
    shape = np.broadcast_shapes(*(c.shape for c in classes))
    if len(classes) == 1:
        return np.broadcast_to(classes[0], shape).copy()
    columns = [np.broadcast_to(c, shape).reshape(-1) for c in classes]
    if not columns[0].size:
        return np.zeros(shape, dtype=np.int64)
    return _distinct(columns).reshape(shape)


def _keys(*classes: np.ndarray) -> np.ndarray:
    """Like :func:`combine`, one integer per tuple of classes, equal for equal tuples, but not
    renumbered densely (no sort): where the tuples only go on to be compared or sorted."""
    shape = np.broadcast_shapes(*(c.shape for c in classes))
    columns = [np.broadcast_to(c, shape).reshape(-1) for c in classes]
    packed = _packed(columns) if columns[0].size else None
    return combine(*classes) if packed is None else packed[0].reshape(shape)


def _packed(columns: list[np.ndarray]) -> tuple[np.ndarray, int] | None:
    """The tuples (one per position of the equal-length, nonempty ``columns``) packed into one
    integer each, in their lexicographic order, and the integers' range; None where it would
    reach 2^62."""
    key = np.zeros(columns[0].shape, dtype=np.int64)
    room = 1
    for column in columns:
        low = int(column.min())
        span = int(column.max()) - low + 1
        if room * span >= 2**62:
            return None
        key = key * span + (column - low)
        room *= span
    return key, room


def _distinct(columns: list[np.ndarray]) -> np.ndarray:
    """Dense ids of the tuples (one per position of the equal-length ``columns``): equal tuples,
    equal ids. The tuples are packed into one integer when their ranges allow (a 1-D unique is
    far cheaper than one over rows)."""
    packed = _packed(columns)
    if packed is None:
        _, inverse = np.unique(np.stack(columns, axis=-1), axis=0, return_inverse=True)
        return inverse.reshape(-1).astype(np.int64)
    return _dense_ids(*packed)


# Keys per element up to which dense ids come from a table of the keys present rather than a
# sort of the keys: two passes over the table against a sort's n·log n.
_TABLE_PER_ELEMENT = 4


def _dense_ids(key: np.ndarray, room: int) -> np.ndarray:
    """``np.unique(key, return_inverse=True)[1]`` for int64 keys in [0, ``room``): each key's
    rank among the distinct keys. Where ``room`` is small against the keys' count, each key's rank
    is read from a running count over a table of the keys present, without sorting them."""
    if room > _TABLE_PER_ELEMENT * key.size + 4096:  # sorted: torch's unique, 1.5–2.5× numpy's
        keys = torch.from_numpy(np.ascontiguousarray(key))
        return torch.unique(keys, sorted=True, return_inverse=True)[1].numpy().reshape(-1)
    present = np.zeros(room, dtype=bool)
    present[key] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return rank[key]


def rows(classes: np.ndarray, axes: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    """Classes of whole rows along ``axes`` (in order): what a reduction over them yields."""
    moved = np.moveaxis(classes, axes, tuple(range(classes.ndim - len(axes), classes.ndim)))
    outer = moved.shape[: classes.ndim - len(axes)]
    flat = moved.reshape(int(np.prod(outer, dtype=np.int64)), -1)
    if not flat.shape[0] or not flat.shape[1]:
        ids = np.zeros(outer, dtype=np.int64)
    else:
        ids = _distinct_rows(flat).reshape(outer)
    if keepdims:
        for axis in sorted(axes):
            ids = np.expand_dims(ids, axis)
    return ids


_MULTIPLIERS = np.random.default_rng(0).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)


def _distinct_rows(flat: np.ndarray) -> np.ndarray:
    """Dense ids of the rows of a 2-D integer array: equal rows, equal ids. Rows are hashed
    (a sum of odd multiples, mod 2^64) and every row is then compared with the first of its hash
    group, so that a collision can only cost time (the exact sort of whole rows), never a false
    equality."""
    if flat.shape[1] == 1:
        return _distinct([flat[:, 0]])
    width = flat.shape[1]
    multipliers = np.resize(_MULTIPLIERS, width) ^ np.arange(width, dtype=np.uint64)
    hashes = (flat.astype(np.uint64) * multipliers).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(flat, flat[first[inverse]]):
        _, inverse = np.unique(flat, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def joined(pieces: list[np.ndarray]) -> list[np.ndarray]:
    """Pieces renumbered apart, to be placed side by side (a class of one piece never claims
    equality with an element of another)."""
    out, offset = [], 0
    for piece in pieces:
        out.append(piece + offset)
        offset += int(piece.max()) + 1 if piece.size else 0
    return out


def sparse_products(left: np.ndarray, zeros: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Classes of a matrix product whose left factor is zero at every order where ``zeros``:
    element (i, j) is the sum of left[i, k]·right[k, j] over the other k, so equal multisets of
    (left class, right class) pairs give equal sums (hard attention picking equal values at
    different positions gives equal outputs).

    Rows are taken by their number of terms (multisets of different sizes never match), each
    size at its own width: a few rows tied over every position (a padded query's) do not widen
    the many with one term.

    >>> weights = np.array([[1, 0], [0, 1]]); off = np.array([[False, True], [True, False]])
    >>> values = np.array([[5], [5]])  # two equal value rows
    >>> sparse_products(weights, off, values).tolist()
    [[0], [0]]
    """
    batch = np.broadcast_shapes(left.shape[:-2], zeros.shape[:-2], right.shape[:-2])
    m, k = np.broadcast_shapes(left.shape[-2:], zeros.shape[-2:])
    n = right.shape[-1]
    if not (m and k and n and all(batch)):  # every element a sum of no terms, if any
        return np.zeros((*batch, m, n), dtype=np.int64)
    flat_left = np.broadcast_to(left, (*batch, m, k)).reshape(-1, k)
    flat_zeros = np.broadcast_to(zeros, (*batch, m, k)).reshape(-1, k)
    flat_right = np.broadcast_to(right, batch + right.shape[-2:]).reshape(-1, k, n)
    matrix = np.arange(len(flat_zeros)) // m  # each row's matrix in the batch
    counts = k - flat_zeros.sum(axis=-1)  # the terms that count, per row
    within = np.zeros((len(flat_zeros), n), dtype=np.int64)  # a row of no terms: one class
    for count in np.unique(counts[counts > 0]).tolist():
        chosen_rows = np.nonzero(counts == count)[0]
        order = np.argsort(flat_zeros[chosen_rows], axis=-1, kind="stable")[:, :count]  # its terms
        chosen = np.take_along_axis(flat_left[chosen_rows], order, -1)
        picked = flat_right[matrix[chosen_rows][:, None], order]  # (rows, count, n)
        pairs = np.sort(_keys(chosen[..., None], picked), axis=-2)  # each multiset in order
        within[chosen_rows] = rows(pairs, (1,))
    return combine(counts[:, None], within).reshape((*batch, m, n))
