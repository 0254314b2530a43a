"""Rules for the ops of mixture-of-experts routers: top-k and sorting (values and positions)."""

from __future__ import annotations

from typing import Any

import torch

from homogeneity.degree import Degree, Grade, branch, lift, show
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
