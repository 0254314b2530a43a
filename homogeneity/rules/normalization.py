"""Rules for normalizations and reductions (Table 1's LayerNorm, Lemma 5; T5's RMSNorm)."""

from __future__ import annotations

from typing import Any

import torch

from homogeneity.degree import Degree, Grade, branch, lift, show
from homogeneity.rules.common import product, sum_of
from homogeneity.rules.elementwise import pow_scalar
from homogeneity.rules.registry import rule

__all__: list[str] = []

aten = torch.ops.aten


def _normalized(x: Degree, eps: Any, name: str) -> Degree:
    """x / ‖x‖-style normalization with ε in the denominator.

    For degree k > 0: (cᵏz − μ)/√(c²ᵏσ² + ε) = (z − μ)/√(σ² + ε·c^(−2k)): 0-homogeneous up to
    a term vanishing polynomially (asymptotic), exact when ε = 0 (Lemma 5). For k = 0 the
    input does not change with c, so neither does the output (the input's grade). For k < 0
    ε dominates the shrinking variance: the output is c^k(z − μ)/√ε to leading order.
    """

    def single(d: Degree) -> Degree:
        (case,) = d.cases
        if case.grade is Grade.NONE:
            return d
        asymptotic = case.grade.weaker(Grade.ASYMPTOTIC)
        if eps:
            grown = Degree.of(0, asymptotic,
                              f"{name}: eps={eps:g} is lower order than the input's variance")
            shrunk = Degree.of(case.value, asymptotic,
                               f"{name}: eps={eps:g} dominates the shrinking input's variance")
        else:
            grown = shrunk = Degree.of(0, case.grade,
                                       f"{name} without eps is scale-invariant (Lemma 5)")
        return branch(case.value, Degree.of(0, case.grade, f"{name} of a scale-invariant input"),
                      grown, shrunk)

    return lift(single, x)


def _affine(normalized: Degree, weight: Any, bias: Any) -> Degree:
    """γ·x + β after a normalization; the reason keeps the normalization's (e.g. eps)."""
    out = normalized if weight is None else product(normalized, weight, what="scale")
    out = out if bias is None else sum_of(out, bias, what="shift")
    cause = normalized.reason if normalized.single else "normalization"
    return lift(lambda d: Degree.of(d.value, d.grade, f"{cause}; then γ·x + β: degree {show(d.value)}"),
                out)


@rule(aten.layer_norm.default)
def layer_norm(
    input: Degree, normalized_shape: Any, weight: Any = None, bias: Any = None,
    eps: float = 1e-5, cudnn_enable: Any = True,
) -> Degree:
    """LayerNorm k → 0 and LayerNorm + Affine k → 1 (Table 1; Lemma 5).

    eps makes the normalization asymptotically (not exactly) 0-homogeneous, then γ (degree 1)
    scales and β (degree 1) shifts: γ·LN(x) + β is 1-homogeneous, asymptotically.
    """
    return _affine(_normalized(input, eps, "layer norm"), weight, bias)


@rule(aten.native_layer_norm.default)
def native_layer_norm(input: Degree, normalized_shape: Any, weight: Any, bias: Any,
                      eps: float) -> Degree:
    """The (output, mean, rstd) of a layer norm; every item gets the output's degree.

    Taking item 0 is the common case; mean and rstd have degrees k and −k, which a graph rarely uses.
    """
    return layer_norm(input, normalized_shape, weight, bias, eps)


@rule(aten.rms_norm.default)
def rms_norm(input: Degree, normalized_shape: Any, weight: Any = None,
             eps: float | None = None) -> Degree:
    """RMSNorm: x/√(mean(x²) + ε)·γ: like LayerNorm without centring (k → 0, then γ: → 1)."""
    return _affine(_normalized(input, eps if eps is not None else 1e-6, "RMS norm"), weight, None)


@rule(aten.mean.dim, aten.mean.default, aten.sum.dim_IntList, aten.sum.default,
      aten.amax.default, aten.amin.default, aten.cumsum.default, aten.std.correction,
      aten.std.dim, aten.std.default, aten.linalg_vector_norm.default)
def reduction(x: Degree, *dims: Any, **options: Any) -> Degree:
    """Sums, means, max/min, norms and standard deviations over entries of one degree keep it.

    Σ cᵏzᵢ = cᵏ Σ zᵢ (Sum rule, Lemma 3); max, ‖·‖ and Std are positively 1-homogeneous.
    """
    return x


@rule(aten.diff.default)
def difference(x: Degree, n: Any = 1, dim: Any = -1, prepend: Any = None,
               append: Any = None) -> Degree:
    """Differences of neighbouring entries are sums of terms of x's degree (Sum rule, Lemma 3);
    prepended or appended tensors join the sum."""
    return sum_of(x, *(t for t in (prepend, append) if t is not None), what="differences")


@rule(aten.var.correction, aten.var.dim, aten.var.default)
def variance(x: Degree, *dims: Any, **options: Any) -> Degree:
    """Var(cᵏz) = c²ᵏ Var(z): degree 2k."""
    return pow_scalar(x, 2)
