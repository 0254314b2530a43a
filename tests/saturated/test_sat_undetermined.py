"""``SaturatedModel(..., undetermined="nan")``: an output the most orders do not decide is NaN for
exactly the batch entries (and vectors) it is undetermined in; every other value is the limit."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.rounding import Rounding
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, _final, _normalized
from saturated.terms import Term


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
    assert out.orders == 2  # see test_a_zero_test_no_order_can_settle_stops_at_two_orders


def test_raise_keeps_a_vector_within_rounding_of_zero_at_the_batch_degree() -> None:
    """In a batch, the output's degree is set by the entries that lead (2: −x₁ ≠ 0 for the first
    and last), and the middle entry's value at that degree is its limit, −x₁ = 0, up to rounding;
    only its direction is undetermined, which ``"nan"`` marks and ``"raise"`` does not test (alone,
    the entry's degree itself is undetermined: see the test above)."""
    kept = SaturatedModel(Cancelling(), Settings())(X)
    marked = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X)
    assert kept.degrees[0] == marked.degrees[0] == 2.0
    assert kept.value[0][:, 0].tolist() == [-1.0, 0.0, -5.0]
    assert math.isnan(marked.value[0][1, 0])


def test_a_zero_test_no_order_can_settle_stops_at_two_orders() -> None:
    """Issue 24: W₂h's operand h carries rounding error in, so the exact step cannot tell its
    computed 0 from a tiny value, and from two orders on more orders change neither the part nor
    its bound: the entry is final there (a 4-layer T5 spent most of its time on 4, 8 and 16
    orders that could not help). With ``"raise"`` the message still names 16 orders."""
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2])
    assert out.orders == 2 and out.refined == (0,)
    assert math.isnan(out.value[0].item()) and out.value[1].tolist() == [[3.0, 3.0]]


def test_an_output_undetermined_in_every_entry_has_no_degree() -> None:
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2])
    assert math.isnan(out.value[0].item()) and math.isnan(out.degrees[0])
    assert out.value[1].tolist() == [[3.0, 3.0]] and out.degrees[1] == 1.0
    both = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2].expand(2, 2))
    assert torch.isnan(both.value[0]).all() and math.isnan(both.degrees[0])


def test_the_policy_is_checked() -> None:
    with pytest.raises(SaturationError, match="undetermined must be 'raise' or 'nan'"):
        SaturatedModel(Cancelling(), Settings(), undetermined="zero")


def test_only_a_zero_test_the_exact_step_cannot_settle_is_final() -> None:
    """Final: vectors whose bound is positive somewhere; not final where the exact step decides
    (exact values with no carried error), nor a vector known to be zero (bound 0), whose batch
    entry computed alone lets a lower part lead."""
    coef = torch.zeros(2, 3, dtype=torch.float64)
    bound = torch.tensor([[0.0, 1e-9, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    carried = Rounding(1.0, lambda: coef.abs(), 1,
                       carried=lambda dtype, rtol: torch.zeros(3, dtype=dtype))
    final = _final(coef, bound, carried, Settings())
    assert final is not None and final.tolist() == [[True] * 3, [False] * 3]
    assert _final(coef, bound, Rounding.of_exact(coef, 1.0), Settings()) is None


def test_nan_in_one_entry_leaves_the_zero_test_of_the_others() -> None:
    """Issue 24: a tie left NaN in one entry of a 4-sentence T5 batch switched off the zero test of
    the whole output, so another entry's hidden states, within rounding of zero, passed as
    determined (the same sentence alone was undetermined). Each vector is tested on its own."""
    coef = torch.tensor([[math.nan, 1.0], [1e-20, 0.0], [1.0, 2.0]], dtype=torch.float64)
    term = Term(((coef, 1.0),), roundings=(Rounding(1.0, lambda: torch.ones_like(coef), 1),))
    value, degree, has_nan, _ = _normalized(term, 0, Settings(), vectors=True)
    assert degree == 1.0 and has_nan
    assert math.isnan(value[0, 0]) and value[0, 1] == 1.0  # the tie's element stays as it is
    assert torch.isnan(value[1]).all() and value[2].tolist() == [1.0, 2.0]
