"""Degrees of homogeneity: a sympy expression in the input degree, a grade, and a reason.

A tensor computed from the parameters θ is *k-homogeneous* when f(cθ) = cᵏ f(θ) for all c ≥ 1.
The project distinguishes how firmly that holds, from strongest to weakest:

- ``exact``: f(cθ) = cᵏ f(θ).
- ``approximate``: the error vanishes like exp(−Ω(‖θ‖)) (the paper's Definition 4).
- ``asymptotic``: cᵏ is only the leading order; the rest vanishes polynomially.
- ``none``: no degree.

A :class:`Degree` is piecewise: each :class:`Case` holds under a sympy condition on the symbolic
input degrees (e.g. a bias added to a degree-k input is exactly 1-homogeneous only when k = 1).
Whole networks have integer degrees and a single case.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any

import sympy

from homogeneity.errors import HomogeneityError

__all__ = [
    "Case",
    "Degree",
    "Grade",
    "K",
    "add_degrees",
    "branch",
    "compare",
    "lift",
    "show",
    "weakest",
]

K = sympy.Symbol("k", integer=True, nonnegative=True)
"""The default symbolic input degree of a component analysed on its own."""


class Grade(str, Enum):
    """How firmly a degree holds, from strongest (``EXACT``) to weakest (``NONE``).

    >>> Grade.EXACT.weaker(Grade.ASYMPTOTIC)
    <Grade.ASYMPTOTIC: 'asymptotic'>
    """

    EXACT = "exact"
    APPROXIMATE = "approximate"
    ASYMPTOTIC = "asymptotic"
    NONE = "none"

    @property
    def rank(self) -> int:
        """0 for the strongest grade, 3 for ``none``."""
        return _RANKS[self]

    def weaker(self, other: Grade) -> Grade:
        """The weaker of two grades (combining two values never strengthens a grade)."""
        return self if self.rank >= other.rank else other

    def __str__(self) -> str:
        return self.value


_RANKS = {Grade.EXACT: 0, Grade.APPROXIMATE: 1, Grade.ASYMPTOTIC: 2, Grade.NONE: 3}


def show(value: Any) -> str:
    """A degree as text; integers skip sympy's printer, which dominates the cost of reasons.

    >>> show(sympy.Integer(3)), show(K + 1)
    ('3', 'k + 1')
    """
    return str(int(value)) if getattr(value, "is_Integer", False) else str(value)


def weakest(grades: Iterable[Grade]) -> Grade:
    """The weakest of ``grades`` (``exact`` for none at all).

    >>> weakest([Grade.EXACT, Grade.APPROXIMATE])
    <Grade.APPROXIMATE: 'approximate'>
    """
    result = Grade.EXACT
    for grade in grades:
        result = result.weaker(grade)
    return result


@dataclass(frozen=True)
class Case:
    """One piece of a degree: ``value`` with ``grade`` wherever ``condition`` holds."""

    value: sympy.Expr
    grade: Grade
    reason: str = ""
    condition: Any = sympy.true


@dataclass(frozen=True)
class Degree:
    """The degree of homogeneity of a tensor in the scaled parameters.

    Build one with :meth:`exact`, :meth:`of`, :meth:`constant` or :meth:`none`.

    >>> Degree.exact(K + 1, "linear")
    Degree(k + 1, exact)
    >>> Degree.constant().value
    0
    """

    cases: tuple[Case, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, value: Any, grade: Grade | str, reason: str = "") -> Degree:
        """A single-case degree; ``none`` grades get the value ``nan``."""
        grade = Grade(grade)
        try:
            expr = sympy.nan if grade is Grade.NONE else sympy.sympify(value)
        except (sympy.SympifyError, TypeError, ValueError) as err:
            raise HomogeneityError(f"expected a degree (a number or an expression in k), got "
                                   f"{value!r:.60}") from err
        return cls((Case(expr, grade, reason),))

    @classmethod
    def exact(cls, value: Any, reason: str = "") -> Degree:
        """An exactly ``value``-homogeneous tensor."""
        return cls.of(value, Grade.EXACT, reason)

    @classmethod
    def constant(cls, reason: str = "constant (independent of the scaled parameters)") -> Degree:
        """A tensor independent of the scaled parameters: exactly 0-homogeneous."""
        return cls.of(0, Grade.EXACT, reason)

    @classmethod
    def none(cls, reason: str) -> Degree:
        """No degree, for the stated reason."""
        return cls.of(sympy.nan, Grade.NONE, reason)

    @classmethod
    def piecewise(cls, *pieces: tuple[Degree, Any]) -> Degree:
        """One case per ``(degree, condition)`` pair; impossible cases dropped, equal ones merged.

        >>> Degree.piecewise((Degree.exact(1), sympy.Eq(K, 1)), (Degree.exact(2), sympy.Eq(K, 3)))
        Degree(1 (exact) if Eq(k, 1) | 2 (exact) if Eq(k, 3))
        """
        return _build(
            replace(c, condition=sympy.And(condition, c.condition))
            for degree, condition in pieces
            for c in degree.cases
        )

    @property
    def single(self) -> bool:
        """Whether the degree has one unconditional case (always so for whole networks)."""
        return len(self.cases) == 1 and self.cases[0].condition is sympy.true

    @property
    def value(self) -> sympy.Expr:
        """The degree: the value shared by every case, or a ``Piecewise`` over the cases."""
        if len({c.value for c in self.cases}) == 1:
            return self.cases[0].value
        return sympy.Piecewise(*((c.value, c.condition) for c in self.cases))

    @cached_property
    def grade(self) -> Grade:
        """The weakest grade over the cases: the grade that holds whatever the input degrees."""
        return weakest(c.grade for c in self.cases)

    @property
    def reason(self) -> str:
        """Why: the reason of each case, prefixed by its condition when there are several."""
        if len(self.cases) == 1:
            return self.cases[0].reason
        return "; ".join(f"if {c.condition}: {c.reason}" for c in self.cases)

    def condition(self, grade: Grade | str) -> Any:
        """Where the degree holds with at least ``grade``, as a sympy condition.

        >>> bias = add_degrees(Degree.exact(K), Degree.exact(1))
        >>> bias.condition("exact")
        Eq(k, 1)
        """
        wanted = Grade(grade)
        return sympy.Or(*(c.condition for c in self.cases if c.grade.rank <= wanted.rank))

    def subs(self, mapping: dict[Any, Any]) -> Degree:
        """Substitute symbols (e.g. the input degree ``k``) in values and conditions."""
        cases = [
            Case(sympy.sympify(c.value).subs(mapping), c.grade, c.reason,
                 sympy.sympify(c.condition).subs(mapping))
            for c in self.cases
        ]
        return _build(cases)

    def with_reason(self, reason: str) -> Degree:
        """The same degree with ``reason`` on every case."""
        return Degree(tuple(replace(c, reason=reason) for c in self.cases))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: degree as text, grade, reason, and the cases when there are several."""
        data: dict[str, Any] = {
            "degree": None if self.grade is Grade.NONE and len(self.cases) == 1 else str(self.value),
            "grade": str(self.grade),
            "reason": self.reason,
        }
        if len(self.cases) > 1:
            data["cases"] = [
                {"condition": str(c.condition), "degree": str(c.value), "grade": str(c.grade),
                 "reason": c.reason}
                for c in self.cases
            ]
        return data

    @cached_property
    def text(self) -> str:
        """``"2 (asymptotic)"``; computed once, as reports print the same degrees many times."""
        if len(self.cases) == 1:
            case = self.cases[0]
            return "undefined (none)" if case.grade is Grade.NONE else f"{show(case.value)} ({case.grade})"
        return " | ".join(
            f"{'undefined' if c.grade is Grade.NONE else show(c.value)} ({c.grade}) if "
            f"{c.condition}" for c in self.cases)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        if len(self.cases) == 1:
            return f"Degree({self.cases[0].value}, {self.cases[0].grade})"
        return f"Degree({self})"


