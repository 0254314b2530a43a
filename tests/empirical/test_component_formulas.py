"""The paper's sublayers computed by hand from their weights (Section 4.2, Appendix B), and the
projection experiment's edges: a zero projection is not positive, unused parameters add nothing."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from empirical.errors import EmpiricalError
from empirical.measure import components
from empirical.measure.components import (
    VARIANTS,
    ComponentSaturation,
    FeedForwardSublayer,
    SelfAttentionSublayer,
    build_components,
    component_saturation,
    random_inputs,
)
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


def _feed_forward(p: dict[str, np.ndarray], x: np.ndarray, bias: bool, residual: bool,
                  eps: float = 1e-5) -> np.ndarray:
    """LN(X + W₂·ReLU(W₁X + b₁) + b₂), without X when ``residual`` is False."""
    inner = x @ p["inner.weight"].T + (p["inner.bias"] if bias else 0)
    out = np.maximum(inner, 0) @ p["outer.weight"].T + (p["outer.bias"] if bias else 0)
    return _layer_norm(x + out if residual else out, p["norm.weight"], p["norm.bias"], eps)


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


def test_the_sublayers_default_to_the_papers_size_with_biases_and_residual() -> None:
    attention, feed_forward = SelfAttentionSublayer(), FeedForwardSublayer()
    assert {n: tuple(t.shape) for n, t in attention.named_parameters()} == {
        **{f"{m}.{k}": (10, 10) if k == "weight" else (10,)
           for m in ("query", "key", "value", "output") for k in ("weight", "bias")},
        "norm.weight": (10,), "norm.bias": (10,)}
    assert feed_forward.residual is True
    assert {n: tuple(t.shape) for n, t in feed_forward.named_parameters()} == {
        "inner.weight": (10, 10), "inner.bias": (10,), "outer.weight": (10, 10), "outer.bias": (10,),
        "norm.weight": (10,), "norm.bias": (10,)}
    wide = FeedForwardSublayer(4, 7)
    assert (tuple(wide.inner.weight.shape), tuple(wide.outer.weight.shape)) == ((7, 4), (4, 7))
    assert all(not m.training for m in build_components(hidden=4).values())


def test_components_are_float64_seeded_alone_and_leave_the_global_generator() -> None:
    state = torch.random.get_rng_state()
    built = build_components(["feed-forward", "attention"], hidden=4, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    alone = build_components(["attention"], hidden=4, seed=5)["attention"]
    assert all(torch.equal(a, b) for a, b in zip(alone.parameters(), built["attention"].parameters()))
    assert all(p.dtype == torch.float64 for m in built.values() for p in m.parameters())
    assert next(build_components(["attention"], dtype=torch.float32)["attention"].parameters()).dtype \
        == torch.float32
    with pytest.raises(EmpiricalError, match=r"expected variants among \['attention', .*got \['nope'\]"):
        build_components(["attention", "nope"])
    # by default hidden size 10 and seed 0
    default, explicit = (build_components(["attention"], **options)["attention"]
                         for options in ({}, {"hidden": 10, "seed": 0}))
    assert default.query.weight.shape == (10, 10)
    assert all(torch.equal(a, b) for a, b in zip(default.parameters(), explicit.parameters()))


def test_random_inputs_are_standard_normal_draws_from_their_own_seeded_generator() -> None:
    state = torch.random.get_rng_state()
    x = random_inputs(2, 3, 4, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    expected = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    assert torch.equal(x, expected)
    assert random_inputs(1, 2).shape == (1, 2, 10) and random_inputs(1, 2).dtype == torch.float64
    assert torch.equal(random_inputs(1, 2), torch.randn(1, 2, 10, generator=torch.Generator().manual_seed(0),
                                                        dtype=torch.float64))
    assert random_inputs(1, 2, seed=1, dtype=torch.float32).dtype == torch.float32


EXACT = "feed-forward (no biases or residual)"


def _mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return float(np.mean((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)))


def test_component_saturation_against_cosines_computed_from_the_formula() -> None:
    """LN(W₂·ReLU(W₁x)) at c·θ is LN_ε(c²z)·cγ + cβ, z = W₂·ReLU(W₁x): its limit direction is
    γ·(z − z̄)/σ(z) + β, the LayerNorm without ε (degree 1)."""
    module = build_components([EXACT], hidden=5, seed=2)[EXACT]
    with torch.no_grad():  # β away from 0 and γ away from 1, so that ε's share differs per c
        module.norm.weight.copy_(torch.linspace(0.5, 2.0, 5, dtype=torch.float64))
        module.norm.bias.copy_(torch.linspace(-1.0, 1.0, 5, dtype=torch.float64))
    x = random_inputs(2, 3, hidden=5, seed=4)
    params, xs = _numpy(module), x.numpy()
    scales = [1.0, 3.0, 30.0]
    result = component_saturation({EXACT: module}, x, scales)  # the reference c = 1000 by default

    def at(c: float, eps: float = 1e-5) -> np.ndarray:
        return _feed_forward({n: c * v for n, v in params.items()}, xs, bias=False, residual=False, eps=eps)

    assert result.scales == tuple(scales) and result.reference == 1000.0
    assert result.limit_degrees == {EXACT: 1.0}
    assert result.to_reference[EXACT] == pytest.approx([_mean_cosine(at(c), at(1000.0)) for c in scales],
                                                       abs=1e-12)
    assert result.to_limit[EXACT] == pytest.approx([_mean_cosine(at(c), at(1.0, eps=0.0)) for c in scales],
                                                   abs=1e-12)
    assert result.to_limit[EXACT][0] < result.to_limit[EXACT][1] < 1.0  # ε matters at small c
    assert result.record == {"inputs": {"shape": [2, 3, 5], "dtype": "torch.float64"},
                             "components": {EXACT: {
                                 "class": "empirical.measure.components.FeedForwardSublayer",
                                 "num_parameters": 2 * 25 + 2 * 5, "dtype": "torch.float64",
                                 "device": "cpu", "config": None, "weights": None}}}


def test_component_saturation_refuses_bad_scales_and_names_an_overflowing_component() -> None:
    parts = build_components([EXACT], hidden=4, dtype=torch.float32)
    x = random_inputs(1, 2, hidden=4, dtype=torch.float32)
    with pytest.raises(EmpiricalError, match="scale c"):
        component_saturation(parts, x, [1.0], reference=0.5)
    with pytest.raises(EmpiricalError, match="scale c"):
        component_saturation(parts, x, [0.5])
    # LayerNorm's variance grows like c⁴ here: float32 (max ~3e38) overflows at c = 1e12.
    with pytest.raises(EmpiricalError) as err:
        component_saturation(parts, x, [1.0, 1e12])
    assert str(err.value) == (f"component '{EXACT}' overflows at c = 1e+12 in torch.float32; "
                              "use float64 or smaller scales")
    with pytest.raises(EmpiricalError, match=re.escape(f"component '{EXACT}' overflows at c = 1e+20 ")):
        component_saturation(parts, x, [1.0], reference=1e20)


class Sine(torch.nn.Module):
    """sin(W·x + b): no limit rule exists for the sine."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4, dtype=torch.float64)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.linear(hidden_states))


