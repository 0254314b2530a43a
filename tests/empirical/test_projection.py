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
    Projection,
    ProjectionCurves,
    equilibrium_scale,
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


def _chain_rule_curves(module, x, scales, accuracies, classes, seed):
    """θᵀ∇L = Σ (softmax(z) − onehot(y))/n · A·(θᵀ∇h), with θᵀ∇h by forward-mode differentiation,
    the readout and labels drawn as the experiment documents them (one CPU generator, in order)."""
    samples, hidden = x[..., 0].numel(), x.shape[-1]
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(classes, hidden, generator=generator, dtype=torch.float64) / math.sqrt(hidden)
    bias = torch.randn(classes, generator=generator, dtype=torch.float64)
    order = torch.randperm(samples, generator=generator)
    offsets = torch.randint(1, classes, (samples,), generator=generator)
    curves = {a: [] for a in accuracies}
    for c in scales:
        params = {n: c * p.detach() for n, p in module.named_parameters()}
        h, along = torch.func.jvp(lambda p: torch.func.functional_call(module, p, (x,)), (params,), (params,))
        logits = h.reshape(samples, hidden) @ weight.T + bias
        for a in accuracies:
            wrong = torch.zeros(samples, dtype=torch.bool)
            wrong[order[: round((1 - a) * samples)]] = True
            predicted = logits.argmax(-1)
            labels = torch.where(wrong, (predicted + offsets) % classes, predicted)
            cotangent = (logits.softmax(-1) - torch.nn.functional.one_hot(labels, classes)) / samples
            curves[a].append(float((cotangent * (along.reshape(samples, hidden) @ weight.T)).sum()))
    return curves


class _OneFeature(torch.nn.Module):
    """h = w·x on one feature: the smallest component (hidden size 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.7], dtype=torch.float64))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.w * hidden_states


@pytest.mark.parametrize(("variant", "hidden", "options"), [
    ("feed-forward", 10, {"classes": 4, "seed": 2}),
    ("feed-forward", 10, {}),                     # the documented defaults: 10 classes, seed 0
    ("one feature", 1, {"classes": 3, "seed": 5}),
])
def test_curves_agree_with_an_independent_chain_rule_computation(variant, hidden, options):
    module = _OneFeature() if variant == "one feature" else build_components([variant])[variant]
    x = random_inputs(3, 4, hidden, seed=5)
    scales, accuracies = [1.0, 4.0], [1.0, 0.5]
    curves = projection_curves({"v": module}, x, scales=scales, accuracies=accuracies, **options)
    expected = _chain_rule_curves(module, x, scales, accuracies, options.get("classes", 10),
                                  options.get("seed", 0))
    for a in accuracies:
        assert curves.projections["v"][a] == pytest.approx(expected[a], rel=1e-9, abs=1e-12)
    assert curves.initial_norms["v"] == pytest.approx(
        math.sqrt(sum(float(p.detach().double().square().sum()) for p in module.parameters())))
    classes = options.get("classes", 10)
    assert curves.record["inputs"] == {"shape": [3, 4, hidden], "dtype": "torch.float64", "samples": 12}
    assert curves.record["loss"] == {
        "readout": f"random affine layer {hidden} → {classes} (fixed, not scaled)",
        "criterion": "softmax cross-entropy, mean over samples", "seed": options.get("seed", 0)}
    assert list(curves.record["components"]) == ["v"]
    assert curves.record["components"]["v"]["num_parameters"] == sum(p.numel() for p in module.parameters())


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


def test_projection_of_an_affine_map_sums_over_weight_and_bias():
    """f = wᵀx + b is 1-homogeneous in θ = (w, b): θᵀ∇L = L'(f)·f, with L = −log σ(f), L' = σ(f) − 1,
    and ‖∇L‖ = |σ(f) − 1|·‖(x, 1)‖; the norm is ‖cθ‖ over both."""
    lin = torch.nn.Linear(3, 1).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.2, -0.4, 0.1]], dtype=torch.float64))
        lin.bias.fill_(0.3)
    x = torch.tensor([[1.0, 0.5, -2.0]], dtype=torch.float64)
    c = 2.0
    f = c * (0.2 - 0.2 - 0.2 + 0.3)
    found = gradient_projection(lin, c, lambda out: -torch.nn.functional.logsigmoid(out).sum(), input=x)
    sigma = 1 / (1 + math.exp(-f))
    assert found.value == pytest.approx((sigma - 1) * f, rel=1e-12)
    assert found.gradient_norm == pytest.approx((1 - sigma) * math.sqrt(1 + 0.25 + 4 + 1), rel=1e-12)
    assert found.parameter_norm == pytest.approx(c * math.sqrt(0.04 + 0.16 + 0.01 + 0.09), rel=1e-12)


class _WithSpare(torch.nn.Module):
    """h = w·x, and a parameter h does not read (a zero gradient, not an error)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(1.5, dtype=torch.float64))
        self.spare = torch.nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.w * input


