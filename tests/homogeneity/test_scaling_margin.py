"""check_scaling near a tie: a small margin widens the scales instead of a false "not homogeneous"."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from homogeneity.degree import Grade
from homogeneity.verify import check_scaling, classify_decay
from homogeneity.verify.scaling import DEFAULT_SCALES, UNDECIDED, WIDEST_SCALE


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


def test_clear_margin_keeps_the_default_scales() -> None:
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    (check,) = check_scaling(tanh_unit(), x)
    assert check.measured == "exponential" and check.scales == DEFAULT_SCALES
