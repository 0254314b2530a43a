"""Lemmas for softmax, log-softmax/logsumexp, GELU/SiLU and fused attention (Appendix A.3)."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from homogeneity.degree import Grade
from homogeneity.lemmas.algebra import (
    T,
    exponentially_close,
    function_claim,
    product,
    then,
    total,
)
from homogeneity.lemmas.base import Claim, Deg, Lemma, LemmaCase, Sample, as_deg, no_degree
from homogeneity.lemmas.elementwise import INVARIANT

__all__ = ["LEMMAS"]

aten = torch.ops.aten
GAP = sympy.Symbol("d", positive=True)  # the gap between the largest score and the next
Z, B = sympy.Symbol("z", positive=True), sympy.Symbol("b", real=True)


def _softmax_saturates() -> str | None:
    """softmax(cᵏz + b) over two scores with a gap d > 0: the top weight → 1, error ≤ e^(−td/2)."""
    for shift in (0, B):
        top = 1 / (1 + sympy.exp(-(T * GAP + shift)))
        reason = exponentially_close(top, 1, GAP / 2)
        if reason:
            return reason
    return None


def _logsumexp_linear() -> str | None:
    """logsumexp(cᵏz) = cᵏ max z + log(1 + e^(−cᵏd)): within an exponentially small error of
    the positively homogeneous cᵏ max z (and log-softmax likewise)."""
    m = sympy.Symbol("m", real=True)
    scaled = sympy.log(sympy.exp(T * m) + sympy.exp(T * (m - GAP)))
    return exponentially_close(sympy.expand_log(sympy.simplify(scaled - T * m), force=True), 0,
                               GAP / 2)


def _gelu_linear() -> str | None:
    """z·Φ(cᵏz)·cᵏ and z·σ(cᵏz)·cᵏ are within an exponentially small error of ReLU(cᵏz)."""
    phi = (1 + sympy.erf(T * Z / sympy.sqrt(2))) / 2
    for gate in (phi, 1 / (1 + sympy.exp(-T * Z))):
        reason = exponentially_close(Z * gate, Z, Z / 2) or exponentially_close(
            -Z * gate.subs(Z, -Z), 0, Z / 2)
        if reason:
            return reason
    return None


def _function_lemma(name: str, targets: tuple[Any, ...], statement: str, limit: str,
                    growing: LemmaCase, sample: Sample) -> Lemma:
    def law(x: Deg, *args: Any, **kwargs: Any) -> Claim:
        return function_claim(x, limit, name)  # type: ignore[arg-type]

    return Lemma(name, statement, targets, law, (INVARIANT, growing), (sample,))


def _attention_law(query: Any, key: Any, value: Any, attn_mask: Any = None, *rest: Any,
                   **options: Any) -> Claim:
    degrees = [as_deg(d) for d in (query, key, value, attn_mask)]
    if any(d.grade is Grade.NONE for d in degrees):
        return no_degree("a term without degree")
    scores = then(product(query, key, what="scores"), total(product(query, key).out, attn_mask,
                                                            what="masked scores"))
    weights = then(scores, function_claim(scores.out, "constant", "softmax"))
    return then(weights, product(weights.out, value, what="weights · values"))


def _attention_proof() -> str | None:
    """softmax(cᵏ·s)·cʲv → hardmax(s)·v·cʲ: the weights saturate (the softmax case), the values
    keep their degree (products add degrees)."""
    return _softmax_saturates()


LEMMAS = (
    _function_lemma("softmax", (aten.softmax.int, aten._softmax.default, aten._safe_softmax.default),
                    "softmax(cᵏz + b) → hardmax(z) with error ≤ exp(−Ω(cᵏ)) for k > 0 (Lemma 7, "
                    "Theorem 5): degree 0, approximate",
                    "constant",
                    LemmaCase("growing input", "the top weight of softmax(cᵏz + b) is within "
                              "e^(−cᵏd/2) of 1 for a gap d > 0", _softmax_saturates),
                    Sample(1, lambda x: ((x, -1), {}))),
    _function_lemma("log-softmax", (aten.log_softmax.int, aten._log_softmax.default,
                                    aten.logsumexp.default),
                    "logsumexp(cᵏz) = cᵏ max z + O(exp(−cᵏd)) and log-softmax likewise: degree k, "
                    "approximate (or the input's weaker grade)",
                    "linear",
                    LemmaCase("growing input", "logsumexp(cᵏz) − cᵏ max z ≤ e^(−cᵏd/2)",
                              _logsumexp_linear),
                    Sample(1, lambda x: ((x, -1), {}))),
    _function_lemma("GELU/SiLU", (aten.gelu.default, aten.silu.default),
                    "GELU(cᵏz) = cᵏ z·Φ(cᵏz) and SiLU likewise are within exp(−Ω(cᵏ)) of "
                    "ReLU(cᵏz) (Lemma 2): degree k, approximate (or the input's weaker grade)",
                    "linear",
                    LemmaCase("growing input", "z·Φ(cᵏz) − ReLU(z) and z·σ(cᵏz) − ReLU(z) are "
                              "below e^(−cᵏ|z|/2)", _gelu_linear),
                    Sample(1, lambda x: ((x,), {}))),
    Lemma("attention", "softmax(QKᵀ·s + M)·V: the scores' softmax saturates (Theorem 6), so the "
          "output has V's degree; an additive mask is a lower-order term of the scores",
          (aten.scaled_dot_product_attention.default,), _attention_law,
          (INVARIANT, LemmaCase("growing input", "growing scores saturate: hard attention times V",
                                _attention_proof)),
          (Sample(3, lambda q, k, v: ((q, k, v), {})),)),
)
