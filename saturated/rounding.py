"""Rounding-error bounds for the decisions the limit takes in finite precision.

The limit takes discrete decisions on computed coefficients: which scores of a softmax row are
maximal, the sign of a step or tanh input. A computed coefficient ŝ differs from the exact value s
of the same expression of its operands by at most the standard forward error bound of the op that
produced it, whatever the size of s: for a dot product of length n, with u the unit roundoff and
γₙ = n·u/(1 − n·u) (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1),

    |ŝ − s| ≤ γₙ · Σᵢ |qᵢ|·|kᵢ|.

:class:`Rounding` carries that bound for one part of a :class:`~saturated.terms.Term`, lazily:
the magnitude Σ|qᵢ||kᵢ| is only computed where a decision reads it. A later positive or negative
scaling by a constant, or a sum of two such parts, folds its own rounding into the same form
(γₙ·m with n one larger, since |ŝ| ≤ m). For exact values, products of float64 operands and
sums of those it can also give each element as an unevaluated sum of float64 numbers whose exact
sum is the exact value times a positive factor (:attr:`Rounding.partials`, from Dekker's exact
splitting of products; a constant scaling changes the factor), so that :func:`exact_sign` decides
with no rounding at all.

The bound covers the rounding of the op that produced the coefficient, for the operands as they
were computed; error the operands already carry is covered by ``operand_rtol`` only if the caller
asserts one (see ``docs/saturated.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from saturated.errors import SaturationError
from saturated.radii import (
    Brought,
    VectorBound,
    along,
    elementwise,
    l2_radius,
    moved,
    norm_above,
    rounded_up,
    scaled,
    summed,
    total,
)
from saturated.stored_norms import cast_dtype, stored_spectral_norm_bound

__all__ = ["Einsum", "Rounding", "ZeroTested", "exact_maximal", "exact_sign", "gamma", "known_zeros",
           "product_rounding", "relative_bound", "smallest_subnormal", "tensor_norms", "tensor_spectral_norm",
           "unit_roundoff"]


def unit_roundoff(dtype: torch.dtype) -> float:
    """u: half the spacing of ``dtype``'s floats at 1 (2⁻²⁴ in float32)."""
    return torch.finfo(dtype).eps / 2


def smallest_subnormal(dtype: torch.dtype) -> float:
    """The spacing of ``dtype``'s floats at zero (2⁻¹⁴⁹ in float32)."""
    info = torch.finfo(dtype)
    return info.tiny * info.eps


def gamma(n: int, dtype: torch.dtype) -> float:
    """γₙ = n·u/(1 − n·u) for ``dtype``'s unit roundoff u (∞ once n·u ≥ 1).

    >>> gamma(1, torch.float64) == 2.0**-53 / (1 - 2.0**-53)
    True
    """
    u = unit_roundoff(dtype)
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def relative_bound(n: int, dtype: torch.dtype, operand_rtol: float) -> float:
    """The factor of Σ|qᵢ||kᵢ| that bounds the error of a computed sum of n products whose
    operands are each within ``operand_rtol`` (relative, elementwise) of their intended values:
    γₙ for the rounding, 2η + η² for the operands.

    >>> relative_bound(32, torch.float64, 0.0) == gamma(32, torch.float64)
    True
    """
    return gamma(n, dtype) + 2 * operand_rtol + operand_rtol**2


Partials = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class ZeroTested:
    """:data:`Partials` that also tell, without making them, where the exact value is 0: for a
    product, where every term has a zero factor (a count of the nonzero terms, one more product).
    The exact step reads it to pass over rows whose candidates are all exact zeros (the scores of
    an all-zero query, at padded positions), whose partials would cost the most and say nothing."""

    rows: Partials
    zeros: Callable[[Tensor], Tensor]

    def __call__(self, at: Tensor) -> Tensor:
        return self.rows(at)


def _negated(partials: Partials) -> Partials:
    """The partials of the values' negation (the same zeros)."""
    negated: Partials = lambda at: -partials(at)  # noqa: E731
    return ZeroTested(negated, partials.zeros) if isinstance(partials, ZeroTested) else negated


def known_zeros(partials: Partials, at: Tensor) -> Tensor:
    """Where the exact values at flat positions ``at`` are known to be 0 (True proves a zero,
    False proves nothing): from the partials' own test (:class:`ZeroTested`), else where every
    partial is 0."""
    return partials.zeros(at) if isinstance(partials, ZeroTested) else (partials(at) == 0).all(-1)


Carried = Callable[[torch.dtype, float], Brought]

_Held = TypeVar("_Held")


class _CarriedOnce:
    """A carried-error bound computed at most once per (dtype, operand error).

    Each bound reads its operands' carried bounds, back through the graph; a value read by several
    ops (a residual stream feeding a sublayer, its normalization and the next sum) is reached by
    several paths, and without the cache each path recomputed it, exponentially in the depth
    (an RMSNorm composed of ops reads its input twice per layer).
    """

    def __init__(self, fn: Carried) -> None:
        self._fn: Carried | None = fn
        self._cache: dict[tuple[torch.dtype, float], Brought] = {}

    def __call__(self, dtype: torch.dtype, operand_rtol: float) -> Brought:
        key = (dtype, operand_rtol)
        if key not in self._cache:
            if self._fn is None:
                return self._settled(operand_rtol)
            self._cache[key] = self._fn(dtype, operand_rtol)
        return self._cache[key]

    def settle(self, dtype: torch.dtype, operand_rtol: float) -> None:
        """Compute the bound now, in ``dtype`` (the precision its part was computed in), and drop
        what computing it reads: the operands' own bounds, and through them every value back
        through the graph, which would otherwise stay alive as long as this bound does."""
        if self._fn is not None:
            value = self(dtype, operand_rtol)
            self._cache, self._fn = {(dtype, operand_rtol): value}, None

    def _settled(self, operand_rtol: float) -> Brought:
        """The settled bound, read from a part of another precision (a value cast up or down):
        each op's rounding stays bounded in the precision it ran in."""
        (_, settled_rtol), value = next(iter(self._cache.items()))
        if operand_rtol != settled_rtol:
            raise SaturationError(f"a carried error bound settled for operand error {settled_rtol:g} "
                                  f"was read for {operand_rtol:g}; expected one operand error per pass")
        return value


