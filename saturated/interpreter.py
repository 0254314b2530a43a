"""Run an exported graph on expansions in c: every parameter is a term of degree 1.

Placeholders for parameters become ``Term(θ, 1)`` (the parameter scaled by c); buffers, constants
and user inputs stay exact. Nodes whose tensor arguments are all exact run as they are (masks,
position ids, bucket computations); the others go through the rule table of
:mod:`saturated.rules`. Errors name the node, the op and the module it was traced in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch.export.graph_signature import ConstantArgument, InputKind
from torch.utils import _pytree as pytree

from homogeneity.tracing import node_module_path
from saturated.errors import SaturationError
from saturated.rounding import Rounding
from saturated.rules import RULES, TIE_AWARE, Settings
from saturated.terms import Term
from saturated.ties import TiedWeights, untie

__all__ = ["run_terms"]

aten = torch.ops.aten


def _is_term(value: Any) -> bool:
    return isinstance(value, Term)


def _where(node: torch.fx.Node) -> str:
    module = node_module_path(node) or "<root>"
    return f"node '{node.name}' (op {node.target}, module {module})"


def _looked_up(graph: torch.fx.Graph) -> set[str]:
    """Placeholders read only as the table of embedding lookups: cast after the lookup instead
    (the same values, exactly), so that a float64 run never copies a whole vocabulary table."""
    found = set()
    for node in graph.nodes:
        if node.op == "placeholder" and node.users and all(
                user.target == aten.embedding.default and user.args[0] is node for user in node.users):
            found.add(node.name)
    return found


def _placeholder_values(
    program: torch.export.ExportedProgram, tensors: Mapping[str, torch.Tensor],
    user_inputs: Sequence[Any], dtype: torch.dtype | None,
) -> list[Callable[[], Any]]:
    """Makers of the graph's placeholder values, in order: parameters as degree-1 terms, the rest
    exact; floating tensors of the model cast to ``dtype`` when one is given (made on first use,
    so a cast copy lives only while the graph needs it), except embedding tables, whose lookups
    are cast instead."""
    uncast = _looked_up(program.graph)
    placeholders = [node.name for node in program.graph.nodes if node.op == "placeholder"]

    def cast(tensor: Any, name: str) -> Any:
        if isinstance(tensor, torch.Tensor):
            tensor = tensor.detach()
            if dtype is not None and tensor.is_floating_point() and name not in uncast:
                return tensor.to(dtype)
        return tensor

    def constant(value: Any) -> Callable[[], Any]:
        return lambda: value

    def parameter(tensor: torch.Tensor, name: str) -> Callable[[], Any]:
        def make() -> Term:
            value = cast(tensor, name)
            return Term(((value, 1.0),), roundings=(Rounding.of_exact(value, 1.0),))
        return make

    def exact(tensor: Any, name: str) -> Callable[[], Any]:
        return lambda: cast(tensor, name)

    makers: list[Callable[[], Any]] = []
    inputs = iter(user_inputs)
    for placeholder, spec in zip(placeholders, program.graph_signature.input_specs):
        if spec.kind == InputKind.USER_INPUT:
            # Non-tensor inputs were specialized at export time: the graph holds their values.
            makers.append(constant(spec.arg.value if isinstance(spec.arg, ConstantArgument)
                                   else next(inputs)))
            continue
        name = str(spec.target)
        if name in tensors:
            tensor = tensors[name]
        elif name in program.constants:
            tensor = program.constants[name]
        else:
            tensor = program.state_dict[name]
        makers.append(parameter(tensor, placeholder) if spec.kind == InputKind.PARAMETER
                      else exact(tensor, placeholder))
    return makers


def _needed(graph: torch.fx.Graph, keep: Sequence[bool] | None) -> set[torch.fx.Node]:
    """The nodes the kept outputs depend on (every node when all outputs are kept)."""
    if keep is None:
        return set(graph.nodes)
    output = next(node for node in graph.nodes if node.op == "output")
    flat = list(output.args[0])
    stack = [node for node, kept in zip(flat, keep) if kept and isinstance(node, torch.fx.Node)]
    needed = {output}
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    return needed


def _last_uses(graph: torch.fx.Graph, needed: set[torch.fx.Node]) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """For each node that runs, the values whose last use it is (freed once it has run)."""
    last: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        if node not in needed:
            continue
        for used in node.all_input_nodes:
            last[used] = node
    freed: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for used, node in last.items():
        freed.setdefault(node, []).append(used)
    return freed


def _dtype_swap(value: Any, swap: tuple[torch.dtype, torch.dtype] | None) -> Any:
    """A node argument with the model's dtype replaced by the dtype the graph runs in."""
    if swap is None:
        return value
    if isinstance(value, torch.dtype):
        return swap[1] if value == swap[0] else value
    if isinstance(value, (list, tuple)):
        return type(value)(_dtype_swap(v, swap) for v in value)
    if isinstance(value, dict):
        return {k: _dtype_swap(v, swap) for k, v in value.items()}
    return value


