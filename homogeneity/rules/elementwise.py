"""Rules for elementwise ops: sums, positively homogeneous maps, powers, comparisons, selection."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from homogeneity.degree import Degree, Grade, lift, weakest
from homogeneity.rules.common import as_degree, first_undefined, function_of, is_zero, sum_of
from homogeneity.rules.registry import rule

__all__: list[str] = []

aten = torch.ops.aten


@rule(aten.add.Tensor, aten.add_.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar,
      aten.sub_.Tensor, aten.rsub.Scalar, aten.rsub.Tensor)
def add(a: Any, b: Any, *, alpha: Any = 1) -> Degree:
    """a ± b: Table 1's Sum (k, k) → k (Lemma 3); a lower-degree term makes it asymptotic.

    cᵏa + cʲb with j < k is cᵏ(a + c^(j−k) b): the leading order is k and the rest vanishes
    polynomially. A bias (degree 1) on a degree-k input is exact only for k = 1.
    """
    return sum_of(a, 0 if alpha == 0 else b, what="sum")


@rule(aten.neg.default, aten.abs.default, aten.relu.default, aten.relu_.default,
      aten.leaky_relu.default)
def positively_homogeneous(x: Degree, *slope: Any) -> Degree:
    """g(cz) = c·g(z) for c > 0 (−z, |z|, ReLU, leaky ReLU): degree and grade kept (Lemma 2)."""
    return x


@rule(aten.pow.Tensor_Scalar)
def pow_scalar(x: Degree, exponent: Any) -> Degree:
    """zᵖ for a fixed p: (cᵏz)ᵖ = c^(pk) zᵖ, so the degree is p·k with the input's grade."""
    return lift(lambda d: Degree.of(sympy.sympify(exponent) * d.value, d.grade,
                                    f"power {exponent}: degree times {exponent}"), x)


@rule(aten.rsqrt.default)
def rsqrt(x: Degree) -> Degree:
    """1/√z of a positive z: degree −k/2 (the denominator of T5's RMSNorm)."""
    return pow_scalar(x, sympy.Rational(-1, 2))


@rule(aten.sqrt.default)
def sqrt(x: Degree) -> Degree:
    """√z of a non-negative z: degree k/2."""
    return pow_scalar(x, sympy.Rational(1, 2))


@rule(aten.reciprocal.default)
def reciprocal(x: Degree) -> Degree:
    """1/z of a nonzero z: degree −k."""
    return pow_scalar(x, -1)


@rule(aten.exp.default, aten.log.default, aten.log1p.default, aten.sin.default, aten.cos.default,
      aten.pow.Scalar, aten.expm1.default)
def transcendental(*args: Any) -> Degree:
    """exp, log, sin, cos, bᶻ: of a scale-invariant input, scale-invariant; otherwise undefined.

    exp(cᵏz) is no power of c times exp(z), and neither is log(cᵏz) = k log c + log z.
    """
    x = next(a for a in args if isinstance(a, Degree))
    return function_of(x, "a transcendental function", limit="none")


@rule(aten.sigmoid.default, aten.tanh.default, aten.erf.default, aten.sign.default,
      aten.hardtanh.default)
def saturating(x: Degree, *bounds: Any) -> Degree:
    """σ, tanh, erf, sign: approximately 0-homogeneous for a homogeneous input of nonzero degree.

    |σ(cz) − σ(z)| ≤ Θ(exp(−|z|)) and |tanh(cz) − tanh(z)| ≤ exp(−Θ(|z|)) (Lemmas 6 and 8;
    Theorem 5 extends them to approximately homogeneous inputs). A lower-order term in the input
    shifts the exponent but not the exponential decay, so asymptotic inputs give approximate too.
    """
    return function_of(x, "saturating function", limit="constant")


