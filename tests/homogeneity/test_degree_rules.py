"""Every rule against numbers: derived degree and grade, then f(x; cθ) vs cᵏ f(x; θ) in float64.

Each case is a tiny module whose forward exercises one rule; the expected degree and grade are
derived by hand in the case's comment. A meta-test fails when a registered rule has no case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch import nn

import homogeneity
from homogeneity import Grade
from homogeneity.analysis import META_KEY, analyze_program
from homogeneity.rules import RULES
from homogeneity.verify import check_scaling

aten = torch.ops.aten


class OpModule(nn.Module):
    """forward(x) = fn(x, p0, p1, ...) with standard-normal float64 parameters."""

    def __init__(self, fn: Callable[..., torch.Tensor], shapes: list[tuple[int, ...]]) -> None:
        super().__init__()
        self.fn = fn
        generator = torch.Generator().manual_seed(0)
        self.ps = nn.ParameterList(
            nn.Parameter(torch.randn(s, generator=generator, dtype=torch.float64) + 0.5)
            for s in shapes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, *self.ps)


@dataclass(frozen=True)
class RuleCase:
    rule: str
    fn: Callable[..., torch.Tensor]
    shapes: list[tuple[int, ...]]
    degree: object
    grade: Grade
    x: Callable[[], torch.Tensor] = lambda: torch.linspace(-1.3, 1.7, 12,
                                                          dtype=torch.float64).reshape(4, 3)


V3, M33 = (3,), (3, 3)

CASES = [
    # x·W: 0 + 1; bias 1: Affine 0 → 1, exact.
    RuleCase("linear", lambda x, w, b: F.linear(x, w, b), [M33, V3], 1, Grade.EXACT),
    # (x·a)·W + b: degree 2 plus a degree-1 bias: asymptotic 2.
    RuleCase("addmm", lambda x, a, w, b: torch.addmm(b, x * a, w), [V3, M33, V3], 2,
             Grade.ASYMPTOTIC),
    RuleCase("matmul", lambda x, a, w: (x * a) @ w, [V3, M33], 2, Grade.EXACT),
    RuleCase("einsum", lambda x, a, w: torch.einsum("ij,jk->ik", x * a, w), [V3, M33], 2,
             Grade.EXACT),
    RuleCase("mul", lambda x, a, b: x * a * b * 0.5, [V3, V3], 2, Grade.EXACT),
    # (x·a)/b: 1 − 1 = 0, exact.
    RuleCase("div", lambda x, a, b: (x * a) / b, [V3, V3], 0, Grade.EXACT),
    # floor(2x) of the input is a constant; times a: 1.
    RuleCase("rounding_division", lambda x, a: torch.div(x * 4, 2, rounding_mode="floor") * a,
             [V3], 1, Grade.EXACT),
    RuleCase("embedding", lambda x, w: F.embedding((x > 0).long(), w), [(2, 3)], 1, Grade.EXACT),
    RuleCase("add", lambda x, a, b: x * a + b, [V3, V3], 1, Grade.EXACT),
    RuleCase("positively_homogeneous", lambda x, a: torch.relu(-(x * a)).abs(), [V3], 1,
             Grade.EXACT),
    RuleCase("pow_scalar", lambda x, a: (x * a) ** 3, [V3], 3, Grade.EXACT),
    RuleCase("rsqrt", lambda x, a: torch.rsqrt((x * a) ** 2 + 0.0), [V3], -1, Grade.EXACT),
    RuleCase("sqrt", lambda x, a: torch.sqrt((x * a) ** 2), [V3], 1, Grade.EXACT),
    RuleCase("reciprocal", lambda x, a: torch.reciprocal(x * a), [V3], -1, Grade.EXACT),
    # exp of the input is a constant; times a: 1.
    RuleCase("transcendental", lambda x, a: torch.exp(x) * a, [V3], 1, Grade.EXACT),
    RuleCase("saturating", lambda x, a: torch.tanh(x * a), [V3], 0, Grade.APPROXIMATE),
    # sign(c·xa) = sign(xa): exact 0; then times a: 1.
    RuleCase("comparison", lambda x, a: (x * a > 0).double() * a, [V3], 1, Grade.EXACT),
    RuleCase("where", lambda x, a, b: torch.where(x > 0, x * a, x * b), [V3, V3], 1, Grade.EXACT),
    RuleCase("masked_fill", lambda x, a: (x * a).masked_fill(x > 0, 0.0), [V3], 1, Grade.EXACT),
    RuleCase("elementwise_extremum", lambda x, a, b: torch.maximum(x * a, x * b), [V3, V3], 1,
             Grade.EXACT),
    RuleCase("clamp", lambda x, a: (x * a).clamp(min=0), [V3], 1, Grade.EXACT),
    RuleCase("softmax", lambda x, a: torch.softmax(x * a * 3, -1), [V3], 0, Grade.APPROXIMATE),
    # a router's top-k of probabilities: values of degree 0, approximately (no tie at θ)
    RuleCase("top_k", lambda x, a: torch.topk(torch.softmax(x * a * 3, -1), 2, -1).values, [V3], 0,
             Grade.APPROXIMATE),
    RuleCase("log_softmax", lambda x, a: torch.log_softmax(x * a * 3, -1), [V3], 1,
             Grade.APPROXIMATE),
    RuleCase("gelu", lambda x, a: F.gelu(x * a * 3), [V3], 1, Grade.APPROXIMATE),
    # softmax(QKᵀ)·V with Q, K, V of degree 1: 0 + 1 = 1, approximate.
    RuleCase("scaled_dot_product_attention",
             lambda x, q, k, v: F.scaled_dot_product_attention(x @ q * 3, x @ k, x @ v),
             [M33, M33, M33], 1, Grade.APPROXIMATE),
    # LN with eps = 0.5 of a degree-1 input, then γ, β: 1, asymptotic (eps is lower order).
    RuleCase("layer_norm", lambda x, a, g, b: F.layer_norm(x * a, (3,), g, b, eps=0.5),
             [V3, V3, V3], 1, Grade.ASYMPTOTIC),
    RuleCase("native_layer_norm",
             lambda x, a, g, b: torch.native_layer_norm(x * a, [3], g, b, 0.0)[0],
             [V3, V3, V3], 1, Grade.EXACT),
    RuleCase("rms_norm", lambda x, a, g: F.rms_norm(x * a, (3,), g, eps=0.5), [V3, V3], 1,
             Grade.ASYMPTOTIC),
    RuleCase("reduction", lambda x, a: (x * a).sum(-1) + (x * a).amax(-1), [V3], 1, Grade.EXACT),
    # Differences of degree-1 entries, with a degree-1 prepended column: 1, exact.
    RuleCase("difference", lambda x, a: torch.diff(x * a, dim=-1, prepend=(x * a)[:, :1]), [V3],
             1, Grade.EXACT),
    RuleCase("variance", lambda x, a: (x * a).var(-1), [V3], 2, Grade.EXACT),
    RuleCase("rearrangement", lambda x, a: (x * a).t().reshape(2, 6)[:, 1:].contiguous(), [V3],
             1, Grade.EXACT),
    # argmax(c·xa) = argmax(xa): exact 0; times a: 1.
    RuleCase("positions", lambda x, a: torch.argmax(x * a, -1, keepdim=True) * a, [V3], 1,
             Grade.EXACT),
    RuleCase("indexing", lambda x, a: (x * a)[torch.tensor([2, 0])], [V3], 1, Grade.EXACT),
    # one_hot of a router's choice argmax(c·xa) = argmax(xa): exact 0; times a: 1.
    RuleCase("counting", lambda x, a: F.one_hot(torch.argmax(x * a, -1), 3).double() * a, [V3], 1,
             Grade.EXACT),
    # x·b with x·a added at the chosen rows (exact degree-0 positions): 1 + 1, exact.
    RuleCase("scattering", lambda x, a, b: (x * b).scatter_add(
        0, torch.argmax(x * a, -1, keepdim=True).expand(-1, 3), x * a), [V3, V3], 1, Grade.EXACT),
    # [x·a, x]: degrees 1 and 0, so the constant block is lower order.
    RuleCase("concatenation", lambda x, a: torch.cat([x * a, x], -1), [V3], 1, Grade.ASYMPTOTIC),
    RuleCase("pad", lambda x, a: F.pad(x * a, (1, 1)), [V3], 1, Grade.EXACT),
    RuleCase("constant", lambda x, a: x * a * torch.ones_like(x) * torch.arange(1, 4), [V3], 1,
             Grade.EXACT),
]


def _rule_targets(rule_name: str) -> set[object]:
    return {t for t, fn in RULES.items() if fn.__name__ == rule_name}


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_degree_matches_scaling(case: RuleCase) -> None:
    model, x = OpModule(case.fn, case.shapes), case.x()
    report = homogeneity.analyze(model, x)
    exported = {n.target for n in homogeneity.export_model(model, (x,)).graph.nodes}
    assert exported & _rule_targets(case.rule), f"the case never reaches rule {case.rule}"
    out = report.outputs["output"]
    assert (out.value, out.grade) == (sympy.sympify(case.degree), case.grade), out.reason
    (check,) = check_scaling(model, x, report=report)
    assert check.matches, (check.measured, check.changes)


def test_every_registered_rule_has_a_numerical_case() -> None:
    tested = {c.rule for c in CASES}
    untested = sorted({fn.__name__ for fn in RULES.values()} - tested)
    assert not untested, f"rules without a numerical test: {untested}"


def test_transcendental_of_a_growing_input_has_no_degree() -> None:
    report = homogeneity.analyze(OpModule(lambda x, a: torch.exp(x * a), [V3]), CASES[0].x())
    assert report.grade is Grade.NONE
    assert "aten.exp.default" in report.weakenings[0].op


def test_clamp_to_fixed_bounds_of_a_growing_input_has_no_degree() -> None:
    report = homogeneity.analyze(OpModule(lambda x, a: (x * a).clamp(-1, 1), [V3]), CASES[0].x())
    assert report.grade is Grade.NONE


def test_comparison_with_a_nonzero_threshold_settles_exponentially() -> None:
    model = OpModule(lambda x, a: (x * a > 0.3).double(), [V3])
    x = CASES[0].x()
    report = homogeneity.analyze(model, x)
    assert report.grade is Grade.APPROXIMATE
    (check,) = check_scaling(model, x, report=report)
    assert check.matches, check.changes


def test_register_rule_extends_the_table() -> None:
    model = OpModule(lambda x, a: torch.special.erfinv(torch.tanh(x * a) * 0.5), [V3])
    x = CASES[0].x()
    assert homogeneity.analyze(model, x).grade is Grade.NONE
    target = torch.ops.aten.special_erfinv.default

    def erfinv(z: homogeneity.Degree) -> homogeneity.Degree:
        """erfinv of a scale-invariant input is scale-invariant."""
        return z

    homogeneity.register_rule(target, erfinv)
    try:
        report = homogeneity.analyze(model, x)
    finally:
        del RULES[target]
    assert (report.degree, report.grade) == (0, Grade.APPROXIMATE)


def test_layer_norm_eps_dominates_a_shrinking_input() -> None:
    # LN(z/c) with eps: (z/c − μ)/√(σ²/c² + eps) ≈ (z − μ)/(c√eps): degree −1, asymptotic.
    model = OpModule(lambda x, a: F.layer_norm(x / a, (3,), eps=0.5), [V3])
    x = CASES[0].x()
    report = homogeneity.analyze(model, x)
    assert (report.degree, report.grade) == (-1, Grade.ASYMPTOTIC)
    (check,) = check_scaling(model, x, report=report)
    assert check.measured == "polynomial", check.changes


def test_saturating_function_of_a_shrinking_input_has_no_degree() -> None:
    report = homogeneity.analyze(OpModule(lambda x, a: torch.tanh(x / a), [V3]), CASES[0].x())
    assert report.grade is Grade.NONE
    assert "shrinking input" in report.weakenings[0].degree.reason


def test_the_pass_writes_every_degree_to_node_meta() -> None:
    model, x = OpModule(lambda x, a: torch.relu(x * a).sum(-1), [V3]), CASES[0].x()
    program = homogeneity.export_model(model, (x,))
    report = analyze_program(program)
    computed = [n for n in program.graph.nodes if n.op == "call_function"]
    assert [str(n.meta[META_KEY]) for n in computed] == ["1 (exact)"] * 3
    assert [e.name for e in report.nodes] == [n.name for n in computed]
