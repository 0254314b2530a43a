"""Degrees and grades: ordering, combination, symbolic conditions."""

from __future__ import annotations

import pytest
import sympy

from homogeneity import Degree, Grade, HomogeneityError, K
from homogeneity.degree import add_degrees
from homogeneity.rules.common import function_of, product


def test_grades_combine_to_the_weaker() -> None:
    order = [Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC, Grade.NONE]
    for i, a in enumerate(order):
        for j, b in enumerate(order):
            assert a.weaker(b) is order[max(i, j)]


def test_bias_on_a_degree_k_input_is_exact_only_for_k_1() -> None:
    bias = add_degrees(Degree.exact(K, "input"), Degree.exact(1, "bias"))
    assert bias.condition("exact") == sympy.Eq(K, 1)
    assert bias.subs({K: 1}).cases[0].grade is Grade.EXACT
    assert (bias.subs({K: 3}).value, bias.subs({K: 3}).grade) == (3, Grade.ASYMPTOTIC)
    assert (bias.subs({K: 0}).value, bias.subs({K: 0}).grade) == (1, Grade.ASYMPTOTIC)
    assert bias.grade is Grade.ASYMPTOTIC  # what holds whatever k is


def test_sum_keeps_the_weaker_grade_and_the_leading_degree() -> None:
    approx = Degree.of(2, Grade.APPROXIMATE)
    assert add_degrees(approx, Degree.exact(2)) == Degree.of(2, Grade.APPROXIMATE,
                                                             "sum of two terms of degree 2")
    low = add_degrees(Degree.exact(1), approx)
    assert (low.value, low.grade) == (2, Grade.ASYMPTOTIC)
    assert "degree-1 term is lower order" in low.reason
    undefined = add_degrees(Degree.none("no rule"), Degree.exact(1))
    assert (undefined.grade, undefined.reason) == (Grade.NONE, "no rule")


def test_product_adds_degrees_symbolically() -> None:
    k1, k2 = sympy.symbols("k1 k2", integer=True, nonnegative=True)
    out = product(Degree.exact(k1), Degree.of(k2, Grade.APPROXIMATE))
    assert (out.value, out.grade) == (k1 + k2, Grade.APPROXIMATE)


def test_saturating_function_of_symbolic_degree_splits_on_k_0() -> None:
    out = function_of(Degree.exact(K), "tanh", limit="constant")
    assert out.value == 0  # degree 0 either way; only the grade depends on k
    assert out.condition("exact") == sympy.Eq(K, 0)
    assert out.grade is Grade.APPROXIMATE
    gelu = function_of(Degree.exact(K), "GELU", limit="linear")
    assert gelu.value == sympy.Piecewise((0, sympy.Eq(K, 0)), (K, K > 0))
    assert function_of(Degree.exact(K), "exp", limit="none").condition("exact") == sympy.Eq(K, 0)


def test_piecewise_cases_are_composed_and_pruned() -> None:
    bias = add_degrees(Degree.exact(K), Degree.exact(1))
    twice = add_degrees(bias, Degree.exact(1))
    # k = 1: exact 1; k > 1: asymptotic k; k = 0: asymptotic 1. No impossible case survives.
    assert {(c.value, c.grade) for c in twice.cases} == {
        (1, Grade.EXACT), (K, Grade.ASYMPTOTIC), (1, Grade.ASYMPTOTIC)}
    assert len(twice.cases) == 3


def test_to_dict_is_json_ready() -> None:
    data = add_degrees(Degree.exact(K), Degree.exact(1)).to_dict()
    assert data["grade"] == "asymptotic" and len(data["cases"]) == 3
    assert Degree.none("why").to_dict() == {"degree": None, "grade": "none", "reason": "why"}


@pytest.mark.parametrize("value", ["not a degree", object()])
def test_a_degree_that_is_not_a_number_or_expression_is_refused_naming_it(value: object) -> None:
    with pytest.raises(HomogeneityError) as caught:
        Degree.of(value, Grade.EXACT)
    assert str(caught.value) == f"expected a degree (a number or an expression in k), got {value!r:.60}"
