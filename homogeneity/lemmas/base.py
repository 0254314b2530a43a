"""What a lemma is: a statement, its cases with their proofs, and a law over concrete degrees.

A *law* is the lemma's claim written as a small function over concrete degrees (:class:`Deg`,
an exact fraction and a grade) and the op's literal arguments, mirroring the op's signature. It
returns a :class:`Claim`: the case that applies, the output degree and grade, and the side
conditions instantiated. Laws share no code with the rule table (``homogeneity.rules``): a
certificate checker built on them is a second code path, so a bug in a rule cannot hide itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from homogeneity.degree import Grade

__all__ = [
    "CONST",
    "NONE",
    "NO_DEGREE",
    "Claim",
    "Deg",
    "Lemma",
    "LemmaCase",
    "Sample",
    "as_deg",
    "fmt",
    "is_literal_zero",
    "no_degree",
    "weakest",
]


@dataclass(frozen=True)
class Deg:
    """A concrete degree: an exact fraction (``None`` for grade ``none``) and its grade."""

    value: Fraction | None
    grade: Grade

    @classmethod
    def of(cls, value: Any, grade: Grade | str) -> Deg:
        grade = Grade(grade)
        return cls(None if grade is Grade.NONE else Fraction(value), grade)

    def __str__(self) -> str:
        return "undefined (none)" if self.value is None else f"{fmt(self.value)} ({self.grade})"


CONST = Deg(Fraction(0), Grade.EXACT)
"""A literal or a tensor that does not depend on the scaled parameters."""

NONE = Deg(None, Grade.NONE)

NO_DEGREE = "no degree"
"""The case of every claim of no degree: it claims nothing, so it needs no proof."""


def fmt(value: Fraction | None) -> str:
    """``"1"``, ``"-1/2"``; ``"none"`` for no degree.

    >>> fmt(Fraction(-1, 2)), fmt(Fraction(3)), fmt(None)
    ('-1/2', '3', 'none')
    """
    return "none" if value is None else str(value)


def weakest(grades: Iterable[Grade]) -> Grade:
    """The weakest grade (``exact`` for none at all), by the order exact < approximate <
    asymptotic < none."""
    order = (Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC, Grade.NONE)
    return max(grades, key=order.index, default=Grade.EXACT)


def as_deg(value: Any) -> Deg:
    """A tensor argument's degree; any literal (number, ``None``, list of sizes) is a constant."""
    return value if isinstance(value, Deg) else CONST


def is_literal_zero(value: Any) -> bool:
    """Whether ``value`` is the number 0 (no term at all in a sum)."""
    return not isinstance(value, Deg | bool) and isinstance(value, int | float) and value == 0


@dataclass(frozen=True)
class Claim:
    """What a law says of one application: the case, the output degree, its side conditions."""

    case: str
    out: Deg
    conditions: tuple[str, ...] = ()


def no_degree(*conditions: str) -> Claim:
    """The claim of no degree (an input without one, or an op that mixes powers of c)."""
    return Claim(NO_DEGREE, NONE, conditions)


@dataclass(frozen=True)
class LemmaCase:
    """One case of a lemma: its statement and a sympy proof (returns ``None`` when it holds,
    else why not)."""

    name: str
    statement: str
    proof: Callable[[], str | None]


@dataclass(frozen=True)
class Sample:
    """A way to call an op: ``build(*degrees)`` gives ``(args, kwargs)`` with the tensor degrees
    placed where the op takes tensors; used to check the registered rule against the law."""

    arity: int
    build: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]


@dataclass(frozen=True)
class Lemma:
    """A proved statement about an op family, the law it justifies, and the targets it covers."""

    name: str
    statement: str
    targets: tuple[Any, ...]
    law: Callable[..., Claim]
    cases: tuple[LemmaCase, ...]
    samples: tuple[Sample, ...] = field(default=())

    def case(self, name: str) -> LemmaCase | None:
        return next((c for c in self.cases if c.name == name), None)
