"""A factor exactly zero decides its product, and a power of a vanishing base stays undetermined
everywhere else: RMSNorm at padded positions at one order, soundly."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch import nn
from transformers import GemmaConfig, GemmaModel, Phi3Config, Phi3Model

from saturated.exact_zeros import product, resolved
from saturated.rounding import Rounding
from saturated.rules import RULES, Settings
from saturated.saturate import SaturatedModel, _normalize_all
from saturated.terms import NeedsOrders, Term, UnknownDegree, add, lift, power

IDS = torch.tensor([[5, 7, 9, 11], [6, 8, 0, 0]])
MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
SMALL = {"vocab_size": 50, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 2, "num_key_value_heads": 1, "pad_token_id": 0}


def _gemma() -> nn.Module:
    torch.manual_seed(0)
    return GemmaModel(GemmaConfig(head_dim=16, **SMALL)).eval()


def _phi3() -> nn.Module:
    torch.manual_seed(0)
    return Phi3Model(Phi3Config(**SMALL)).eval()


def _outputs(limit: SaturatedModel, orders: int, ties: str = "nan") -> list[tuple[torch.Tensor, float]]:
    """The model's outputs from one float64 pass at ``orders``, normalized as a call reads them."""
    settings = replace(limit.settings, orders=orders, ties=ties)
    kwargs = {"input_ids": IDS, "attention_mask": MASK, "output_hidden_states": True, "return_dict": True}
    with torch.no_grad():
        return _normalize_all(limit._run((), kwargs, settings, torch.float64), settings, lenient=True)[0]


@pytest.mark.parametrize("build", [_gemma, _phi3])
def test_rmsnorm_of_a_zero_padding_row_is_decided_at_one_order(build) -> None:
    """The padding row is zero, so RMSNorm's base is zero at one order (ε is below the floor)
    there; the zero row times any finite scale is zero, and one order gives the two-order
    values. Before, the power raised NeedsOrders and every node carried two parts."""
    model = build()
    assert not model.embed_tokens.weight[0].any()
    limit = SaturatedModel(model, Settings(), {"hidden_states"}, "nan", read_padding=False)
    one, two = _outputs(limit, 1), _outputs(limit, 2)
    real = MASK.bool()
    for (first, degree), (second, expected) in zip(one, two):
        if not (isinstance(first, torch.Tensor) and first.dim() == 3):
            continue
        assert degree == expected
        assert not torch.isnan(first[real]).any()
        torch.testing.assert_close(first[real], second[real], rtol=1e-12, atol=1e-12)


def _exact(values: list[float], degree: float = 1.0) -> Term:
    coef = torch.tensor(values, dtype=torch.float64)
    return Term(((coef, degree),), roundings=(Rounding.of_exact(coef, degree),))


def _undetermined(n: int) -> Term:
    """A power of a base zero at every tracked order (ε below the floor): NaN, degree unknown."""
    base = Term(((torch.zeros(n, dtype=torch.float64), 2.0),), floor=0.0)
    return power(base, -0.5, 1, unknown_degree=True)


def test_zero_times_undetermined_is_zero_and_one_times_it_stays_undetermined() -> None:
    y = _undetermined(3)
    assert isinstance(y, UnknownDegree) and torch.isnan(y.lead).all()
    out = product(_exact([0.0, 1.0, 0.0]), y, 1, carried=False)
    assert isinstance(out, UnknownDegree)  # element 1 is still of unknown degree
    assert out.lead[[0, 2]].tolist() == [0.0, 0.0] and math.isnan(out.lead[1])
    bound = out.rounding(out.degree)
    assert bound is not None
    error = bound.bound(torch.float64, 0.0, carried=True).expand(3)[[0, 2]]
    assert (error <= 1e-320).all()  # only the underflow term (|x|·|y| would be NaN there)
    settled = product(_exact([0.0, 0.0, 0.0]), y, 1, carried=False)
    assert type(settled) is Term and not settled.lead.any()


