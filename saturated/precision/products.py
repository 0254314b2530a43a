"""Matrix products of balls at any precision, computed exactly in float64 matrix products.

FLINT's ``arb_mat`` product costs about 0.25 µs per multiply-add at 128 bits, and a weight matrix
must first be converted element by element: a T5 feed-forward layer takes seconds per sentence.
Here the product runs in float64 BLAS, exactly, by error-free splitting (Ozaki's scheme):

* each operand is a sum of float64 arrays (the midpoints to the working precision; an exact float
  operand is one array) plus a radius;
* each is cut into slices on a ladder of units per row (left) or column (right): slice j holds
  the multiples of 2^(e − jβ) where every element of its row is below 2^e, at most 2^β of them;
* β is chosen so that a product of two slices, summed over the inner dimension and over every
  slice pair of one level, is a float64 integer multiple of its unit below 2^53: no product
  rounds, whatever order BLAS adds in;
* every pair of nonzero slices is multiplied (the slices of one side stacked, so that the other
  side's matrices are each read once), and the levels' sums are gathered into a few float64
  terms by error-free two-sums;
* what is left out (what the slices leave of the operands, the terms past the last) goes into the
  radius with the operands' own radii, as upper bounds computed in float64 and rounded up.

The result contains the exact product of any two matrices in the operands' balls, as FLINT's
would; its radius is what the operands' radii propagate plus about 2^−bits · k · (the largest element of
the row) · (the largest of the column).
"""

from __future__ import annotations

import math
import weakref
from typing import TypeAlias

import flint
import numpy as np
from scipy import sparse

from saturated.precision.expansions import TINY, UNIT, gathered, terms_for, trimmed, up

__all__ = ["balls_of_split", "forget", "product", "product_of_splits", "split"]

_MANTISSA = 53
_SPARSE = 1 / 32  # a slice with fewer nonzero elements than this share is kept sparse

Slice: TypeAlias = np.ndarray | sparse.csr_matrix

def _nearest(bound: flint.arb) -> float:
    """A nonnegative exact number as the nearest float, but never 0 for a positive one: with
    :func:`~saturated.precision.expansions.up`, an upper bound of it."""
    value = float(bound)
    return value if value or bound.is_zero() else float(TINY)


def _decomposed(ball: flint.arb, count: int) -> tuple[float, ...]:
    """A ball as floats: up to ``count`` floats, each the nearest to what the ones before leave of
    its midpoint, then a bound of what they leave of the ball (its radius included: NaN for a
    ball that is NaN or unbounded). The subtractions are exact at the working precision; were one
    not, its error would be in that bound."""
    if not ball.is_finite():
        return (0.0,) * count + (math.nan,)
    rest, out = ball, []
    for _ in range(count):
        value = float(rest)
        out.append(value)
        if not value:
            break
        rest = rest - value
    out.extend([0.0] * (count - len(out)))
    out.append(_nearest(rest.abs_upper()))
    return tuple(out)


_ball = np.frompyfunc(lambda mid, rad: flint.arb(mid, rad) if rad else flint.arb(mid), 2, 1)


_SPLITS: dict[int, tuple[weakref.ref[np.ndarray], int, np.ndarray]] = {}
_KEPT = 8


