"""Rules for reductions and LayerNorm (paper Table 1, LayerNorm k → 0)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from saturated.rules.common import _decision_bound, _term
from saturated.rules.registry import Settings, _rule
from saturated.terms import NeedsOrders, Term, add, make, may_hold_nan, mul, power, reduce, scale
from saturated.ties import with_nan

__all__: list[str] = []  # the rules register themselves in RULES

aten = torch.ops.aten


def _dims(x: Term, dim: Any) -> list[int]:
    if dim is None:
        return list(range(x.lead.dim()))
    return [int(d) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]


@_rule(aten.mean.dim)
def _mean(s: Settings, x: Term, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Term:
    """Mean over dimensions, part by part."""
    return reduce(x, _dims(x, dim), keepdim, mean=True)


@_rule(aten.sum.dim_IntList)
def _sum(s: Settings, x: Term, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Term:
    """Sum over dimensions, part by part."""
    return reduce(x, _dims(x, dim), keepdim, mean=False)


@_rule(aten.layer_norm.default)
def _layer_norm(s: Settings, x: Any, shape: Sequence[int], weight: Any = None, bias: Any = None,
                eps: float = 1e-5, cudnn: bool = True) -> Term:
    """LayerNorm (x − μ)·(σ² + ε)^(−1/2), then the affine map (paper Table 1, LayerNorm k → 0).

    Expanded with the sum, product and power rules: for an input of degree d > 0, ε is a part of
    degree 0 against σ²'s 2d, so it only enters c^(−2d) below the leading order.
    """
    t = _term(x, s)
    dims = list(range(-len(shape), 0))
    unsure = _maybe_constant_rows(t, dims, s)
    if unsure is not None and s.ties != "nan":
        raise NeedsOrders("layer_norm of a row whose leading coefficients are equal within their "
                          "rounding bound (it may be constant, and then a lower order leads)")
    if s.orders == 1 and len(t.parts) == 1 and 0 < t.degree < math.inf:
        # Leading order of one growing part: normalize without ε (ε/σ² ~ c^(−2d)); an affine map
        # whose weight and bias share one degree is applied in the same call.
        affine = _one_degree_affine(weight, bias, s)
        gain, shift = (affine[0], affine[1]) if affine else (None, None)
        normalized = F.layer_norm(t.lead, shape, gain, shift, eps=0.0)
        if may_hold_nan(normalized):
            undefined = torch.isnan(normalized.sum(dims))
            if s.ties == "nan":  # rows that held NaN already are undetermined, not constant
                undefined &= ~torch.isnan(t.lead.sum(dims))
            if bool(undefined.any()):
                raise NeedsOrders("layer_norm of a row whose leading coefficients are all equal")
        error = max(t.floor - t.degree, -2 * t.degree)
        if affine:
            out = Term(((normalized, affine[2]),), error + affine[2])
            return out if unsure is None else with_nan(out, unsure)
        out = Term(((normalized, 0.0),), error)
    else:
        out = _composed_layer_norm(t, dims, eps, s.orders)
    if weight is not None:
        out = mul(out, _term(weight, s), s.orders)
    if bias is not None:
        out = add(out, _term(bias, s), s.orders)
    return out if unsure is None else with_nan(out, unsure)


def _maybe_constant_rows(t: Term, dims: list[int], s: Settings) -> Tensor | None:
    """The rows (normalized dimensions kept, of size 1) whose leading coefficients were computed
    unequal but may all be equal: a constant row has no direction to normalize, and a lower order
    leads. None if there is no such row.

    Each coefficient is known within its bound bᵢ (the rounding of the op that produced it, for
    its operands as computed, like every decision), so two coefficients surely differ once
    |x̂ᵢ − x̂ⱼ| > bᵢ + bⱼ: a row is surely not constant once its range exceeds 2·max b. Over the
    last dimension alone, max b is taken as the bound's ℓ2 norm (:meth:`Rounding.own_radius`),
    which a matrix product's operands' norms give without a bound of the layer's size.
    """
    rounding = t.rounding(t.degree)
    if rounding is None or not 0 < t.degree < math.inf:
        return None
    lead = t.lead
    rows = lead.flatten(lead.dim() - len(dims))  # the normalized dimensions as one
    # two reductions: aminmax along a dimension takes about ten times as long as both
    low, high = rows.amin(-1, keepdim=True), rows.amax(-1, keepdim=True)
    if dims == [-1] and not s.carried:
        largest = rounding.own_radius(lead.dtype, s.operand_rtol, lead.shape, cheap=True)
    else:
        bound = _decision_bound(rounding, lead.dtype, s, cheap=True).expand_as(lead)
        largest = bound.flatten(lead.dim() - len(dims)).amax(-1, keepdim=True)
    unsure = (high > low) & ~(high - low > 2 * largest)  # a NaN bound (overflowed) proves nothing
    if not bool(unsure.any()):
        return None
    return unsure.reshape(*lead.shape[:lead.dim() - len(dims)], *(1,) * len(dims))


def _one_degree_affine(weight: Any, bias: Any, s: Settings) -> tuple[Tensor, Tensor | None, float] | None:
    """LayerNorm's weight and bias coefficients if both are known exactly with one common degree."""
    if not (isinstance(weight, Term) and len(weight.parts) == 1 and weight.floor == -math.inf):
        return None
    if bias is None:
        return weight.lead, None, weight.degree
    b = _term(bias, s)
    if len(b.parts) == 1 and b.floor == -math.inf and b.degree == weight.degree:
        return weight.lead, b.lead, weight.degree
    return None


def _composed_layer_norm(t: Term, dims: list[int], eps: float, orders: int) -> Term:
    """(x − μ)·(σ² + ε)^(−1/2) from the sum, product and power rules, part by part."""
    centered = add(t, scale(reduce(t, dims, True, mean=True), -1.0), orders)
    # Which rows are constant was decided above (_maybe_constant_rows): a part they cancel is a
    # known zero, and the next part leads.
    centered = make(centered.parts, centered.floor, orders).with_roundings(centered.roundings)
    variance = reduce(mul(centered, centered, orders), dims, True, mean=True)
    epsilon = Term(((torch.tensor(eps, dtype=t.lead.dtype), 0.0),))
    return mul(centered, power(add(variance, epsilon, orders), -0.5, orders), orders)
