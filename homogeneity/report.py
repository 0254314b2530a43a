"""The result of an analysis: per-output, per-node and per-module degrees, and where grades weaken."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch.fx

from homogeneity.degree import Degree, Grade, weakest
from homogeneity.rules import target_name
from homogeneity.tracing import node_module_path, normalize_module_path

__all__ = ["HomogeneityReport", "ModuleSummary", "NodeDegree", "build_report"]

SCHEMA = "normsat.homogeneity/1"


@dataclass(frozen=True)
class NodeDegree:
    """One graph node: its name, op, module path, degree, and (if it weakens) the prior grade.

    ``unsupported`` marks an op without a rule (or whose rule raised).
    """

    name: str
    op: str
    module: str
    degree: Degree
    weakened_from: Grade | None = None
    unsupported: bool = False

    @property
    def grade(self) -> Grade:
        return self.degree.grade

    def to_dict(self) -> dict[str, Any]:
        data = {"node": self.name, "op": self.op, "module": self.module, **self.degree.to_dict()}
        if self.weakened_from is not None:
            data["weakened_from"] = str(self.weakened_from)
        return data


@dataclass(frozen=True)
class ModuleSummary:
    """A module's view: the degrees entering and leaving it and the weakest grade inside."""

    path: str
    type: str
    nodes: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    grade: Grade
    weakenings: int

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.path, "type": self.type, "nodes": self.nodes,
                "input_degrees": list(self.inputs), "output_degrees": list(self.outputs),
                "grade": str(self.grade), "weakenings": self.weakenings}


