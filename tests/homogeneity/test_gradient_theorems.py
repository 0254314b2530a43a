"""Theorems 2–4 and Lemma 9 on k-homogeneous networks with binary cross-entropy.

For an exactly k-homogeneous scalar f (one output entry of a Table-1 network of known degree) and
L = BCE(σ(f), y), the paper's proofs rest on three identities, checked here with bounds, not signs:

- Lemma 9 (Euler): θᵀ∇f = k·f for every output entry.
- Theorems 2, 3: θᵀ∇L = (σ(f) − y)·k·f. On a correct prediction it lies in
  [−k|f|e^{−|f|}, −k|f|e^{−|f|}/2] (the paper's −k|f|/exp(Θ(|f|)) with its constants); on a wrong
  one in [k|f|/2, k|f|).
- Theorem 4: at 100% accuracy, ‖∇L(cθ)‖ = σ(−cᵏ|f|)·c^{k−1}‖∇f(θ)‖ ≤ c^{k−1}‖∇f(θ)‖e^{−cᵏ|f|},
  which vanishes as the norm c‖θ‖ grows.

The checks use the degree the strategies derive by hand; a wrong degree, or a network that is not
exactly homogeneous, makes them fail (tested below), so they test the premise as well.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from empirical.training.projection import gradient_projection
from homogeneity import Grade
from homogeneity.strategies import NetworkSpec, inputs, networks

RTOL = 1e-7


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(b), scale) + 1e-300


def _bce(index: tuple[int, int], label: float):
    target = torch.tensor(label, dtype=torch.float64)
    return lambda out: torch.nn.functional.binary_cross_entropy_with_logits(out[index], target)


def check_gradient_theorems(model: torch.nn.Module, x: torch.Tensor, index: tuple[int, int], k: int) -> None:
    """Assert Lemma 9 and Theorems 2–4 for output entry ``index`` of ``model`` with degree ``k``."""
    out, along = _derivative_along_parameters(model, x)
    size = float(out.abs().max())
    # Lemma 9, every entry: the derivative along θ is k·f.
    assert torch.allclose(along, k * out, rtol=RTOL, atol=RTOL * size), (k, along, out)

    f = float(out[index])
    for label in (0.0, 1.0):
        found = gradient_projection(model, 1.0, _bce(index, label), x=x)
        sigma = 1.0 / (1.0 + math.exp(-f))
        assert _close(found.value, (sigma - label) * k * f, k * abs(f)), (label, found.value)
        if (f > 0) == (label == 1.0):  # Theorem 2: correct prediction
            decay = k * abs(f) * math.exp(-abs(f))
            assert -decay * (1 + RTOL) <= found.value <= -decay / 2 * (1 - RTOL) < 0
        else:  # Theorem 3: wrong prediction
            assert k * abs(f) / 2 * (1 - RTOL) <= found.value < k * abs(f) * (1 + RTOL)

    # Theorem 4 along the ray cθ, c = 2^{i/k} ≥ 1, while cᵏ|f| ≤ 20 (σ(−20) ≈ 2e-9 is still exact
    # to rounding in float64), with the correct label.
    correct = 1.0 if f > 0 else 0.0
    base = gradient_projection(model, 1.0, lambda o: o[index], x=x).gradient_norm  # ‖∇f(θ)‖
    norms = []
    for i in range(64):
        c = 2.0 ** (i / k)
        margin = c**k * abs(f)
        if margin > 20:
            break
        step = gradient_projection(model, c, _bce(index, correct), x=x).gradient_norm
        expected = c ** (k - 1) * base / (1.0 + math.exp(margin))
        assert _close(step, expected, 1e-12 * base), (c, step, expected)
        assert step <= c ** (k - 1) * base * math.exp(-margin) * (1 + RTOL)
        norms.append(step)
    assert len(norms) >= 2 and norms[-1] < norms[0], norms


def _derivative_along_parameters(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor,
                                                                                  torch.Tensor]:
    """f and θᵀ∇f for every output entry, by plain reverse-mode autograd on a copy of θ (a road
    independent of :func:`gradient_projection`)."""
    params = {name: p.detach().clone().requires_grad_(True) for name, p in model.named_parameters()}
    out = torch.func.functional_call(model, params, (x,))
    along = torch.empty_like(out)
    for entry in range(out.numel()):
        grads = torch.autograd.grad(out.flatten()[entry], list(params.values()), retain_graph=True,
                                    allow_unused=True)
        along.view(-1)[entry] = sum(float((p.detach() * g).sum()) for p, g in zip(params.values(), grads)
                                    if g is not None)
    return out.detach(), along


def _drawn_case(spec: NetworkSpec, data: st.DataObject) -> tuple[torch.nn.Module, torch.Tensor,
                                                                 tuple[int, int]]:
    model = spec.build().module()
    x = data.draw(inputs((spec.rows, spec.width)))
    index = (data.draw(st.integers(0, spec.rows - 1)), data.draw(st.integers(0, spec.width - 1)))
    with torch.no_grad():
        out = model(x)
    f = float(out[index])
    # A ReLU or an eps-free LayerNorm of a constant row can zero an entry or make it NaN; f ≠ 0 is
    # the paper's assumption, and |f| ≤ 10 leaves room to follow Theorem 4 before σ rounds to 1.
    assume(bool(torch.isfinite(out).all()) and 1e-3 < abs(f) <= 10.0)
    return model, x, index


exact_networks = networks(max_layers=4).filter(
    lambda spec: spec.expected[1] == Grade.EXACT and spec.expected[0] >= 1)


@given(exact_networks, st.data())
def test_theorems_2_to_4_hold_on_exactly_homogeneous_networks(spec: NetworkSpec, data: st.DataObject) -> None:
    model, x, index = _drawn_case(spec, data)
    check_gradient_theorems(model, x, index, spec.expected[0])


@given(exact_networks, st.data(), st.sampled_from([-1, 1]))
def test_a_planted_wrong_degree_fails_the_checks(spec: NetworkSpec, data: st.DataObject, shift: int) -> None:
    model, x, index = _drawn_case(spec, data)
    wrong = spec.expected[0] + shift
    assume(wrong >= 1)
    with pytest.raises(AssertionError):
        check_gradient_theorems(model, x, index, wrong)


@pytest.mark.parametrize("layers", [("linear", "linear+bias"), ("linear", "residual"),
                                    ("linear", "relu", "tanh", "linear")])
def test_networks_that_are_not_exactly_homogeneous_fail_the_checks(layers: tuple[str, ...]) -> None:
    spec = NetworkSpec(layers, width=3, rows=2, seed=3)
    degree, grade = spec.expected
    assert grade != Grade.EXACT  # asymptotic or approximate: the premise of the theorems fails
    g = spec.build()
    with pytest.raises(AssertionError):
        check_gradient_theorems(g.module(), g.example_inputs()[0], (0, 0), degree)


def test_a_hand_made_two_layer_relu_network_passes() -> None:
    spec = NetworkSpec(("linear", "relu", "linear"), width=3, rows=2, seed=1)
    assert spec.expected == (2, Grade.EXACT)
    g = spec.build()
    model, x = g.module(), g.example_inputs()[0]
    with torch.no_grad():
        sizes = model(x).abs().flatten()
    # The smallest nonzero |f|: Theorem 4 has room to show before σ rounds to 1.
    entry = int(torch.where(sizes > 0, sizes, torch.inf).argmin())
    check_gradient_theorems(model, x, divmod(entry, 3), 2)
