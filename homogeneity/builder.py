"""Hand-built graphs of Table-1 components, analysed by the same rules as exported models.

>>> g = GraphBuilder(seed=0)
>>> x = g.input("x", (4, 3))
>>> y = g.linear(g.relu(g.linear(x, 5)), 2)
>>> g.output(y)
>>> g.analyze().degree
2
>>> g.analyze(input_degrees={"x": K}).degree
k + 2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch import nn

from homogeneity.analysis import propagate
from homogeneity.degree import Degree, K
from homogeneity.errors import HomogeneityError
from homogeneity.report import HomogeneityReport
from homogeneity.validation import check_integer

__all__ = ["GraphBuilder", "K", "Value"]

aten = torch.ops.aten


@dataclass(frozen=True)
class Value:
    """A tensor in a graph under construction: its node and an example value (for shapes)."""

    node: torch.fx.Node
    example: torch.Tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.example.shape)


class GraphBuilder:
    """Build a network from Table-1 components as a graph of ATen ops.

    Every method adds one component and returns its output :class:`Value`; parameters are
    created with seeded standard-normal entries (float64). :meth:`module` gives an ``nn.Module``
    that :func:`homogeneity.analyze` and :mod:`homogeneity.verify` accept like any other.

    Args:
        seed: seed of the parameter and input values.
        dtype: dtype of parameters and example inputs.
    """

    def __init__(self, seed: int = 0, dtype: torch.dtype = torch.float64) -> None:
        self.graph = torch.fx.Graph()
        self.root = nn.Module()
        self.inputs: dict[str, torch.Tensor] = {}
        self.dtype = dtype
        self._generator = torch.Generator().manual_seed(
            check_integer(seed, "seed", low=0, high=2**63 - 1))
        self._outputs: list[Value] | None = None

    # Leaves -----------------------------------------------------------------------------------

    def input(self, name: str, shape: Sequence[int]) -> Value:
        """A data input (degree 0 unless :meth:`analyze` is told otherwise)."""
        if any(n.op != "placeholder" for n in self.graph.nodes) or name in self.inputs:
            raise HomogeneityError(f"declare inputs first and once each; got {name!r} late or twice")
        self.inputs[name] = self._random(shape)
        return Value(self.graph.placeholder(name), self.inputs[name])

    def parameter(self, shape: Sequence[int], name: str | None = None) -> Value:
        """A fresh parameter of ``shape`` (scaled by default, degree 1)."""
        name = name or f"p{len(list(self.root.parameters()))}"
        self.root.register_parameter(name, nn.Parameter(self._random(shape)))
        return Value(self.graph.get_attr(name), getattr(self.root, name).detach())

    # Table 1 ----------------------------------------------------------------------------------

    def linear(self, x: Value, out_features: int, *, bias: bool = False) -> Value:
        """Linear k → k + 1 (with ``bias=True`` a Linear then a Bias: Affine 0 → 1)."""
        weight = self.parameter((out_features, x.shape[-1]))
        b = self.parameter((out_features,)) if bias else None
        return self.call(aten.linear.default, x, weight, b)

    def bias(self, x: Value) -> Value:
        """Bias: x + b with a fresh b (Table 1: 1 → 1)."""
        return self.add(x, self.parameter((x.shape[-1],)))

    def layer_norm(self, x: Value, *, affine: bool = False, eps: float = 0.0) -> Value:
        """LayerNorm k → 0 (``affine=True``: LayerNorm + Affine k → 1); eps defaults to 0."""
        n = x.shape[-1]
        weight = self.parameter((n,)) if affine else None
        b = self.parameter((n,)) if affine else None
        return self.call(aten.layer_norm.default, x, [n], weight, b, eps)

    def relu(self, x: Value) -> Value:
        """ReLU k → k."""
        return self.call(aten.relu.default, x)

    def add(self, a: Value, b: Value) -> Value:
        """Sum (k, k) → k."""
        return self.call(aten.add.Tensor, a, b)

    def mul(self, a: Value, b: Value | float) -> Value:
        """Product (k₁, k₂) → k₁ + k₂ (a number is a constant factor)."""
        return self.call(aten.mul.Tensor, a, b)

    # Beyond Table 1 (Appendix A, Definitions 5-7) ----------------------------------------------

    def matmul(self, a: Value, b: Value) -> Value:
        """Matrix product (k₁, k₂) → k₁ + k₂."""
        return self.call(aten.matmul.default, a, b)

    def transpose(self, x: Value, dim0: int = -2, dim1: int = -1) -> Value:
        """Swap two dimensions (degree kept)."""
        return self.call(aten.transpose.int, x, dim0, dim1)

    def softmax(self, x: Value, dim: int = -1) -> Value:
        """Softmax k → 0, approximately (Lemma 7)."""
        return self.call(aten.softmax.int, x, dim)

    def sigmoid(self, x: Value) -> Value:
        """Sigmoid k → 0, approximately (Lemma 6)."""
        return self.call(aten.sigmoid.default, x)

    def tanh(self, x: Value) -> Value:
        """Tanh k → 0, approximately (Lemma 8)."""
        return self.call(aten.tanh.default, x)

    def gelu(self, x: Value) -> Value:
        """GELU k → k, approximately (GELU is ReLU up to an exponentially small error)."""
        return self.call(aten.gelu.default, x)

    def call(self, op: Any, *args: Any) -> Value:
        """Add any ATen op; :class:`Value` arguments become graph edges."""
        nodes = pytree.tree_map_only(Value, lambda v: v.node, args)
        examples = pytree.tree_map_only(Value, lambda v: v.example, args)
        return Value(self.graph.call_function(op, nodes), op(*examples))

    # Finishing --------------------------------------------------------------------------------

    def output(self, *values: Value) -> None:
        """Mark the outputs (one value: the module returns a tensor; several: a tuple)."""
        if not values:
            raise HomogeneityError("output() needs at least one value")
        self._outputs = list(values)
        result = values[0].node if len(values) == 1 else tuple(v.node for v in values)
        self.graph.output(result)

    def module(self) -> torch.fx.GraphModule:
        """The graph as an ``nn.Module`` owning the parameters; call it with :attr:`inputs`."""
        if self._outputs is None:
            raise HomogeneityError("call output(...) before module()")
        return torch.fx.GraphModule(self.root, self.graph, class_name="BuiltGraph")

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """The example inputs, in declaration order."""
        return tuple(self.inputs.values())

    def analyze(self, *, params: str | Sequence[str] | None = None,
                input_degrees: Mapping[str, Degree | Any] | None = None) -> HomogeneityReport:
        """Analyse the built graph with the rule table (inputs are degree 0 unless given).

        The graph is analysed as built, without exporting; ``homogeneity.analyze(g.module(),
        *g.example_inputs())`` exports it first and gives the same degrees.

        Args:
            params: the parameters that scale (names ``p0``, ``p1``, … or globs; default all).
            input_degrees: degrees of inputs by name, e.g. ``{"x": K}`` for a component on its own.
        """
        if self._outputs is None:
            raise HomogeneityError("call output(...) before analyze()")
        param_of = {n.name: str(n.target) for n in self.graph.nodes if n.op == "get_attr"}
        outputs = ({"output": self._outputs[0].node.name} if len(self._outputs) == 1
                   else {str(i): v.node.name for i, v in enumerate(self._outputs)})
        return propagate(self.module(), param_of, outputs, params=params,
                         input_degrees=input_degrees)

    def _random(self, shape: Sequence[int]) -> torch.Tensor:
        return torch.randn(tuple(shape), generator=self._generator, dtype=self.dtype)
