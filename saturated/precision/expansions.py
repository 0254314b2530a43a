"""Elementwise ball arithmetic on float64 arrays: the refinement's values between matrix products.

A value is held as a *split*: float64 arrays stacked on a first axis, the leading ones *terms*
whose exact sum is the ball's midpoint, the last an upper bound of its radius (NaN where the
element is undetermined). The first term carries most of the value (each op gathers its result
by error-free two-sums, :func:`gathered`), so a sign is read from it against a bound of the rest.
Every op below works on whole arrays at once: a term is a float64 array, an error-free sum or
product of two terms a handful of numpy operations, and nothing is built per element. What an op
keeps of its exact result is as many terms as the working precision needs
(:func:`terms_for`); what it drops, and what its operands' radii propagate, goes into the result's
radius, computed in float64 and rounded up. The result contains the exact result for every choice
of values in the operands' balls, as an ``arb`` operation's would.

>>> third = add(np.array([[1.0], [0.0]]), np.array([[2.0 ** -60], [0.0]]), 128)
>>> third[:-1, 0].tolist(), float(third[-1, 0])
([1.0, 8.673617379884035e-19], 0.0)
>>> signs(add(third, np.array([[-1.0], [0.0]]), 128)).tolist()
[1.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "add",
    "bound",
    "broadcast",
    "concatenated",
    "gathered",
    "is_zero",
    "midpoints",
    "multiply",
    "negated",
    "relu",
    "signs",
    "terms_for",
    "trimmed",
    "two_sum",
    "undetermined",
    "up",
    "where",
    "zeros",
]

_MANTISSA = 53
UNIT = 2.0 ** -_MANTISSA
TINY = float(np.finfo(np.float64).tiny)
_SPLITTER = 2.0 ** 27 + 1  # Veltkamp's constant: a float cut into two halves of 26 bits
_SAFE = 2.0 ** 900  # products of terms within 2^±900 neither overflow nor underflow their errors
_NEGLIGIBLE = 2.0 ** -10  # a term below this share of the radius everywhere carries nothing


def terms_for(bits: int) -> int:
    """Terms kept at ``bits`` of precision: enough for ``bits`` and a few more (what a sum's
    cancellation brings up, below the radius the precision leaves anyway)."""
    return math.ceil((bits + 8) / _MANTISSA)


def up(x: np.ndarray) -> np.ndarray:
    """``x`` rounded up by one unit in the last place where it is positive: with a float64 sum's
    or product's own error factor applied first, an upper bound of the exact value (a zero stays
    zero, so that exact values keep radius 0; NaN stays NaN).

    A positive finite float64's successor is the integer after its bit pattern (subnormals and
    the largest float, whose successor is ∞, included): one add, where ``np.nextafter`` costs a
    libm call per element, about 20 times as long on a radius array.

    >>> up(np.array([1.0, 0.0, -2.0, 5e-324, np.inf, np.nan])).tolist()[:5] == [
    ...     np.nextafter(1.0, 2.0), 0.0, -2.0, 1e-323, np.inf]
    True
    """
    x = np.asarray(x)
    if x.dtype != np.float64:
        return np.where(x > 0, np.nextafter(x, np.inf), x)
    step = (x > 0) & (x < np.inf)
    return (x.view(np.int64) + step).view(np.float64)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e = a + b exactly, s = fl(a + b) (Knuth's branch-free two-sum)."""
    s = a + b
    v = s - a
    e = (a - (s - v)) + (b - v)
    return s, e


