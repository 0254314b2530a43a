"""Certificates: written by certify(), re-checked by a code path that never reads the rule table."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from homogeneity import HomogeneityError, analyze, certify, check_certificate
from homogeneity.certificate import (
    Certificate,
    Step,
    applied_to,
    graph_hash,
    node_inputs,
    node_target,
)
from homogeneity.rules import RULES, register_rule
from homogeneity.tracing import export_model

ROOT = Path(__file__).resolve().parents[2]
aten = torch.ops.aten


@pytest.fixture(scope="module")
def minilm_case(minilm: tuple[nn.Module, Any]) -> tuple[nn.Module, dict[str, Any], Certificate]:
    model, tokenizer = minilm
    batch = dict(tokenizer(["The norm grows.", "Saturated attention is hard."], return_tensors="pt",
                           padding=True))
    return model, batch, certify(model, **batch)


def test_minilm_certificate_is_complete_and_checks(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    report = analyze(model, **batch)
    assert certificate.complete and certificate.missing == []
    assert certificate.output_degrees()["last_hidden_state"] == (str(report.degree), str(report.grade))
    text = certificate.to_json()
    assert len(text.encode()) < 2_000_000
    assert Certificate.from_json(text) == certificate
    verdict = check_certificate(text, model, **batch)
    assert verdict.ok, verdict.messages
    assert verdict.checked == len(certificate.steps)


def test_layer_norm_steps_state_their_side_conditions(minilm_case: Any) -> None:
    _, _, certificate = minilm_case
    step = next(s for s in certificate.steps if s.target == "aten.layer_norm.default")
    assert step.lemma == "layer norm"
    assert "layer norm: eps = 1e-12 has degree 0" in step.conditions
    assert "the input's variance has degree 2k = 2 > 0" in step.conditions
    assert (step.degree, step.grade) == ("1", "asymptotic")


def _altered(certificate: Certificate, index: int, **changes: Any) -> str:
    data = json.loads(certificate.to_json())
    fields = data["step_fields"]
    for name, value in changes.items():
        data["steps"][index][fields.index(name)] = value
    return json.dumps(data)


@pytest.mark.parametrize("change", [
    {"degree": "2"}, {"grade": "exact"}, {"conditions": ["layer norm: eps = 0"]},
    {"case": "no eps; degrees add; terms of one degree"}, {"lemma": "linear"},
])
def test_an_altered_step_is_rejected_and_named(minilm_case: Any, change: dict[str, Any]) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.target == "aten.layer_norm.default")
    verdict = check_certificate(_altered(certificate, index, **change), model, **batch)
    assert not verdict.ok
    assert verdict.messages[0].startswith(f"node {certificate.steps[index].node} ")


def test_a_rewired_node_is_rejected_as_another_graph(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.target == "aten.linear.default")
    verdict = check_certificate(_altered(certificate, index, inputs=["p_pooler_dense_weight"]),
                                model, **batch)
    assert not verdict.ok and len(verdict.messages) == 1
    assert f"node {index}: the certificate has {certificate.steps[index].node}" in verdict.messages[0]


def test_a_leaf_claimed_fixed_while_it_scales_is_rejected(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.case == "scaled parameter")
    verdict = check_certificate(_altered(certificate, index, degree="0"), model, **batch)
    assert not verdict.ok and verdict.messages[0].startswith(f"leaf {certificate.steps[index].node}")


def test_a_certificate_of_another_model_names_the_first_mismatched_node(minilm_case: Any) -> None:
    _, _, certificate = minilm_case
    mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    verdict = check_certificate(certificate, mlp, torch.randn(2, 3))
    assert not verdict.ok
    assert verdict.messages[0].startswith("node 0: the certificate has ")
    assert "a certificate of another model or graph" in verdict.messages[0]
    assert verdict.bad_input == verdict.messages[0]


@pytest.mark.parametrize("field", ["node", "target"])
def test_a_step_naming_another_node_or_op_is_rejected_at_that_step(minilm_case: Any, field: str) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.target == "aten.layer_norm.default")
    value = "forged" if field == "node" else "aten.rms_norm.default"
    verdict = check_certificate(_altered(certificate, index, **{field: value}), model, **batch)
    assert not verdict.ok and verdict.bad_input
    assert verdict.messages == [verdict.bad_input]
    named = value if field == "node" else certificate.steps[index].node
    assert verdict.messages[0].startswith(f"node {index}: the certificate has {named} = ")


class Bessel(nn.Module):
    """A linear map followed by the Bessel function I₀, an op no rule covers."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.i0(self.lin(x))


