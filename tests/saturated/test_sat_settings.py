"""Every value of every :class:`~saturated.rules.Settings` field, with its documented behaviour.

Three one-head networks put each setting at the edge where it decides the answer: a tie that only
a lower order breaks (``orders``, ``ties``), a near-tie that float64 rounding cannot tell from a tie
(``exact_ties``), and a fixed additive constant of moderate size that is not a mask
(``mask_threshold``).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, _schedule, saturate

F64 = torch.float64


def _scalar(value: float) -> nn.Parameter:
    return nn.Parameter(torch.tensor(value, dtype=F64))


def grown(net: nn.Module, c: float, *inputs: torch.Tensor) -> torch.Tensor:
    return torch.func.functional_call(net, {n: c * p for n, p in net.named_parameters()}, inputs)


class LowerOrderHead(nn.Module):
    """Scores x₀·k with keys k = w₂w₁·x₀ + v·x₁ (degrees 2 and 1); values o·x (degree 1).

    Tokens 0 and 2 share x₀ = 1, so their keys tie at the leading order; the degree-1 part
    (v·x₁: 0 against 1.5) breaks the tie in favour of token 2.
    """

    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2, self.v, self.o = _scalar(1.0), _scalar(1.0), _scalar(0.5), _scalar(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = self.w2 * self.w1 * x[..., 0] + self.v * x[..., 1]
        return torch.softmax(x[..., :1] * keys.unsqueeze(-2), -1) @ (x * self.o)


TIED = torch.tensor([[[1.0, 0.0], [0.5, 0.0], [1.0, 3.0], [-1.0, 2.0]]], dtype=F64)
# Queries 0-2 (positive) attend to the largest key: token 2 once the lower order is known.
BROKEN = torch.tensor([[[1.0, 3.0]] * 3 + [[-1.0, 2.0]]], dtype=F64)


def test_default_settings() -> None:
    s = Settings()
    assert (s.mask_threshold, s.rtol, s.ties, s.orders, s.exact_ties, s.operand_rtol) == \
        (1e9, None, "raise", 16, True, 0.0)


def test_settings_given_as_one_element_tensors_are_kept_as_python_numbers() -> None:
    s = Settings(orders=torch.tensor(3), mask_threshold=torch.tensor(1e6, dtype=F64),
                 rtol=torch.tensor(1e-4, dtype=F64), operand_rtol=torch.tensor(0.25, dtype=F64))
    values = (s.orders, s.mask_threshold, s.rtol, s.operand_rtol)
    assert values == (3, 1e6, 1e-4, 0.25) and [type(v) for v in values] == [int, float, float, float]


@pytest.mark.parametrize("orders", [2, 16])
def test_a_tie_only_a_lower_order_breaks_is_broken_with_two_orders(orders: int) -> None:
    out = saturate(LowerOrderHead(), TIED, settings=Settings(orders=orders))(TIED)
    assert out.orders == 2 and out.degrees == 1.0
    assert torch.equal(out.value, BROKEN)
    assert (grown(LowerOrderHead(), 1e4, TIED) / 1e4 - BROKEN).abs().max() < 1e-9


def test_one_order_with_ties_raise_names_the_order_that_would_decide() -> None:
    with pytest.raises(SaturationError, match=r"untracked part of order c\^1 decides.*node 'softmax'") as err:
        saturate(LowerOrderHead(), TIED, settings=Settings(orders=1))
    assert "(tracking 1 orders)" in str(err.value)


def test_one_order_with_ties_nan_leaves_only_the_undetermined_outputs_nan() -> None:
    out = saturate(LowerOrderHead(), TIED, settings=Settings(orders=1, ties="nan"))(TIED)
    # Both tied tokens have x₀ = 1, so the first column is known; the second (0 or 3) is not.
    assert out.orders == 1
    assert out.value[0, :3, 0].tolist() == [1.0, 1.0, 1.0]
    assert bool(out.value[0, :3, 1].isnan().all())
    assert out.value[0, 3].tolist() == [-1.0, 2.0]  # the negative query has no tie


def test_one_order_with_ties_uniform_averages_the_tied_values() -> None:
    out = saturate(LowerOrderHead(), TIED, settings=Settings(orders=1, ties="uniform"))(TIED)
    expected = torch.tensor([[[1.0, 1.5]] * 3 + [[-1.0, 2.0]]], dtype=F64)
    assert torch.equal(out.value, expected)


class SumHead(nn.Module):
    """One key per token, w·(x₀ + x₂), the same for every query; values o·x₁.

    Token 0 computes 0.1 + 0.2 and token 1 has 0.3: in float64 they differ by less than the
    rounding of the sum, yet exactly 0.1 + 0.2 > 0.3 (as binary numbers), so token 0 wins.
    """

    def __init__(self) -> None:
        super().__init__()
        self.w, self.o = _scalar(1.0), _scalar(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = (self.w * (x[..., 0] + x[..., 2])).unsqueeze(-2).expand(*x.shape[:2], x.shape[1])
        return torch.softmax(keys, -1) @ (x[..., 1:2] * self.o)


NEAR = torch.tensor([[[0.1, 5.0, 0.2], [0.3, 7.0, 0.0], [0.0, 1.0, 0.1]]], dtype=F64)


def test_exact_ties_settles_a_near_tie_by_exact_arithmetic() -> None:
    out = saturate(SumHead(), NEAR)(NEAR)
    assert torch.equal(out.value, torch.full((1, 3, 1), 5.0, dtype=F64))


def test_without_exact_ties_a_near_tie_follows_the_tie_policy() -> None:
    with pytest.raises(SaturationError, match="cannot tell a near-tie from a tie"):
        saturate(SumHead(), NEAR, settings=Settings(exact_ties=False, max_precision=0))
    uniform = saturate(SumHead(), NEAR,
                       settings=Settings(exact_ties=False, ties="uniform", max_precision=0))(NEAR)
    assert torch.equal(uniform.value, torch.full((1, 3, 1), 6.0, dtype=F64))
    nan = saturate(SumHead(), NEAR, settings=Settings(exact_ties=False, ties="nan", max_precision=0))(NEAR)
    assert bool(nan.value.isnan().all())


class MaskedHead(nn.Module):
    """Scores w·x₀ of every token plus a fixed additive constant per key; values o·x₁."""

    def __init__(self) -> None:
        super().__init__()
        self.w, self.o = _scalar(1.0), _scalar(1.0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = (self.w * x[..., 0]).unsqueeze(-2).expand(*x.shape[:2], x.shape[1]) + mask
        return torch.softmax(scores, -1) @ (x[..., 1:2] * self.o)


TOKENS = torch.tensor([[[0.1, 5.0], [0.3, 7.0], [0.0, 1.0]]], dtype=F64)
MODERATE = torch.tensor([0.0, -1e4, 0.0], dtype=F64)  # large at c = 1, but not a mask


@pytest.mark.parametrize(("threshold", "winner"), [
    (1e9, 7.0),       # default: −10⁴ is a fixed number, swamped by scores growing like c
    (1.0001e4, 7.0),  # just above it: still a number
    (1e4, 5.0),       # at it: a masking constant (|value| ≥ threshold), so token 1 is never attended
    (1e3, 5.0),
])
def test_mask_threshold_decides_what_is_a_mask(threshold: float, winner: float) -> None:
    settings = Settings(mask_threshold=threshold)
    out = saturate(MaskedHead(), TOKENS, MODERATE, settings=settings)(TOKENS, MODERATE)
    assert torch.equal(out.value, torch.full((1, 3, 1), winner, dtype=F64))


def test_the_default_threshold_agrees_with_the_grown_network() -> None:
    far = grown(MaskedHead(), 1e6, TOKENS, MODERATE) / 1e6
    assert torch.allclose(far, torch.full((1, 3, 1), 7.0, dtype=F64), atol=1e-9)


@pytest.mark.parametrize("ties", ["raise", "nan", "uniform"])
def test_every_tie_policy_is_accepted(ties: str) -> None:
    assert Settings(ties=ties).ties == ties


@pytest.mark.parametrize(("field", "value", "message"), [
    ("ties", "first", "ties must be 'raise', 'nan' or 'uniform', got 'first'"),
    ("orders", 0, "expected orders to be an integer ≥ 1, got 0"),
    ("orders", 1.5, "expected orders to be an integer ≥ 1, got 1.5"),
    ("orders", "3", "expected orders to be an integer ≥ 1, got '3' (str)"),
    ("mask_threshold", 0.0, "expected mask_threshold to be a number > 0, got 0.0"),
    ("mask_threshold", -1e9, "expected mask_threshold to be a number > 0, got -1000000000.0"),
    ("mask_threshold", math.nan, "expected mask_threshold to be a number > 0, got nan"),
    ("mask_threshold", math.inf, "expected mask_threshold to be a number > 0, got inf"),
    ("operand_rtol", 1.0, "expected operand_rtol to be a number ≥ 0 and < 1, got 1.0"),
    ("operand_rtol", -1e-12, "expected operand_rtol to be a number ≥ 0 and < 1, got -1e-12"),
    ("rtol", -1, "expected rtol (the tie tolerance) to be a number ≥ 0, got -1"),
    ("rtol", math.nan, "expected rtol (the tie tolerance) to be a number ≥ 0, got nan"),
    ("rtol", math.inf, "expected rtol (the tie tolerance) to be a number ≥ 0, got inf"),
    ("rtol", "0.1", "expected rtol (the tie tolerance) to be a real number, got '0.1' (str)"),
    ("exact_ties", "yes", "expected exact_ties to be True or False, got 'yes' (str)"),
])
def test_invalid_settings_say_what_is_expected(field: str, value: object, message: str) -> None:
    with pytest.raises(SaturationError) as err:
        Settings(**{field: value})  # type: ignore[arg-type]
    assert str(err.value) == message


@pytest.mark.parametrize(("field", "value"), [
    ("orders", 1), ("mask_threshold", 1e-30), ("operand_rtol", 0.0), ("operand_rtol", 0.999),
])
def test_boundary_settings_are_valid(field: str, value: object) -> None:
    assert getattr(Settings(**{field: value}), field) == value  # type: ignore[arg-type]


@pytest.mark.parametrize(("most", "steps"), [
    (1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (5, [1, 2, 4, 5]), (12, [1, 2, 4, 8, 12]), (16, [1, 2, 4, 8, 16]),
])
def test_orders_are_tried_doubling_up_to_the_most(most: int, steps: list[int]) -> None:
    assert _schedule(most) == steps


F32 = torch.float32


@pytest.mark.parametrize(("dtype", "orders", "levels"), [
    (F32, 1, [(F32, 1), (F64, 1)]),
    (F32, 5, [(F32, 1), (F64, 1), (F64, 2), (F64, 4), (F64, 5)]),
    (F64, 1, [(F64, 1)]),  # float64 is the widest: its leading order is tried once
    (F64, 4, [(F64, 1), (F64, 2), (F64, 4)]),
    (torch.float16, 2, [(torch.float16, 1), (F64, 1), (F64, 2)]),
])
def test_levels_start_in_the_models_dtype_then_widen_with_more_orders(
        dtype: torch.dtype, orders: int, levels: list[tuple[torch.dtype, int]]) -> None:
    limit = SaturatedModel(nn.Linear(2, 2).to(dtype), Settings(orders=orders))
    assert limit._levels() == levels


@pytest.mark.parametrize("dtype", [F32, F64])
def test_a_tie_left_in_a_recomputed_entry_is_named_by_its_place_in_the_batch(dtype: torch.dtype) -> None:
    """In float32 the tied entry alone is recomputed in float64, as entry 0 of that sub-batch; the
    message names it as entry 1 of the batch, as a float64 model's whole batch does."""
    untied = [[1.0, 0.0], [0.5, 0.0], [2.0, 3.0], [-1.0, 2.0]]
    x = torch.tensor([untied, TIED[0].tolist()], dtype=dtype)
    with pytest.raises(SaturationError) as caught:
        SaturatedModel(LowerOrderHead().to(dtype), Settings(orders=1, max_precision=0))(x)
    message = str(caught.value)
    assert "the tied positions carry different values at batch entry 1, query position 0 " in message
    assert message.endswith("(tracking 1 orders)")
