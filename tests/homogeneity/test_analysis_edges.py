"""The analysis pass at its edges: which leaves scale, how outputs are named, and what an op
without a working rule becomes. Each degree is derived by hand in the test's docstring."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.utils._pytree import GetAttrKey, MappingKey, SequenceKey

from homogeneity import Degree, Grade, HomogeneityError, K, analyze
from homogeneity.analysis import DegreeInterpreter, analyze_program, leaf_name, select_parameters
from homogeneity.report import HomogeneityReport, ModuleSummary, build_report
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


class Inner(nn.Module):
    """lin (weight scaled, bias fixed), then mlp.0 (bias-free), times a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.mlp = nn.Sequential(nn.Linear(2, 2, bias=False))
        self.register_buffer("scale", torch.full((2,), 0.5))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.lin(h)) * self.scale


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(2, 2, bias=False)
        self.inner = Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(self.proj(x))


class Gate(nn.Module):
    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.erfinv(h)  # aten.erfinv has no rule


class Reported(nn.Module):
    """Modules four levels deep, a weakening inside one, and an op without a rule twice: in
    ``gate`` and at the root. With only the weights scaled (c·W), by hand:

    - ``linear`` (block.proj): c·W_p·x, degree 0 + 1 = 1, exact;
    - ``linear_1`` (block.inner.lin): c²·W_l·W_p·x + b with b fixed: degree 2, the bias lower
      order: asymptotic, weakened from the exact input;
    - ``linear_2`` (block.inner.mlp.0): degree 3, asymptotic like its input (no weakening);
    - ``mul`` (block.inner): times the buffer, a constant: 3, asymptotic;
    - ``erfinv`` (gate) and ``erfinv_1`` (root): no rule, none; weakened from the grade of their
      input, asymptotic for the gate (of h), exact at the root (of the input x).
    """

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.gate = Gate()

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.block(x)
        return {"gate": self.gate(h), "last_hidden_state": h, "clipped": torch.erfinv(x)}


# Built anew for each test (0.1 s): a test that only reads a report built for an earlier one would
# not be linked to the functions that built it, and a mutation screen would skip it.
@pytest.fixture
def reported() -> HomogeneityReport:
    return analyze(Reported(), torch.randn(3, 2), params="*weight")


@pytest.fixture
def plain() -> HomogeneityReport:
    """A bias-free linear map: c·W·x, degree 1, exact everywhere, nothing unsupported."""
    return analyze(nn.Sequential(nn.Linear(2, 2, bias=False)), torch.randn(3, 2))


BIAS = "bias: the degree-0 term is lower order than the degree-2 term"
NO_RULE = "no rule for op aten.erfinv.default"


def test_each_node_says_its_module_degree_and_the_grade_it_weakened_from(reported) -> None:
    assert [(n.name, n.op, n.module, str(n.degree), n.weakened_from, n.unsupported)
            for n in reported.nodes] == [
        ("linear", "aten.linear.default", "block.proj", "1 (exact)", None, False),
        ("linear_1", "aten.linear.default", "block.inner.lin", "2 (asymptotic)", Grade.EXACT, False),
        ("linear_2", "aten.linear.default", "block.inner.mlp.0", "3 (asymptotic)", None, False),
        ("mul", "aten.mul.Tensor", "block.inner", "3 (asymptotic)", None, False),
        ("erfinv", "aten.erfinv.default", "gate", "undefined (none)", Grade.ASYMPTOTIC, True),
        ("erfinv_1", "aten.erfinv.default", "", "undefined (none)", Grade.EXACT, True),
    ]
    assert {name: str(d) for name, d in reported.outputs.items()} == {
        "gate": "undefined (none)", "last_hidden_state": "3 (asymptotic)", "clipped": "undefined (none)"}
    assert (reported.main_output, reported.degree, reported.grade) == (
        "last_hidden_state", 3, Grade.ASYMPTOTIC)
    assert [n.name for n in reported.weakenings] == ["linear_1", "erfinv", "erfinv_1"]
    assert [n.name for n in reported.unsupported] == ["erfinv", "erfinv_1"]
    assert reported.node("erfinv_1") is reported.nodes[-1]
    assert (reported.scaled, reported.fixed) == (
        ["block.inner.lin.weight", "block.inner.mlp.0.weight", "block.proj.weight"], ["block.inner.lin.bias"])


