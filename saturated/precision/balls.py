"""Arrays of balls: numpy object arrays of python-flint ``arb`` values, and the few array
operations the refinement needs that numpy does not do for objects quickly (matrix products run
in float64 BLAS, exactly: :mod:`saturated.precision.products`).

An ``arb`` is a midpoint and a radius with rigorous rounding: every operation returns a ball that
contains the exact result for every pair of values in its operands' balls. A float converts to a
ball of radius 0 exactly (floats are dyadic rationals). The working precision is FLINT's global
``ctx.prec``; :func:`working_precision` sets it for a block and puts it back.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import flint
import numpy as np
import torch
from torch import Tensor

from saturated.precision.products import balls_of_split, product_of_splits, split

__all__ = [
    "ONE",
    "ZERO",
    "balls_of",
    "matmul",
    "nan_like",
    "split_matmul",
    "split_sum",
    "working_precision",
]

ZERO = flint.arb(0)
ONE = flint.arb(1)
_NAN = flint.arb.nan()

_to_ball = np.frompyfunc(flint.arb, 1, 1)


@contextmanager
def working_precision(bits: int) -> Iterator[None]:
    """FLINT's working precision set to ``bits`` inside the block."""
    old = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = old


def balls_of(values: Tensor | np.ndarray | float) -> np.ndarray:
    """Exact balls (radius 0) of float values: every float is a dyadic rational.

    >>> balls_of(torch.tensor([0.5, -2.0])).tolist()
    [0.500000000000000, -2.00000000000000]
    """
    if isinstance(values, Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(_to_ball(np.asarray(values, dtype=np.float64)), dtype=object)


def nan_like(shape: tuple[int, ...]) -> np.ndarray:
    """Balls that say nothing (NaN): the value of an element whose decision is not made."""
    out = np.empty(shape, dtype=object)
    out.fill(_NAN)
    return out


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The matrix products of (·, ..., m, k) and (·, ..., k, n) splits (batch axes of equal
    sizes), as a split (·, ..., m, n)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if not (m and n and k) or 0 in a.shape[1:-2]:
        return np.zeros((2, *a.shape[1:-2], m, n))
    return product_of_splits(a, b, flint.ctx.prec)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` with torch's broadcasting of batch dimensions (1-D operands as in ``torch.matmul``),
    each matrix product exact in float64 BLAS (:mod:`saturated.precision.products`). Operands are
    ball arrays or float arrays.

    >>> a = balls_of(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> matmul(a, balls_of(torch.tensor([1.0, -1.0]))).tolist()
    [-1.00000000000000, -1.00000000000000]
    """
    return balls_of_split(split_matmul(split(a, flint.ctx.prec), split(b, flint.ctx.prec)))


def _batched(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """A split (·, *its batch, rows, columns) broadcast to ``batch`` (new batch axes go after
    the split's own first axis, not before it)."""
    missing = len(batch) - (x.ndim - 3)
    x = x.reshape(x.shape[:1] + (1,) * missing + x.shape[1:])
    return np.broadcast_to(x, x.shape[:1] + batch + x.shape[-2:])


def split_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`matmul` on splits (:func:`~saturated.precision.products.split`: the balls' axes are
    the trailing ones), as the split of the product."""
    shape_a, shape_b = a.shape[1:], b.shape[1:]
    if len(shape_a) > 2 and len(shape_b) == 2:  # one product for every row
        rows = a.reshape(a.shape[0], -1, shape_a[-1])
        out = _product(rows, b)
        return out.reshape(out.shape[0], *shape_a[:-1], shape_b[-1])
    vector_left, vector_right = len(shape_a) == 1, len(shape_b) == 1
    if vector_left:
        a = a[:, None, :]
    if vector_right:
        b = b[:, :, None]
    batch = np.broadcast_shapes(a.shape[1:-2], b.shape[1:-2])
    a, b = _batched(a, batch), _batched(b, batch)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matrix shapes {shape_a} and {shape_b} do not multiply")
    out = _product(a, b)
    if vector_right:
        out = out[..., 0]
    if vector_left:
        out = out[..., 0, :] if not vector_right else out[..., 0]
    return out


def split_sum(a: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """The sum of a split's values along ``axes``, as a split: a matrix product with a column
    of ones, exact in float64 BLAS as every product here is."""
    ndim = a.ndim - 1
    axes = tuple(sorted(axis % ndim for axis in axes))
    kept = [axis for axis in range(ndim) if axis not in axes]
    moved = np.transpose(a, (0, *(axis + 1 for axis in kept), *(axis + 1 for axis in axes)))
    count = math.prod(a.shape[axis + 1] for axis in axes)
    rows = moved.reshape(a.shape[0], -1, count)
    total = _product(rows, np.stack([np.ones((count, 1)), np.zeros((count, 1))]))
    shape = [a.shape[axis + 1] for axis in kept] if not keepdims else \
        [1 if axis in axes else a.shape[axis + 1] for axis in range(ndim)]
    return total.reshape(total.shape[0], *shape)