def test_a_constant_multiple_of_an_undetermined_power_stays_of_unknown_degree() -> None:
    """−2·x^(−1/2) with x's base vanishing is still of unknown degree: only an exact zero factor
    settles it, and a sum with a higher part may not drop it."""
    y = RULES[torch.ops.aten.mul.Tensor](Settings(), _undetermined(2), -2.0)
    assert isinstance(y, UnknownDegree) and torch.isnan(y.lead).all()
    with pytest.raises(NeedsOrders, match="add reads it"):
        resolved(y, mark=False, use="add")
    assert type(RULES[torch.ops.aten.mul.Tensor](Settings(), _exact([0.0, 0.0]), y)) is Term


def test_a_zero_that_is_not_known_exactly_does_not_decide() -> None:
    """A zero left by rounding (no exact values), or one with something untracked below it (a
    floor above −∞), may hide a nonzero value: the product stays undetermined."""
    y = _undetermined(2)
    computed = Term(((torch.zeros(2, dtype=torch.float64), 1.0),))
    assert torch.isnan(product(computed, y, 1, carried=False).lead).all()
    floored = replace(_exact([0.0, 0.0]), floor=0.0)
    assert torch.isnan(product(floored, y, 1, carried=False).lead).all()


def test_one_times_an_ordinary_undetermined_value_stays_nan() -> None:
    """A NaN left by a tie (of known degree) is decided by an exact zero as well, and only there."""
    tied = Term(((torch.tensor([math.nan, math.nan], dtype=torch.float64), 0.0),), floor=-1.0)
    out = product(_exact([0.0, 1.0]), tied, 1, carried=False)
    assert type(out) is Term and out.lead[0] == 0 and math.isnan(out.lead[1])


class VanishingNorm(nn.Module):
    """Padding embedded as zero, then rsqrt(mean(x²) + ε) added to a projection (``added``) or
    multiplied by a row of ones (``ones``): neither is an exact zero, so one order cannot say."""

    def __init__(self, use: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.use = use
        self.embed = nn.Embedding(4, 3, padding_idx=0).double()
        self.proj = nn.Linear(3, 3, bias=False).double()
        self.register_buffer("ones", torch.ones(3, dtype=torch.float64))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        if self.use == "added":
            return self.proj(x) + scale  # a NaN of known degree would sink under proj(x)'s c²
        return self.ones * scale


@pytest.mark.parametrize("use", ["added", "ones"])
def test_a_vanishing_base_not_multiplied_by_an_exact_zero_stays_undetermined(use: str) -> None:
    ids = torch.tensor([[1, 0, 2]])  # position 1 is padding: its embedding row is zero
    limit = SaturatedModel(VanishingNorm(use), Settings(ties="nan"))
    settings = replace(limit.settings, orders=1)
    if use == "added":
        with pytest.raises(NeedsOrders, match="zero at every tracked order"):
            limit._run((ids,), {}, settings, torch.float64)
    else:  # at the output nothing can drop it: NaN where marking is allowed, else NeedsOrders
        (out,) = limit._run((ids,), {}, settings, torch.float64)
        assert torch.isnan(out.lead[0, 1]).all() and not torch.isnan(out.lead[0, [0, 2]]).any()
        with pytest.raises(NeedsOrders, match="the model's output"):
            limit._run((ids,), {}, replace(settings, ties="raise"), torch.float64)
    model = VanishingNorm(use)
    decided = SaturatedModel(model, Settings())(ids)  # more orders decide it, as f(x; cθ)/cᵈ says
    c = 1e6
    scaled = {name: c * p for name, p in model.named_parameters()}
    expected = torch.func.functional_call(model, scaled, (ids,)) / c**decided.degrees
    torch.testing.assert_close(decided.value, expected, rtol=1e-5, atol=1e-5)


def test_one_order_drops_a_leading_part_known_to_be_zero() -> None:
    """Gemma's norm scales by 1 + γ with γ initialized to 0: at one order that is 1, not 0·c."""
    gain = add(lift(1.0, 1e9), _exact([0.0, 0.0]), 1)
    assert gain.degree == 0.0 and gain.lead.tolist() == [1.0, 1.0] and gain.floor == -math.inf
    computed = Term(((torch.zeros(2, dtype=torch.float64), 1.0),), roundings=(
        Rounding(1.0, lambda: torch.ones(2, dtype=torch.float64), 3),))
    assert add(lift(1.0, 1e9), computed, 1).degree == 1.0  # rounding's zero may hide a value
