"""One proved lemma per rule family: statements, sympy proofs and laws over concrete degrees.

This package does not read the rule table. :mod:`homogeneity.verify.lemmas` checks the
registered rules against these lemmas; :mod:`homogeneity.checker` re-checks certificates with
the laws alone.
"""

from __future__ import annotations

import functools
from typing import Any

from homogeneity.lemmas import (
    activations,
    elementwise,
    normalization,
    products,
    routing,
    shape,
)
from homogeneity.lemmas.algebra import COMPOSITION_CASES
from homogeneity.lemmas.base import NO_DEGREE, Claim, Deg, Lemma, LemmaCase

__all__ = ["LEMMAS", "Claim", "Deg", "Lemma", "case_unproved", "lemma_for", "lemma_unproved"]

LEMMAS: dict[str, Lemma] = {
    lemma.name: lemma
    for family in (elementwise, activations, normalization, products, shape, routing)
    for lemma in family.LEMMAS
}
"""Every lemma by name."""

_BY_TARGET: dict[Any, Lemma] = {target: lemma for lemma in LEMMAS.values() for target in lemma.targets}


def lemma_for(target: Any) -> Lemma | None:
    """The lemma covering op ``target`` (``None`` if no lemma does).

    >>> import torch
    >>> lemma_for(torch.ops.aten.tanh.default).name
    'saturating'
    """
    return _BY_TARGET.get(target)


@functools.cache
def _proof_outcome(case: LemmaCase) -> str | None:
    try:
        return case.proof()
    except Exception as err:  # sympy could not decide: unproved, with the reason
        return f"the proof raised {type(err).__name__}: {err}"


def case_unproved(lemma: Lemma, case: str) -> str | None:
    """Why ``case`` of ``lemma`` is not proved, or ``None`` when every part of it is.

    A case of an op built of several steps reads ``"part; part; …"``: each part is a case of the
    lemma or of the Sum and Product lemmas it composes through. Proofs run once per process.
    """
    if case == NO_DEGREE:
        return None
    for part in case.split("; "):
        found = lemma.case(part) or COMPOSITION_CASES.get(part)
        if found is None:
            return f"lemma {lemma.name!r} has no case {part!r}"
        reason = _proof_outcome(found)
        if reason is not None:
            return f"case {part!r} of lemma {lemma.name!r} is not proved: {reason}"
    return None


def lemma_unproved(lemma: Lemma) -> str | None:
    """Why some case of ``lemma`` is not proved, or ``None`` when all are."""
    for case in lemma.cases:
        reason = case_unproved(lemma, case.name)
        if reason is not None:
            return reason
    return None
