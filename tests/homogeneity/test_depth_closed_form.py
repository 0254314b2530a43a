"""Closed forms of stacked blocks, from hand-made degree maps checked against iterating them.

Each map is written by hand; the degree after L blocks is derived by applying the map L times to
the start (a recurrence solved on paper), never by the closed form under test.
"""

from __future__ import annotations

import pytest
import sympy
import torch
from torch import nn

from homogeneity import Degree, Grade, HomogeneityError, K
from homogeneity.depth import _N, DegreeMap, L, _holds, block_degree_map, stack_degree

GRADES = (Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC)
_M = sympy.Symbol("m", real=True)  # a symbol of the user's own: any real value


def same_map(degree: Degree) -> DegreeMap:
    """A block whose output degree does not depend on the input's grade."""
    return DegreeMap(dict.fromkeys(GRADES, degree))


def at(degree: Degree, depth: int) -> tuple[sympy.Expr, Grade]:
    closed = degree.subs({L: depth})
    assert closed.single, (depth, closed)
    return sympy.simplify(closed.value), closed.grade


@pytest.mark.parametrize(("value", "start", "expected"), [
    (K + 3, 2, lambda depth: 2 + 3 * depth),                       # slope 1: an arithmetic sequence
    (2 * K + 1, 0, lambda depth: 2**depth - 1),                    # d ↦ 2d + 1 from 0
    (3 * K + 2, 1, lambda depth: 2 * 3**depth - 1),                # d ↦ 3d + 2 from 1
    (sympy.Integer(1), 5, lambda depth: 1),                        # slope 0: LayerNorm with its affine
    (K + _M, 2, lambda depth: 2 + _M * depth),                     # a step in its own symbol m
])
def test_affine_maps_give_the_solved_recurrence(value, start, expected) -> None:
    degree = stack_degree(same_map(Degree.exact(value)), start=start)
    for depth in range(1, 8):
        assert at(degree, depth) == (expected(depth), Grade.EXACT), depth


def test_a_map_that_settles_at_once_has_one_case() -> None:
    degree = stack_degree(same_map(Degree.exact(K + 3)), start=2)
    assert len(degree.cases) == 1 and sympy.simplify(degree.value - (3 * L + 2)) == 0


def _one_from_zero_else_successor(exact_rest: Grade) -> DegreeMap:
    """exact d ↦ 1 at d = 0, else d + 1 of grade ``exact_rest``; approximate and asymptotic
    d ↦ d + 1 asymptotic."""
    return DegreeMap({
        Grade.EXACT: Degree.piecewise((Degree.exact(1), sympy.Eq(K, 0)),
                                      (Degree.of(K + 1, exact_rest), K > 0)),
        Grade.APPROXIMATE: Degree.of(K + 1, Grade.ASYMPTOTIC),
        Grade.ASYMPTOTIC: Degree.of(K + 1, Grade.ASYMPTOTIC),
    })


def test_a_map_that_settles_after_one_block_has_two_cases() -> None:
    """exact d ↦ 1 at d = 0, else d + 1 asymptotic; asymptotic d ↦ d + 1: from 0 the first block
    gives 1 exact, every later one L asymptotic (the closed form starts at the second block)."""
    degree = stack_degree(_one_from_zero_else_successor(Grade.ASYMPTOTIC), start=0)
    assert [(c.value, c.grade) for c in degree.cases] == [(1, Grade.EXACT), (L, Grade.ASYMPTOTIC)]


def test_a_symbolic_start_keeps_its_symbol() -> None:
    degree = stack_degree(same_map(Degree.exact(2 * K)), start=K)
    for depth in range(1, 6):
        assert at(degree, depth) == (2**depth * K, Grade.EXACT)


def test_the_first_depths_before_the_map_settles_are_their_own_pieces() -> None:
    """d ↦ d + 1 below 3 and d ↦ 7 from 3 on: from 0 the degrees are 1, 2, 3, then 7 for ever.
    The third block's degree is 3, not the fixed point 7 (the closed form counts blocks from 0)."""
    step = Degree.piecewise((Degree.exact(K + 1), K < 3), (Degree.exact(7), K >= 3))
    degree = stack_degree(same_map(step), start=0)
    assert [at(degree, depth)[0] for depth in range(1, 8)] == [1, 2, 3, 7, 7, 7, 7]


def test_the_grade_settles_only_after_two_blocks() -> None:
    """exact d ↦ 1 at d = 0, else d + 1 approximate; approximate d ↦ d + 1 asymptotic; asymptotic
    d ↦ d + 1 asymptotic. From 0: 1 exact, 2 approximate, then L asymptotic from the third block."""
    degree = stack_degree(_one_from_zero_else_successor(Grade.APPROXIMATE), start=0)
    assert at(degree, 1) == (1, Grade.EXACT)
    assert at(degree, 2) == (2, Grade.APPROXIMATE)
    for depth in range(3, 8):
        assert at(degree, depth) == (depth, Grade.ASYMPTOTIC)


