"""certify(): run the degree analysis and write its derivation as a :class:`Certificate`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from importlib import metadata
from typing import Any

import sympy
import torch
import torch.fx
from torch import nn

from homogeneity.analysis import META_KEY, analyze_program
from homogeneity.certificate import (
    Certificate,
    Step,
    applied_to,
    graph_hash,
    leaf_step,
    node_inputs,
    node_target,
)
from homogeneity.degree import Degree, Grade
from homogeneity.errors import HomogeneityError
from homogeneity.lemmas import Deg, case_unproved, lemma_for
from homogeneity.lemmas.base import fmt
from homogeneity.program import output_names, select_parameters
from homogeneity.tracing import export_model, parameter_names

__all__ = ["certify", "versions"]


def versions() -> dict[str, str]:
    """The normsat and torch versions, recorded in every certificate."""
    try:
        normsat = metadata.version("normsat")
    except metadata.PackageNotFoundError:
        normsat = "unknown"
    return {"normsat": normsat, "torch": torch.__version__}


def _concrete(node: torch.fx.Node, degree: Degree) -> Deg:
    if not degree.single:
        raise HomogeneityError(f"node {node.name} has the piecewise degree {degree}; certificates "
                               "cover concrete degrees (a whole model, not a symbolic component)")
    (case,) = degree.cases
    if case.grade is Grade.NONE:
        return Deg(None, Grade.NONE)
    if not case.value.is_Number:
        raise HomogeneityError(f"node {node.name} has the degree {degree}, not a number; certificates "
                               "record degrees as fractions")
    # A Float (a float exponent) as the exact binary fraction it holds: rounding it to a short
    # decimal would hide a rule that is off by more than float rounding.
    value = sympy.Rational(case.value)
    return Deg(Fraction(int(value.p), int(value.q)), case.grade)


def _leaf(node: torch.fx.Node, degree: Deg, param_of: dict[str, str], scaled: set[str]) -> Step:
    """The leaf's step with the degree the analysis gave it (the checker expects :func:`leaf_step`'s)."""
    return replace(leaf_step(node, param_of, scaled), degree=fmt(degree.value), grade=str(degree.grade))


def certify(model: nn.Module, *args: Any, params: str | Sequence[str] | None = None,
            **kwargs: Any) -> Certificate:
    """The degree of ``model(*args, **kwargs)`` with its derivation, one proved step per node.

    Args:
        model: any model :func:`homogeneity.analyze` takes.
        *args: example positional inputs.
        params: the parameters that scale (names or glob patterns; default all).
        **kwargs: example keyword inputs.

    Returns:
        The :class:`Certificate`; ``complete`` is False, naming the ops, when a node's op has no
        lemma or its case is not proved.

    >>> from torch import nn
    >>> mlp = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2, bias=False))
    >>> certificate = certify(mlp, torch.randn(5, 3))
    >>> certificate.complete, certificate.output_degrees()
    (True, {'output': ('1', 'approximate')})
    >>> [s.case for s in certificate.steps if s.target == "aten.tanh.default"]
    ['growing input']
    """
    program = export_model(model, args, kwargs)
    analyze_program(program, params=params)
    param_of = parameter_names(program)
    scaled = select_parameters(param_of.values(), params)
    degrees: dict[str, Deg] = {}
    steps = []
    for node in program.graph.nodes:
        if node.op == "output":
            continue
        degree = _concrete(node, node.meta[META_KEY])
        if node.op == "call_function":
            step = _step(node, degree, degrees)
        else:
            step = _leaf(node, degree, param_of, scaled)
        steps.append(step)
        degrees[node.name] = Deg.of(step.degree, step.grade)  # as the checker reads it back
    return Certificate(tuple(steps), output_names(program), tuple(sorted(scaled)),
                       graph_hash(program.graph), versions())


def _step(node: torch.fx.Node, degree: Deg, degrees: dict[str, Deg]) -> Step:
    """The step of one op node: the lemma's case and conditions for what the rule derived."""
    target, inputs = node_target(node), node_inputs(node)
    lemma = lemma_for(node.target)
    if lemma is None:
        return Step(node.name, target, inputs, None, None, (), fmt(degree.value), str(degree.grade))
    args, kwargs = applied_to(node, degrees)
    claim = lemma.law(*args, **kwargs)
    proved = case_unproved(lemma, claim.case) is None
    if _rounded(node.meta[META_KEY]) and _within_rounding(degree, claim.out):
        degree = claim.out
    return Step(node.name, target, inputs, lemma.name if proved else None, claim.case,
                claim.conditions, fmt(degree.value), str(degree.grade))


def _rounded(degree: Degree) -> bool:
    """Whether the rule computed the degree in floating point: a float exponent (``x ** 0.3``)
    enters it as a sympy Float, and products of Floats round."""
    return any(case.value is not None and case.value.has(sympy.Float) for case in degree.cases)


def _within_rounding(rule: Deg, lemma: Deg) -> bool:
    """The rule's degree is the lemma's up to the rounding of float arithmetic. The lemma reads a
    float exponent as the exact binary fraction it stores and multiplies exactly, so its value is
    the one recorded; a rule that differs by more disagrees with the lemma, and the checker says so."""
    if rule.grade is not lemma.grade or rule.value is None or lemma.value is None:
        return False
    return math.isclose(rule.value, lemma.value, rel_tol=1e-12, abs_tol=1e-12)

