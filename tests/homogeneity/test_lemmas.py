"""Every rule target has a proved lemma, and a rule registered against its lemma fails it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
import sympy
import torch

from homogeneity.degree import Degree, Grade
from homogeneity.lemmas import (
    LEMMAS,
    activations,
    algebra,
    case_unproved,
    elementwise,
    lemma_for,
    lemma_unproved,
    normalization,
    products,
    routing,
    shape,
)
from homogeneity.lemmas.algebra import (
    SUM_CASES,
    T,
    exact_identity,
    exponentially_close,
    function_claim,
    polynomially_close,
    product,
    then,
    total,
)
from homogeneity.lemmas.base import (
    CONST,
    NO_DEGREE,
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
    weakest,
)
from homogeneity.rules import RULES, register_rule
from homogeneity.verify import lemmas as verify_lemmas
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
    assert result == verify_lemmas.LemmaResult("aten.hardswish.default", None, "", False,
                                               "no lemma covers this target")
    assert lemma_rows({target: result}) == [
        ("aten.hardswish.default", "—", "UNPROVED: no lemma covers this target")]


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


# ---------------------------------------------------------------------------------------------
# Each law against a hand derivation: the case it applies, the degree and grade that come out,
# and the side conditions a certificate records (the checker compares them word for word).


def _d(value: Any, grade: str = "exact") -> Deg:
    return Deg.of(value, grade)


NO = Deg(None, Grade.NONE)


def _no(*conditions: str) -> Claim:
    return Claim("no degree", NO, conditions)


ALGEBRA_LAWS = {
    # Table 1's Sum: equal degrees keep the weakest grade; a lower degree makes it asymptotic.
    "sum, one degree": (lambda: total(_d(1), _d(1, "approximate")),
                        Claim("terms of one degree", _d(1, "approximate"), ("sum of degrees 1, 1",))),
    "sum, lower term second": (lambda: total(_d(2), _d(1)), Claim(
        "a lower-degree term", _d(2, "asymptotic"), ("sum of degrees 2, 1: degree 2 leads",))),
    "sum, lower term first": (lambda: total(_d(-1, "approximate"), _d(1), what="bias"), Claim(
        "a lower-degree term", _d(1, "asymptotic"), ("bias of degrees -1, 1: degree 1 leads",))),
    "sum, a number is degree 0": (lambda: total(_d("-1/2"), 2.0), Claim(
        "a lower-degree term", _d(0, "asymptotic"), ("sum of degrees -1/2, 0: degree 0 leads",))),
    "sum, literal zero is no term": (lambda: total(0, _d(3, "asymptotic")), Claim(
        "terms of one degree", _d(3, "asymptotic"), ("sum of degrees 3",))),
    "sum of zeros": (lambda: total(0, 0.0, what="shift"), Claim("shift of zeros", _d(0), ())),
    "sum, a term without degree": (lambda: total(_d(1), NO), _no("a term without degree")),
    "sum, a term without degree first": (lambda: total(NO, _d(1)), _no("a term without degree")),
    # Table 1's Product: degrees add, the weakest grade; a number is a constant factor.
    "product": (lambda: product(_d(1), _d(1, "approximate")),
                Claim("degrees add", _d(2, "approximate"), ("product: degrees 1 + 1",))),
    "product with a number": (lambda: product(_d("-1/2", "asymptotic"), 0.5, _d(3), what="scores"), Claim(
        "degrees add", _d("5/2", "asymptotic"), ("scores: degrees -1/2 + 0 + 3",))),
    "product, a factor without degree": (lambda: product(_d(1), NO), _no("a factor without degree")),
    "product, a factor without degree first": (lambda: product(NO, _d(1)), _no("a factor without degree")),
    # An elementwise g: k = 0 keeps the input; k < 0 has no degree; k > 0 by g at infinity.
    "function of no degree": (lambda: function_claim(NO, "linear", "g"), _no("an input without degree")),
    "function of degree 0": (lambda: function_claim(_d(0, "approximate"), "none", "g"), Claim(
        "scale-invariant input", _d(0, "approximate"), ("g: input degree 0",))),
    "function of a shrinking input": (lambda: function_claim(_d("-1/2"), "linear", "g"),
                                      _no("g: input degree -1/2 < 0")),
    "saturating function": (lambda: function_claim(_d("1/2", "asymptotic"), "constant", "g"), Claim(
        "growing input", _d(0, "approximate"), ("g: input degree 1/2 > 0",))),
    "function linear at infinity": (lambda: function_claim(_d(2), "linear", "g"), Claim(
        "growing input", _d(2, "approximate"), ("g: input degree 2 > 0",))),
    "function linear at infinity, weaker input": (lambda: function_claim(_d(2, "asymptotic"), "linear", "g"),
                                                  Claim("growing input", _d(2, "asymptotic"),
                                                        ("g: input degree 2 > 0",))),
    "function without a limit": (lambda: function_claim(_d(1), "none", "g"), _no("g: input degree 1 > 0")),
    # Two steps of one op: both cases and conditions, the second's result.
    "then": (lambda: then(Claim("a", _d(1), ("x",)), Claim("b", _d(2, "asymptotic"), ("y", "z"))),
             Claim("a; b", _d(2, "asymptotic"), ("x", "y", "z"))),
    "then, first without degree": (lambda: then(_no("x"), Claim("b", _d(2), ("y",))), _no("x", "y")),
    "then, second without degree": (lambda: then(Claim("a", _d(1), ("x",)), _no("y")), _no("x", "y")),
}


@pytest.mark.parametrize("name", ALGEBRA_LAWS)
def test_sum_product_and_function_laws_against_table_1(name: str) -> None:
    law, expected = ALGEBRA_LAWS[name]
    assert law() == expected


def _law(lemma: str, *args: Any, **kwargs: Any) -> Any:
    return lambda: LEMMAS[lemma].law(*args, **kwargs)


_LN = ("layer norm: eps = 1e-12 has degree 0", "the input's variance has degree 2k = 2 > 0")
OP_LAWS = {
    # a ± b: alpha = 0 drops the second term.
    "add": (_law("sum", _d(1), _d(1)), Claim("terms of one degree", _d(1), ("sum of degrees 1, 1",))),
    "add, alpha 0": (_law("sum", _d(1), _d(2), alpha=0),
                     Claim("terms of one degree", _d(1), ("sum of degrees 1",))),
    "add, alpha 2": (_law("sum", _d(1), _d(2), alpha=2), Claim(
        "a lower-degree term", _d(2, "asymptotic"), ("sum of degrees 1, 2: degree 2 leads",))),
    "relu": (_law("positively homogeneous", _d("3/2", "approximate")), Claim(
        "positively homogeneous", _d("3/2", "approximate"), ("g(cz) = c·g(z) for c > 0",))),
    "leaky relu": (_law("positively homogeneous", _d(2), 0.01), Claim(
        "positively homogeneous", _d(2), ("g(cz) = c·g(z) for c > 0",))),
    # (cᵏz)ᵖ = c^(pk) zᵖ.
    "pow": (_law("power", _d("1/2", "asymptotic"), 3),
            Claim("power", _d("3/2", "asymptotic"), ("exponent 3",))),
    "pow of no degree": (_law("power", NO, 3), _no("an input without degree")),
    "rsqrt": (_law("inverse square root", _d(1, "approximate")),
              Claim("power", _d("-1/2", "approximate"), ("exponent -1/2",))),
    "sqrt": (_law("square root", _d(3)), Claim("power", _d("3/2"), ("exponent 1/2",))),
    "reciprocal": (_law("reciprocal", _d(-2)), Claim("power", _d(2), ("exponent -1",))),
    "tanh of a growing input": (_law("saturating", _d(1)), Claim(
        "growing input", _d(0, "approximate"), ("saturating: input degree 1 > 0",))),
    "hardtanh of a growing input": (_law("saturating", _d(2), -1.0, 1.0), Claim(
        "growing input", _d(0, "approximate"), ("saturating: input degree 2 > 0",))),
    "exp of a growing input": (_law("transcendental", _d(1)), _no("transcendental: input degree 1 > 0")),
    "exp of a fixed input": (_law("transcendental", _d(0, "asymptotic")), Claim(
        "scale-invariant input", _d(0, "asymptotic"), ("transcendental: input degree 0",))),
    "softmax": (_law("softmax", _d(2), -1), Claim(
        "growing input", _d(0, "approximate"), ("softmax: input degree 2 > 0",))),
    "logsumexp": (_law("log-softmax", _d(1, "asymptotic"), [-1], keepdim=True), Claim(
        "growing input", _d(1, "asymptotic"), ("log-softmax: input degree 1 > 0",))),
    "gelu": (_law("GELU/SiLU", _d(1), approximate="tanh"), Claim(
        "growing input", _d(1, "approximate"), ("GELU/SiLU: input degree 1 > 0",))),
    # Comparisons are steps: degree 0.
    "compare fixed inputs": (_law("comparison", _d(0), _d(0, "approximate")), Claim(
        "scale-invariant inputs", _d(0, "approximate"), ("input degrees 0, 0",))),
    "compare a fixed input to a threshold": (_law("comparison", _d(0), 0.5), Claim(
        "scale-invariant inputs", _d(0), ("input degrees 0",))),
    "compare one degree": (_law("comparison", _d(-1, "asymptotic"), _d(-1)), Claim(
        "one degree compared", _d(0, "asymptotic"), ("input degrees -1, -1, thresholds none",))),
    "compare against 0": (_law("comparison", _d(1), 0), Claim(
        "one degree compared", _d(0), ("input degrees 1, thresholds [0]",))),
    "compare against a threshold": (_law("comparison", _d(1), 0.5), Claim(
        "a growing input against a threshold", _d(0, "approximate"),
        ("input degrees 1, thresholds [0.5]",))),
    "compare unequal degrees": (_law("comparison", _d(1), _d(2)), Claim(
        "a growing input against a threshold", _d(0, "approximate"),
        ("input degrees 1, 2, thresholds []",))),
    "compare no degree": (_law("comparison", _d(1), NO), _no("a term without degree")),
    # where(m, a, b) = m·a + (1 − m)·b, the mask's grade.
    "where, one degree": (_law("where", _d(0), _d(1), _d(1)), Claim(
        "terms of one degree", _d(1), ("where() branches of degrees 1, 1", "mask degree 0 (exact)"))),
    "where, approximate mask": (_law("where", _d(0, "approximate"), _d(1), _d(1)), Claim(
        "terms of one degree", _d(1, "approximate"),
        ("where() branches of degrees 1, 1", "mask degree 0 (approximate)"))),
    "where, a lower branch": (_law("where", _d(0, "approximate"), _d(2), _d(1)), Claim(
        "a lower-degree term", _d(2, "asymptotic"),
        ("where() branches of degrees 2, 1: degree 2 leads", "mask degree 0 (approximate)"))),
    "where of zeros": (_law("where", _d(0), 0, 0.0), Claim(
        "where() branches of zeros", _d(0), ("mask degree 0 (exact)",))),
    "where, a growing mask": (_law("where", _d(1), _d(1), _d(1)), _no("mask degree 1")),
    "where, a mask without degree": (_law("where", NO, _d(1), _d(1)), _no("mask degree none")),
    "where, a branch without degree": (_law("where", _d(0), _d(1), NO), _no("a term without degree")),
    "masked fill": (_law("masked fill", _d(2), _d(0, "asymptotic"), -1e9), Claim(
        "a lower-degree term", _d(2, "asymptotic"),
        ("where() branches of degrees 0, 2: degree 2 leads", "mask degree 0 (asymptotic)"))),
    "masked fill with a tensor": (_law("masked fill", _d(1), _d(0), _d(2)), Claim(
        "a lower-degree term", _d(2, "asymptotic"),
        ("where() branches of degrees 2, 1: degree 2 leads", "mask degree 0 (exact)"))),
    # max(cᵏa, cᵏb) = cᵏ max(a, b).
    "maximum": (_law("extremum", _d(1), _d(1, "approximate")), Claim(
        "one degree", _d(1, "approximate"), ("both of degree 1",))),
    "maximum with a number": (_law("extremum", _d(0, "asymptotic"), 0.5), Claim(
        "one degree", _d(0, "asymptotic"), ("both of degree 0",))),
    "maximum, unequal degrees": (_law("extremum", _d(1), _d(2)), _no("degrees 1 and 2")),
    "maximum, no degree": (_law("extremum", NO, _d(1)), _no("a term without degree")),
    "maximum, no degree second": (_law("extremum", _d(1), NO), _no("a term without degree")),
    "clamp at 0": (_law("clamp", _d(2, "approximate"), 0), Claim(
        "ReLU", _d(2, "approximate"), ("clamp(z, 0, ∞) = ReLU(z)",))),
    "clamp to bounds": (_law("clamp", _d(1), -1.0, 1.0), _no("clamp to fixed bounds: input degree 1 > 0")),
    "clamp at 0 from above": (_law("clamp", _d(1), 0, 1.0),
                              _no("clamp to fixed bounds: input degree 1 > 0")),
    "clamp a fixed input": (_law("clamp", _d(0, "approximate"), None, 1.0), Claim(
        "scale-invariant input", _d(0, "approximate"), ("clamp to fixed bounds: input degree 0",))),
    # Normalization (Lemma 5), then γ (Product) and β (Sum).
    "layer norm, affine": (_law("layer norm", _d(1), [4], _d(1), _d(1), 1e-12), Claim(
        "eps below a growing variance; degrees add; terms of one degree", _d(1, "asymptotic"),
        (*_LN, "scale γ: degrees 0 + 1", "shift β of degrees 1, 1"))),
    "layer norm, default eps": (_law("layer norm", _d(1, "approximate"), [4]), Claim(
        "eps below a growing variance", _d(0, "asymptotic"),
        ("layer norm: eps = 1e-05 has degree 0", "the input's variance has degree 2k = 2 > 0"))),
    "layer norm, no eps": (_law("layer norm", _d(1, "approximate"), [4], None, None, 0.0), Claim(
        "no eps", _d(0, "approximate"),
        ("layer norm: eps = 0.0", "the input's variance has degree 2k = 2"))),
    "layer norm, shrinking input": (_law("layer norm", _d(-1), [4], None, None, 1e-5), Claim(
        "eps above a shrinking variance", _d(-1, "asymptotic"),
        ("layer norm: eps = 1e-05 has degree 0", "the input's variance has degree 2k = -2 < 0"))),
    "layer norm, fixed input, weight": (_law("layer norm", _d(0, "approximate"), [4], _d(1)), Claim(
        "scale-invariant input; degrees add", _d(1, "approximate"),
        ("layer norm: input degree 0", "scale γ: degrees 0 + 1"))),
    "layer norm, fixed input, bias": (_law("layer norm", _d(0), [4], None, _d(1, "approximate")), Claim(
        "scale-invariant input; a lower-degree term", _d(1, "asymptotic"),
        ("layer norm: input degree 0", "shift β of degrees 0, 1: degree 1 leads"))),
    "layer norm, no degree": (_law("layer norm", NO, [4]), _no("an input without degree")),
    "native layer norm": (_law("native layer norm", _d(2), [4], _d(1), _d(0), 1e-12), Claim(
        "eps below a growing variance; degrees add; a lower-degree term", _d(1, "asymptotic"),
        ("layer norm: eps = 1e-12 has degree 0", "the input's variance has degree 2k = 4 > 0",
         "scale γ: degrees 0 + 1", "shift β of degrees 1, 0: degree 1 leads"))),
    "rms norm, default eps": (_law("RMS norm", _d(1), [4], _d(1)), Claim(
        "eps below a growing variance; degrees add", _d(1, "asymptotic"),
        ("RMS norm: eps = 1e-06 has degree 0", "the input's variance has degree 2k = 2 > 0",
         "scale γ: degrees 0 + 1"))),
    "rms norm, no eps": (_law("RMS norm", _d("1/2"), [4], None, 0.0), Claim(
        "no eps", _d(0), ("RMS norm: eps = 0.0", "the input's variance has degree 2k = 1"))),
    "rms norm, eps given": (_law("RMS norm", _d(-1), [4], None, 1e-3), Claim(
        "eps above a shrinking variance", _d(-1, "asymptotic"),
        ("RMS norm: eps = 0.001 has degree 0", "the input's variance has degree 2k = -2 < 0"))),
    "mean": (_law("reduction", _d(2, "approximate"), [-1], keepdim=True), Claim(
        "positively homogeneous", _d(2, "approximate"), ("a sum, mean, max, norm or std of one degree",))),
    "diff": (_law("difference", _d(1)), Claim("terms of one degree", _d(1), ("differences of degrees 1",))),
    "diff, prepended": (_law("difference", _d(1), 1, -1, _d(0)), Claim(
        "a lower-degree term", _d(1, "asymptotic"), ("differences of degrees 1, 0: degree 1 leads",))),
    "diff, appended": (_law("difference", _d(1), 1, -1, None, _d(2)), Claim(
        "a lower-degree term", _d(2, "asymptotic"), ("differences of degrees 1, 2: degree 2 leads",))),
    "var": (_law("variance", _d("1/2", "approximate"), [-1]), Claim(
        "power", _d(1, "approximate"), ("variance: degree 2k",))),
    "var of no degree": (_law("variance", NO, [-1]), _no("an input without degree")),
    # Products.
    "linear": (_law("linear", _d(1), _d(1)), Claim("degrees add", _d(2), ("linear map: degrees 1 + 1",))),
    "linear with bias": (_law("linear", _d(1), _d(1), _d(1)), Claim(
        "degrees add; a lower-degree term", _d(2, "asymptotic"),
        ("linear map: degrees 1 + 1", "bias of degrees 2, 1: degree 2 leads"))),
    "addmm": (_law("addmm", _d(1), _d(0), _d(1, "approximate")), Claim(
        "degrees add; terms of one degree", _d(1, "approximate"),
        ("matrix product: degrees 0 + 1", "bias of degrees 1, 1"))),
    "addmm, beta 0": (_law("addmm", NO, _d(1), _d(1), beta=0, alpha=2), Claim(
        "degrees add", _d(2), ("matrix product: degrees 1 + 1",))),
    "addmm, beta 2": (_law("addmm", _d(0), _d(1), _d(1), beta=2), Claim(
        "degrees add; a lower-degree term", _d(2, "asymptotic"),
        ("matrix product: degrees 1 + 1", "bias of degrees 2, 0: degree 2 leads"))),
    "mm": (_law("matrix product", _d(1), _d(2, "asymptotic")), Claim(
        "degrees add", _d(3, "asymptotic"), ("product: degrees 1 + 2",))),
    "einsum": (_law("einsum", "ij,jk->ik", [_d(1), _d("1/2")]), Claim(
        "degrees add", _d("3/2"), ("einsum 'ij,jk->ik': degrees 1 + 1/2",))),
    "div": (_law("division", _d(2), _d(1, "approximate")), Claim(
        "degrees subtract", _d(1, "approximate"), ("quotient: degrees 2 − 1",))),
    "div of a number": (_law("division", 8.0, _d(1, "asymptotic")), Claim(
        "degrees subtract", _d(-1, "asymptotic"), ("quotient: degrees 0 − 1",))),
    "div, no degree": (_law("division", NO, _d(1)), _no("a term without degree")),
    "div, no degree second": (_law("division", _d(1), NO), _no("a term without degree")),
    "floor divide fixed": (_law("rounding division", _d(0), _d(0, "approximate"), rounding_mode="floor"),
                           Claim("scale-invariant input", _d(0, "approximate"),
                                 ("both operands of degree 0",))),
    "floor divide by a number": (_law("rounding division", _d(0, "asymptotic"), 3), Claim(
        "scale-invariant input", _d(0, "asymptotic"), ("both operands of degree 0",))),
    "floor divide growing": (_law("rounding division", _d(1), _d(0)), _no("operand degrees 1 and 0")),
    "floor divide by growing": (_law("rounding division", _d(0), _d(1)), _no("operand degrees 0 and 1")),
    "floor divide, no degree": (_law("rounding division", _d(0), NO), _no("a term without degree")),
    "floor divide, no degree first": (_law("rounding division", NO, _d(0)), _no("a term without degree")),
    "embedding": (_law("embedding", _d(1, "approximate"), _d(0)), Claim(
        "fixed indices", _d(1, "approximate"), ("indices of degree 0 (exact)",))),
    "embedding, literal indices": (_law("embedding", _d(1), [0, 1], -1), Claim(
        "fixed indices", _d(1), ("indices of degree 0 (exact)",))),
    "embedding, approximate indices": (_law("embedding", _d(1), _d(0, "approximate")),
                                       _no("indices of degree 0 (approximate)")),
    "embedding, growing indices": (_law("embedding", _d(1), _d(1)), _no("indices of degree 1 (exact)")),
    "embedding, a table without degree": (_law("embedding", NO, _d(0)), _no("a table without degree")),
    # softmax(QKᵀ + M)·V: a mask (or none, a constant) is a term of the scores.
    "attention": (_law("attention", _d(1), _d(1), _d(1)), Claim(
        "degrees add; a lower-degree term; growing input; degrees add", _d(1, "approximate"),
        ("scores: degrees 1 + 1", "masked scores of degrees 2, 0: degree 2 leads",
         "softmax: input degree 2 > 0", "weights · values: degrees 0 + 1"))),
    "attention, fixed scores": (_law("attention", _d(0), _d(0), _d(1, "asymptotic")), Claim(
        "degrees add; terms of one degree; scale-invariant input; degrees add", _d(1, "asymptotic"),
        ("scores: degrees 0 + 0", "masked scores of degrees 0, 0", "softmax: input degree 0",
         "weights · values: degrees 0 + 1"))),
    "attention, a growing mask": (_law("attention", _d(0), _d(0), _d(1), _d(1), 0.0, True), Claim(
        "degrees add; a lower-degree term; growing input; degrees add", _d(1, "approximate"),
        ("scores: degrees 0 + 0", "masked scores of degrees 0, 1: degree 1 leads",
         "softmax: input degree 1 > 0", "weights · values: degrees 0 + 1"))),
    "attention, mask by name": (_law("attention", _d(-1), _d(1), _d(2), attn_mask=_d(0, "approximate")),
                                Claim("degrees add; terms of one degree; scale-invariant input; "
                                      "degrees add", _d(2, "approximate"),
                                      ("scores: degrees -1 + 1", "masked scores of degrees 0, 0",
                                       "softmax: input degree 0", "weights · values: degrees 0 + 2"))),
    "attention, values without degree": (_law("attention", _d(1), _d(1), NO), _no("a term without degree")),
    "attention, mask without degree": (_law("attention", _d(1), _d(1), _d(1), NO),
                                       _no("a term without degree")),
    # Routers.
    "topk": (_law("top_k", _d(0, "approximate"), 2), Claim(
        "order", _d(0, "approximate"), ("the top-k set has no tie",))),
    "topk growing": (_law("top_k", _d(-1), 2), _no(
        "values of nonzero degree and positions of degree 0 in one node")),
    "topk no degree": (_law("top_k", NO, 2), _no("an input without degree")),
    "bincount": (_law("counting", _d(0, "approximate")), Claim(
        "order", _d(0, "approximate"), ("positions of degree 0",))),
    "bincount weighted": (_law("counting", _d(0, "approximate"), _d(2)), Claim(
        "terms of one degree", _d(2, "approximate"),
        ("weights summed at each position of degrees 2", "positions of degree 0 (approximate)"))),
    "bincount weights by name": (_law("counting", _d(0), None, weights=_d(1, "asymptotic")), Claim(
        "terms of one degree", _d(1, "asymptotic"),
        ("weights summed at each position of degrees 1", "positions of degree 0 (exact)"))),
    "bincount weights without degree": (_law("counting", _d(0), NO), _no("a term without degree")),
    "bincount growing positions": (_law("counting", _d("1/2")), _no("positions of degree 1/2")),
    "bincount positions without degree": (_law("counting", NO), _no("positions without degree")),
    "scatter add": (_law("scattering", _d(1), 0, _d(0, "approximate"), _d(1)), Claim(
        "terms of one degree", _d(1, "approximate"),
        ("scattered entries of degrees 1, 1", "positions of degree 0 (approximate)"))),
    "scatter a value": (_law("scattering", _d(1), 0, _d(0), 0), Claim(
        "terms of one degree", _d(1), ("scattered entries of degrees 1", "positions of degree 0 (exact)"))),
    "index add, alpha 0": (_law("scattering", _d(2), 0, _d(0), _d(1), alpha=0), Claim(
        "terms of one degree", _d(2), ("scattered entries of degrees 2", "positions of degree 0 (exact)"))),
    "index add, alpha 2": (_law("scattering", _d(2), 0, _d(0), _d(1), alpha=2), Claim(
        "a lower-degree term", _d(2, "asymptotic"),
        ("scattered entries of degrees 2, 1: degree 2 leads", "positions of degree 0 (exact)"))),
    "scatter, growing positions": (_law("scattering", _d(1), 0, _d(1), _d(1)), _no("positions of degree 1")),
    "scatter, source without degree": (_law("scattering", _d(1), 0, _d(0), NO), _no("a term without degree")),
    # Moving entries.
    "view": (_law("rearrangement", _d(1, "asymptotic"), [2, 3]),
             Claim("moves entries", _d(1, "asymptotic"), ())),
    "view of no degree": (_law("rearrangement", NO), _no("an input without degree")),
    "getitem of a number": (_law("rearrangement", 3, 0), _no("an input without degree")),
    "index": (_law("indexing", _d(1), [None, _d(0)]), Claim("moves entries", _d(1), ())),
    "index, approximate indices": (_law("indexing", _d(1), [_d(0, "approximate"), [None]]), Claim(
        "moves entries", _d(1, "approximate"), ("integer indices of degree 0 are constant from some c on",))),
    "gather, index by name": (_law("indexing", _d(2, "approximate"), 1, index=_d(0, "asymptotic")), Claim(
        "moves entries", _d(2, "asymptotic"), ("integer indices of degree 0 are constant from some c on",))),
    "index, weaker input": (_law("indexing", _d(2, "asymptotic"), [_d(0, "approximate")]), Claim(
        "moves entries", _d(2, "asymptotic"), ("integer indices of degree 0 are constant from some c on",))),
    "index, growing indices": (_law("indexing", _d(1), [_d(0), _d(1)]), _no("indices of degree 1 (exact)")),
    "index, indices without degree": (_law("indexing", _d(1), [NO]), _no("indices of degree none (none)")),
    "index of no degree": (_law("indexing", NO, [_d(0, "approximate")]), _no("an input without degree")),
    "argmax": (_law("positions", _d(2, "approximate"), -1), Claim(
        "positions", _d(0, "approximate"), ("positions are invariant under c > 0",))),
    "argmax of no degree": (_law("positions", NO), _no("an input without degree")),
    "cat": (_law("concatenation", [_d(1), _d(2)], 0), Claim(
        "a lower-degree term", _d(2, "asymptotic"), ("concatenation of degrees 1, 2: degree 2 leads",))),
    "pad with zeros": (_law("pad", _d(1), [1, 1]), Claim("moves entries", _d(1), ())),
    "pad with 0.0": (_law("pad", _d(1), [1, 1], "constant", 0.0), Claim("moves entries", _d(1), ())),
    "pad, value None": (_law("pad", _d(1), [1, 1], "constant", None), Claim("moves entries", _d(1), ())),
    "pad with a constant": (_law("pad", _d(1), [1, 1], "constant", 2.0), Claim(
        "a lower-degree term", _d(1, "asymptotic"), ("padding of degrees 1, 0: degree 1 leads",))),
    "pad a fixed input": (_law("pad", _d(0), [1, 1], 2.0), Claim(
        "terms of one degree", _d(0), ("padding of degrees 0, 0",))),
    "arange": (_law("constant", 4, dtype=None), Claim("reads no parameter", _d(0), ())),
}


@pytest.mark.parametrize("name", OP_LAWS)
def test_each_law_against_its_hand_derivation(name: str) -> None:
    law, expected = OP_LAWS[name]
    assert law() == expected


def test_degrees_print_and_compare_as_exact_fractions() -> None:
    assert Deg.of("-1/2", "approximate") == Deg(Fraction(-1, 2), Grade.APPROXIMATE)
    assert Deg.of(3, Grade.EXACT) == Deg(Fraction(3), Grade.EXACT)
    assert Deg.of(7, "none") == Deg(None, Grade.NONE)
    assert str(Deg.of("-1/2", "asymptotic")) == "-1/2 (asymptotic)"
    assert str(Deg.of(2, "exact")) == "2 (exact)"
    assert str(Deg.of(0, "none")) == "undefined (none)"
    assert (fmt(Fraction(3, 4)), fmt(Fraction(-2)), fmt(None)) == ("3/4", "-2", "none")


@pytest.mark.parametrize(("grades", "expected"), [
    ((), Grade.EXACT),
    ((Grade.EXACT, Grade.EXACT), Grade.EXACT),
    ((Grade.APPROXIMATE, Grade.EXACT), Grade.APPROXIMATE),
    ((Grade.ASYMPTOTIC, Grade.APPROXIMATE), Grade.ASYMPTOTIC),
    ((Grade.EXACT, Grade.NONE, Grade.ASYMPTOTIC), Grade.NONE),
])
def test_the_weakest_grade_by_exact_approximate_asymptotic_none(grades: Any, expected: Grade) -> None:
    assert weakest(grades) is expected


@pytest.mark.parametrize(("value", "zero"), [
    (0, True), (0.0, True), (-0.0, True), (1, False), (1e-9, False), (False, False), (None, False),
    (Deg.of(0, "exact"), False), ("0", False),
])
def test_only_the_number_zero_is_no_term(value: Any, zero: bool) -> None:
    assert is_literal_zero(value) is zero


def test_a_literal_is_a_constant_and_a_degree_is_itself() -> None:
    half = Deg.of("1/2", "approximate")
    assert as_deg(half) is half
    assert as_deg(2.5) == as_deg(None) == as_deg([1, 2]) == CONST == Deg.of(0, "exact")
    assert no_degree("a", "b") == Claim(NO_DEGREE, NONE, ("a", "b"))
    assert NO_DEGREE == "no degree"


def test_a_lemma_finds_its_cases_by_name() -> None:
    sums = LEMMAS["sum"]
    assert sums.case("a lower-degree term") is SUM_CASES[1]
    assert sums.case("terms of one degree") is SUM_CASES[0]
    assert sums.case("degrees add") is None


# The lemma factories run at import to fill LEMMAS; these build lemmas with them afresh.


def test_a_power_lemma_for_a_fixed_exponent_states_proves_and_applies_it() -> None:
    built = elementwise._power_lemma("cube", aten.sqrt.default, Fraction(3))
    assert (built.name, built.targets) == ("cube", (aten.sqrt.default,))
    assert built.statement == "(cᵏz)ᵖ = c^(pk)·zᵖ for z > 0: degree p·k, the input's grade"
    assert [(c.name, c.statement) for c in built.cases] == [("power", "(cᵏz)ᵖ = c^(pk)·zᵖ")]
    assert built.cases[0].proof() is None
    assert built.law(_d("1/2", "asymptotic")) == Claim("power", _d("3/2", "asymptotic"), ("exponent 3",))
    assert built.law(_d(-1, "approximate")) == Claim("power", _d(-3, "approximate"), ("exponent 3",))
    assert built.law(NO) == _no("an input without degree")
    (sample,) = built.samples
    assert (sample.arity, sample.build("x")) == (1, (("x",), {}))


def test_a_power_lemma_with_the_exponent_as_argument_reads_it() -> None:
    built = elementwise._power_lemma("power", aten.pow.Tensor_Scalar, None)
    assert built.cases[0].proof() is None  # for a symbolic real exponent p
    assert built.law(_d(2), 1.5) == Claim("power", _d(3), ("exponent 3/2",))
    assert built.law(_d(1, "approximate"), -2) == Claim("power", _d(-2, "approximate"), ("exponent -2",))
    (sample,) = built.samples
    assert (sample.arity, sample.build("x")) == (1, (("x", 2), {}))


@pytest.mark.parametrize(("extra", "args"), [(0, ("x",)), (1, ("x", -1.0)), (2, ("x", -1.0, 1.0))])
def test_an_elementwise_function_lemma_reads_its_input_among_literals(extra: int, args: Any) -> None:
    growing = LemmaCase("growing input", "g saturates", lambda: None)
    built = elementwise._function_lemma("probe", (aten.tanh.default,), "g of z", "constant", growing,
                                        extra)
    assert (built.name, built.statement, built.targets) == ("probe", "g of z", (aten.tanh.default,))
    assert built.cases == (elementwise.INVARIANT, growing)
    (sample,) = built.samples
    assert (sample.arity, sample.build("x")) == (1, (args, {}))
    assert built.law(0.5, _d(1), -1.0) == Claim("growing input", _d(0, "approximate"),
                                                ("probe: input degree 1 > 0",))
    assert built.law(_d(-1)) == _no("probe: input degree -1 < 0")


def test_an_elementwise_function_lemma_without_a_limit_has_one_case() -> None:
    built = elementwise._function_lemma("probe", (aten.exp.default,), "exp of z", "none", None)
    assert built.cases == (elementwise.INVARIANT,)
    assert built.samples[0].build("x") == (("x",), {})
    assert built.law(_d(2)) == _no("probe: input degree 2 > 0")
    assert built.law(_d(0, "approximate")) == Claim("scale-invariant input", _d(0, "approximate"),
                                                    ("probe: input degree 0",))


def test_an_activation_lemma_applies_its_limit_whatever_the_options() -> None:
    growing = LemmaCase("growing input", "g is linear at infinity", lambda: None)
    sample = Sample(1, lambda x: ((x,), {}))
    built = activations._function_lemma("probe", (aten.gelu.default,), "GELU of z", "linear", growing,
                                        sample)
    assert (built.name, built.statement, built.targets) == ("probe", "GELU of z", (aten.gelu.default,))
    assert (built.cases, built.samples) == ((elementwise.INVARIANT, growing), (sample,))
    assert built.law(_d(2, "asymptotic"), -1, approximate="tanh") == Claim(
        "growing input", _d(2, "asymptotic"), ("probe: input degree 2 > 0",))
    assert built.law(_d(1)) == Claim("growing input", _d(1, "approximate"), ("probe: input degree 1 > 0",))
    saturating = activations._function_lemma("probe", (), "", "constant", growing, sample)
    assert saturating.law(_d(1)) == Claim("growing input", _d(0, "approximate"),
                                          ("probe: input degree 1 > 0",))


# Each proof checks the statement its case states. The proof steps are replaced by recorders
# (their own soundness is tested above), so a test sees which identities and limits a proof asks
# for, in t = cᵏ, against the statements written out here by hand.

t = T
a_, b_ = sympy.symbols("a b", real=True, nonzero=True)
a_real, b_real = sympy.Symbol("a", real=True), sympy.Symbol("b", real=True)
d_, eps_ = sympy.Symbol("d", positive=True), sympy.Symbol("epsilon", positive=True)
u_ = sympy.Symbol("u")
PAIRS = ((a_real, a_real - d_), (a_real - d_, a_real))  # both orders of two reals, a gap d > 0


def _phi(x: Any) -> Any:
    return (1 + sympy.erf(x / sympy.sqrt(2))) / 2


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + sympy.exp(-x))


def _centred(eps: Any, s: Any) -> Any:  # LayerNorm's first entry over (a, a − d) at scale s
    return (s * d_ / 2) / sympy.sqrt(s**2 * d_**2 / 4 + eps)


def _rms(eps: Any, s: Any) -> Any:  # RMSNorm's first entry over (d, 0) at scale s
    return s * d_ / sympy.sqrt(s**2 * d_**2 / 2 + eps)


_LEAKY = sympy.Lambda(u_, sympy.Max(u_, u_ / 100))
_POSITIVE = (sympy.Lambda(u_, sympy.Max(0, u_)), sympy.Lambda(u_, sympy.Abs(u_)), sympy.Lambda(u_, -u_),
             _LEAKY)
_REDUCTIONS = (lambda p, q: p + q, lambda p, q: (p + q) / 2, sympy.Max, sympy.Min,
               lambda p, q: sympy.sqrt(p**2 + q**2), lambda p, q: sympy.Abs(p - q) / 2)
_m = sympy.Symbol("m", integer=True, nonnegative=True)

PROOF_STEPS = {
    # softmax(cᵏz + b) over a gap d: the top weight σ(td + b) is within e^(−td/2) of 1.
    "softmax saturates": (activations, "_softmax_saturates", lambda: [
        ("exponentially_close", _sigmoid(t * d_ + s), 1, d_ / 2) for s in (0, sympy.Symbol("b", real=True))]),
    "logsumexp is linear": (activations, "_logsumexp_linear", lambda: [
        ("exponentially_close", sympy.log(1 + sympy.exp(-t * d_)), 0, d_ / 2)]),
    "GELU and SiLU approach ReLU": (activations, "_gelu_linear", lambda: [
        step for gate in (_phi, _sigmoid) for step in (
            ("exponentially_close", Z * gate(t * Z), Z, Z / 2),
            ("exponentially_close", -Z * gate(-t * Z), 0, Z / 2))]),
    "attention saturates as softmax": (activations, "_attention_proof", lambda: [
        ("exponentially_close", _sigmoid(t * d_ + s), 1, d_ / 2) for s in (0, sympy.Symbol("b", real=True))]),
    "ReLU, |z|, −z and leaky ReLU": (elementwise, "_positively_homogeneous", lambda: [
        ("exact_identity", f(t * z), 1, f(z)) for z in (Z, -Z) for f in _POSITIVE]),
    "σ, tanh and erf saturate": (elementwise, "_saturates", lambda: [
        ("exponentially_close", g(s), 1, Z / 2) for g in (sympy.tanh, sympy.erf, _sigmoid)
        for s in (t * Z, t * Z + b_)]),
    "max and min": (elementwise, "_extremum_proof", lambda: [
        ("exact_identity", f(t * p, t * q), 1, f(p, q)) for p, q in PAIRS for f in (sympy.Max, sympy.Min)]),
    "where is a sum": (elementwise, "_where_sum", lambda: [
        ("exact_identity", _m * t * a_ + (1 - _m) * t * b_, 1, _m * a_ + (1 - _m) * b_)]),
    "a fixed input": (elementwise, "_invariant_input", lambda: [
        ("exact_identity", sympy.Function("g")(a_), 0, sympy.Function("g")(a_))]),
    "eps below a growing variance": (normalization, "_eps_below", lambda: [
        ("polynomially_close", _centred(eps_, t), 0, 1),
        ("polynomially_close", _rms(eps_, t), 0, sympy.sqrt(2))]),
    "eps above a shrinking variance": (normalization, "_eps_above", lambda: [
        ("polynomially_close", _centred(eps_, 1 / t), -1, d_ / 2 / sympy.sqrt(eps_)),
        ("polynomially_close", _rms(eps_, 1 / t), -1, d_ / sympy.sqrt(eps_))]),
    "no eps": (normalization, "_no_eps", lambda: [
        ("exact_identity", _centred(0, t), 0, _centred(0, 1)),
        ("exact_identity", _rms(0, t), 0, _rms(0, 1))]),
    "sums, means, extrema, norms, std": (normalization, "_reductions", lambda: [
        ("exact_identity", f(t * p, t * q), 1, f(p, q)) for p, q in PAIRS for f in _REDUCTIONS]),
    "variance": (normalization, "_variance", lambda: [
        ("exact_identity", ((t * a_real - t * b_real) / 2) ** 2, 2, ((a_real - b_real) / 2) ** 2)]),
    "quotient": (products, "_quotient", lambda: [
        ("exact_identity", t**3 * a_ / (t * b_), 2, a_ / b_),
        ("polynomially_close", t**3 * a_ / (t * b_ + 1), 2, a_ / b_)]),
    "a constant": (shape, "_reads_no_parameter", lambda: [("exact_identity", 3, 0, 3)]),
    "terms of one degree": (algebra, "equal_terms", lambda: [
        ("exact_identity", t * a_ + t * b_, 1, a_ + b_)]),
    "a lower-degree term": (algebra, "lower_term", lambda: [("polynomially_close", t * a_ + b_, 1, a_)]),
    "degrees add": (algebra, "degrees_add", lambda: [
        ("exact_identity", t * a_ * t**2 * b_, 3, a_ * b_),
        ("polynomially_close", (t * a_ + b_) * t * a_, 2, a_**2)]),
}
_STEPS = ("exact_identity", "polynomially_close", "exponentially_close")


def _record(monkeypatch: pytest.MonkeyPatch, module: Any, verdict: str | None) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []
    for step in _STEPS:
        if hasattr(module, step):
            def recorder(*args: Any, _step: str = step) -> str | None:
                calls.append((_step, *args))
                return verdict
            monkeypatch.setattr(module, step, recorder)
    return calls


def _same(got: Any, expected: Any) -> bool:
    got, expected = sympy.sympify(got), sympy.sympify(expected)
    return got == expected or sympy.simplify(got - expected) == 0


@pytest.mark.parametrize("name", PROOF_STEPS)
def test_each_proof_checks_the_statement_of_its_case(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, proof, statements = PROOF_STEPS[name]
    calls = _record(monkeypatch, module, None)
    assert getattr(module, proof)() is None
    expected = statements()
    assert [c[0] for c in calls] == [e[0] for e in expected]
    for got, want in zip(calls, expected, strict=True):
        assert all(_same(g, w) for g, w in zip(got[1:], want[1:], strict=True)), (got, want)


@pytest.mark.parametrize("name", PROOF_STEPS)
def test_a_proof_fails_when_its_first_step_fails(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, proof, statements = PROOF_STEPS[name]
    calls = _record(monkeypatch, module, "refuted")
    assert getattr(module, proof)() == "refuted"
    assert len(calls) == 1 and calls[0][0] == statements()[0][0]


# The check of the registered rules against the laws: its grid, its reading of a rule's answer,
# and the verdicts it writes.


def test_the_grid_covers_each_sign_and_grade_growing_inputs_first() -> None:
    grades = (Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC)
    expected = [Deg(Fraction(v), g) for v in (1, 2, 0, -1) for g in grades] + [NO]
    assert [inputs for (inputs,) in verify_lemmas._grid(1)] == expected
    assert len(list(verify_lemmas._grid(2))) == 13**2
    assert list(verify_lemmas._grid(0)) == [()]
    triples = list(verify_lemmas._grid(3))  # two grades still cover the grade cases
    assert len(triples) == 9**3
    assert {d.grade for triple in triples for d in triple} == {Grade.EXACT, Grade.ASYMPTOTIC, Grade.NONE}


def test_a_concrete_degree_becomes_the_rules_degree() -> None:
    half = verify_lemmas._as_degree(Deg.of("-1/2", "approximate"))
    assert (half.single, half.value, half.grade) == (True, sympy.Rational(-1, 2), Grade.APPROXIMATE)
    none = verify_lemmas._as_degree(NO)
    assert (none.grade, none.reason) == (Grade.NONE, "an input without degree")


@pytest.mark.parametrize(("answer", "expected"), [
    (lambda: Degree.of(sympy.Rational(-3, 2), "asymptotic"), Deg.of("-3/2", "asymptotic")),
    (lambda: Degree.exact(sympy.Float(0.5)), Deg.of("1/2", "exact")),
    # a float is read as the fraction it is written as, never guessed as √2/2
    (lambda: Degree.exact(sympy.Float(0.5) ** 0.5), Deg(Fraction("0.707106781186548"), Grade.EXACT)),
    (lambda: Degree.none("mixed powers"), NO),
    (lambda: 1, "a int, not a Degree"),
    (lambda: Degree.exact(sympy.Symbol("k")), "the non-numeric degree k"),
    (lambda: Degree.piecewise((Degree.exact(1), sympy.Eq(sympy.Symbol("k"), 1)),
                              (Degree.exact(2), sympy.Ne(sympy.Symbol("k"), 1))),
     "the piecewise degree 1 (exact) if Eq(k, 1) | 2 (exact) if Ne(k, 1)"),
])
def test_a_rules_answer_is_read_as_a_concrete_degree_or_described(answer: Any, expected: Any) -> None:
    assert verify_lemmas._rule_result(answer()) == expected


def _verdict(target: Any) -> Any:
    return verify_lemmas.check_lemmas([target])[target]


def test_a_proved_target_names_its_lemma_and_statement() -> None:
    tanh = aten.tanh.default
    assert list(check_lemmas([tanh])) == [tanh]  # only the targets asked for
    result = _verdict(tanh)
    assert result == verify_lemmas.LemmaResult("aten.tanh.default", "saturating",
                                               LEMMAS["saturating"].statement, True, "")
    assert result.to_dict() == {"target": "aten.tanh.default", "lemma": "saturating",
                                "statement": LEMMAS["saturating"].statement, "proved": True,
                                "reason": ""}


def test_a_wrong_rule_is_named_with_its_first_counterexample(swapped_rule: Any) -> None:
    swapped_rule(aten.tanh.default, lambda x: x)
    assert _verdict(aten.tanh.default) == verify_lemmas.LemmaResult(
        "aten.tanh.default", "saturating", LEMMAS["saturating"].statement, False,
        "for inputs 1 (exact): the registered rule gives 1 (exact), but the lemma proves "
        "0 (approximate) (case 'growing input')")
    swapped_rule(aten.tanh.default, lambda x: 1 / 0)
    assert _verdict(aten.tanh.default).reason == (
        "for inputs 1 (exact): the registered rule gives an error (ZeroDivisionError: division by "
        "zero), but the lemma proves 0 (approximate) (case 'growing input')")
    swapped_rule(aten.mul.Tensor, lambda a, b: Degree.exact(sympy.Symbol("k")))
    assert _verdict(aten.mul.Tensor).reason == (
        "for inputs 1 (exact), 1 (exact): the registered rule gives the non-numeric degree k, but "
        "the lemma proves 2 (exact) (case 'degrees add')")


def test_a_rule_wrong_only_in_a_later_way_of_calling_is_caught(swapped_rule: Any) -> None:
    assert _verdict(aten.add.Tensor).proved  # the registered rule reads alpha
    correct = RULES[aten.add.Tensor]
    swapped_rule(aten.add.Tensor, lambda a, b, alpha=1: correct(a, b))  # ignores alpha = 0
    result = _verdict(aten.add.Tensor)
    assert not result.proved
    # the first three ways of calling agree; with alpha = 0 the second term is no term
    assert result.reason == ("for inputs 1 (exact), 1 (approximate): the registered rule gives "
                             "1 (approximate), but the lemma proves 1 (exact) (case 'terms of one degree')")


def test_a_lemma_target_without_a_rule_is_unproved() -> None:
    saved = RULES.pop(aten.tanh.default)
    try:
        result = _verdict(aten.tanh.default)
    finally:
        RULES[aten.tanh.default] = saved
    assert result == verify_lemmas.LemmaResult("aten.tanh.default", "saturating",
                                               LEMMAS["saturating"].statement, False,
                                               "no rule is registered for this target")


def test_an_unproved_case_fails_the_lemma_even_if_the_law_never_cites_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fine = LemmaCase("fine", "−(cz) = c·(−z)", lambda: exact_identity(-T * Z, 1, -Z))
    false = LemmaCase("false", "tanh(cz) = c·tanh(z)",
                      lambda: exact_identity(sympy.tanh(T * Z), 1, sympy.tanh(Z)))
    neg = aten.neg.default  # its rule keeps the degree, as the law below says

    def lemma(*cases: LemmaCase) -> Lemma:
        return Lemma("partly false", "a statement", (neg,), lambda x: Claim("fine", x), cases,
                     (Sample(1, lambda x: ((x,), {})),))

    monkeypatch.setattr(verify_lemmas, "lemma_for", lambda target: lemma(fine))
    assert _verdict(neg).proved
    monkeypatch.setattr(verify_lemmas, "lemma_for", lambda target: lemma(fine, false))
    result = _verdict(neg)
    assert (result.target, result.lemma, result.statement, result.proved) == (
        "aten.neg.default", "partly false", "a statement", False)
    assert result.reason.startswith("case 'false' of lemma 'partly false' is not proved: "
                                    "f(cᵏx) − t^1·f(x) = ")


def test_a_law_citing_an_unproved_case_fails_the_check() -> None:
    lemma = Lemma("partial", "", (), lambda x: Claim("missing", x), (), ())
    reason = verify_lemmas._disagreement(lambda x: x, lemma, Sample(1, lambda x: ((x,), {})))
    assert reason == "lemma 'partial' has no case 'missing'"
    constant = Lemma("constant", "", (), lambda *a: Claim("no degree", Deg.of(1, "exact")), (), ())
    reason = verify_lemmas._disagreement(lambda *a: Degree.exact(0), constant, Sample(0, lambda: ((), {})))
    assert reason == ("for inputs no tensor input: the registered rule gives 0 (exact), but the lemma "
                      "proves 1 (exact) (case 'no degree')")


def test_rows_list_each_target_with_its_verdict_sorted() -> None:
    results = {
        "b": verify_lemmas.LemmaResult("b.op", "sum", "a ± b", True),
        "a": verify_lemmas.LemmaResult("a.op", None, "", False, "no lemma covers this target"),
    }
    assert verify_lemmas.lemma_rows(results) == [
        ("a.op", "—", "UNPROVED: no lemma covers this target"), ("b.op", "a ± b", "proved")]


def test_a_lemma_is_unproved_by_its_first_unproved_case() -> None:
    fine = LemmaCase("fine", "t·a = t·a", lambda: exact_identity(T * Z, 1, Z))
    false = LemmaCase("false", "tanh(cz) = c·tanh(z)",
                      lambda: exact_identity(sympy.tanh(T * Z), 1, sympy.tanh(Z)))
    assert lemma_unproved(Lemma("true", "", (), lambda x: Claim("fine", x), (fine,))) is None
    reason = lemma_unproved(Lemma("mixed", "", (), lambda x: Claim("fine", x), (fine, false)))
    assert (reason or "").startswith("case 'false' of lemma 'mixed' is not proved: f(cᵏx) − t^1·f(x) = ")
    linear = LEMMAS["linear"]
    assert case_unproved(linear, "degrees add; a lower-degree term") is None  # through the Sum lemma
    assert case_unproved(linear, "degrees add; nonsense") == "lemma 'linear' has no case 'nonsense'"
    assert case_unproved(linear, "no degree") is None


class _Residual:
    """sympy, except that simplify leaves a residual r: a proof by simplification must then fail
    and show it."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sympy, name)

    @staticmethod
    def simplify(expr: Any) -> Any:
        return sympy.Symbol("r")


