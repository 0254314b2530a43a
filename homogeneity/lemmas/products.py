"""Lemmas for products: linear maps, matrix products, einsum, multiplication, division,
rounding division and embeddings."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from homogeneity.degree import Grade
from homogeneity.lemmas.algebra import (
    PRODUCT_CASES,
    T,
    exact_identity,
    polynomially_close,
    product,
    then,
    total,
)
from homogeneity.lemmas.base import Claim, Deg, Lemma, LemmaCase, Sample, as_deg, fmt, no_degree, weakest
from homogeneity.lemmas.elementwise import INVARIANT

__all__ = ["LEMMAS"]

aten = torch.ops.aten
A, B = sympy.symbols("a b", real=True, nonzero=True)


def _linear_law(input: Deg, weight: Deg, bias: Any = None) -> Claim:
    out = product(input, weight, what="linear map")
    return out if bias is None else then(out, total(out.out, bias, what="bias"))


def _addmm_law(bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Claim:
    out = product(a, b, what="matrix product")
    return out if beta == 0 else then(out, total(out.out, bias, what="bias"))


def _product_law(*factors: Any) -> Claim:
    return product(*factors)


def _einsum_law(equation: str, operands: list[Any], path: Any = None) -> Claim:
    return product(*operands, what=f"einsum {equation!r}")


def _div_law(a: Any, b: Any) -> Claim:
    x, y = as_deg(a), as_deg(b)
    if x.value is None or y.value is None:
        return no_degree("a term without degree")
    return Claim("degrees subtract", Deg(x.value - y.value, weakest([x.grade, y.grade])),
                 (f"quotient: degrees {fmt(x.value)} − {fmt(y.value)}",))


def _quotient() -> str | None:
    """(cᵏa)/(cʲb) = c^(k−j) a/b, and 1/(cʲb + e) = c^(−j)/b·(1 + O(c^(−j)))."""
    return exact_identity((T**3 * A) / (T * B), 2, A / B) or polynomially_close(
        (T**3 * A) / (T * B + 1), 2, A / B)


def _rounding_law(a: Any, b: Any, **mode: Any) -> Claim:
    x, y = as_deg(a), as_deg(b)
    if x.value is None or y.value is None:
        return no_degree("a term without degree")
    if x.value == 0 and y.value == 0:
        return Claim("scale-invariant input", Deg(x.value, weakest([x.grade, y.grade])),
                     ("both operands of degree 0",))
    return no_degree(f"operand degrees {fmt(x.value)} and {fmt(y.value)}")


def _embedding_law(weight: Deg, indices: Any, *options: Any) -> Claim:
    index = as_deg(indices)
    if not (index.value == 0 and index.grade is Grade.EXACT):
        return no_degree(f"indices of degree {fmt(index.value)} ({index.grade})")
    if weight.value is None:
        return no_degree("a table without degree")
    return Claim("fixed indices", weight, ("indices of degree 0 (exact)",))


def _row_lookup() -> str | None:
    """A one-hot row e_i (fixed) times a table c·W is c·(e_i·W)."""
    table = sympy.Matrix([[A, B], [B, A]])
    one_hot = sympy.Matrix([[0, 1]])
    residual = sympy.simplify(one_hot * (T * table) - T * (one_hot * table))
    return None if residual == sympy.zeros(1, 2) else f"lookup residual {residual}"


BILINEAR = (Sample(2, lambda a, b: ((a, b), {})),)

LEMMAS = (
    Lemma("linear", "x Wᵀ + b: Linear k → k + 1 (Product), then the bias is a sum term (Table 1; "
          "Lemmas 3-4)", (aten.linear.default,), _linear_law, PRODUCT_CASES,
          (Sample(3, lambda x, w, b: ((x, w, b), {})), Sample(2, lambda x, w: ((x, w), {})))),
    Lemma("addmm", "β·bias + α·(a @ b): a product (degrees add) plus a bias term",
          (aten.addmm.default, aten.baddbmm.default, aten.addbmm.default), _addmm_law,
          PRODUCT_CASES,
          (Sample(3, lambda b, x, w: ((b, x, w), {})),
           Sample(3, lambda b, x, w: ((b, x, w), {"beta": 0})))),
    Lemma("matrix product", "a @ b is bilinear: degrees add, grades take the weakest (Table 1's "
          "Product, Lemma 4)", (aten.mm.default, aten.bmm.default, aten.matmul.default,
                                aten.dot.default, aten.mv.default, aten.outer.default),
          _product_law, PRODUCT_CASES, BILINEAR),
    Lemma("einsum", "an einsum is multilinear in its operands: degrees add", (aten.einsum.default,),
          _einsum_law, PRODUCT_CASES,
          (Sample(2, lambda a, b: (("ij,jk->ik", [a, b]), {})),)),
    Lemma("multiplication", "elementwise a·b: degrees add; a number is a constant factor",
          (aten.mul.Tensor, aten.mul.Scalar, aten.mul_.Tensor), _product_law, PRODUCT_CASES,
          (*BILINEAR, Sample(1, lambda a: ((a, 0.5), {})))),
    Lemma("division", "(cᵏa)/(cʲb) = c^(k−j)·a/b for b ≠ 0: degrees subtract, grades take the "
          "weakest", (aten.div.Tensor, aten.div.Scalar, aten.div_.Tensor), _div_law,
          (LemmaCase("degrees subtract", "(cᵏa)/(cʲb) = c^(k−j)·a/b", _quotient),),
          (*BILINEAR, Sample(1, lambda a: ((a, 8.0), {})))),
    Lemma("rounding division", "floor division and remainders of degree-0 operands are degree 0; "
          "of any other, none", (aten.div.Tensor_mode, aten.floor_divide.default,
                                 aten.remainder.Scalar, aten.remainder.Tensor, aten.fmod.Scalar),
          _rounding_law, (INVARIANT,), BILINEAR),
    Lemma("embedding", "W[i] for fixed indices i keeps W's degree and grade",
          (aten.embedding.default,), _embedding_law,
          (LemmaCase("fixed indices", "e_i·(cW) = c·(e_i·W)", _row_lookup),), BILINEAR),
)