def split(values: np.ndarray, bits: int) -> np.ndarray:
    """An array of balls or floats as float64 arrays stacked on a new first axis: the terms
    summing to each midpoint (:func:`_decomposed`; one for floats), then an upper bound of each
    radius with what the terms leave (NaN where a ball is NaN or unbounded). Indexing and
    reshaping the trailing axes of the stack does the same to the balls.

    The split of a ball array is kept while the array lives (the last few used, until
    :func:`forget`): one activation feeds several products (queries, keys and values; an
    encoder's output every cross-attention), and the split is what costs, element by element.
    """
    if values.dtype != object:
        exact = np.asarray(values, dtype=np.float64)
        finite = np.isfinite(exact)
        if finite.all():
            return np.stack([exact, np.zeros(exact.shape)])
        return np.stack([np.where(finite, exact, 0.0), np.where(finite, 0.0, math.nan)])
    kept = _SPLITS.pop(id(values), None)
    if kept is not None and kept[0]() is values and kept[1] == bits:
        _SPLITS[id(values)] = kept  # the most recently used goes last
        return kept[2]
    count = terms_for(bits)
    parts = [np.asarray(p, dtype=np.float64).reshape(values.shape)
             for p in np.frompyfunc(lambda b: _decomposed(b, count), 1, count + 1)(values)]
    terms, radius = trimmed(parts[:-1], np.where(np.isnan(parts[-1]), math.nan, up(parts[-1])))
    stacked = np.stack([*terms, radius])
    while len(_SPLITS) >= _KEPT:
        _SPLITS.pop(next(iter(_SPLITS)))
    _SPLITS[id(values)] = (weakref.ref(values), bits, stacked)
    return stacked


def forget() -> None:
    """Drop the splits kept (at the end of a pass)."""
    _SPLITS.clear()


class _Operand:
    """A matrix as float64 terms summing to its midpoints, an upper bound of its radius, and
    where it is not a finite ball (those rows or columns of the product are NaN), from its
    :func:`split`."""

    def __init__(self, stacked: np.ndarray) -> None:
        self.terms = list(stacked[:-1])
        self.open = np.isnan(stacked[-1])
        self.radius = np.where(self.open, 0.0, stacked[-1])

    def slices(self, axis: int, beta: int, levels: int) -> tuple[np.ndarray, list[Slice | None]]:
        """The exponents of the ladder (per row for axis=−1, per column for axis=−2) and the
        slices (:func:`_slices`, in units of their level); what the slices leave of the terms
        joins the radius."""
        exponent = _exponents(self.terms, axis)
        if (exponent > beta).any():  # scaling down could lose the bits of tiny terms: bound those
            self._drop_below(np.ldexp(1.0, np.clip(exponent - beta - 1000, -1074, 1023)))
        slices, rests, cut = _slices(self.terms, exponent, beta, self._levels(exponent, axis, beta, levels))
        slices += [None] * (levels - len(slices))
        left = np.sum([np.abs(r) for r in rests], axis=0)
        if left.any():
            self.radius = up(self.radius + _scaled_bound(left * (1 + (len(rests) + 2) * UNIT),
                                                         exponent - cut * beta))
        return exponent, slices

    def _drop_below(self, floor: np.ndarray) -> None:
        """Terms below ``floor`` (per row or column) go into the radius."""
        for index, term in enumerate(self.terms):
            small = (np.abs(term) < floor) & (term != 0)
            if small.any():
                self.radius = up(self.radius + np.where(small, np.abs(term), 0.0) * (1 + UNIT))
                self.terms[index] = np.where(small, 0.0, term)

    def zero(self) -> np.ndarray:
        """Where the element is exactly 0 (every term and the radius), not undetermined."""
        out = ~self.open & (self.radius == 0)
        for term in self.terms:
            out &= term == 0
        return out

    def bound(self) -> np.ndarray:
        """An upper bound of every |element| of the matrix and of its slices' sum (midpoints and
        radii; after slicing, the radius holds what the slices leave)."""
        total = np.sum([np.abs(t) for t in self.terms], axis=0) + self.radius
        return up(total * (1 + (len(self.terms) + 4) * UNIT))

    def _levels(self, exponent: np.ndarray, axis: int, beta: int, levels: int) -> int:
        """The levels worth cutting: none finer than 2^−10 of the smallest radius in a row (or
        column), whose uncertainty would swamp them; all ``levels`` where a ball is exact."""
        smallest = np.min(self.radius, axis=axis, keepdims=True) if self.radius.size else np.zeros(1)
        if not (smallest > 0).all():
            return levels
        finest = np.frexp(smallest)[1] - 10  # a unit below 2^(that) is not worth a slice
        return int(min(levels, max(1, np.ceil((exponent - finest).max() / beta))))


