"""Rules for sums, scalings, elementwise products and powers (paper Table 1, Sum and Product)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from saturated.exact_zeros import product
from saturated.rules.common import _scaled, _term
from saturated.rules.registry import Settings, _rule
from saturated.terms import Term, add, mul, power, scale

__all__: list[str] = []  # the rules register themselves in RULES

aten = torch.ops.aten


@_rule(aten.add.Tensor, aten.add.Scalar, aten.add_.Tensor)
def _add(s: Settings, x: Any, y: Any, alpha: float = 1) -> Term:
    """x + α·y: parts of equal degree add, the highest lead (paper Table 1, Sum)."""
    return add(_term(x, s), _scaled(y, alpha, s), s.orders)


@_rule(aten.sub.Tensor, aten.sub.Scalar)
def _sub(s: Settings, x: Any, y: Any, alpha: float = 1) -> Term:
    """x − α·y."""
    return add(_term(x, s), _scaled(y, -alpha, s), s.orders)


@_rule(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(s: Settings, x: Any, other: Any, alpha: float = 1) -> Term:
    """other − α·x."""
    return add(_term(other, s), _scaled(x, -alpha, s), s.orders)


@_rule(aten.neg.default)
def _neg(s: Settings, x: Term) -> Term:
    """−x."""
    return scale(x, -1.0)


@_rule(aten.mul.Tensor, aten.mul.Scalar, aten.mul_.Tensor, accepts_unknown_degree=True)
def _mul(s: Settings, x: Any, y: Any) -> Term:
    """x·y: degrees add (paper Table 1, Product). A constant factor keeps rounding bounds; a
    factor exactly zero for every c makes the product 0 whatever the other holds
    (:func:`~saturated.exact_zeros.product`)."""
    if isinstance(x, Term) and _is_constant(y):
        return scale(x, float(y))
    if isinstance(y, Term) and _is_constant(x):
        return scale(y, float(x))
    return product(_term(x, s), _term(y, s), s.orders, s.carried)


def _is_constant(value: Any) -> bool:
    """A number, or an exact one-element tensor (a scale factor such as GPT-2's √d)."""
    return isinstance(value, (int, float)) or (
        isinstance(value, Tensor) and value.numel() == 1 and value.dim() == 0)


@_rule(aten.div.Tensor, aten.div.Scalar, aten.div_.Tensor)
def _div(s: Settings, x: Any, y: Any) -> Term:
    """x / y = x · y⁻¹."""
    if isinstance(x, Term) and _is_constant(y) and float(y) != 0:
        return scale(x, 1 / float(y))  # one more rounding than x / y: the bound covers both
    inverse = power(y, -1.0, s.orders) if isinstance(y, Term) else _term(1 / y, s)
    return mul(_term(x, s), inverse, s.orders)


@_rule(aten.pow.Tensor_Scalar)
def _pow(s: Settings, x: Term, exponent: float) -> Term:
    """xᵖ: the degree multiplies by p (binomial series below the leading part)."""
    return power(x, float(exponent), s.orders, unknown_degree=True)


@_rule(aten.rsqrt.default)
def _rsqrt(s: Settings, x: Term) -> Term:
    """x^(−1/2), as in RMSNorm."""
    return power(x, -0.5, s.orders, unknown_degree=True)


@_rule(aten.sqrt.default)
def _sqrt(s: Settings, x: Term) -> Term:
    """x^(1/2)."""
    return power(x, 0.5, s.orders, unknown_degree=True)


@_rule(aten.reciprocal.default)
def _reciprocal(s: Settings, x: Term) -> Term:
    """1 / x."""
    return power(x, -1.0, s.orders, unknown_degree=True)
