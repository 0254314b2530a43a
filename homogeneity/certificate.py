"""A degree derivation as data: one step per graph node, each an instance of a proved lemma.

A :class:`Certificate` records, for every node of the exported graph, the op, the nodes it reads
(the wiring), the lemma and case applied, the side conditions instantiated, and the degree that
came out. It is written by :func:`homogeneity.certify` and re-checked by
:func:`homogeneity.check_certificate`, which does not use the rule table. This module reads no
rule either: it holds the format and the description of a graph both sides share.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from homogeneity.degree import Grade
from homogeneity.errors import HomogeneityError
from homogeneity.tracing import target_name
from homogeneity.untrusted import parse_json, read_text
from homogeneity.validation import describe

__all__ = [
    "MAX_BYTES",
    "SCHEMA",
    "Certificate",
    "CertificateFieldError",
    "Step",
    "applied_to",
    "graph_hash",
    "leaf_step",
    "node_inputs",
    "node_target",
    "validate",
]

SCHEMA = "normsat.certificate/1"
"""The format version; a certificate of another version is refused, not guessed at."""


@dataclass(frozen=True)
class Step:
    """One node: what it computes from which nodes, by which lemma and case, with what result.

    ``degree`` is the exact fraction as text (``"1"``, ``"-1/2"``), ``"none"`` for no degree.
    Graph inputs (parameters, buffers, user inputs; ``target`` ``"placeholder"``) and attributes
    (``"get_attr"``) are leaves, with lemma ``"leaf"``.
    """

    node: str
    target: str
    inputs: tuple[str, ...]
    lemma: str | None
    case: str | None
    conditions: tuple[str, ...]
    degree: str | None
    grade: str


@dataclass(frozen=True)
class Certificate:
    """The derivation of a model's degrees, with what it was derived from.

    Attributes:
        steps: one per graph node, in graph order.
        outputs: each output's readable path → the node computing it.
        params: the parameters that scale (every other leaf is a constant).
        graph_hash: SHA-256 of the graph's nodes, targets, wiring and literal arguments.
        versions: normsat and torch versions that wrote it.
    """

    steps: tuple[Step, ...]
    outputs: dict[str, str]
    params: tuple[str, ...]
    graph_hash: str
    versions: dict[str, str] = field(default_factory=dict)
    schema: str = SCHEMA

    @property
    def missing(self) -> list[str]:
        """The ops of the nodes no proved lemma covers (sorted, each once)."""
        return sorted({s.target for s in self.steps if s.lemma is None})

    @property
    def complete(self) -> bool:
        """Whether every node is an instance of a proved lemma."""
        return not self.missing

    def output_degrees(self) -> dict[str, tuple[str | None, str]]:
        """Each output's ``(degree, grade)``."""
        by_node = {s.node: s for s in self.steps}
        return {path: (by_node[node].degree, by_node[node].grade) for path, node in self.outputs.items()}

    def to_json(self, indent: int | None = None) -> str:
        """The certificate as JSON text (compact by default: a model has thousands of steps)."""
        data = asdict(self)
        data["steps"] = [list(asdict(s).values()) for s in self.steps]
        data["step_fields"] = list(Step.__dataclass_fields__)
        return json.dumps(data, indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, source: str = "the certificate") -> Certificate:
        """Read a certificate written by :meth:`to_json`, every field checked (:func:`validate`).

        Args:
            text: the JSON text, from a source that need not be trusted: it is parsed within the
                format's depth, its numbers never converted (no field of the format is a number).
            source: how errors name it (the CLI gives the file's name).

        Raises:
            CertificateFieldError: a field is missing, unknown, of another type or out of range.
            HomogeneityError: the text is not JSON, nests deeper than the format, or has another
                schema version.

        >>> try:
        ...     Certificate.from_json('{"schema": "normsat.certificate/9"}')
        ... except HomogeneityError as err:
        ...     print(err)
        the certificate: field schema: expected 'normsat.certificate/1', got 'normsat.certificate/9' (str)
        """
        data = parse_json(text, source=source, max_depth=MAX_DEPTH)
        if not isinstance(data, dict):
            raise CertificateFieldError(source, "(top level)", "a JSON object", data)
        if data.get("schema") != SCHEMA:
            raise CertificateFieldError(source, "schema", repr(SCHEMA), data.get("schema"))
        known = (*TOP_FIELDS, "versions")
        unknown = [key for key in data if key not in known]
        if unknown:
            raise CertificateFieldError(source, unknown[0], f"only the fields {', '.join(known)}",
                                        data[unknown[0]])
        missing = [key for key in TOP_FIELDS if key not in data]
        if missing:
            raise CertificateFieldError(source, missing[0], "a value; the field is missing", None)
        if data["step_fields"] != list(STEP_FIELDS):
            raise CertificateFieldError(source, "step_fields", repr(list(STEP_FIELDS)), data["step_fields"])
        rows = _of_type(data["steps"], list, source, "steps", "a list of steps")
        steps = tuple(_step(row, f"steps[{index}]", source) for index, row in enumerate(rows))
        certificate = cls(steps, _of_type(data["outputs"], dict, source, "outputs", "an object"),
                          _tuple(data["params"]), data["graph_hash"], data.get("versions", {}))
        validate(certificate, source)
        return certificate

    @classmethod
    def read(cls, path: str | Path) -> Certificate:
        """Read the certificate file at ``path`` within :data:`MAX_BYTES`; errors name the file."""
        return cls.from_json(read_text(path, max_bytes=MAX_BYTES, what="certificate"), source=str(path))