@rule(aten.ge.Scalar, aten.gt.Scalar, aten.le.Scalar, aten.lt.Scalar, aten.eq.Scalar,
      aten.ne.Scalar, aten.ge.Tensor, aten.gt.Tensor, aten.le.Tensor, aten.lt.Tensor,
      aten.eq.Tensor, aten.ne.Tensor, aten.__and__.Tensor, aten.__or__.Tensor,
      aten.logical_and.default, aten.logical_or.default, aten.logical_not.default,
      aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.bitwise_not.default)
def comparison(*args: Any) -> Degree:
    """Comparisons and boolean logic: steps, so degree 0.

    Of scale-invariant inputs, or of terms of one degree k compared with each other or with 0
    (cᵏa > cᵏb ⟺ a > b), the result does not change: the inputs' grade. Against a fixed nonzero
    threshold a growing input's step settles once c is large (approximate, like Lemma 6).
    Attention masks built from input ids are constants this way.
    """
    degrees = [a for a in args if isinstance(a, Degree)]
    thresholds = [a for a in args if not isinstance(a, Degree)]
    undefined = first_undefined(degrees)
    if undefined is not None:
        return undefined
    return lift(lambda *ds: _step(ds, thresholds), *degrees)


def _step(degrees: tuple[Degree, ...], thresholds: list[Any]) -> Degree:
    grade = weakest(d.grade for d in degrees)
    if all(d.value == 0 for d in degrees):
        return Degree.of(0, grade, "comparison of scale-invariant inputs")
    if all(is_zero(t) for t in thresholds) and len({d.value for d in degrees}) == 1:
        return Degree.of(0, grade, "comparison of terms of one degree (or with 0) is scale-free")
    return Degree.of(0, Grade.APPROXIMATE, "comparison of a growing input settles (a step)")


@rule(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def where(condition: Degree, a: Any, b: Any) -> Degree:
    """where(m, a, b) = m·a + (1 − m)·b for a 0/1 mask m: the Sum rule over the two branches.

    The mask must be scale-invariant; its grade weakens the result's. A literal 0 branch is no term.
    """
    mask = as_degree(condition)
    if not (mask.single and mask.value == 0):
        return Degree.none("where() with a mask that changes with the scaled parameters")
    branches = sum_of(a, b, what="where() branches")
    return lift(lambda d: Degree.of(d.value, d.grade.weaker(mask.grade), d.reason), branches)


@rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor, aten.masked_fill_.Scalar)
def masked_fill(x: Degree, mask: Degree, value: Any) -> Degree:
    """masked_fill(x, m, v) = where(m, v, x)."""
    return where(mask, value, x)


@rule(aten.minimum.default, aten.maximum.default, aten.min.other, aten.max.other)
def elementwise_extremum(a: Any, b: Any) -> Degree:
    """min(a, b), max(a, b) are 1-homogeneous jointly: equal degrees are kept, unequal have none.

    min(cᵏa, cʲb) with j ≠ k picks a different power of c per entry: no single degree.
    """
    da, db = as_degree(a), as_degree(b)

    def single(x: Degree, y: Degree) -> Degree:
        grade = weakest([x.grade, y.grade])
        if grade is Grade.NONE:
            return x if x.grade is Grade.NONE else y
        if sympy.sympify(x.value - y.value).is_zero:
            return Degree.of(x.value, grade, "min/max of two terms of the same degree")
        return Degree.none(f"min/max of terms of degrees {x.value} and {y.value}")

    return lift(single, da, db)


@rule(aten.clamp.default, aten.clamp_min.default)
def clamp(x: Degree, min: Any = None, max: Any = None) -> Degree:
    """clamp(z, 0, ∞) is ReLU (degree kept); other bounds keep only scale-invariant inputs.

    A fixed bound is a constant: clamp(cᵏz, lo, hi) with k ≠ 0 mixes powers of c per entry.
    """
    if is_zero(min) and max is None:
        return x
    return function_of(x, "clamp to fixed bounds", limit="none")
