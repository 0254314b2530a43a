"""How much precision a pass loses as it runs, and what that says about the end of the graph.

A ball's radius grows by about the same number of bits per linear layer at any precision (a
linear layer's |W|·r: some 4.5 bits at width 768, 18 per T5 block), so the bits a pass has lost
so far, measured on its matrix products, grow about linearly with the products on the way. A
pass whose loss, extrapolated to the end, exceeds its bits is given up there,
before it spends the rest of its time on values too wide to decide anything; the next level is
started at the extrapolated loss and a margin (:func:`saturated.precision.next_precision`).

Stopping early never decides anything: at worst it costs the level it stops, and the level after
an early stop runs to its end (or to a decision it cannot make), so a wrong extrapolation costs
at most one level more.

>>> loss = Loss(128)
>>> loss.observe(np.array([[[1.0, 2.0]], [[2.0 ** -100, 0.0]]]), 0.1)  # 2^-101 of the row's size
>>> loss.observe(np.array([[[1.0, 2.0]], [[2.0 ** -60, 0.0]]]), 0.3)
>>> round(loss.lost), round(loss.projected())
(67, 254)
>>> loss.hopeless()
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MEANINGFUL_SHARE", "Loss", "bits_lost"]

MEANINGFUL_SHARE = 0.25
"""How far into the graph (by matrix products on its longest path) a pass runs before its loss
is extrapolated."""


def bits_lost(values: np.ndarray, bits: int) -> float:
    """The bits of relative precision lost in a split (float64 terms, then a radius) computed at
    ``bits``: the largest, over rows (the last axis), of log2(the row's largest radius / its
    largest |first term|) + ``bits``; −∞ where nothing can be measured (exact values, zero rows,
    undetermined rows). A row is judged against its own size, so that an element near 0 in it
    (a cancellation that leaves little) does not count as a loss.

    >>> bits_lost(np.array([[[4.0, -1.0], [0.0, 0.0]], [[2.0 ** -118, 2.0 ** -120], [0.0, 0.0]]]), 128)
    8.0
    """
    if values.ndim < 2 or values.size == 0:
        return -math.inf
    radius = values[-1].reshape(-1, values.shape[-1])
    size = np.abs(values[0]).reshape(-1, values.shape[-1]).max(axis=-1)
    with np.errstate(invalid="ignore"):
        widest = radius.max(axis=-1)
    measured = (size > 0) & (widest > 0) & np.isfinite(widest)
    if not measured.any():
        return -math.inf
    return float(np.log2((widest[measured] / size[measured]).max())) + bits


@dataclass
class Loss:
    """The loss of one pass at ``bits``, observed on values as the pass runs.

    Attributes:
        bits: the pass's precision.
        lost: the most bits lost by any value observed so far.
        history: (how far into the graph, bits lost) of each value observed.
    """

    bits: int
    lost: float = -math.inf
    history: list[tuple[float, float]] = field(default_factory=list)

    def observe(self, values: np.ndarray, share: float) -> None:
        """Note the loss of ``values`` (a split), computed ``share`` of the way through the graph."""
        lost = bits_lost(values, self.bits)
        if math.isfinite(lost):
            self.lost = max(self.lost, lost)
            self.history.append((share, lost))

    def projected(self) -> float:
        """The bits lost by the end of the graph: the most lost so far, and the rate of the
        latest half of the way (which leaves out what the first products lose at once, from
        exact operands, and what later ones do not add to) over the rest; −∞ before anything is
        measured."""
        if not self.history:
            return -math.inf
        furthest = max(share for share, _ in self.history)
        before = max((lost for share, lost in self.history if share <= furthest / 2), default=self.lost)
        rate = (self.lost - before) / (furthest / 2) if furthest > 0 else 0.0
        return self.lost + max(rate, 0.0) * (1 - furthest)

    def hopeless(self) -> bool:
        """Whether the pass, past a meaningful share of the graph, is expected to lose all its
        bits before the end (its last decisions would need a few more still: a pass that only
        comes close runs on, and fails, if it does, at the decision it cannot make)."""
        if not self.history or max(share for share, _ in self.history) < MEANINGFUL_SHARE:
            return False
        return self.projected() > self.bits
