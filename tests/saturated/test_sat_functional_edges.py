"""Limit functions at their edges: the tie tolerance's scale, masks, non-finite rows, rounding bounds.

``test_sat_functional.py`` compares each limit with the function it is the limit of on random
inputs; these rows put each documented rule where it decides the answer.
"""

from __future__ import annotations

import math

import pytest
import torch

from saturated.errors import SaturationError
from saturated.functional import default_rtol, hard_attention, hardmax, relu_limit, sign, step, tie_set

F64 = torch.float64


@pytest.mark.parametrize(("dtype", "eps"), [
    (torch.float64, 2.0**-52), (torch.float32, 2.0**-23), (torch.bfloat16, 2.0**-7),
    (torch.int64, 2.0**-23),  # integer scores are judged like float32
])
def test_default_rtol_is_64_units_of_rounding(dtype: torch.dtype, eps: float) -> None:
    assert default_rtol(dtype) == 64 * eps


def test_ties_are_judged_against_the_largest_allowed_magnitude_in_the_row() -> None:
    # The row's scale is 10⁶ (its smallest score), so 1 − 2·10⁻⁶ is within 10⁻⁶ of the maximum 1.
    scores = torch.tensor([1.0, 1.0 - 2e-6, -1e6], dtype=F64)
    assert tie_set(scores, rtol=1e-6).tolist() == [True, True, False]
    # Masking the large score removes it from the scale too: now only the maximum is tied.
    mask = torch.tensor([True, True, False])
    assert tie_set(scores, mask=mask, rtol=1e-6).tolist() == [True, False, False]


def test_default_tolerance_ties_scores_a_few_roundings_apart() -> None:
    base = 1.0
    near = base * (1 - 8 * torch.finfo(F64).eps)
    far = base * (1 - 128 * torch.finfo(F64).eps)
    assert tie_set(torch.tensor([base, near, far], dtype=F64)).tolist() == [True, True, False]
    assert tie_set(torch.tensor([base, near, far], dtype=F64), rtol=0).tolist() == [True, False, False]


def test_equal_zero_scores_all_tie() -> None:
    assert tie_set(torch.zeros(3)).tolist() == [True, True, True]
    assert hardmax(torch.zeros(4)).tolist() == [0.25] * 4


def test_ties_along_another_dimension() -> None:
    scores = torch.tensor([[1.0, 5.0], [1.0, 2.0], [0.0, 5.0]])
    assert tie_set(scores, dim=0).tolist() == [[True, True], [True, False], [False, True]]
    assert hardmax(scores, dim=0).tolist() == [[0.5, 0.5], [0.5, 0.0], [0.0, 0.5]]


