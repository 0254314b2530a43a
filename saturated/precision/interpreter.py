"""One pass of the exported graph on leading coefficients in ball arithmetic, at one precision.

The same graph, the same interpreter and the same placeholder handling as the fast path
(:mod:`saturated.interpreter`): only the values (:class:`~saturated.precision.lead.Lead` instead
of :class:`~saturated.terms.Term`) and the rule table (:data:`~saturated.precision.rules.BALL_RULES`)
differ. Exact ops (masks, positions, buckets) run as they are, in the model's dtype, as the model
runs them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from saturated.errors import SaturationError
from saturated.interpreter import LimitInterpreter, describe_node, placeholder_values
from saturated.precision import expansions, products
from saturated.precision.balls import working_precision
from saturated.precision.lead import Lead
from saturated.precision.loss import Loss
from saturated.precision.rules import (
    BALL_RULES,
    PRODUCTS,
    TIED_PRODUCTS,
    TIES_KEPT,
    Context,
    Escalate,
    untied,
)

__all__ = ["BallPass", "run_balls"]


class _BallInterpreter(LimitInterpreter):
    """:class:`~saturated.interpreter.LimitInterpreter` on leads, with the ball rules."""

    value_type = Lead

    def __init__(self, module: torch.fx.GraphModule, context: Context, keep: Sequence[bool] | None) -> None:
        super().__init__(module, context, keep=keep, rules=BALL_RULES, tie_aware=())
        self.context = context
        self.depths = _product_depths(module.graph)

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        node = self.node
        assert node is not None
        self.context.target = target
        self.context.where = lambda: describe_node(node)
        self.context.ran += 1
        self.context.depth = self.depths[node]
        if target not in BALL_RULES and any(isinstance(v, Lead) for v in _flat((args, kwargs))):
            raise SaturationError(f"no ball rule for op {target} at {describe_node(node)}")
        if target not in TIES_KEPT:
            args, kwargs = self._untied(target, args, kwargs)
        return super().call_function(target, args, kwargs)

    def gatherable(self, value: Any) -> bool:
        """Expert matrices are left ungathered where they are exact floats (parameters) and
        nothing else: their product's ball rule then multiplies per expert."""
        return isinstance(value, Lead) and value.exact is not None and value.exact.dim() == 3 \
            and all(part is None for part in (value.infinite, value.lower, value.zeros, value.ties))

    def _untied(self, target: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
        """The arguments with tied hard-attention weights made undetermined where the op's rule
        does not read them as such: everywhere but a product's first operand."""
        def plain(value: Any) -> Any:
            return untied(self.context, value) if isinstance(value, Lead) else value

        kept = args[:1] if target in TIED_PRODUCTS and args else ()
        return (*kept, *pytree.tree_map(plain, tuple(args[len(kept):]))), pytree.tree_map(plain, kwargs)

    def output(self, target: Any, args: Any, kwargs: Any) -> list[Any]:
        return list(args[0])


def _product_depths(graph: torch.fx.Graph) -> dict[torch.fx.Node, float]:
    """Per node, the most matrix products on a path from the inputs to it, over the most on any
    path (0 for a graph without products)."""
    depth: dict[torch.fx.Node, int] = {}
    for node in graph.nodes:  # in topological order
        depth[node] = max((depth[arg] for arg in node.all_input_nodes), default=0) + (node.target in PRODUCTS)
    most = max(depth.values(), default=0)
    return {node: d / most if most else 0.0 for node, d in depth.items()}


def _flat(values: Any) -> list[Any]:
    found, stack = [], [values]
    while stack:
        value = stack.pop()
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        else:
            found.append(value)
    return found


@dataclass(frozen=True)
class BallPass:
    """The outputs of one pass, normalized as the fast path normalizes them.

    Attributes:
        outputs: per flattened output, (lim f/cᵈ as float64 with NaN where undetermined, d), an
            exact output as it is (degree 0.0, or None for non-tensors), or None if not computed.
        reasons: (batch entries, or None for every entry, reason, the entries a higher precision
            may still decide) of each undecided decision.
        escalated: the pass was given up (no outputs): every entry needs a higher precision.
        reached: the share of the graph's ops run before it was given up (1 for a whole pass).
        needed: for a pass given up on its own loss before any decision failed
            (:mod:`~saturated.precision.loss`), the bits that loss says the whole graph needs;
            None otherwise.
    """

    outputs: list[tuple[Any, float | None] | None]
    reasons: list[tuple[frozenset[int] | None, str, frozenset[int] | None]]
    escalated: bool = False
    reached: float = 1.0
    needed: float | None = None


def run_balls(program: torch.export.ExportedProgram, tensors: Mapping[str, torch.Tensor],
              user_inputs: Sequence[Any], *, mask_threshold: float, bits: int, entries: int,
              keep: Sequence[bool] | None = None, escalate: bool = False, early: bool = False) -> BallPass:
    """Interpret ``program`` with every parameter scaled by c → ∞, on leading coefficients held
    as balls at ``bits`` of precision, for a batch of ``entries`` entries. With ``escalate`` (a
    higher precision follows), the pass is given up as soon as every entry has a decision only a
    higher precision may make: the rest of it would be wasted; with ``early`` as well, as soon as
    the precision it has lost, extrapolated to the end of the graph, leaves its last decisions
    no bits (:mod:`~saturated.precision.loss`).

    Raises:
        SaturationError: an op without a ball rule (the message names the node).
    """
    ops = sum(1 for node in program.graph_module.graph.nodes if node.op == "call_function")
    context = Context(mask_threshold, bits, entries, escalate=escalate, ops=max(ops, 1),
                      loss=Loss(bits) if escalate and early else None)
    makers = placeholder_values(program, tensors, user_inputs, None, _grown)
    with working_precision(bits), torch.no_grad():
        try:
            interpreter = _BallInterpreter(program.graph_module, context, keep)
            raw = interpreter.run(*makers, enable_io_processing=False)
            outputs = [_normalized(out, index, context) for index, out in enumerate(raw)]
        except Escalate:
            return BallPass([], context.reasons, escalated=True, reached=context.ran / context.ops,
                            needed=context.needed)
        finally:
            products.forget()
    return BallPass(outputs, context.reasons)


def _grown(value: torch.Tensor) -> Any:
    """A parameter θ as c·θ: its values as the leading coefficients at degree 1, or, for a parameter
    that is 0 everywhere (Gemma's norm scales γ in 1 + γ at initialization), the exact constant 0 it
    is for every c, so that 1 + c·γ is 1 at degree 0 (as :func:`saturated.terms.make` drops the
    fast path's zero lead there) and not a lead of 0 at degree 1 that no precision decides."""
    value = value.detach()
    return Lead(1.0, exact=value.to(torch.float64)) if bool(value.any()) else value


def _normalized(out: Any, index: int, context: Context) -> tuple[Any, float | None] | None:
    """lim v/cᵈ of one output: the midpoints of its leading balls (within their radii of the exact
    values). A vector along the last dimension whose balls all hold 0 may be zero at d, so that a
    lower degree leads: undetermined, as is every element a decision left undecided."""
    if out is None:
        return None
    if not isinstance(out, Lead):
        return out, (0.0 if isinstance(out, torch.Tensor) else None)
    context.where = lambda: f"output {index}"
    out = untied(context, out)  # attention weights as an output: a tied row's split is not known
    if out.infinite is not None and bool(out.infinite.any()):
        raise SaturationError(f"output {index} holds a masking constant (±∞ in the limit)")
    coefficients = out.operand(context.bits)
    values = torch.from_numpy(expansions.midpoints(coefficients))
    sign = expansions.signs(coefficients)
    unknown = expansions.undetermined(coefficients)
    zeroish = (sign == 0) | np.isnan(sign)
    shape = coefficients.shape[1:]
    if shape:
        hidden = zeroish.all(axis=-1, keepdims=True) & ~unknown.any(axis=-1, keepdims=True)
        context.where = lambda: f"output {index}"
        exact_zero = (sign == 0).all(axis=-1, keepdims=True)
        context.undecided(np.broadcast_to(hidden, shape),
                          f"a vector whose leading coefficients (degree {out.degree:g}) are not "
                          "proved nonzero", np.broadcast_to(exact_zero, shape))
        values = values.masked_fill(torch.from_numpy(np.broadcast_to(hidden, shape).copy()), math.nan)
    elif bool(zeroish) and not bool(unknown):
        context.where = lambda: f"output {index}"
        context.undecided(np.array(True), f"a value not proved nonzero at degree {out.degree:g}",
                          bool(sign == 0))
        values = torch.tensor(math.nan, dtype=torch.float64)
    return values, out.degree