def _exponents(terms: list[np.ndarray], axis: int) -> np.ndarray:
    """Per row (axis=−1) or column (axis=−2): e with every |element| of every term below 2^e."""
    top = np.max(np.abs(terms[0]), axis=axis, keepdims=True)
    for term in terms[1:]:
        top = np.maximum(top, np.max(np.abs(term), axis=axis, keepdims=True))
    _, exponent = np.frexp(top)
    return exponent.astype(np.int64) + 1  # + 1: the terms' sum may reach 2^e itself


def _slices(terms: list[np.ndarray], exponent: np.ndarray, beta: int, levels: int
            ) -> tuple[list[Slice | None], list[np.ndarray], int]:
    """Slice j (1-based, at index j − 1): the integers n (|n| a few times 2^β at most) such that
    n·2^(exponent − jβ) is cut from the terms, summed, None where all zero; the terms' rests in
    units of the last level cut, and its j. The terms are scaled once by a power of two (exact:
    :meth:`_Operand.slices` bounds what could underflow), then each level is the nearest
    integers, and the rest scaled by 2^β for the next."""
    scale = np.ldexp(1.0, np.clip(beta - exponent, -1000, 1000))
    rests = [t * scale for t in terms]
    step = 2.0 ** beta
    out: list[Slice | None] = []
    cut = 0
    for cut in range(1, levels + 1):
        if cut > 1:
            rests = [r * step for r in rests]
        total = None
        for index, rest in enumerate(rests):
            whole = np.rint(rest)
            rests[index] = rest - whole
            total = whole if total is None else total + whole
        assert total is not None
        out.append(total if total.any() else None)
        if len(rests) == 1 and rests[0].ndim == 2:
            left = np.count_nonzero(rests[0])
            if not left:  # an exact float32 weight is cut in a few
                break
            if left < _SPARSE * rests[0].size and cut < levels:
                more, rest = _sparse_slices(rests[0], step, levels - cut)
                return out + more, [rest], levels
        elif not any(rest.any() for rest in rests):
            break
    return out, rests, cut


def _sparse_slices(rest: np.ndarray, step: float, levels: int) -> tuple[list[Slice | None], np.ndarray]:
    """The next ``levels`` slices of a one-term operand whose rest is nonzero at a few places
    only (the small elements of a weight matrix, whose mantissas reach further down), as sparse
    matrices; and the rest left after them."""
    rows, columns = np.nonzero(rest)
    values = rest[rows, columns]
    out: list[Slice | None] = []
    for _ in range(levels):
        values = values * step
        whole = np.rint(values)
        values = values - whole
        out.append(sparse.csr_matrix((whole, (rows, columns)), shape=rest.shape) if whole.any() else None)
        if not values.any():
            break
    left = np.zeros(rest.shape)
    left[rows, columns] = values
    return out, left