def _memo(fn: Callable[[], _Held]) -> Callable[[], _Held]:
    """``fn`` evaluated at most once (a bound read by several decisions is computed once)."""
    cache: list[_Held] = []

    def once() -> _Held:
        if not cache:
            cache.append(fn())
        return cache[0]
    return once


@dataclass(frozen=True)
class Rounding:
    """What rounding may have done to the part of degree ``degree`` of a term.

    Attributes:
        degree: the part it describes.
        magnitude: on demand, m ≥ 0 per element (broadcasting to the part's coefficients) with
            |ŝ − s| ≤ γ_length·m, s the exact value for the computed operands.
        length: n of γₙ.
        index: on demand, each element's flat position in the output of the producing op, on
            the values' device (None: exact values are not available).
        partials: for flat positions of the producing op's output, an (N, P) float64 tensor whose
            rows sum exactly to the elements' exact values times ``factor`` (positive).
        cheap: an upper bound of ``magnitude`` that costs far less (Cauchy–Schwarz for a matrix
            product), used where this bound only feeds another one.
        carried: the error the operands brought in from their own producing ops (for a product
            x·y: |x|·b_y + b_x·|y| + b_x·b_y, with their cheap bounds), as a function of the dtype
            and the assumed operand error: elementwise, or as ℓ2 radii along the last dimension
            (:class:`~saturated.radii.VectorBound`: after a linear layer, ‖W‖₂·ρ).
        exact: the part is known exactly (no error of its own to carry into a product).
        factor: the positive factor the partials' sums are of the exact values.
        values: for a value known exactly, its coefficients made again on demand from the tensor
            they were cast from (None: the coefficients as they are serve).
        norms: for a model's tensor known exactly, its vector norms (dimension, keepdim), as
            :func:`tensor_norms` keeps them across calls (None: computed where read).
        spectral: for a model's 2-D tensor known exactly, an upper bound of its spectral norm
            (:func:`tensor_spectral_norm`; None: none known).
        cheap_norm: for a part whose last dimension is n, an upper bound of the ℓ2 norms along it
            (keepdim) of the exact magnitude, from the operands' norms alone (for a matrix product,
            ‖xᵢ‖·‖W‖_F by Cauchy–Schwarz, with no [rows, n] tensor made); None where it has none
            for that n.
    """

    degree: float
    magnitude: Callable[[], Tensor]
    length: int
    index: Callable[[], Tensor] | None = None
    partials: Partials | None = None
    cheap: Callable[[], Tensor] | None = None
    carried: Carried | None = None
    exact: bool = False
    factor: float = 1.0
    values: Callable[[], Tensor] | None = None
    norms: Callable[[int, bool], Tensor] | None = None
    spectral: Callable[[], float] | None = None
    cheap_norm: Callable[[int], Tensor | None] | None = None

    def __post_init__(self) -> None:
        if self.carried is not None and not isinstance(self.carried, _CarriedOnce):
            object.__setattr__(self, "carried", _CarriedOnce(self.carried))

    @classmethod
    def of_exact(cls, coef: Tensor, degree: float, remade: Callable[[], Tensor] | None = None,
                 norms: Callable[[int, bool], Tensor] | None = None,
                 spectral: Callable[[], float] | None = None) -> Rounding:
        """The bound of a value known exactly (a parameter, an input, a constant): no error, but
        its size counts once it is summed with or scaled into computed values. Its exact values
        are its own (every float converts to float64 exactly).

        ``remade``, when given, makes ``coef`` again on demand (a float64 copy of a parameter,
        cast anew from the model's own tensor): the bound, and those of the products it enters
        (:attr:`values`), then hold no reference to ``coef``, which goes once the graph has used
        it instead of living as long as the bounds do. ``norms``, ``spectral``: see :attr:`norms`
        and :attr:`spectral`.
        """
        values = _holding(coef) if remade is None else remade
        shape, device = coef.shape, coef.device
        return cls(degree, lambda: values().abs(), 0,
                   lambda: torch.arange(math.prod(shape), device=device).reshape(shape),
                   ZeroTested(lambda at: values().flatten()[at].double().unsqueeze(-1),
                              lambda at: values().flatten()[at] == 0), exact=True, values=remade,
                   norms=norms, spectral=spectral)

    @property
    def of_exact_values(self) -> bool:
        """Whether this is the bound of a value known exactly (:meth:`of_exact`, moved since by
        shape or indexing ops): its partials are the coefficients themselves."""
        return (self.exact and self.length == 0 and self.carried is None and self.partials is not None
                and self.index is not None and self.factor == 1.0)

    def settle(self, dtype: torch.dtype, operand_rtol: float) -> None:
        """Compute the carried error (see :attr:`carried`) now, for ``dtype`` (its part's) and
        ``operand_rtol``, keeping only the result: what the operands carried in, and the values
        it was computed from, can go once nothing else reads them. Later reads with the same
        ``operand_rtol`` get the result, whatever dtype they name."""
        if isinstance(self.carried, _CarriedOnce):
            self.carried.settle(dtype, operand_rtol)

    def bound(self, dtype: torch.dtype, operand_rtol: float, carried: bool = False,
              cheap: bool = False) -> Tensor:
        """The absolute error bound per element: the producing op's rounding (for its operands as
        computed, or within ``operand_rtol`` of them), plus with ``carried`` the error those
        operands brought in from the ops before, back to values without a bound (parameters,
        inputs, LayerNorm and softmax outputs)."""
        magnitude = self.cheap if cheap and self.cheap is not None else self.magnitude
        own = relative_bound(self.length, dtype, operand_rtol) * magnitude()
        if self.length:
            # Underflow is absolute, not relative: each of the n roundings may lose up to the
            # smallest subnormal (a product of tiny operands computed as 0 is not an exact 0).
            own = _plus_subnormal(own, self.length * smallest_subnormal(dtype))
        if not carried or self.carried is None:
            return own
        brought = elementwise(self.carried(dtype, operand_rtol))
        # ``own`` is a fresh tensor: add in place where the shapes allow it
        fits = brought.shape == own.shape and brought.dtype == own.dtype
        return own.add_(brought) if fits else own + brought

    def radius(self, dtype: torch.dtype, operand_rtol: float, shape: torch.Size,
               cheap: bool = False) -> Tensor:
        """ρ ≥ ‖ŝ − s‖₂ along the last dimension of a part of ``shape`` (keepdim): the producing
        op's rounding, as an ℓ2 radius, and what the operands carried in. The rounding's radius is
        ‖γ·m + t‖₂ ≤ γ·‖m‖₂ + t·√n (m the magnitude, t the underflow term): one norm of m, or
        none where the cheap bound knows its norms (:attr:`cheap_norm`)."""
        brought = None if self.carried is None else self.carried(dtype, operand_rtol)
        if not len(shape) or (brought is not None and not isinstance(brought, VectorBound)):
            own = self.bound(dtype, operand_rtol, cheap=cheap)
            return l2_radius(own if brought is None else own + elementwise(brought), shape)
        own = self.own_radius(dtype, operand_rtol, shape, cheap)
        return own + along(brought, shape) if isinstance(brought, VectorBound) else own

    def own_radius(self, dtype: torch.dtype, operand_rtol: float, shape: torch.Size,
                   cheap: bool = False) -> Tensor:
        """γ·‖m‖₂ + t·√n rounded up (see :meth:`radius`), the producing op's rounding alone: at
        least the ℓ2 norm, and so the largest element, of :meth:`bound` along the last dimension.
        ``factor`` is γ, computed in float64 and rounded to ``dtype`` with a few roundings, each
        within u of it, and the sum with the underflow term rounds once more; 1 + 16u covers them
        all."""
        n = int(shape[-1])
        norm = self.cheap_norm(n) if cheap and self.cheap_norm is not None else None
        if norm is None:
            magnitude = self.cheap if cheap and self.cheap is not None else self.magnitude
            norm = l2_radius(magnitude(), shape)
        factor = relative_bound(self.length, dtype, operand_rtol) * (1 + 16 * unit_roundoff(dtype))
        return (norm * factor).add_(_underflow_radius(self.length, n, dtype))

    def map(self, fn: Callable[[Tensor], Tensor], key: Hashable | None = None) -> Rounding:
        """The same bound after a shape, indexing or cast op (it moves elements, not values).
        Positions move with a shape or indexing op; a cast moves none, so they stay integers
        (a cast applied to them would make them values, floats or a bool mask). Radii move with
        the vectors (:func:`saturated.radii.moved`, ``key`` naming the op for it)."""
        magnitude, index, cheap, carried = self.magnitude, self.index, self.cheap, self.carried
        return Rounding(self.degree, _memo(lambda: fn(magnitude())), self.length,
                        None if index is None else lambda: _moved(fn, index()), self.partials,
                        None if cheap is None else _memo(lambda: fn(cheap())),
                        None if carried is None else lambda t, e: moved(fn, carried(t, e), key), self.exact,
                        self.factor)

    def inexact(self) -> Rounding:
        """The same bound without exact values (after an op that is continuous but not linear,
        such as ReLU: |relu(ŝ) − relu(s)| ≤ |ŝ − s|)."""
        return Rounding(self.degree, self.magnitude, self.length, cheap=self.cheap, carried=self.carried,
                        exact=self.exact, cheap_norm=self.cheap_norm)

    def kept(self, keep: Tensor) -> Rounding:
        """The bound of where(keep, part, 0) for elements kept or zeroed on their exact sign (a
        ReLU of several parts): a kept element keeps its error and its exact value, and a zeroed
        one is exactly 0 (position −1, whose partials are 0)."""
        index, partials = self.index, self.partials
        if index is None or partials is None:
            return self.inexact()

        def zeroed(at: Tensor) -> Tensor:
            rows = partials(at.clamp_min(0))
            return torch.where((at >= 0).unsqueeze(-1), rows, 0.0)

        kept_partials: Partials = zeroed
        if isinstance(partials, ZeroTested):
            zeros = partials.zeros
            kept_partials = ZeroTested(zeroed, lambda at: (at < 0) | zeros(at.clamp_min(0)))
        return Rounding(self.degree, self.magnitude, self.length, lambda: torch.where(keep, index(), -1),
                        kept_partials, self.cheap, self.carried, self.exact, self.factor,
                        cheap_norm=self.cheap_norm)

    def summed(self, reduce: Callable[[Tensor], Tensor], count: int, dims: Sequence[int] = (),
               keepdim: bool = False) -> Rounding:
        """After summing ``count`` elements over ``dims`` (``reduce`` sums magnitudes the same
        way): the errors add, and the k − 1 additions make n larger by k − 1
        (γₐ + γ_b + γₐγ_b ≤ γ_{a+b}); radii follow :func:`saturated.radii.summed`."""
        magnitude, cheap, carried = self.magnitude, self.cheap or self.magnitude, self.carried
        return Rounding(self.degree, _memo(lambda: reduce(magnitude())),
                        self.length + max(count - 1, 0), cheap=_memo(lambda: reduce(cheap())),
                        carried=None if carried is None
                        else lambda t, e: summed(carried(t, e), dims, keepdim, reduce))

    def scaled(self, factor: float) -> Rounding:
        """After multiplying by a constant: the magnitude scales, and the product's own rounding
        (at most u·|ŝ·factor| ≤ u·|factor|·m) makes n one larger. A negative factor flips the
        exact values' sign; an exact zero factor leaves nothing to round."""
        magnitude, partials, cheap, carried = self.magnitude, self.partials, self.cheap, self.carried
        cheap_norm = self.cheap_norm
        size = abs(float(factor))
        flipped = None if partials is None else partials if factor > 0 else _negated(partials)
        return Rounding(self.degree, lambda: size * magnitude(), self.length + 1, self.index,
                        flipped if factor != 0 else None,
                        None if cheap is None else lambda: size * cheap(),
                        None if carried is None else lambda t, e: scaled(carried(t, e), size),
                        factor=self.factor / size if size else 1.0,
                        cheap_norm=None if cheap_norm is None else lambda n: _combined_norm(
                            lambda a: a * size, cheap_norm(n)))

    def plus(self, other: Rounding, shape: torch.Size) -> Rounding:
        """The bound of the sum of two parts of the same degree (of ``shape``): magnitudes add, and
        the sum's rounding (≤ u·(m₁ + m₂)) makes the larger n one larger. Exact values are kept
        when both sides have them with the same factor: each element's partials are its two
        summands' side by side."""
        first, second = self.magnitude, other.magnitude
        cheap_first = self.cheap or first
        cheap_second = other.cheap or second
        carried = [c for c in (self.carried, other.carried) if c is not None]
        index, partials = _summed_exact_values(self, other, shape)
        norms = (self.cheap_norm, other.cheap_norm)
        return Rounding(self.degree, lambda: first() + second(), max(self.length, other.length) + 1,
                        index, partials, cheap=lambda: cheap_first() + cheap_second(),
                        carried=(lambda t, e: total([c(t, e) for c in carried], shape))
                        if carried else None, factor=self.factor,
                        cheap_norm=_summed_norms(norms) if None not in norms else None)


