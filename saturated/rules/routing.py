"""Rules for the ops of mixture-of-experts routers: top-k, sorting and the positions of extrema, and
scattering values to the positions chosen.

At scale c a router picks the experts whose scores are largest at c. For large c that is the
lexicographic order of the scores' expansions: cᵈ·a + o(cᵈ) has the sign of a, so the highest part
decides, a tie there goes to the next part, and so on, down to the masking constants' part of
degree +∞ above them all. Softmax weights keep no order off their maximum (every other weight is
e^(−Θ(c)), zero at every order), so a ranking of softmax weights reads the scores they came from
(``Term.order``). Each comparison is the one hard attention makes
(:func:`~saturated.rules.common.maximal`: certified against rounding, settled exactly in float64).

A tie that no tracked order breaks (or that rounding cannot tell from a near-tie) leaves the
positions undetermined. For top-k that matters only where the router would read it, under what
every router in transformers does: it multiplies each chosen expert by the chosen value and sums
over the k choices. So the order of the k slots does not matter, and neither do experts tied at
the k-th place whose values are zero at every order (softmax weights off the maximum): any of
them adds nothing. Tied experts with nonzero values at the k-th place, or softmax weights whose
split over a tie is unknown (:class:`~saturated.ties.TiedWeights`), do matter: ``ties="nan"``
makes those values NaN (and so the tokens' outputs), otherwise
:class:`~saturated.terms.NeedsOrders` names the token. For ``sort``, ``argsort``, ``argmax`` and
``argmin`` the positions themselves are the output: every undetermined tie raises (an integer holds
no NaN). Positions whose keys are exactly equal at every order come in position order, as
``argmax``, ``argmin`` and a stable sort return them (``topk`` and an unstable sort promise no
order among equal values: an exact tie at the k-th place of a top-k is undetermined as above).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from saturated.rules.common import _term, maximal
from saturated.rules.registry import RULES, Settings, _rule
from saturated.rules.selection import _joined_parts
from saturated.terms import NeedsOrders, Term, computed_degrees, make, scale
from saturated.ties import TiedWeights, with_nan

__all__ = ["name_router_rows"]

aten = torch.ops.aten


@dataclass(frozen=True)
class _Ranking:
    """The first k positions of each row, best first, and what is known of them.

    Attributes:
        positions: (rows, k) long, the chosen positions along the ranked dimension.
        open: (rows, k) bool, slots filled from a tie of several positions that no tracked order
            breaks (rounding included); exact ties are not open.
        live: (rows, k) bool, slots filled from a group of tied positions (exact or open) larger
            than the slots left, so that which of them get in is not determined, where some member
            of the group has a nonzero value at some order (it would add to the router's output).
        reason: why the open ties are open, for messages.
    """

    positions: Tensor
    open: Tensor
    live: Tensor
    reason: str


def _rows(a: Tensor, shape: torch.Size, dim: int) -> Tensor:
    """``a`` (broadcasting to ``shape``) with ``dim`` last and the other dimensions as one: (rows, n)."""
    return a.expand(shape).movedim(dim, -1).reshape(-1, shape[dim])


def _key(x: Term, dim: int, descending: bool) -> Term:
    """What orders the entries of ``x`` along ``dim``, as (rows, n) parts: the scores behind
    softmax weights (their own order), else ``x``; negated for an ascending order."""
    key = x.order[0] if x.order is not None and x.order[1] == dim else Term(x.parts, x.floor, x.roundings)
    key = key.map(lambda a: _rows(a, x.shape, dim))
    return key if descending else scale(key, -1.0)


def _reason(key: Term, settled: bool) -> str:
    if not settled:
        return f"within the rounding bound of {key.lead.dtype}, which cannot tell a near-tie from a tie"
    if key.floor > -math.inf:
        return f"at every tracked order; the untracked part of order c^{key.floor:g} decides between them"
    return "exactly, at every order"


def _rank(key: Term, k: int, zero: Tensor, s: Settings) -> _Ranking:
    """The first ``k`` positions of each row of ``key`` ((rows, n) parts) in lexicographic order of
    the parts, taking the maximal group of what is left in turn; ``zero`` (rows, n) marks
    positions whose value is zero at every order."""
    rows, n = key.shape
    device = key.lead.device
    remaining = torch.ones(rows, n, dtype=torch.bool, device=device)
    positions = torch.zeros(rows, k, dtype=torch.long, device=device)
    open_, live = (torch.zeros(rows, k, dtype=torch.bool, device=device) for _ in range(2))
    count = torch.zeros(rows, 1, dtype=torch.long, device=device)
    all_settled = True
    while bool((count < k).any()):
        group, settled = maximal(key, -1, remaining, s, lambda d: True)
        group = group.expand(rows, n) & (count < k)
        # A row emptied by a NaN key (ties="nan") takes what is left, all of it undetermined.
        emptied = (count < k) & ~group.any(-1, keepdim=True)
        group = torch.where(emptied, remaining, group)
        all_settled &= settled
        size = group.sum(-1, keepdim=True)
        rank = group.cumsum(-1)
        take = group & (count + rank <= k)
        row, place = torch.nonzero(take, as_tuple=True)
        slot = (count + rank - 1)[row, place]
        positions[row, slot] = place
        tied = (size > 1) & (not settled or key.floor > -math.inf) | emptied
        open_[row, slot] = tied[row, 0]
        over = (count + size > k) & (size > 1)
        live[row, slot] = (over & (group & ~zero).any(-1, keepdim=True))[row, 0]
        remaining &= ~take
        count = count + take.sum(-1, keepdim=True)
    return _Ranking(positions, open_, live, _reason(key, all_settled))


def _zero_at_every_order(x: Term, dim: int) -> Tensor:
    """(rows, n): entries of ``x`` whose every part is 0 with nothing untracked below. Softmax
    weights (those that keep their scores' order) are positive at every maximal position and
    e^(−Θ(c)) elsewhere, whatever the floor of their shared weights: their zeros are exact."""
    zero = torch.tensor(x.floor == -math.inf or x.order is not None, device=x.lead.device)
    for a, _ in x.parts:
        zero = zero & (a == 0)
    return _rows(zero, x.shape, dim)


def _unknown_weights(x: Term, dim: int) -> Tensor:
    """(rows, n): tied softmax weights whose split the tracked orders leave unknown."""
    if not isinstance(x, TiedWeights):
        return _rows(torch.zeros((), dtype=torch.bool, device=x.lead.device), x.shape, dim)
    assert x.candidates is not None and x.count is not None
    return _rows(x.candidates & (x.count > 1), x.shape, dim)


def _place(x: Term, dim: int, row: int) -> str:
    """Where row ``row`` of the (rows, n) layout is in ``x``: for the (tokens, experts) input of a
    router, its token row (see :func:`name_router_rows`)."""
    rest = [size for index, size in enumerate(x.shape) if index != dim % x.lead.dim()]
    if len(rest) == 1:
        return f"router row {row} of {rest[0]}"
    place = [int(i) for i in torch.unravel_index(torch.tensor(row), rest)]
    return f"batch entry {place[0]}, token {place[1]}" + (f" (row {place})" if len(place) > 2 else "")


def _ranked(x: Term, dim: int, k: int, descending: bool, s: Settings) -> _Ranking:
    dim = dim % max(x.lead.dim(), 1)
    return _rank(_key(x, dim, descending), k, _zero_at_every_order(x, dim), s)


def _indices(ranking: _Ranking, x: Term, dim: int) -> Tensor:
    """The chosen positions laid out as ``x`` with ``dim`` of size k."""
    moved = list(x.lead.movedim(dim, -1).shape)
    moved[-1] = ranking.positions.shape[-1]
    return ranking.positions.reshape(moved).movedim(-1, dim)


def _gathered(x: Term, dim: int, indices: Tensor) -> Term:
    """The values of ``x`` at ``indices`` along ``dim``, with their expansions and bounds."""
    shape = x.shape
    return Term(x.parts, x.floor, x.roundings).map(lambda a: a.expand(shape).gather(dim, indices))


def _refused(x: Term, dim: int, undetermined: Tensor, ranking: _Ranking, live: str, other: str
             ) -> NeedsOrders:
    """The error for the first undetermined slot: ``live`` if a tie at the k-th place with weight
    left it so, else ``other``."""
    row = int(torch.nonzero(undetermined.any(-1))[0])
    slot = int(torch.nonzero(undetermined[row])[0])
    what = live if bool(ranking.live[row, slot]) else other
    return NeedsOrders(f"router tie at {_place(x, dim, row)}: {what} (slot {slot}, position "
                       f"{int(ranking.positions[row, slot])}), {ranking.reason}")


@_rule(aten.topk.default, accepts_ties=True)
def _topk(s: Settings, x: Term, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> tuple[Term, Tensor]:
    """Top-k in the limit: the k positions first in the lexicographic order of the expansions
    (of the scores, for softmax weights), and the values there.

    Undetermined, where it matters (see the module): positions tied at the k-th place of which
    some carry a value that is not zero at every order, and softmax weights whose split over a tie
    is unknown. ``ties="nan"`` makes those values NaN; otherwise NeedsOrders.
    """
    dim = dim % max(x.lead.dim(), 1)
    ranking = _ranked(x, dim, int(k), largest, s)
    unknown = _unknown_weights(x, dim).gather(-1, ranking.positions)
    undetermined = ranking.live | unknown
    indices = _indices(ranking, x, dim)
    values = _gathered(x, dim, indices)
    if not bool(undetermined.any()):
        return values, indices
    if s.ties != "nan":
        raise _refused(x, dim, undetermined, ranking, "tied experts at the k-th place carry weight",
                       "the split of the softmax weight over tied experts is unknown")
    moved = list(x.lead.movedim(dim, -1).shape)
    moved[-1] = undetermined.shape[-1]
    return with_nan(values, undetermined.reshape(moved).movedim(-1, dim)), indices


def _positions_only(s: Settings, x: Term, dim: int, k: int, descending: bool) -> tuple[_Ranking, Tensor]:
    """The ranking for an op whose output is the positions: every open tie raises."""
    ranking = _ranked(x, dim, k, descending, s)
    unknown = _unknown_weights(x, dim).gather(-1, ranking.positions)
    undetermined = ranking.open | unknown
    if bool(undetermined.any()):
        raise _refused(x, dim, undetermined, ranking, "tied positions", "tied positions")
    return ranking, _indices(ranking, x, dim % max(x.lead.dim(), 1))


@_rule(aten.sort.default, accepts_ties=True)
def _sort(s: Settings, x: Term, dim: int = -1, descending: bool = False) -> tuple[Term, Tensor]:
    """sort: every position ranked lexicographically (exact ties in position order)."""
    dim = dim % max(x.lead.dim(), 1)
    _, indices = _positions_only(s, x, dim, x.shape[dim], descending)
    return _gathered(x, dim, indices), indices


@_rule(aten.sort.stable, accepts_ties=True)
def _sort_stable(s: Settings, x: Term, *, stable: bool | None = None, dim: int = -1,
                 descending: bool = False) -> tuple[Term, Tensor]:
    """sort with a ``stable`` flag: as :func:`_sort`."""
    return _sort(s, x, dim, descending)


@_rule(aten.argsort.default, accepts_ties=True)
def _argsort(s: Settings, x: Term, dim: int = -1, descending: bool = False) -> Tensor:
    """argsort: the positions of :func:`_sort`."""
    return _sort(s, x, dim, descending)[1]


@_rule(aten.argsort.stable, accepts_ties=True)
def _argsort_stable(s: Settings, x: Term, *, stable: bool = False, dim: int = -1,
                    descending: bool = False) -> Tensor:
    """argsort with a ``stable`` flag: as :func:`_argsort`."""
    return _sort(s, x, dim, descending)[1]


def _extremum(s: Settings, x: Term, dim: int | None, keepdim: bool, largest: bool) -> Tensor:
    if dim is None:
        flat = x.map(lambda a: a.expand(x.shape).reshape(-1))
        return _positions_only(s, flat, 0, 1, largest)[1].reshape(())
    dim = dim % max(x.lead.dim(), 1)
    _, indices = _positions_only(s, x, dim, 1, largest)
    return indices if keepdim else indices.squeeze(dim)


@_rule(aten.argmax.default, accepts_ties=True)
def _argmax(s: Settings, x: Term, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """argmax: the first position in lexicographic order (the first of exactly equal ones)."""
    return _extremum(s, x, dim, keepdim, largest=True)


@_rule(aten.argmin.default, accepts_ties=True)
def _argmin(s: Settings, x: Term, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """argmin: the last position in lexicographic order (the first of exactly equal ones)."""
    return _extremum(s, x, dim, keepdim, largest=False)


@_rule(aten.scatter.src)
def _scatter(s: Settings, x: Any, dim: int, index: Tensor, source: Any) -> Term:
    """scatter at exact positions: each element is one of x or of the source, with its own
    expansion and bound (a selection, like ``where``)."""
    x, source = _term(x, s), _term(source, s)
    return _joined_parts([x, source], lambda pieces: pieces[0].scatter(dim, index, pieces[1]), s)


@_rule(aten.scatter.value)
def _scatter_value(s: Settings, x: Any, dim: int, index: Tensor, value: Any) -> Term:
    """scatter of one value at exact positions: where(placed, value, x)."""
    t = _term(x, s)
    placed = torch.zeros(t.shape, dtype=torch.bool, device=t.lead.device).scatter(dim, index, True)
    return RULES[aten.where.self](s, placed, value, t)


@_rule(aten.scatter_add.default)
def _scatter_add(s: Settings, x: Any, dim: int, index: Tensor, source: Any) -> Term:
    """scatter_add at exact positions: linear in x and the source, so part by part (parts of
    equal degree add, the highest leads: paper Table 1, Sum). No rounding bound is kept."""
    return _added(_term(x, s), _term(source, s),
                  lambda a, b: a.scatter_add(dim, index, b), s)


@_rule(aten.index_add.default)
def _index_add(s: Settings, x: Any, dim: int, index: Tensor, source: Any, *, alpha: float = 1) -> Term:
    """index_add (x plus α·source at exact rows, as an eager mixture of experts gathers its
    experts' outputs): part by part, as :func:`_scatter_add`."""
    return _added(_term(x, s), scale(_term(source, s), float(alpha)),
                  lambda a, b: a.index_add(dim, index, b), s)


def _added(x: Term, source: Term, add: Callable[[Tensor, Tensor], Tensor], s: Settings) -> Term:
    """``add(x_d, source_d)`` for every degree d of either (a missing part is zero)."""
    xs, sources = ({d: a for a, d in t.parts} for t in (x, source))
    parts = [(add(xs[d] if d in xs else torch.zeros_like(x.lead), sources[d] if d in sources
                  else torch.zeros_like(source.lead)), d) for d in {*xs, *sources}]
    return make(parts, max(x.floor, source.floor), s.orders, computed_degrees([x, source], summed=True))


def name_router_rows(message: str, inputs: Sequence[Any]) -> str:
    """``message`` with each "router row r of R" named as a batch entry and token, where the
    first input of two or more dimensions has R = batch × length positions (a router's input is
    the tokens of the batch flattened, in order).

    >>> name_router_rows("router tie at router row 7 of 12: …", [torch.zeros(2, 6, dtype=torch.long)])
    'router tie at batch entry 1, token 1: …'
    """
    shaped = next((t for t in inputs if isinstance(t, Tensor) and t.dim() >= 2), None)
    if shaped is None:
        return message
    batch, length = int(shaped.shape[0]), int(shaped.shape[1])

    def named(match: re.Match[str]) -> str:
        row, rows = int(match.group(1)), int(match.group(2))
        if rows != batch * length:
            return match.group(0)
        return f"batch entry {row // length}, token {row % length}"

    return re.sub(r"router row (\d+) of (\d+)", named, message)
