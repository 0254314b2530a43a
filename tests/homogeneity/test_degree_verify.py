"""The checks themselves: decay classification, Euler's identity, formal proofs."""

from __future__ import annotations

import math

import pytest
import sympy
import torch
from torch import nn

from homogeneity import Degree, Grade, GraphBuilder, HomogeneityError, analyze
from homogeneity.degree import K
from homogeneity.report import HomogeneityReport
from homogeneity.verify import EulerCheck, check_euler, check_scaling, classify_decay, prove
from homogeneity.verify.scaling import DEFAULT_SCALES, _Scaler, off_degree, scaled_outputs

# Every widening of the scales ends (at WIDEST_SCALE at the latest): one that never stops fails.
pytestmark = pytest.mark.usefixtures("ends_within_a_minute")


@pytest.mark.parametrize(("changes", "expected"), [
    ([0.0] * 10, "exact"),
    ([3e-14] * 10, "exact"),
    ([0.3 * 2.0**-i for i in range(10)], "polynomial"),
    ([0.3 * 4.0**-i + 0.01 * 2.0**-i for i in range(10)], "polynomial"),
    ([1e-3 * 16.0**-i for i in range(10)], "polynomial"),  # c⁻⁴ reaching rounding
    ([math.exp(-(2.0**i)) for i in range(10)], "exponential"),
    ([0.9, 0.8, 0.9, 0.7, 0.5, 1e-9, 0.0, 0.0, 0.0, 0.0], "exponential"),
    ([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], "not homogeneous"),
    ([0.1 * 2.0**i for i in range(6)], "not homogeneous"),
])
def test_classify_decay(changes: list[float], expected: str) -> None:
    assert classify_decay(changes) == expected


def test_wrong_degree_is_caught_numerically() -> None:
    g = GraphBuilder()
    g.output(g.linear(g.relu(g.linear(g.input("x", (3, 2)), 3)), 2))
    report = g.analyze()
    (right,) = check_scaling(g.module(), *g.example_inputs(), report=report)
    assert (right.degree, right.measured) == (2, "exact")
    # Tamper with the derived degree: scaling exposes it.
    report.outputs["output"] = Degree.exact(3)
    (check,) = check_scaling(g.module(), *g.example_inputs(), report=report)
    # f(cθ)/c³ halves at every doubling: the measurement names the degree it found.
    assert check.measured == off_degree(2.0) and not check.matches
    assert check.measured == "not homogeneous of the claimed degree (measured degree ≈ 2)"