def _combined_norm(combine: Callable[..., Tensor], *norms: Tensor | None) -> Tensor | None:
    """``combine`` (one rounded sum or product) of upper bounds of norms, rounded up; None if one
    is unknown."""
    if any(norm is None for norm in norms):
        return None
    return rounded_up(combine(*norms))


def _summed_norms(norms: Sequence[Callable[[int], Tensor | None] | None]) -> Callable[[int], Tensor | None]:
    """The :attr:`Rounding.cheap_norm` of a sum of magnitudes: ‖Σ mᵢ‖₂ ≤ Σ ‖mᵢ‖₂."""

    def norm(n: int) -> Tensor | None:
        total: Tensor | None = None
        for each in norms:
            assert each is not None
            total = each(n) if total is None else _combined_norm(torch.add, total, each(n))
            if total is None:
                return None
        return total
    return norm


def _underflow_radius(length: int, n: int, dtype: torch.dtype) -> float:
    """A normal number at least t·√n, t = ``length``·η the underflow term of :meth:`Rounding.bound`
    (η the smallest subnormal): twice the larger of t·√n as computed and the smallest normal
    number. Computed, t·√n is within an η or so of it, far below half of it once it exceeds the
    smallest normal; a normal addend keeps the sum on the processor's fast path.

    >>> _underflow_radius(512, 256, torch.float64) >= 512 * 5e-324 * 16
    True
    """
    info = torch.finfo(dtype)
    return 2 * max(info.tiny, length * smallest_subnormal(dtype) * math.sqrt(n))