def test_a_component_without_an_exact_limit_is_named() -> None:
    with pytest.raises(EmpiricalError) as err:
        component_saturation({"sine": Sine().eval()}, random_inputs(1, 2, hidden=4), [1.0])
    assert str(err.value).startswith("the exact limit of component 'sine' is not available: no limit rule "
                                     "for op aten.sin.default")


def _saturation() -> ComponentSaturation:
    return ComponentSaturation(
        (1.0, 10.0, 1000.0), 1000.0,
        {"attention": (0.5, 0.75, 1.0), "ff": (0.25, 0.5, 1.0)},
        {"attention": (0.125, 0.5, 0.875), "ff": (1.0, 1.0, 1.0)},
        {"attention": 1.0, "ff": 2.0}, {"seed": 3})


def test_component_saturation_dictionary_cells_and_table() -> None:
    result = _saturation()
    assert result.to_dict() == {
        "schema": "normsat.component-saturation/1", "scales": [1.0, 10.0, 1000.0],
        "reference_scale": 1000.0,
        "variants": [
            {"name": "attention", "limit_degree": 1.0, "cosine_to_reference": [0.5, 0.75, 1.0],
             "cosine_to_limit": [0.125, 0.5, 0.875]},
            {"name": "ff", "limit_degree": 2.0, "cosine_to_reference": [0.25, 0.5, 1.0],
             "cosine_to_limit": [1.0, 1.0, 1.0]},
        ],
        "seed": 3,
    }
    assert result.at(10.0) == {"attention": (0.75, 0.5), "ff": (0.5, 1.0)}
    assert result.at(1000.0) == {"attention": (1.0, 0.875), "ff": (1.0, 1.0)}
    with pytest.raises(EmpiricalError,
                       match=r"expected one of the measured scales \(1.0, 10.0, 1000.0\), got 5"):
        result.at(5.0)
    assert result.table().splitlines() == [
        "variant                c=1             c=10           c=1000",
        "             1000θ / limit    1000θ / limit    1000θ / limit",
        "attention   0.5000 / 0.1250   0.7500 / 0.5000   1.0000 / 0.8750",
        "ff          0.2500 / 1.0000   0.5000 / 1.0000   1.0000 / 1.0000",
    ]
    # only the measured scales asked for
    assert result.table([10.0, 5.0]).splitlines() == [
        "variant               c=10",
        "             1000θ / limit",
        "attention   0.7500 / 0.5000",
        "ff          0.5000 / 1.0000",
    ]
    # a name shorter than the header's: the column is the header's width
    short = ComponentSaturation((2.0,), 1000.0, {"ff": (0.5,)}, {"ff": (0.25,)}, {"ff": 1.0})
    assert short.table().splitlines() == [
        "variant              c=2",
        "           1000θ / limit",
        "ff        0.5000 / 0.2500",
    ]


