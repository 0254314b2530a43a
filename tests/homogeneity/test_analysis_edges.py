"""The analysis pass at its edges: which leaves scale, how outputs are named, and what an op
without a working rule becomes. Each degree is derived by hand in the test's docstring."""

from __future__ import annotations

import pytest
import torch
from torch import nn

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


def test_outputs_that_are_not_tensors_are_refused() -> None:
    with pytest.raises(HomogeneityError, match="expected tensor outputs, but output"):
        analyze(WithCount(), torch.randn(2))


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
