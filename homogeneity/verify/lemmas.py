"""Check every registered rule against its proved lemma.

A target passes when its lemma's cases are proved (sympy, :mod:`homogeneity.lemmas`) and the
**registered** rule gives what the lemma's law gives on every input of a grid that covers each
case: input degrees −1, 0, 1, 2 (the signs k < 0, k = 0, k > 0 and unequal degrees) in each grade,
and inputs without a degree, through each of the lemma's ways of calling the op.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

from homogeneity.degree import Degree, Grade
from homogeneity.lemmas import LEMMAS, Deg, Lemma, case_unproved, lemma_for, lemma_unproved
from homogeneity.lemmas.base import Sample, fmt
from homogeneity.rules import RULES, target_name

__all__ = ["LemmaResult", "check_lemmas", "lemma_rows", "lemma_targets"]

_VALUES = (1, 2, 0, -1)  # growing inputs first: the most telling counterexample
_GRADES = (Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC)


@dataclass(frozen=True)
class LemmaResult:
    """Whether the rule of ``target`` is proved: its lemma holds and the rule follows it."""

    target: str
    lemma: str | None
    statement: str
    proved: bool
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "lemma": self.lemma, "statement": self.statement,
                "proved": self.proved, "reason": self.reason}


def _grid(arity: int) -> Iterable[tuple[Deg, ...]]:
    # Three inputs of every kind is 13³ calls; two grades still cover the grade cases there.
    grades = _GRADES if arity < 3 else (Grade.EXACT, Grade.ASYMPTOTIC)
    kinds = [Deg(Fraction(v), g) for v in _VALUES for g in grades] + [Deg(None, Grade.NONE)]
    return itertools.product(kinds, repeat=arity)


def _as_degree(d: Deg) -> Degree:
    if d.value is None:
        return Degree.none("an input without degree")
    return Degree.of(sympy.Rational(d.value.numerator, d.value.denominator), d.grade)


def _rule_result(degree: Any) -> Deg | str:
    if not isinstance(degree, Degree):
        return f"a {type(degree).__name__}, not a Degree"
    if not degree.single:
        return f"the piecewise degree {degree}"
    (case,) = degree.cases
    if case.grade is Grade.NONE:
        return Deg(None, Grade.NONE)
    value = sympy.nsimplify(case.value, rational=True)
    if not value.is_Rational:
        return f"the non-numeric degree {case.value}"
    return Deg(Fraction(int(value.p), int(value.q)), case.grade)


def _disagreement(rule: Any, lemma: Lemma, sample: Sample) -> str | None:
    """The first input on which the rule and the lemma's law differ, or whose case is unproved."""
    for inputs in _grid(sample.arity):
        args, kwargs = sample.build(*inputs)
        claim = lemma.law(*args, **kwargs)
        unproved = case_unproved(lemma, claim.case)
        if unproved:
            return unproved
        rule_args, rule_kwargs = sample.build(*map(_as_degree, inputs))
        try:
            got = _rule_result(rule(*rule_args, **rule_kwargs))
        except Exception as err:
            got = f"an error ({type(err).__name__}: {err})"
        if got != claim.out:
            shown = ", ".join(str(d) for d in inputs) or "no tensor input"
            return (f"for inputs {shown}: the registered rule gives "
                    f"{got if isinstance(got, str) else str(got)}, but the lemma proves "
                    f"{fmt(claim.out.value)} ({claim.out.grade}) (case {claim.case!r})")
    return None


def _check(target: Any) -> LemmaResult:
    name = target_name(target)
    lemma = lemma_for(target)
    if lemma is None:
        return LemmaResult(name, None, "", False, "no lemma covers this target")
    reason = lemma_unproved(lemma)
    rule = RULES.get(target)
    if reason is None and rule is None:
        reason = "no rule is registered for this target"
    for sample in lemma.samples if reason is None else ():
        reason = _disagreement(rule, lemma, sample)
        if reason:
            break
    return LemmaResult(name, lemma.name, lemma.statement, reason is None, reason or "")


def check_lemmas(targets: Iterable[Any] | None = None) -> dict[Any, LemmaResult]:
    """Prove the lemma of each target and check its registered rule against it.

    Args:
        targets: ops (``torch.ops.aten.tanh.default``…); default every target in the rule table
            and every target a lemma covers.

    Returns:
        Each target's :class:`LemmaResult`; ``proved`` is False, with the reason, for a target
        without a lemma, with an unproved case, or whose rule disagrees with its lemma.

    >>> import torch
    >>> from homogeneity.rules import register_rule
    >>> tanh = torch.ops.aten.tanh.default
    >>> check_lemmas([tanh])[tanh].proved
    True
    >>> correct = register_rule(tanh, RULES[tanh]) and RULES[tanh]
    >>> _ = register_rule(tanh, lambda x: x)       # wrongly: tanh keeps its input's degree
    >>> result = check_lemmas([tanh])[tanh]
    >>> result.proved, result.reason.split(":")[0]
    (False, 'for inputs 1 (exact)')
    >>> _ = register_rule(tanh, correct)
    """
    chosen = list(targets) if targets is not None else lemma_targets()
    return {target: _check(target) for target in chosen}


def lemma_targets() -> list[Any]:
    """Every target in the rule table, then every other target a lemma covers: what
    :func:`check_lemmas` checks by default (``normsat lemmas`` counts them).

    >>> len(lemma_targets()) == len(set(lemma_targets())) >= len(RULES)
    True
    """
    return list(dict.fromkeys([*RULES, *(t for lemma in LEMMAS.values() for t in lemma.targets)]))


def lemma_rows(results: dict[Any, LemmaResult]) -> list[tuple[str, str, str]]:
    """Rows ``(target, statement, proved or the reason)``, sorted by target."""
    return sorted((r.target, r.statement or "—", "proved" if r.proved else f"UNPROVED: {r.reason}")
                  for r in results.values())