def test_an_op_without_a_rule_leaves_the_certificate_incomplete_never_proved() -> None:
    model, x = Bessel(), torch.randn(3, 2)
    certificate = certify(model, x)
    assert not certificate.complete and certificate.missing == ["aten.special_i0.default"]
    verdict = check_certificate(certificate, model, x)
    assert not verdict.ok
    assert any("no proved lemma covers it" in f for f in verdict.messages)
    assert verdict.bad_input.startswith("the graph has ops no proved lemma covers (aten.special_i0")


def test_a_wrong_rule_cannot_hide_in_a_certificate() -> None:
    mlp, x = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)), torch.randn(4, 2)
    saved = RULES[aten.tanh.default]
    register_rule(aten.tanh.default, lambda d: d)  # wrongly: tanh keeps its input's degree
    try:
        certificate = certify(mlp, x)
    finally:
        register_rule(aten.tanh.default, saved)
    verdict = check_certificate(certificate, mlp, x)
    assert not verdict.ok
    assert verdict.messages[0].startswith("node tanh (aten.tanh.default): claims degree 1 (exact)")


def test_the_checker_runs_without_the_rule_table(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    saved = dict(RULES)
    RULES.clear()
    try:
        verdict = check_certificate(certificate, model, **batch)
    finally:
        RULES.update(saved)
    assert verdict.ok, verdict.messages


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


def test_the_checker_imports_neither_the_rules_nor_the_analysis() -> None:
    paths = [ROOT / "homogeneity" / "checker.py", ROOT / "homogeneity" / "certificate.py",
             *sorted((ROOT / "homogeneity" / "lemmas").glob("*.py"))]
    for path in paths:
        forbidden = {m for m in _imports(path)
                     if m.startswith(("homogeneity.rules", "homogeneity.analysis", "homogeneity.verify"))}
        assert forbidden == set(), path.name


# The format itself, on hand-built certificates and a four-node graph.


class Tiny(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(x), x, x], dim=1) * 2.0


def test_the_graph_hash_is_sha256_over_each_nodes_name_op_target_and_arguments() -> None:
    program = export_model(Tiny(), (torch.randn(2, 3),), {})
    nodes = list(program.graph.nodes)
    assert [(n.name, node_target(n), node_inputs(n)) for n in nodes] == [
        ("x", "placeholder", ()), ("relu", "aten.relu.default", ("x",)),
        ("cat", "aten.cat.default", ("relu", "x", "x")), ("mul", "aten.mul.Tensor", ("cat",)),
        ("output", "output", ("mul",))]
    # a node by its name after %, a literal by its repr
    lines = ("x|placeholder|placeholder|((), {})\n"
             "relu|call_function|aten.relu.default|(('%x',), {})\n"
             "cat|call_function|aten.cat.default|((['%relu', '%x', '%x'], '1'), {})\n"
             "mul|call_function|aten.mul.Tensor|(('%cat', '2.0'), {})\n"
             "output|output|output|((('%mul',),), {})\n")
    assert graph_hash(program.graph) == hashlib.sha256(lines.encode()).hexdigest()
    assert applied_to(nodes[2], {"relu": "R", "x": "X"}) == ((["R", "X", "X"], 1), {})
    assert applied_to(nodes[3], {"cat": 7}) == ((7, 2.0), {})


def _hand_certificate(**changes: Any) -> Certificate:
    steps = (
        Step("x", "placeholder", (), "leaf", "graph input", (), "0", "exact"),
        Step("w", "placeholder", (), "leaf", "scaled parameter", (), "1", "exact"),
        Step("mm", "aten.mm.default", ("x", "w"), "matrix product", "degrees add",
             ("product: degrees 0 + 1",), "1", "exact"),
        Step("i0", "aten.special_i0.default", ("mm",), None, None, (), None, "none"),
        Step("ln", "aten.layer_norm.default", ("i0",), "layer norm", "no eps",
             ("scale γ: degrees 0 + 1",), "-1/2", "approximate"),
        Step("j0", "aten.special_bessel_j0.default", ("ln",), None, None, (), None, "none"),
        Step("i0b", "aten.special_i0.default", ("j0",), None, None, (), None, "none"),
    )
    fields = {"steps": steps, "outputs": {"out": "ln", "hidden": "mm"}, "params": ("w",),
              "graph_hash": "ab" * 32, "versions": {"normsat": "1.0"}}
    return Certificate(**{**fields, **changes})


