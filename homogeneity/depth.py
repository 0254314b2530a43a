"""Depth in closed form: the degree after L identical blocks, from one block's degree map.

The block is analysed once per input grade with a symbolic input degree k; its map k ↦ degree
is then iterated symbolically. The closed form is proved by induction: from some depth n₀ on, one
case of the map applies at every depth and keeps its grade.

>>> import torch
>>> from torch import nn
>>> block = nn.Linear(4, 4, bias=False)
>>> stack_degree(block_degree_map(block, torch.randn(2, 4)), start=K).value
L + k
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
from torch import nn

from homogeneity.analysis import analyze_program
from homogeneity.degree import Case, Degree, Grade, K
from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model

__all__ = ["DegreeMap", "L", "block_degree_map", "stack_degree"]

L = sympy.Symbol("L", integer=True, positive=True)
"""The number of stacked blocks."""

_N = sympy.Symbol("n", integer=True, positive=True)


@dataclass(frozen=True)
class DegreeMap:
    """A block's output degree as a function of its input degree ``k``, for each input grade."""

    by_grade: dict[Grade, Degree]

    def __call__(self, degree: Degree) -> Degree:
        """The block's output degree for an input of ``degree`` (single-case)."""
        if not degree.single:
            raise HomogeneityError(f"expected a single-case input degree, got {degree}")
        (case,) = degree.cases
        if case.grade is Grade.NONE:
            return degree
        return self.by_grade[case.grade].subs({K: case.value})


def block_degree_map(block: nn.Module, *args: Any, input: str | None = None,
                     params: str | Sequence[str] | None = None, **kwargs: Any) -> DegreeMap:
    """Analyse ``block`` once per input grade with its input of symbolic degree :data:`K`.

    Args:
        block: one block (a transformer layer, an MLP layer).
        *args: example inputs; **kwargs: example keyword inputs.
        input: the input that carries degree k (default: the first floating-point input).
        params: the parameters that scale (default all).
    """
    program = export_model(block, args, kwargs)
    if input is None:
        floats = [n for n in program.graph.nodes if n.op == "placeholder"
                  and n.name in program.graph_signature.user_inputs
                  and getattr(n.meta.get("val"), "is_floating_point", lambda: False)()]
        if not floats:
            raise HomogeneityError("the block has no floating-point input to carry the degree k")
        input = floats[0].name
    maps = {}
    for grade in (Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC):
        report = analyze_program(program, params=params,
                                 input_degrees={input: Degree.of(K, grade, f"block input {input}")})
        maps[grade] = report.outputs[report.main_output]
    return DegreeMap(maps)


def stack_degree(block: DegreeMap, *, start: Any = K, depth: sympy.Symbol = L) -> Degree:
    """The degree after ``depth`` blocks, in closed form, starting from degree ``start``.

    Args:
        block: the block's :class:`DegreeMap`.
        start: the degree entering the first block (a number, an expression in k, or a Degree;
            a plain value means exact).
        depth: the symbol for the number of blocks.

    Raises:
        HomogeneityError: no case of the map applies at every depth (no closed form found).

    >>> relu_layer = DegreeMap({g: Degree.of(K + 1, g) for g in (Grade.EXACT, Grade.APPROXIMATE,
    ...                                                       Grade.ASYMPTOTIC)})
    >>> stack_degree(relu_layer, start=0)
    Degree(L, exact)
    """
    if not isinstance(block, DegreeMap):
        raise HomogeneityError(f"expected block to be a DegreeMap (from block_degree_map), got "
                               f"{type(block).__name__}")
    if not isinstance(depth, sympy.Symbol):
        raise HomogeneityError(f"expected depth to be a sympy Symbol, got {type(depth).__name__}")
    seq = [start if isinstance(start, Degree) else Degree.exact(start, "stack input")]
    for _ in range(3):
        seq.append(block(seq[-1]))
    for base in (1, 2, 3):
        closed = _closed_form(block, seq[base])
        if closed is not None:
            pieces = [(seq[i], sympy.Eq(depth, i)) for i in range(1, base)]
            tail = closed.subs({_N: depth - base})
            return Degree.piecewise(*pieces, (tail, depth >= base))
    raise HomogeneityError(
        f"no closed form: the block's degree map {block.by_grade[Grade.EXACT]} does not settle on "
        f"one case within three blocks (degrees {', '.join(str(d) for d in seq)})"
    )


def _closed_form(block: DegreeMap, base: Degree) -> Degree | None:
    """The degree n blocks after ``base`` (in the symbol n), if one affine case holds throughout."""
    if not base.single or base.grade is Grade.NONE:
        return None
    (start,) = base.cases
    for case in block.by_grade[start.grade].cases:
        if case.grade is not start.grade or not _holds(case.condition.subs(K, start.value)):
            continue
        slope = sympy.diff(case.value, K)
        shift = sympy.sympify(case.value).subs(K, 0)
        if slope.free_symbols & {K} or sympy.simplify(case.value - (slope * K + shift)) != 0:
            continue
        value = (start.value + shift * _N if slope == 1
                 else slope**_N * start.value + shift * (slope**_N - 1) / (slope - 1))
        if _holds(case.condition.subs(K, value), _N):
            return Degree((Case(sympy.simplify(value), case.grade,
                                f"{case.reason} (repeated per block)"),))
    return None


def _holds(condition: Any, symbol: sympy.Symbol | None = None) -> bool:
    """Whether ``condition`` is true (for every non-negative integer value of ``symbol``)."""
    condition = sympy.simplify(condition)
    if condition is sympy.true:
        return True
    if symbol is None or condition.free_symbols != {symbol}:
        return False
    try:
        return bool(sympy.S.Naturals0.is_subset(condition.as_set()))
    except (NotImplementedError, TypeError, ValueError):
        return False