def _plus_subnormal(values: Tensor, tiny: float) -> Tensor:
    """``values + tiny`` for values ≥ 0 (or NaN) and a ``tiny`` of the order of the smallest
    subnormal, computed as (values·2ᵖ + tiny·2ᵖ)·2⁻ᵖ with 2ᵖ = 1/eps, so that no addition has a
    subnormal operand: the processor takes a slow path for each one (a scalar subnormal added to a
    whole tensor made it 4–8 times slower). The numbers are the same: scaling by a power of two is
    exact in the normal range, where the two sums then round alike, and a sum of subnormals is
    exact either way; values too large to scale keep their value, which is the sum's.

    >>> big = torch.tensor([0.0, 5e-324, 1e-310, 1e-300, 1.0, 1e300, math.inf, math.nan], dtype=torch.float64)
    >>> torch.equal(_plus_subnormal(big, 3e-323).nan_to_num(), (big + 3e-323).nan_to_num())
    True
    >>> small = torch.tensor([0.0, 1e-310, 1.0, math.nan], dtype=torch.float64)  # NaN, none too large
    >>> torch.equal(_plus_subnormal(small, 3e-323).nan_to_num(), (small + 3e-323).nan_to_num())
    True
    """
    info = torch.finfo(values.dtype)
    scaled = (values * (1 / info.eps)).add_(tiny / info.eps).mul_(info.eps)
    limit = info.max * info.eps
    if not values.numel():
        return scaled
    largest = values.max()
    # The usual case: one pass, not two. A NaN (an undetermined element's bound) hides the
    # largest of the others from max(): a comparison finds whether one is too large to scale.
    if bool(largest < limit) or (bool(largest.isnan()) and not bool((values >= limit).any())):
        return scaled  # NaN stays NaN either way
    return torch.where(values < limit, scaled, values)


def _holding(value: Tensor) -> Callable[[], Tensor]:
    """``value`` on demand (a closure over it alone)."""
    return lambda: value


def _moved(fn: Callable[[Tensor], Tensor], index: Tensor) -> Tensor:
    """Flat positions after ``fn``, an op that moves elements or casts them: a cast (the result's
    dtype differs) leaves every element where it was.

    >>> _moved(lambda a: a.to(torch.float64), torch.arange(3)).dtype
    torch.int64
    >>> _moved(lambda a: a.flip(0), torch.arange(3))
    tensor([2, 1, 0])
    """
    moved = fn(index)
    return index if moved.dtype != index.dtype else moved


def _summed_exact_values(x: Rounding, y: Rounding, shape: torch.Size
                         ) -> tuple[Callable[[], Tensor] | None, Partials | None]:
    """Positions and partials of x + y for :meth:`Rounding.plus` (None, None when a side has no
    exact values or the two sides' partials are scaled differently)."""
    if x.partials is None or y.partials is None or x.index is None or y.index is None \
            or x.factor != y.factor:
        return None, None
    x_partials, y_partials, x_index, y_index = x.partials, y.partials, x.index, y.index

    def partials(at: Tensor) -> Tensor:
        return torch.cat([x_partials(x_index().expand(shape).flatten()[at]),
                          y_partials(y_index().expand(shape).flatten()[at])], dim=-1)

    def zeros(at: Tensor) -> Tensor:
        return known_zeros(x_partials, x_index().expand(shape).flatten()[at]) \
            & known_zeros(y_partials, y_index().expand(shape).flatten()[at])

    tested = isinstance(x_partials, ZeroTested) and isinstance(y_partials, ZeroTested)
    return (lambda: torch.arange(math.prod(shape), device=x_index().device).reshape(shape)), \
        ZeroTested(partials, zeros) if tested else partials


def _split(a: Tensor) -> tuple[Tensor, Tensor]:
    """Dekker's split of float64 values: a = hi + lo exactly, each with at most 26 significant
    bits, so that a product of two halves is exact in float64."""
    factor = 2.0**27 + 1
    scaled = a * factor
    hi = scaled - (scaled - a)
    return hi, a - hi


def _exact_products(a: Tensor, b: Tensor) -> Tensor:
    """(..., 4·k) float64 partial products summing exactly to Σ aᵢbᵢ over the last dimension."""
    a_hi, a_lo = _split(a.double())
    b_hi, b_lo = _split(b.double())
    return torch.cat([a_hi * b_hi, a_hi * b_lo, a_lo * b_hi, a_lo * b_lo], dim=-1)


