"""Rules for products: linear maps, matrix products, embeddings, multiplication and division."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from homogeneity.degree import Degree, Grade, lift, weakest
from homogeneity.rules.common import as_degree, first_undefined, product, sum_of
from homogeneity.rules.registry import rule

__all__: list[str] = []

aten = torch.ops.aten


@rule(aten.linear.default)
def linear(input: Degree, weight: Degree, bias: Degree | None = None) -> Degree:
    """x Wᵀ + b: Linear k → k + 1 and Bias 1 → 1 (Table 1; Lemmas 3-4).

    The product adds degrees; the bias is a sum term, so with a degree-1 bias the output is
    exactly (k + 1)-homogeneous only when k = 0, and asymptotically otherwise.
    """
    out = product(input, weight, what="linear map")
    return out if bias is None else sum_of(out, bias, what="bias")


@rule(aten.addmm.default, aten.baddbmm.default, aten.addbmm.default)
def addmm(bias: Degree, a: Degree, b: Degree, *, beta: Any = 1, alpha: Any = 1) -> Degree:
    """β·bias + α·(a @ b): a product (degrees add) plus a bias term (Table 1's Bias, Lemma 3)."""
    out = product(a, b, what="matrix product")
    return out if beta == 0 else sum_of(out, bias, what="bias")


@rule(aten.mm.default, aten.bmm.default, aten.matmul.default, aten.dot.default,
      aten.mv.default, aten.outer.default)
def matmul(a: Degree, b: Degree) -> Degree:
    """a @ b is bilinear: degrees add, grades take the weaker (Table 1's Product, Lemma 4)."""
    return product(a, b, what="matrix product")


@rule(aten.einsum.default)
def einsum(equation: str, operands: list[Degree], path: Any = None) -> Degree:
    """An einsum is multilinear in its operands: degrees add (Table 1's Product, Lemma 4)."""
    return product(*operands, what=f"einsum {equation!r}")


@rule(aten.mul.Tensor, aten.mul.Scalar, aten.mul_.Tensor)
def mul(a: Any, b: Any) -> Degree:
    """Elementwise a·b: degrees add (Table 1's Product, Lemma 4); a number is a constant factor."""
    return product(a, b, what="product")


@rule(aten.div.Tensor, aten.div.Scalar, aten.div_.Tensor)
def div(a: Any, b: Any) -> Degree:
    """a / b with b ≠ 0: (cᵏa)/(cʲb) = c^(k−j)·a/b, so degrees subtract and grades take the weaker.

    With a lower-order error in b, 1/(cʲb + ε) = c^(−j)/b·(1 + O(ε/cʲ)): the same grade carries over.
    """
    da, db = as_degree(a), as_degree(b)

    def single(x: Degree, y: Degree) -> Degree:
        grade = weakest([x.grade, y.grade])
        if grade is Grade.NONE:
            return x if x.grade is Grade.NONE else y
        return Degree.of(sympy.sympify(x.value - y.value), grade,
                         f"quotient: degrees subtract ({x.value} − {y.value})")

    return lift(single, da, db)


@rule(aten.div.Tensor_mode, aten.floor_divide.default, aten.remainder.Scalar,
      aten.remainder.Tensor, aten.fmod.Scalar)
def rounding_division(a: Any, b: Any, **mode: Any) -> Degree:
    """Rounding division and remainders: exact for scale-invariant inputs, undefined otherwise.

    floor(cᵏa / b) is no power of c times floor(a / b); with degree-0 inputs nothing changes.
    """
    degrees = [as_degree(a), as_degree(b)]
    undefined = first_undefined(degrees)
    if undefined is not None:
        return undefined
    if all(d.single and d.value == 0 for d in degrees):
        return Degree.of(0, weakest(d.grade for d in degrees), "rounding division of constants")
    return Degree.none("rounding division of a parameter-dependent tensor has no degree")


@rule(aten.embedding.default)
def embedding(weight: Degree, indices: Degree, *options: Any) -> Degree:
    """Row lookup W[i]: the rows keep W's degree (1 for a scaled table) when the indices are fixed.

    Indices that depend on the scaled parameters select different rows as c grows: no degree.
    """
    if not (indices.single and indices.value == 0 and indices.grade is Grade.EXACT):
        return Degree.none("embedding indices depend on the scaled parameters")
    return lift(lambda w: Degree.of(w.value, w.grade, "embedding rows keep the table's degree"),
                weight)