class Float32Norm(nn.Module):
    """(x·W)⁵ (degree 5, as a SwiGLU block's output) normalized by its root mean square computed in
    float32, as Hugging Face's RMSNorm does whatever the model's dtype: at large c the square
    overflows, rsqrt(inf) = 0 and the output drops to exactly zero."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3, bias=False)
        self.weight = nn.Parameter(torch.full((3,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x) ** 5
        rms = torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype)
        return self.weight * h * rms


def claiming(degree: int) -> HomogeneityReport:
    """A one-output report claiming ``degree``, asymptotic."""
    return HomogeneityReport(outputs={"output": Degree.of(degree, Grade.ASYMPTOTIC)}, nodes=[],
                             modules=[])


@pytest.mark.parametrize("claimed", [0, 2])
def test_an_output_that_overflows_to_zero_confirms_no_wrong_degree(claimed: int) -> None:
    torch.manual_seed(0)
    model = Float32Norm().double()
    x = torch.randn(4, 3, dtype=torch.float64)
    # The true degree is 1 (the weight; the normalized part is 0-homogeneous up to eps, whose
    # share falls like c⁻¹⁰ to rounding within a few doublings: at least as firm as claimed).
    (right,) = check_scaling(model, x, report=claiming(1))
    assert right.measured in ("polynomial", "exponential") and right.scales[-1] == 1024
    (wrong,) = check_scaling(model, x, report=claiming(claimed))
    # f(cθ)/cᵏ changes by |1 − 2^(k−1)| per doubling (from 512 to 1024, say) until the float32
    # square overflows (it grows like c¹⁰) and the rows drop to zero: that zero must not read as
    # an output that settled, confirming the wrong degree.
    assert wrong.changes[9] == pytest.approx(abs(1 - 2.0 ** (claimed - 1)), rel=1e-4)
    assert wrong.scales[-1] < 2.0**20 and not wrong.matches


def test_euler_identity_holds_for_exact_and_fails_for_asymptotic() -> None:
    x = torch.randn(4, 3, dtype=torch.float64)
    exact = nn.Sequential(nn.Linear(3, 5, bias=False), nn.ReLU(), nn.Linear(5, 2, bias=False))
    (check,) = check_euler(exact.double(), x)
    assert check.degree == 2 and check.holds(), check.error
    biased = nn.Sequential(nn.Linear(3, 5, bias=False), nn.ReLU(), nn.Linear(5, 2)).double()
    (check,) = check_euler(biased, x)
    assert check.grade.value == "asymptotic" and check.error > 1e-3


class UnscaledShift(nn.Module):
    """{"h": histc(x) (no rule: no degree), "y": w·x + v (+ shift)} with w scaled and v fixed."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((3,), 0.1, dtype=torch.float64))
        self.v = nn.Parameter(torch.full((3,), 0.02, dtype=torch.float64))

    def forward(self, x: torch.Tensor, shift: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        y = self.w * x + self.v
        return {"h": torch.histc(x, bins=3), "y": y if shift is None else y + shift}


@pytest.mark.parametrize("shift", [None, 1.0])
def test_the_euler_error_is_the_relative_residual_of_each_output_with_a_degree(shift) -> None:
    """f(c) = c·w·x + v (+ s): θᵀ∇f = w·x and k = 1, so the residual is −(v + s) and the error
    ‖v + s‖/‖w·x + v + s‖ (below 1 without s: no floor of 1 under the norm). The histogram has
    no degree and is skipped, without ending the loop before y."""
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    kwargs = {} if shift is None else {"shift": torch.full((3,), shift, dtype=torch.float64)}
    f = [0.1 * xi + 0.02 + (shift or 0.0) for xi in x.tolist()]
    expected = math.sqrt(3) * (0.02 + (shift or 0.0)) / math.sqrt(sum(v * v for v in f))
    (check,) = check_euler(UnscaledShift(), x, params="w", **kwargs)
    assert (check.output, check.degree, check.grade) == ("y", 1, Grade.ASYMPTOTIC)
    assert check.error == pytest.approx(expected, rel=1e-12) and not check.holds()


@pytest.mark.parametrize(("params", "shift"), [("w", None), ("w", 1.0), (None, 1.0)])
def test_scaling_analyses_and_scales_the_given_parameters_with_the_keyword_inputs(params, shift) -> None:
    """y = A + B with A scaled and B not (A = w·x, B = v + s for params="w"; A = w·x + v, B = s
    with every parameter): asymptotically 1-homogeneous, g(c) = A + B/c changes by
    ‖B‖/(2c) / ‖A + B/(2c)‖ from c to 2c, a power law. The histogram has no degree: skipped."""
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    kwargs = {} if shift is None else {"shift": torch.full((3,), shift, dtype=torch.float64)}
    s = shift or 0.0
    a = [0.1 * xi + (0.0 if params == "w" else 0.02) for xi in x.tolist()]
    b = 0.02 + s if params == "w" else s
    expected = [math.sqrt(3) * b / (2 * c) / math.sqrt(sum((ai + b / (2 * c)) ** 2 for ai in a))
                for c in DEFAULT_SCALES[:-1]]
    (check,) = check_scaling(UnscaledShift(), x, params=params, **kwargs)
    assert (check.output, check.degree, check.grade) == ("y", 1, Grade.ASYMPTOTIC)
    assert check.changes == pytest.approx(expected, rel=1e-9)
    assert check.measured == "polynomial" and check.matches


class Copies(nn.Module):
    """The same exactly 1-homogeneous w·x under several output names."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((2,), 0.5, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {name: self.w * x for name in ("symbolic", "piecewise", "none", "y")}


def test_only_outputs_with_one_numeric_degree_are_measured() -> None:
    """A claimed output the model does not return, a degree in k, one with cases, and no degree
    are all skipped, wherever they stand in the report: only y is measured."""
    report = HomogeneityReport(outputs={
        "ghost": Degree.exact(1),
        "symbolic": Degree.exact(K + 1),
        "piecewise": Degree.piecewise((Degree.exact(1), sympy.Eq(K, 1)),
                                      (Degree.of(1, Grade.APPROXIMATE), sympy.Eq(K, 3))),
        "none": Degree.none("no rule"),
        "y": Degree.exact(1),
    }, nodes=[], modules=[])
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    checks = check_scaling(Copies(), x, report=report)
    assert [(c.output, c.degree, c.scales, c.measured) for c in checks] == [("y", 1, DEFAULT_SCALES, "exact")]


def test_scales_that_do_not_double_are_refused() -> None:
    report = HomogeneityReport(outputs={"y": Degree.exact(1)}, nodes=[], modules=[])
    with pytest.raises(HomogeneityError, match=r"scales that double at each step, got \[1\.0, 3\.0\]"):
        check_scaling(Copies(), torch.ones(2, dtype=torch.float64), report=report, scales=[1.0, 3.0])


def test_a_single_scale_measures_no_change() -> None:
    report = HomogeneityReport(outputs={"y": Degree.exact(1)}, nodes=[], modules=[])
    (check,) = check_scaling(Copies(), torch.ones(2, dtype=torch.float64), report=report, scales=[4.0])
    assert (check.output, check.scales, check.changes, check.measured) == ("y", (4.0,), (), "not homogeneous")


class Lookup(nn.Module):
    """Rows of a table picked by integer ids, their columns reordered by an integer buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.arange(15, dtype=torch.float32).reshape(5, 3))
        self.register_buffer("order", torch.tensor([2, 0, 1]))

    def forward(self, ids: torch.Tensor) -> dict[str, object]:
        return {"rows": self.table[ids][..., self.order], "ids": ids, "count": ids.numel()}