def test_losses_and_parameters_the_output_does_not_reach_project_to_zero():
    """L = Σh² at cθ: θᵀ∇L = 2·(cw)²·Σx² from w alone (k = 2), ‖∇L‖ = 2cw·Σx²; a loss without a graph
    and one that does not read h give zeros, and the losses after them are still computed."""
    module = _WithSpare()
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    c = 2.0
    losses = [lambda out: torch.tensor(1.0, dtype=torch.float64),           # a constant
              lambda out: torch.ones((), dtype=torch.float64, requires_grad=True),  # no path to h
              lambda out: out.square().sum()]
    constant, unread, square = gradient_projections(module, c, losses, input=x)
    norm = c * math.sqrt(1.5**2 + 9 + 16)
    assert constant == unread == Projection(0.0, 0.0, pytest.approx(norm))
    assert square.value == pytest.approx(2 * (c * 1.5) ** 2 * 5, rel=1e-12)
    assert square.gradient_norm == pytest.approx(2 * c * 1.5 * 5, rel=1e-12)
    assert square.parameter_norm == pytest.approx(norm, rel=1e-12)


class _Pair(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2))

    def forward(self, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w * input, self.w


@pytest.mark.parametrize(("model", "scale", "loss", "message"), [
    (torch.nn.Linear(2, 1), 0.0, None, "expected a finite scale c > 0, got 0.0"),
    (torch.nn.Linear(2, 1), -1.0, None, "expected a finite scale c > 0, got -1.0"),
    (torch.nn.Linear(2, 1), math.inf, None, "expected a finite scale c > 0, got inf"),
    (torch.nn.Linear(2, 1), math.nan, None, "expected a finite scale c > 0, got nan"),
    (torch.nn.ReLU(), 1.0, None, "ReLU has no parameters to project onto"),
    (_Pair(), 1.0, None, "expected the model to return one tensor, got tuple"),
    (torch.nn.Linear(2, 3), 1.0, lambda out: out.sum(0), "expected the loss to be a scalar, got shape (3,)"),
])
def test_what_cannot_be_projected_is_refused_saying_why(model, scale, loss, message):
    with pytest.raises(EmpiricalError) as caught:
        gradient_projection(model, scale, loss or (lambda out: out.sum()), input=torch.ones(4, 2))
    assert str(caught.value) == message


def test_a_scale_below_one_is_a_scale():
    lin = torch.nn.Linear(2, 1, bias=False)
    x = torch.tensor([[1.0, 2.0]])
    found = gradient_projection(lin, 0.5, lambda out: out.sum(), input=x)  # θᵀ∇f = f at cθ
    assert found.value == pytest.approx(0.5 * float(lin(x).detach()), rel=1e-6)


def test_the_equilibrium_scale_is_the_first_strictly_positive_projection():
    assert equilibrium_scale([1.0, 2.0, 3.0], [-1.0, 0.0, 2.0]) == 3.0  # zero is not positive
    assert equilibrium_scale([1.0, 2.0], [-1.0, 0.0]) is None


def _hand_made() -> ProjectionCurves:
    return ProjectionCurves(
        scales=(1.0, 2.0, 4.0), accuracies=(1.0, 0.8), initial_norms={"a": 2.5, "longer name": 0.25},
        projections={"a": {1.0: (-3.0, -2.0, -1.0), 0.8: (-1.0, 0.5, 2.0)},
                     "longer name": {1.0: (-1.0, 0.0, 1.0), 0.8: (1.0, 2.0, 3.0)}},
        record={"seed": 3})


def test_curves_document_their_equilibrium_scale_and_norm():
    """ρ* = c*·ρ₀: a reaches c* = 2 at 80% (ρ* = 5), never at 100%; the longer name reaches c* = 4
    at 100% (a zero is not positive) and c* = 1 at 80%."""
    curves = _hand_made()
    assert curves.to_dict() == {
        "schema": "normsat.projection/1", "scales": [1.0, 2.0, 4.0], "accuracies": [1.0, 0.8],
        "variants": [
            {"name": "a", "initial_norm": 2.5, "curves": [
                {"accuracy": 1.0, "projections": [-3.0, -2.0, -1.0], "equilibrium_scale": None,
                 "equilibrium_norm": None},
                {"accuracy": 0.8, "projections": [-1.0, 0.5, 2.0], "equilibrium_scale": 2.0,
                 "equilibrium_norm": 5.0}]},
            {"name": "longer name", "initial_norm": 0.25, "curves": [
                {"accuracy": 1.0, "projections": [-1.0, 0.0, 1.0], "equilibrium_scale": 4.0,
                 "equilibrium_norm": 1.0},
                {"accuracy": 0.8, "projections": [1.0, 2.0, 3.0], "equilibrium_scale": 1.0,
                 "equilibrium_norm": 0.25}]}],
        "seed": 3}
    # Columns two spaces apart, names padded to the longest; ">10" where c = 4 never turns positive.
    assert curves.table().split("\n") == [
        "variant           ρ₀       a=1     a=0.8",
        "a              2.500       >10      5.00",
        "longer name    0.250      1.00      0.25",
    ]


def test_the_figure_draws_both_panels_and_the_equilibrium_norms(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgba
    from matplotlib.font_manager import FontProperties

    import empirical.training.projection as projection

    drawn = []
    original = projection.save_figure
    monkeypatch.setattr(projection, "save_figure", lambda fig, out: drawn.append(fig) or original(fig, out))
    curves = _hand_made()
    out = curves.plot(str(tmp_path / "fig1.png"))
    assert out == tmp_path / "fig1.png"
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1200, 900)
    (fig,) = drawn
    left, right, bottom = fig.axes
    # Two panels side by side above one that spans the width.
    top_left, top_right, below = (ax.get_position() for ax in (left, right, bottom))
    assert top_left.y0 == top_right.y0 > below.y1 and top_left.x1 < top_right.x0
    assert (below.x0, below.x1) == (top_left.x0, top_right.x1)
    assert below.y0 < 0.2 and top_left.y1 > 0.8  # two rows fill the figure, with margins only
    medium = FontProperties(size="medium").get_size_in_points()
    for ax, a, title in ((left, 1.0, "accuracy 100%"), (right, 0.8, "accuracy 80%")):
        assert (ax.get_title(), ax.title.get_fontsize()) == (title, medium)
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("norm c·ρ₀", "cθ₀ᵀ·∇L at cθ₀")
        *lines, zero = ax.lines
        for index, (line, name) in enumerate(zip(lines, ["a", "longer name"], strict=True)):
            rho0 = curves.initial_norms[name]
            assert list(line.get_xdata()) == [c * rho0 for c in curves.scales]
            assert list(line.get_ydata()) == list(curves.projections[name][a])
            assert (line.get_label(), to_rgba(line.get_color())) == (name, to_rgba(f"C{index}"))
        assert list(zero.get_ydata()) == [0.0, 0.0]  # a faint, thin reference line at zero
        assert to_rgba(zero.get_color()) == to_rgba("0.6") and zero.get_linewidth() < lines[0].get_linewidth()
        assert all(0 < line.get_alpha() < 1 for line in ax.get_xgridlines())
    assert (bottom.get_xlabel(), bottom.get_ylabel(), bottom.get_yscale()) == (
        "accuracy a", "equilibrium norm ρ*(a)", "log")
    assert bottom.get_title() == "first norm with a positive projection (none up to c = 4: not drawn)"
    assert bottom.title.get_fontsize() == medium
    reached_a, reached_longer = bottom.lines
    assert (list(reached_a.get_xdata()), list(reached_a.get_ydata())) == ([0.8], [5.0])
    assert (list(reached_longer.get_xdata()), list(reached_longer.get_ydata())) == ([1.0, 0.8], [1.0, 0.25])
    for index, line in enumerate(bottom.lines):
        assert line.get_marker() == "o" and to_rgba(line.get_color()) == to_rgba(f"C{index}")
    legend = bottom.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["a", "longer name"]
    assert legend.get_texts()[0].get_fontsize() == FontProperties(size="small").get_size_in_points()
    assert all(0 < line.get_alpha() < 1 for line in bottom.get_ygridlines())
    with pytest.raises(EmpiricalError) as caught:
        curves.plot(tmp_path / "x.png", panels=(1.0, 0.5))
    assert str(caught.value) == "expected panel accuracies among (1.0, 0.8), got [0.5]"


@pytest.mark.parametrize(("options", "message"), [
    ({"scales": [1.0, 1.0]}, "expected strictly increasing scales, got [1.0, 1.0]"),
    ({"scales": [2.0, 1.0]}, "expected strictly increasing scales, got [2.0, 1.0]"),
    ({"accuracies": []}, "expected accuracies in [0, 1], got []"),
    ({"accuracies": [0.5, -0.1]}, "expected accuracies in [0, 1], got [0.5, -0.1]"),
    ({"accuracies": [1.01]}, "expected accuracies in [0, 1], got [1.01]"),
    ({"classes": 1}, "expected at least 2 classes, got 1"),
])
def test_bad_grids_are_refused_naming_what_arrived(options, message):
    parts = {"one": _OneFeature()}
    arguments = {"scales": [1.0, 2.0], "accuracies": [1.0]} | options
    with pytest.raises(EmpiricalError) as caught:
        projection_curves(parts, random_inputs(1, 2, 1), **arguments)
    assert str(caught.value) == message


def test_the_grid_edges_are_allowed():
    """Accuracy 0 (every label wrong) and 1, and two classes (one wrong label per sample)."""
    module, x = _OneFeature(), random_inputs(1, 4, 1)
    curves = projection_curves({"one": module}, x, scales=[1.0], accuracies=[0.0, 1.0], classes=2)
    expected = _chain_rule_curves(module, x, [1.0], [0.0, 1.0], classes=2, seed=0)
    for a in (0.0, 1.0):
        assert curves.projections["one"][a] == pytest.approx(expected[a], rel=1e-9, abs=1e-12)


def test_the_progress_bar_over_components_is_shown_only_when_asked(capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    x = random_inputs(1, 2, 1)
    projection_curves({"one": _OneFeature()}, x, scales=[1.0], accuracies=[1.0])
    assert capsys.readouterr().err == ""
    projection_curves({"one": _OneFeature(), "two": _OneFeature()}, x, scales=[1.0], accuracies=[1.0],
                      progress=True)
    shown = capsys.readouterr().err
    assert "gradient projection: 100%" in shown and "2/2" in shown
    assert "variant/s" in shown or "s/variant" in shown  # the rate, in components


def test_a_projection_that_overflows_its_dtype_is_refused_naming_where():
    """c·w = 0.7·10³⁹ overflows float32 (largest ≈ 3.4·10³⁸): a NaN projection is not a measurement;
    at c = 1 the same component measures."""
    module = _OneFeature().float()
    with pytest.raises(EmpiricalError) as caught:
        projection_curves({"big": module}, torch.ones(1, 2, 1), scales=[1.0, 1e39], accuracies=[1.0, 0.5])
    assert str(caught.value) == ("the projection of 'big' at c = 1e+39, a = 1 is not finite in "
                                 "torch.float32; use float64 or smaller scales")
