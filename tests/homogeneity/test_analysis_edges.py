"""The analysis pass at its edges: which leaves scale, how outputs are named, and what an op
without a working rule becomes. Each degree is derived by hand in the test's docstring."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._pytree import GetAttrKey, MappingKey, SequenceKey

from homogeneity import Degree, Grade, HomogeneityError, K, analyze
from homogeneity.analysis import DegreeInterpreter, analyze_program, leaf_name, select_parameters
from homogeneity.tracing import export_model


class ScaledByBuffer(nn.Module):
    """w·x·b with a parameter w and a buffer b: degree 1 in the parameters (b is a constant)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.register_buffer("b", torch.full((3,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w * x * self.b


def test_buffers_never_scale_whatever_the_pattern() -> None:
    report = analyze(ScaledByBuffer(), torch.randn(3), params="*")
    assert (report.degree, report.grade) == (1, Grade.EXACT)
    assert (report.scaled, report.fixed) == (["w"], [])


def test_parameters_left_out_of_the_pattern_are_fixed_constants() -> None:
    """Linear(W₁) then Linear(W₂) with biases b₁, b₂: only the weights scale, so the output is
    W₂(W₁x + b₁) + b₂ = c²·W₂W₁x + c·W₂b₁ + b₂: leading degree 2, asymptotic."""
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    report = analyze(model, torch.randn(2, 3), params=["0.weight", "1.weight"])
    assert (report.degree, report.grade) == (2, Grade.ASYMPTOTIC)
    assert (report.scaled, report.fixed) == (["0.weight", "1.weight"], ["0.bias", "1.bias"])


def test_several_patterns_select_their_union_and_each_must_match() -> None:
    names = ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert select_parameters(names, ["0.*", "1.bias"]) == {"0.weight", "0.bias", "1.bias"}
    assert select_parameters(names, None) == set(names)
    with pytest.raises(HomogeneityError, match=r"'2\.\*' match no parameter.*4 parameters, e\.g\. 0\.weight"):
        select_parameters(names, ["0.*", "2.*"])


@pytest.mark.parametrize(("params", "message"), [
    (("a", 3), "expected params to hold parameter names or glob patterns, got 3 (int)"),
    (("a", 3, None), "expected params to hold parameter names or glob patterns, got 3 (int)"),
    (5, "expected params to be a list of parameter names or glob patterns, got 5 (int)"),
])
def test_params_that_are_not_names_are_refused_naming_the_first(params, message) -> None:
    with pytest.raises(HomogeneityError) as refused:
        select_parameters(["a"], params)
    assert str(refused.value) == message


def test_every_unmatched_pattern_is_named() -> None:
    with pytest.raises(HomogeneityError, match=r"^params pattern\(s\) 'q', 'r\*' match no parameter;"):
        select_parameters(["p0", "p1"], ["q", "p0", "r*"])


@pytest.mark.parametrize(("count", "sample"), [
    (8, "p0, p1, p2, p3, p4, p5, p6, p7"),
    (9, "p0, p1, p2, p3, p4, p5, p6, p7, …"),  # eight names, then an ellipsis for the rest
])
def test_an_unmatched_pattern_names_up_to_eight_parameters(count, sample) -> None:
    with pytest.raises(HomogeneityError) as refused:
        select_parameters([f"p{i}" for i in range(count)], "q")
    assert str(refused.value) == ("params pattern(s) 'q' match no parameter; expected names or glob "
                                  f"patterns over the model's {count} parameters, e.g. {sample}")


class Leaves(nn.Module):
    """Returns its leaves as they are: the input x, a parameter w, a buffer b and a tensor
    constant t (a plain tensor attribute, lifted by torch.export)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.register_buffer("b", torch.full((3,), 2.0))
        self.t = torch.full((3,), 0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x, self.w, self.b, self.t


def test_every_leaf_says_what_it_is() -> None:
    program = export_model(Leaves(), (torch.randn(3),), {})
    report = analyze_program(program, input_degrees={"x": 2})
    assert [(d.value, d.reason) for d in report.outputs.values()] == [
        (2, "input x"), (1, "scaled parameter w"), (0, "buffer b"), (0, "tensor constant t")]
    fixed = analyze_program(program, params=[], input_degrees={"x": Degree.exact(2, "mine")})
    assert [d.reason for d in fixed.outputs.values()][:2] == ["mine", "fixed parameter w (not scaled)"]


def test_keyword_inputs_reach_the_analysed_model() -> None:
    """Linear(x) alone is exactly of degree 1; plus a keyword input (a constant, degree 0) it
    is only asymptotically of degree 1."""
    class Shifted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False)

        def forward(self, x: torch.Tensor, shift: torch.Tensor | None = None) -> torch.Tensor:
            return self.a(x) if shift is None else self.a(x) + shift

    assert analyze(Shifted(), torch.randn(2, 3)).grade is Grade.EXACT
    assert analyze(Shifted(), torch.randn(2, 3), shift=torch.ones(3)).grade is Grade.ASYMPTOTIC


def test_input_degrees_set_the_inputs_and_unknown_names_are_refused() -> None:
    program = export_model(nn.Linear(3, 3, bias=False), (torch.randn(2, 3),), {})
    (name,) = [n.name for n in program.graph.nodes if n.op == "placeholder"
               and n.name in program.graph_signature.user_inputs]
    assert analyze_program(program, input_degrees={name: 2}).degree == 3
    report = analyze_program(program, input_degrees={name: Degree.of(K, Grade.ASYMPTOTIC)})
    assert (report.degree, report.grade) == (K + 1, Grade.ASYMPTOTIC)
    with pytest.raises(HomogeneityError,
                       match=rf"input_degrees names 'y', but the graph's inputs are \['{name}'\]"):
        analyze_program(program, input_degrees={"y": 1})


class Nested(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        return {"first": self.w * x, "rest": [x, self.w * self.w * x]}


def test_outputs_are_named_by_their_path() -> None:
    report = analyze(Nested(), torch.randn(2))
    assert {name: degree.value for name, degree in report.outputs.items()} == {
        "first": 1, "rest.0": 0, "rest.1": 2}
    assert report.main_output == "first"
    assert leaf_name(()) == "output"


class WithCount(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return self.w * x, 3


class WithNamedCount(WithCount):
    def forward(self, x: torch.Tensor) -> dict[str, object]:  # type: ignore[override]
        return {"y": self.w * x, "n": 3}


class WithTwoCounts(WithCount):
    def forward(self, x: torch.Tensor) -> tuple[object, ...]:  # type: ignore[override]
        return 3, self.w * x, 4


@pytest.mark.parametrize(("model", "paths", "values"), [
    (WithCount(), "1", "ConstantArgument(name='', value=3)"),
    (WithNamedCount(), "n", "ConstantArgument(name='', value=3)"),
    (WithTwoCounts(), "0, 2", "ConstantArgument(name='', value=3), ConstantArgument(name='', value=4)"),
])
def test_outputs_that_are_not_tensors_are_refused(model: nn.Module, paths: str, values: str) -> None:
    with pytest.raises(HomogeneityError) as refused:
        analyze(model, torch.randn(2))
    assert str(refused.value) == (f"expected tensor outputs, but output(s) {paths} are not tensors "
                                  f"({values}); return only tensors (or wrap the model) to analyse "
                                  "degrees")


def test_a_key_path_is_named_by_its_keys_indices_and_attributes() -> None:
    assert leaf_name([MappingKey("hidden_states"), SequenceKey(3)]) == "hidden_states.3"
    assert leaf_name([GetAttrKey("logits"), SequenceKey(0)]) == "logits.0"
    assert leaf_name(["plain"]) == "plain"  # a key of no pytree kind: itself


def test_an_op_without_a_rule_and_a_rule_that_fails_are_none_naming_the_op() -> None:
    """x·w → relu: with a table that only knows mul (and fails on it), both nodes are none."""
    def failing(*args: object, **kwargs: object) -> Degree:
        raise ValueError("no such signature")

    class Relu(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x * self.w)

    program = export_model(Relu(), (torch.randn(2),), {})
    mul = next(n for n in program.graph.nodes if n.op == "call_function" and "mul" in str(n.target))
    interpreter = DegreeInterpreter(program.graph_module, {}, rules={mul.target: failing})
    degrees = interpreter.propagate()
    relu = next(n for n in program.graph.nodes if n.op == "call_function" and "relu" in str(n.target))
    assert interpreter.unsupported == {mul.name, relu.name}
    assert degrees[mul].grade is Grade.NONE
    assert "failed: ValueError: no such signature" in degrees[mul].reason
    assert degrees[relu].reason == "no rule for op aten.relu.default"
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    assert all(degrees[n].value == 0 for n in placeholders)  # no leaves given: constants


def test_an_fx_graph_reads_its_attributes_as_leaves_and_names_other_ops_by_kind() -> None:
    """On a symbolically traced graph (not an export), parameters are get_attr nodes: leaves like
    placeholders, never unsupported ops; a method call has no rule and is named as one."""
    class Method(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * self.w).relu()

    graph = torch.fx.symbolic_trace(Method())
    nodes = {n.op: n for n in graph.graph.nodes}
    interpreter = DegreeInterpreter(graph, {nodes["get_attr"].name: Degree.exact(1, "w")})
    degrees = interpreter.propagate()
    assert (degrees[nodes["get_attr"]].value, degrees[nodes["get_attr"]].reason) == (1, "w")
    assert degrees[nodes["call_method"]].reason == "no rule for op call_method relu"
    assert nodes["get_attr"].name not in interpreter.unsupported
