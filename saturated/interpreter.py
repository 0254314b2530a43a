"""Run an exported graph on expansions in c: every parameter is a term of degree 1.

Placeholders for parameters become ``Term(θ, 1)`` (the parameter scaled by c); buffers, constants
and user inputs stay exact. Nodes whose tensor arguments are all exact run as they are (masks,
position ids, bucket computations); the others go through the rule table of
:mod:`saturated.rules`. Errors name the node, the op and the module it was traced in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch.export.graph_signature import ConstantArgument, InputKind
from torch.utils import _pytree as pytree

from homogeneity.tracing import node_module_path
from saturated.errors import SaturationError
from saturated.rules import RULES, TIE_AWARE, Settings
from saturated.terms import Term
from saturated.ties import TiedWeights, untie

__all__ = ["run_terms"]


def _is_term(value: Any) -> bool:
    return isinstance(value, Term)


def _where(node: torch.fx.Node) -> str:
    module = node_module_path(node) or "<root>"
    return f"node '{node.name}' (op {node.target}, module {module})"


def _placeholder_values(
    program: torch.export.ExportedProgram, tensors: Mapping[str, torch.Tensor],
    user_inputs: Sequence[Any],
) -> list[Any]:
    """Values of the graph's placeholders, in order: parameters as degree-1 terms, the rest exact."""
    values: list[Any] = []
    inputs = iter(user_inputs)
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            # Non-tensor inputs were specialized at export time: the graph holds their values.
            constant = isinstance(spec.arg, ConstantArgument)
            values.append(spec.arg.value if constant else next(inputs))
            continue
        name = str(spec.target)
        if name in tensors:
            tensor = tensors[name]
        elif name in program.constants:
            tensor = program.constants[name]
        else:
            tensor = program.state_dict[name]
        if spec.kind == InputKind.PARAMETER:
            values.append(Term(((tensor.detach(), 1.0),)))
        else:
            values.append(tensor.detach() if isinstance(tensor, torch.Tensor) else tensor)
    return values


def run_terms(
    program: torch.export.ExportedProgram,
    tensors: Mapping[str, torch.Tensor],
    user_inputs: Sequence[Any],
    settings: Settings,
) -> list[Any]:
    """Interpret ``program`` with every parameter scaled by c → ∞, on expansions in c.

    Args:
        program: an exported program (see :func:`homogeneity.tracing.export_model`).
        tensors: the model's current parameters and buffers by qualified name.
        user_inputs: the tensor user inputs, in the program's order.
        settings: mask threshold, tie tolerance and tie policy.

    Returns:
        The flattened outputs: :class:`~saturated.terms.Term` for c-dependent ones, exact values
        otherwise.

    Raises:
        SaturationError: an op without a limit rule, or a limit that is not determined; the message
            names the node, op and module.
    """
    env: dict[torch.fx.Node, Any] = {}
    placeholders = iter(_placeholder_values(program, tensors, user_inputs))
    for node in program.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, env.__getitem__)
            kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
            env[node] = _call(node, args, kwargs, settings)
        elif node.op == "output":
            outputs = torch.fx.node.map_arg(node.args[0], env.__getitem__)
            return [untie(out, settings.ties == "nan", "the model's output") for out in outputs]
        else:
            raise SaturationError(f"unexpected graph node kind '{node.op}' at {_where(node)}")
    raise SaturationError("the exported graph has no output node")


def _terms(values: Any) -> list[Term]:
    """The terms among a node's arguments (graph arguments nest only in lists, tuples and dicts);
    a plain loop, since this runs at every node."""
    found: list[Term] = []
    stack = [values]
    while stack:
        value = stack.pop()
        if isinstance(value, Term):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return found


def _call(node: torch.fx.Node, args: Any, kwargs: Any, settings: Settings) -> Any:
    leaves = _terms((args, kwargs))
    if not leaves:
        return node.target(*args, **kwargs)  # type: ignore[operator]
    rule = RULES.get(node.target)
    if rule is None:
        raise SaturationError(
            f"no limit rule for op {node.target} at {_where(node)}; register one with "
            "saturated.register_rule"
        )
    try:
        if node.target not in TIE_AWARE and any(isinstance(leaf, TiedWeights) for leaf in leaves):
            args, kwargs = pytree.tree_map(
                lambda v: untie(v, settings.ties == "nan", f"op {node.target}"), (args, kwargs),
                is_leaf=_is_term)
        result = rule(settings, *args, **kwargs)
    except SaturationError as err:
        raise type(err)(f"{err} [at {_where(node)}]") from err
    except (RuntimeError, TypeError, ValueError) as err:
        raise SaturationError(f"the limit rule failed at {_where(node)}: {err}") from err
    if isinstance(result, TiedWeights) and node.target not in TIE_AWARE:
        # Reported where the weights are used: say where they arose.
        return replace(result, reason=f"{result.reason} [at {_where(node)}]")
    return result
