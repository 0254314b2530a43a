"""Saturated reference networks: hard-attention layers, with exact rational arithmetic.

A :class:`HardAttention` head computes hardmax(x W_q (x W_k)ᵀ) x W_v, the saturated form of
softmax attention. It runs on tensors (``forward``) or, for small inputs, on Python
:class:`~fractions.Fraction` s (``exact``), where outputs carry no rounding at all: ties are
exact, and averages are exact rationals.

Two constructions from the saturated-attention literature:

* :func:`majority_head`, a *global* head: equal scores everywhere, so it averages uniformly and
  its output is the fraction of each symbol, which counts (Majority, balanced counts);
* :func:`previous_token_head`, a *local* head: the score −(j − (i − 1))² peaks at the previous
  position, so it copies the previous token.

>>> head = majority_head()
>>> head.exact(one_hot("aab"))[-1]
[Fraction(2, 3), Fraction(1, 3)]
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import torch
from torch import Tensor, nn

from saturated.errors import SaturationError
from saturated.functional import hard_attention

__all__ = ["HardAttention", "majority_head", "one_hot", "positional", "previous_token_head"]

Matrix = list[list[Fraction]]
SYMBOLS = "ab"


def _rational(rows: Sequence[Sequence[float | int | Fraction]]) -> Matrix:
    """``rows`` as a matrix of fractions; raises SaturationError for anything else (ragged rows,
    entries that are not finite real numbers)."""
    try:
        matrix = [[Fraction(v) for v in row] for row in rows]
    except (TypeError, ValueError, OverflowError) as err:
        raise SaturationError(f"expected a matrix of integers or fractions, got {rows!r:.60}: {err}"
                              ) from None
    if len({len(row) for row in matrix}) > 1:
        raise SaturationError(f"expected a matrix with rows of one length, got rows of lengths "
                              f"{sorted({len(row) for row in matrix})}")
    return matrix


def _matmul(a: Matrix, b: Matrix) -> Matrix:
    """``a b``; raises SaturationError if a row of ``a`` and a column of ``b`` differ in length
    (``zip`` would silently drop the longer one's tail)."""
    if a and len(a[0]) != len(b):
        raise SaturationError(f"expected rows of {len(b)} entries (the weights' rows), got rows of "
                              f"{len(a[0])}")
    return [[sum((x * y for x, y in zip(row, col)), Fraction(0)) for col in zip(*b)] for row in a]


class HardAttention(nn.Module):
    """One saturated attention head: hardmax(q kᵀ) v with q = x W_q, k = x W_k, v = x W_v.

    Args:
        query: W_q, shape (d, e), integers or fractions.
        key: W_k, shape (d, e).
        value: W_v, shape (d, f).
        causal: position i attends only to positions j ≤ i.
    """

    query: Tensor
    key: Tensor
    value: Tensor

    def __init__(self, query: Sequence[Sequence[int | Fraction]], key: Sequence[Sequence[int | Fraction]],
                 value: Sequence[Sequence[int | Fraction]], causal: bool = False) -> None:
        super().__init__()
        self.rational = (_rational(query), _rational(key), _rational(value))
        for name, weights in zip(("query", "key", "value"), self.rational):
            self.register_buffer(name, torch.tensor([[float(v) for v in row] for row in weights],
                                                    dtype=torch.float64))
        self.causal = causal

    def forward(self, x: Tensor) -> Tensor:
        """Hard attention on a float tensor ``(..., n, d)`` (ties to rounding, see ``hardmax``)."""
        x = x.to(torch.float64)
        n = x.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool).tril() if self.causal else None
        return hard_attention(x @ self.query, x @ self.key, x @ self.value, mask=mask, rtol=0)

    def softmax_at(self, x: Tensor, scale: float) -> Tensor:
        """The ordinary head this one is the limit of: softmax(c·q kᵀ) v at c = ``scale``."""
        x = x.to(torch.float64)
        scores = scale * (x @ self.query) @ (x @ self.key).transpose(-2, -1)
        if self.causal:
            n = x.shape[-2]
            scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(scores, dim=-1) @ (x @ self.value)

    def exact(self, x: Sequence[Sequence[int | Fraction]]) -> Matrix:
        """The same head in exact rational arithmetic on one sequence ``(n, d)``.

        Raises:
            SaturationError: an empty sequence, or positions of another width than the weights'
                rows.
        """
        rows = _rational(x)
        if not rows:
            raise SaturationError("expected a sequence of at least one position, got none")
        query, key, value = (_matmul(rows, w) for w in self.rational)
        out: Matrix = []
        for i, q in enumerate(query):
            allowed = range(i + 1) if self.causal else range(len(rows))
            scores = {j: sum((a * b for a, b in zip(q, key[j])), Fraction(0)) for j in allowed}
            best = max(scores.values())
            winners = [j for j, s in scores.items() if s == best]
            out.append([sum((value[j][k] for j in winners), Fraction(0)) / len(winners)
                        for k in range(len(value[0]))])
        return out


def one_hot(word: str) -> Matrix:
    """Rows e_a or e_b for a word over the alphabet {a, b}.

    >>> one_hot("ba")
    [[Fraction(0, 1), Fraction(1, 1)], [Fraction(1, 1), Fraction(0, 1)]]
    """
    if set(word) - set(SYMBOLS):
        raise SaturationError(f"expected a word over {{a, b}}, got {word!r}")
    return [[Fraction(int(ch == s)) for s in SYMBOLS] for ch in word]


def positional(word: str) -> Matrix:
    """Rows (e_symbol, 1, i, i²): the symbol and the position features the local head reads.

    >>> [int(v) for v in positional("ab")[1]]
    [0, 1, 1, 1, 1]
    """
    return [[*row, Fraction(1), Fraction(i), Fraction(i * i)] for i, row in enumerate(one_hot(word))]


def majority_head() -> HardAttention:
    """A global head: zero queries make every score equal, so it averages the symbols uniformly.

    Causal, so position i holds (#a, #b)/(i + 1) of the prefix: the last position decides Majority
    (#a > #b) and balanced counts (#a = #b), exactly.
    """
    zeros = [[0], [0]]
    return HardAttention(zeros, zeros, [[1, 0], [0, 1]], causal=True)


def previous_token_head() -> HardAttention:
    """A local head on :func:`positional` rows: q_i·k_j = −(j − (i − 1))², largest at j = i − 1.

    From the features (a, b, 1, i, i²): q_i = (−1, 2(i − 1), −(i − 1)²) and k_j = (j², j, 1).
    Position i ≥ 1 copies the symbol at i − 1; position 0 (causal) sees only itself.

    >>> previous_token_head().exact(positional("abb"))[1]
    [Fraction(1, 1), Fraction(0, 1)]
    """
    query = [[0, 0, 0], [0, 0, 0], [-1, -2, -1], [0, 2, 2], [0, 0, -1]]
    key = [[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]]
    value = [[1, 0], [0, 1], [0, 0], [0, 0], [0, 0]]
    return HardAttention(query, key, value, causal=True)
