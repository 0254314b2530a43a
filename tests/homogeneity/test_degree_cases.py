"""Degree arithmetic case by case: grades, text, JSON, piecewise building, comparison, branching.

``test_degree_values.py`` checks the combinations a network needs; this file pins each branch of
the building blocks (a condition that pins k to one value, an impossible case, a case covering
every k, a positive depth symbol) so that a wrong comparison or a dropped case fails by name.
"""

from __future__ import annotations

import pytest
import sympy

from homogeneity.degree import Case, Degree, Grade, K, add_degrees, branch, compare, lift, show, weakest

EXACT, APPROX, ASYM, NONE = Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC, Grade.NONE
D = sympy.Symbol("d", integer=True, positive=True)  # a depth: 1, 2, …
J = sympy.Symbol("j", integer=True, nonnegative=True)


def test_grade_ranks_and_text() -> None:
    assert [g.rank for g in (EXACT, APPROX, ASYM, NONE)] == [0, 1, 2, 3]
    assert [str(g) for g in (EXACT, APPROX, ASYM, NONE)] == ["exact", "approximate", "asymptotic", "none"]
    assert APPROX.weaker(APPROX) is APPROX and ASYM.weaker(APPROX) is ASYM


def test_weakest_of_nothing_is_exact() -> None:
    assert weakest([]) is EXACT
    assert weakest(iter([APPROX, EXACT])) is APPROX
    assert weakest([ASYM, NONE, EXACT]) is NONE


@pytest.mark.parametrize(("value", "text"), [
    (sympy.Integer(3), "3"), (sympy.Integer(-2), "-2"), (sympy.Rational(1, 2), "1/2"),
    (K + 1, "k + 1"), (2 * K, "2*k"), (sympy.nan, "nan"), (4, "4"), (2.5, "2.5"),
    (sympy.Float(0.5), "0.500000000000000"),
])
def test_show(value: object, text: str) -> None:
    assert show(value) == text


def test_constructors() -> None:
    of = Degree.of(2, "approximate", "why")
    assert of.cases == (Case(sympy.Integer(2), APPROX, "why", sympy.true),)
    assert Degree.of(5, NONE, "lost").cases == (Case(sympy.nan, NONE, "lost", sympy.true),)
    assert Degree.exact(K).cases == (Case(K, EXACT, "", sympy.true),)
    assert Degree.constant().cases == (
        Case(sympy.Integer(0), EXACT, "constant (independent of the scaled parameters)", sympy.true),)
    assert Degree.constant("a literal").reason == "a literal"
    assert Degree.none("no rule").cases == (Case(sympy.nan, NONE, "no rule", sympy.true),)
    with pytest.raises(ValueError):
        Degree.of(1, "strong")


def test_piecewise_drops_impossible_cases_and_merges_equal_ones() -> None:
    d = Degree.piecewise((Degree.exact(1, "a"), sympy.Eq(K, 0)), (Degree.exact(1, "b"), K > 0),
                         (Degree.exact(7, "never"), K < 0))
    # k ≥ 0 always: the two cases of degree 1 cover every k and merge into one unconditional case.
    assert d.single and d.cases == (Case(sympy.Integer(1), EXACT, "a", sympy.true),)
    split = Degree.piecewise((Degree.exact(1, "a"), sympy.Eq(K, 0)), (Degree.exact(2, "b"), K > 0))
    assert not split.single and [c.value for c in split.cases] == [1, 2]
    assert split.cases[0].condition == sympy.Eq(K, 0) and split.cases[1].condition == (K > 0)


def test_piecewise_joins_the_pieces_condition_with_the_cases_own() -> None:
    inner = Degree.piecewise((Degree.exact(1), K > 2), (Degree.exact(2), K <= 2))
    outer = Degree.piecewise((inner, K > 1), (Degree.exact(3), K <= 1))
    table = {c.value: c.condition for c in outer.cases}
    assert set(table) == {1, 2, 3}
    assert [k for k in range(6) if bool(table[sympy.Integer(2)].subs(K, k))] == [2]
    assert [k for k in range(6) if bool(table[sympy.Integer(1)].subs(K, k))] == [3, 4, 5]


def test_a_condition_that_pins_k_substitutes_it() -> None:
    (case,) = Degree.piecewise((Degree.exact(K + 1), K < 1)).cases
    assert (case.value, case.condition) == (1, sympy.Eq(K, 0))
    (two,) = Degree.piecewise((Degree.exact(K * 3), (K > 1) & (K < 3))).cases
    assert (two.value, two.condition) == (6, sympy.Eq(K, 2))


def test_a_positive_depth_symbol_starts_at_one() -> None:
    assert Degree.piecewise((Degree.exact(1), sympy.Eq(D, 0))).cases == ()
    (case,) = Degree.piecewise((Degree.exact(D), D < 2)).cases
    assert (case.value, case.condition) == (1, sympy.Eq(D, 1))
    everywhere = Degree.piecewise((Degree.exact(2), D >= 1))
    assert everywhere.single
    assert not Degree.piecewise((Degree.exact(2), K >= 1)).single  # k may be 0


