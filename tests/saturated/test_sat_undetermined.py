"""``SaturatedModel(..., undetermined="nan")``: an output the most orders do not decide is NaN for
exactly the batch entries (and vectors) it is undetermined in; every other value is the limit."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import SaturatedModel


class Cancelling(nn.Module):
    """h = W₁x (degree 1, with a rounding bound), out = W₂h = h₀ − h₁ = −x₁ (degree 2): for x₁ = 0
    it is computed as an exact 0 from rounded operands, so no precision can tell it from a tiny
    nonzero value, which would lead (the issue-24 message: "within rounding of zero at its leading
    degree")."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(2, 2, bias=False)
        self.second = nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
            self.second.weight.copy_(torch.tensor([[1.0, -1.0]]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.first(x)
        return self.second(h), h


X = torch.tensor([[3.0, 1.0], [3.0, 0.0], [2.0, 5.0]])


def test_raise_is_the_default_and_names_the_output() -> None:
    with pytest.raises(SaturationError, match="output 0 is within rounding of zero at its leading "
                                              r"degree 2 \(tracking 16 orders\)"):
        SaturatedModel(Cancelling(), Settings())(X[1:2])


def test_an_undetermined_entry_is_nan_in_that_output_only() -> None:
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X)
    first, hidden = out.value
    assert first[:, 0].tolist()[0] == -1.0 and math.isnan(first[1, 0]) and first[2, 0] == -5.0
    assert hidden.tolist() == [[3.0, 4.0], [3.0, 3.0], [2.0, 7.0]]  # determined everywhere
    assert out.degrees == (2.0, 1.0) and out.refined == (1,)


def test_an_output_undetermined_in_every_entry_has_no_degree() -> None:
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2])
    assert math.isnan(out.value[0].item()) and math.isnan(out.degrees[0])
    assert out.value[1].tolist() == [[3.0, 3.0]] and out.degrees[1] == 1.0
    both = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2].expand(2, 2))
    assert torch.isnan(both.value[0]).all() and math.isnan(both.degrees[0])


def test_the_policy_is_checked() -> None:
    with pytest.raises(SaturationError, match="undetermined must be 'raise' or 'nan'"):
        SaturatedModel(Cancelling(), Settings(), undetermined="zero")
