"""Lemmas for elementwise ops: sums, positively homogeneous maps, powers, saturating and
transcendental functions, comparisons, selection, extrema and clamps."""

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
    exponentially_close,
    function_claim,
    lower_term,
    ordered_pairs,
    total,
)
from homogeneity.lemmas.base import (
    NONE,
    Claim,
    Deg,
    Lemma,
    LemmaCase,
    Sample,
    as_deg,
    fmt,
    is_literal_zero,
    no_degree,
)
from homogeneity.lemmas.base import weakest as weakest_grade

__all__ = ["LEMMAS"]

aten = torch.ops.aten
A, B = sympy.symbols("a b", real=True, nonzero=True)
Z = sympy.Symbol("z", positive=True)



def _invariant_input() -> str | None:
    """g(c⁰z) = g(z): an input that does not change with c gives an output that does not."""
    return exact_identity(sympy.Function("g")(A), 0, sympy.Function("g")(A))


INVARIANT = LemmaCase("scale-invariant input", "g of a degree-0 input is degree 0, the input's grade",
                      _invariant_input)


def _sum_law(a: Any, b: Any, *, alpha: Any = 1) -> Claim:
    return total(a, 0 if alpha == 0 else b)


def _positive_law(x: Deg, *slope: Any) -> Claim:
    return Claim("positively homogeneous", x, ("g(cz) = c·g(z) for c > 0",))


def _positively_homogeneous() -> str | None:
    relu = sympy.Max(0, sympy.Symbol("u"))
    for z in (Z, -Z):  # both signs of the entry
        g = sympy.Lambda(sympy.Symbol("u"), relu)
        for f in (g, sympy.Lambda(sympy.Symbol("u"), sympy.Abs(sympy.Symbol("u"))),
                  sympy.Lambda(sympy.Symbol("u"), -sympy.Symbol("u")),
                  sympy.Lambda(sympy.Symbol("u"), sympy.Max(sympy.Symbol("u"),
                                                           sympy.Symbol("u") / 100))):
            reason = exact_identity(f(T * z), 1, f(z))
            if reason:
                return reason
    return None