# Per module (graph order of first appearance): its class, its computing nodes, the degrees of
# the values entering it (parameters and buffers are not inputs) and leaving it, its weakest
# grade and how many of its nodes weaken. Input x is 0 (exact); see Reported for the rest.
MODULES = [
    ("", "Reported", 6, ["0 (exact)"], ["3 (asymptotic)", "undefined (none)"], "none", 3),
    ("block", "Block", 4, ["0 (exact)"], ["3 (asymptotic)"], "asymptotic", 1),
    ("block.proj", "Linear", 1, ["0 (exact)"], ["1 (exact)"], "exact", 0),
    ("block.inner", "Inner", 3, ["1 (exact)"], ["3 (asymptotic)"], "asymptotic", 1),
    ("block.inner.lin", "Linear", 1, ["1 (exact)"], ["2 (asymptotic)"], "asymptotic", 1),
    ("block.inner.mlp", "Sequential", 1, ["2 (asymptotic)"], ["3 (asymptotic)"], "asymptotic", 0),
    ("block.inner.mlp.0", "Linear", 1, ["2 (asymptotic)"], ["3 (asymptotic)"], "asymptotic", 0),
    ("gate", "Gate", 1, ["3 (asymptotic)"], ["undefined (none)"], "none", 1),
]
KEYS = ("module", "type", "nodes", "input_degrees", "output_degrees", "grade", "weakenings")


def test_module_summaries_give_the_degrees_crossing_each_boundary(reported) -> None:
    assert [m.to_dict() for m in reported.modules] == [dict(zip(KEYS, row)) for row in MODULES]
    assert reported.module("block.inner").grade is Grade.ASYMPTOTIC
    assert reported.module("").nodes == len(reported.nodes)


def test_an_unknown_node_or_module_is_refused_naming_it(reported) -> None:
    with pytest.raises(KeyError, match=r"no node named 'relu'"):
        reported.node("relu")
    with pytest.raises(KeyError) as refused:
        reported.module("block.outer")
    assert refused.value.args[0] == (
        "no module 'block.outer'; modules: ['', 'block', 'block.proj', 'block.inner', "
        "'block.inner.lin', 'block.inner.mlp', 'block.inner.mlp.0', 'gate']")


def test_an_unknown_module_is_refused_naming_the_first_ten() -> None:
    summaries = [ModuleSummary(f"m{i}", "Linear", 1, (), (), Grade.EXACT, 0) for i in range(12)]
    report = HomogeneityReport({"y": Degree.exact(1)}, [], summaries)
    with pytest.raises(KeyError) as refused:
        report.module("m12")
    assert refused.value.args[0] == f"no module 'm12'; modules: {[f'm{i}' for i in range(10)]}"


def test_the_json_report_holds_every_section(reported) -> None:
    def node(name, op, module, degree, grade, reason, weakened_from=None):
        entry = {"node": name, "op": op, "module": module, "degree": degree, "grade": grade,
                 "reason": reason}
        return entry if weakened_from is None else {**entry, "weakened_from": weakened_from}

    weakenings = [
        node("linear_1", "aten.linear.default", "block.inner.lin", "2", "asymptotic", BIAS, "exact"),
        node("erfinv", "aten.erfinv.default", "gate", None, "none", NO_RULE, "asymptotic"),
        node("erfinv_1", "aten.erfinv.default", "", None, "none", NO_RULE, "exact"),
    ]
    data = json.loads(reported.to_json())
    assert data == {
        "schema": "normsat.homogeneity/1",
        "degree": "3",
        "grade": "asymptotic",
        "outputs": {
            "gate": {"degree": None, "grade": "none", "reason": NO_RULE},
            "last_hidden_state": {"degree": "3", "grade": "asymptotic",
                                  "reason": "product: degrees add (3 + 0)"},
            "clipped": {"degree": None, "grade": "none", "reason": NO_RULE},
        },
        "weakenings": weakenings,
        "unsupported": weakenings[1:],
        "modules": [dict(zip(KEYS, row)) for row in MODULES],
        "nodes": [
            node("linear", "aten.linear.default", "block.proj", "1", "exact",
                 "linear map: degrees add (0 + 1)"),
            weakenings[0],
            node("linear_2", "aten.linear.default", "block.inner.mlp.0", "3", "asymptotic",
                 "linear map: degrees add (2 + 1)"),
            node("mul", "aten.mul.Tensor", "block.inner", "3", "asymptotic",
                 "product: degrees add (3 + 0)"),
            *weakenings[1:],
        ],
        "scaled_parameters": ["block.inner.lin.weight", "block.inner.mlp.0.weight", "block.proj.weight"],
        "fixed_parameters": ["block.inner.lin.bias"],
    }
    # Two spaces of indent by default; one line without.
    assert reported.to_json().startswith('{\n  "schema": "normsat.homogeneity/1",\n  "degree": "3",')
    assert "\n" not in reported.to_json(indent=None)
    assert json.loads(reported.to_json(indent=None)) == data