def test_integer_inputs_and_buffers_stay_integers_and_only_float_outputs_are_kept() -> None:
    model = Lookup()
    ids = torch.tensor([4, 1])
    out = scaled_outputs(model, (ids,), {}, {"table"}, 3.0)
    rows = 3.0 * torch.arange(15, dtype=torch.float64).reshape(5, 3)[[4, 1]][:, [2, 0, 1]]
    assert list(out) == ["rows"] and out["rows"].dtype == torch.float64
    assert torch.equal(out["rows"], rows)
    assert model.order.dtype == torch.int64 and model.table.dtype == torch.float32


def test_the_scaled_state_is_written_into_one_buffer_per_parameter() -> None:
    """A float c reuses the same float64 buffer at every scale; a tensor c (which may need grad)
    gets a new tensor and leaves the buffer alone; parameters that do not scale are shared."""
    model = nn.Linear(3, 2)
    weight = model.weight.detach().double()
    scaler = _Scaler(model, {"weight"})
    at2, at4 = scaler.state(2.0), scaler.state(4.0)
    assert at2["weight"].data_ptr() == at4["weight"].data_ptr()
    assert torch.equal(at4["weight"], 4.0 * weight) and at4["weight"].dtype == torch.float64
    assert at4["bias"] is scaler.base["bias"] and torch.equal(at4["bias"], model.bias.double())
    c = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    at3 = scaler.state(c)["weight"]
    assert at3.requires_grad and at3.data_ptr() != at4["weight"].data_ptr()
    assert torch.equal(at3.detach(), 3.0 * weight) and torch.equal(at4["weight"], 4.0 * weight)


