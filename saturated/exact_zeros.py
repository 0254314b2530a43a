"""Elementwise products with a factor exactly zero: 0 times any finite value is 0, for every c.

Where one factor is zero in every known part, with nothing untracked (floor −∞) and its exact
values zero too (:attr:`~saturated.rounding.Rounding.partials`: a computed zero may be rounding's),
the product is exactly 0 whatever the other factor holds there: NaN, a value left undetermined, or
an :class:`~saturated.terms.UnknownDegree`. This is what lets one order decide RMSNorm at padded
positions whose embedding row is zero (Gemma's, Phi-3's): x·(mean(x²) + ε)^(−1/2) with x = 0 is 0,
though at one order ε is below the floor and the power's base vanishes there.

Such elements of the other factor are set to 0 before the product, bounds included, so that the
product's rounding bound there is 0 (its magnitude |x|·|y| would be NaN, and a NaN bound leaves
every decision that reads it unsure). The cheap tests (floors, one reduction for NaN) run first: a
product with no exact zero facing a NaN costs what it did.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import Tensor

from saturated.radii import Brought, VectorBound
from saturated.rounding import Rounding, known_zeros
from saturated.terms import NeedsOrders, Term, UnknownDegree, may_hold_nan, mul, unexpanded

__all__ = ["exact_zeros", "product", "resolved"]


def product(x: Term, y: Term, orders: int, carried: bool) -> Term:
    """x·y elementwise (:func:`~saturated.terms.mul`), exactly 0 where a factor is exactly 0.

    ``carried`` (:attr:`~saturated.rules.Settings.carried`): a zero counts as exact only if its
    operands brought no error in either. The product is an :class:`UnknownDegree` where a factor
    was one and an element of it is left.

    >>> nan = Term(((torch.tensor([math.nan, math.nan]), 1.0),))
    >>> coef = torch.tensor([0.0, 1.0])
    >>> exact = Term(((coef, 1.0),), roundings=(Rounding.of_exact(coef, 1.0),))
    >>> product(exact, nan, 1, carried=False).lead
    tensor([0., nan])
    """
    unknown = isinstance(x, UnknownDegree) or isinstance(y, UnknownDegree)
    if not (unknown or x.floor == -math.inf or y.floor == -math.inf):
        return mul(x, y, orders)
    shape = torch.broadcast_shapes(x.shape, y.shape)
    x, y = _cleared(x, y, shape, carried), _cleared(y, x, shape, carried)
    result = mul(x, y, orders)
    left = [t.reason for t in (x, y) if isinstance(t, UnknownDegree)]
    return UnknownDegree(result.parts, result.floor, result.roundings, reason=left[0]) if left else result


def resolved(value: object, mark: bool, use: str) -> object:
    """``value`` where an op that is not an elementwise product reads it (``use`` says which): an
    :class:`UnknownDegree` there raises :class:`NeedsOrders`, or (``mark``, at a model's output,
    where nothing can drop it) is a term NaN where undetermined. Other values pass."""
    if not isinstance(value, UnknownDegree):
        return value
    if mark:
        return Term(value.parts, value.floor, value.roundings)
    raise NeedsOrders(f"{value.reason}, and {use} reads it")


def _cleared(other: Term, factor: Term, shape: torch.Size, carried: bool) -> Term:
    """``other`` with 0 (and a bound of 0) where it holds NaN and every element of ``factor`` it
    meets in a product of ``shape`` is exactly zero. An :class:`UnknownDegree` stays one while
    NaN is left in it."""
    held = None if factor.floor != -math.inf or not _has_zero(factor.lead) else _holds_nan(other)
    if held is None:
        return other
    zero = exact_zeros(factor, _to_shape(held.expand(shape), factor.shape, every=False), carried)
    covered = held & _to_shape(zero.expand(shape), other.shape, every=True)
    if not bool(covered.any()):
        return other
    parts = tuple((torch.where(covered, 0.0, a), d) for a, d in other.parts)
    roundings = tuple(_zeroed_bound(r, covered) for r in other.roundings)
    if isinstance(other, UnknownDegree) and bool((held & ~covered).any()):
        return replace(other, parts=parts, roundings=roundings)
    return Term(parts, other.floor, roundings)


def exact_zeros(x: Term, where: Tensor, carried: bool) -> Tensor:
    """Of the elements ``where`` (boolean, of ``x``'s shape), those at which ``x`` is 0 for every c:
    nothing untracked (floor −∞), and every part's coefficient 0 with its exact value 0 (from the
    part's bound; with ``carried``, one whose operands brought in no error).

    >>> t = Term(((torch.tensor([0.0, 0.0, 2.0]), 1.0),),
    ...          roundings=(Rounding.of_exact(torch.tensor([0.0, 0.0, 2.0]), 1.0),))
    >>> exact_zeros(t, torch.tensor([True, False, True]), carried=False)
    tensor([ True, False, False])
    """
    known = where & (x.floor == -math.inf)
    for a, degree in x.parts:
        known = known & (a == 0)
        if not bool(known.any()):
            return known
        rounding = x.rounding(degree)
        if rounding is None or rounding.partials is None or rounding.index is None \
                or (carried and rounding.carried is not None):
            return torch.zeros_like(known)
        at = rounding.index().expand(a.shape)[known]
        known = known.masked_scatter(known, known_zeros(rounding.partials, at))
    return known


def _has_zero(a: Tensor) -> bool:
    """Whether ``a`` has a zero entry (an exact zero needs its leading coefficient 0 first), read
    once per stored element: a factor broadcast along the product (a norm's weight, a scale) is
    tested at its own size, before a pass over the other factor for NaN.

    >>> _has_zero(torch.tensor([1.0, math.nan]).expand(3, 2)), _has_zero(torch.tensor([0.0, 2.0]))
    (False, True)
    """
    return not bool(unexpanded(a).all())


def _holds_nan(term: Term) -> Tensor | None:
    """Where any part of ``term`` is NaN (of its shape), or None where none is."""
    found: Tensor | None = None
    for a, _ in term.parts:
        if may_hold_nan(a):
            nan = torch.isnan(a)
            found = nan if found is None else found | nan
    if found is None or not bool(found.any()):
        return None
    return found.expand(term.shape)


def _to_shape(mask: Tensor, shape: torch.Size, every: bool) -> Tensor:
    """A boolean ``mask`` of a product's shape reduced to an operand's ``shape``: over the
    dimensions the operand is broadcast along, whether ``every`` element (or any) is True.

    >>> _to_shape(torch.tensor([[True, False], [True, True]]), torch.Size([2, 1]), every=True)
    tensor([[False],
            [ True]])
    """
    lead = mask.dim() - len(shape)
    dims = [*range(lead), *(lead + i for i, n in enumerate(shape) if n == 1 and mask.shape[lead + i] != 1)]
    if not dims:
        return mask
    reduced = mask.all(dim=dims, keepdim=True) if every else mask.any(dim=dims, keepdim=True)
    return reduced.reshape(shape)


def _zeroed_bound(rounding: Rounding, where: Tensor) -> Rounding:
    """``rounding`` with a bound of 0 at ``where`` (elements set to 0 that meet an exact zero: the
    product there has no error), radii 0 on vectors wholly inside it; exact values dropped (this
    bound serves one product, whose own exact values read the operands)."""
    magnitude, cheap, brought = rounding.magnitude, rounding.cheap, rounding.carried

    def zeroed(bound: Tensor) -> Tensor:
        return torch.where(where, 0.0, bound)

    def carried(dtype: torch.dtype, operand_rtol: float) -> Brought:
        assert brought is not None
        bound = brought(dtype, operand_rtol)
        if isinstance(bound, VectorBound):
            whole = where.all(-1, keepdim=True) if where.dim() else where
            return VectorBound(torch.where(whole, 0.0, bound.radius), bound.shape)
        return zeroed(bound)

    return replace(rounding, magnitude=lambda: zeroed(magnitude()),
                   cheap=None if cheap is None else lambda: zeroed(cheap()),
                   carried=None if brought is None else carried, index=None, partials=None, values=None)
