"""The certificate checker on a two-layer MLP: every kind of forgery is named, and only those.

The MLP W₂·ReLU(W₁x + b₁) + b₂ has degree 2 (asymptotic: the biases add lower-degree terms);
each test changes one field of its certificate and states what the checker must say. Its nodes:
the leaves p_0_weight, p_0_bias, p_2_weight, p_2_bias (1, exact) and input (0, exact), then
linear (1, exact), relu (1, exact), linear_1 (2, asymptotic).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import replace
from fractions import Fraction
from importlib import metadata

import pytest
import sympy
import torch
from torch import nn

from homogeneity import HomogeneityError, checker
from homogeneity.certificate import Certificate, CertificateFieldError, Step, graph_hash
from homogeneity.certify import certify, versions
from homogeneity.checker import check_certificate
from homogeneity.degree import Degree, K
from homogeneity.rules import RULES
from homogeneity.tracing import export_model
from tests.homogeneity.test_certificates import Bessel

torch.manual_seed(0)
MLP = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
X = torch.randn(5, 3)


@pytest.fixture(scope="module")
def certificate() -> Certificate:
    return certify(MLP, X)


def _with_step(certificate: Certificate, node: str, **changes: object) -> Certificate:
    steps = tuple(replace(s, **changes) if s.node == node else s for s in certificate.steps)
    return replace(certificate, steps=steps)


def _step(certificate: Certificate, target: str) -> str:
    return next(s.node for s in certificate.steps if s.target == target)


def test_the_honest_certificate_checks_every_step(certificate: Certificate) -> None:
    verdict = check_certificate(certificate, MLP, X)
    assert (verdict.ok, verdict.messages, verdict.bad_input) == (True, [], "")
    assert verdict.checked == len(certificate.steps)
    assert str(verdict) == f"certificate accepted: {len(certificate.steps)} steps checked"
    assert certificate.output_degrees() == {"output": ("2", "asymptotic")}


@pytest.mark.parametrize(("param", "claim", "message"), [
    ("0.weight", ("0", "exact"), "claims 0 (exact), but parameter 0.weight scales: 1 (exact)"),
    ("0.bias", ("1", "approximate"), "claims 1 (approximate), but parameter 0.bias scales"),
])
def test_a_parameter_leaf_must_claim_degree_one_exactly(certificate, param, claim, message) -> None:
    forged = _with_step(certificate, "p_" + param.replace(".", "_"), degree=claim[0], grade=claim[1])
    verdict = check_certificate(forged, MLP, X)
    assert not verdict.ok and verdict.bad_input == ""
    assert any(message in failure for failure in verdict.messages), verdict.messages


def test_a_fixed_parameter_and_an_input_are_constants(certificate: Certificate) -> None:
    fixed = certify(MLP, X, params="2.*")
    assert check_certificate(fixed, MLP, X, params="2.*").ok
    verdict = check_certificate(_with_step(fixed, "p_0_weight", degree="1"), MLP, X, params="2.*")
    assert any("parameter 0.weight is fixed: 0 (exact)" in f for f in verdict.messages), verdict.messages
    verdict = check_certificate(_with_step(fixed, "input", degree="1"), MLP, X, params="2.*")
    assert any("a graph input or buffer is a constant" in f for f in verdict.messages), verdict.messages


def test_a_wrong_grade_or_degree_of_an_op_is_named_with_the_lemmas_answer(certificate) -> None:
    last = [s.node for s in certificate.steps if s.target == "aten.linear.default"][-1]
    for change in ({"grade": "exact"}, {"degree": "3"}):
        verdict = check_certificate(_with_step(certificate, last, **change), MLP, X)
        assert len(verdict.messages) == 1 and verdict.messages[0].startswith(f"node {last} ("), verdict
        assert "gives 2 (asymptotic)" in verdict.messages[0]


def test_a_wrong_lemma_or_case_is_named(certificate: Certificate) -> None:
    relu = _step(certificate, "aten.relu.default")
    verdict = check_certificate(_with_step(certificate, relu, lemma="linear"), MLP, X)
    assert "cites lemma 'linear', the op's lemma is" in verdict.messages[0]
    verdict = check_certificate(_with_step(certificate, relu, case="another case"), MLP, X)
    assert "cites case 'another case'" in verdict.messages[0]


@pytest.mark.parametrize(("change", "field", "expected"), [
    ({"grade": "firm"}, "grade", "one of exact, approximate, asymptotic, none, got 'firm' (str)"),
    ({"degree": None}, "degree", "an exact fraction in lowest terms such as '1' or '-1/2', with at most "
                                 "100 digits above and below, got None (NoneType)"),
    ({"degree": "2/2"}, "degree", "an exact fraction in lowest terms"),
    ({"degree": "1" * 101}, "degree", "with at most 100 digits above and below"),
    ({"degree": "none"}, "degree", "an exact fraction"),
    ({"grade": "none"}, "degree", "'none' for grade none, got '1' (str)"),
    ({"inputs": ("linear", 3)}, "inputs[1]", "a graph node's name, got 3 (int)"),
    ({"conditions": "g(cz)"}, "conditions", "a list, got 'g(cz)' (str)"),
    ({"node": "relu; rm -rf"}, "node", "a graph node's name"),
])
def test_a_step_not_of_the_format_is_bad_input_naming_the_field(certificate, change, field,
                                                                expected) -> None:
    """Read from JSON or handed over as an object, a field out of the format is refused before any
    check, naming the step and the field: it is not a certificate (exit code 2), not a failed proof."""
    relu = _step(certificate, "aten.relu.default")
    index = next(i for i, s in enumerate(certificate.steps) if s.node == relu)
    steps = list(certificate.steps)
    steps[index] = replace(steps[index], **change)
    with pytest.raises(CertificateFieldError) as raised:
        check_certificate(replace(certificate, steps=tuple(steps)), MLP, X)
    assert raised.value.field == f"steps[{index}].{field}"
    assert str(raised.value).startswith(f"the certificate: field steps[{index}].{field}: expected ")
    assert expected in str(raised.value)


def test_missing_extra_and_foreign_parts_are_refused(certificate: Certificate) -> None:
    shorter = replace(certificate, steps=certificate.steps[:-1])
    verdict = check_certificate(shorter, MLP, X)
    assert verdict.bad_input.endswith("of the graph is not in the certificate")
    longer = replace(certificate, steps=(*certificate.steps, certificate.steps[-1]))
    verdict = check_certificate(longer, MLP, X)
    assert verdict.bad_input == f"step {certificate.steps[-1].node} is not in the graph"
    verdict = check_certificate(replace(certificate, params=(*certificate.params, "9.weight")), MLP, X)
    assert verdict.bad_input == ("the certificate scales 5 parameter(s) (0.bias, 0.weight, 2.bias, "
                                 "2.weight, … (5 in all)), the check 4 (every parameter): check with the "
                                 "params it was written for")
    assert [(f.field, f.node) for f in verdict.failures] == [("params", None)]
    verdict = check_certificate(replace(certificate, outputs={"output": "nowhere"}), MLP, X)
    assert verdict.messages == ["output output is node linear_1, but the certificate names node nowhere"]
    assert verdict.bad_input == "" and verdict.outputs == {}
    verdict = check_certificate(replace(certificate, graph_hash="0" * 64), MLP, X)
    assert verdict.bad_input == ("the graph's literal arguments differ from the certified graph's "
                                 "(graph hash mismatch): a certificate of another model or graph")


def test_json_round_trip_and_malformed_text(certificate: Certificate) -> None:
    assert Certificate.from_json(certificate.to_json()) == certificate
    for text, message in (("[1]", "field \\(top level\\): expected a JSON object, got \\[RawNumber"),
                          ("{", "not JSON"),
                          ('{"schema": "normsat.certificate/1"}', "field step_fields: expected a value")):
        with pytest.raises(HomogeneityError, match=message):
            Certificate.from_json(text)


_LINEAR_1 = ("node linear_1 (aten.linear.default): cites case 'degrees add; a lower-degree term' with "
             "conditions ")


def test_a_step_after_a_forged_one_is_checked_against_the_forged_claim(certificate) -> None:
    # relu claims 3: it fails, and linear_1 is then checked as W₂·(degree 3) + b₂, whose
    # conditions differ from those certified.
    verdict = check_certificate(_with_step(certificate, "relu", degree="3"), MLP, X)
    assert verdict.messages == [
        "node relu (aten.relu.default): claims degree 3 (exact); lemma 'positively homogeneous', case "
        "'positively homogeneous' gives 1 (exact)",
        _LINEAR_1 + "['linear map: degrees 1 + 1', 'bias of degrees 2, 1: degree 2 leads']; lemma 'linear' "
        "applies case 'degrees add; a lower-degree term' with ['linear map: degrees 3 + 1', "
        "'bias of degrees 4, 1: degree 4 leads']"]
    assert str(verdict) == "certificate rejected:\n" + "\n".join(f"  {f}" for f in verdict.messages)
    assert (verdict.ok, verdict.checked, verdict.bad_input) == (False, len(certificate.steps), "")


def test_an_honest_step_of_no_degree_reads_as_none() -> None:
    model, x = Bessel(), torch.randn(3, 2)
    verdict = check_certificate(certify(model, x).to_json(), model, x)  # the text, as the CLI reads it
    assert verdict.messages == ["node special_i0 (aten.special_i0.default): no proved lemma covers it"]
    assert verdict.bad_input == ("the graph has ops no proved lemma covers (aten.special_i0.default): no "
                                 "certificate of this model can prove its degree")


def test_a_law_that_cannot_read_its_arguments_fails_that_step(certificate, monkeypatch) -> None:
    def unreadable(*args: object, **kwargs: object) -> None:
        raise TypeError("no such argument")

    real = checker.lemma_for

    def lemma_for(target: object) -> object:
        found = real(target)
        return replace(found, law=unreadable) if target == torch.ops.aten.relu.default else found

    monkeypatch.setattr(checker, "lemma_for", lemma_for)
    verdict = check_certificate(certificate, MLP, X)
    assert verdict.messages == [
        "node relu (aten.relu.default): TypeError: no such argument",
        _LINEAR_1 + "['linear map: degrees 1 + 1', 'bias of degrees 2, 1: degree 2 leads']; lemma 'linear' "
        "applies case 'no degree' with ['a factor without degree', 'a term without degree']"]


def test_a_step_whose_case_is_not_proved_is_rejected_with_the_reason(certificate, monkeypatch) -> None:
    monkeypatch.setattr(checker, "case_unproved",
                        lambda lemma, case: "sympy gave up" if lemma.name == "linear" else None)
    verdict = check_certificate(certificate, MLP, X)
    assert verdict.messages == ["node linear (aten.linear.default): sympy gave up",
                                "node linear_1 (aten.linear.default): sympy gave up"]


def test_every_failure_is_kept_with_the_outputs_named_last(certificate) -> None:
    forged = replace(_with_step(certificate, "relu", grade="approximate"),
                     outputs={"output": "relu", "extra": "linear"})
    verdict = check_certificate(forged, MLP, X)
    assert [(f.field, f.node) for f in verdict.failures] == [
        ("steps[6].grade", "relu"), ("outputs['output']", "linear_1"), ("outputs['extra']", None)]
    assert verdict.messages[1:] == [
        "output output is node linear_1, but the certificate names node relu",
        "output 'extra' of the certificate is not an output of the model (its outputs: output)"]


class Keyword(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor, *, shift: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + shift


def test_keyword_inputs_reach_the_fresh_export() -> None:
    model, shift = Keyword(), torch.randn(5, 2)
    verdict = check_certificate(certify(model, X, shift=shift), model, X, shift=shift)
    assert verdict.ok, verdict.messages


class GrowingExp(nn.Module):
    """exp of a degree-1 input: no degree, by the transcendental lemma; then a sum with it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(self.lin(x)) + 1.0


