"""The paper's Table 1, Definitions 5-7 and Theorems 6-8 on hand-built graphs."""

from __future__ import annotations

import pytest
import sympy

from homogeneity import Degree, Grade, GraphBuilder
from homogeneity.paper import (
    TABLE_1,
    feedforward_sublayer,
    multi_head_sublayer,
    self_attention_head,
    table_1_component,
)
from homogeneity.verify import check_euler, check_scaling

K1, K2 = sympy.symbols("k1 k2", integer=True, nonnegative=True)
K = sympy.Symbol("k", integer=True, nonnegative=True)


@pytest.mark.parametrize(("component", "k_in", "k_out"), TABLE_1)
def test_table_1(component: str, k_in: str, k_out: str) -> None:
    out = table_1_component(component).outputs["output"]
    assert out.value == sympy.sympify(k_out, locals={"k": K, "k1": K1, "k2": K2})
    assert out.grade is Grade.EXACT


def _sublayer(build: str, *, bias: bool = True, eps: float = 0.0) -> GraphBuilder:
    """X = x·W₀ (1-homogeneous, exact), then the sublayer."""
    g = GraphBuilder(seed=1)
    x = g.linear(g.input("x", (5, 6)), 6)
    out = {
        "SA": lambda: self_attention_head(g, x, 4),
        "MSA": lambda: multi_head_sublayer(g, x, 2, 4, bias=bias, eps=eps),
        "FF": lambda: feedforward_sublayer(g, x, 8, eps=eps),
    }[build]()
    g.output(out)
    return g


def _checked(g: GraphBuilder) -> tuple[Degree, str]:
    report = g.analyze()
    (check,) = check_scaling(g.module(), *g.example_inputs(), report=report)
    assert check.matches, (check.measured, check.changes)
    return report.outputs["output"], check.measured


def test_theorem_6_attention_head_output_has_the_values_degree() -> None:
    # softmax(QKᵀ) is approximately 0-homogeneous, so H = A·V has V's degree: 2 for a
    # 1-homogeneous X (V = X·Wᵛ), not the 1 of the paper's statement; A·V/c² settles exponentially.
    out, measured = _checked(_sublayer("SA"))
    assert (out.value, out.grade, measured) == (2, Grade.APPROXIMATE, "exponential")


def test_theorem_7_bias_free_multi_head_sublayer_is_approximately_1_homogeneous() -> None:
    out, measured = _checked(_sublayer("MSA", bias=False))
    assert (out.value, out.grade, measured) == (1, Grade.APPROXIMATE, "exponential")


def test_theorem_7_with_the_bias_is_only_asymptotic() -> None:
    # LN(WH + b): the bias is a per-feature vector, so LayerNorm's centring does not remove it;
    # it is a lower-order term and the error decays polynomially.
    g = _sublayer("MSA", bias=True)
    out, measured = _checked(g)
    assert (out.value, out.grade, measured) == (1, Grade.ASYMPTOTIC, "polynomial")
    weakening = [n for n in g.analyze().weakenings if n.op == "aten.linear.default"]
    assert "degree-1 term is lower order than the degree-3 term" in weakening[0].degree.reason


def test_theorem_8_feedforward_sublayer_is_exactly_1_homogeneous_without_eps() -> None:
    g = _sublayer("FF")
    out, measured = _checked(g)
    assert (out.value, out.grade, measured) == (1, Grade.EXACT, "exact")
    (euler,) = check_euler(g.module(), *g.example_inputs())
    assert euler.holds(), euler.error


def test_theorem_8_with_layer_norm_eps_is_asymptotic() -> None:
    out, measured = _checked(_sublayer("FF", eps=1.0))
    assert (out.value, out.grade, measured) == (1, Grade.ASYMPTOTIC, "polynomial")


def test_approximately_homogeneous_input_keeps_sublayers_approximate() -> None:
    g = GraphBuilder(seed=2)
    x = g.input("x", (4, 6))
    g.output(feedforward_sublayer(g, x, 8))
    report = g.analyze(input_degrees={"x": Degree.of(1, Grade.APPROXIMATE)})
    assert str(report.outputs["output"]) == "1 (approximate)"