def test_keyword_inputs_reach_the_derived_degree() -> None:
    """w·x alone is exactly of degree 1 (θᵀ∇f = f); w·x + s with a keyword input s is only
    asymptotically so, and its residual is −s."""
    class Shifted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.full((3,), 0.5, dtype=torch.float64))

        def forward(self, x: torch.Tensor, shift: torch.Tensor | None = None) -> torch.Tensor:
            return self.w * x if shift is None else self.w * x + shift

    x = torch.tensor([1.0, 2.0, -2.0], dtype=torch.float64)
    (plain,) = check_euler(Shifted(), x)
    assert (plain.grade, plain.holds()) == (Grade.EXACT, True)
    (shifted,) = check_euler(Shifted(), x, shift=torch.ones(3, dtype=torch.float64))
    f = [0.5 * xi + 1.0 for xi in x.tolist()]
    assert shifted.grade is Grade.ASYMPTOTIC
    assert shifted.error == pytest.approx(math.sqrt(3) / math.sqrt(sum(v * v for v in f)), rel=1e-12)


def test_an_output_the_given_report_has_no_degree_for_is_skipped() -> None:
    report = analyze(nn.Linear(3, 2, bias=False), torch.randn(2, 3))  # its output is "output"
    assert check_euler(UnscaledShift(), torch.randn(3, dtype=torch.float64), report=report) == []


def test_euler_holds_up_to_its_tolerance_inclusive() -> None:
    assert EulerCheck("y", sympy.Integer(1), Grade.EXACT, 1e-9).holds()
    assert not EulerCheck("y", sympy.Integer(1), Grade.EXACT, 2e-9).holds()
    assert EulerCheck("y", sympy.Integer(1), Grade.EXACT, 2e-9).holds(tol=2e-9)


def test_euler_with_a_parameter_subset() -> None:
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2, bias=False)).double()
    x = torch.randn(4, 3, dtype=torch.float64)
    # Scaling only the last weight: exactly 1-homogeneous, bias or not.
    (check,) = check_euler(model, x, params="2.weight")
    assert (check.degree, check.holds()) == (1, True)


def test_model_is_left_untouched() -> None:
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh()).train()
    before = [p.detach().clone() for p in model.parameters()]
    check_scaling(model, torch.randn(2, 3))
    check_euler(model, torch.randn(2, 3))
    assert model.training
    assert all(torch.equal(a, b) and b.dtype == torch.float32
               for a, b in zip(before, model.parameters()))


def test_formal_proof_of_a_bias_free_relu_network() -> None:
    mlp = nn.Sequential(nn.Linear(2, 3, bias=False), nn.ReLU(), nn.Linear(3, 2, bias=False),
                        nn.ReLU(), nn.Linear(2, 1, bias=False))
    (proof,) = prove(mlp, torch.randn(1, 2))
    assert (proof.degree, proof.proved) == (3, True)


def test_formal_proof_refutes_exactness_of_a_late_bias() -> None:
    mlp = nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU(), nn.Linear(2, 1))
    (proof,) = prove(mlp, torch.randn(1, 2))
    assert proof.grade is not Grade.EXACT
    c = sympy.Symbol("c", positive=True)
    assert proof.residual.has(c)


def test_formal_proof_of_a_product() -> None:
    g = GraphBuilder()
    x = g.input("x", (1, 2))
    g.output(g.mul(g.linear(x, 2), g.linear(x, 2)))
    (proof,) = prove(g.module(), *g.example_inputs())
    assert (proof.degree, proof.proved) == (2, True)


def test_formal_proof_rejects_ops_it_cannot_evaluate() -> None:
    with pytest.raises(HomogeneityError, match=r"aten\.elu\.default"):
        prove(nn.Sequential(nn.Linear(2, 2), nn.ELU()), torch.randn(1, 2))
