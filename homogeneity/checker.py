"""check_certificate(): re-check a certificate against a fresh export, without the rule table.

This is the second code path. It exports the model again, checks that the certificate's nodes
are the graph's (targets and wiring), derives each leaf's degree from the scaled parameters, and
re-applies each step's lemma *law* (:mod:`homogeneity.lemmas`) to the degrees the certificate
claims for the step's inputs and to the node's literal arguments in the fresh graph. A step is
accepted when its lemma covers the op, its case is proved, and the law gives the claimed case,
side conditions, degree and grade. It imports neither ``homogeneity.rules`` nor the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch
import torch.fx
from torch import nn

from homogeneity.certificate import Certificate, Step, applied_to, graph_hash, node_inputs, node_target
from homogeneity.degree import Grade
from homogeneity.errors import HomogeneityError
from homogeneity.lemmas import Deg, case_unproved, lemma_for
from homogeneity.lemmas.base import fmt
from homogeneity.tracing import export_model, parameter_names

__all__ = ["CertificateCheck", "check_certificate"]


@dataclass(frozen=True)
class CertificateCheck:
    """The verdict: ``ok`` when every step checks; otherwise each failure names its node.

    ``bad_input`` is set when the certificate cannot be about this model at all: it describes
    another graph (the first mismatched node named), or the graph has ops no proved lemma covers
    (named). The command line reports these as bad input (exit code 2), not as a rejected proof.
    """

    ok: bool
    failures: list[str] = field(default_factory=list)
    checked: int = 0
    bad_input: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"certificate accepted: {self.checked} steps checked"
        return "certificate rejected:\n" + "\n".join(f"  {f}" for f in self.failures)


def _claimed(step: Step) -> Deg:
    try:
        grade = Grade(step.grade)
    except ValueError:
        raise HomogeneityError(f"step {step.node}: unknown grade {step.grade!r}") from None
    if grade is Grade.NONE:
        return Deg(None, grade)
    if step.degree is None:
        raise HomogeneityError(f"step {step.node}: grade {grade} without a degree")
    return Deg(Fraction(step.degree), grade)


def _same_graph(certificate: Certificate, nodes: list[torch.fx.Node]) -> str | None:
    """The first node where the certificate and the graph differ, described; ``None`` if none."""
    for index, node in enumerate(nodes):
        if index >= len(certificate.steps):
            return f"node {node.name} ({node_target(node)}) of the graph is not in the certificate"
        step = certificate.steps[index]
        wiring = node_inputs(node) if node.op == "call_function" else ()
        target = node_target(node)
        if (step.node, step.target, step.inputs) != (node.name, target, wiring):
            return (f"node {index}: the certificate has {step.node} = {step.target}"
                    f"({', '.join(step.inputs)}), the graph has {node.name} = {target}"
                    f"({', '.join(wiring)}): a certificate of another model or graph")
    if len(certificate.steps) > len(nodes):
        return f"step {certificate.steps[len(nodes)].node} is not in the graph"
    return None


def _check_leaf(step: Step, param: str | None, scaled: set[str]) -> str | None:
    expected = Deg(Fraction(1), Grade.EXACT) if param in scaled else Deg(Fraction(0), Grade.EXACT)
    claimed = _claimed(step)
    if claimed != expected:
        why = f"parameter {param} {'scales' if param in scaled else 'is fixed'}" if param else \
            "a graph input or buffer is a constant"
        return f"leaf {step.node}: claims {claimed}, but {why}: {expected}"
    return None


def _check_op(step: Step, node: torch.fx.Node, degrees: dict[str, Deg]) -> str | None:
    lemma = lemma_for(node.target)
    if lemma is None or step.lemma != lemma.name:
        return (f"node {node.name} ({step.target}): no proved lemma covers it" if lemma is None else
                f"node {node.name} ({step.target}): cites lemma {step.lemma!r}, the op's lemma is "
                f"{lemma.name!r}")
    args, kwargs = applied_to(node, degrees)
    claim = lemma.law(*args, **kwargs)
    unproved = case_unproved(lemma, claim.case)
    if unproved:
        return f"node {node.name} ({step.target}): {unproved}"
    claimed = _claimed(step)
    if (step.case, step.conditions) != (claim.case, claim.conditions):
        return (f"node {node.name} ({step.target}): cites case {step.case!r} with conditions "
                f"{list(step.conditions)}; lemma {lemma.name!r} applies case {claim.case!r} with "
                f"{list(claim.conditions)}")
    if claimed != claim.out:
        return (f"node {node.name} ({step.target}): claims degree {fmt(claimed.value)} "
                f"({claimed.grade}); lemma {lemma.name!r}, case {claim.case!r} gives "
                f"{fmt(claim.out.value)} ({claim.out.grade})")
    return None


def check_certificate(certificate: Certificate | str, model: nn.Module, *args: Any,
                      **kwargs: Any) -> CertificateCheck:
    """Check ``certificate`` against ``model(*args, **kwargs)`` exported afresh.

    Args:
        certificate: a :class:`Certificate` or its JSON text.
        model, *args, **kwargs: the model and example inputs it was written for.

    Returns:
        ``ok`` with the number of steps checked, or the failures, each naming its node. A step
        after a failed one is checked against the claimed degrees of its inputs, so every altered
        step is named, not only the first.

    Raises:
        HomogeneityError: malformed JSON or an unknown schema version.

    >>> from torch import nn
    >>> from homogeneity.certify import certify
    >>> mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> x = torch.randn(5, 3)
    >>> check_certificate(certify(mlp, x), mlp, x).ok
    True
    >>> forged = certify(mlp, x).to_json().replace('"asymptotic"]', '"exact"]')
    >>> verdict = check_certificate(forged, mlp, x)
    >>> verdict.ok, len(verdict.failures)
    (False, 1)
    >>> for part in verdict.failures[0].split("; "):
    ...     print(part)
    node linear_1 (aten.linear.default): claims degree 2 (exact)
    lemma 'linear', case 'degrees add
    a lower-degree term' gives 2 (asymptotic)
    """
    if isinstance(certificate, str):
        certificate = Certificate.from_json(certificate)
    program = export_model(model, args, kwargs)
    nodes = [n for n in program.graph.nodes if n.op != "output"]
    mismatch = _same_graph(certificate, nodes)
    if mismatch:
        return CertificateCheck(False, [mismatch], bad_input=mismatch)
    failures = []
    if certificate.graph_hash != graph_hash(program.graph):
        failures.append("the graph's literal arguments differ from the certified graph's "
                        "(graph hash mismatch)")
    param_of = parameter_names(program)
    unknown = sorted(set(certificate.params) - set(param_of.values()))
    if unknown:
        failures.append(f"the certificate scales {unknown}, which the model does not have")
    scaled = set(certificate.params)
    degrees: dict[str, Deg] = {}
    for step, node in zip(certificate.steps, nodes):
        try:
            failure = (_check_leaf(step, param_of.get(node.name), scaled) if node.op != "call_function"
                       else _check_op(step, node, degrees))
            degrees[node.name] = _claimed(step)
        except HomogeneityError as err:
            failure = str(err)
            degrees[node.name] = Deg(None, Grade.NONE)
        except Exception as err:  # a law applied to arguments it cannot read: the step fails
            failure = f"node {node.name} ({step.target}): {type(err).__name__}: {err}"
            degrees[node.name] = Deg(None, Grade.NONE)
        if failure:
            failures.append(failure)
    by_node = {s.node for s in certificate.steps}
    outputs = {path: node for path, node in certificate.outputs.items() if node not in by_node}
    failures += [f"output {path} names node {node}, which no step computes" for path, node in outputs.items()]
    uncovered = sorted({node_target(n) for n in nodes
                        if n.op == "call_function" and lemma_for(n.target) is None})
    bad = (f"the graph has ops no proved lemma covers ({', '.join(uncovered)}): no certificate of "
           "this model can prove its degree") if uncovered else ""
    return CertificateCheck(not failures, failures, len(certificate.steps), bad)
