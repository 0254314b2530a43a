"""The two halves every lemma uses: composition laws over concrete degrees, and sympy proof steps.

Laws (Table 1's Sum and Product, and the three ways an elementwise function can treat a growing
input) take :class:`~homogeneity.lemmas.base.Deg` values. Proof steps work on a small symbolic
instance of an op in ``t = cᵏ``: for k > 0, t → ∞ as c → ∞, so a limit in t is the limit in c.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Literal

import sympy

from homogeneity.degree import Grade
from homogeneity.lemmas.base import (
    CONST,
    NONE,
    Claim,
    Deg,
    LemmaCase,
    as_deg,
    fmt,
    is_literal_zero,
    no_degree,
    weakest,
)

__all__ = [
    "COMPOSITION_CASES",
    "PRODUCT_CASES",
    "SUM_CASES",
    "T",
    "degrees_add",
    "equal_terms",
    "exact_identity",
    "exponentially_close",
    "function_claim",
    "lower_term",
    "ordered_pairs",
    "polynomially_close",
    "product",
    "then",
    "total",
]

T = sympy.Symbol("t", positive=True)
"""cᵏ for a positive scale c and input degree k: t → ∞ as c → ∞ when k > 0."""


def total(*terms: Any, what: str = "sum") -> Claim:
    """Table 1's Sum over terms (literal zeros are no term): the largest degree leads.

    Equal degrees keep the weakest grade; a lower-degree term vanishes polynomially relative to
    the leading one, which makes the sum asymptotic.

    >>> total(Deg.of(2, "exact"), Deg.of(1, "exact")).out.grade
    <Grade.ASYMPTOTIC: 'asymptotic'>
    """
    kept = [as_deg(t) for t in terms if not is_literal_zero(t)]
    if not kept:
        return Claim(f"{what} of zeros", CONST)
    if any(d.grade is Grade.NONE for d in kept):
        return no_degree("a term without degree")
    values = [d.value for d in kept if d.value is not None]
    top = max(values)
    grade = weakest(d.grade for d in kept)
    shown = ", ".join(fmt(v) for v in values)
    if len(set(values)) == 1:
        return Claim("terms of one degree", Deg(top, grade), (f"{what} of degrees {shown}",))
    return Claim("a lower-degree term", Deg(top, weakest([grade, Grade.ASYMPTOTIC])),
                 (f"{what} of degrees {shown}: degree {fmt(top)} leads",))


def product(*factors: Any, what: str = "product") -> Claim:
    """Table 1's Product: degrees add, grades take the weakest; a literal is a constant factor.

    >>> product(Deg.of(1, "exact"), Deg.of(1, "approximate")).out
    Deg(value=Fraction(2, 1), grade=<Grade.APPROXIMATE: 'approximate'>)
    """
    degrees = [as_deg(f) for f in factors]
    if any(d.grade is Grade.NONE for d in degrees):
        return no_degree("a factor without degree")
    values = [d.value for d in degrees if d.value is not None]
    return Claim("degrees add", Deg(sum(values, Fraction(0)), weakest(d.grade for d in degrees)),
                 (f"{what}: degrees {' + '.join(fmt(v) for v in values)}",))


def function_claim(x: Deg, limit: Literal["constant", "linear", "none"], name: str) -> Claim:
    """An elementwise g of a degree-k input: k = 0 keeps it; k > 0 by g's behaviour at infinity.

    ``constant``: g saturates exponentially (degree 0, approximate); ``linear``: g approaches a
    positively 1-homogeneous map exponentially (degree k, approximate or the input's weaker
    grade); ``none``: no degree. A shrinking input (k < 0) has no degree.
    """
    if x.value is None:
        return no_degree("an input without degree")
    if x.value == 0:
        return Claim("scale-invariant input", Deg(x.value, x.grade), (f"{name}: input degree 0",))
    if x.value < 0:
        return no_degree(f"{name}: input degree {fmt(x.value)} < 0")
    growing = (f"{name}: input degree {fmt(x.value)} > 0",)
    if limit == "constant":
        return Claim("growing input", Deg(Fraction(0), Grade.APPROXIMATE), growing)
    if limit == "linear":
        return Claim("growing input", Deg(x.value, weakest([x.grade, Grade.APPROXIMATE])), growing)
    return no_degree(*growing)


def exact_identity(scaled: Any, power: Any, plain: Any) -> str | None:
    """``scaled − t**power · plain`` simplifies to 0: exact homogeneity of that degree."""
    residual = sympy.simplify(sympy.expand(scaled - T**power * plain))
    return None if residual == 0 else f"f(cᵏx) − t^{power}·f(x) = {residual}, not 0"


def polynomially_close(scaled: Any, power: Any, lead: Any) -> str | None:
    """``scaled / t**power → lead ≠ 0`` with a remainder vanishing like a power of 1/t.

    The remainder r = scaled/t^power − lead must tend to 0 while r·t^a stays finite for some
    a > 0 (a = 1 or 2 is tried: the remainders of sums and of ε-terms).
    """
    ratio = sympy.simplify(scaled / T**power)
    got = sympy.limit(ratio, T, sympy.oo)
    if sympy.simplify(got - lead) != 0:
        return f"f/t^{power} tends to {got}, not {lead}"
    remainder = ratio - lead
    for order in (1, 2):
        rate = sympy.limit(remainder * T**order, T, sympy.oo)
        if rate.is_finite:
            return None
    return "the remainder does not vanish like a power of 1/t"


def exponentially_close(scaled: Any, lead: Any, rate: Any) -> str | None:
    """``scaled → lead`` with an error below exp(−rate·t) times a constant, for large t."""
    error = scaled - lead
    if sympy.limit(error, T, sympy.oo) != 0:
        return f"f does not tend to {lead}"
    bound = sympy.limit(error * sympy.exp(rate * T), T, sympy.oo)
    return None if bound == 0 else f"the error times exp({rate}·t) tends to {bound}, not 0"


def then(first: Claim, second: Claim) -> Claim:
    """Two steps of one op (a product, then a bias): the second's result, both cases and
    conditions; no degree if either step has none."""
    if NONE in (first.out, second.out):
        return no_degree(*first.conditions, *second.conditions)
    return Claim(f"{first.case}; {second.case}", second.out, first.conditions + second.conditions)


A, B = sympy.symbols("a b", real=True, nonzero=True)


def equal_terms() -> str | None:
    """cᵏa + cᵏb = cᵏ(a + b)."""
    return exact_identity(T * A + T * B, 1, A + B)


def lower_term() -> str | None:
    """cᵏa + cʲb = cᵏ(a + c^(j−k) b) for j < k, in t = c^(k−j) → ∞."""
    return polynomially_close(T * A + B, 1, A)


def ordered_pairs() -> tuple[tuple[Any, Any], ...]:
    """Both orders of two reals, (a, a − d) and (a − d, a) with d > 0: sympy then decides
    max and min, which it cannot for two free symbols."""
    a, d = sympy.Symbol("a", real=True), sympy.Symbol("d", positive=True)
    return ((a, a - d), (a - d, a))


def degrees_add() -> str | None:
    """(cᵏa)(cʲb) = c^(k+j) ab, and a lower-order term in a factor stays lower order."""
    return exact_identity(T * A * T**2 * B, 3, A * B) or polynomially_close(
        (T * A + B) * T * A, 2, A**2)


SUM_CASES = (
    LemmaCase("terms of one degree", "cᵏa + cᵏb = cᵏ(a + b): exact", equal_terms),
    LemmaCase("a lower-degree term", "cᵏa + cʲb (j < k) = cᵏ(a + O(c^(j−k))): asymptotic",
              lower_term),
    LemmaCase("sum of zeros", "0 + 0 is a constant", lambda: exact_identity(sympy.S.Zero, 0, 0)),
)
PRODUCT_CASES = (
    LemmaCase("degrees add", "(cᵏa)(cʲb) = c^(k+j)·ab, grades take the weakest", degrees_add),
)
COMPOSITION_CASES = {case.name: case for case in (*SUM_CASES, *PRODUCT_CASES)}
"""The Sum and Product cases, which ops built of several steps (a linear map's bias, an
affine normalization, attention) go through after their own case."""