def test_an_honest_step_of_no_degree_is_accepted() -> None:
    model = GrowingExp()
    certificate = certify(model, X)
    exp = next(s for s in certificate.steps if s.target == "aten.exp.default")
    assert (exp.lemma, exp.case, exp.grade) == ("transcendental", "no degree", "none")
    verdict = check_certificate(certificate, model, X)
    assert verdict.ok, verdict.messages
    assert certificate.output_degrees()["output"][1] == "none"


def test_a_rewired_step_is_shown_beside_the_graphs_node(certificate) -> None:
    verdict = check_certificate(_with_step(certificate, "linear_1", inputs=("relu", "p_2_weight")), MLP, X)
    assert verdict.ok is False
    assert verdict.messages == [verdict.bad_input] == [
        "node 7: the certificate has linear_1 = aten.linear.default(relu, p_2_weight), the graph has "
        "linear_1 = aten.linear.default(relu, p_2_weight, p_2_bias): a certificate of another model or "
        "graph"]


def test_a_graph_input_claimed_to_scale_is_named_in_full(certificate) -> None:
    verdict = check_certificate(_with_step(certificate, "input", degree="1"), MLP, X)
    assert verdict.messages[0] == ("leaf input: claims 1 (exact), but a graph input or buffer is a "
                                   "constant: 0 (exact)")


