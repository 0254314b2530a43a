"""check_scaling near a tie: a small margin widens the scales instead of a false "not homogeneous"."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from homogeneity.analysis import analyze
from homogeneity.degree import Degree, Grade
from homogeneity.report import HomogeneityReport
from homogeneity.verify import check_scaling, classify_decay
from homogeneity.verify.scaling import DEFAULT_SCALES, SHIFT_SCALE, UNDECIDED, WIDEST_SCALE

# Every widening of the scales ends (at WIDEST_SCALE at the latest): one that never stops fails.
pytestmark = pytest.mark.usefixtures("ends_within_a_minute")


def tanh_unit() -> nn.Module:
    """tanh(w·x) with w = (1, −1): 0-homogeneous approximately, its margin on x is |x₁ − x₂|."""
    model = nn.Sequential(nn.Linear(2, 1, bias=False), nn.Tanh()).double()
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[1.0, -1.0]]))
    return model


def test_small_margin_is_settled_by_wider_scales() -> None:
    # The second input's margin is 1e-5: at c ≤ 1024, tanh(c·1e-5) is still linear in c.
    x = torch.tensor([[1.0, 0.0], [0.5, 0.5 - 1e-5]], dtype=torch.float64)
    (check,) = check_scaling(tanh_unit(), x)
    assert check.grade == Grade.APPROXIMATE and check.measured == "exponential" and check.matches
    assert check.scales[-1] > DEFAULT_SCALES[-1]
    # At the default scales alone, the same changes read as "not homogeneous": the false negative.
    assert classify_decay(check.changes[:len(DEFAULT_SCALES) - 1]) == "not homogeneous"
    assert all(b == 2 * a for a, b in itertools.pairwise(check.scales))


def test_margin_too_small_to_decide_is_said() -> None:
    x = torch.tensor([[1.0, 0.0], [0.5, 0.5 - 1e-14]], dtype=torch.float64)
    (check,) = check_scaling(tanh_unit(), x)
    assert check.measured == UNDECIDED and not check.matches and check.scales[-1] == WIDEST_SCALE
    assert (check.output, check.degree, check.grade) == ("output", 0, Grade.APPROXIMATE)
    assert len(check.changes) == len(check.scales) - 1


def counting_forwards(model: nn.Module, most: int) -> list[int]:
    """A one-element counter of ``model``'s forward calls; a call beyond ``most`` raises."""
    calls = [0]

    def count(module: nn.Module, args: object) -> None:
        calls[0] += 1
        if calls[0] > most:
            raise RuntimeError(f"forward call {calls[0]}: at most {most} expected")

    model.register_forward_pre_hook(count)
    return calls


@pytest.mark.parametrize(("margin", "scales", "measured"), [
    (1.0, DEFAULT_SCALES, "exponential"),  # settled at the given scales: no more forwards
    # never settles (only the near-tie row still changes): each doubling out to WIDEST_SCALE
    # exactly, from scales that stop at 2⁷, so that the last widening is 2³ and not 2¹⁰
    (1e-14, (16.0, 32.0, 64.0, 128.0), UNDECIDED),
])
def test_the_model_runs_once_at_each_scale_up_to_the_widest(margin, scales, measured) -> None:
    x = torch.tensor([[1.0, 0.0], [0.5, 0.5 - margin]], dtype=torch.float64)
    model = tanh_unit()
    report = analyze(model, x)
    expected = scales if measured != UNDECIDED else tuple(2.0**i for i in range(4, 41))
    calls = counting_forwards(model, most=len(expected))
    (check,) = check_scaling(model, x, report=report, scales=scales)
    assert (check.measured, check.scales, calls[0]) == (measured, expected, len(expected))


def test_clear_margin_keeps_the_default_scales() -> None:
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    (check,) = check_scaling(tanh_unit(), x)
    assert check.measured == "exponential" and check.scales == DEFAULT_SCALES


def test_a_wrong_degree_is_named_and_stops_the_widening() -> None:
    # tanh(w·x) is 0-homogeneous; claimed 1, f(cθ)/c halves at every doubling from c = 1 on.
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    claimed = HomogeneityReport(outputs={"output": Degree.of(1, Grade.APPROXIMATE)}, nodes=[], modules=[])
    (check,) = check_scaling(tanh_unit(), x, report=claimed)
    assert check.measured == "not homogeneous of the claimed degree (measured degree ≈ 0)"
    assert not check.matches and check.scales[-1] == SHIFT_SCALE < WIDEST_SCALE


def test_one_input_near_a_tie_is_not_taken_for_another_degree() -> None:
    # Alone, an input with margin 1e-5 makes tanh linear (degree 1) up to c ~ 1e5: that is a
    # late start of saturation, settled by wider scales, not a degree of 1.
    x = torch.tensor([[0.5, 0.5 - 1e-5]], dtype=torch.float64)
    (check,) = check_scaling(tanh_unit(), x)
    assert check.measured == "exponential" and check.matches
    assert max(check.changes[:10]) > 0.49  # a steady 2¹ per doubling over the default scales
