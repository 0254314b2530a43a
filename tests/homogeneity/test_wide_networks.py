"""Property tests over networks wider than Table 1: matmul, division, where, comparisons, norms with eps.

:mod:`homogeneity.strategies` draws chains of Table-1 layers; here each chain may also hold the
ops transformers add around them, and the expected (degree, grade) is worked out by hand per
layer, independently of the rule table. The derived degree and grade must equal it exactly, and
an exact grade must measure exact.
"""

from __future__ import annotations

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from homogeneity import Grade, GraphBuilder
from homogeneity.builder import Value
from homogeneity.strategies import LAYERS, expected_degree, inputs
from homogeneity.strategies import _add_layer as add_table_1_layer  # the Table-1 kinds, built once
from homogeneity.verify import check_scaling

aten = torch.ops.aten

WIDE = ("matmul", "ratio", "where_input", "step_gate", "norm_eps", "layer_norm_eps")


def expected(kinds: tuple[str, ...]) -> tuple[int, Grade]:
    """Degree and grade of the chain on a degree-0 input, layer by layer."""
    degree, grade = 0, Grade.EXACT
    for kind in kinds:
        if kind in LAYERS:
            degree, grade = expected_degree((kind,), degree, grade)
        elif kind == "matmul":  # h @ W: k + 1
            degree += 1
        elif kind in ("ratio", "where_input", "step_gate"):
            # (h·a)/b: k + 1 − 1; where(x > 0, h, 0) with a mask from the input; h·[h > 0]
            # compares h with 0 (scale-free, h's grade) and multiplies by h: degree and grade kept.
            pass
        elif kind in ("norm_eps", "layer_norm_eps"):
            # h/(‖h‖ + ε) and LayerNorm with ε: degree 0, asymptotic for k > 0 (ε is lower order).
            grade = grade if degree == 0 else grade.weaker(Grade.ASYMPTOTIC)
            degree = 0
    return degree, grade


def _layer(g: GraphBuilder, kind: str, h: Value, x: Value) -> Value:
    width = h.shape[-1]
    if kind == "matmul":
        return g.matmul(h, g.parameter((width, width)))
    if kind == "ratio":
        return g.call(aten.div.Tensor, g.mul(h, g.parameter((width,))), g.parameter((width,)))
    if kind == "where_input":
        return g.call(aten.where.ScalarOther, g.call(aten.gt.Scalar, x, 0.0), h, 0.0)
    if kind == "step_gate":
        return g.mul(h, g.call(aten.gt.Scalar, h, 0.0))
    if kind == "norm_eps":
        norm = g.call(aten.linalg_vector_norm.default, h, 2, [-1], True)
        return g.call(aten.div.Tensor, h, g.call(aten.add.Tensor, norm, 0.1))
    if kind == "layer_norm_eps":
        return g.layer_norm(h, eps=0.5)
    return add_table_1_layer(g, kind, h)


def build(kinds: tuple[str, ...], width: int, seed: int) -> GraphBuilder:
    g = GraphBuilder(seed=seed)
    x = g.input("x", (2, width))
    h = x
    for kind in kinds:
        h = _layer(g, kind, h, x)
    g.output(h)
    return g


chains = st.lists(st.sampled_from(LAYERS + WIDE), min_size=1, max_size=5).map(tuple)


@given(chains, st.integers(2, 4), st.integers(0, 2**16))
def test_wide_networks_get_exactly_the_hand_derived_degree_and_grade(
        kinds: tuple[str, ...], width: int, seed: int) -> None:
    out = build(kinds, width, seed).analyze().outputs["output"]
    assert (out.value, out.grade) == expected(kinds), (kinds, out.reason)


@given(st.lists(st.sampled_from(("linear", "relu", "matmul", "ratio", "where_input", "step_gate",
                                  "layer_norm", "square")), min_size=1, max_size=4).map(tuple),
       st.integers(0, 2**16), st.data())
def test_exact_wide_networks_measure_exact(kinds: tuple[str, ...], seed: int,
                                           data: st.DataObject) -> None:
    g = build(kinds, 3, seed)
    x = data.draw(inputs((2, 3)))
    model = g.module()
    with torch.no_grad():
        value = model(x)
    # A chain that zeroes every entry (a ReLU or gate after a sign flip) has no direction to measure;
    # an eps-free LayerNorm of a constant row is 0/0.
    assume(torch.isfinite(value).all() and value.norm() > 1e-6)
    report = g.analyze()
    assert report.grade is Grade.EXACT
    (check,) = check_scaling(model, x, report=report)
    assert check.measured == "exact", (kinds, check.changes)