STEP_FIELDS = tuple(Step.__dataclass_fields__)
"""The names of a step's fields, in the order of a step's row in the JSON text."""

TOP_FIELDS = ("schema", "step_fields", "steps", "outputs", "params", "graph_hash")
"""The fields every certificate has (``versions`` is optional: older versions did not write it)."""

MAX_BYTES = 8 * 2**20
"""The largest certificate file read: a step takes about 200 bytes (MiniLM's 329 steps 57 kB), so
this is some 40,000 nodes; reading and checking the format of 8 MiB takes seconds."""

MAX_DEPTH = 4
"""The format's nesting: the object, its list of steps, a step's row, a row's list of inputs."""

MAX_DIGITS = 100
"""Digits of a degree's numerator or denominator: a float exponent's exact fraction has about 17,
and a few chained ones add up; a longer one is refused before any arithmetic on it."""

MAX_TEXT = 2000
"""Characters of any text field (a node, an op, a condition, a parameter's name)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_FRACTION = re.compile(rf"-?(0|[1-9][0-9]{{0,{MAX_DIGITS - 1}}})(/[1-9][0-9]{{0,{MAX_DIGITS - 1}}})?")
_HASH = re.compile(r"[0-9a-f]{64}")
_GRADES = tuple(grade.value for grade in Grade)


class CertificateFieldError(HomogeneityError):
    """A certificate field that is missing, unknown, of another type or out of its range.

    ``field`` names it as the JSON text holds it (``steps[12].degree``, ``outputs['x']``, ``params``).
    """

    def __init__(self, source: str, field: str, expected: str, got: Any) -> None:
        self.field = field
        super().__init__(f"{source}: field {field}: expected {expected}, got {describe(got)}")


def _of_type(value: Any, kind: type, source: str, field: str, expected: str) -> Any:
    if not isinstance(value, kind):
        raise CertificateFieldError(source, field, expected, value)
    return value


def _tuple(value: Any) -> Any:
    """A JSON list as the tuple the dataclass holds; anything else as it is, for validate to name."""
    return tuple(value) if isinstance(value, list) else value


def _step(row: Any, field: str, source: str) -> Step:
    row = _of_type(row, list, source, field, f"a list of the {len(STEP_FIELDS)} fields {list(STEP_FIELDS)}")
    if len(row) != len(STEP_FIELDS):
        raise CertificateFieldError(source, field, f"{len(STEP_FIELDS)} fields {list(STEP_FIELDS)}", row)
    return Step(*(_tuple(value) if name in ("inputs", "conditions") else value
                  for name, value in zip(STEP_FIELDS, row, strict=True)))


def _text(value: Any, field: str, source: str, *, pattern: re.Pattern[str] | None = None,
          expected: str = f"text of at most {MAX_TEXT} characters") -> None:
    if not isinstance(value, str) or len(value) > MAX_TEXT or \
            (pattern is not None and not pattern.fullmatch(value)):
        raise CertificateFieldError(source, field, expected, value)


def _texts(value: Any, field: str, source: str, **kind: Any) -> None:
    _of_type(value, tuple, source, field, "a list")
    for index, item in enumerate(value):
        _text(item, f"{field}[{index}]", source, **kind)


def _degree(step: Step, field: str, source: str) -> None:
    """A degree is an exact fraction in lowest terms, ``"none"`` (or null) exactly for grade none."""
    if step.grade not in _GRADES:
        raise CertificateFieldError(source, f"{field}.grade", f"one of {', '.join(_GRADES)}", step.grade)
    if step.grade == Grade.NONE.value:
        if step.degree not in (None, "none"):
            raise CertificateFieldError(source, f"{field}.degree", "'none' for grade none", step.degree)
        return
    expected = (f"an exact fraction in lowest terms such as '1' or '-1/2', with at most {MAX_DIGITS} "
                "digits above and below")
    _text(step.degree, f"{field}.degree", source, pattern=_FRACTION, expected=expected)
    numerator, _, denominator = str(step.degree).partition("/")
    if numerator == "-0" or denominator == "1" or \
            (denominator and math.gcd(int(numerator), int(denominator)) != 1):
        raise CertificateFieldError(source, f"{field}.degree", expected, step.degree)


def validate(certificate: Certificate, source: str = "the certificate") -> None:
    """Check every field's type and range (not yet against a model: that is the checker's job).

    Raises:
        CertificateFieldError: naming the first field that is not of the format.
    """
    _of_type(certificate, Certificate, source, "(top level)", "a Certificate or its JSON text")
    _of_type(certificate.steps, tuple, source, "steps", "a list of steps")
    for index, step in enumerate(certificate.steps):
        field = f"steps[{index}]"
        _of_type(step, Step, source, field, "a step")
        _text(step.node, f"{field}.node", source, pattern=_NAME, expected="a graph node's name")
        _text(step.target, f"{field}.target", source)  # any op's name: compared with the graph's
        _texts(step.inputs, f"{field}.inputs", source, pattern=_NAME, expected="a graph node's name")
        for name in ("lemma", "case"):
            if getattr(step, name) is not None:
                _text(getattr(step, name), f"{field}.{name}", source, expected="text or null")
        _texts(step.conditions, f"{field}.conditions", source)
        _degree(step, field, source)
    _of_type(certificate.outputs, dict, source, "outputs", "an object")
    for path, node in certificate.outputs.items():
        _text(path, f"outputs[{describe(path)}]", source)
        _text(node, f"outputs[{path!r}]", source, pattern=_NAME, expected="a graph node's name")
    _texts(certificate.params, "params", source)
    _text(certificate.graph_hash, "graph_hash", source, pattern=_HASH,
          expected="a SHA-256 in 64 lowercase hexadecimal digits")
    _of_type(certificate.versions, dict, source, "versions", "an object")
    for name, version in certificate.versions.items():
        _text(version, f"versions[{name!r}]", source)


def leaf_step(node: torch.fx.Node, param_of: Mapping[str, str], scaled: set[str]) -> Step:
    """The step of a leaf (a parameter, buffer, graph input or attribute): degree 1 (exact) for a
    scaled parameter, 0 (exact) for any other leaf, which the scale leaves alone."""
    name = param_of.get(node.name)
    case = ("scaled parameter" if name in scaled else "fixed parameter") if name else "constant input"
    return Step(node.name, node_target(node), (), "leaf", case, (name or node.name,),
                "1" if case == "scaled parameter" else "0", Grade.EXACT.value)


def node_target(node: torch.fx.Node) -> str:
    """A node's op as text: the ATen overload, or ``placeholder``/``output``."""
    return target_name(node.target) if node.op == "call_function" else node.op


def node_inputs(node: torch.fx.Node) -> tuple[str, ...]:
    """The names of the nodes ``node`` reads, in argument order (repeats kept)."""
    leaves = pytree.tree_leaves((node.args, node.kwargs))
    return tuple(leaf.name for leaf in leaves if isinstance(leaf, torch.fx.Node))


def applied_to(node: torch.fx.Node, values: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The node's ``(args, kwargs)`` with each input node replaced by its value in ``values``."""
    def value(leaf: Any) -> Any:
        return values[leaf.name] if isinstance(leaf, torch.fx.Node) else leaf

    args, kwargs = pytree.tree_map(value, (tuple(node.args), dict(node.kwargs)))
    return args, kwargs


def _literal(value: Any) -> str:
    return f"%{value.name}" if isinstance(value, torch.fx.Node) else repr(value)


def graph_hash(graph: torch.fx.Graph) -> str:
    """SHA-256 over each node's name, op, target and arguments (nodes by name, literals by repr)."""
    digest = hashlib.sha256()
    for node in graph.nodes:
        args = pytree.tree_map(_literal, (node.args, dict(node.kwargs)))
        digest.update(f"{node.name}|{node.op}|{node_target(node)}|{args}\n".encode())
    return digest.hexdigest()
