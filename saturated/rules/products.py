"""Rules for linear maps and matrix products: bilinear, degrees add (paper Table 1, Linear)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from saturated.errors import SaturationError
from saturated.rounding import Einsum
from saturated.rules.common import _scaled, _term
from saturated.rules.registry import Settings, _rule
from saturated.terms import Term, add, bilinear
from saturated.ties import TiedWeights, contract, einsum_contracts_rows, untie

__all__ = ["GatheredRows", "expert_rows"]  # the rules register themselves in RULES

aten = torch.ops.aten


@dataclass(frozen=True)
class GatheredRows:
    """``weight[index]`` (whole matrices chosen along dimension 0) not taken yet, for a batched
    product that reads it: a mixture of experts' batched products gather each token's expert
    matrices, one copy per token, and their limit is the same per-expert product without the
    copies (:class:`~saturated.interpreter.LimitInterpreter` leaves such an index to its ``bmm``).
    ``weight`` is the matrices' value: a :class:`~saturated.terms.Term`, or in the refinement a
    :class:`~saturated.precision.lead.Lead` of exact floats."""

    weight: Any
    index: Tensor


def expert_rows(index: Tensor) -> list[tuple[int, Tensor]]:
    """Each expert that ``index`` (one expert per row) names, with its rows in order."""
    return [(int(e), torch.nonzero(index == e).flatten()) for e in torch.unique(index).tolist()]


def _per_expert(index: Tensor) -> Callable[[Tensor, Tensor], Tensor]:
    """(y, w) ↦ w[index] @ y for y of shape (..., S, K, M) and w of (E, N, K), as one matrix
    product per distinct index: bilinear in (y, w), so magnitudes and bounds take the same
    path, and the gathered (S, N, K) copy of ``w`` is never made. Each expert's product is taken
    as (yᵀ·wᵀ)ᵀ, one matrix product over all its rows: torch.matmul of a matrix by a batch of
    matrices copies the matrix once per batch member (Mixtral's experts: 0.27 s a product)."""
    rows = expert_rows(index)

    def product(y: Tensor, w: Tensor) -> Tensor:
        out = y.new_zeros((*y.shape[:-3], len(index), w.shape[-2], y.shape[-1]),
                          dtype=torch.result_type(y, w))
        for expert, at in rows:
            chosen = y[..., at, :, :].transpose(-1, -2)
            out[..., at, :, :] = torch.matmul(chosen, w[expert].transpose(-1, -2)).transpose(-1, -2)
        return out
    return product


@_rule(aten.matmul.default, aten.mm.default, aten.bmm.default, accepts_ties=True)
def _matmul(s: Settings, x: Any, y: Any) -> Term:
    """Matrix product: bilinear, degrees add (paper Table 1, Linear). Tied attention weights on the
    left, contracted over their softmax dimension, are checked by :func:`saturated.ties.contract`;
    gathered rows on the left (:class:`GatheredRows`) are multiplied per expert."""
    if isinstance(x, GatheredRows):
        weight = x.weight
        return bilinear(_per_expert(x.index), _term(y, s), weight, s.orders, stack_left=True,
                        length=int(weight.shape[-1]))
    mark = s.ties == "nan"
    if isinstance(x, TiedWeights) and x.dim == x.lead.dim() - 1 and not isinstance(y, TiedWeights):
        return contract(torch.matmul, x, _term(y, s), s.orders, s.rtol, mark, stack_left=True)
    x, y = (untie(v, mark, "a matrix product not over the softmax dimension") for v in (x, y))
    return bilinear(torch.matmul, _term(x, s), _term(y, s), s.orders, stack_left=True)


@_rule(aten.linear.default)
def _linear(s: Settings, x: Any, weight: Any, bias: Any = None) -> Term:
    """x Wᵀ + b: the product has degree deg(x) + 1, then the sum rule decides whether b counts."""
    out = bilinear(F.linear, _term(x, s), _term(weight, s), s.orders, stack_left=True)
    return out if bias is None else add(out, _term(bias, s), s.orders)


@_rule(aten.addmm.default)
def _addmm(s: Settings, bias: Any, x: Any, y: Any, beta: float = 1, alpha: float = 1) -> Term:
    """β·b + α·x y (GPT-2's Conv1D)."""
    product = bilinear(torch.matmul, _term(x, s), _term(y, s), s.orders, stack_left=True)
    return add(_scaled(bias, beta, s), _scaled(product, alpha, s), s.orders)


@_rule(aten.einsum.default, accepts_ties=True)
def _einsum(s: Settings, equation: str, operands: Sequence[Any], path: Any = None) -> Term:
    """Einsum of two operands is bilinear; of one, a relabelling. Tied attention weights as the
    first of two operands, summed over their softmax dimension, are checked as for matmul."""
    first = operands[0]
    if (len(operands) == 2 and isinstance(first, TiedWeights) and not isinstance(operands[1], TiedWeights)
            and einsum_contracts_rows(equation, first.dim)):
        return contract(lambda a, b: torch.einsum(equation, a, b), first, _term(operands[1], s),
                        s.orders, s.rtol, s.ties == "nan")
    operands = [untie(v, s.ties == "nan", f"einsum '{equation}'") for v in operands]
    if len(operands) == 1:
        return _term(operands[0], s).map(lambda t: torch.einsum(equation, t))
    if len(operands) != 2:
        raise SaturationError(f"einsum with {len(operands)} operands; expected 1 or 2")
    x, y = _term(operands[0], s), _term(operands[1], s)
    return bilinear(Einsum(equation), x, y, s.orders, length=_einsum_length(equation, x.shape, y.shape))


def _einsum_length(equation: str, *shapes: torch.Size) -> int | None:
    """How many products an einsum of two operands sums per output element: the product of the
    sizes of the indices it sums out (None for equations with an ellipsis or no output).

    >>> _einsum_length("bnid,bnjd->bnij", torch.Size([2, 3, 4, 5]), torch.Size([2, 3, 6, 5]))
    5
    """
    equation = equation.replace(" ", "")
    if "..." in equation or "->" not in equation:
        return None
    inputs, output = equation.split("->")
    sizes: dict[str, int] = {}
    for letters, shape in zip(inputs.split(","), shapes):
        sizes.update({letter: max(sizes.get(letter, 1), int(size)) for letter, size in zip(letters, shape)})
    return math.prod(size for letter, size in sizes.items() if letter not in output)
