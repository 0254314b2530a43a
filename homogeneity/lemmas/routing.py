"""Lemmas for the ops of mixture-of-experts routers: top-k and sorting."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy
import torch

from homogeneity.lemmas.algebra import T
from homogeneity.lemmas.base import Claim, Deg, Lemma, LemmaCase, Sample, no_degree

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


LEMMAS = (
    Lemma("top_k", "top-k and sort of a degree-0 input: values and positions degree 0, the "
          "input's grade (positions invariant under c > 0 where the top-k set has no tie)",
          (aten.topk.default, aten.sort.default, aten.sort.stable), _top_k_law,
          (LemmaCase("order", "order(cᵏz) = order(z) for c > 0", _order),),
          (Sample(1, lambda x: ((x, 2), {})),)),
)