def _words(text: str) -> list[str]:
    """Each line with its runs of spaces as one: the content, whatever the column widths."""
    return [" ".join(line.split()) for line in text.split("\n")]


MODULE_ROWS = [
    "<root> Reported 0 (exact) 3 (asymptotic), undefined (none) none",
    "block Block 0 (exact) 3 (asymptotic) asymptotic",
    "block.proj Linear 0 (exact) 1 (exact) exact",
    "block.inner Inner 1 (exact) 3 (asymptotic) asymptotic",
    "block.inner.lin Linear 1 (exact) 2 (asymptotic) asymptotic",
    "block.inner.mlp Sequential 2 (asymptotic) 3 (asymptotic) asymptotic",
    "block.inner.mlp.0 Linear 2 (asymptotic) 3 (asymptotic) asymptotic",
    "gate Gate 3 (asymptotic) undefined (none) none",
]
DEPTHS = [0, 1, 2, 2, 3, 3, 4, 1]  # dots + 1 in each module path, 0 for the root


@pytest.mark.parametrize("depth", [None, 0, 1, 2, 3, 4])
def test_the_table_lists_outputs_weakenings_unsupported_ops_and_modules_to_a_depth(reported, depth) -> None:
    table = reported.table(depth=depth)
    assert _words(table) == [
        "degree 3 (asymptotic) of last_hidden_state",
        "",
        "outputs:",
        "gate undefined (none)",
        "last_hidden_state 3 (asymptotic)",
        "clipped undefined (none)",
        "",
        "where the grade weakens:",
        f"linear_1 aten.linear.default block.inner.lin exact -> 2 (asymptotic): {BIAS}",
        f"erfinv aten.erfinv.default gate asymptotic -> undefined (none): {NO_RULE}",
        f"erfinv_1 aten.erfinv.default <root> exact -> undefined (none): {NO_RULE}",
        "",
        "unsupported ops:",
        f"aten.erfinv.default at gate (erfinv): {NO_RULE}",
        f"aten.erfinv.default at <root> (erfinv_1): {NO_RULE}",
        "",
        "module type in out grade",
        *(row for row, d in zip(MODULE_ROWS, DEPTHS) if depth is None or d <= depth),
    ]
    # The module table's columns line up under its header.
    lines = table.split("\n")
    header = lines.index(next(line for line in lines if line.startswith("module ")))
    columns = [lines[header].index(word) for word in (" type", " in ", " out ", " grade")]
    for line in lines[header + 1:]:
        assert all(line[c] == " " and line[c + 1] != " " for c in columns), line


def test_printing_a_report_shows_its_table_to_three_levels(reported) -> None:
    assert str(reported) == reported.table(depth=3)
    assert "block.inner.mlp.0" not in str(reported) and "block.inner.mlp " in str(reported)


@pytest.mark.parametrize("depth", [None, 1, 2, 3])
def test_the_markdown_tables_count_each_cause_and_name_its_first_node(reported, depth) -> None:
    modules = [
        "| `<root>` | Reported | 0 (exact) | 3 (asymptotic), undefined (none) | none |",
        "| `block` | Block | 0 (exact) | 3 (asymptotic) | asymptotic |",
        "| `block.proj` | Linear | 0 (exact) | 1 (exact) | exact |",
        "| `block.inner` | Inner | 1 (exact) | 3 (asymptotic) | asymptotic |",
        "| `block.inner.lin` | Linear | 1 (exact) | 2 (asymptotic) | asymptotic |",
        "| `block.inner.mlp` | Sequential | 2 (asymptotic) | 3 (asymptotic) | asymptotic |",
        "| `block.inner.mlp.0` | Linear | 2 (asymptotic) | 3 (asymptotic) | asymptotic |",
        "| `gate` | Gate | 3 (asymptotic) | undefined (none) | none |",
    ]
    text = reported.markdown() if depth == 2 else reported.markdown(depth=depth)  # 2 by default
    assert text.split("\n") == [
        "| output | degree | grade |",
        "|---|---|---|",
        "| `gate` | nan | none |",
        "| `last_hidden_state` | 3 | asymptotic |",
        "| `clipped` | nan | none |",
        "",
        "| why the grade weakens | nodes | first at |",
        "|---|---|---|",
        f"| {BIAS} | 1 | `block.inner.lin` (`aten.linear.default`) |",
        f"| {NO_RULE} | 2 | `gate` (`aten.erfinv.default`) |",
        "",
        "| module | type | degree in | degree out | weakest grade |",
        "|---|---|---|---|---|",
        *(row for row, d in zip(modules, DEPTHS) if depth is None or d <= depth),
    ]
    assert [(reason, count, first.name) for reason, count, first in reported.causes()] == [
        (BIAS, 1, "linear_1"), (NO_RULE, 2, "erfinv")]