def test_component_saturation_plot_shows_the_reference_and_the_difference_to_the_limit(
        tmp_path, monkeypatch) -> None:
    from matplotlib.font_manager import FontProperties

    drawn = []
    monkeypatch.setattr(components, "save_figure", lambda fig, path: drawn.append(fig) or path)
    result = _saturation()
    assert result.plot(tmp_path / "fig.png") == tmp_path / "fig.png"
    (fig,) = drawn
    assert tuple(fig.get_size_inches()) == (10.0, 4.0) and fig.dpi == 120
    left, right = fig.axes
    # side by side: one row, the reference on the left
    assert left.get_subplotspec().get_geometry()[:2] == right.get_subplotspec().get_geometry()[:2] == (1, 2)
    assert left.get_position().x1 < right.get_position().x0
    # the limit is drawn as its difference from the reference: two panels of nearly equal
    # cosines would look the same
    differences = {name: [lim - ref for lim, ref in zip(result.to_limit[name], values)]
                   for name, values in result.to_reference.items()}
    largest = max(abs(d) for values in differences.values() for d in values)
    assert largest > 0
    for ax, series, title in (
            (left, result.to_reference, "cos(f(x; cθ), f(x; 1000θ))"),
            (right, differences, "cos to the exact limit s-f(x; θ) minus cos to 1000θ\n"
                                 f"(largest difference {largest:.2g})")):
        assert ax.get_title() == title and ax.title.get_fontsize() == FontProperties(size="medium").get_size()
        assert (ax.get_xscale(), ax.get_xlabel()) == ("log", "scale c")
        assert [(line.get_label(), line.get_color()) for line in ax.lines[:2]] == [
            ("attention", "C0"), ("ff", "C1")]
        for line, values in zip(ax.lines, series.values()):
            assert list(line.get_xdata()) == list(result.scales)
            assert list(line.get_ydata()) == pytest.approx(list(values), abs=1e-15)
        grid = ax.xaxis.get_gridlines()[0]
        assert grid.get_visible() and grid.get_alpha() == 0.3
    assert (left.get_ylabel(), right.get_ylabel()) == ("mean token cosine", "difference in mean token cosine")
    assert right.get_legend() is None
    legend = left.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["attention", "ff"]
    assert legend.get_texts()[0].get_fontsize() == FontProperties(size="small").get_size()
    assert legend._loc == 4  # "lower right"