class TwoBessels(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(torch.special.i0(self.lin(x)))


def test_every_op_no_lemma_covers_is_named_once_sorted() -> None:
    model = TwoBessels()
    verdict = check_certificate(certify(model, X), model, X)
    assert verdict.bad_input == (
        "the graph has ops no proved lemma covers (aten.special_bessel_j0.default, "
        "aten.special_i0.default): no certificate of this model can prove its degree")


class DroppedTerm(nn.Module):
    """lin(x) + 0·x written with alpha: the second term is no term (Sum rule over literal zeros)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.add(self.lin(x), x, alpha=0)


def test_a_steps_keyword_arguments_reach_its_law() -> None:
    model = DroppedTerm()
    certificate = certify(model, X)
    add = next(s for s in certificate.steps if s.target == "aten.add.Tensor")
    assert (add.case, add.conditions, add.degree, add.grade) == (
        "terms of one degree", ("sum of degrees 1",), "1", "exact")
    verdict = check_certificate(certificate, model, X)
    assert verdict.ok, verdict.messages


def _leaves(scaled: tuple[str, ...]) -> list[Step]:
    """The MLP's leaves: each parameter scaled (1) or fixed (0), then the input, a constant."""
    return [Step("p_" + name.replace(".", "_"), "placeholder", (), "leaf",
                 "scaled parameter" if name in scaled else "fixed parameter", (name,),
                 "1" if name in scaled else "0", "exact")
            for name in ("0.weight", "0.bias", "2.weight", "2.bias")] + [
        Step("input", "placeholder", (), "leaf", "constant input", ("input",), "0", "exact")]


def _linear(node: str, inputs: tuple[str, ...], x: int, w: int, b: int) -> Step:
    """linear(x, W, b): degree x + w, exact when the bias has that degree, else asymptotic."""
    terms = "degrees add; terms of one degree" if b == x + w else "degrees add; a lower-degree term"
    bias = f"bias of degrees {x + w}, {b}" + ("" if b == x + w else f": degree {x + w} leads")
    return Step(node, "aten.linear.default", inputs, "linear", terms,
                (f"linear map: degrees {x} + {w}", bias), str(x + w), "exact" if b == x + w else "asymptotic")


@pytest.mark.parametrize(("params", "scaled"), [
    (None, ("0.bias", "0.weight", "2.bias", "2.weight")),
    ("2.*", ("2.bias", "2.weight")),
])
def test_the_certificate_writes_out_the_derivation_node_by_node(certificate, params, scaled) -> None:
    """W₂·ReLU(W₁x + b₁) + b₂ by hand: all parameters scaled, 1 → 1 → 2 (b₂ of degree 1 lower:
    asymptotic); the last layer's alone, 0 → 0 → 1 (b₂ of the same degree: exact)."""
    ours = certificate if params is None else certify(MLP, X, params=params)
    first = 1 if params is None else 0
    relu = Step("relu", "aten.relu.default", ("linear",), "positively homogeneous", "positively homogeneous",
                ("g(cz) = c·g(z) for c > 0",), str(first), "exact")
    assert list(ours.steps) == [*_leaves(scaled),
                                _linear("linear", ("input", "p_0_weight", "p_0_bias"), 0, first, first),
                                relu,
                                _linear("linear_1", ("relu", "p_2_weight", "p_2_bias"), first, 1, 1)]
    assert (ours.outputs, ours.params) == ({"output": "linear_1"}, scaled)
    assert ours.graph_hash == graph_hash(export_model(MLP, (X,), {}).graph)
    assert ours.versions == {"normsat": metadata.version("normsat"), "torch": torch.__version__}


def test_the_version_of_an_uninstalled_normsat_is_unknown(monkeypatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert versions() == {"normsat": "unknown", "torch": torch.__version__}


@pytest.mark.parametrize(("rule", "degree", "grade"), [
    (None, "none", "none"),            # no rule: no degree
    (lambda x: x, "1", "exact"),       # a rule registered without a lemma: its degree, unproved
])
def test_an_op_without_a_lemma_is_written_without_lemma_case_or_conditions(monkeypatch, rule, degree,
                                                                           grade) -> None:
    if rule is not None:
        monkeypatch.setitem(RULES, torch.ops.aten.special_i0.default, rule)
    certificate = certify(Bessel(), torch.randn(3, 2))
    assert certificate.steps[-1] == Step("special_i0", "aten.special_i0.default", ("linear",), None, None, (),
                                         degree, grade)


def test_a_case_the_lemma_does_not_prove_is_written_without_the_lemma(monkeypatch) -> None:
    """The rule's case and conditions stay, so the checker can say which case was not proved."""
    monkeypatch.setattr(importlib.import_module("homogeneity.certify"), "case_unproved",
                        lambda lemma, case: "not proved" if lemma.name == "linear" else None)
    steps = {s.node: s for s in certify(MLP, X).steps}
    assert (steps["linear"].lemma, steps["linear"].case, steps["linear"].conditions) == (
        None, "degrees add; terms of one degree", ("linear map: degrees 0 + 1", "bias of degrees 1, 1"))
    assert steps["linear_1"].lemma is None and steps["relu"].lemma == "positively homogeneous"


class Powers(nn.Module):
    """relu(W·x) raised to each exponent in turn, of degree their product."""

    def __init__(self, *exponents: float) -> None:
        super().__init__()
        self.lin, self.exponents = nn.Linear(3, 2, bias=False), exponents

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.lin(x))
        for exponent in self.exponents:
            y = y**exponent
        return y


def test_a_fractional_degree_is_written_as_an_exact_fraction() -> None:
    model = Powers(0.5)
    certificate = certify(model, X)
    assert (certificate.steps[-1].degree, certificate.steps[-1].grade) == ("1/2", "exact")
    assert check_certificate(certificate, model, X).ok


@pytest.mark.parametrize("exponents",
                         [(0.3,), (1 / 3,), (0.1,), (math.sqrt(2),), (0.3, 0.7), (0.1, 3.0, 0.1)],
                         ids=["0.3", "1/3", "0.1", "sqrt2", "0.3-then-0.7", "0.1-then-3-then-0.1"])
def test_a_float_exponent_is_recorded_as_the_binary_fraction_it_stores(exponents) -> None:
    """The rule multiplies float exponents in floating point; the lemma reads each as the exact
    fraction the float holds (never 3/10 for 0.3, nor the symbol sqrt(2)) and multiplies exactly,
    and that is the degree written down, so the certificate is accepted."""
    model = Powers(*exponents)
    certificate = certify(model, X)
    expected = math.prod((Fraction(e) for e in exponents), start=Fraction(1))
    assert Fraction(certificate.steps[-1].degree) == expected
    assert certificate.steps[-1].grade == "exact"
    assert check_certificate(certificate, model, X).ok


@pytest.mark.parametrize(("derived", "grade"), [(0.3 * (1 + 1e-10), "exact"), (0.3, "approximate")],
                         ids=["off-by-1e-10-relative", "another-grade"])
def test_a_rule_off_by_more_than_rounding_is_written_as_derived_and_rejected(monkeypatch, derived,
                                                                            grade) -> None:
    """Only a float rounding (relative 1e-12) is read as the lemma's exact value: a rule that
    disagrees by more, or in its grade, is written as it derived, and the checker names both."""
    monkeypatch.setitem(RULES, torch.ops.aten.pow.Tensor_Scalar,
                        lambda *args, **kwargs: Degree.of(sympy.Float(derived), grade))
    model = Powers(0.3)
    certificate = certify(model, X)
    assert (Fraction(certificate.steps[-1].degree), certificate.steps[-1].grade) == (Fraction(derived), grade)
    check = check_certificate(certificate, model, X)
    assert not check.ok
    assert f"lemma 'power', case 'power' gives {Fraction(0.3)} (exact)" in str(check)


class CancellingPowers(nn.Module):
    """z^0.1 · z^0.2 · z^(−0.3) of z = relu(W·x): the rule's float sum of the degrees is 2⁻⁵⁴,
    the exact sum of the three binary fractions is 2⁻⁵⁵."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.relu(self.lin(x))
        return z**0.1 * z**0.2 * z**-0.3


def test_degrees_that_cancel_up_to_rounding_are_recorded_exactly() -> None:
    """Near zero the rounding is absolute (1e-12): the recorded degree is the exact sum, and the
    checker accepts it."""
    model = CancellingPowers()
    certificate = certify(model, X)
    assert Fraction(certificate.steps[-1].degree) == Fraction(0.1) + Fraction(0.2) + Fraction(-0.3)
    assert check_certificate(certificate, model, X).ok


@pytest.mark.parametrize("off", [1e-13, -1e-13])
def test_an_exact_rule_is_written_as_derived_even_within_rounding_of_the_lemma(monkeypatch, off) -> None:
    """Only a degree the rule computed in floating point is read as the lemma's: an exact one that
    differs, however little, is written as it is, and the checker rejects it."""
    derived = sympy.Rational(Fraction(0.3) + Fraction(off))
    monkeypatch.setitem(RULES, torch.ops.aten.pow.Tensor_Scalar,
                        lambda *args, **kwargs: Degree.exact(derived))
    model = Powers(0.3)
    certificate = certify(model, X)
    assert Fraction(certificate.steps[-1].degree) == Fraction(int(derived.p), int(derived.q))
    assert not check_certificate(certificate, model, X).ok


def test_a_degree_that_is_not_a_number_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(RULES, torch.ops.aten.pow.Tensor_Scalar,
                        lambda *args, **kwargs: Degree.exact(sympy.sqrt(2)))
    expected = (r"^node pow_1 has the degree sqrt\(2\) \(exact\), not a number; "
                r"certificates record degrees as fractions$")
    with pytest.raises(HomogeneityError, match=expected):
        certify(Powers(0.3), X)


def test_a_piecewise_degree_is_refused_with_the_node_and_the_degree(monkeypatch) -> None:
    """A rule whose degree depends on k (a symbolic component's) gives a piecewise degree even in a
    whole model: certify names the node and the degree instead of writing a step."""
    degree = Degree.piecewise((Degree.exact(1), sympy.Eq(K, 1)), (Degree.exact(2), sympy.Eq(K, 3)))
    monkeypatch.setitem(RULES, torch.ops.aten.special_i0.default, lambda x: degree)
    expected = (r"^node special_i0 has the piecewise degree 1 \(exact\) if Eq\(k, 1\) .*; "
                r"certificates cover concrete degrees \(a whole model")
    with pytest.raises(HomogeneityError, match=expected):
        certify(Bessel(), torch.randn(3, 2))
