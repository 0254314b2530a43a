"""The analysis pass: propagate the rule table over an exported graph, writing ``node.meta``.

``analyze`` is the short top-level function: export the model, choose which parameters scale,
run :class:`DegreeInterpreter`, and summarise the result as a
:class:`~homogeneity.report.HomogeneityReport`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn

from homogeneity.degree import Degree
from homogeneity.errors import HomogeneityError
from homogeneity.program import leaf_name, output_names, select_parameters
from homogeneity.report import HomogeneityReport, build_report
from homogeneity.rules import RULES, target_name
from homogeneity.tracing import export_model, parameter_names

__all__ = [
    "META_KEY",
    "DegreeInterpreter",
    "analyze",
    "analyze_program",
    "leaf_name",
    "output_names",
    "propagate",
    "select_parameters",
]

META_KEY = "degree"
"""The ``node.meta`` key under which the analysis stores each node's :class:`Degree`."""


class DegreeInterpreter(torch.fx.Interpreter):
    """A ``torch.fx.Interpreter`` whose values are degrees: each node gets its op's rule applied.

    Args:
        module: the graph module (``ExportedProgram.graph_module`` or a builder's).
        leaves: the degree of each placeholder, by name; missing ones are constants.
        rules: the rule table (default: every registered rule).

    An op without a rule, or a rule that raises, gives grade ``none`` naming the op: the pass
    never stops half-way.
    """

    def __init__(self, module: torch.fx.GraphModule, leaves: Mapping[str, Degree],
                 rules: Mapping[Any, Any] | None = None) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.leaves = leaves
        self.rules = RULES if rules is None else rules
        self.unsupported: set[str] = set()
        """Names of the nodes whose op has no rule or whose rule raised."""

    def propagate(self) -> dict[torch.fx.Node, Degree]:
        """Run the pass; returns every node's degree (also written to ``node.meta``)."""
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        self.run(*([None] * len(placeholders)), enable_io_processing=False)
        return {n: n.meta[META_KEY] for n in self.graph.nodes if META_KEY in n.meta}

    def run_node(self, n: torch.fx.Node) -> Any:
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            if n.op == "output":
                return args[0]
            degree = self._degree(n, args, kwargs)
        n.meta[META_KEY] = degree
        return degree

    def _degree(self, n: torch.fx.Node, args: Any, kwargs: Any) -> Degree:
        if n.op in ("placeholder", "get_attr"):
            return self.leaves.get(n.name) or Degree.constant(f"input {n.name}")
        op = target_name(n.target) if n.op == "call_function" else f"{n.op} {n.target}"
        rule = self.rules.get(n.target) if n.op == "call_function" else None
        if rule is None:
            self.unsupported.add(n.name)
            return Degree.none(f"no rule for op {op}")
        try:
            return rule(*args, **kwargs)
        except Exception as err:
            # An op called with a signature its rule does not expect is an answer, not a crash.
            self.unsupported.add(n.name)
            return Degree.none(f"the rule for {op} failed: {type(err).__name__}: {err}")


def analyze_program(
    program: torch.export.ExportedProgram,
    *,
    params: str | Sequence[str] | None = None,
    input_degrees: Mapping[str, Degree | Any] | None = None,
) -> HomogeneityReport:
    """Propagate degrees over an already exported program.

    Args:
        program: from :func:`homogeneity.export_model` or ``torch.export.export``.
        params: the parameters that scale (names or glob patterns; default all). The rest, and
            every buffer and input, are constants of degree 0.
        input_degrees: degrees of user inputs by name (a number, a sympy expression in
            :data:`~homogeneity.K`, or a :class:`Degree`), to analyse a component on its own.

    Returns:
        The :class:`~homogeneity.report.HomogeneityReport`.
    """
    signature = program.graph_signature
    constants = {
        **{node: f"buffer {name}" for node, name in signature.inputs_to_buffers.items()},
        **{node: f"tensor constant {name}"
           for node, name in signature.inputs_to_lifted_tensor_constants.items()},
    }
    return propagate(program.graph_module, parameter_names(program), output_names(program),
                     params=params, input_degrees=input_degrees, constants=constants)


def propagate(
    module: torch.fx.GraphModule,
    param_of: Mapping[str, str],
    outputs: Mapping[str, str],
    *,
    params: str | Sequence[str] | None = None,
    input_degrees: Mapping[str, Degree | Any] | None = None,
    constants: Mapping[str, str] | None = None,
) -> HomogeneityReport:
    """Run :class:`DegreeInterpreter` over any graph module and report.

    Args:
        module: the graph module.
        param_of: parameter leaf node name → parameter name.
        outputs: readable output path → output node name.
        params: the parameters that scale (names or glob patterns; default all).
        input_degrees: degrees of input placeholders by name (default: constants).
        constants: other leaf node names → what they are (buffers, tensor constants).
    """
    scaled = select_parameters(param_of.values(), params)
    leaves: dict[str, Degree] = {
        node: Degree.exact(1, f"scaled parameter {name}") if name in scaled
        else Degree.constant(f"fixed parameter {name} (not scaled)")
        for node, name in param_of.items()
    }
    leaves |= {node: Degree.constant(what) for node, what in (constants or {}).items()}
    placeholders = {n.name for n in module.graph.nodes if n.op == "placeholder"} - set(leaves)
    for name, value in (input_degrees or {}).items():
        if name not in placeholders:
            raise HomogeneityError(
                f"input_degrees names {name!r}, but the graph's inputs are {sorted(placeholders)}"
            )
        leaves[name] = value if isinstance(value, Degree) else Degree.exact(value, f"input {name}")
    interpreter = DegreeInterpreter(module, leaves)
    degrees = interpreter.propagate()
    return build_report(module.graph, degrees, dict(outputs), interpreter.unsupported,
                        scaled=sorted(scaled), fixed=sorted(set(param_of.values()) - scaled))


def analyze(model: nn.Module, *args: Any, params: str | Sequence[str] | None = None,
            **kwargs: Any) -> HomogeneityReport:
    """The degree of homogeneity of ``model(*args, **kwargs)`` in its parameters.

    Args:
        model: any ``nn.Module`` that ``torch.export`` can trace (Hugging Face models included).
        *args: example positional inputs.
        params: the parameters that scale (names or glob patterns; default all).
        **kwargs: example keyword inputs.

    Returns:
        The report: each output's degree and grade, every node's, where the grade weakens and why,
        and a per-module summary.

    Raises:
        HomogeneityError: the model cannot be exported, an output is not a tensor, or a
            ``params`` pattern matches nothing.

    >>> mlp = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False))
    >>> report = analyze(mlp, torch.randn(5, 3))
    >>> report.degree, report.grade
    (2, <Grade.EXACT: 'exact'>)
    >>> analyze(mlp, torch.randn(5, 3), params="0.*").degree
    1
    """
    return analyze_program(export_model(model, args, kwargs), params=params)