PROOFS_BY_SIMPLIFICATION = {
    "comparisons of one degree": (elementwise, "_one_degree_compared", "sign(t(a − b)) − sign(a − b) = r"),
    "a threshold settles": (elementwise, "_threshold_settles", "the step does not settle past t = θ/z"),
    "sign and hardtanh settle": (elementwise, "_saturates", "sign/hardtanh do not reach 1 past t = 1/z"),
    "the order of a router's scores": (routing, "_order", "sign residual r"),
    "positions of extrema": (shape, "_positions", "sign residual r"),
    "a row lookup": (products, "_row_lookup", "lookup residual r"),
    "moving entries": (shape, "_moves_entries", "P·(tz) − t·(P·z) = r"),
}


@pytest.mark.parametrize("name", sorted(set(PROOFS_BY_SIMPLIFICATION) - {"sign and hardtanh settle"}))
def test_a_proof_by_simplification_holds(name: str) -> None:
    module, proof, _ = PROOFS_BY_SIMPLIFICATION[name]
    assert getattr(module, proof)() is None


@pytest.mark.parametrize("name", PROOFS_BY_SIMPLIFICATION)
def test_a_proof_by_simplification_fails_on_a_residual(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, proof, message = PROOFS_BY_SIMPLIFICATION[name]
    _record(monkeypatch, module, None)  # the limits before it hold
    monkeypatch.setattr(module, "sympy", _Residual())
    assert getattr(module, proof)() == message


def test_a_power_lemmas_proof_is_for_its_own_exponent(monkeypatch: pytest.MonkeyPatch) -> None:
    built = elementwise._power_lemma("root of a cube", aten.sqrt.default, Fraction(3, 2))
    calls = _record(monkeypatch, elementwise, None)
    assert built.cases[0].proof() is None
    half = sympy.Rational(3, 2)
    assert len(calls) == 1
    assert all(_same(g, w) for g, w in zip(calls[0][1:], ((t * Z) ** half, half, Z**half), strict=True))


@pytest.mark.parametrize(("step", "expected"), [
    (lambda: exact_identity(T**2 * Z**2, 2, Z**2), None),
    (lambda: exact_identity(T * Z + 1, 1, Z), "f(cᵏx) − t^1·f(x) = 1, not 0"),
    (lambda: polynomially_close(T**2 + T, 2, 1), None),                      # remainder 1/t
    (lambda: polynomially_close(T**2 + 1, 2, 1), None),                      # remainder 1/t²
    (lambda: polynomially_close(T**2 + T, 2, 2), "f/t^2 tends to 1, not 2"),
    (lambda: polynomially_close(T**2 + T**2 / sympy.log(T), 2, 1),
     "the remainder does not vanish like a power of 1/t"),
    (lambda: exponentially_close(1 + sympy.exp(-T), 1, sympy.Rational(1, 2)), None),
    (lambda: exponentially_close(1 + sympy.exp(-T), 1, 2), "the error times exp(2·t) tends to oo, not 0"),
    (lambda: exponentially_close(1 + 1 / T, 1, 1), "the error times exp(1·t) tends to oo, not 0"),
    (lambda: exponentially_close(2 + sympy.exp(-T), 1, 1), "f does not tend to 1"),
])
def test_proof_steps_accept_true_statements_and_name_what_fails(step: Any, expected: str | None) -> None:
    assert step() == expected
