"""The softmax rule: hard attention in the limit (paper Lemma 7), with ties the tracked orders leave."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from saturated.errors import SaturationError
from saturated.rules.common import maximal
from saturated.rules.registry import Settings, _rule
from saturated.terms import Term, exp_series, make, mul, power, reduce, unexpanded
from saturated.ties import TiedWeights, with_nan

__all__: list[str] = []  # the rules register themselves in RULES

aten = torch.ops.aten


@_rule(aten.softmax.int, aten._softmax.default)
def _softmax(s: Settings, x: Term, dim: int, dtype_or_half: Any = None) -> Term:
    """Softmax → hard attention, comparing positions part by part (Lemma 7, lexicographically).

    Masking constants (the part of degree +∞, negative) exclude positions. Among the rest, each
    growing part in turn keeps only the positions with maximal coefficient (within the tie
    tolerance); the others get weight e^(−Θ(c)), zero at every order. The survivors share the
    weight by the softmax of their bounded parts, expanded as a series. Rows still tied while an
    unknown part of order ≥ 1 remains give :class:`~saturated.ties.TiedWeights`, which only a
    product with values that agree on the tie can use (``ties="uniform"`` averages them instead).
    A fully masked row is all zeros; with ``ties="nan"``, a row with NaN scores is all NaN.
    """
    dim = dim % x.lead.dim()
    # Broadcasts to the scores, so that a mask shared by heads or rows is compared only once.
    candidates = torch.ones((1,) * x.lead.dim(), dtype=torch.bool, device=x.lead.device)
    for a, d in x.parts:
        if d == math.inf:
            a = unexpanded(a)
            if bool((a > 0).any()):
                raise SaturationError("softmax input contains +∞ (a huge positive constant)")
            candidates = candidates & (a == 0)
    allowed = candidates.any(dim, keepdim=True)
    marking = s.ties == "nan"
    candidates, settled = maximal(x, dim, candidates, s, lambda d: 0 < d < math.inf)
    candidates = candidates.expand(x.shape)
    count = candidates.sum(dim=dim, keepdim=True)
    # The weights lose the order of the positions they give no weight (e^(−Θ(c)) each); a top-k
    # router reads it from the scores.
    weights = replace(_hard_attention(x, dim, candidates, count, s, settled), order=(x, dim))
    if not marking:
        return weights
    poisoned = allowed & (count == 0)  # emptied by a NaN score
    if not bool(poisoned.any()):
        return weights
    return with_nan(weights, poisoned)


def _hard_attention(x: Term, dim: int, candidates: Tensor, count: Tensor, s: Settings,
                    settled: bool) -> Term:
    """The softmax's weights once the growing parts have picked each row's ``candidates`` (their
    ``count`` per row); ``settled``: the candidates of a row are known to tie exactly."""
    weights = torch.where(candidates, 1 / count.clamp_min(1).to(x.lead.dtype), 0.0)  # one pass
    tied_rows = bool((count > 1).any())
    if not tied_rows or x.floor >= 0 or not settled:
        # One winner per row, or ties the tracked orders cannot break (or that may not be exact):
        # hard attention, exact up to e^(−Θ(c)) where it is decided.
        if s.ties == "uniform" or not tied_rows:
            return Term(((weights, 0.0),))
        reason = ("hard attention tie: positions share the maximal score "
                  + (f"at every tracked order; the untracked part of order c^{x.floor:g} decides "
                     "between them" if settled else
                     f"within the rounding bound of {x.lead.dtype}, which cannot tell a near-tie "
                     "from a tie"))
        return TiedWeights(((weights, 0.0),), candidates=candidates, count=count, dim=dim, reason=reason)
    # Only the tied rows need the series; every other row is hard attention.
    def rows_of(a: Tensor) -> Tensor:
        return a.movedim(dim, -1).reshape(-1, a.shape[dim])

    tied = torch.nonzero(rows_of(count.expand_as(x.lead))[:, 0] > 1).squeeze(-1)
    bounded = [(a, d) for a, d in x.parts if d <= 0]
    shared = _shared_weights(Term(tuple((rows_of(a)[tied], d) for a, d in bounded)
                                  or ((torch.zeros_like(rows_of(x.lead)[tied]), -math.inf),), x.floor),
                             rows_of(candidates)[tied], s.orders)
    hard = rows_of(weights)  # weights is not used again: zeroing its tied rows in place is safe
    hard[tied] = 0
    parts = [(hard, 0.0)]
    for w, d in shared.parts:
        full = torch.zeros_like(hard)
        full[tied] = w.to(hard.dtype)
        parts.append((full, d))
    moved = x.lead.movedim(dim, -1).shape
    term = make(parts, shared.floor, s.orders)
    return term.map(lambda a: a.reshape(moved).movedim(-1, dim))


def _shared_weights(bounded: Term, candidates: Tensor, orders: int) -> Term:
    """softmax over each row's candidates of its bounded parts (degree ≤ 0), as a series in c.

    With s = s₀ + δ (δ → 0): exp(s₀ − max s₀)·exp(δ), expanded, divided by its row sum.
    """
    fixed = next((a for a, d in bounded.parts if d == 0), torch.zeros_like(bounded.lead))
    fixed = torch.where(candidates, fixed, -math.inf)
    scores = torch.exp(fixed - fixed.amax(dim=-1, keepdim=True))
    vanishing = Term(tuple((torch.where(candidates, a, 0), d) for a, d in bounded.parts if d < 0)
                     or ((torch.zeros_like(scores), -math.inf),), bounded.floor)
    numerators = mul(Term(((scores, 0.0),)), exp_series(vanishing, orders), orders)
    return mul(numerators, power(reduce(numerators, [-1], True, mean=False), -1.0, orders), orders)