def _scaled_bound(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """An upper bound of x·2^exponent for x ≥ 0 (with what underflow may round away)."""
    return up(np.ldexp(x, np.clip(exponent, -1100, 1100)) * (1 + 2 * UNIT)) + np.where(x > 0, TINY, 0.0)


def _ladder(k: int, bits: int) -> tuple[int, int]:
    """β and the number of levels: a level's sum of slice products, k terms of up to
    2^(2β + 4) units for each of up to ``levels`` slice pairs, stays below 2^53 units, and
    the levels reach 2^−(bits + 8) of the largest element."""
    levels = 4
    while True:
        beta = (_MANTISSA - 5 - math.ceil(math.log2(max(k, 1) * levels))) // 2
        needed = math.ceil((bits + 8) / beta) + 1
        if needed <= levels:
            return beta, needed
        levels = needed


def _levels_of(left: list[Slice | None], right: list[Slice | None]) -> list[tuple[int, np.ndarray]]:
    """Every product of a left slice j and a right slice l, summed by level j + l (integers below
    2^53: exact), in order from the largest, with their level. The slices of the side with more
    of them are stacked, so that each matrix of the other side is read once (a matrix product of a
    few rows by a weight matrix is bound by reading the weights); a sparse slice of that other
    side is read as sparse. Slices may carry batch axes before their last two."""
    xs = [(j, _dense(x)) for j, x in enumerate(left, 1) if x is not None]
    ys: list[tuple[int, Slice]] = [(j, y) for j, y in enumerate(right, 1) if y is not None]
    if not xs or not ys:
        return []
    levels: dict[int, np.ndarray] = {}

    def add(s: int, p: np.ndarray) -> None:
        levels[s] = p if s not in levels else levels[s] + p

    if len(ys) <= len(xs):
        tall = np.stack([x for _, x in xs], axis=-3)  # (..., slices, m, k)
        shape = tall.shape
        tall = tall.reshape(*shape[:-3], shape[-3] * shape[-2], shape[-1])
        for i, y in ys:
            product = tall @ y if isinstance(y, np.ndarray) else (y.T @ tall.T).T
            for index, (j, _) in enumerate(xs):
                add(j + i, product.reshape(*shape[:-1], -1)[..., index, :, :])
    else:
        wide = np.stack([_dense(y) for _, y in ys], axis=-2)  # (..., k, slices, n)
        shape = wide.shape
        wide = wide.reshape(*shape[:-2], shape[-2] * shape[-1])
        for j, x in xs:
            product = (x @ wide).reshape(*x.shape[:-1], shape[-2], shape[-1])
            for index, (i, _) in enumerate(ys):
                add(j + i, product[..., index, :])
    return [(s, levels[s]) for s in sorted(levels)]


def _dense(x: Slice) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.toarray()


def _unscaled(levels: list[tuple[int, np.ndarray]], exponent: np.ndarray, beta: int
              ) -> tuple[list[np.ndarray], np.ndarray]:
    """The level sums as a few float64 parts summing to them exactly, and a radius. Level s is in
    units of 2^(exponent − sβ) (exponent the row's plus the column's). Carries move each level's
    multiples of 2^β to the level above, so that every level holds a digit of at most 2^(β−1)
    (integers below 2^53 throughout: exact), and ⌊52/β⌋ digits then make one part. A part whose
    unit is not a normal float's is bounded into the radius instead (a level below 2^−1022: far
    below any precision asked of values near 1)."""
    if not levels:
        return [], np.zeros(exponent.shape)
    top, step, inverse = levels[0][0], 2.0 ** beta, 2.0 ** -beta
    digits: list[np.ndarray | None] = [None] * (levels[-1][0] - top + 1)
    for level, total in levels:
        digits[level - top] = total
    carry: np.ndarray | None = None
    index = len(digits) - 1
    while index >= 0 or carry is not None:
        if index < 0:  # the carries reach above the first level
            digits.insert(0, None)
            top, index = top - 1, 0
        digit = digits[index] if carry is None else carry if digits[index] is None else digits[index] + carry
        carry = None
        if digit is not None:
            over = np.rint(digit * inverse)
            digits[index] = digit - over * step
            carry = over if over.any() else None
        index -= 1
    group = 52 // beta
    parts, radius = [], np.zeros(exponent.shape)
    for start in range(0, len(digits), group):
        chunk = digits[start:start + group]
        part = np.zeros(exponent.shape)
        for digit in chunk:
            part = part * step if digit is None else part * step + digit
        unit = exponent - (top + start + len(chunk) - 1) * beta
        low = unit < -1022
        if not low.any():
            parts.append(np.ldexp(part, unit))
            continue
        parts.append(np.ldexp(np.where(low, 0.0, part), np.maximum(unit, -1022)))
        radius = up(radius + _scaled_bound(np.where(low, np.abs(part), 0.0), unit))
    return parts, radius


def _reached(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where the boolean matrix product of ``a`` and ``b`` holds: an undetermined element of one
    operand reaches an element of the product unless every term it meets is exactly 0 (a hard-
    attention weight off its maximum times a padded position's undetermined value is 0)."""
    if not (a.any() and b.any()):
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return np.zeros((*batch, a.shape[-2], b.shape[-1]), dtype=bool)
    return (a.astype(np.float64) @ b.astype(np.float64)) > 0


def _bounded_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An upper bound of a @ b for nonnegative a, b: float64 BLAS's result with its rounding
    error (γ_k, with underflow) added."""
    k = a.shape[-1]
    gamma = 2 * (k + 2) * UNIT
    rows, columns = np.asarray(a.any(axis=-1)), np.asarray(b.any(axis=-2))
    underflow = np.where(rows[..., :, None] & columns[..., None, :], k * TINY, 0.0)
    return up((a @ b) * (1 + gamma) + underflow)


def product(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """The (m, k) @ (k, n) product of two arrays of balls or floats, as balls (an object array):
    see the module docstring.

    >>> from saturated.precision.balls import working_precision
    >>> with working_precision(128):
    ...     a = np.array([[flint.arb(1) / 3, flint.arb(2)]], dtype=object)
    ...     c = product(a, np.array([[3.0], [0.5]]), 128)
    >>> bool(c[0, 0].contains(2)), bool(c[0, 0].rad() < 2.0 ** -120)
    (True, True)
    """
    return balls_of_split(product_of_splits(split(a, bits), split(b, bits), bits))


def product_of_splits(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """:func:`product` of two matrices given by their :func:`split`, (·, m, k) and (·, k, n), as
    the split of the result (·, m, n): the balls themselves are built only where an op needs
    them (:func:`balls_of_split`), and a product that feeds another product needs none. Batch
    axes of equal sizes may stand between the first axis and the matrices' (one product each, in
    one pass: attention's heads)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    shape = (*a.shape[1:-2], m, n)
    left, right = _Operand(a), _Operand(b)
    beta, levels = _ladder(k, bits)
    rows, left_slices = left.slices(-1, beta, levels)  # (..., m, 1)
    columns, right_slices = right.slices(-2, beta, levels)  # (..., 1, n)
    parts, dropped = _unscaled(_levels_of(left_slices, right_slices), rows + columns, beta)
    terms, radius = gathered(parts, terms_for(bits))
    if dropped.any():
        radius = up(radius + dropped)
    if left.radius.any():
        radius = radius + _bounded_product(left.radius, right.bound())
    if right.radius.any():
        radius = radius + _bounded_product(left.bound(), right.radius)
    radius = up(radius * (1 + 8 * UNIT)) if radius.shape else np.zeros(shape)
    # Rows of tiny or huge elements (beyond 2^±800) would underflow or overflow in the slices:
    # left undetermined rather than bounded (leading coefficients are nowhere near).
    open_ = (np.abs(rows) > 800) | (np.abs(columns) > 800)
    if left.open.any() or right.open.any():
        open_ = open_ | _reached(left.open, ~right.zero()) | _reached(~left.zero(), right.open)
    radius = np.where(open_, math.nan, radius)
    radius = np.broadcast_to(radius, shape)
    terms, radius = trimmed(terms or [np.zeros(shape)], radius)
    return np.stack([*terms, radius])


def balls_of_split(values: np.ndarray) -> np.ndarray:
    """The balls a split stands for: each midpoint the sum of its terms (at the working
    precision: any rounding goes into the ball), each radius the split's bound; NaN balls
    where the bound is NaN."""
    radius = values[-1]
    open_ = np.isnan(radius)
    out = _ball(values[0], np.where(open_, 0.0, radius))
    for term in values[1:-1]:
        if term.any():
            out = out + term
    out = np.asarray(out, dtype=object).reshape(radius.shape)
    if open_.any():
        out[open_] = flint.arb.nan()
    return out