@dataclass(frozen=True)
class Einsum:
    """``torch.einsum`` of one equation as a function of two operands, whose dot products the
    exact step can take apart (see :func:`_einsum_letters` for the equations it reads)."""

    equation: str

    def __call__(self, a: Tensor, b: Tensor) -> Tensor:
        return torch.einsum(self.equation, a, b)


def _einsum_letters(equation: str) -> tuple[str, str, str, str] | None:
    """(first operand, second operand, output, summed letters) of a two-operand einsum in which
    every output element is one dot product: no ellipsis or repeated letter, every summed letter in
    both operands. None for any other equation.

    >>> _einsum_letters("bnid,bnjd->bnij")
    ('bnid', 'bnjd', 'bnij', 'd')
    >>> _einsum_letters("ii,i->i") is None, _einsum_letters("ij,k->i") is None
    (True, True)
    """
    equation = equation.replace(" ", "")
    if "..." in equation or equation.count("->") != 1:
        return None
    inputs, output = equation.split("->")
    operands = inputs.split(",")
    if len(operands) != 2:
        return None
    a, b = operands
    summed = "".join(c for c in dict.fromkeys(a + b) if c not in output)
    if (len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(output)) != len(output)
            or any(c not in a + b for c in output) or any(c not in a or c not in b for c in summed)):
        return None
    return a, b, output, summed


def _einsum_rows(equation: str, x: Tensor, y: Tensor, out_shape: torch.Size,
                 position: tuple[Tensor, ...]) -> tuple[Tensor, Tensor]:
    """The operand vectors (one row per position) whose dot products the einsum's outputs are."""
    letters = _einsum_letters(equation)
    assert letters is not None
    a, b, output, summed = letters
    sizes = {c: max(int(n) for t, own in ((x, a), (y, b)) for letter, n in zip(own, t.shape) if letter == c)
             for c in a + b}

    def rows(t: Tensor, own: str) -> Tensor:
        kept = [c for c in own if c in output]
        full = t.expand(*(sizes[c] for c in own)).permute(
            [own.index(c) for c in kept] + [own.index(c) for c in summed])
        return full[tuple(position[output.index(c)] for c in kept)].reshape(len(position[0]), -1)

    return rows(x, a), rows(y, b)


def _operand_rows(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor,
                  out_shape: torch.Size, at: Tensor) -> tuple[Tensor, Tensor] | None:
    """For the flat output positions ``at`` of ``fn(x, y)``, the operand vectors whose dot product
    each one is (None for ops other than matmul, linear, einsum and the elementwise product)."""
    position = torch.unravel_index(at, out_shape)
    if isinstance(fn, Einsum):
        return _einsum_rows(fn.equation, x, y, out_shape, position)
    if fn is torch.mul:
        return x.expand(out_shape)[position].unsqueeze(-1), y.expand(out_shape)[position].unsqueeze(-1)
    if fn is torch.matmul and x.dim() >= 2 and y.dim() >= 2:
        batch = out_shape[:-2]
        xs = x.expand(*batch, *x.shape[-2:])[(*position[:-2], position[-2])]
        ys = y.expand(*batch, *y.shape[-2:]).transpose(-1, -2)[(*position[:-2], position[-1])]
        return xs, ys
    if fn is torch.nn.functional.linear and y.dim() == 2:
        return x.expand(*out_shape[:-1], x.shape[-1])[position[:-1]], y[position[-1]]
    return None


def _zero_operand_vectors(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor,
                          out_shape: torch.Size) -> Tensor | None:
    """Where ``fn(x, y)`` is a sum of terms that all have a zero factor because a whole operand
    vector is zero (broadcasting to ``out_shape``): a zero row of x or column of y in a matrix
    product, a zero input vector or weight row in ``linear``, a zero factor in an elementwise
    product (exactly its zero terms). None for other ops. Some outputs with only zero terms (rows
    whose nonzero entries never meet) are not found.

    >>> x = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    >>> _zero_operand_vectors(torch.matmul, x, torch.tensor([[0.0, 2.0], [0.0, 0.0]]), torch.Size([2, 2]))
    tensor([[ True,  True],
            [ True, False]])
    """
    if fn is torch.mul:
        return (x == 0) | (y == 0)
    if fn is torch.matmul and x.dim() >= 2 and y.dim() >= 2:
        return ~(x != 0).any(-1, keepdim=True) | ~(y != 0).any(-2, keepdim=True)
    if fn is torch.nn.functional.linear and y.dim() == 2:
        return ~(x != 0).any(-1, keepdim=True) | ~(y != 0).any(-1)
    return None


def _supports(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor) -> bool:
    """Whether :func:`_operand_rows` can find the operand vectors of ``fn(x, y)``."""
    return (fn is torch.mul or (fn is torch.matmul and x.dim() >= 2 and y.dim() >= 2)
            or (fn is torch.nn.functional.linear and y.dim() == 2)
            or (isinstance(fn, Einsum) and _einsum_letters(fn.equation) is not None))


def _cheap_magnitude(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Callable[[], Tensor],
                     y_dim: int, y_norms: Callable[[int, bool], Tensor] | None) -> Tensor | None:
    """An upper bound of fn(|x|, |y|) from Cauchy–Schwarz (Σ|xᵢ||yᵢ| ≤ ‖x‖·‖y‖), for the matrix
    products: an outer product of norms instead of a second product. ``y`` is made only when its
    norms are not known already (``y_norms``, a weight's: see :func:`tensor_norms`). Both norms
    are rounded up (:func:`~saturated.radii.norm_above`, squares that underflow included), and
    x's by one more rounding (:func:`~saturated.radii.rounded_up`), which covers that of the
    outer product: each element is then at least the exact ‖xᵢ‖·‖yⱼ‖ (save one that underflows,
    by less than the smallest subnormal, which :meth:`Rounding.bound`'s underflow term covers), so
    the bound holds as computed wherever it is read in place of the full one."""
    y_vectors = _y_vectors(fn, x, y_dim)
    if y_vectors is None:
        return None
    k = int(x.shape[-1])
    x_norms = rounded_up(norm_above(torch.linalg.vector_norm(x, dim=-1, keepdim=True), k))
    return x_norms * norm_above(_norms(y, y_norms, *y_vectors), k)


