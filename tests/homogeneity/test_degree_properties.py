"""Property tests over random Table-1 networks (strategies from :mod:`homogeneity.strategies`)."""

from __future__ import annotations

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import homogeneity
from homogeneity import Degree, Grade
from homogeneity.strategies import NetworkSpec, expected_degree, inputs, networks
from homogeneity.verify import check_scaling
from homogeneity.verify.scaling import UNDECIDED

STRENGTH = {"exact": 3, "exponential": 2, "polynomial": 1, "not homogeneous": 0}


@given(networks())
def test_derived_degree_matches_table_1_by_hand(spec: NetworkSpec) -> None:
    out = spec.build().analyze().outputs["output"]
    assert (out.value, out.grade) == spec.expected


@given(networks(), st.data())
def test_composition_of_rules_equals_analysis_of_the_composed_graph(
        spec: NetworkSpec, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(spec.layers)))
    whole = spec.build().analyze().outputs["output"]
    head = spec.build(stop=cut).analyze().outputs["output"] if cut else Degree.exact(0)
    tail = spec.build(start=cut).analyze(input_degrees={"x": head}).outputs["output"]
    assert (tail.value, tail.grade) == (whole.value, whole.grade)


@given(networks(max_layers=4), st.data())
def test_derived_degree_and_grade_match_numerical_scaling(spec: NetworkSpec,
                                                          data: st.DataObject) -> None:
    g = spec.build()
    x = data.draw(inputs((spec.rows, spec.width)))
    model = g.module()
    with torch.no_grad():
        value = model(x)
    # Degenerate draws (a row ReLU zeroes, or constant rows under an eps-free LayerNorm) have
    # no direction to measure.
    assume(torch.isfinite(value).all() and value.norm() > 1e-3)
    report = homogeneity.analyze(model, x)
    assert report.outputs["output"] == g.analyze().outputs["output"]
    (check,) = check_scaling(model, x, report=report)
    assume(all(torch.isfinite(torch.tensor(check.changes))))
    # Draws with nothing to measure: an input on a tie (undecided at every scale), or an output
    # whose scaling error is already below rounding at every scale (no decay to classify).
    assume(check.measured != UNDECIDED)
    assume(check.measured == "exact" or max(check.changes) > 1e-9)
    # The degree must be right (f(cθ)/cᵏ settles) and the grade never claim more than is measured.
    # A draw may show less than the grade allows (a ReLU zeroing every entry that carries a
    # lower-order term, a saturation error below rounding), so strict matching is tested on
    # fixed cases in test_degree_rules.py and test_degree_paper.py.
    assert check.measured != "not homogeneous", (spec, check.changes)
    assert STRENGTH[check.measured] >= STRENGTH[check.expected], (spec, check.measured,
                                                                   check.changes)


@given(st.lists(st.sampled_from(["linear", "relu", "tanh", "erfinv", "cumprod", "square"]),
                min_size=1, max_size=6))
def test_analysis_never_crashes_and_lists_every_unknown_op(kinds: list[str]) -> None:
    g = homogeneity.GraphBuilder()
    h = g.input("x", (2, 3))
    for kind in kinds:
        if kind == "erfinv":
            h = g.call(torch.ops.aten.special_erfinv.default, g.mul(g.tanh(h), 0.5))
        elif kind == "cumprod":
            h = g.call(torch.ops.aten.cumprod.default, h, -1)
        elif kind == "square":
            h = g.mul(h, h)
        else:
            h = {"linear": lambda v: g.linear(v, 3), "relu": g.relu, "tanh": g.tanh}[kind](h)
    g.output(h)
    report = g.analyze()
    unknown = [n.op for n in report.unsupported]
    assert unknown == [f"aten.{'special_erfinv' if k == 'erfinv' else k}.default"
                       for k in kinds if k in ("erfinv", "cumprod")]
    if unknown:
        assert report.grade is Grade.NONE
        assert "no rule for op" in report.unsupported[0].degree.reason


def test_expected_degree_reference_itself() -> None:
    assert expected_degree(("linear", "relu", "linear")) == (2, Grade.EXACT)
    assert expected_degree(("linear", "linear+bias")) == (2, Grade.ASYMPTOTIC)
    assert expected_degree(("linear", "tanh", "linear+bias")) == (1, Grade.APPROXIMATE)
