"""saturate() on small networks: the limit against the network at growing c, in float64."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import saturate


def grown(net: nn.Module, c: float, *args: torch.Tensor) -> torch.Tensor:
    scaled = {name: c * p for name, p in net.named_parameters()}
    return torch.func.functional_call(net, scaled, args)


class Block(nn.Module):
    """Residual sum of a sublayer (linear → activation → linear) and a LayerNorm, optionally with
    a softmax attention in front: the pieces of a transformer layer."""

    def __init__(self, width: int, activation: nn.Module, attention: bool, norm: bool) -> None:
        super().__init__()
        self.attention = attention
        self.qkv = nn.Linear(width, 3 * width)
        self.inner = nn.Linear(width, 2 * width)
        self.act = activation
        self.outer = nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width) if norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.attention:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            x = x + torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
        return self.norm(x + self.outer(self.act(self.inner(x))))


ACTIVATIONS = {"relu": nn.ReLU(), "gelu": nn.GELU(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(),
               "silu": nn.SiLU()}


@given(st.sampled_from(sorted(ACTIVATIONS)), st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_limit_is_approached_as_c_grows(activation: str, attention: bool, norm: bool,
                                        seed: int) -> None:
    torch.manual_seed(seed)
    net = Block(4, ACTIVATIONS[activation], attention, norm).double()
    x = torch.randn(3, 4, dtype=torch.float64)
    out = saturate(net, x)(x)
    limit, degree = out.value, out.degrees
    errors = []
    with torch.no_grad():
        for c in (1e4, 1e8):
            normalized = grown(net, c, x) / c ** degree
            errors.append(float((normalized - limit).abs().max() / limit.abs().max()))
    # Degrees are integers, so what the limit leaves out is O(1/c) relative: c·error stays bounded
    # (factor 2 for the c⁻² terms at c = 10⁴; the e^(−Θ(c)) of saturating ops only helps).
    assert 1e8 * errors[1] <= 2 * 1e4 * errors[0] + 1e-6


def test_degree_counts_the_weight_layers_that_act() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 3, bias=False), nn.ReLU(), nn.Linear(3, 2)).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    out = saturate(net, x)(x)
    assert out.degrees == 2.0
    assert torch.allclose(out.value, net(x) - net[2].bias, rtol=1e-12)
    # With every ReLU off, only the last bias is left: degree 1, and it is the limit.
    with torch.no_grad():
        net[0].weight.copy_(-x[:1].sign().expand(3, 3))  # every row: w·x = −Σ|xᵢ| < 0
    off = saturate(net, x[:1])(x[:1])
    assert off.degrees == 1.0 and torch.equal(off.value, net[2].bias.detach().expand(1, 2))


class Head(nn.Module):
    """One attention head whose two best keys differ by a tiny margin in score."""

    def __init__(self, margin: float) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.tensor([[1.0]], dtype=torch.float64))
        self.keys = nn.Parameter(torch.tensor([[1.0], [1.0 - margin], [0.0]], dtype=torch.float64))
        self.values = nn.Parameter(torch.tensor([[1.0], [-1.0], [5.0]], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = (x * self.query) @ self.keys.T
        return torch.softmax(scores, dim=-1) @ self.values


def test_small_margin_makes_c_1000_wrong_and_the_limit_right() -> None:
    head = Head(margin=1e-6)
    x = torch.ones(1, 1, dtype=torch.float64)
    limit = saturate(head, x)(x)
    # Scores have degree 2: at c = 1000 the margin is 1e-6·1e6 = 1, far from hard attention.
    at_1000 = grown(head, 1e3, x) / 1e3
    assert limit.value.item() == 1.0
    assert abs(at_1000.item() - 1.0) > 0.4
    assert abs(grown(head, 1e5, x).item() / 1e5 - 1.0) < 1e-6


def test_exact_tie_is_uniform() -> None:
    head = Head(margin=0.0)  # both best keys equal at every order: weights ½, ½
    x = torch.ones(1, 1, dtype=torch.float64)
    assert saturate(head, x)(x).value.item() == 0.0


class LowerOrderHead(nn.Module):
    """Keys W₂W₁x + b: two keys tie in the degree-2 part and differ only in the bias (degree 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(1, 1, bias=False, dtype=torch.float64)
        self.second = nn.Linear(1, 3, dtype=torch.float64)
        with torch.no_grad():
            self.first.weight.fill_(1.0)
            self.second.weight.copy_(torch.tensor([[1.0], [1.0], [-1.0]]))
            self.second.bias.copy_(torch.tensor([0.2, 0.5, 0.0]))
        self.values = nn.Parameter(torch.tensor([[1.0], [-1.0], [5.0]], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.second(self.first(x))
        return torch.softmax(scores, dim=-1) @ self.values


def test_tie_broken_by_a_lower_order_follows_it() -> None:
    head = LowerOrderHead()
    x = torch.ones(1, 1, dtype=torch.float64)
    out = saturate(head, x)(x)
    assert out.value.item() == -1.0 and out.orders > 1  # the larger bias wins
    assert abs(grown(head, 1e4, x).item() / 1e4 + 1.0) < 1e-9


def test_tie_beyond_the_tracked_orders_is_reported_with_its_node() -> None:
    x = torch.ones(1, 1, dtype=torch.float64)
    with pytest.raises(SaturationError, match=r"hard attention tie.*node 'softmax'"):
        saturate(LowerOrderHead(), x, settings=Settings(orders=1))


class RunningMaximum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummax(self.linear(x), dim=-1).values


def test_op_without_rule_names_op_and_module() -> None:
    with pytest.raises(SaturationError, match=r"no limit rule for op aten\.cummax.*<root>"):
        saturate(RunningMaximum(), torch.randn(2, 3))


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y if bool(y.sum() > 0) else -y


def test_untraceable_model_is_a_clear_error() -> None:
    with pytest.raises(SaturationError, match=r"cannot saturate.*Branchy"):
        saturate(Branchy(), torch.randn(2, 2))


def test_non_finite_parameters_are_rejected() -> None:
    net = nn.Linear(2, 2)
    with torch.no_grad():
        net.weight[0, 0] = float("nan")
    with pytest.raises(SaturationError, match="parameter 'weight' has non-finite"):
        saturate(net, torch.randn(1, 2))


def test_model_is_not_modified() -> None:
    net = Block(4, nn.GELU(), attention=True, norm=True)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    saturate(net, torch.randn(3, 4))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