def _domain(symbol: Any) -> Any:
    """Degrees and depths are integers: positive ones (depths) or non-negative ones (degrees)."""
    return sympy.S.Naturals if symbol.is_positive else sympy.S.Naturals0


def _feasible(condition: Any) -> bool:
    """False when ``condition`` is unsatisfiable over its symbol's integer domain."""
    if condition is sympy.false:
        return False
    symbols: set[Any] = getattr(condition, "free_symbols", set())
    if len(symbols) != 1:
        return True
    try:
        region = condition.as_set().intersect(_domain(next(iter(symbols))))
    except (NotImplementedError, TypeError, ValueError):
        return True
    return region is not sympy.S.EmptySet


def _normalize(case: Case) -> Case:
    """Simplify a case's condition and, where it pins a symbol to one value, substitute it."""
    condition = case.condition
    if condition is sympy.true:
        return case
    symbols = condition.free_symbols
    if len(symbols) == 1:
        (symbol,) = symbols
        try:
            region = condition.as_set().intersect(_domain(symbol))
        except (NotImplementedError, TypeError, ValueError):
            region = None
        if region is not None and region.is_finite_set and len(points := list(region)) == 1:
            (point,) = points
            return Case(sympy.sympify(case.value).subs(symbol, point), case.grade, case.reason,
                        sympy.Eq(symbol, point))
    return case


