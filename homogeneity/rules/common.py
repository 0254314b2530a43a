"""Building blocks shared by the rule families: constants, products, functions of an input."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import sympy

from homogeneity.degree import Degree, Grade, add_degrees, branch, lift, show, weakest

__all__ = ["as_degree", "first_undefined", "function_of", "is_zero", "product", "sum_of"]


def as_degree(value: Any) -> Degree:
    """A tensor argument's degree; numbers, ``None`` and other literals are constants."""
    if isinstance(value, Degree):
        return value
    return Degree.constant(f"literal {value!r}")


def is_zero(value: Any) -> bool:
    """Whether ``value`` is the literal 0 (a term that is homogeneous of every degree)."""
    return not isinstance(value, Degree | bool) and isinstance(value, int | float) and value == 0


def first_undefined(degrees: Iterable[Degree]) -> Degree | None:
    """The first degree whose grade is ``none`` in every case, if any."""
    for degree in degrees:
        if all(c.grade is Grade.NONE for c in degree.cases):
            return degree
    return None


def product(*factors: Any, what: str = "product") -> Degree:
    """Degrees add over products, grades take the weakest (Table 1's Product, Lemma 4)."""
    degrees = [as_degree(f) for f in factors]

    def single(*ds: Degree) -> Degree:
        grade = weakest(d.grade for d in ds)
        if grade is Grade.NONE:
            return Degree.none(next(d.reason for d in ds if d.grade is Grade.NONE))
        total = sympy.Add(*(d.value for d in ds))
        parts = " + ".join(show(d.value) for d in ds)
        return Degree.of(total, grade, f"{what}: degrees add ({parts})")

    return lift(single, *degrees)


def sum_of(*terms: Any, what: str = "sum") -> Degree:
    """Degree of a sum of terms; literal zeros are dropped (Table 1's Sum, Lemma 3)."""
    kept = [as_degree(t) for t in terms if not is_zero(t)]
    if not kept:
        return Degree.constant("sum of zeros")
    result = kept[0]
    for term in kept[1:]:
        result = add_degrees(result, term, what)
    return result


def function_of(x: Degree, name: str, *, limit: Literal["constant", "linear", "none"]) -> Degree:
    """An elementwise function g applied to a degree-k input.

    For k = 0 the input does not change with c, so neither does g of it: degree 0 with the
    input's grade. For k > 0 it depends on what g(cᵏz) tends to, exponentially fast:

    - ``"constant"``: g saturates (sigmoid, tanh, softmax, a step; Lemmas 6-8, Theorem 5):
      degree 0, approximate;
    - ``"linear"``: g approaches a positively 1-homogeneous function (GELU → ReLU,
      log-softmax → z − max z): degree k, approximate, or the input's grade if weaker (a
      lower-order term in cᵏz + b passes through the linear tail unchanged);
    - ``"none"``: anything else (exp, log, sin): no degree.

    For k < 0 the input shrinks towards g's Taylor expansion at 0, which no rule here tracks:
    no degree.
    """

    def single(d: Degree) -> Degree:
        (case,) = d.cases
        if case.grade is Grade.NONE:
            return d
        if limit == "constant":
            growing = Degree.of(0, Grade.APPROXIMATE,
                                f"{name} saturates: exponentially close to its limit")
        elif limit == "linear":
            # A lower-order term in the input survives g's linear tail: its grade carries over.
            growing = Degree.of(case.value, case.grade.weaker(Grade.APPROXIMATE),
                                f"{name} is positively homogeneous up to an exponentially small error")
        else:
            growing = Degree.none(f"{name} of an input of degree {show(case.value)} is not homogeneous")
        shrinking = Degree.none(f"{name} of a shrinking input (degree {show(case.value)} < 0)")
        return branch(case.value, Degree.of(0, case.grade, f"{name} of a scale-invariant input"),
                      growing, shrinking)

    return lift(single, x)
