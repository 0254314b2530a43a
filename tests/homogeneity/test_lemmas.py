"""Every rule target has a proved lemma, and a rule registered against its lemma fails it."""

from __future__ import annotations

from typing import Any

import pytest
import sympy
import torch

from homogeneity.degree import Degree, Grade
from homogeneity.lemmas import LEMMAS, case_unproved, lemma_for
from homogeneity.lemmas.algebra import T, exact_identity, exponentially_close, polynomially_close
from homogeneity.lemmas.base import Claim, Deg, Lemma, LemmaCase
from homogeneity.rules import RULES, register_rule
from homogeneity.verify.lemmas import check_lemmas, lemma_rows

aten = torch.ops.aten
Z = sympy.Symbol("z", positive=True)


def test_every_rule_target_has_a_proved_lemma() -> None:
    results = check_lemmas()
    assert set(RULES) <= set(results)
    unproved = {str(t): r.reason for t, r in results.items() if not r.proved}
    assert unproved == {}
    assert all(r.lemma and r.statement for r in results.values())
    assert len(lemma_rows(results)) == len(results)


WRONG_RULES = {
    "tanh claimed 1-homogeneous": (aten.tanh.default, lambda x: x),
    "LayerNorm claimed exact": (aten.layer_norm.default,
                                lambda x, *a, **k: Degree.exact(1, "wrong")),
    "a linear map without the weight's degree": (aten.linear.default, lambda x, w, b=None: x),
    "a sum that ignores the weaker grade": (aten.add.Tensor, lambda a, b, alpha=1: a),
    "softmax claimed exact": (aten.softmax.int, lambda x, *a: Degree.exact(0, "wrong")),
    "a view that changes the degree": (aten.view.default, lambda x, *a: Degree.exact(1, "wrong")),
    "GELU claimed saturating": (aten.gelu.default, lambda x, **k: Degree.of(0, Grade.APPROXIMATE)),
}


@pytest.mark.parametrize("name", sorted(WRONG_RULES))
def test_a_rule_registered_wrongly_fails_its_lemma(name: str, swapped_rule: Any) -> None:
    target, wrong = WRONG_RULES[name]
    assert check_lemmas([target])[target].proved
    swapped_rule(target, wrong)
    result = check_lemmas([target])[target]
    assert not result.proved
    assert "the registered rule gives" in result.reason and "the lemma proves" in result.reason


def test_a_target_without_a_lemma_is_unproved(swapped_rule: Any) -> None:
    target = aten.hardswish.default
    register_rule(target, lambda x: x)
    try:
        result = check_lemmas([target])[target]
    finally:
        del RULES[target]
    assert (result.proved, result.lemma, result.reason) == (False, None, "no lemma covers this target")


def test_tanh_is_not_exactly_homogeneous_and_its_error_is_exponential() -> None:
    # The proof steps refute false statements: tanh(cz) ≠ c·tanh(z); a 1/t remainder is no
    # exponential error; an exponential one is.
    assert exact_identity(sympy.tanh(T * Z), 1, sympy.tanh(Z)) is not None
    assert exponentially_close(1 + 1 / T, 1, 1) is not None
    assert exponentially_close(sympy.tanh(T * Z), 1, Z / 2) is None
    assert polynomially_close(T**2 + T, 2, 1) is None
    assert polynomially_close(T**2 + T, 2, 2) is not None


def test_a_case_whose_proof_fails_or_raises_is_unproved() -> None:
    def raises() -> str | None:
        raise ValueError("sympy gave up")

    lemma = Lemma("test", "a false statement", (), lambda x: Claim("false", x),
                  (LemmaCase("false", "tanh(cz) = c·tanh(z)",
                             lambda: exact_identity(sympy.tanh(T * Z), 1, sympy.tanh(Z))),
                   LemmaCase("raises", "nothing", raises)))
    assert "is not proved" in (case_unproved(lemma, "false") or "")
    assert "ValueError: sympy gave up" in (case_unproved(lemma, "raises") or "")
    assert "has no case" in (case_unproved(lemma, "other") or "")


@pytest.mark.parametrize(("eps", "k", "expected"), [
    (1e-12, 1, Deg.of(1, "asymptotic")),   # γ·LN(x) + β: eps is lower order than the variance
    (0.0, 1, Deg.of(1, "exact")),          # without eps, LayerNorm is exactly scale-invariant
    (1e-12, 0, Deg.of(1, "exact")),        # a fixed input: γ and β make it exactly 1
    (1e-5, -1, Deg.of(1, "asymptotic")),   # eps dominates: c⁻¹(z − μ)/√ε·cγ + cβ, β leads
])
def test_layer_norm_law_against_hand_derivations(eps: float, k: int, expected: Deg) -> None:
    law = LEMMAS["layer norm"].law
    one = Deg.of(1, "exact")
    claim = law(Deg.of(k, "exact"), [4], one, one, eps)
    assert claim.out == expected


def test_structural_targets_share_one_lemma_and_each_is_listed() -> None:
    moved = LEMMAS["rearrangement"]
    assert aten.transpose.int in moved.targets and aten.view.default in moved.targets
    assert lemma_for(aten.transpose.int) is lemma_for(aten.view.default) is moved
