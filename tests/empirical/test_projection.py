"""Figure 1 (gradient projection at fixed accuracy) and Figure 5 (component saturation)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.measure.components import VARIANTS, build_components, component_saturation, random_inputs
from empirical.training.projection import (
    fixed_accuracy_labels,
    gradient_projection,
    gradient_projections,
    projection_curves,
)

EXACT = "feed-forward (no biases or residual)"  # LN(W₂ReLU(W₁x)): exactly 1-homogeneous but for eps


def _snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in module.state_dict().items()}


def _unchanged(module: torch.nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(t, before[name]) for name, t in module.state_dict().items())


def test_projection_of_a_logistic_regression_matches_the_hand_derivation():
    lin = torch.nn.Linear(3, 1, bias=False).double()
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    before = _snapshot(lin)
    for c in (1.0, 2.5, 10.0):
        f = c * float(lin(x).detach())
        found = gradient_projection(
            lin, c, lambda out: torch.nn.functional.binary_cross_entropy_with_logits(
                out.squeeze(), torch.tensor(1.0, dtype=torch.float64)), input=x)
        sigma = 1 / (1 + math.exp(-f))
        # L = −log σ(f), ∇L = (σ(f) − 1)·x, θᵀ∇L = (σ(f) − 1)·f (k = 1), ‖∇L‖ = |σ(f) − 1|·‖x‖
        assert found.value == pytest.approx((sigma - 1) * f, rel=1e-12)
        assert found.gradient_norm == pytest.approx((1 - sigma) * float(x.norm()), rel=1e-12)
        assert found.parameter_norm == pytest.approx(c * float(lin.weight.norm()), rel=1e-12)
    assert _unchanged(lin, before)


def test_several_losses_in_one_pass_equal_separate_passes():
    module = build_components(["attention"])["attention"]
    x = random_inputs(2, 4)
    losses = [lambda out: out.square().sum(), lambda out: out[..., 0].sum(), lambda out: out.sum() * 0]
    together = gradient_projections(module, 3.0, losses, hidden_states=x)
    for loss, found in zip(losses, together):
        alone = gradient_projection(module, 3.0, loss, hidden_states=x)
        assert found.value == pytest.approx(alone.value, rel=1e-12, abs=1e-12)
    assert together[2].value == 0.0 and together[2].gradient_norm == 0.0


def test_a_loss_that_is_not_a_scalar_or_a_bad_scale_is_refused():
    module = build_components([EXACT])[EXACT]
    x = random_inputs(1, 2)
    with pytest.raises(EmpiricalError, match="scalar"):
        gradient_projection(module, 1.0, lambda out: out, hidden_states=x)
    with pytest.raises(EmpiricalError, match="c > 0"):
        gradient_projection(module, -1.0, lambda out: out.sum(), hidden_states=x)


@given(st.integers(2, 6), st.integers(1, 40), st.integers(0, 2**16))
def test_labels_fix_the_accuracy_exactly(classes: int, samples: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(samples, classes, generator=generator)
    wrong = torch.rand(samples, generator=generator) < 0.3
    offsets = torch.randint(1, classes, (samples,), generator=generator)
    labels = fixed_accuracy_labels(logits, wrong, offsets)
    right = labels == logits.argmax(-1)
    assert torch.equal(right, ~wrong)
    assert bool(((labels >= 0) & (labels < classes)).all())


def test_curves_agree_with_an_independent_chain_rule_computation():
    """θᵀ∇L = Σ (softmax(z) − onehot(y))/n · A·(θᵀ∇h), with θᵀ∇h by forward-mode differentiation."""
    module = build_components(["feed-forward"])["feed-forward"]
    x = random_inputs(3, 4, seed=5)
    scales, accuracies = [1.0, 4.0], [1.0, 0.5]
    curves = projection_curves({"ff": module}, x, scales=scales, accuracies=accuracies, classes=4, seed=2)
    generator = torch.Generator().manual_seed(2)  # the same draws as projection_curves makes
    weight = torch.randn(4, 10, generator=generator, dtype=torch.float64) / math.sqrt(10)
    bias = torch.randn(4, generator=generator, dtype=torch.float64)
    order = torch.randperm(12, generator=generator)
    offsets = torch.randint(1, 4, (12,), generator=generator)
    for i, c in enumerate(scales):
        params = {n: c * p.detach() for n, p in module.named_parameters()}
        h, along = torch.func.jvp(lambda p: torch.func.functional_call(module, p, (x,)), (params,), (params,))
        logits = h.reshape(12, 10) @ weight.T + bias
        for a in accuracies:
            wrong = torch.zeros(12, dtype=torch.bool)
            wrong[order[: round((1 - a) * 12)]] = True
            predicted = logits.argmax(-1)
            labels = torch.where(wrong, (predicted + offsets) % 4, predicted)
            cotangent = (logits.softmax(-1) - torch.nn.functional.one_hot(labels, 4)) / 12
            expected = float((cotangent * (along.reshape(12, 10) @ weight.T)).sum())
            assert curves.projections["ff"][a][i] == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_figure_1_signs_and_equilibrium_on_the_exactly_homogeneous_variant():
    parts = build_components([EXACT])
    before = _snapshot(parts[EXACT])
    scales = [1.0 + 0.5 * i for i in range(40)]
    curves = projection_curves(parts, random_inputs(16, 8), scales=scales,
                               accuracies=[0.75, 0.9, 1.0, 0.8])
    perfect, eighty = curves.projections[EXACT][1.0], curves.projections[EXACT][0.8]
    # 100%: negative everywhere and shrinking towards 0 (Theorem 2's multiclass analogue).
    assert all(v < 0 for v in perfect)
    assert abs(perfect[-1]) < 0.2 * max(abs(v) for v in perfect)
    assert curves.equilibrium_norm(EXACT, 1.0) is None
    # 80%: positive from a small norm on, growing roughly linearly in c (Theorem 3 dominates).
    first = curves.scales.index(next(c for c, v in zip(scales, eighty) if v > 0))
    assert all(v > 0 for v in eighty[first:])
    slopes = [(eighty[j] - eighty[j - 10]) / (scales[j] - scales[j - 10]) for j in (29, 39)]
    assert slopes[1] == pytest.approx(slopes[0], rel=0.25)
    # The equilibrium norm grows with accuracy, and is c*·ρ₀.
    rho = [curves.equilibrium_norm(EXACT, a) for a in (0.75, 0.8, 0.9)]
    assert rho[0] is not None and rho[2] is not None and rho[0] <= rho[2]
    assert rho[1] == pytest.approx(scales[first] * curves.initial_norms[EXACT])
    assert _unchanged(parts[EXACT], before)
    data = curves.to_dict()
    json.dumps(data, allow_nan=False)
    (perfect_curve,) = [c for c in data["variants"][0]["curves"] if c["accuracy"] == 1.0]
    assert perfect_curve["equilibrium_norm"] is None


def test_bad_grids_are_refused():
    parts = build_components([EXACT])
    x = random_inputs(1, 2)
    with pytest.raises(EmpiricalError, match="increasing"):
        projection_curves(parts, x, scales=[2.0, 1.0], accuracies=[1.0])
    with pytest.raises(EmpiricalError, match=r"\[0, 1\]"):
        projection_curves(parts, x, scales=[1.0], accuracies=[1.5])
    with pytest.raises(EmpiricalError, match=r"expected the scale c .* to be a (real number|number ≥ 1)"):
        projection_curves(parts, x, scales=[0.5], accuracies=[1.0])
    with pytest.raises(EmpiricalError, match="expected variants"):
        build_components(["nope"])


def test_the_variants_are_the_papers_five():
    parts = build_components(seed=3)
    assert list(parts) == list(VARIANTS) and len(parts) == 5
    names = {name: {n for n, _ in module.named_parameters()} for name, module in parts.items()}
    assert "query.bias" in names["attention"] and "query.bias" not in names["attention (no biases)"]
    assert "inner.bias" in names["feed-forward"] and "inner.bias" not in names["feed-forward (no biases)"]
    x = random_inputs(1, 3)
    residual = parts["feed-forward (no biases)"]
    plain = parts[EXACT]
    plain.load_state_dict(residual.state_dict())  # the same weights: only the residual differs
    with torch.no_grad():
        assert torch.allclose(plain(x), plain.norm(plain.outer(torch.relu(plain.inner(x)))))
        assert not torch.allclose(residual(x), plain(x))
    # Seeded: the same seed gives the same weights.
    again = build_components(["attention"], seed=3)["attention"]
    assert all(torch.equal(p, q) for p, q in zip(again.parameters(), parts["attention"].parameters()))


def test_figure_5_cosines_to_the_reference_and_to_the_exact_limit():
    parts = build_components(["attention (no biases)", EXACT])
    before = {name: _snapshot(m) for name, m in parts.items()}
    x = random_inputs(2, 5)
    result = component_saturation(parts, x, [1.0, 10.0, 1000.0, 10000.0])
    for name, module in parts.items():
        assert result.limit_degrees[name] == 1.0
        reference, limit = result.to_reference[name], result.to_limit[name]
        assert reference[2] == pytest.approx(1.0, abs=1e-12)  # c = 1000 against itself
        assert limit[-1] == pytest.approx(1.0, abs=1e-6)
        # The limit is the direction of f(x; cθ) for large c: compare with c = 10⁶ directly.
        with torch.no_grad():
            far = torch.func.functional_call(module, {n: 1e6 * p for n, p in module.named_parameters()}, (x,))
            near = torch.func.functional_call(module, dict(module.named_parameters()), (x,))
        cos = torch.nn.functional.cosine_similarity(near.reshape(-1, 10), far.reshape(-1, 10), dim=-1)
        assert limit[0] == pytest.approx(float(cos.mean()), abs=1e-5)
        assert _unchanged(module, before[name])
    # With a residual, at c = 1 the output is far from saturated; without, it is exactly saturated.
    assert result.to_limit["attention (no biases)"][0] < 0.9
    assert result.to_limit[EXACT][0] == pytest.approx(1.0, abs=1e-6)
    assert "c=10000" in result.table([1.0, 10000.0])
    json.dumps(result.to_dict(), allow_nan=False)


def test_cli_writes_strict_json_with_provenance_and_both_plots(tmp_path, capsys):
    argv = ["projection", "--variants", EXACT, "--sequences", "4", "--length", "3", "--max-scale", "4",
            "--scale-step", "0.5", "--accuracies", "1.0", "0.8", "--seed", "7",
            "--json", str(tmp_path / "p.json"), "--plot", str(tmp_path / "fig1.png"),
            "--saturation-plot", str(tmp_path / "fig5.png")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ρ*(a)" in out and "Figure 5" in out and EXACT in out
    data = json.loads((tmp_path / "p.json").read_text(), parse_constant=lambda name: 1 / 0)
    assert data["schema"] == "normsat.projection-run/1"
    assert data["seeds"] == {"components": 7, "inputs": 8, "loss": 9}
    assert data["projection"]["scales"] == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    assert data["projection"]["components"][EXACT]["num_parameters"] == 220
    assert data["saturation"]["scales"][-1] == 10000.0 and "torch" in data["versions"]
    for name in ("fig1.png", "fig5.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("extra", "message"), [
    (["--accuracies", "0.9", "--plot", "x.png"], "include 1.0 and 0.8"),
    (["--no-saturation", "--saturation-plot", "x.png"], "got both"),
    (["--scale-step", "0"], "--scale-step > 0"),
    (["--accuracies", "1.0", "1.5"], "--accuracies in [0, 1]"),
])
def test_cli_bad_input_is_exit_code_two(extra, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert main(["projection", "--variants", EXACT, "--sequences", "1", "--length", "2",
                 "--max-scale", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1  # one line, before any progress bar