def _cheap_norm(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Callable[[], Tensor], y_dim: int,
                y_norms: Callable[[int, bool], Tensor] | None) -> Tensor | None:
    """An upper bound of the ℓ2 norms along the output's last dimension (keepdim) of fn(|x|, |y|):
    for the matrix products of :func:`_cheap_magnitude`, of the exact one, whose entries are at
    most ‖xᵢ‖·‖yⱼ‖ and whose norm over j is then at most ‖xᵢ‖·‖y‖_F (per matrix of y); for an
    elementwise product, of |x·y| as computed (the magnitude itself: γ₁·|x̂ŷ| bounds its
    rounding), whose squares are those of x·y. Every computed norm is rounded up
    (:func:`~saturated.radii.norm_above`), and so is their product."""
    if fn is torch.mul:
        product = fn(x, y())
        return norm_above(torch.linalg.vector_norm(product, dim=-1, keepdim=True), int(product.shape[-1]))
    y_vectors = _y_vectors(fn, x, y_dim)
    if y_vectors is None:
        return None
    k = int(x.shape[-1])
    vectors = norm_above(_norms(y, y_norms, *y_vectors), k)
    frobenius = l2_radius(vectors, vectors.shape)
    return rounded_up(norm_above(torch.linalg.vector_norm(x, dim=-1, keepdim=True), k) * frobenius)


def _y_vectors(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, y_dim: int) -> tuple[int, bool] | None:
    """(dimension, keepdim) of the norms of y's vectors that the outputs of the matrix product
    fn(x, y) are dot products with (None for other ops): y's columns for a matmul, the weight's
    rows for a linear layer, each laid out along the output's last dimension."""
    if fn is torch.matmul and x.dim() >= 2 and y_dim >= 2:
        return -2, True
    if fn is torch.nn.functional.linear and y_dim == 2:
        return -1, False
    return None


def _norms(y: Callable[[], Tensor], y_norms: Callable[[int, bool], Tensor] | None, dim: int,
           keepdim: bool) -> Tensor:
    """y's vector norms, the kept ones where known (a weight's), computed otherwise."""
    return y_norms(dim, keepdim) if y_norms is not None else \
        torch.linalg.vector_norm(y(), dim=dim, keepdim=keepdim)


# Per model tensor, its last version's norms: {(dtype, dimension, keepdim) or (dtype,): norms}.
_NORMS: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _per_version(tensor: Tensor, key: tuple[object, ...], compute: Callable[[], _Held]) -> _Held:
    """``compute()`` for ``tensor``, kept under ``key`` until its values change. The cache holds
    ``tensor`` weakly; an inference tensor, which has no version counter, is not cached."""
    if tensor.is_inference():  # no version counter: a change to its values would go unseen
        return compute()
    version = (tensor.data_ptr(), tensor._version)
    held = _NORMS.get(tensor)
    if held is None or held[0] != version:
        held = _NORMS[tensor] = (version, {})
    if key not in held[1]:
        held[1][key] = compute()
    return held[1][key]


def tensor_norms(tensor: Tensor, dtype: torch.dtype) -> Callable[[int, bool], Tensor]:
    """The vector norms of ``tensor`` cast to ``dtype``, along a dimension, each computed once per
    version of its values (a weight's norms enter the cheap bound of every product with it, at
    every call).

    >>> w = torch.tensor([[3.0, 4.0]])
    >>> norms = tensor_norms(w, torch.float64)
    >>> norms(-1, False), norms(-1, False) is norms(-1, False)
    (tensor([5.], dtype=torch.float64), True)
    >>> _ = w.mul_(2); norms(-1, False)
    tensor([10.], dtype=torch.float64)
    """

    def norms(dim: int, keepdim: bool) -> Tensor:
        return _per_version(tensor, (dtype, dim, keepdim), lambda: torch.linalg.vector_norm(
            tensor.detach().to(dtype), dim=dim, keepdim=keepdim))

    return norms


def tensor_spectral_norm(tensor: Tensor, dtype: torch.dtype) -> Callable[[], float]:
    """An upper bound of the spectral norm of a 2-D ``tensor`` cast to ``dtype``
    (:func:`~saturated.spectral.spectral_norm_bound`), read once per version of its values from
    the bounds kept on disk (:mod:`saturated.stored_norms`); ∞ for a tensor of another rank (no
    bound known).

    >>> tensor_spectral_norm(torch.eye(3), torch.float64)() >= 1.0
    True
    """

    def spectral() -> float:
        if tensor.dim() != 2:
            return math.inf
        bounded = cast_dtype(tensor.dtype, dtype)
        return _per_version(tensor, (bounded,),
                            lambda: stored_spectral_norm_bound(tensor.detach(), dtype=bounded))

    return spectral


Operand = tuple[Tensor, "Rounding | None"]


def _operand_bound(rounding: Rounding, dtype: torch.dtype, operand_rtol: float) -> Tensor:
    """The error an operand of a product brings in: its cheap bound with what it carried, made
    normal (:func:`_normal`) for the product that reads it."""
    return _normal(rounding.bound(dtype, operand_rtol, carried=True, cheap=True))


def _normal(bound: Tensor) -> Tensor:
    """``bound`` with its subnormal entries raised to the smallest normal number: still a bound,
    larger by less than that number, and one that a product reads at full speed. A bound where
    the magnitude is 0 or tiny is its underflow term alone (n times the smallest subnormal), and
    subnormal operands make a matrix product tens of times slower (GPT-2's MLP: 40 times).

    >>> tiny = torch.finfo(torch.float32).tiny
    >>> _normal(torch.tensor([0.0, 1e-45, 1.0])).tolist() == [0.0, tiny, 1.0]
    True
    """
    return torch.where(bound > 0, bound.clamp_min(torch.finfo(bound.dtype).tiny), bound)


def _operand(value: Tensor, rounding: Rounding | None) -> Callable[[], Tensor]:
    """An operand of a product on demand: made again where its bound says how (a float64 copy of
    a parameter), broadcast as the operand is, so that the product's bound does not keep the copy
    alive; itself otherwise."""
    if rounding is None or rounding.values is None:
        return _holding(value)
    values, shape = rounding.values, value.shape
    return lambda: values().expand(shape)