def test_conditions_on_two_symbols_are_kept_as_they_are() -> None:
    d = Degree.piecewise((Degree.exact(1), sympy.Eq(K, J)), (Degree.exact(2), sympy.Ne(K, J)))
    assert [c.condition for c in d.cases] == [sympy.Eq(K, J), sympy.Ne(K, J)]
    (one,) = Degree.piecewise((Degree.exact(1), sympy.Eq(K, J))).cases
    assert one.condition == sympy.Eq(K, J)


def test_a_condition_sympy_cannot_solve_is_kept_not_assumed_everywhere() -> None:
    even = sympy.Eq(K % 2, 0)
    d = Degree.piecewise((Degree.exact(1), even))
    assert not d.single and d.cases[0].condition == even


def test_value_grade_reason_and_condition_of_a_piecewise_degree() -> None:
    bias = add_degrees(Degree.exact(K), Degree.exact(1))
    assert bias.value == sympy.Piecewise((1, sympy.Eq(K, 1)), (K, K > 1), (1, sympy.Eq(K, 0)))
    assert bias.grade is ASYM
    assert bias.reason == (
        "if Eq(k, 1): sum of two terms of degree k; "
        "if k > 1: sum: the degree-1 term is lower order than the degree-k term; "
        "if Eq(k, 0): sum: the degree-k term is lower order than the degree-1 term")
    assert bias.condition("exact") == sympy.Eq(K, 1)
    assert bias.condition(APPROX) == sympy.Eq(K, 1)
    assert bias.condition("asymptotic") == sympy.Eq(K, 0) | sympy.Eq(K, 1) | (K > 1)
    same_value = Degree.piecewise((Degree.exact(0), sympy.Eq(K, 0)), (Degree.of(0, APPROX), K > 0))
    assert same_value.value == 0 and same_value.grade is APPROX


def test_subs_rebuilds_the_cases() -> None:
    bias = add_degrees(Degree.exact(K), Degree.exact(1))
    assert bias.subs({K: 1}).cases == (Case(sympy.Integer(1), EXACT, "sum of two terms of degree k",
                                            sympy.true),)
    at_five = bias.subs({K: 5})
    assert (at_five.value, at_five.grade, at_five.single) == (5, ASYM, True)
    assert Degree.exact(K + 1, "r").subs({K: 2}).cases == (Case(sympy.Integer(3), EXACT, "r", sympy.true),)


def test_with_reason_rewrites_every_case_and_nothing_else() -> None:
    bias = add_degrees(Degree.exact(K), Degree.exact(1))
    renamed = bias.with_reason("because")
    assert [c.reason for c in renamed.cases] == ["because"] * 3
    assert [(c.value, c.grade, c.condition) for c in renamed.cases] == \
        [(c.value, c.grade, c.condition) for c in bias.cases]


def test_to_dict() -> None:
    assert Degree.of(2, ASYM, "r").to_dict() == {"degree": "2", "grade": "asymptotic", "reason": "r"}
    assert Degree.none("why").to_dict() == {"degree": None, "grade": "none", "reason": "why"}
    partly = Degree.piecewise((Degree.exact(0, "flat"), sympy.Eq(K, 0)), (Degree.none("lost"), K > 0))
    assert partly.to_dict() == {
        "degree": str(partly.value), "grade": "none",
        "reason": "if Eq(k, 0): flat; if k > 0: lost",
        "cases": [
            {"condition": "Eq(k, 0)", "degree": "0", "grade": "exact", "reason": "flat"},
            {"condition": "k > 0", "degree": "nan", "grade": "none", "reason": "lost"},
        ],
    }


def test_text_and_repr() -> None:
    assert Degree.of(2, ASYM).text == "2 (asymptotic)" == str(Degree.of(2, ASYM))
    assert Degree.none("x").text == "undefined (none)"
    assert repr(Degree.of(2, ASYM)) == "Degree(2, asymptotic)"
    assert repr(Degree.none("x")) == "Degree(nan, none)"
    partly = Degree.piecewise((Degree.exact(0), sympy.Eq(K, 0)), (Degree.none("lost"), K > 0))
    assert partly.text == "0 (exact) if Eq(k, 0) | undefined (none) if k > 0"
    assert repr(partly) == "Degree(0 (exact) if Eq(k, 0) | undefined (none) if k > 0)"


