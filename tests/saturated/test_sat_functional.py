"""Limit functions against the functions they are limits of."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from saturated.errors import SaturationError
from saturated.functional import hard_attention, hardmax, relu_limit, sign, step

finite = st.floats(-10, 10, allow_nan=False, width=64)


def test_hardmax_is_uniform_over_the_maximal_positions() -> None:
    out = hardmax(torch.tensor([[0.5, 2.0, 2.0, 1.0], [3.0, -1.0, 0.0, 0.0]]))
    assert out.tolist() == [[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]]


def test_masked_positions_never_win_and_fully_masked_rows_are_zero() -> None:
    scores = torch.tensor([[5.0, 1.0, 2.0], [5.0, 1.0, 2.0]])
    mask = torch.tensor([[False, True, True], [False, False, False]])
    out = hardmax(scores, mask=mask)
    assert out.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert not torch.isnan(out).any()


def test_tie_tolerance_is_relative_to_the_row_scale() -> None:
    scores = torch.tensor([1000.0, 1000.0 * (1 - 1e-9), 0.0], dtype=torch.float64)
    assert hardmax(scores, rtol=1e-6).tolist() == [0.5, 0.5, 0.0]
    assert hardmax(scores, rtol=0).tolist() == [1.0, 0.0, 0.0]


def test_non_boolean_mask_is_rejected() -> None:
    with pytest.raises(SaturationError, match="boolean mask"):
        hardmax(torch.zeros(3), mask=torch.ones(3))


@given(st.lists(finite, min_size=2, max_size=8))
def test_hardmax_is_the_limit_of_softmax(values: list[float]) -> None:
    x = torch.tensor(values, dtype=torch.float64)
    gaps = (x.max() - x)[x < x.max()]
    big = torch.softmax(1e5 * x, dim=-1)  # e^(−1e5·gap) is below float64 resolution for gap ≥ 1e-2
    if gaps.numel() == 0 or gaps.min() >= 1e-2:
        assert torch.allclose(big, hardmax(x, rtol=0), atol=1e-12)


def test_hard_attention_averages_the_values_of_the_best_keys() -> None:
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    k = torch.tensor([[3.0, 1.0], [3.0, -1.0], [0.0, 2.0]])
    v = torch.tensor([[2.0], [4.0], [8.0]])
    assert hard_attention(q, k, v).tolist() == [[3.0], [8.0]]


@given(finite)
def test_step_sign_and_relu_are_limits(value: float) -> None:
    x = torch.tensor([value], dtype=torch.float64)
    if abs(value) > 1e-3:
        assert torch.allclose(step(x), torch.sigmoid(1e6 * x))
        assert torch.allclose(sign(x), torch.tanh(1e6 * x))
    c = 1e6
    gelu = torch.nn.functional.gelu(c * x) / c
    assert torch.allclose(relu_limit(x), gelu, atol=1e-6)


def test_step_and_sign_are_undetermined_at_zero() -> None:
    with pytest.raises(SaturationError, match="not determined at 0"):
        step(torch.tensor([1.0, 0.0]))
    with pytest.raises(SaturationError, match="not determined at 0"):
        sign(torch.tensor([0.0]))