def test_a_certificate_lists_its_missing_ops_once_sorted_and_its_output_degrees() -> None:
    certificate = _hand_certificate()
    assert certificate.missing == ["aten.special_bessel_j0.default", "aten.special_i0.default"]
    assert not certificate.complete
    assert _hand_certificate(steps=certificate.steps[:3]).complete
    assert certificate.output_degrees() == {"out": ("-1/2", "approximate"), "hidden": ("1", "exact")}


def test_certificate_json_keeps_every_field_and_its_text_readable() -> None:
    certificate = _hand_certificate()
    text = certificate.to_json()
    assert "scale γ" in text and "\n" not in text  # compact, the conditions as written
    data = json.loads(text)
    assert data["schema"] == "normsat.certificate/1"
    assert data["step_fields"] == ["node", "target", "inputs", "lemma", "case", "conditions", "degree",
                                   "grade"]
    assert data["steps"][2] == ["mm", "aten.mm.default", ["x", "w"], "matrix product", "degrees add",
                                ["product: degrees 0 + 1"], "1", "exact"]
    assert (data["outputs"], data["params"], data["graph_hash"], data["versions"]) == (
        {"out": "ln", "hidden": "mm"}, ["w"], "ab" * 32, {"normsat": "1.0"})
    assert certificate.to_json(indent=2).startswith('{\n  "steps": [')
    assert Certificate.from_json(text) == certificate
    del data["versions"]  # written by older versions: optional
    assert Certificate.from_json(json.dumps(data)) == _hand_certificate(versions={})


_HEAD = '{"schema": "normsat.certificate/1", '
_REST = '"outputs": {}, "params": [], "graph_hash": "' + "ab" * 32 + '"}'


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "the certificate: not JSON (Expecting property name enclosed in double quotes: line 1 "
                  "column 2 (char 1))"),
    ("[1, 2]", "the certificate: field (top level): expected a JSON object, got [RawNumber('1'), "),
    ('"text"', "the certificate: field (top level): expected a JSON object, got 'text' (str)"),
    ("{}", "the certificate: field schema: expected 'normsat.certificate/1', got None (NoneType)"),
    ('{"schema": "normsat.certificate/2"}',
     "the certificate: field schema: expected 'normsat.certificate/1', got 'normsat.certificate/2' (str)"),
    (_HEAD + '"steps": []}', "the certificate: field step_fields: expected a value; the field is missing"),
    (_HEAD + '"step_fields": ["node"], "steps": [], ' + _REST,
     "the certificate: field step_fields: expected ['node', 'target', 'inputs', 'lemma', 'case', "
     "'conditions', 'degree', 'grade'], got ['node'] (list)"),
    (_HEAD + '"step_fields": %s, "steps": 3, ' + _REST, "the certificate: field steps: expected a list "
     "of steps, got RawNumber('3') (RawNumber)"),
    (_HEAD + '"step_fields": %s, "steps": [["a", "b"]], ' + _REST,
     "the certificate: field steps[0]: expected 8 fields ['node', "),
    (_HEAD + '"step_fields": %s, "steps": [], "extra": 1, ' + _REST,
     "the certificate: field extra: expected only the fields schema, step_fields, steps, outputs, params, "
     "graph_hash, versions, got RawNumber('1') (RawNumber)"),
    (_HEAD + '"step_fields": %s, "steps": [], "steps": [], ' + _REST,
     "the certificate: the key 'steps' appears twice in one object; expected each key once"),
    (_HEAD + '"step_fields": %s, "steps": [], "outputs": {}, "params": [], "graph_hash": "x"}',
     "the certificate: field graph_hash: expected a SHA-256 in 64 lowercase hexadecimal digits, got 'x'"),
    (_HEAD + '"step_fields": %s, "steps": [], "outputs": {"a": 1' + "0" * 5000 + '}, "params": [], '
     '"graph_hash": "' + "ab" * 32 + '"}',
     "the certificate: field outputs['a']: expected a graph node's name, got RawNumber('10000000000000"),
    (_HEAD + '"step_fields": %s, "steps": [[[[[[]]]]]], ' + _REST,
     "the certificate: its arrays and objects nest deeper than 4 levels; expected at most 4"),
    ("[" * 100_000, "the certificate: its arrays and objects nest deeper than 4 levels"),
])
def test_bad_certificate_text_names_the_field_what_was_expected_and_what_arrived(text: str,
                                                                                 message: str) -> None:
    text = text.replace("%s", json.dumps(list(Step.__dataclass_fields__)))
    with pytest.raises(HomogeneityError) as raised:
        Certificate.from_json(text)
    assert str(raised.value).startswith(message), str(raised.value)