@pytest.mark.parametrize("extra", [0.0, math.inf, -math.inf], ids=["finite", "+inf", "-inf"])
def test_fully_masked_rows_have_no_position_on_either_path(extra: float) -> None:
    # An infinite score anywhere takes the path for non-finite rows; the answer must not change.
    scores = torch.tensor([[2.0, 1.0, extra], [2.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    assert tie_set(scores, mask=mask).tolist() == [[True, False, False], [False, False, False]]
    assert hardmax(scores, mask=mask).tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_minus_infinity_scores_never_tie_with_a_finite_maximum() -> None:
    assert hardmax(torch.tensor([-math.inf, -2.0, 5.0])).tolist() == [0.0, 0.0, 1.0]


def test_plus_infinity_scores_win_and_tie_with_each_other() -> None:
    assert hardmax(torch.tensor([math.inf, 3.0, math.inf, -math.inf])).tolist() == [0.5, 0.0, 0.5, 0.0]


def test_infinite_scores_compared_exactly() -> None:
    assert tie_set(torch.tensor([-math.inf, -2.0, 5.0]), rtol=0).tolist() == [False, False, True]
    assert tie_set(torch.tensor([math.inf, 3.0, math.inf, -math.inf]), rtol=0).tolist() == \
        [True, False, True, False]


def test_nan_scores_raise_unless_their_rows_are_declared_empty() -> None:
    scores = torch.tensor([[1.0, math.nan], [1.0, 2.0]])
    with pytest.raises(SaturationError, match=r"^hardmax received NaN scores at allowed positions$"):
        tie_set(scores)
    assert tie_set(scores, nan_rows_empty=True).tolist() == [[False, False], [False, True]]
    # A NaN at a masked position is no decision: the row keeps its maximum.
    mask = torch.tensor([[True, False], [True, True]])
    assert tie_set(scores, mask=mask).tolist() == [[True, False], [False, True]]


def test_a_rounding_bound_keeps_every_position_that_may_hold_the_maximum() -> None:
    scores = torch.tensor([2.0, 1.85, 1.7, 1.0])
    bound = torch.tensor([0.1, 0.1, 0.1, 0.1])
    # max(s − b) = 1.9; s + b ≥ 1.9 for 2.0 and 1.85 only. No extra tolerance by default.
    assert tie_set(scores, bound=bound).tolist() == [True, True, False, False]
    assert tie_set(scores, bound=torch.zeros(4)).tolist() == [True, False, False, False]
    # rtol widens it when given: 1.9 − 0.1·2 = 1.7 reaches 1.7 + 0.1.
    assert tie_set(scores, bound=bound, rtol=0.1).tolist() == [True, True, True, False]
    # The same on the path for non-finite rows.
    with_inf = torch.tensor([[2.0, 1.85, 1.7, -math.inf]])
    assert tie_set(with_inf, bound=bound).tolist() == [[True, True, False, False]]


def test_integer_scores_give_float_weights() -> None:
    scores = torch.tensor([[3, 1, 3], [0, 0, -5]])
    assert tie_set(scores).tolist() == [[True, False, True], [True, True, False]]
    weights = hardmax(scores)
    assert weights.dtype == torch.float32 and weights.tolist() == [[0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]


@pytest.mark.parametrize(("mask_shape", "ok"), [((3,), True), ((2, 1), True), ((1, 3), True),
                                                 ((2, 3), True), ((4,), False), ((3, 2, 3), False)])
def test_masks_must_broadcast_to_the_scores(mask_shape: tuple[int, ...], ok: bool) -> None:
    scores = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    mask = torch.ones(mask_shape, dtype=torch.bool)
    if ok:
        assert hardmax(scores, mask=mask).tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    else:
        with pytest.raises(SaturationError) as err:
            hardmax(scores, mask=mask)
        assert str(err.value) == (f"mask of shape {mask_shape} does not broadcast to scores of "
                                  "shape (2, 3)")


def test_a_non_boolean_mask_names_its_dtype() -> None:
    with pytest.raises(SaturationError) as err:
        hardmax(torch.zeros(2), mask=torch.ones(2, dtype=torch.uint8))
    assert str(err.value) == ("expected a boolean mask (True where attention is allowed), got "
                              "dtype torch.uint8")


def test_hard_attention_passes_mask_and_tolerance_on() -> None:
    q = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    k = torch.tensor([[2.0, 0.0], [1.999, 0.0], [0.0, 1.0]])
    v = torch.tensor([[2.0], [4.0], [8.0]])
    assert hard_attention(q, k, v).tolist() == [[2.0], [2.0]]
    assert hard_attention(q, k, v, rtol=1e-3).tolist() == [[3.0], [3.0]]
    mask = torch.tensor([[False, True, True], [False, False, False]])
    assert hard_attention(q, k, v, mask=mask).tolist() == [[4.0], [0.0]]


@pytest.mark.parametrize("bad", ["q", "k", "v"])
def test_hard_attention_names_the_argument_that_is_not_a_tensor(bad: str) -> None:
    given = {"q": torch.ones(1, 2), "k": torch.ones(3, 2), "v": torch.ones(3, 1)}
    given[bad] = [[1.0, 0.0]]
    with pytest.raises(SaturationError) as caught:
        hard_attention(**given)
    assert str(caught.value) == f"expected {bad} to be a real torch.Tensor, got [[1.0, 0.0]] (list)"


@pytest.mark.parametrize(("shapes", "shown"), [
    (((1, 3), (3, 2), (3, 1)), "(1, 3), (3, 2) and (3, 1)"),  # query and key widths differ
    (((1, 2), (3, 2), (2, 1)), "(1, 2), (3, 2) and (2, 1)"),  # fewer values than keys
    (((2,), (3, 2), (3, 1)), "(2,), (3, 2) and (3, 1)"),      # a query without its row axis
    (((1, 2), (2,), (3, 1)), "(1, 2), (2,) and (3, 1)"),      # a key without its row axis
    (((1, 2), (3, 2), (3,)), "(1, 2), (3, 2) and (3,)"),      # values without their row axis
])
def test_hard_attention_refuses_shapes_that_do_not_fit_naming_all_three(shapes, shown: str) -> None:
    q, k, v = (torch.ones(shape) for shape in shapes)
    with pytest.raises(SaturationError) as caught:
        hard_attention(q, k, v)
    assert str(caught.value) == f"expected q (..., n, d), k (..., m, d) and v (..., m, e), got shapes {shown}"


def test_rows_without_positions_have_an_empty_tie_set_of_their_shape() -> None:
    ties = tie_set(torch.ones(2, 3, 0), -1)
    assert ties.shape == (2, 3, 0) and ties.dtype == torch.bool


def test_step_sign_and_relu_keep_the_dtype_and_decide_every_nonzero_entry() -> None:
    x = torch.tensor([-3.0, -1e-300, 1e-300, 2.0], dtype=F64)
    assert step(x).tolist() == [0.0, 0.0, 1.0, 1.0] and step(x).dtype == F64
    assert sign(x).tolist() == [-1.0, -1.0, 1.0, 1.0] and sign(x).dtype == F64
    assert relu_limit(x).tolist() == [0.0, 0.0, 1e-300, 2.0]
    with pytest.raises(SaturationError, match=r"^step \(the limit of sigmoid\) is not determined at 0$"):
        step(torch.tensor([-0.0]))
    with pytest.raises(SaturationError, match=r"^sign \(the limit of tanh\) is not determined at 0$"):
        sign(torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("other", [0.0, math.inf], ids=["finite-path", "infinite-path"])
def test_each_row_is_judged_at_its_own_scale_not_the_largest_in_the_tensor(other: float) -> None:
    # Row 0 is of size 1, row 1 of size 1e15: the default tolerance (64 ulps ≈ 1.4e-14 in float64)
    # of row 1's scale would be 14, tying 1.0 with 0.5 if the scale were shared.
    scores = torch.tensor([[1.0, 0.5, 0.0], [1e15, 0.0, other]], dtype=torch.float64)
    expected = [[True, False, False], [other == 0.0, False, other == math.inf]]
    assert tie_set(scores).tolist() == expected


def test_integer_scores_with_a_mask_never_pick_a_masked_position() -> None:
    scores = torch.tensor([[3, 9, 2], [-5, -7, 100]])
    mask = torch.tensor([[True, False, True], [True, True, False]])
    assert tie_set(scores, mask=mask).tolist() == [[True, False, False], [True, False, False]]


def test_very_negative_scores_beside_a_masked_position_still_have_a_maximum() -> None:
    # An infinite score elsewhere takes the exact (where-based) path; the masked position must
    # stay below −1e20, the row's maximum.
    scores = torch.tensor([[-1e20, -2e20, 5.0], [math.inf, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert tie_set(scores, mask=mask).tolist() == [[True, False, False], [True, False, False]]


def test_a_very_negative_row_does_not_widen_the_tolerance_of_another_row() -> None:
    # Row 1's largest magnitude is 2e15 (its most negative score); row 0's is 1e-3. Shared, 2e15
    # would make the tolerance ~28 and tie row 0's 0.0 with its 1e-3.
    scores = torch.tensor([[1e-3, 0.0], [-1e15, -2e15]], dtype=torch.float64)
    assert tie_set(scores).tolist() == [[True, False], [True, False]]


def test_hard_attention_over_a_batch_of_heads_is_each_head_on_its_own() -> None:
    q = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])  # two heads, one query each
    k = torch.tensor([[[1.0, 0.0], [5.0, 0.0]], [[0.0, 4.0], [0.0, 1.0]]])  # keys as rows
    v = torch.tensor([[[10.0], [20.0]], [[10.0], [20.0]]])
    out = hard_attention(q, k, v)
    # Head 0 scores q·k = [1, 5] (key 1); head 1 scores [4, 1] (key 0).
    assert out.shape == (2, 1, 1)
    assert out.flatten().tolist() == [20.0, 10.0]


def test_integer_scores_give_float32_weights_whatever_the_default_dtype() -> None:
    scores = torch.tensor([[3, 1, 3, 3]])
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        weights = hardmax(scores)
    finally:
        torch.set_default_dtype(previous)
    assert weights.dtype == torch.float32
    third = torch.tensor(1 / 3, dtype=torch.float32).item()  # 1/3 rounded to float32
    assert weights.tolist() == [[third, 0.0, third, third]]


def test_with_a_rounding_bound_no_tolerance_is_added_unless_asked() -> None:
    # Exact scores (bound 0) 1 and 1 − 2⁻⁴⁹ differ by less than the default float64 tolerance
    # (64·eps ≈ 1.4e-14 of the row's scale), which would tie them; the bound alone does not.
    scores = torch.tensor([1.0, 1.0 - 2.0**-49], dtype=torch.float64)
    assert tie_set(scores).tolist() == [True, True]
    assert tie_set(scores, bound=torch.zeros(2, dtype=torch.float64)).tolist() == [True, False]
    assert tie_set(scores, bound=torch.zeros(2, dtype=torch.float64), rtol=1e-13).tolist() == [True, True]


def test_very_negative_integer_scores_beside_a_masked_position_still_have_a_maximum() -> None:
    # The masked position must stay below every allowed integer score (here −10¹⁸).
    scores = torch.tensor([[-10**18, -2 * 10**18, 5]])
    mask = torch.tensor([[True, True, False]])
    assert tie_set(scores, mask=mask).tolist() == [[True, False, False]]


@pytest.mark.parametrize("other", [0.0, -math.inf], ids=["finite-path", "infinite-path"])
def test_the_tolerance_follows_the_finite_allowed_scores_only(other: float) -> None:
    # Row scale 1e-3: the tolerance is 64·eps·1e-3 ≈ 1.4e-17 < 1e-3·2⁻⁴⁵ ≈ 2.8e-17, so the two scores
    # do not tie; a −∞ score (the general path) must not count as a magnitude of 1 or more.
    scores = torch.tensor([[1e-3, 1e-3 * (1 - 2.0**-45), other]], dtype=torch.float64)
    assert tie_set(scores).tolist() == [[True, False, False]]
