"""Hypothesis strategies: random Table-1 networks with a known degree and grade, random inputs.

This module needs ``hypothesis`` (the ``test`` extra). Each generated :class:`NetworkSpec` carries
its expected degree and grade, worked out layer by layer from Table 1 and Appendix A here,
independently of the rule table, so property tests can compare the two.

>>> from hypothesis import given
>>> @given(networks())
... def test(spec):
...     assert spec.expected[0] >= 0
>>> test()
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from homogeneity.builder import GraphBuilder, Value
from homogeneity.degree import Grade

__all__ = ["LAYERS", "NetworkSpec", "inputs", "layers", "networks"]

LAYERS = ("linear", "linear+bias", "relu", "layer_norm", "layer_norm+affine", "square", "tanh",
          "residual")
"""The layer kinds a generated network is made of."""


@dataclass(frozen=True)
class NetworkSpec:
    """A chain of layers on one input of shape ``(rows, width)``, with parameters from ``seed``."""

    layers: tuple[str, ...]
    width: int = 3
    rows: int = 2
    seed: int = 0

    def build(self, start: int = 0, stop: int | None = None) -> GraphBuilder:
        """The builder for ``layers[start:stop]`` (input ``x``, one output)."""
        g = GraphBuilder(seed=self.seed)
        h = g.input("x", (self.rows, self.width))
        for kind in self.layers[start:stop]:
            h = _add_layer(g, kind, h)
        g.output(h)
        return g

    @property
    def expected(self) -> tuple[int, Grade]:
        """(degree, grade) of the output for a degree-0 input, from Table 1 and Appendix A."""
        return expected_degree(self.layers)


def expected_degree(kinds: tuple[str, ...], degree: int = 0,
                    grade: Grade = Grade.EXACT) -> tuple[int, Grade]:
    """Table 1 and Appendix A applied by hand, layer by layer (the reference for the rules)."""
    for kind in kinds:
        if kind == "linear":
            degree += 1
        elif kind == "linear+bias":
            # Affine 0 → 1 is exact; a bias on a higher degree is a lower-order term.
            grade = grade if degree == 0 else grade.weaker(Grade.ASYMPTOTIC)
            degree += 1
        elif kind == "layer_norm":
            degree = 0
        elif kind == "layer_norm+affine":
            degree = 1
        elif kind == "square":
            degree *= 2
        elif kind == "tanh":
            grade = grade if degree == 0 else Grade.APPROXIMATE
            degree = 0
        elif kind == "residual":
            # h + W h: degrees k and k + 1, so h is lower order.
            grade = grade.weaker(Grade.ASYMPTOTIC)
            degree += 1
    return degree, grade


def _add_layer(g: GraphBuilder, kind: str, h: Value) -> Value:
    width = h.shape[-1]
    if kind in ("linear", "linear+bias"):
        return g.linear(h, width, bias=kind == "linear+bias")
    if kind in ("layer_norm", "layer_norm+affine"):
        return g.layer_norm(h, affine=kind == "layer_norm+affine")
    if kind == "square":
        return g.mul(h, h)
    if kind == "residual":
        return g.add(h, g.linear(h, width))
    return {"relu": g.relu, "tanh": g.tanh}[kind](h)


def layers(max_size: int = 5) -> st.SearchStrategy[tuple[str, ...]]:
    """Chains of 1 to ``max_size`` layer kinds."""
    return st.lists(st.sampled_from(LAYERS), min_size=1, max_size=max_size).map(tuple)


def networks(max_layers: int = 5) -> st.SearchStrategy[NetworkSpec]:
    """Random Table-1 networks (:class:`NetworkSpec`) of small width."""
    return st.builds(NetworkSpec, layers=layers(max_layers), width=st.integers(2, 4),
                     rows=st.integers(1, 3), seed=st.integers(0, 2**16))


def inputs(shape: tuple[int, ...]) -> st.SearchStrategy[torch.Tensor]:
    """Float64 tensors of ``shape`` with entries of magnitude in [0.25, 2], either sign.

    Entries stay away from 0: a zero input entry can cancel a network's leading term exactly
    (x = 0 leaves only the biases), which is a property of that input, not of the network.
    """
    size = 1
    for dim in shape:
        size *= dim
    entry = st.tuples(st.sampled_from([-1.0, 1.0]), st.floats(0.25, 2.0)).map(
        lambda pair: pair[0] * pair[1])
    return st.lists(entry, min_size=size, max_size=size).map(
        lambda xs: torch.tensor(xs, dtype=torch.float64).reshape(shape))