@dataclass
class HomogeneityReport:
    """What :func:`homogeneity.analyze` found.

    Attributes:
        outputs: each output's degree, by readable path (``last_hidden_state``, ``hidden_states.2``).
        nodes: every computing node, in graph order.
        modules: per-module summaries, every module path in graph order.
        scaled: the parameters that scale; ``fixed`` the ones held constant.
    """

    outputs: dict[str, Degree]
    nodes: list[NodeDegree]
    modules: list[ModuleSummary]
    scaled: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def main_output(self) -> str:
        """``last_hidden_state`` when present, else the first output."""
        return "last_hidden_state" if "last_hidden_state" in self.outputs else next(iter(self.outputs))

    @property
    def degree(self) -> sympy.Expr:
        """The main output's degree (``nan`` when undefined)."""
        return self.outputs[self.main_output].value

    @property
    def grade(self) -> Grade:
        """The main output's grade."""
        return self.outputs[self.main_output].grade

    @property
    def weakenings(self) -> list[NodeDegree]:
        """The nodes where the grade weakens or the degree becomes undefined, with the reason."""
        return [n for n in self.nodes if n.weakened_from is not None]

    @property
    def unsupported(self) -> list[NodeDegree]:
        """Every node whose op has no rule (or whose rule failed), all at once."""
        return [n for n in self.nodes if n.unsupported]

    def node(self, name: str) -> NodeDegree:
        """The entry of graph node ``name``."""
        for entry in self.nodes:
            if entry.name == name:
                return entry
        raise KeyError(f"no node named {name!r}")

    def module(self, path: str) -> ModuleSummary:
        """The summary of module ``path`` (``''`` for the root)."""
        for summary in self.modules:
            if summary.path == path:
                return summary
        raise KeyError(f"no module {path!r}; modules: {[m.path for m in self.modules][:10]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "degree": str(self.degree),
            "grade": str(self.grade),
            "outputs": {name: d.to_dict() for name, d in self.outputs.items()},
            "weakenings": [n.to_dict() for n in self.weakenings],
            "unsupported": [n.to_dict() for n in self.unsupported],
            "modules": [m.to_dict() for m in self.modules],
            "nodes": [n.to_dict() for n in self.nodes],
            "scaled_parameters": self.scaled,
            "fixed_parameters": self.fixed,
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The whole report as JSON (schema ``normsat.homogeneity/1``)."""
        return json.dumps(self.to_dict(), indent=indent)

    def table(self, *, depth: int | None = None) -> str:
        """A readable text table: outputs, where grades weaken, unsupported ops, modules.

        Args:
            depth: show modules at most this many dots deep (``None``: all).
        """
        lines = [f"degree {self.degree} ({self.grade}) of {self.main_output}", "", "outputs:"]
        lines += [f"  {name:<28} {d}" for name, d in self.outputs.items()]
        lines += ["", "where the grade weakens:"]
        lines += [f"  {n.name:<22} {n.op:<28} {n.module or '<root>':<40} {n.weakened_from} -> "
                  f"{n.degree}: {n.degree.reason}" for n in self.weakenings] or ["  nowhere"]
        unsupported = self.unsupported
        if unsupported:
            lines += ["", "unsupported ops:"]
            lines += [f"  {n.op} at {n.module or '<root>'} ({n.name}): {n.degree.reason}"
                      for n in unsupported]
        lines += ["", f"{'module':<44} {'type':<24} {'in':<26} {'out':<32} grade"]
        for m in self.modules:
            if depth is not None and _depth(m.path) > depth:
                continue
            lines.append(f"{m.path or '<root>':<44} {m.type:<24} {', '.join(m.inputs):<26} "
                         f"{', '.join(m.outputs):<32} {m.grade}")
        return "\n".join(lines)

    def causes(self) -> list[tuple[str, int, NodeDegree]]:
        """Why grades weaken: each distinct reason, how often, and its first node."""
        found: dict[str, list[NodeDegree]] = {}
        for node in self.weakenings:
            found.setdefault(node.degree.reason, []).append(node)
        return [(reason, len(nodes), nodes[0]) for reason, nodes in found.items()]

    def markdown(self, *, depth: int | None = 2) -> str:
        """Markdown tables: outputs, why grades weaken, and modules up to ``depth`` levels."""
        lines = ["| output | degree | grade |", "|---|---|---|"]
        lines += [f"| `{name}` | {d.value} | {d.grade} |" for name, d in self.outputs.items()]
        lines += ["", "| why the grade weakens | nodes | first at |", "|---|---|---|"]
        lines += [f"| {reason} | {count} | `{first.module or '<root>'}` (`{first.op}`) |"
                  for reason, count, first in self.causes()]
        lines += ["", "| module | type | degree in | degree out | weakest grade |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{m.path or '<root>'}` | {m.type} | {', '.join(m.inputs)} | "
                  f"{', '.join(m.outputs)} | {m.grade} |"
                  for m in self.modules if depth is None or _depth(m.path) <= depth]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table(depth=3)


def build_report(graph: torch.fx.Graph, degrees: dict[torch.fx.Node, Degree],
                 outputs: dict[str, str], unsupported: set[str], *, scaled: list[str],
                 fixed: list[str]) -> HomogeneityReport:
    """Assemble the report from a propagated graph.

    Args:
        graph: the graph.
        degrees: every node's degree.
        outputs: output path → node name.
        unsupported: names of nodes whose op has no rule.
        scaled: scaled parameter names; fixed: the others.
    """
    by_name = {n.name: n for n in graph.nodes}
    entries: list[NodeDegree] = []
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        degree = degrees[node]
        before = weakest(degrees[i].grade for i in node.all_input_nodes if i in degrees)
        weakened = before if degree.grade.rank > before.rank else None
        entries.append(NodeDegree(node.name, target_name(node.target), node_module_path(node),
                                  degree, weakened, node.name in unsupported))
    return HomogeneityReport(
        outputs={name: degrees[by_name[label]] for name, label in outputs.items()},
        nodes=entries,
        modules=_module_summaries(graph, degrees, {e.name: e for e in entries}),
        scaled=scaled,
        fixed=fixed,
    )


def _module_summaries(graph: torch.fx.Graph, degrees: dict[torch.fx.Node, Degree],
                      entries: dict[str, NodeDegree]) -> list[ModuleSummary]:
    """One summary per module path: the degrees crossing its boundary and its weakest grade."""
    members: dict[str, list[torch.fx.Node]] = {}
    types: dict[str, str] = {}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        for raw_path, cls in (node.meta.get("nn_module_stack") or {}).values():
            path = normalize_module_path(str(raw_path))
            members.setdefault(path, []).append(node)
            types.setdefault(path, str(getattr(cls, "__name__", cls)).rsplit(".", 1)[-1])
    summaries = []
    for path, nodes in members.items():
        inside = set(nodes)
        entering = {i for n in nodes for i in n.all_input_nodes
                    if i not in inside and not _is_parameter(i, degrees)}
        leaving = [n for n in nodes if any(u not in inside for u in n.users)]
        summaries.append(ModuleSummary(
            path=path,
            type=types[path],
            nodes=len(nodes),
            inputs=_distinct(degrees[i] for i in entering if i in degrees),
            outputs=_distinct(degrees[n] for n in leaving),
            grade=weakest(degrees[n].grade for n in nodes),
            weakenings=sum(entries[n.name].weakened_from is not None for n in nodes),
        ))
    return summaries


def _depth(path: str) -> int:
    return path.count(".") + 1 if path else 0


def _is_parameter(node: torch.fx.Node, degrees: dict[torch.fx.Node, Degree]) -> bool:
    return node.op == "placeholder" and degrees[node].reason.startswith(
        ("scaled parameter", "fixed parameter", "buffer"))


def _distinct(degrees: Any) -> tuple[str, ...]:
    return tuple(sorted({str(d) for d in degrees}))