def _halves(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLITTER * a
    high = c - (c - a)
    return high, a - high


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p + e = a·b exactly (Dekker's product) where the operands and p lie within 2^±900, and
    there a zero bound; elsewhere p = e = 0 and an upper bound of |a·b| (overflow gives ∞, an
    undetermined element)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _checked_product(a, b)


def _checked_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = a * b
    high_a, low_a = _halves(a)
    high_b, low_b = _halves(b)
    e = ((high_a * high_b - p) + high_a * low_b + low_a * high_b) + low_a * low_b
    size = np.abs(p)
    safe = (p == 0) & ((a == 0) | (b == 0))
    safe |= (size > 1 / _SAFE) & (size < _SAFE) & (np.abs(a) < _SAFE) & (np.abs(b) < _SAFE)
    if safe.all():
        return p, e, np.zeros(p.shape)
    rest = np.where(safe, 0.0, up(np.abs(a) * np.abs(b) * (1 + 4 * UNIT) + TINY))
    return np.where(safe, p, 0.0), np.where(safe, e, 0.0), rest


def gathered(parts: list[np.ndarray], count: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``count`` float64 terms and a bound of the rest, summing exactly to ``sum(parts)``: each
    term the float sum of what the terms before leave, by error-free two-sums."""
    terms = []
    for _ in range(count):
        if not parts:
            break
        total, errors = parts[0], []
        for part in parts[1:]:
            total, error = two_sum(total, part)
            errors.append(error)
        terms.append(total)
        parts = [e for e in errors if e.any()]
    rest = np.zeros(terms[0].shape) if terms else np.zeros(())
    for part in parts:
        rest = rest + np.abs(part)
    return terms, up(rest * (1 + (len(parts) + 2) * UNIT))


def _kept(bits: int, *operands: np.ndarray) -> int:
    """The terms an op on ``operands`` keeps: those ``bits`` ask for, or, where an operand has a
    radius, one more than the most an operand holds (what lies further down is below that
    radius: :func:`trimmed`; and the terms of an exact operand are all kept)."""
    most = terms_for(bits)
    if not any(a[-1].any() for a in operands):
        return most
    return min(most, max(a.shape[0] - 1 for a in operands) + 1)


def _gathered_split(parts: list[np.ndarray], radius: np.ndarray, count: int) -> np.ndarray:
    """The split of ``sum(parts)`` ± ``radius`` in (at most) ``count`` terms."""
    shape = np.broadcast_shapes(radius.shape, *(p.shape for p in parts))
    live = [np.broadcast_to(p, shape) for p in parts if p.any()]
    terms, rest = gathered(live, count)
    if not terms:
        terms = [np.zeros(shape)]
    radius = np.broadcast_to(radius, shape)
    if rest.any():
        radius = up((radius + rest) * (1 + 2 * UNIT))
    return _finished(terms, radius)


def trimmed(terms: Sequence[np.ndarray], radius: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The terms without the trailing ones that lie below 2^−10 of the radius at every element
    (an undetermined element, whose terms are 0, does not hold them back), and the radius with
    those terms added, rounded up: the ball holds the one it came from. A value's radius grows
    with depth while its precision does not, and every op's cost grows with the terms it
    carries; the first term is always kept.

    >>> terms, radius = trimmed([np.array([1.0]), np.array([2.0 ** -60])], np.array([2.0 ** -40]))
    >>> len(terms), bool(radius[0] > 2.0 ** -40)
    (1, True)
    """
    keep, tail = len(terms), None
    limit = radius * _NEGLIGIBLE
    while keep > 1:
        candidate = np.abs(terms[keep - 1]) if tail is None else tail + np.abs(terms[keep - 1])
        if not ((candidate <= limit) | np.isnan(radius)).all():
            break
        keep, tail = keep - 1, candidate
    if tail is None:
        return list(terms), radius
    folded = len(terms) - keep
    return list(terms[:keep]), up((radius + tail) * (1 + (folded + 2) * UNIT))


def _finished(terms: Sequence[np.ndarray], radius: np.ndarray) -> np.ndarray:
    """A split from its terms and radius, trailing terms the radius swamps folded into it
    (:func:`trimmed`): an element whose terms or radius are not finite is undetermined (NaN
    radius, zero terms)."""
    terms, radius = trimmed(terms, radius)
    out = np.stack([*terms, radius])
    bad = ~np.isfinite(out).all(axis=0)
    if bad.any():
        out[:-1, bad] = 0.0
        out[-1, bad] = math.nan
    return out


def zeros(shape: tuple[int, ...]) -> np.ndarray:
    """Exact zeros."""
    return np.zeros((2, *shape))


def broadcast(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A split broadcast to ``shape`` (a view)."""
    return np.broadcast_to(a, (a.shape[0], *shape))


def _padded(a: np.ndarray, count: int) -> np.ndarray:
    """A split with ``count`` terms (zeros added)."""
    if a.shape[0] - 1 >= count:
        return a
    filler = np.zeros((count - a.shape[0] + 1, *a.shape[1:]))
    return np.concatenate([a[:-1], filler, a[-1:]])


def _common(splits: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Splits padded to one number of terms."""
    count = max(s.shape[0] - 1 for s in splits)
    return [_padded(s, count) for s in splits]


def midpoints(a: np.ndarray) -> np.ndarray:
    """The values as float64 (NaN where undetermined): the terms' float sum, within the radius
    and a few units in the last place of the exact values."""
    terms, _ = gathered(list(a[:-1]), 1)
    return np.where(undetermined(a), math.nan, terms[0])


def undetermined(a: np.ndarray) -> np.ndarray:
    """Where the element is undetermined (a decision before it was not made)."""
    return np.isnan(a[-1])


def is_zero(a: np.ndarray) -> np.ndarray:
    """Where the element is exactly 0 (every term and the radius)."""
    return ~np.any(a != 0, axis=0)


def bound(a: np.ndarray) -> np.ndarray:
    """An upper bound of every |value| in the balls (NaN where undetermined)."""
    total = np.sum(np.abs(a[:-1]), axis=0) + a[-1]
    return up(total * (1 + (a.shape[0] + 4) * UNIT))


def negated(a: np.ndarray) -> np.ndarray:
    return np.concatenate([-a[:-1], a[-1:]])


def add(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """a + b (broadcast)."""
    return _gathered_split([*a[:-1], *b[:-1]], _radius_sum(a[-1], b[-1]), _kept(bits, a, b))


def _radius_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not b.any():
        return a
    if not a.any():
        return b
    return up((a + b) * (1 + UNIT))


def multiply(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """a · b (broadcast): the products of terms whose order can matter at ``bits`` (and above
    the operands' radii), error-free, the rest and the radii |ã|·r_b + |b̃|·r_a + r_a·r_b
    bounded."""
    count = _kept(bits, a, b)
    parts: list[np.ndarray] = []
    radius: np.ndarray = np.zeros(())
    for i, x in enumerate(a[:-1]):
        if not x.any():
            continue
        for j, y in enumerate(b[:-1]):
            if not y.any():
                continue
            if i + j < count:
                p, e, rest = _two_product(x, y)
                parts += [p, e]
            else:  # below 2^−53·count of the leading terms' product
                rest = up(np.abs(x) * np.abs(y) * (1 + 4 * UNIT) + TINY)
            if rest.any():
                radius = up((radius + rest) * (1 + UNIT))
    ra, rb = a[-1], b[-1]
    if rb.any() or np.isnan(rb).any():
        radius = up((radius + bound(a) * rb) * (1 + 3 * UNIT))
    if ra.any() or np.isnan(ra).any():
        radius = up((radius + bound(b) * ra) * (1 + 3 * UNIT))
    shape = np.broadcast_shapes(a.shape[1:], b.shape[1:])
    return _gathered_split(parts or [np.zeros(shape)], np.broadcast_to(radius, shape), count)


def signs(a: np.ndarray) -> np.ndarray:
    """Per element: +1 or −1 where its ball excludes 0, 0 where it is exactly 0, NaN where the
    ball holds 0 and other values (or the element is undetermined)."""
    out = _signs_read(a)
    open_ = np.isnan(out) & ~undetermined(a)
    if open_.any() and a.shape[0] > 2:  # a cancellation among the terms: gather them once more
        again = a[:, open_]
        terms, left = gathered(list(again[:-1]), a.shape[0] - 1)
        out[open_] = _signs_read(np.stack([*terms, up((again[-1] + left) * (1 + 2 * UNIT))]))
    return out


def _signs_read(a: np.ndarray) -> np.ndarray:
    """:func:`signs` read from the first term against a bound of the rest."""
    head = a[0]
    rest = a[-1] + np.sum(np.abs(a[1:-1]), axis=0) if a.shape[0] > 2 else a[-1]
    rest = up(rest * (1 + (a.shape[0] + 2) * UNIT))
    out = np.full(head.shape, math.nan)
    out[head > rest] = 1.0
    out[head < -rest] = -1.0
    out[is_zero(a)] = 0.0
    return out


def relu(a: np.ndarray) -> np.ndarray:
    """max(a, 0): the value where it is proved positive, 0 where proved not, and the ball
    [0, upper bound] where its ball holds 0."""
    sign = signs(a)
    out = np.where(sign > 0, a, 0.0)
    straddles = np.isnan(sign) & ~undetermined(a)
    if straddles.any():
        top = up((a[0] + np.sum(np.abs(a[1:]), axis=0)) * (1 + (a.shape[0] + 2) * UNIT))
        half = up(top / 2)
        out[0] = np.where(straddles, half, out[0])
        out[-1] = np.where(straddles, half, out[-1])
    out[-1] = np.where(undetermined(a), math.nan, out[-1])
    return out


def where(condition: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise choice (broadcast)."""
    a, b = _common([a, b])
    return np.where(condition, a, b)


def concatenated(splits: Sequence[np.ndarray], axis: int, stack: bool = False) -> np.ndarray:
    """Splits side by side along ``axis`` of their values (``stack``: on a new axis)."""
    padded = _common(splits)
    axis = axis % (padded[0].ndim - (0 if stack else 1))
    return (np.stack if stack else np.concatenate)(padded, axis=axis + 1)
