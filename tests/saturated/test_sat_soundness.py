"""Sign decisions whose inputs pass through sums with exact values, selections, splits,
reductions or underflow: each must follow the exact value, not the computed one.

The weights below make W·x cancel: exactly −7.3·10⁻⁶, computed as +1.2·10⁻⁴ in float32, so a
limit that trusts the computed sign gets tanh → +1 where the exact limit is −1. The premise is
checked on this machine's arithmetic first.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import saturate

X = [3.586989402770996, -1.8312901258468628, 1.5987002849578857]
W = [-356.01080322265625, 3.255015326431021e-05, 798.7782592773438]
EXACT = sum(Fraction(w) * Fraction(x) for w, x in zip(W, X))


class Cancelling(nn.Module):
    """tanh (or sigmoid) of W·x, reached through the op named by ``how``."""

    def __init__(self, how: str, activation: nn.Module) -> None:
        super().__init__()
        self.how, self.activation = how, activation
        self.linear = nn.Linear(3, 2, bias=how == "bias")
        self.weight = nn.Parameter(torch.tensor(W))
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor([W, W]))
            if self.linear.bias is not None:
                self.linear.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "sum":
            h = (x * self.weight).sum(-1, keepdim=True)
        elif self.how == "mean":
            h = (x * self.weight).mean(-1, keepdim=True)
        elif self.how == "chunk":
            h = self.linear(x).chunk(2, -1)[0]
        elif self.how == "cat":
            h = torch.cat([self.linear(x)[..., :1], self.linear(x)[..., 1:]], -1)
        elif self.how == "masked_fill":
            h = self.linear(x).masked_fill(torch.tensor([False, True]), 5.0)[..., :1]
        else:  # "bias": a zero bias added to W·x
            h = self.linear(x)
        return self.activation(h)


def test_premise_float32_reverses_the_sign() -> None:
    assert EXACT < 0
    assert float((torch.tensor(X) * torch.tensor(W)).sum()) > 0
    assert float(nn.functional.linear(torch.tensor([X]), torch.tensor([W]))) > 0


@pytest.mark.parametrize("how", ["bias", "sum", "mean", "chunk", "cat", "masked_fill"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sign_follows_the_exact_value(how: str, dtype: torch.dtype) -> None:
    x = torch.tensor([X], dtype=dtype)
    tanh = saturate(Cancelling(how, nn.Tanh()).to(dtype).eval(), x)(x).value
    sigmoid = saturate(Cancelling(how, nn.Sigmoid()).to(dtype).eval(), x)(x).value
    assert tanh[0, 0].item() == -1.0
    assert sigmoid[0, 0].item() == 0.0


@pytest.mark.parametrize(("dtype", "size"), [(torch.float32, 1e-23), (torch.float16, 1e-4),
                                             (torch.bfloat16, 1e-23)])
def test_a_product_that_underflows_is_not_an_exact_zero(dtype: torch.dtype, size: float) -> None:
    """w·x > 0 underflows to 0 in ``dtype``; the limit of tanh(c²·w·x) is still +1."""
    model = nn.Sequential(nn.Linear(1, 1, bias=False), nn.Tanh()).to(dtype).eval()
    with torch.no_grad():
        model[0].weight.fill_(size)
    x = torch.full((1, 1), size, dtype=dtype)
    assert model[0](x).item() == 0.0  # the premise: computed as zero
    assert saturate(model, x)(x).value.item() == 1.0


class Switchable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.activation: nn.Module = nn.ReLU()
        self.factor = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x)) * self.factor


def test_a_changed_module_or_attribute_is_never_served_a_stale_graph() -> None:
    torch.manual_seed(0)
    model = Switchable().eval()
    x = torch.randn(2, 3)
    limit = saturate(model, x)
    before = limit(x).value
    model.activation = nn.Tanh()  # no parameters change, the graph does
    assert torch.equal(limit(x).value, torch.sign(model.linear(x)))
    model.factor = -1.0  # a plain attribute the export baked in
    assert torch.equal(saturate(model, x)(x).value, -torch.sign(model.linear(x)))
    model.activation, model.factor = nn.ReLU(), 1.0
    assert torch.equal(limit(x).value, before)


class Chain(nn.Module):
    """tanh of (h, −h) with h = W·x from a first linear layer that cancels: the second layer's own
    rounding is tiny, the error h carries in from the first is what reverses the sign."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(3, 1, bias=False)
        self.second = nn.Linear(1, 2, bias=False)
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([W]))
            self.second.weight.copy_(torch.tensor([[1.0], [-1.0]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.second(self.first(x)))


def test_carried_errors_certify_a_chain_of_cancellation() -> None:
    """With ``carried=True`` the decision counts the error h carries in, so float32 recomputes in
    float64, where the limit follows the exact sign of h."""
    x = torch.tensor([X])
    model = Chain().eval()
    out = saturate(model, x, settings=Settings(carried=True))(x)
    assert out.value.tolist() == [[-1.0, 1.0]] and out.refined == (0,)


class CancelledToZero(nn.Module):
    """tanh((k·a + b) − k·a + x) with a = 2³⁰, b = 2⁻³⁰: the growing part is k·a + b − k·a = b > 0
    exactly, but k·a + b rounds to k·a in float32 and float64 alike, so it is computed as 0."""

    def __init__(self, k: float, route: str = "sum") -> None:
        super().__init__()
        self.k, self.route = k, route
        self.a = nn.Parameter(torch.tensor([2.0**30]))
        self.b = nn.Parameter(torch.tensor([2.0**-30]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        growing = (self.k * self.a + self.b) - self.k * self.a
        if self.route == "where":  # the computed 0 passes through a selection...
            growing = torch.where(x > 0, 2 * growing, growing)
        elif self.route == "cat":  # ...or a concatenation and a split
            growing = torch.cat([growing, growing]).chunk(2)[0]
        return torch.tanh(growing + x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_growing_part_computed_as_zero_is_not_a_known_zero(dtype: torch.dtype) -> None:
    # The sum's exact values are its summands': their exact sum b > 0 decides tanh → +1, where a
    # computed 0 taken as a known zero would let x = −1 lead (tanh(−1) ≈ −0.76).
    net, x = CancelledToZero(1.0).to(dtype), torch.tensor([-1.0], dtype=dtype)
    with torch.no_grad():
        assert float((net.a + net.b) - net.a) == 0.0, "premise: the growing part computes as 0"
    assert saturate(net, x)(x).value.tolist() == [1.0]


@pytest.mark.parametrize("route", ["sum", "where", "cat"])
def test_a_computed_zero_no_exact_step_can_settle_is_undetermined(route: str) -> None:
    # 3·a is known exactly only up to the factor 3, so the sum has no exact values: the computed 0
    # is within rounding of zero and its sign undetermined, in float64 too, whatever it passes
    # through on the way.
    net, x = CancelledToZero(3.0, route), torch.tensor([-1.0])
    with pytest.raises(SaturationError, match="within rounding of zero"):
        saturate(net, x, settings=Settings(max_precision=0))
    out = saturate(net, x, settings=Settings(ties="nan", max_precision=0))(x)
    assert torch.isnan(out.value).all()


class ZeroAndCancelled(nn.Module):
    """Outputs (z, w·x − w·x) with z a parameter that is all zero: an exact zero, and a zero that
    only the exact values of the products show to be exact."""

    def __init__(self, cancelled: bool = True) -> None:
        super().__init__()
        self.cancelled = cancelled
        self.z = nn.Parameter(torch.zeros(2))
        self.w = nn.Parameter(torch.tensor([2.0, -3.0]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not self.cancelled:
            return (self.z.clone(),)
        return self.z.clone(), self.w * x - self.w * x


def test_an_output_that_is_zero_without_error_is_not_recomputed_and_an_exact_zero_is_settled() -> None:
    x = torch.tensor([[0.1, 0.7]])
    alone = saturate(ZeroAndCancelled(cancelled=False), x)(x)
    assert alone.refined == () and alone.degrees == (-math.inf,) and alone.value[0].tolist() == [0.0, 0.0]
    # w·x − w·x computes as 0 within a bound of its rounding: float32 cannot tell, and in float64
    # the exact step shows it is 0 (no part below either).
    out = saturate(ZeroAndCancelled(), x)(x)
    assert out.refined == (0,) and out.degrees == (-math.inf, -math.inf)
    assert out.value[1].tolist() == [[0.0, 0.0]]