def _power_lemma(name: str, target: Any, exponent: Fraction | None) -> Lemma:
    """zᵖ of a positive z: (cᵏz)ᵖ = c^(pk) zᵖ, the input's grade."""

    def law(x: Deg, *args: Any) -> Claim:
        p = Fraction(args[0]) if exponent is None else exponent
        if x.value is None:
            return no_degree("an input without degree")
        return Claim("power", Deg(p * x.value, x.grade), (f"exponent {fmt(p)}",))

    def proof() -> str | None:
        p = sympy.Symbol("p", real=True) if exponent is None else sympy.Rational(
            exponent.numerator, exponent.denominator)
        return exact_identity((T * Z) ** p, p, Z ** p)

    def build(x: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return ((x, 2), {}) if exponent is None else ((x,), {})

    return Lemma(name, "(cᵏz)ᵖ = c^(pk)·zᵖ for z > 0: degree p·k, the input's grade", (target,), law,
                 (LemmaCase("power", "(cᵏz)ᵖ = c^(pk)·zᵖ", proof),),
                 (Sample(1, build),))


def _function_lemma(name: str, targets: tuple[Any, ...], statement: str, limit: str,
                    growing: LemmaCase | None, extra: int = 0) -> Lemma:
    def law(*args: Any) -> Claim:
        x = next(a for a in args if isinstance(a, Deg))
        return function_claim(x, limit, name)  # type: ignore[arg-type]

    sample = Sample(1, lambda x: ((x, *([-1.0, 1.0][:extra])), {}))
    cases = (INVARIANT,) if growing is None else (INVARIANT, growing)
    return Lemma(name, statement, targets, law, cases, (sample,))


def _saturates() -> str | None:
    """σ, tanh, erf → their limits at ±∞ exponentially fast; a lower-order term b does not
    change that; sign and hardtanh reach theirs at a finite scale."""
    for g, top in ((sympy.tanh, 1), (sympy.erf, 1), (lambda u: 1 / (1 + sympy.exp(-u)), 1)):
        for shifted in (T * Z, T * Z + B):
            reason = exponentially_close(g(shifted), top, Z / 2)
            if reason:
                return reason
    s = sympy.Symbol("s", positive=True)  # past t = 1/z both reach their limit exactly
    for g in (sympy.sign, lambda u: sympy.Min(1, sympy.Max(-1, u))):
        if sympy.simplify(g((1 / Z + s) * Z)) != 1:
            return "sign/hardtanh do not reach 1 past t = 1/z"
    return None


def _comparison_law(*args: Any) -> Claim:
    degrees = [a for a in args if isinstance(a, Deg)]
    thresholds = [a for a in args if not isinstance(a, Deg)]
    if any(d.grade is Grade.NONE for d in degrees):
        return no_degree("a term without degree")
    grade = weakest_grade(d.grade for d in degrees)
    shown = ", ".join(fmt(d.value) for d in degrees)
    if all(d.value == 0 for d in degrees):
        return Claim("scale-invariant inputs", Deg(Fraction(0), grade), (f"input degrees {shown}",))
    if all(is_literal_zero(t) for t in thresholds) and len({d.value for d in degrees}) == 1:
        return Claim("one degree compared", Deg(Fraction(0), grade),
                     (f"input degrees {shown}, thresholds {thresholds or 'none'}",))
    return Claim("a growing input against a threshold", Deg(Fraction(0), Grade.APPROXIMATE),
                 (f"input degrees {shown}, thresholds {thresholds}",))


def _one_degree_compared() -> str | None:
    residual = sympy.simplify(sympy.sign(T * (A - B)) - sympy.sign(A - B))
    return None if residual == 0 else f"sign(t(a − b)) − sign(a − b) = {residual}"


def _threshold_settles() -> str | None:
    s, theta = sympy.Symbol("s", positive=True), sympy.Symbol("theta", real=True)
    past = sympy.simplify(sympy.Heaviside(((theta / Z + s) * Z) - theta))
    return None if past == 1 else "the step does not settle past t = θ/z"


def _where_law(condition: Any, a: Any, b: Any) -> Claim:
    mask = as_deg(condition)
    if mask.value != 0:
        return no_degree(f"mask degree {fmt(mask.value)}")
    branches = total(a, b, what="where() branches")
    if branches.out is NONE:
        return branches
    out = Deg(branches.out.value, weakest_grade([branches.out.grade, mask.grade]))
    return Claim(branches.case, out, (*branches.conditions, f"mask degree 0 ({mask.grade})"))


def _masked_fill_law(x: Any, mask: Any, value: Any) -> Claim:
    return _where_law(mask, value, x)


def _where_sum() -> str | None:
    m = sympy.Symbol("m", integer=True, nonnegative=True)
    return exact_identity(m * T * A + (1 - m) * T * B, 1, m * A + (1 - m) * B)


WHERE_CASES = (
    LemmaCase("terms of one degree", "where(m, cᵏa, cᵏb) = cᵏ where(m, a, b)", _where_sum),
    LemmaCase("a lower-degree term", "where(m, cᵏa, cʲb) = m·cᵏa + (1 − m)·cʲb: the Sum rule",
              lower_term),
    LemmaCase("where() branches of zeros", "zeros in both branches", lambda: None),
)


def _extremum_law(a: Any, b: Any) -> Claim:
    x, y = as_deg(a), as_deg(b)
    if Grade.NONE in (x.grade, y.grade):
        return no_degree("a term without degree")
    if x.value == y.value:
        return Claim("one degree", Deg(x.value, weakest_grade([x.grade, y.grade])),
                     (f"both of degree {fmt(x.value)}",))
    return no_degree(f"degrees {fmt(x.value)} and {fmt(y.value)}")


def _extremum_proof() -> str | None:
    for a, b in ordered_pairs():
        for f in (sympy.Max, sympy.Min):
            reason = exact_identity(f(T * a, T * b), 1, f(a, b))
            if reason:
                return reason
    return None


def _clamp_law(x: Deg, min: Any = None, max: Any = None) -> Claim:
    if is_literal_zero(min) and max is None:
        return Claim("ReLU", x, ("clamp(z, 0, ∞) = ReLU(z)",))
    return function_claim(x, "none", "clamp to fixed bounds")


LEMMAS = (
    Lemma("sum", "a ± b: equal degrees keep the degree (exact for exact terms); a lower-degree "
          "term leaves the higher degree, asymptotically (Table 1's Sum, Lemma 3)",
          (aten.add.Tensor, aten.add_.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar,
           aten.sub_.Tensor, aten.rsub.Scalar, aten.rsub.Tensor),
          _sum_law, SUM_CASES,
          (Sample(2, lambda a, b: ((a, b), {})), Sample(1, lambda a: ((a, 2.0), {})),
           Sample(1, lambda a: ((a, 0), {})), Sample(2, lambda a, b: ((a, b), {"alpha": 0})))),
    Lemma("positively homogeneous", "g(cz) = c·g(z) for c > 0 (−z, |z|, ReLU, leaky ReLU): degree "
          "and grade kept (Lemma 2)",
          (aten.neg.default, aten.abs.default, aten.relu.default, aten.relu_.default,
           aten.leaky_relu.default),
          _positive_law,
          (LemmaCase("positively homogeneous", "g(cz) = c·g(z)", _positively_homogeneous),),
          (Sample(1, lambda x: ((x,), {})),)),
    _power_lemma("power", aten.pow.Tensor_Scalar, None),
    _power_lemma("inverse square root", aten.rsqrt.default, Fraction(-1, 2)),
    _power_lemma("square root", aten.sqrt.default, Fraction(1, 2)),
    _power_lemma("reciprocal", aten.reciprocal.default, Fraction(-1)),
    _function_lemma("transcendental", (aten.exp.default, aten.log.default, aten.log1p.default,
                                       aten.sin.default, aten.cos.default, aten.pow.Scalar,
                                       aten.expm1.default),
                    "exp, log, sin, cos, bᶻ of a degree-0 input are degree 0; of any other, none",
                    "none", None),
    _function_lemma("saturating", (aten.sigmoid.default, aten.tanh.default, aten.erf.default,
                                   aten.sign.default, aten.hardtanh.default),
                    "σ, tanh, erf, sign, hardtanh of a growing input tend to constants with an "
                    "error below exp(−Ω(c)) (Lemmas 6 and 8, Theorem 5): degree 0, approximate",
                    "constant",
                    LemmaCase("growing input", "g(cᵏz + b) → g(±∞) with error O(exp(−cᵏ|z|/2))",
                              _saturates)),
    Lemma("comparison", "comparisons and boolean logic are steps: degree 0; of one degree (or "
          "against 0) exact in the inputs' grade, against a fixed threshold they settle",
          (aten.ge.Scalar, aten.gt.Scalar, aten.le.Scalar, aten.lt.Scalar, aten.eq.Scalar,
           aten.ne.Scalar, aten.ge.Tensor, aten.gt.Tensor, aten.le.Tensor, aten.lt.Tensor,
           aten.eq.Tensor, aten.ne.Tensor, aten.__and__.Tensor, aten.__or__.Tensor,
           aten.logical_and.default, aten.logical_or.default, aten.logical_not.default,
           aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.bitwise_not.default),
          _comparison_law,
          (LemmaCase("scale-invariant inputs", "steps of degree-0 inputs do not change",
                     _invariant_input),
           LemmaCase("one degree compared", "cᵏa > cᵏb ⟺ a > b", _one_degree_compared),
           LemmaCase("a growing input against a threshold", "1[cᵏz > θ] = 1[z > 0] once "
                     "cᵏ > θ/z", _threshold_settles),
           ),
          (Sample(2, lambda a, b: ((a, b), {})), Sample(1, lambda a: ((a, 0), {})),
           Sample(1, lambda a: ((a, 0.5), {})))),
    Lemma("where", "where(m, a, b) = m·a + (1 − m)·b for a 0/1 mask m of degree 0: the Sum rule "
          "over the branches, weakened by the mask's grade",
          (aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar),
          _where_law, WHERE_CASES,
          (Sample(3, lambda m, a, b: ((m, a, b), {})), Sample(2, lambda m, a: ((m, a, 0.0), {})))),
    Lemma("masked fill", "masked_fill(x, m, v) = where(m, v, x)",
          (aten.masked_fill.Scalar, aten.masked_fill.Tensor, aten.masked_fill_.Scalar),
          _masked_fill_law, WHERE_CASES,
          (Sample(2, lambda x, m: ((x, m, -1e9), {})), Sample(2, lambda x, m: ((x, m, 0), {})))),
    Lemma("extremum", "max(cᵏa, cᵏb) = cᵏ max(a, b) (and min): equal degrees kept; unequal, none",
          (aten.minimum.default, aten.maximum.default, aten.min.other, aten.max.other),
          _extremum_law,
          (LemmaCase("one degree", "max(cᵏa, cᵏb) = cᵏ max(a, b)", _extremum_proof),),
          (Sample(2, lambda a, b: ((a, b), {})),)),
    Lemma("clamp", "clamp(z, 0, ∞) is ReLU (degree kept); other fixed bounds keep only degree-0 "
          "inputs", (aten.clamp.default, aten.clamp_min.default), _clamp_law,
          (LemmaCase("ReLU", "max(cᵏz, 0) = cᵏ max(z, 0)", _positively_homogeneous),
           INVARIANT),
          (Sample(1, lambda x: ((x, 0), {})), Sample(1, lambda x: ((x, -1.0, 1.0), {})))),
)