_Side = tuple[Callable[[], Tensor], torch.Size, "Rounding | None"]


def _inexact(rounding: Rounding | None) -> bool:
    return rounding is not None and not rounding.exact


def _product_radius(fn: Callable[[Tensor, Tensor], Tensor], left: _Side, right: _Side, dtype: torch.dtype,
                    operand_rtol: float, out_shape: torch.Size) -> VectorBound | None:
    """The error a product carries in as ℓ2 radii along its output's last dimension, where its
    structure gives one (None: elementwise, see :func:`product_rounding`):

    * x·Wᵀ or x·W with W an exact weight of known spectral norm and x carrying error:
      ‖W‖₂·ρ_x, ρ_x bounding x's error along its last dimension (the contracted one);
    * x·y, a matrix product whose right operand carries radii along its rows (the output's last
      dimension: attention's weights times values): Σⱼ |xᵢⱼ|·ρ_yⱼ, plus x's error times
      |y| + b_y elementwise if x carries any;
    * x∘y, an elementwise product where an operand carries radii: with x̂ŷ − xy =
      x̂·e_y + e_x·ŷ − e_x·e_y, max|x̂|·ρ_y + max|ŷ|·ρ_x + ρ_x·ρ_y per vector (max along the last
      dimension; RMSNorm's scale, its weight, a gated unit's product).
    """
    (x, x_shape, rx), (y, y_shape, ry) = left, right
    if fn in (torch.nn.functional.linear, torch.matmul) and len(y_shape) == 2 and len(x_shape) >= 1 \
            and _inexact(rx) and not _inexact(ry) and ry is not None and ry.spectral is not None:
        assert rx is not None
        norm = ry.spectral()
        if not math.isfinite(norm):
            return None
        return VectorBound(_normal(rx.radius(dtype, operand_rtol, x_shape, cheap=True)) * norm, out_shape)
    rtol = operand_rtol
    if fn is torch.matmul and len(x_shape) >= 2 and len(y_shape) >= 2 and _carries_radii(ry, dtype, rtol):
        assert ry is not None
        along = VectorBound(fn(x().abs(), _normal(ry.radius(dtype, rtol, y_shape, cheap=True))), out_shape)
        if not _inexact(rx):
            return along
        assert rx is not None
        by = _operand_bound(ry, dtype, operand_rtol)
        from_x = _left_error(fn, x_shape, rx, y, y_shape, by, dtype, operand_rtol)
        return VectorBound(along.radius + l2_radius(from_x, out_shape), out_shape)
    if fn is torch.mul and (_carries_radii(rx, dtype, rtol) or _carries_radii(ry, dtype, rtol)):
        radii = [r.radius(dtype, rtol, out_shape, cheap=True) if r is not None and _inexact(r) else None
                 for r in (rx, ry)]
        rho_x, rho_y = radii
        terms = [] if rho_y is None else [_row_max(x()) * rho_y]
        if rho_x is not None:
            terms.append(_row_max(y()) * rho_x)
            if rho_y is not None:
                terms.append(rho_x * rho_y)
        return VectorBound(sum(terms[1:], terms[0]), out_shape)
    return None


def _left_error(fn: Callable[[Tensor, Tensor], Tensor], x_shape: torch.Size, rx: Rounding,
                y: Callable[[], Tensor], y_shape: torch.Size, by: Tensor | None, dtype: torch.dtype,
                operand_rtol: float) -> Tensor:
    """fn(b_x, |y| + b_y): the error x brings into the product x·y, through y as computed and
    y's own error ``by`` (None: y carries none)."""
    bx = _operand_bound(rx, dtype, operand_rtol).expand(x_shape)
    return fn(bx, y().abs() if by is None else y().abs() + by.expand(y_shape))


def _carries_radii(rounding: Rounding | None, dtype: torch.dtype, operand_rtol: float) -> bool:
    """Whether an operand carries error in as ℓ2 radii."""
    return rounding is not None and not rounding.exact and rounding.carried is not None \
        and isinstance(rounding.carried(dtype, operand_rtol), VectorBound)


def _row_max(values: Tensor) -> Tensor:
    """max |values| along the last dimension (keepdim; broadcasting as ``values`` does)."""
    return values.abs().amax(-1, keepdim=True) if values.dim() else values.abs()


