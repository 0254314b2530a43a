"""Lemmas for LayerNorm, RMSNorm, reductions, differences and variances (Table 1, Lemma 5)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy
import torch

from homogeneity.degree import Grade
from homogeneity.lemmas.algebra import (
    SUM_CASES,
    T,
    exact_identity,
    ordered_pairs,
    polynomially_close,
    product,
    then,
    total,
)
from homogeneity.lemmas.base import Claim, Deg, Lemma, LemmaCase, Sample, fmt, no_degree, weakest
from homogeneity.lemmas.elementwise import INVARIANT

__all__ = ["LEMMAS"]

aten = torch.ops.aten
A = sympy.Symbol("a", real=True)
GAP, EPS = sympy.Symbol("d", positive=True), sympy.Symbol("epsilon", positive=True)


def _normalized(x: Deg, eps: Any, name: str) -> Claim:
    """x/√(σ² + ε) style normalization of a degree-k input, before its affine map."""
    if x.value is None:
        return no_degree("an input without degree")
    if x.value == 0:
        return Claim("scale-invariant input", x, (f"{name}: input degree 0",))
    variance = f"the input's variance has degree 2k = {fmt(2 * x.value)}"
    if not eps:
        return Claim("no eps", Deg(Fraction(0), x.grade), (f"{name}: eps = {eps}", variance))
    held = f"{name}: eps = {eps:g} has degree 0"
    if x.value > 0:
        return Claim("eps below a growing variance",
                     Deg(Fraction(0), weakest([x.grade, Grade.ASYMPTOTIC])), (held, f"{variance} > 0"))
    return Claim("eps above a shrinking variance", Deg(x.value, weakest([x.grade, Grade.ASYMPTOTIC])),
                 (held, f"{variance} < 0"))


def _affine(normalized: Claim, weight: Any, bias: Any) -> Claim:
    out = normalized if weight is None else then(normalized, product(normalized.out, weight,
                                                                     what="scale γ"))
    return out if bias is None else then(out, total(out.out, bias, what="shift β"))


def _layer_norm_law(input: Deg, normalized_shape: Any, weight: Any = None, bias: Any = None,
                    eps: float = 1e-5, cudnn_enable: Any = True) -> Claim:
    return _affine(_normalized(input, eps, "layer norm"), weight, bias)


def _native_layer_norm_law(input: Deg, normalized_shape: Any, weight: Any, bias: Any,
                           eps: float) -> Claim:
    return _layer_norm_law(input, normalized_shape, weight, bias, eps)


def _rms_norm_law(input: Deg, normalized_shape: Any, weight: Any = None,
                  eps: float | None = None) -> Claim:
    # eps=None means the dtype's machine epsilon: positive.
    return _affine(_normalized(input, 1e-6 if eps is None else eps, "RMS norm"), weight, None)


def _centred(eps: Any, scale: Any) -> Any:
    """The first entry of LayerNorm over (a, a − d) at input scale ``scale``."""
    return (scale * GAP / 2) / sympy.sqrt(scale**2 * GAP**2 / 4 + eps)


def _rms(eps: Any, scale: Any) -> Any:
    """The first entry of RMSNorm over (d, 0) at input scale ``scale``."""
    return scale * GAP / sympy.sqrt(scale**2 * GAP**2 / 2 + eps)


def _eps_below() -> str | None:
    return polynomially_close(_centred(EPS, T), 0, 1) or polynomially_close(
        _rms(EPS, T), 0, sympy.sqrt(2))


def _eps_above() -> str | None:
    # k < 0: the input scale is 1/t → 0; the output is c^k (z − μ)/√ε to leading order.
    return polynomially_close(_centred(EPS, 1 / T), -1, GAP / 2 / sympy.sqrt(EPS)) or \
        polynomially_close(_rms(EPS, 1 / T), -1, GAP / sympy.sqrt(EPS))


def _no_eps() -> str | None:
    return exact_identity(_centred(0, T), 0, _centred(0, 1)) or exact_identity(
        _rms(0, T), 0, _rms(0, 1))


NORMALIZATION_CASES = (
    INVARIANT,
    LemmaCase("eps below a growing variance", "(cᵏz − μ)/√(c²ᵏσ² + ε) = (z − μ)/σ + O(c^(−2k)) "
              "for k > 0: degree 0, asymptotic", _eps_below),
    LemmaCase("eps above a shrinking variance", "(cᵏz − μ)/√(c²ᵏσ² + ε) = cᵏ(z − μ)/√ε + "
              "O(c^(3k)) for k < 0: degree k, asymptotic", _eps_above),
    LemmaCase("no eps", "(cᵏz − μ)/√(c²ᵏσ²) = (z − μ)/σ: exact (Lemma 5)", _no_eps),
)


def _keep_law(x: Deg, *args: Any, **options: Any) -> Claim:
    return Claim("positively homogeneous", x, ("a sum, mean, max, norm or std of one degree",))


def _reductions() -> str | None:
    """Σ, mean, max, ‖·‖ and std of (cᵏa, cᵏb) are cᵏ times those of (a, b)."""
    maps = (lambda u, v: u + v, lambda u, v: (u + v) / 2, sympy.Max, sympy.Min,
            lambda u, v: sympy.sqrt(u**2 + v**2), lambda u, v: sympy.Abs(u - v) / 2)
    for a, b in ordered_pairs():
        for f in maps:
            reason = exact_identity(f(T * a, T * b), 1, f(a, b))
            if reason:
                return reason
    return None


def _difference_law(x: Deg, n: Any = 1, dim: Any = -1, prepend: Any = None,
                    append: Any = None) -> Claim:
    return total(x, *(t for t in (prepend, append) if t is not None), what="differences")


def _variance_law(x: Deg, *dims: Any, **options: Any) -> Claim:
    if x.value is None:
        return no_degree("an input without degree")
    return Claim("power", Deg(2 * x.value, x.grade), ("variance: degree 2k",))


def _variance() -> str | None:
    b = sympy.Symbol("b", real=True)
    return exact_identity(((T * A - T * b) / 2) ** 2, 2, ((A - b) / 2) ** 2)


LEMMAS = (
    Lemma("layer norm", "γ·(x − μ)/√(σ² + ε) + β: k → 0 (asymptotic with ε > 0, exact without), "
          "then γ adds its degree and β is a sum term: LayerNorm + Affine k → 1 (Table 1, Lemma 5)",
          (aten.layer_norm.default,), _layer_norm_law, NORMALIZATION_CASES,
          (Sample(3, lambda x, w, b: ((x, [4], w, b, 1e-12), {})),
           Sample(1, lambda x: ((x, [4], None, None, 0.0), {})))),
    Lemma("native layer norm", "the (output, mean, rstd) of a layer norm: every item gets the "
          "output's degree, by the layer norm lemma",
          (aten.native_layer_norm.default,), _native_layer_norm_law, NORMALIZATION_CASES,
          (Sample(3, lambda x, w, b: ((x, [4], w, b, 1e-5), {})),)),
    Lemma("RMS norm", "γ·x/√(mean(x²) + ε): like LayerNorm without centring (k → 0, then γ: → 1)",
          (aten.rms_norm.default,), _rms_norm_law, NORMALIZATION_CASES,
          (Sample(2, lambda x, w: ((x, [4], w, None), {})),
           Sample(1, lambda x: ((x, [4], None, 0.0), {})))),
    Lemma("reduction", "sums, means, max/min, norms and standard deviations of entries of one "
          "degree keep it (Σ cᵏzᵢ = cᵏ Σ zᵢ; max, ‖·‖, std are positively 1-homogeneous)",
          (aten.mean.dim, aten.mean.default, aten.sum.dim_IntList, aten.sum.default,
           aten.amax.default, aten.amin.default, aten.cumsum.default, aten.std.correction,
           aten.std.dim, aten.std.default, aten.linalg_vector_norm.default),
          _keep_law, (LemmaCase("positively homogeneous", "f(cᵏz) = cᵏ f(z)", _reductions),),
          (Sample(1, lambda x: ((x, [-1]), {})),)),
    Lemma("difference", "differences of neighbouring entries are sums of terms of x's degree "
          "(Sum rule); prepended or appended tensors join the sum",
          (aten.diff.default,), _difference_law, SUM_CASES,
          (Sample(1, lambda x: ((x,), {})), Sample(2, lambda x, p: ((x, 1, -1, p), {})))),
    Lemma("variance", "Var(cᵏz) = c²ᵏ Var(z): degree 2k, the input's grade",
          (aten.var.correction, aten.var.dim, aten.var.default), _variance_law,
          (LemmaCase("power", "Var(cᵏz) = c²ᵏ Var(z)", _variance),),
          (Sample(1, lambda x: ((x, [-1]), {})),)),
)
