"""The paper's worked networks as hand-built graphs: Table 1's components, Definitions 5-7.

Each function adds a component to a :class:`~homogeneity.builder.GraphBuilder`, so the same
rules analyse it, :mod:`homogeneity.verify` checks it numerically, and the docs show it.
LayerNorm follows the paper's Appendix A (no eps) unless ``eps`` is given.

>>> TABLE_1[0]
('Linear', 'k', 'k + 1')
>>> g = GraphBuilder()
>>> x = g.input("x", (4, 6))
>>> g.output(feedforward_sublayer(g, x, d_ff=8))
>>> g.analyze(input_degrees={"x": 1}).outputs["output"]
Degree(1, exact)
"""

from __future__ import annotations

import math

import sympy
import torch

from homogeneity.builder import GraphBuilder, Value
from homogeneity.degree import K
from homogeneity.errors import HomogeneityError
from homogeneity.report import HomogeneityReport

__all__ = [
    "TABLE_1",
    "feedforward_sublayer",
    "multi_head_sublayer",
    "self_attention_head",
    "table_1_component",
]

aten = torch.ops.aten

K1, K2 = sympy.symbols("k1 k2", integer=True, nonnegative=True)

TABLE_1: tuple[tuple[str, str, str], ...] = (
    ("Linear", "k", "k + 1"),
    ("Bias", "1", "1"),
    ("Affine", "0", "1"),
    ("LayerNorm", "k", "0"),
    ("LayerNorm + Affine", "k", "1"),
    ("ReLU", "k", "k"),
    ("Sum", "(k, k)", "k"),
    ("Product", "(k1, k2)", "k1 + k2"),
)
"""The paper's Table 1: component, input degree, output degree."""


def table_1_component(component: str, width: int = 3) -> HomogeneityReport:
    """Analyse one Table-1 component on inputs of the row's input degree (symbolic where it is).

    >>> table_1_component("Linear").outputs["output"]
    Degree(k + 1, exact)
    >>> table_1_component("Product").outputs["output"]
    Degree(k1 + k2, exact)
    """
    if component not in {row[0] for row in TABLE_1}:
        raise HomogeneityError(f"expected a Table-1 component {[r[0] for r in TABLE_1]}, got "
                               f"{component!r}")
    g = GraphBuilder()
    x = g.input("x", (2, width))
    if component in ("Sum", "Product"):
        y = g.input("y", (2, width))
        g.output(g.add(x, y) if component == "Sum" else g.mul(x, y))
        return g.analyze(input_degrees={"x": K, "y": K} if component == "Sum"
                         else {"x": K1, "y": K2})
    out = {
        "Linear": lambda: g.linear(x, width),
        "Bias": lambda: g.bias(x),
        "Affine": lambda: g.linear(x, width, bias=True),
        "LayerNorm": lambda: g.layer_norm(x),
        "LayerNorm + Affine": lambda: g.layer_norm(x, affine=True),
        "ReLU": lambda: g.relu(x),
    }[component]()
    g.output(out)
    return g.analyze(input_degrees={"x": {"Bias": 1, "Affine": 0}.get(component, K)})


def self_attention_head(g: GraphBuilder, x: Value, d_k: int) -> Value:
    """Definition 5: K = XWᵏ, Q = XWᑫ, V = XWᵛ (no biases), H = softmax(QKᵀ/√d_k)·V."""
    keys, queries, values = (g.linear(x, d_k) for _ in range(3))
    scores = g.mul(g.matmul(queries, g.transpose(keys)), 1 / math.sqrt(d_k))
    return g.matmul(g.softmax(scores), values)


def multi_head_sublayer(g: GraphBuilder, x: Value, heads: int, d_k: int, *,
                        bias: bool = True, eps: float = 0.0) -> Value:
    """Definition 6: Y = LN(W·[H₁; …; H_h] + b), with LN + Affine and no residual connection."""
    concat = g.call(aten.cat.default, [self_attention_head(g, x, d_k) for _ in range(heads)], -1)
    return g.layer_norm(g.linear(concat, x.shape[-1], bias=bias), affine=True, eps=eps)


def feedforward_sublayer(g: GraphBuilder, x: Value, d_ff: int, *, eps: float = 0.0) -> Value:
    """Definition 7: LN(W_f ReLU(W_i x)), with LN + Affine and no biases or residual."""
    return g.layer_norm(g.linear(g.relu(g.linear(x, d_ff)), x.shape[-1]), affine=True, eps=eps)
