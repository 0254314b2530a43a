"""Lemmas for the ops of mixture-of-experts routers: top-k and sorting, counting and scattering at
the positions a router chose."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy
import torch

from homogeneity.lemmas import base
from homogeneity.lemmas.algebra import SUM_CASES, T, total
from homogeneity.lemmas.base import Claim, Deg, Lemma, LemmaCase, Sample, no_degree
from homogeneity.lemmas.shape import MOVES

__all__ = ["LEMMAS"]

aten = torch.ops.aten
A, B = sympy.symbols("a b", real=True)


def _order() -> str | None:
    """The order of (cᵏa, cᵏb) is that of (a, b): cᵏa − cᵏb has the sign of a − b."""
    residual = sympy.simplify(sympy.sign(T * (A - B)) - sympy.sign(A - B))
    return None if residual == 0 else f"sign residual {residual}"


def _top_k_law(x: Deg, *args: Any, **kwargs: Any) -> Claim:
    if x.value is None:
        return no_degree("an input without degree")
    if x.value != 0:
        return no_degree("values of nonzero degree and positions of degree 0 in one node")
    return Claim("order", Deg(Fraction(0), x.grade), ("the top-k set has no tie",))


def _positions(index: Any) -> Claim | None:
    """The claim of no degree for positions that are not of degree 0 (None for those that are)."""
    index = base.as_deg(index)
    if index.value is None:
        return no_degree("positions without degree")
    if index.value != 0:
        return no_degree(f"positions of degree {base.fmt(index.value)}")
    return None


def _weakened(claim: Claim, index: Any) -> Claim:
    """``claim`` with its grade weakened by that of the positions that placed its entries."""
    if claim.out.value is None:
        return claim
    grade = base.as_deg(index).grade
    return Claim(claim.case, Deg(claim.out.value, base.weakest([claim.out.grade, grade])),
                 (*claim.conditions, f"positions of degree 0 ({grade})"))


def _counting_law(x: Deg, *args: Any, **kwargs: Any) -> Claim:
    refused = _positions(x)
    if refused is not None:
        return refused
    weights = next((a for a in (*args, *kwargs.values()) if isinstance(a, Deg)), None)
    if weights is None:
        return Claim("order", Deg(Fraction(0), x.grade), ("positions of degree 0",))
    return _weakened(total(weights, what="weights summed at each position"), x)


def _scattering_law(x: Deg, dim: Any, index: Any, source: Any, alpha: Any = 1) -> Claim:
    refused = _positions(index)
    if refused is not None:
        return refused
    return _weakened(total(x, 0 if base.is_literal_zero(alpha) else source, what="scattered entries"), index)


ORDER = LemmaCase("order", "order(cᵏz) = order(z) for c > 0", _order)

LEMMAS = (
    Lemma("top_k", "top-k and sort of a degree-0 input: values and positions degree 0, the "
          "input's grade (positions invariant under c > 0 where the top-k set has no tie)",
          (aten.topk.default, aten.sort.default, aten.sort.stable), _top_k_law, (ORDER,),
          (Sample(1, lambda x: ((x, 2), {})),)),
    Lemma("counting", "one_hot and bincount of positions of degree 0: counts of degree 0, weighted "
          "counts the weights' degree (Sum rule), the positions' grade",
          (aten.one_hot.default, aten.bincount.default), _counting_law, (ORDER, *SUM_CASES),
          (Sample(1, lambda x: ((x,), {})), Sample(2, lambda x, w: ((x, w), {})))),
    Lemma("scattering", "scatter, scatter_add and index_add at positions of degree 0 move entries "
          "of x and the source and add them: the Sum rule, the positions' grade",
          (aten.scatter.src, aten.scatter.value, aten.scatter_add.default, aten.index_add.default),
          _scattering_law,
          (MOVES, *SUM_CASES),
          (Sample(3, lambda x, i, s: ((x, 0, i, s), {})), Sample(2, lambda x, i: ((x, 0, i, 0), {})),
           Sample(3, lambda x, i, s: ((x, 0, i, s), {"alpha": 0})))),
)
