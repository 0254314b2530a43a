"""Certificates: written by certify(), re-checked by a code path that never reads the rule table."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from homogeneity import HomogeneityError, analyze, certify, check_certificate
from homogeneity.certificate import Certificate
from homogeneity.rules import RULES, register_rule

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
    assert verdict.ok, verdict.failures
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
    assert verdict.failures[0].startswith(f"node {certificate.steps[index].node} ")


def test_a_rewired_node_is_rejected_as_another_graph(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.target == "aten.linear.default")
    verdict = check_certificate(_altered(certificate, index, inputs=["p_pooler_dense_weight"]),
                                model, **batch)
    assert not verdict.ok and len(verdict.failures) == 1
    assert f"node {index}: the certificate has {certificate.steps[index].node}" in verdict.failures[0]


def test_a_leaf_claimed_fixed_while_it_scales_is_rejected(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.case == "scaled parameter")
    verdict = check_certificate(_altered(certificate, index, degree="0"), model, **batch)
    assert not verdict.ok and verdict.failures[0].startswith(f"leaf {certificate.steps[index].node}")


def test_a_certificate_of_another_model_names_the_first_mismatched_node(minilm_case: Any) -> None:
    _, _, certificate = minilm_case
    mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    verdict = check_certificate(certificate, mlp, torch.randn(2, 3))
    assert not verdict.ok
    assert verdict.failures[0].startswith("node 0: the certificate has ")
    assert "a certificate of another model or graph" in verdict.failures[0]
    assert verdict.bad_input == verdict.failures[0]


@pytest.mark.parametrize("field", ["node", "target"])
def test_a_step_naming_another_node_or_op_is_rejected_at_that_step(minilm_case: Any, field: str) -> None:
    model, batch, certificate = minilm_case
    index = next(i for i, s in enumerate(certificate.steps) if s.target == "aten.layer_norm.default")
    value = "forged" if field == "node" else "aten.rms_norm.default"
    verdict = check_certificate(_altered(certificate, index, **{field: value}), model, **batch)
    assert not verdict.ok and verdict.bad_input
    assert verdict.failures == [verdict.bad_input]
    named = value if field == "node" else certificate.steps[index].node
    assert verdict.failures[0].startswith(f"node {index}: the certificate has {named} = ")


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "must be JSON"),
    ('{"schema": "normsat.certificate/2"}', "schema 'normsat.certificate/2' is not supported"),
    ('{"schema": "normsat.certificate/1", "steps": []}', "fields are malformed"),
    ("[1, 2]", "is a JSON object"),
])
def test_bad_certificate_text_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(HomogeneityError, match=message):
        Certificate.from_json(text)


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
    assert any("no proved lemma covers it" in f for f in verdict.failures)
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
    assert verdict.failures[0].startswith("node tanh (aten.tanh.default): claims degree 1 (exact)")


def test_the_checker_runs_without_the_rule_table(minilm_case: Any) -> None:
    model, batch, certificate = minilm_case
    saved = dict(RULES)
    RULES.clear()
    try:
        verdict = check_certificate(certificate, model, **batch)
    finally:
        RULES.update(saved)
    assert verdict.ok, verdict.failures


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