def run_terms(
    program: torch.export.ExportedProgram,
    tensors: Mapping[str, torch.Tensor],
    user_inputs: Sequence[Any],
    settings: Settings,
    dtype: tuple[torch.dtype, torch.dtype] | None = None,
    keep: Sequence[bool] | None = None,
) -> list[Any]:
    """Interpret ``program`` with every parameter scaled by c → ∞, on expansions in c.

    Args:
        program: an exported program (see :func:`homogeneity.tracing.export_model`).
        tensors: the model's current parameters and buffers by qualified name.
        user_inputs: the tensor user inputs, in the program's order.
        settings: mask threshold, tie tolerance and tie policy.
        dtype: (the model's dtype, the dtype to run in): parameters, buffers and constants are
            cast as the graph reaches them, and dtype arguments of its ops follow (the same
            program serves every precision). None: run as exported.
        keep: per flattened output, whether to compute it (None: all); only the nodes the kept
            outputs depend on run, and the others are returned as None.

    Returns:
        The flattened outputs: :class:`~saturated.terms.Term` for c-dependent ones, exact values
        otherwise.

    Raises:
        SaturationError: an op without a limit rule, or a limit that is not determined; the message
            names the node, op and module.
    """
    swap = dtype if dtype is not None and dtype[0] != dtype[1] else None
    makers = iter(_placeholder_values(program, tensors, user_inputs, None if swap is None else swap[1]))
    pending: dict[torch.fx.Node, Callable[[], Any]] = {}
    env: dict[torch.fx.Node, Any] = {}

    def value(node: torch.fx.Node) -> Any:
        if node not in env:
            env[node] = pending.pop(node)()
        return env[node]

    needed = _needed(program.graph, keep)
    freed = _last_uses(program.graph, needed)
    for node in program.graph.nodes:
        if node.op != "placeholder" and node not in needed:
            continue
        if node.op == "placeholder":
            pending[node] = next(makers)
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, value)
            kwargs = torch.fx.node.map_arg(node.kwargs, value)
            if swap is not None:
                args, kwargs = _dtype_swap(args, swap), _dtype_swap(kwargs, swap)
            env[node] = _call(node, args, kwargs, settings)
            if swap is not None and node.target == aten.embedding.default:
                env[node] = _cast(env[node], swap[1])
        elif node.op == "output":
            flat = list(node.args[0])
            chosen = keep if keep is not None else [True] * len(flat)
            outputs = [torch.fx.node.map_arg(out, value) if kept else None
                       for out, kept in zip(flat, chosen)]
            return [untie(out, settings.ties == "nan", "the model's output") for out in outputs]
        else:
            raise SaturationError(f"unexpected graph node kind '{node.op}' at {_where(node)}")
        for done in freed.get(node, ()):
            env.pop(done, None)
    raise SaturationError("the exported graph has no output node")


def _cast(value: Any, dtype: torch.dtype) -> Any:
    """An embedding lookup in the dtype the graph runs in (its table was left as it is)."""
    if isinstance(value, Term):
        return value.map(lambda a: a.to(dtype))
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


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
