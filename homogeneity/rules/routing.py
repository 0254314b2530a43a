"""Rules for the ops of mixture-of-experts routers: top-k and sorting (values and positions), counting
and scattering at the positions a router chose."""

from __future__ import annotations

from typing import Any

import torch

from homogeneity.degree import Degree, Grade, branch, lift, show
from homogeneity.rules.common import as_degree, is_zero, sum_of
from homogeneity.rules.registry import rule

__all__: list[str] = []

aten = torch.ops.aten


@rule(aten.topk.default, aten.sort.default, aten.sort.stable)
def top_k(x: Degree, *args: Any, **kwargs: Any) -> Degree:
    """The (values, indices) of top-k or a sort of a degree-0 input: degree 0, the input's grade.

    The order of cᵏz is the order of z for c > 0 (cᵏa − cᵏb has the sign of a − b), so the
    selected positions do not change where the top-k set has no tie; for k = 0 the values are the
    input's entries (degree 0) too, so both items share the node's degree. A router takes its
    top-k of softmax probabilities (degree 0). For k ≠ 0 the values (degree k) and the positions
    (degree 0) differ, which one degree per node cannot say: no degree.
    """

    def single(d: Degree) -> Degree:
        (case,) = d.cases
        if case.grade is Grade.NONE:
            return d
        mixed = Degree.none(f"top-k values of degree {show(case.value)} and positions of "
                            "degree 0 in one node")
        return branch(case.value, Degree.of(0, case.grade, "top-k of a scale-invariant input: "
                                            "positions invariant under c > 0"), mixed, mixed)

    return lift(single, x)


def _settled_indices(index: Degree) -> Degree | Grade:
    """The grade indices of degree 0 pass on (they are integers: exact ones do not change with c,
    converging ones are constant from some c on), or the degree to return for any other indices."""
    if all(case.grade is Grade.NONE for case in index.cases):
        return index
    if not (index.single and index.value == 0):
        return Degree.none("indices depend on the scaled parameters")
    return index.grade


def _weakened(x: Degree, grade: Grade) -> Degree:
    """``x`` with its grade weakened to ``grade`` (that of the indices that placed its entries)."""
    return lift(lambda d: d if d.grade is Grade.NONE
                else Degree.of(d.value, d.grade.weaker(grade), d.reason), x)


@rule(aten.one_hot.default, aten.bincount.default)
def counting(x: Degree, *args: Any, **kwargs: Any) -> Degree:
    """one_hot of positions, and bincount (the count of each position, or the sum of the weights
    at it): for positions of degree 0 (a router's choices), 0/1 entries and counts are degree 0
    and weighted counts are sums of weights at fixed places, the weights' degree (Sum rule); the
    positions' grade weakens either (converging integers are constant from some c on).
    Positions of another degree change with c: no degree.
    """
    grade = _settled_indices(x)
    if isinstance(grade, Degree):
        return grade
    weights = next((a for a in (*args, *kwargs.values()) if isinstance(a, Degree)), None)
    if weights is None:
        return Degree.of(0, grade, "counts of positions that do not change with c")
    return _weakened(sum_of(weights, what="weights summed at each position"), grade)


@rule(aten.scatter.src, aten.scatter.value, aten.scatter_add.default, aten.index_add.default)
def scattering(x: Degree, dim: Any, index: Any, source: Any, alpha: Any = 1) -> Degree:
    """scatter, scatter_add and index_add with indices of degree 0: each output entry is an entry
    of x, of the source, or x plus source entries at fixed places (times a constant α), so the Sum
    rule over x and the source gives the degree (a literal 0 source or α = 0 adds no term); the
    indices' grade weakens it. Indices of another degree move entries with c: no degree.
    """
    grade = _settled_indices(as_degree(index))
    if isinstance(grade, Degree):
        return grade
    return _weakened(sum_of(x, 0 if is_zero(alpha) else source, what="scattered entries"), grade)
