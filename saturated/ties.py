"""Hard attention whose tie the tracked orders cannot break, and the products that do not care.

A growing softmax row whose maximal scores stay tied through every tracked order splits its
weight over the tied positions in a proportion only the untracked orders know: the weights are not
determined. A product ``weights @ values`` still is, wherever the tied positions carry equal
values, since every split of the weight then gives the same sum. Post-LayerNorm transformers make
such ties all the time (tokens whose leading representations coincide have equal keys *and* equal
values), so checking the product instead of the weights lets the leading order decide most rows
that would otherwise need many more orders.

:class:`TiedWeights` is what the softmax rule returns in that case; :func:`contract` is the check,
for a bilinear op that contracts the tied dimension and keeps rows apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from saturated.functional import default_rtol
from saturated.terms import NeedsOrders, Term, bilinear, computed_degrees, make

__all__ = ["TIE_HINT", "TiedWeights", "contract", "einsum_contracts_rows", "untie", "with_nan"]

TIE_HINT = "Pass ties='uniform' to assume such scores are equal at every order"


@dataclass(frozen=True)
class TiedWeights(Term):
    """Softmax weights with rows tied beyond the tracked orders, held uniform over each tie set.

    Only an op that contracts ``dim`` against values may use them (:func:`contract`); anything
    else would read the arbitrary split.

    Attributes:
        candidates: boolean, True at the tied positions of each tied row (and at the single
            winner of every other row).
        count: the number of candidates of each row (``dim`` kept, of size 1).
        dim: the softmax dimension, non-negative.
        reason: what to report when the tie turns out to matter.
    """

    candidates: Tensor | None = None
    count: Tensor | None = None
    dim: int = 0
    reason: str = ""

    def map(self, fn: Callable[[Tensor], Tensor], key: Hashable | None = None) -> TiedWeights:
        """Apply an elementwise op (a cast) to the weights; positions must not move (so ``key``,
        which names a move, is not read)."""
        return replace(self, parts=tuple((fn(a), d) for a, d in self.parts))

    def undetermined(self) -> Term:
        """The weights as a plain term, NaN in every tied row (their values are not known)."""
        assert self.count is not None
        tied = self.count > 1
        return with_nan(Term(self.parts, self.floor), tied)


def with_nan(term: Term, where: Tensor) -> Term:
    """``term`` (of the same kind) with every part NaN where ``where`` is True: values not known."""
    return replace(term, parts=tuple((torch.where(where, math.nan, a), d) for a, d in term.parts))


def untie(value: object, mark: bool, use: str) -> object:
    """``value`` where an op reads tied weights themselves (``use`` says how): their tied rows
    become NaN with ``mark``; otherwise :class:`~saturated.terms.NeedsOrders`. Other values pass."""
    if not isinstance(value, TiedWeights):
        return value
    if mark:
        return value.undetermined()
    raise NeedsOrders(f"{value.reason}, and {use} reads the weights themselves. {TIE_HINT}")


def einsum_contracts_rows(equation: str, dim: int) -> bool:
    """Whether ``einsum(equation, weights, values)`` sums out the weights' ``dim`` and keeps every
    other index of the weights in its output (so distinct rows land in distinct outputs).

    >>> einsum_contracts_rows("bnij,jbnd->ibnd", 3), einsum_contracts_rows("bnij,bnjd->bnd", 3)
    (True, False)
    """
    equation = equation.replace(" ", "")
    if "..." in equation or "->" not in equation:
        return False
    inputs, output = equation.split("->")
    operands = inputs.split(",")
    if len(operands) != 2 or dim >= len(operands[0]):
        return False
    weights, values = operands
    tied = weights[dim]
    kept = weights[:dim] + weights[dim + 1:]
    return tied not in output and tied in values and all(letter in output for letter in kept)


def contract(fn: Callable[[Tensor, Tensor], Tensor], weights: TiedWeights, values: Term,
             orders: int, rtol: float | None, mark: bool, stack_left: bool = False) -> Term:
    """``fn(weights, values)`` for ``fn`` bilinear, contracting ``weights.dim`` and keeping rows apart.

    For each tied row and each member j of its tie set, ``fn`` applied to e_j − e_first (the
    difference of two ways to place the weight) must vanish, within ``rtol`` of the same product
    of absolute values. A difference in the leading part leaves those outputs undetermined: NaN
    with ``mark``, otherwise :class:`~saturated.terms.NeedsOrders`. A difference only in a lower
    part of ``values`` makes that part's degree the floor of the result.

    For ``torch.matmul`` only the tied rows are looked at, comparing value rows directly; other
    ops are checked on the whole tensor.
    """
    assert weights.candidates is not None and weights.count is not None
    product = bilinear(fn, Term(weights.parts, weights.floor), values, orders, stack_left=stack_left)
    tol = default_rtol(weights.lead.dtype) if rtol is None else rtol
    candidates, dim = weights.candidates, weights.dim
    # Weights (..., T, S) @ values (..., S, D) with no batch dimension that only the values have.
    gatherable = 2 <= values.lead.dim() <= candidates.dim() and dim == candidates.dim() - 1
    if fn is torch.matmul and gatherable:
        undetermined, floor = _matmul_disagreement(candidates, weights.count, values, product, tol)
    else:
        undetermined, floor = _disagreement(fn, candidates, dim, values, product.floor, tol)
    if undetermined is not None:
        if not mark:
            raise NeedsOrders(f"{weights.reason}, and the tied positions carry different values "
                              f"at {_first_place(undetermined)}. {TIE_HINT}")
        product = with_nan(product, undetermined)
    if floor == product.floor:
        return product
    return make(product.parts, floor, orders, computed_degrees([product], summed=False)).with_roundings(
        product.roundings)


def _first_place(undetermined: Tensor) -> str:
    """Where the first undetermined output is: batch entry (dimension 0) and query position (the
    row of the product, its second-to-last dimension)."""
    place = torch.nonzero(undetermined)[0].tolist()
    if len(place) < 3:
        return f"output element {place}"
    return f"batch entry {place[0]}, query position {place[-2]} (output element {place})"


# The mean tie-set size from which tied rows are grouped by (batch entry, tie set) before their
# values are compared: grouping sorts the rows, which costs more than it saves on small sets.
_GROUPED_FROM = 4


def _matmul_disagreement(candidates: Tensor, count: Tensor, values: Term, product: Term,
                         tol: float) -> tuple[Tensor | None, float]:
    """:func:`_disagreement` for ``weights @ values``: moving the weight of row i from its first
    tied position to position j changes the product's row by values[j] − values[first]. Where tie
    sets are large, rows of one batch entry with the same tie set (every padded query of a
    sequence, when its scores all tie) are compared once."""
    rows = torch.nonzero(count.squeeze(-1) > 1, as_tuple=True)  # batch indices, then the row
    members, batch_rows, inverse = candidates[rows], rows[:-1], None
    if int(members.sum()) >= _GROUPED_FROM * members.shape[0] > 0:
        inverse, kept = _same_rows(batch_rows, candidates.shape[:-2], members)
        members, batch_rows = members[kept], tuple(index[kept] for index in batch_rows)
    pair, place = torch.nonzero(members, as_tuple=True)  # every (tied row, member position)
    first = members.to(torch.uint8).argmax(-1)[pair]
    batch = tuple(index[pair] for index in batch_rows)
    shape = (*candidates.shape[:-2], *values.shape[-2:])
    off = [_differ(coef.expand(shape)[(*batch, place)], coef.expand(shape)[(*batch, first)], tol)
           for coef, degree in values.parts if degree > product.floor]
    undetermined, floor = _first_difference(off, values, product.floor)
    if undetermined is None:
        return None, floor
    per_row = torch.zeros(members.shape[0], undetermined.shape[-1], dtype=torch.bool, device=off[0].device)
    per_row.index_put_((pair,), undetermined, accumulate=True)
    full = torch.zeros(product.shape, dtype=torch.bool, device=per_row.device)
    full[rows] = per_row if inverse is None else per_row[inverse]
    return full, floor


def _same_rows(batch_rows: tuple[Tensor, ...], batch_shape: torch.Size, members: Tensor
               ) -> tuple[Tensor, Tensor]:
    """For each tied row, the index of its group (rows of one batch entry with the same tie set),
    and for each group the first of its rows, which stands for the group. A row's key is its flat
    batch index, then its tie set packed 62 positions to an integer; the groups are found one key
    column at a time, each a 1-D ``torch.unique`` of (group so far, rank in the column), both below
    the row count. ``torch.unique`` over whole rows costs about
    5 ms whatever their length (Gemma's padded rows: about 7% of a call); this about 0.4 ms."""
    flat = torch.zeros_like(members[:, 0], dtype=torch.long)
    for index, size in zip(batch_rows, batch_shape):
        flat = flat * size + index
    width = _PACKED * -(-members.shape[-1] // _PACKED)
    bits = torch.nn.functional.pad(members, (0, width - members.shape[-1])).reshape(len(members), -1, _PACKED)
    words = (bits.long() << torch.arange(_PACKED, device=members.device)).sum(-1)
    group = torch.unique(flat, return_inverse=True)[1]
    for column in words.unbind(-1):
        rank = torch.unique(column, return_inverse=True)[1]
        group = torch.unique(group * len(members) + rank, return_inverse=True)[1]
    rows = torch.arange(len(members), device=members.device)
    first = torch.full((int(group.max()) + 1,), len(members), device=members.device)
    return group, first.scatter_reduce_(0, group, rows, "amin")


# Positions per packed integer: below int64's 63 value bits, so a sum of distinct powers of two
# is exact.
_PACKED = 62


def _differ(a: Tensor, b: Tensor, tol: float) -> Tensor:
    """a ≠ b beyond ``tol`` relative to |a| + |b|."""
    return (a - b).abs() > tol * (a.abs() + b.abs())


def _first_difference(off: list[Tensor], values: Term, floor: float) -> tuple[Tensor | None, float]:
    """From the differences part by part (leading first): the outputs whose leading part differs
    (None if none), and the highest degree of a lower part that differs where the lead agrees."""
    if not off:
        return None, floor
    lead = off[0] if bool(off[0].any()) else None
    for part, (_, degree) in zip(off[1:], values.parts[1:]):
        if bool((part if lead is None else part & ~lead).any()):
            return lead, max(floor, degree)
    return lead, floor


def _disagreement(fn: Callable[[Tensor, Tensor], Tensor], candidates: Tensor, dim: int,
                  values: Term, floor: float, tol: float) -> tuple[Tensor | None, float]:
    """Where moving weight inside a tie set changes ``fn(weights, values)``: the outputs that
    differ in the leading part (None if none), and the highest degree of a lower part that
    differs where the lead agrees (``floor`` if none)."""
    rank = candidates.cumsum(dim) * candidates  # 1-based place of each member in its set
    size = candidates.sum(dim, keepdim=True)
    first = rank == 1
    dtype = values.lead.dtype
    off: list[Tensor] = []
    for coef, degree in values.parts:
        if degree <= floor:
            break
        differs = torch.zeros((), dtype=torch.bool, device=coef.device)
        for member in range(2, int(size.max()) + 1) if size.numel() else ():
            swap = (rank == member).to(dtype) - (first & (size >= member)).to(dtype)
            differs = differs | (fn(swap, coef).abs() > tol * fn(swap.abs(), coef.abs()))
        off.append(differs)
    return _first_difference(off, values, floor)
