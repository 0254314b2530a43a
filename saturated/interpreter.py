"""Run an exported graph on expansions in c: every parameter is a term of degree 1.

Placeholders for parameters become ``Term(θ, 1)`` (the parameter scaled by c); buffers, constants
and user inputs stay exact. :class:`LimitInterpreter`, a ``torch.fx.Interpreter``, runs the graph:
nodes whose tensor arguments are all exact run as they are (masks, position ids, bucket
computations); the others go through the rule table of :mod:`saturated.rules`. Errors name the
node, the op and the module it was traced in.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.export.graph_signature import ConstantArgument, InputKind
from torch.utils import _pytree as pytree

from homogeneity.tracing import node_module_path
from saturated.errors import SaturationError
from saturated.exact_zeros import resolved
from saturated.rounding import Rounding, tensor_norms, tensor_spectral_norm
from saturated.rules import RULES, TIE_AWARE, UNKNOWN_DEGREE_AWARE, Settings
from saturated.rules.products import GatheredRows
from saturated.rules.routing import name_router_rows
from saturated.terms import Term, UnknownDegree
from saturated.ties import TiedWeights, untie

__all__ = ["LimitInterpreter", "describe_node", "node_progress", "placeholder_values", "run_terms"]

_NODE_LISTENER: ContextVar[Callable[[int, int], None] | None] = ContextVar("node_listener", default=None)


@contextmanager
def node_progress(listener: Callable[[int, int], None]) -> Iterator[None]:
    """Within this block, every :class:`LimitInterpreter` calls ``listener(done, total)`` as it
    starts each node it runs: a progress bar can move inside one limit call, which takes minutes
    on a large batch.

    >>> seen = []
    >>> with node_progress(lambda done, total: seen.append((done, total))):
    ...     pass
    >>> seen
    []
    """
    token = _NODE_LISTENER.set(listener)
    try:
        yield
    finally:
        _NODE_LISTENER.reset(token)

aten = torch.ops.aten


def _is_term(value: Any) -> bool:
    return isinstance(value, Term)


def describe_node(node: torch.fx.Node) -> str:
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


def _as_term(value: torch.Tensor, source: torch.Tensor) -> Term:
    """A parameter's value in c: θ·c¹, known exactly. ``value`` is the model's tensor ``source``,
    or a copy of it cast to the dtype the graph runs in: its bound then casts ``source`` again
    where it reads the values, so that the copy is freed after the graph's last use of it. Its
    norms and spectral norm bound are kept with ``source`` from one call to the next
    (:func:`tensor_norms`, :func:`tensor_spectral_norm`)."""
    dtype = value.dtype  # the closure must not hold the copy itself
    detached = source.detach()
    remade = None if dtype == source.dtype else lambda: detached.to(dtype)
    bound = Rounding.of_exact(value, 1.0, remade, tensor_norms(source, dtype),
                              tensor_spectral_norm(source, dtype))
    return Term(((value, 1.0),), roundings=(bound,))


def placeholder_values(
    program: torch.export.ExportedProgram, tensors: Mapping[str, torch.Tensor],
    user_inputs: Sequence[Any], dtype: torch.dtype | None,
    grown: Callable[[torch.Tensor], Any] | None = None,
) -> list[Callable[[], Any]]:
    """Makers of the graph's placeholder values, in order: parameters as ``grown`` makes them
    (default: degree-1 terms, see :func:`_as_term`), the rest exact; floating tensors of the
    model cast to ``dtype`` when one is given, except embedding tables, whose lookups are cast
    instead. A tensor is read from ``tensors`` only when its maker runs (on first use), so a cast
    copy, or a weight ``tensors`` reads from disk, lives only while the graph needs it."""
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

    def parameter(read: Callable[[], torch.Tensor], name: str) -> Callable[[], Any]:
        if grown is None:
            def term() -> Any:
                tensor = read()
                return _as_term(cast(tensor, name), tensor)
            return term
        return lambda: grown(cast(read(), name))

    def exact(read: Callable[[], Any], name: str) -> Callable[[], Any]:
        return lambda: cast(read(), name)

    def stored(name: str) -> Callable[[], Any]:
        if name in tensors:
            return lambda: tensors[name]
        value = program.constants[name] if name in program.constants else program.state_dict[name]
        return lambda: value

    makers: list[Callable[[], Any]] = []
    inputs = iter(user_inputs)
    for placeholder, spec in zip(placeholders, program.graph_signature.input_specs):
        if spec.kind == InputKind.USER_INPUT:
            # Non-tensor inputs were specialized at export time: the graph holds their values.
            makers.append(constant(spec.arg.value if isinstance(spec.arg, ConstantArgument)
                                   else next(inputs)))
            continue
        read = stored(str(spec.target))
        makers.append(parameter(read, placeholder) if spec.kind == InputKind.PARAMETER
                      else exact(read, placeholder))
    return makers


def _needed(graph: torch.fx.Graph, keep: Sequence[bool] | None) -> set[torch.fx.Node]:
    """The nodes the kept outputs depend on (every node when all outputs are kept)."""
    if keep is None:
        return set(graph.nodes)
    output = next(node for node in graph.nodes if node.op == "output")
    stack = _kept_outputs(output, keep)
    needed = {output}
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    return needed


def _kept_outputs(output: torch.fx.Node, keep: Sequence[bool] | None) -> list[torch.fx.Node]:
    """The nodes of the kept outputs (all of the output node's inputs when ``keep`` is None)."""
    if keep is None:
        return list(output.all_input_nodes)
    flat = list(output.args[0])  # type: ignore[arg-type]
    return [node for node, kept in zip(flat, keep) if kept and isinstance(node, torch.fx.Node)]


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


# Ops whose limit keeps no rounding bound of its inputs (softmax weights, squashed signs, the
# power series of a norm's scale, indices): the error an input carried in stops there.
_DROPS_BOUNDS = frozenset({
    aten._softmax.default, aten.softmax.int, aten.sigmoid.default, aten.tanh.default,
    aten.rsqrt.default, aten.sqrt.default, aten.reciprocal.default, aten.argmax.default,
    aten.argmin.default, aten.argsort.default, aten.argsort.stable,
})


def _keeps_bounds(node: torch.fx.Node, orders: int) -> bool:
    """Whether ``node``'s limit may carry its inputs' rounding bounds on (True where unsure: the
    answer only decides what :func:`_carried_read` settles early, and a bound read that was not
    settled is computed where it is read)."""
    if node.target in _DROPS_BOUNDS:
        return False
    if node.target == aten.pow.Tensor_Scalar:  # a non-negative integer power is a product
        exponent = node.args[1]
        return isinstance(exponent, (int, float)) and exponent >= 0 and exponent == int(exponent)
    # LayerNorm's leading order normalizes one growing part directly, with no bound
    return node.target != aten.layer_norm.default or orders > 1


def _gathered_for_products(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The ``index`` nodes that take whole matrices of one tensor by a single index tensor along
    dimension 0 and are read only as the left operand of ``bmm``: a mixture of experts' batched
    expert products. Their rule leaves the gathering to the product (:class:`GatheredRows`)."""
    found = set()
    for node in graph.nodes:
        if node.target != aten.index.Tensor or len(node.args) != 2:
            continue
        indices = node.args[1]
        if not (isinstance(indices, (list, tuple)) and len(indices) == 1
                and isinstance(indices[0], torch.fx.Node)):
            continue
        if node.users and all(user.target == aten.bmm.default and user.args[0] is node
                              and user.args[1] is not node for user in node.users):
            found.add(node)
    return found


def _carried_read(graph: torch.fx.Graph, needed: set[torch.fx.Node], keep: Sequence[bool] | None,
                  settings: Any) -> set[torch.fx.Node]:
    """The nodes whose carried rounding error (:attr:`~saturated.rounding.Rounding.carried`) may
    be read: every node that runs when decisions read it (``settings.carried``), else the kept
    outputs (whose zero test reads it) and the nodes whose bounds reach one through ops that keep
    bounds. :class:`LimitInterpreter` settles theirs as each runs."""
    if not isinstance(settings, Settings):
        return set()
    if settings.carried:
        return set(needed)
    output = next((node for node in graph.nodes if node.op == "output"), None)
    stack = [] if output is None else _kept_outputs(output, keep)  # no output: refused on running
    read: set[torch.fx.Node] = set()
    while stack:
        node = stack.pop()
        if node not in read:
            read.add(node)
            if _keeps_bounds(node, settings.orders):
                stack.extend(node.all_input_nodes)
    return read


def _settle(value: Any, operand_rtol: float) -> None:
    """Settle the carried errors of the terms in ``value`` (:meth:`Rounding.settle`), each in its
    part's dtype."""
    for term in _values_of(value, Term):
        dtypes = {degree: coef.dtype for coef, degree in term.parts}
        for rounding in term.roundings:
            if rounding.carried is not None and rounding.degree in dtypes:
                rounding.settle(dtypes[rounding.degree], operand_rtol)


def _map_dtypes(value: Any, fn: Callable[[torch.dtype], Any]) -> Any:
    """A node argument with ``fn`` applied to every dtype in it (nested in lists, tuples and
    dicts)."""
    if isinstance(value, torch.dtype):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_dtypes(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_dtypes(v, fn) for k, v in value.items()}
    return value


def _names_dtype(value: Any) -> bool:
    """Whether a node's arguments hold a dtype (where :func:`_dtype_swap` may change one)."""
    named: list[torch.dtype] = []
    _map_dtypes(value, named.append)
    return bool(named)


def _dtype_swap(value: Any, swap: tuple[torch.dtype, torch.dtype] | None) -> Any:
    """A node argument with the model's dtype replaced by the dtype the graph runs in."""
    if swap is None:
        return value
    return _map_dtypes(value, lambda dtype: swap[1] if dtype == swap[0] else dtype)


@dataclass(frozen=True)
class _Plan:
    """What an interpreter reads of its graph, for one choice of kept outputs and settings."""

    needed: set[torch.fx.Node]
    last_uses: dict[torch.fx.Node, list[torch.fx.Node]]
    """Freed after each node: its values' last uses among the nodes that run, not among all."""
    settled: set[torch.fx.Node]
    """Carried errors computed as each of these runs, where they will be read: a bound left to the
    outputs' zero test would keep every operand it reads alive to the end."""
    gathered: set[torch.fx.Node]
    names_dtype: set[torch.fx.Node]
    """dtype arguments are constants of the graph: the nodes that name one."""
    total: int


# Per graph, by kept outputs and what of the settings the plan reads: a limit call runs the same
# graph every time (reading it took 1.3 ms of a two-layer Llama's 100 ms call, per pass).
_PLANS: weakref.WeakKeyDictionary[torch.fx.Graph, dict[Any, _Plan]] = weakref.WeakKeyDictionary()


def _plan(graph: torch.fx.Graph, keep: Sequence[bool] | None, settings: Any) -> _Plan:
    read = (settings.carried, settings.orders) if isinstance(settings, Settings) else None
    key = (None if keep is None else tuple(keep), read)
    plans = _PLANS.setdefault(graph, {})
    if key not in plans:
        needed = _needed(graph, keep)
        plans[key] = _Plan(needed, _last_uses(graph, needed), _carried_read(graph, needed, keep, settings),
                           _gathered_for_products(graph),
                           {node for node in needed if _names_dtype((node.args, node.kwargs))},
                           sum(node.op != "placeholder" for node in needed))
    return plans[key]


class LimitInterpreter(torch.fx.Interpreter):
    """A ``torch.fx.Interpreter`` whose values are expansions in c: each node gets its op's limit rule.

    Run it with one maker per placeholder (a function of no arguments returning the value, see
    :func:`run_terms`): a placeholder's value is made when a node first reads it, so a cast copy of
    a parameter lives only while the graph needs it. Nodes whose tensor arguments are all exact run
    as they are; the others go through :meth:`call_function` and the rule table. Values are freed
    after their last use among the nodes that run. Other analyses extend it the same way as
    :class:`homogeneity.analysis.DegreeInterpreter`: override :meth:`call_function` (or
    :meth:`run_node`).

    Args:
        module: the graph module (``ExportedProgram.graph_module``).
        settings: mask threshold, tie tolerance and tie policy.
        swap: (the model's dtype, the dtype to run in), or None to run as exported: dtype
            arguments of ops follow, and embedding lookups are cast (their tables are not).
        keep: per flattened output, whether to compute it (None: all); only the nodes the kept
            outputs depend on run, the others get None.
        rules: the rule table (default: every registered rule).
        tie_aware: the ops whose rules accept :class:`~saturated.ties.TiedWeights` (default: those
            registered so).
    """

    value_type: type = Term
    """The type of c-dependent values: nodes with none among their arguments run as they are."""

    def __init__(self, module: torch.fx.GraphModule, settings: Any,
                 swap: tuple[torch.dtype, torch.dtype] | None = None, keep: Sequence[bool] | None = None,
                 rules: Mapping[Any, Any] | None = None, tie_aware: Container[Any] | None = None) -> None:
        super().__init__(module, garbage_collect_values=True)
        self.extra_traceback = False  # errors name the node, op and module themselves
        self.settings = settings
        self.swap = swap
        self.keep = keep
        self.rules = RULES if rules is None else rules
        self.tie_aware = TIE_AWARE if tie_aware is None else tie_aware
        plan = _plan(self.graph, keep, settings)
        self.needed = plan.needed
        self.user_to_last_uses = plan.last_uses
        self.settled = plan.settled
        self.gathered = plan.gathered
        self.names_dtype = plan.names_dtype
        self.node: torch.fx.Node | None = None
        """The node being run (named in error messages)."""
        self._listener = _NODE_LISTENER.get()
        self._started, self._total = 0, plan.total

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op == "placeholder":
            return _Pending(next(self.args_iter))
        if n not in self.needed:
            return None
        if self._listener is not None:
            self._started += 1
            self._listener(self._started, self._total)
        with self._set_current_node(n):
            self.node = n
            if n.op == "output":
                flat = list(n.args[0])  # type: ignore[arg-type]
                chosen = self.keep if self.keep is not None else [True] * len(flat)
                outputs = [self.map_nodes_to_values(out, n) if kept else None
                           for out, kept in zip(flat, chosen)]
                return self.output(n.target, (outputs,), {})
            if n.op != "call_function":
                raise SaturationError(f"unexpected graph node kind '{n.op}' at {describe_node(n)}")
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            if self.swap is not None and n in self.names_dtype:
                args, kwargs = _dtype_swap(args, self.swap), _dtype_swap(kwargs, self.swap)
            value = self.call_function(n.target, args, kwargs)
            if self.swap is not None and n.target == aten.embedding.default:
                value = _cast(value, self.swap[1])
            if n in self.settled:
                _settle(value, self.settings.operand_rtol)
            return value

    def map_nodes_to_values(self, args: Any, n: torch.fx.Node) -> Any:
        """The values of the nodes in ``args``; a placeholder's value is made on first use."""

        def load(node: torch.fx.Node) -> Any:
            value = self.env[node]
            if isinstance(value, _Pending):
                value = self.env[node] = value.make()
            return value

        return torch.fx.node.map_arg(args, load)

    def gatherable(self, value: Any) -> bool:
        """Whether the expert matrices ``value`` may be left ungathered for their product's rule
        (:class:`GatheredRows`)."""
        return isinstance(value, Term) and value.lead.dim() == 3

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        """Run the op as it is if no argument depends on c, else its limit rule."""
        node = self.node
        assert node is not None
        if node in self.gathered and self.gatherable(args[0]) \
                and isinstance(args[1][0], torch.Tensor) and args[1][0].dim() == 1:
            return GatheredRows(args[0], args[1][0])
        leaves = _values_of((args, kwargs), (self.value_type, GatheredRows))
        if not leaves:
            return target(*args, **kwargs)
        rule = self.rules.get(target)
        if rule is None:
            raise SaturationError(
                f"no limit rule for op {target} at {describe_node(node)}; register one with "
                "saturated.register_rule"
            )
        settings = self.settings
        try:
            if any(isinstance(leaf, (TiedWeights, UnknownDegree)) for leaf in leaves):
                args, kwargs = self._resolved(target, args, kwargs)
            result = rule(settings, *args, **kwargs)
        except SaturationError as err:
            raise type(err)(f"{err} [at {describe_node(node)}]") from err
        except (RuntimeError, TypeError, ValueError) as err:
            raise SaturationError(f"the limit rule failed at {describe_node(node)}: {err}") from err
        if isinstance(result, TiedWeights) and target not in self.tie_aware:
            # Reported where the weights are used: say where they arose.
            return replace(result, reason=f"{result.reason} [at {describe_node(node)}]")
        return result

    def _resolved(self, target: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
        """The arguments, with tied weights and values of unknown degree made plain (or refused)
        for an op whose rule does not take them."""
        mark, use = self.settings.ties == "nan", f"op {target}"
        ties, unknown = target not in self.tie_aware, target not in UNKNOWN_DEGREE_AWARE

        def plain(value: Any) -> Any:
            value = untie(value, mark, use) if ties else value
            return resolved(value, False, use) if unknown else value

        return pytree.tree_map(plain, (args, kwargs), is_leaf=_is_term)

    def output(self, target: Any, args: Any, kwargs: Any) -> list[Any]:
        """The flattened outputs, with tied attention weights and values of unknown degree
        resolved (or refused)."""
        mark, use = self.settings.ties == "nan", "the model's output"
        return [resolved(untie(out, mark, use), mark, use) for out in args[0]]


class _Pending:
    """A placeholder's value not made yet."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


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
    makers = placeholder_values(program, tensors, user_inputs, None if swap is None else swap[1])
    try:
        outputs = LimitInterpreter(program.graph_module, settings, swap, keep).run(
            *makers, enable_io_processing=False)
    except SaturationError as err:  # a router names the token it could not route
        raise type(err)(name_router_rows(str(err), user_inputs)) from err
    if outputs is None:
        raise SaturationError("the exported graph has no output node")
    return list(outputs)


def _cast(value: Any, dtype: torch.dtype) -> Any:
    """An embedding lookup in the dtype the graph runs in (its table was left as it is)."""
    if isinstance(value, Term):
        return value.map(lambda a: a.to(dtype))
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def _values_of(values: Any, kind: type | tuple[type, ...]) -> list[Any]:
    """The c-dependent values (of type ``kind``) among a node's arguments (graph arguments nest
    only in lists, tuples and dicts); a plain loop, since this runs at every node."""
    found: list[Any] = []
    stack = [values]
    while stack:
        value = stack.pop()
        if isinstance(value, kind):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return found