def product_rounding(fn: Callable[[Tensor, Tensor], Tensor],
                     pairs: list[tuple[Operand, Operand]], degree: float, length: int,
                     out_shape: torch.Size) -> Rounding:
    """The rounding of Σ over ``pairs`` of ``fn(x, y)``, a bilinear op summing ``length`` products
    per output element (1 for an elementwise product), computed as one sum of ``length`` products
    per pair or as a sum of such sums: n = ``length``·pairs + pairs − 1 covers both. Each operand
    comes with its own rounding (or None), whose error the product carries in."""
    operands = [(_operand(x, rx), _operand(y, ry)) for (x, rx), (y, ry) in pairs]
    shapes = [(x.shape, y.shape) for (x, _), (y, _) in pairs]
    roundings = [(rx, ry) for (_, rx), (_, ry) in pairs]

    def magnitude() -> Tensor:
        total = fn(operands[0][0]().abs(), operands[0][1]().abs())
        for x, y in operands[1:]:
            total = total + fn(x().abs(), y().abs())
        return total

    norms = [(len(y.shape), None if ry is None else ry.norms) for (_, _), (y, ry) in pairs]

    def cheap() -> Tensor:
        total: Tensor | None = None
        for (x, y), (y_dim, y_norms) in zip(operands, norms):
            part = _cheap_magnitude(fn, x(), y, y_dim, y_norms)
            part = fn(x().abs(), y().abs()) if part is None else part
            total = part if total is None else total + part
        assert total is not None
        return total

    def pair_norm(x: Callable[[], Tensor], y: Callable[[], Tensor], y_dim: int,
                  y_norms: Callable[[int, bool], Tensor] | None) -> Callable[[int], Tensor | None]:
        # along the output's own last dimension only (not one it broadcasts to)
        return lambda n: _cheap_norm(fn, x(), y, y_dim, y_norms) if len(out_shape) and out_shape[-1] == n \
            else None

    def carried(dtype: torch.dtype, operand_rtol: float) -> Brought:
        zero = torch.zeros((), dtype=dtype)
        bounds: list[Brought] = []
        for (x, y), (x_shape, y_shape), (rx, ry) in zip(operands, shapes, roundings):
            radius = _product_radius(fn, (x, x_shape, rx), (y, y_shape, ry), dtype, operand_rtol, out_shape)
            if radius is not None:
                bounds.append(radius)
                continue
            by = None if ry is None or ry.exact else _operand_bound(ry, dtype, operand_rtol)
            parts = [] if by is None else [fn(x().abs(), by.expand(y_shape))]
            if rx is not None and not rx.exact:
                parts.append(_left_error(fn, x_shape, rx, y, y_shape, by, dtype, operand_rtol))
            # 0 + part, with its type promotion, without a pass over part
            bounds.extend(part if torch.result_type(zero, part) == part.dtype else zero + part
                          for part in parts)
        return total(bounds, out_shape) if bounds else zero

    def partials(at: Tensor) -> Tensor:
        rows = [_operand_rows(fn, x(), y(), out_shape, at) for x, y in operands]
        return torch.cat([_exact_products(*r) for r in rows if r is not None], dim=-1)

    @_memo
    def zero_terms() -> Tensor:
        # the number of terms with no zero factor, per output (exact: far below 2⁵³)
        counts = [fn((x() != 0).double(), (y() != 0).double()) for x, y in operands]
        return (sum(counts[1:], counts[0]) == 0).expand(out_shape).reshape(-1)

    @_memo
    def zero_vectors() -> Tensor | None:
        found: Tensor | None = torch.ones((), dtype=torch.bool, device=device)
        for x, y in operands:
            pair = _zero_operand_vectors(fn, x(), y(), out_shape)
            found = None if pair is None or found is None else found & pair
        return None if found is None else found.expand(out_shape).reshape(-1)

    def zeros(at: Tensor) -> Tensor:
        # rows of zeros first (a padded query's, a zero key's): most exact zeros, for a pass over
        # each operand; the count of nonzero terms (one more product) only where they leave some,
        # and never for an elementwise product, whose zero factors are all its zero terms
        structural = zero_vectors()
        if structural is None:
            return zero_terms()[at]
        found = structural[at]
        if fn is torch.mul or bool(found.all()):
            return found
        return found | zero_terms()[at]

    usable = all(x.dtype == torch.float64 and y.dtype == torch.float64 and _supports(fn, x, y)
                 for (x, _), (y, _) in pairs)
    inherits = any((rx is not None and not rx.exact) or (ry is not None and not ry.exact)
                   for rx, ry in roundings)
    numel, device = math.prod(out_shape), pairs[0][0][0].device
    return Rounding(degree, _memo(magnitude), length * len(pairs) + len(pairs) - 1,
                    (lambda: torch.arange(numel, device=device).reshape(out_shape)) if usable else None,
                    ZeroTested(partials, zeros) if usable else None, _memo(cheap),
                    carried if inherits else None,
                    cheap_norm=_summed_norms([pair_norm(x, y, y_dim, y_norms)
                                              for (x, y), (y_dim, y_norms) in zip(operands, norms)]))


def exact_sign(rows: Tensor) -> list[int]:
    """The sign of the exact sum of each row of float64 partials (``math.fsum`` rounds the exact
    sum correctly, so its sign and its zeros are exact; a sum beyond float64's range is taken in
    rationals). A partial that is not finite (a product or a split that overflowed) has no exact
    sum: :class:`~saturated.errors.SaturationError`, never a sign read from NaN.

    >>> exact_sign(torch.tensor([[1e16, 1.0, -1e16], [0.5, -0.5, 0.0], [1e308, 1e308, -1.0]],
    ...                         dtype=torch.float64))
    [1, 0, 1]
    """
    if not bool(torch.isfinite(rows).all()):
        raise SaturationError("the exact step met operands whose products overflow float64 (partials that "
                              "are not finite): it cannot decide their sign")
    signs = []
    for row in rows.tolist():
        total: float | Fraction
        try:
            total = math.fsum(row)
        except OverflowError:  # finite partials whose exact sum is beyond float64's range
            total = sum(map(Fraction, row), Fraction(0))
        signs.append((total > 0) - (total < 0))
    return signs


# The mean number of candidates per tied row from which the exact step first looks for rows of
# exact zeros: such rows tie every key, and the test costs one more product, wasted on near-ties.
_ZERO_TESTED_FROM = 4


def exact_maximal(candidates: Tensor, dim: int, rounding: Rounding) -> Tensor:
    """``candidates`` narrowed, in every row with more than one, to the positions whose exact
    value (from :attr:`Rounding.partials`) is the row's exact maximum; exact ties stay together.

    Candidates whose operands are the same as the row's first candidate's (the common case: tokens
    with equal keys) are equal without summing anything; the rest are compared by the exact sign of
    their difference.
    """
    assert rounding.index is not None and rounding.partials is not None
    moved = candidates.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    tied = torch.nonzero(rows.sum(-1) > 1).flatten()
    if not len(tied):
        return candidates
    index = rounding.index().expand(candidates.shape).movedim(dim, -1).reshape(rows.shape)
    if isinstance(rounding.partials, ZeroTested) and int(rows[tied].sum()) >= _ZERO_TESTED_FROM * len(tied):
        # A row of exact zeros (a zero query's scores) is one exact tie.
        zeros = rounding.partials.zeros(index[tied])
        tied = tied[(rows[tied] & ~zeros).any(-1)]
        if not len(tied):
            return candidates
    row_of, place = torch.nonzero(rows[tied], as_tuple=True)
    partials = rounding.partials(index[tied][row_of, place])
    first = torch.searchsorted(row_of, torch.arange(len(tied), device=row_of.device))  # row_of is sorted
    same = (partials == partials[first[row_of]]).all(-1)
    narrowed = rows.clone()
    for row in torch.unique(row_of[~same]).tolist():
        members = torch.nonzero(row_of == row).flatten().tolist()
        best = members[0]
        for member in members[1:]:
            if exact_sign(torch.cat([partials[member], -partials[best]]).unsqueeze(0))[0] > 0:
                best = member
        differences = torch.cat([partials[members], -partials[best].expand(len(members), -1)], -1)
        keep = torch.tensor([sign == 0 for sign in exact_sign(differences)])
        narrowed[tied[row], place[members]] = keep
    return narrowed.reshape(moved.shape).movedim(-1, dim)
