"""The paper's sublayers computed by hand from their weights (Section 4.2, Appendix B), and the
projection experiment's edges: a zero projection is not positive, unused parameters add nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from empirical.measure.components import VARIANTS, build_components, random_inputs
from empirical.training.projection import ProjectionCurves, equilibrium_scale, gradient_projection


def _numpy(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: t.detach().numpy() for name, t in module.state_dict().items()}


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)  # the biased variance, as LayerNorm's
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def _attention(p: dict[str, np.ndarray], x: np.ndarray, bias: bool) -> np.ndarray:
    """LN(X + W·softmax(QKᵀ/√d)V + b), d the hidden size."""
    def linear(name: str, v: np.ndarray) -> np.ndarray:
        return v @ p[f"{name}.weight"].T + (p[f"{name}.bias"] if bias else 0)

    q, k, v = linear("query", x), linear("key", x), linear("value", x)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(x.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return _layer_norm(x + linear("output", weights @ v), p["norm.weight"], p["norm.bias"])


def _feed_forward(p: dict[str, np.ndarray], x: np.ndarray, bias: bool, residual: bool) -> np.ndarray:
    """LN(X + W₂·ReLU(W₁X + b₁) + b₂), without X when ``residual`` is False."""
    inner = x @ p["inner.weight"].T + (p["inner.bias"] if bias else 0)
    out = np.maximum(inner, 0) @ p["outer.weight"].T + (p["outer.bias"] if bias else 0)
    return _layer_norm(x + out if residual else out, p["norm.weight"], p["norm.bias"])


HAND = {
    "attention": lambda p, x: _attention(p, x, bias=True),
    "attention (no biases)": lambda p, x: _attention(p, x, bias=False),
    "feed-forward": lambda p, x: _feed_forward(p, x, bias=True, residual=True),
    "feed-forward (no biases)": lambda p, x: _feed_forward(p, x, bias=False, residual=True),
    "feed-forward (no biases or residual)": lambda p, x: _feed_forward(p, x, bias=False, residual=False),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_variant_computes_its_formula(name: str) -> None:
    module = build_components([name], hidden=6, seed=3)[name]
    params = _numpy(module)
    # the LayerNorm's affine parameters away from their initial 1 and 0, so each one counts
    params["norm.weight"] = params["norm.weight"] * 0 + np.linspace(0.5, 2.0, 6)
    params["norm.bias"] = params["norm.bias"] * 0 + np.linspace(-1.0, 1.0, 6)
    with torch.no_grad():
        module.norm.weight.copy_(torch.from_numpy(params["norm.weight"]))
        module.norm.bias.copy_(torch.from_numpy(params["norm.bias"]))
    x = random_inputs(2, 5, hidden=6, seed=1)
    with torch.no_grad():
        ours = module(x).numpy()
    assert np.allclose(ours, HAND[name](params, x.numpy()), rtol=1e-12, atol=1e-12)
    has_bias = any(n.endswith(".bias") and not n.startswith("norm") for n in params)
    assert has_bias == ("no biases" not in name)


def test_a_zero_projection_is_not_yet_positive() -> None:
    assert equilibrium_scale([1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]) == 3.0
    assert equilibrium_scale([1.0, 2.0], [-1.0, 0.0]) is None
    curves = ProjectionCurves((1.0, 2.0, 4.0), (0.9,), {"v": 1.5}, {"v": {0.9: (-2.0, 0.0, 3.0)}})
    assert curves.equilibrium_norm("v", 0.9) == 4.0 * 1.5


class UsesOnlyW(torch.nn.Module):
    """f = w·x with a second parameter u the output does not read."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
        self.u = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.w * x).sum()


def test_a_parameter_the_output_does_not_read_adds_nothing_but_its_norm() -> None:
    """At cθ with L = f: θᵀ∇L = (cw)·x = c·f(x; θ) (degree 1 in w), ‖∇L‖ = ‖x‖, ‖cθ‖ = c·‖(w, u)‖."""
    x = torch.tensor([0.5, 4.0], dtype=torch.float64)
    c = 2.5
    found = gradient_projection(UsesOnlyW(), c, lambda out: out, x=x)
    assert found.value == pytest.approx(c * (0.5 - 8.0))
    assert found.gradient_norm == pytest.approx(math.hypot(0.5, 4.0))
    assert found.parameter_norm == pytest.approx(c * math.sqrt(1 + 4 + 9))
    unread = gradient_projection(UsesOnlyW(), c, lambda out: torch.zeros((), dtype=torch.float64), x=x)
    assert (unread.value, unread.gradient_norm) == (0.0, 0.0)
    assert unread.parameter_norm == pytest.approx(c * math.sqrt(14))
