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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from homogeneity.errors import HomogeneityError
from homogeneity.tracing import target_name

__all__ = ["SCHEMA", "Certificate", "Step", "applied_to", "graph_hash", "node_inputs", "node_target"]

SCHEMA = "normsat.certificate/1"
"""The format version; a certificate of another version is refused, not guessed at."""


@dataclass(frozen=True)
class Step:
    """One node: what it computes from which nodes, by which lemma and case, with what result.

    ``degree`` is the exact fraction as text (``"1"``, ``"-1/2"``), ``None`` for no degree.
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
    def from_json(cls, text: str) -> Certificate:
        """Read a certificate written by :meth:`to_json`.

        Raises:
            HomogeneityError: the text is not JSON, has another schema version, or lacks fields.

        >>> try:
        ...     Certificate.from_json('{"schema": "normsat.certificate/9"}')
        ... except HomogeneityError as err:
        ...     print(err)
        certificate schema 'normsat.certificate/9' is not supported; expected 'normsat.certificate/1'
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise HomogeneityError(f"a certificate must be JSON; the text is not ({err})") from None
        if not isinstance(data, dict):
            raise HomogeneityError(f"a certificate is a JSON object, got {type(data).__name__}")
        if data.get("schema") != SCHEMA:
            raise HomogeneityError(f"certificate schema {data.get('schema')!r} is not supported; "
                                   f"expected {SCHEMA!r}")
        try:
            names = data["step_fields"]
            steps = tuple(_step(dict(zip(names, row, strict=True))) for row in data["steps"])
            return cls(steps, dict(data["outputs"]), tuple(data["params"]), str(data["graph_hash"]),
                       dict(data.get("versions", {})))
        except (KeyError, TypeError, ValueError) as err:
            raise HomogeneityError(f"the certificate's fields are malformed ({type(err).__name__}: "
                                   f"{err}); expected what Certificate.to_json writes") from None


def _step(row: dict[str, Any]) -> Step:
    return Step(str(row["node"]), str(row["target"]), tuple(row["inputs"]), row["lemma"],
                row["case"], tuple(row["conditions"]), row["degree"], str(row["grade"]))


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