def test_lift_combines_cases_and_skips_impossible_combinations() -> None:
    a = Degree.piecewise((Degree.exact(0), sympy.Eq(K, 0)), (Degree.exact(1), K > 0))
    b = Degree.piecewise((Degree.exact(10), sympy.Eq(K, 0)), (Degree.exact(20), K > 0))
    calls: list[tuple[object, object]] = []

    def total(x: Degree, y: Degree) -> Degree:
        assert x.single and y.single  # each call sees unconditional single cases
        calls.append((x.value, y.value))
        return Degree.exact(x.value + y.value)

    out = lift(total, a, b)
    assert sorted(calls, key=str) == [(0, 10), (1, 20)]  # (k = 0, k > 0) never meet
    assert {(c.value, c.condition) for c in out.cases} == {(10, sympy.Eq(K, 0)), (21, K > 0)}
    single = lift(lambda x: Degree.exact(x.value * 2, "double"), Degree.exact(3))
    assert single.cases == (Case(sympy.Integer(6), EXACT, "double", sympy.true),)


@pytest.mark.parametrize(("a", "b", "expected"), [
    (K + 2, sympy.Integer(1), 1), (sympy.Integer(1), K + 2, -1), (K, K, 0), (2 * K, K + K, 0),
    (K, sympy.Integer(1), None), (sympy.Integer(1), sympy.Integer(1), 0),
    (sympy.Integer(-1), sympy.Integer(0), -1),
])
def test_compare(a: sympy.Expr, b: sympy.Expr, expected: int | None) -> None:
    assert compare(a, b) == expected


def test_add_degrees_orders_and_grades() -> None:
    assert add_degrees(Degree.of(2, APPROX), Degree.exact(2)).cases == (
        Case(sympy.Integer(2), APPROX, "sum of two terms of degree 2", sympy.true),)
    high_first = add_degrees(Degree.exact(3), Degree.of(1, APPROX), "mix")
    assert high_first.cases == (Case(sympy.Integer(3), ASYM, "mix: the degree-1 term is lower order "
                                                            "than the degree-3 term", sympy.true),)
    low_first = add_degrees(Degree.exact(1), Degree.exact(3))
    assert (low_first.value, low_first.grade) == (3, ASYM)
    none = add_degrees(Degree.exact(1), Degree.none("second"))
    assert (none.grade, none.reason) == (NONE, "second")
    assert add_degrees(Degree.none("first"), Degree.none("second")).reason == "first"
    shrinking = add_degrees(Degree.exact(-1), Degree.exact(0))
    assert (shrinking.value, shrinking.grade) == (0, ASYM)


def test_branch_by_the_sign_of_a_degree() -> None:
    zero, positive, negative = Degree.exact(0, "z"), Degree.exact(1, "p"), Degree.none("n")
    assert branch(sympy.Integer(0), zero, positive, negative) is zero
    assert branch(sympy.Integer(2), zero, positive, negative) is positive
    assert branch(sympy.Integer(-1), zero, positive, negative) is negative
    assert branch(K + 1, zero, positive, negative) is positive
    split = branch(K - 1, zero, positive, negative)
    at = {k: [c for c in split.cases if bool(c.condition.subs(K, k))] for k in range(4)}
    assert [len(cases) for cases in at.values()] == [1, 1, 1, 1]
    assert [(c.value, c.reason) for (c,) in at.values()] == [
        (sympy.nan, "n"), (0, "z"), (1, "p"), (1, "p")]


def test_cases_merged_beside_another_keep_the_union_of_their_conditions() -> None:
    # Degree 1 for k = 0 and for k > 1, degree 2 for k = 1: the two degree-1 cases merge into one
    # that holds exactly where either did, not everywhere.
    d = Degree.piecewise((Degree.exact(1, "a"), sympy.Eq(K, 0)), (Degree.exact(2, "b"), sympy.Eq(K, 1)),
                         (Degree.exact(1, "c"), K > 1))
    assert [(c.value, c.reason) for c in d.cases] == [(1, "a"), (2, "b")]
    one, two = (c.condition for c in d.cases)
    assert [k for k in range(6) if bool(one.subs(K, k))] == [0, 2, 3, 4, 5]
    assert [k for k in range(6) if bool(two.subs(K, k))] == [1]
    assert [d.subs({K: k}).value for k in range(4)] == [1, 2, 1, 1]


def test_the_default_reason_is_empty() -> None:
    assert Degree.of(3, ASYM).cases == (Case(sympy.Integer(3), ASYM, "", sympy.true),)


def test_lift_joins_the_input_case_condition_with_the_conditions_the_rule_adds() -> None:
    # x = k for k > 0 and 0 for k = 0; the rule splits again by the sign of x − 2.
    x = Degree.piecewise((Degree.exact(K), K > 0), (Degree.exact(0), sympy.Eq(K, 0)))

    def by_sign(d: Degree) -> Degree:
        return branch(d.value - 2, Degree.exact(10, "z"), Degree.exact(20, "p"), Degree.exact(30, "n"))

    out = lift(by_sign, x)
    assert [out.subs({K: k}).value for k in range(6)] == [30, 30, 10, 20, 20, 20]
    assert all(out.subs({K: k}).single for k in range(6))