def test_a_report_where_nothing_weakens_says_so(plain) -> None:
    assert _words(plain.table()) == [
        "degree 1 (exact) of output", "", "outputs:", "output 1 (exact)", "",
        "where the grade weakens:", "nowhere", "",
        "module type in out grade",
        "<root> Sequential 0 (exact) 1 (exact) exact",
        "0 Linear 0 (exact) 1 (exact) exact",
    ]
    assert plain.markdown(depth=0).split("\n") == [
        "| output | degree | grade |", "|---|---|---|", "| `output` | 1 | exact |", "",
        "| why the grade weakens | nodes | first at |", "|---|---|---|", "",
        "| module | type | degree in | degree out | weakest grade |", "|---|---|---|---|---|",
        "| `<root>` | Sequential | 0 (exact) | 1 (exact) | exact |",
    ]
    assert (plain.weakenings, plain.unsupported, plain.causes()) == ([], [], [])


def test_module_stacks_holding_classes_or_their_names_and_raw_paths_are_read_alike() -> None:
    """A hand-built graph y = x·w whose one node's module stack names the root by its class and
    the inner module by its qualified name, under a raw export path (``L['self'].layers[0]``)."""
    class Net(nn.Module):
        pass

    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    y = graph.create_node("call_function", torch.ops.aten.mul.Tensor, (x, w), name="mul")
    y.meta["nn_module_stack"] = {"root": ("L['self']", Net),
                                 "inner": ("L['self'].layers[0]", "torch.nn.modules.linear.Linear")}
    graph.output(y)
    degrees = {x: Degree.constant(), w: Degree.exact(1, "scaled parameter w"),
               y: Degree.exact(1, "product: degrees add (0 + 1)")}
    report = build_report(graph, degrees, {"output": "mul"}, set(), scaled=["w"], fixed=[])
    assert [(m.path, m.type, m.inputs, m.outputs) for m in report.modules] == [
        ("", "Net", ("0 (exact)",), ("1 (exact)",)),
        ("layers.0", "Linear", ("0 (exact)",), ("1 (exact)",)),
    ]
    assert (report.node("mul").module, report.degree, report.scaled) == ("layers.0", 1, ["w"])


class Join(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b


class Clip(nn.Module):
    """erfinv(join(x, w·x)), with erfinv at the root: w·x has degree 1 (exact), the product in
    ``join`` 0 + 1 = 1 (exact), and erfinv, with no rule, none, weakened from exact. ``join``
    receives two degrees, 0 (exact) from x and 1 (exact) from w·x."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.join = Join()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.erfinv(self.join(x, self.w * x))


def test_a_cause_met_at_the_root_and_a_module_entered_by_two_degrees_are_listed() -> None:
    report = analyze(Clip(), torch.rand(3) / 2)
    assert report.markdown().split("\n")[3:] == [
        "",
        "| why the grade weakens | nodes | first at |",
        "|---|---|---|",
        f"| {NO_RULE} | 1 | `<root>` (`aten.erfinv.default`) |",
        "",
        "| module | type | degree in | degree out | weakest grade |",
        "|---|---|---|---|---|",
        "| `<root>` | Clip | 0 (exact) | undefined (none) | none |",
        "| `join` | Join | 0 (exact), 1 (exact) | 1 (exact) | exact |",
    ]
    assert _words(report.table()).index("module type in out grade") == len(_words(report.table())) - 3
    assert _words(report.table())[-2:] == ["<root> Clip 0 (exact) undefined (none) none",
                                           "join Join 0 (exact), 1 (exact) 1 (exact) exact"]