def _build(cases: Iterable[Case]) -> Degree:
    """A degree from cases: drop infeasible ones, merge those with the same value and grade."""
    merged: dict[tuple[Any, Grade], Case] = {}
    for case in cases:
        if not _feasible(case.condition):
            continue
        case = _normalize(case)
        key = (case.value, case.grade)
        if key in merged:
            prior = merged[key]
            merged[key] = Case(prior.value, prior.grade, prior.reason,
                               sympy.Or(prior.condition, case.condition))
        else:
            merged[key] = case
    if len(merged) == 1:
        (only,) = merged.values()
        if _covers_everything(only.condition):
            return Degree((replace(only, condition=sympy.true),))
    return Degree(tuple(merged.values()))


def _covers_everything(condition: Any) -> bool:
    if condition is sympy.true:
        return True
    symbols = condition.free_symbols
    if len(symbols) != 1:
        return False
    try:
        return bool(_domain(next(iter(symbols))).is_subset(condition.as_set()))
    except (NotImplementedError, TypeError, ValueError):
        return False


def lift(rule: Callable[..., Degree], *degrees: Degree) -> Degree:
    """Apply a rule written for single-case degrees to piecewise ones, case by case.

    Whole networks have single-case degrees and take the direct path; symbolic components split
    into the combinations of their inputs' cases, with the conditions joined.
    """
    if all(d.single for d in degrees):
        return rule(*degrees)
    pieces: list[Case] = []
    for combo in itertools.product(*(d.cases for d in degrees)):
        condition = sympy.And(*(c.condition for c in combo))
        if not _feasible(condition):
            continue
        result = rule(*(Degree((replace(c, condition=sympy.true),)) for c in combo))
        pieces += [replace(r, condition=sympy.And(condition, r.condition)) for r in result.cases]
    return _build(pieces)


def compare(a: sympy.Expr, b: sympy.Expr) -> int | None:
    """-1, 0 or 1 when ``a`` is provably below, equal to or above ``b``; ``None`` if undecided.

    >>> compare(K + 2, sympy.Integer(1)), compare(K, sympy.Integer(1))
    (1, None)
    """
    diff = sympy.sympify(a - b)
    if diff.is_zero:
        return 0
    if diff.is_positive:
        return 1
    if diff.is_negative:
        return -1
    return None


def add_degrees(a: Degree, b: Degree, what: str = "sum") -> Degree:
    """The degree of a sum of an ``a``- and a ``b``-homogeneous term (Table 1's Sum, Lemma 3).

    Equal degrees keep the degree with the weaker grade. Different degrees keep the larger one as
    the leading order: the smaller term vanishes polynomially relative to it, so the grade becomes
    ``asymptotic``. Symbolic degrees give one case per ordering.

    >>> add_degrees(Degree.exact(2), Degree.exact(1))
    Degree(2, asymptotic)
    >>> add_degrees(Degree.exact(K), Degree.exact(1)).value
    Piecewise((1, Eq(k, 1)), (k, k > 1), (1, Eq(k, 0)))
    """
    return lift(lambda x, y: _add_single(x, y, what), a, b)


def _add_single(a: Degree, b: Degree, what: str) -> Degree:
    (ca,), (cb,) = a.cases, b.cases
    grade = ca.grade.weaker(cb.grade)
    if grade is Grade.NONE:
        return Degree.none(ca.reason if ca.grade is Grade.NONE else cb.reason)
    lower = grade.weaker(Grade.ASYMPTOTIC)

    def same() -> Case:
        return Case(ca.value, grade, f"{what} of two terms of degree {show(ca.value)}")

    def leading(high: Case, low: Case) -> Case:
        return Case(high.value, lower, f"{what}: the degree-{show(low.value)} term is lower "
                                       f"order than the degree-{show(high.value)} term")

    order = compare(ca.value, cb.value)
    if order is not None:
        return Degree(({0: same, 1: lambda: leading(ca, cb), -1: lambda: leading(cb, ca)}[order](),))
    return _build([
        replace(same(), condition=sympy.Eq(ca.value, cb.value)),
        replace(leading(ca, cb), condition=sympy.StrictGreaterThan(ca.value, cb.value)),
        replace(leading(cb, ca), condition=sympy.StrictLessThan(ca.value, cb.value)),
    ])


def branch(value: sympy.Expr, zero: Degree, positive: Degree, negative: Degree) -> Degree:
    """By the sign of a degree: ``zero``, ``positive`` or ``negative``; piecewise when undecided.

    >>> branch(K, Degree.exact(0), Degree.exact(1), Degree.none("shrinking")).value
    Piecewise((0, Eq(k, 0)), (1, k > 0))
    """
    order = compare(value, sympy.Integer(0))
    if order is not None:
        return {0: zero, 1: positive, -1: negative}[order]
    return Degree.piecewise((zero, sympy.Eq(value, 0)), (positive, value > 0),
                            (negative, value < 0))
