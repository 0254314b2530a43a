"""check_certificate(): re-check a certificate against a fresh export, without the rule table.

This is the second code path. It exports the model again, checks that the certificate's nodes
are the graph's (targets and wiring), derives each leaf's degree from the scaled parameters, and
re-applies each step's lemma *law* (:mod:`homogeneity.lemmas`) to the degrees the certificate
claims for the step's inputs and to the node's literal arguments in the fresh graph. A step is
accepted when its lemma covers the op, its case is proved, and the law gives the claimed case,
side conditions, degree and grade. Every other field is re-derived and compared: the outputs and
the nodes they denote from the export's output specification, the parameters that scale from the
``params`` the check is given, the graph hash from the graph. The degrees the verdict reports are
the checked ones, at the outputs the export names. It imports neither ``homogeneity.rules`` nor
the analysis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import nn

from homogeneity.certificate import (
    Certificate,
    Step,
    applied_to,
    graph_hash,
    leaf_step,
    node_inputs,
    node_target,
    validate,
)
from homogeneity.degree import Grade
from homogeneity.lemmas import Deg, case_unproved, lemma_for
from homogeneity.lemmas.base import fmt
from homogeneity.program import output_names, select_parameters
from homogeneity.tracing import export_model, parameter_names

__all__ = ["CertificateCheck", "Failure", "check_certificate", "check_program"]


@dataclass(frozen=True)
class Failure:
    """One part of a certificate that does not check: the field of the certificate it is in
    (``steps[7].degree``, ``outputs['pooler_output']``, ``params``), the graph node it concerns
    (``None`` for a field of the whole certificate), and what is wrong."""

    field: str
    message: str
    node: str | None = None

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The failure as JSON-ready data: ``node``, ``field``, ``message``."""
        return {"node": self.node, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class CertificateCheck:
    """The verdict: ``ok`` when every step and output checks; otherwise each failure is named.

    ``bad_input`` is set when the certificate cannot be about this model at all: it describes
    another graph (the first mismatched node named, or literal arguments that differ), scales
    other parameters than the check was asked about, or the graph has ops no proved lemma covers
    (named). The command line reports these as bad input (exit code 2), not as a rejected proof.

    ``outputs`` holds each of the model's outputs, named as the fresh export names them, with the
    degree and grade the check established for it; it is empty unless the certificate is accepted
    (a rejected proof establishes nothing).
    """

    ok: bool
    failures: tuple[Failure, ...] = ()
    checked: int = 0
    bad_input: str = ""
    outputs: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """``accepted``, ``rejected`` (a step or an output does not follow) or ``bad input``."""
        return "accepted" if self.ok else "bad input" if self.bad_input else "rejected"

    @property
    def messages(self) -> list[str]:
        """Each failure's message, in the order found."""
        return [failure.message for failure in self.failures]

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-ready data: each output's checked degree and grade, each failure."""
        return {"verdict": self.verdict, "checked": self.checked,
                "outputs": {path: {"degree": degree, "grade": grade}
                            for path, (degree, grade) in self.outputs.items()},
                "failures": [failure.to_dict() for failure in self.failures],
                "bad_input": self.bad_input or None}

    def __str__(self) -> str:
        if self.ok:
            return f"certificate accepted: {self.checked} steps checked"
        return "certificate rejected:\n" + "\n".join(f"  {f}" for f in self.failures)


def _refused(failure: Failure) -> CertificateCheck:
    return CertificateCheck(False, (failure,), bad_input=failure.message)


def _claimed(step: Step) -> Deg:
    """The step's degree, read after :func:`validate` (a fraction in bounded digits, a grade)."""
    return Deg.of(step.degree, step.grade)


def _same_graph(certificate: Certificate, nodes: list[torch.fx.Node]) -> Failure | None:
    """The first node where the certificate and the graph differ, described; ``None`` if none."""
    for index, node in enumerate(nodes):
        if index >= len(certificate.steps):
            return Failure(f"steps[{index}]", f"node {node.name} ({node_target(node)}) of the graph is "
                           "not in the certificate", node.name)
        step = certificate.steps[index]
        wiring = node_inputs(node) if node.op == "call_function" else ()
        target = node_target(node)
        if (step.node, step.target, step.inputs) != (node.name, target, wiring):
            differs = next(name for name, ours, theirs in (("node", step.node, node.name),
                                                           ("target", step.target, target),
                                                           ("inputs", step.inputs, wiring))
                           if ours != theirs)
            return Failure(f"steps[{index}].{differs}",
                           f"node {index}: the certificate has {step.node} = {step.target}"
                           f"({_listed(step.inputs)}), the graph has {node.name} = {target}"
                           f"({', '.join(wiring)}): a certificate of another model or graph", node.name)
    if len(certificate.steps) > len(nodes):
        extra = certificate.steps[len(nodes)]
        return Failure(f"steps[{len(nodes)}]", f"step {extra.node} is not in the graph", extra.node)
    return None


def _listed(names: tuple[str, ...], most: int = 8) -> str:
    return ", ".join(names[:most]) + (f", … ({len(names)} in all)" if len(names) > most else "")


def _check_leaf(index: int, step: Step, node: torch.fx.Node, param_of: dict[str, str],
                scaled: set[str]) -> Failure | None:
    """A leaf's step is the one :func:`leaf_step` derives from the parameters that scale."""
    expected = leaf_step(node, param_of, scaled)
    param = param_of.get(node.name)
    why = f"parameter {param} {'scales' if param in scaled else 'is fixed'}" if param else \
        "a graph input or buffer is a constant"
    claimed, degree = _claimed(step), _claimed(expected)
    if claimed != degree:
        differs = "degree" if claimed.value != degree.value else "grade"
        return Failure(f"steps[{index}].{differs}",
                       f"leaf {step.node}: claims {claimed}, but {why}: {degree}", step.node)
    for name in ("lemma", "case", "conditions"):
        if getattr(step, name) != getattr(expected, name):
            return Failure(f"steps[{index}].{name}",
                           f"leaf {step.node}: {name} {_shown(getattr(step, name))}, but {why}: "
                           f"{_shown(getattr(expected, name))}", step.node)
    return None


def _shown(value: Any) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return text if len(text) <= 200 else f"{text[:200]}…"


def _check_op(index: int, step: Step, node: torch.fx.Node, degrees: dict[str, Deg]) -> Failure | None:
    where = f"steps[{index}]"
    lemma = lemma_for(node.target)
    if lemma is None or step.lemma != lemma.name:
        return Failure(f"{where}.lemma",
                       f"node {node.name} ({step.target}): no proved lemma covers it" if lemma is None else
                       f"node {node.name} ({step.target}): cites lemma {_shown(step.lemma)}, the op's "
                       f"lemma is {lemma.name!r}", node.name)
    args, kwargs = applied_to(node, degrees)
    claim = lemma.law(*args, **kwargs)
    unproved = case_unproved(lemma, claim.case)
    if unproved:
        return Failure(f"{where}.case", f"node {node.name} ({step.target}): {unproved}", node.name)
    if (step.case, step.conditions) != (claim.case, claim.conditions):
        return Failure(f"{where}.{'case' if step.case != claim.case else 'conditions'}",
                       f"node {node.name} ({step.target}): cites case {_shown(step.case)} with "
                       f"conditions {_shown(step.conditions)}; lemma {lemma.name!r} applies case "
                       f"{claim.case!r} with {list(claim.conditions)}", node.name)
    claimed = _claimed(step)
    if claimed != claim.out:
        return Failure(f"{where}.{'degree' if claimed.value != claim.out.value else 'grade'}",
                       f"node {node.name} ({step.target}): claims degree {fmt(claimed.value)} "
                       f"({claimed.grade}); lemma {lemma.name!r}, case {claim.case!r} gives "
                       f"{fmt(claim.out.value)} ({claim.out.grade})", node.name)
    return None


def _check_outputs(claimed: dict[str, str], outputs: dict[str, str]) -> list[Failure]:
    """The certificate's map of outputs is the fresh export's: each name, each node."""
    failures = []
    for path, node in outputs.items():
        if path not in claimed:
            failures.append(Failure(f"outputs[{path!r}]", f"output {path} (node {node}) of the model "
                                    "is missing from the certificate's outputs", node))
        elif claimed[path] != node:
            failures.append(Failure(f"outputs[{path!r}]", f"output {path} is node {node}, but the "
                                    f"certificate names node {claimed[path]}", node))
    failures += [Failure(f"outputs[{path!r}]", f"output {_shown(path)} of the certificate is not an "
                         f"output of the model (its outputs: {_listed(tuple(outputs))})", None)
                 for path in claimed if path not in outputs]
    return failures


def check_certificate(certificate: Certificate | str, model: nn.Module, *args: Any,
                      params: str | Sequence[str] | None = None, **kwargs: Any) -> CertificateCheck:
    """Check ``certificate`` against ``model(*args, **kwargs)`` exported afresh.

    Nothing the verdict reports is taken from the certificate unchecked: the outputs and their
    nodes come from the fresh export and must be the certificate's, the parameters that scale
    are selected again by ``params``, the graph hash is computed again, and every step is checked.

    Args:
        certificate: a :class:`Certificate` or its JSON text.
        model, *args, **kwargs: the model and example inputs it was written for.
        params: the parameters that scale, as :func:`homogeneity.certify` took them (default all).

    Returns:
        ``ok`` with the number of steps checked and each output's degree, or the failures, each
        naming its field and node. A step after a failed one is checked against the claimed
        degrees of its inputs, so every altered step is named, not only the first.

    Raises:
        HomogeneityError: the certificate is not of the format (malformed JSON, an unknown schema
            version, a field missing or of another type: :class:`CertificateFieldError` names it).

    >>> from torch import nn
    >>> from homogeneity.certify import certify
    >>> mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> x = torch.randn(5, 3)
    >>> verdict = check_certificate(certify(mlp, x), mlp, x)
    >>> verdict.ok, verdict.outputs
    (True, {'output': ('2', 'asymptotic')})
    >>> forged = certify(mlp, x).to_json().replace('"asymptotic"]', '"exact"]')
    >>> verdict = check_certificate(forged, mlp, x)
    >>> verdict.ok, len(verdict.failures), verdict.failures[0].field, verdict.failures[0].node
    (False, 1, 'steps[7].grade', 'linear_1')
    >>> for part in verdict.messages[0].split("; "):
    ...     print(part)
    node linear_1 (aten.linear.default): claims degree 2 (exact)
    lemma 'linear', case 'degrees add
    a lower-degree term' gives 2 (asymptotic)
    """
    if isinstance(certificate, str):
        certificate = Certificate.from_json(certificate)
    return check_program(certificate, export_model(model, args, kwargs), params=params)


def check_program(certificate: Certificate, program: torch.export.ExportedProgram, *,
                  params: str | Sequence[str] | None = None) -> CertificateCheck:
    """Check ``certificate`` against an already exported ``program``, as :func:`check_certificate`
    does after exporting the model (the program is only read, so one export serves many checks).

    Raises:
        CertificateFieldError: a field of ``certificate`` is not of the format (:func:`validate`).
    """
    validate(certificate)
    nodes = [n for n in program.graph.nodes if n.op != "output"]
    mismatch = _same_graph(certificate, nodes)
    if mismatch:
        return _refused(mismatch)
    if certificate.graph_hash != graph_hash(program.graph):
        return _refused(Failure("graph_hash", "the graph's literal arguments differ from the certified "
                                "graph's (graph hash mismatch): a certificate of another model or graph"))
    param_of = parameter_names(program)
    scaled = select_parameters(param_of.values(), params)
    if certificate.params != tuple(sorted(scaled)):
        chosen = "every parameter" if params is None else f"params {params!r}"
        return _refused(Failure("params", f"the certificate scales {len(certificate.params)} "
                                f"parameter(s) ({_listed(certificate.params, 4)}), the check "
                                f"{len(scaled)} ({chosen}): check with the params it was written for"))
    failures: list[Failure] = []
    degrees: dict[str, Deg] = {}
    for index, (step, node) in enumerate(zip(certificate.steps, nodes, strict=True)):
        try:
            failure = (_check_leaf(index, step, node, param_of, scaled) if node.op != "call_function"
                       else _check_op(index, step, node, degrees))
            degrees[node.name] = _claimed(step)
        except Exception as err:  # a law applied to arguments it cannot read: the step fails
            failure = Failure(f"steps[{index}]", f"node {node.name} ({step.target}): "
                              f"{type(err).__name__}: {err}", node.name)
            degrees[node.name] = Deg(None, Grade.NONE)
        if failure:
            failures.append(failure)
    outputs = output_names(program)
    failures += _check_outputs(certificate.outputs, outputs)
    uncovered = sorted({node_target(n) for n in nodes
                        if n.op == "call_function" and lemma_for(n.target) is None})
    bad = (f"the graph has ops no proved lemma covers ({', '.join(uncovered)}): no certificate of "
           "this model can prove its degree") if uncovered else ""
    ok = not failures and not bad
    checked = {path: (fmt(degrees[node].value), str(degrees[node].grade)) for path, node in outputs.items()}
    return CertificateCheck(ok, tuple(failures), len(certificate.steps), bad, checked if ok else {})