def test_a_map_that_never_settles_has_no_closed_form() -> None:
    """The grade alternates between exact and approximate at every block."""
    flip = DegreeMap({Grade.EXACT: Degree.of(K + 1, Grade.APPROXIMATE),
                      Grade.APPROXIMATE: Degree.exact(K + 1),
                      Grade.ASYMPTOTIC: Degree.of(K + 1, Grade.ASYMPTOTIC)})
    with pytest.raises(HomogeneityError, match=r"within three blocks \(degrees 0 \(exact\), "
                                               r"1 \(approximate\), 2 \(exact\), 3 \(approximate\)\)$"):
        stack_degree(flip, start=0)


def test_no_degree_passes_through_and_has_no_closed_form() -> None:
    block = same_map(Degree.exact(K + 1))
    missing = Degree.none("an op without a rule")
    assert block(missing) is missing
    with pytest.raises(HomogeneityError, match="no closed form"):
        stack_degree(block, start=missing)


def test_a_piecewise_input_degree_is_refused() -> None:
    block = same_map(Degree.exact(K + 1))
    two_cases = Degree.piecewise((Degree.exact(1), sympy.Eq(K, 0)), (Degree.exact(2), K > 0))
    with pytest.raises(HomogeneityError, match="expected a single-case input degree"):
        block(two_cases)


def test_each_input_grade_is_analysed_with_that_grade() -> None:
    """A bias-free linear layer keeps the input's grade: k + 1 under each of the three grades."""
    degree_map = block_degree_map(nn.Linear(3, 3, bias=False), torch.randn(2, 3))
    assert set(degree_map.by_grade) == set(GRADES)
    for grade in GRADES:
        assert (degree_map.by_grade[grade].value, degree_map.by_grade[grade].grade) == (K + 1, grade)


class Ratio(nn.Module):
    """a(x) / y: degree k + 1 when x carries k, 1 − k when y does."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.a(x) / y


def test_the_named_input_carries_the_degree() -> None:
    x, y = torch.randn(2, 3), torch.rand(2, 3) + 1
    assert block_degree_map(Ratio(), x, y).by_grade[Grade.EXACT].value == K + 1  # the first float
    assert block_degree_map(Ratio(), x, y, input="y").by_grade[Grade.EXACT].value == 1 - K


def test_keyword_inputs_reach_the_block() -> None:
    x, y = torch.randn(2, 3), torch.rand(2, 3) + 1
    assert block_degree_map(Ratio(), x, y=y, input="y").by_grade[Grade.EXACT].value == 1 - K


class CountFirst(nn.Module):
    """An integer argument before the tensor: the tensor carries the degree, a(x)·n."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)

    def forward(self, n: int, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) * n


def test_the_default_input_is_the_first_floating_point_one() -> None:
    assert block_degree_map(CountFirst(), 2, torch.randn(2, 3)).by_grade[Grade.EXACT].value == K + 1


@pytest.mark.parametrize(("condition", "symbol", "holds"), [
    (sympy.true, None, True),
    (K >= 0, None, True),           # k is a non-negative integer symbol: true outright
    (_M >= 0, None, False),         # m may be negative; with no symbol only what is true outright holds
    (_N >= 0, _N, True),            # every block count n = 0, 1, 2, … satisfies it
    (_N >= 1, _N, False),           # n = 0 does not
    (_M >= 0, _N, False),           # a condition in another symbol is not one about n
    (sympy.And(_N >= 0, _M > 0), _N, False),
    # sympy cannot solve these (both false, at n = 4 and n = 0): what is undecided does not hold
    (sympy.sin(_N) >= 0, _N, False),
    (sympy.Eq(_N % 3, 1), _N, False),
])
def test_a_condition_holds_only_for_every_value_of_its_symbol(condition, symbol, holds) -> None:
    assert _holds(condition, symbol) is holds


class Clone(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


def test_a_block_that_passes_its_input_through_names_that_input() -> None:
    degree_map = block_degree_map(Clone(), torch.randn(2, 3))
    for grade in GRADES:
        degree = degree_map.by_grade[grade]
        assert (degree.value, degree.grade, degree.reason) == (K, grade, "block input x")


def test_the_closed_form_says_which_case_repeats() -> None:
    degree = stack_degree(same_map(Degree.exact(K + 1, "a bias-free linear map")), start=0)
    assert degree.reason == "a bias-free linear map (repeated per block)"


def test_only_the_named_parameters_scale() -> None:
    block = nn.Sequential(nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False))
    assert block_degree_map(block, torch.randn(2, 3)).by_grade[Grade.EXACT].value == K + 2
    assert block_degree_map(block, torch.randn(2, 3), params="0.*").by_grade[Grade.EXACT].value == K + 1


def test_a_block_without_a_floating_point_input_is_refused() -> None:
    message = r"^the block has no floating-point input to carry the degree k$"
    with pytest.raises(HomogeneityError, match=message):
        block_degree_map(nn.Embedding(5, 3), torch.tensor([[1, 2]]))


def test_arguments_of_the_wrong_kind_are_named() -> None:
    with pytest.raises(HomogeneityError, match=r"expected block to be a DegreeMap .*, got dict$"):
        stack_degree({Grade.EXACT: Degree.exact(K + 1)}, start=0)  # type: ignore[arg-type]
    with pytest.raises(HomogeneityError, match=r"expected depth to be a sympy Symbol, got int$"):
        stack_degree(same_map(Degree.exact(K + 1)), start=0, depth=3)  # type: ignore[arg-type]
