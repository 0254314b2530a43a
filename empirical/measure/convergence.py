"""Convergence to the exact limit (the paper's Figure 5, made exact at its end), layer by layer.

For each hidden state h_l and each scale c, the mean over real tokens of
cos(h_l(x; c·θ), s-h_l(x; θ)), where s-h is the exact saturated network of :mod:`saturated`.
At c = 1 this is the representation similarity at c = ∞.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.measure.pipeline import (
    Sums,
    forward,
    hidden_states,
    layer_labels,
    prepare,
    texts_of,
    token_cosines,
)
from empirical.measure.scaled import check_scale, scaled_forward
from empirical.models.corpus import Corpus
from empirical.outputs import Result

__all__ = ["Convergence", "decay_rate", "limit_convergence"]

SCHEMA = "normsat.convergence/1"


@dataclass(frozen=True)
class Convergence(Result):
    """Mean token cosine of each hidden state at c·θ with the exact limit, per scale.

    Attributes:
        layers: a label per hidden state, embeddings first.
        scales: the scales c measured (1 is θ itself).
        to_limit: for each scale, one cosine per layer, in the order of ``layers``.
        n_tokens: real tokens measured (summed over stacks).
        distributed: the ranks that measured it (:func:`empirical.distributed.provenance`).
    """

    layers: tuple[str, ...]
    scales: tuple[float, ...]
    to_limit: dict[float, tuple[float, ...]]
    n_tokens: int
    distributed: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.convergence/1``); a rate that cannot be fitted is null."""
        return {
            "schema": SCHEMA,
            "scales": list(self.scales),
            "layers": [
                {"name": name, "cosine_to_limit": [self.to_limit[c][i] for c in self.scales],
                 "rate": None if math.isnan(rate := self.rate(i)) else rate}
                for i, name in enumerate(self.layers)
            ],
            "n_tokens": self.n_tokens,
            "distributed": self.distributed,
        }

    def table(self) -> str:
        """Plain text: one row per layer, the cosine to the limit at each c and the fitted rate."""
        width = max(len("layer"), *(len(n) for n in self.layers))
        rows = [f"{'layer':<{width}}  " + "  ".join(f"{f'c={c:g}':>9}" for c in self.scales) + "      rate"]
        for i, name in enumerate(self.layers):
            cells = "  ".join(f"{self.to_limit[c][i]:>9.6f}" for c in self.scales)
            rows.append(f"{name:<{width}}  {cells}  {self.rate(i):>8.3f}")
        return "\n".join(rows)

    def rate(self, layer: int) -> float:
        """Fitted exponent r of 1 − cos ≈ C·c^(−r) over the scales above 1 (NaN if already exact)."""
        return decay_rate(self.scales, [1 - self.to_limit[c][layer] for c in self.scales])

def decay_rate(scales: Sequence[float], gaps: Sequence[float], *, floor: float = 1e-12) -> float:
    """The exponent r of ``gap ≈ C·c^(−r)``: minus the least-squares slope of log gap on log c
    (``scipy.stats.linregress``), over the scales above 1 whose gap exceeds ``floor``.

    NaN when fewer than two points remain (already exact at every scale).

    >>> round(decay_rate([1, 10, 100, 1000], [0.5, 3e-2, 3e-4, 3e-6]), 6)
    2.0
    >>> decay_rate([1, 10, 100], [0.5, 0.0, 0.0])
    nan
    """
    from scipy.stats import linregress

    points = [(math.log(c), math.log(gap)) for c, gap in zip(scales, gaps, strict=True)
              if c > 1 and gap > floor]
    if len(points) < 2:
        return math.nan
    xs, ys = zip(*points, strict=True)
    return -float(linregress(xs, ys).slope)


def limit_convergence(
    model: nn.Module,
    tokenizer: object,
    sentences: Sequence[str] | Corpus,
    *,
    scales: Sequence[float] = (1.0, 10.0, 100.0, 1000.0, 10000.0),
    batch_size: int = 32,
    max_length: int = 512,
    progress: bool = False,
) -> Convergence:
    """cos(h(x; c·θ), s-h(x; θ)) per layer for each c in ``scales``, averaged over real tokens.

    Args:
        model: a Hugging Face transformer in eval mode (never modified).
        tokenizer: its tokenizer.
        sentences: the input texts.
        scales: the factors c (finite, ≥ 1).
        batch_size: sentences per forward pass.
        max_length: truncation length in tokens.
        progress: show a progress bar.

    Returns:
        A :class:`Convergence`.

    Raises:
        EmpiricalError: empty input, a bad scale, or a limit that is not determined.

    >>> from empirical.models.loading import load_model
    >>> model, tokenizer = load_model("minilm", num_layers=1)
    >>> result = limit_convergence(model, tokenizer, ["A short sentence."], scales=(1.0, 1e4))
    >>> result.layers, result.to_limit[1e4][1] > 0.99
    (('embeddings', 'layer 1'), True)
    """
    checked = [check_scale(c) for c in scales]
    if any(math.isinf(c) for c in checked):
        raise EmpiricalError("scales are compared with the limit; pass finite values c ≥ 1")
    prepared = prepare(model, tokenizer, texts_of(sentences), max_length=max_length, batch_size=batch_size,
                       sharded=True)
    limit = scaled_forward(model, math.inf, prepared.fields(), one_shape=prepared.one_shape())
    runs = {c: scaled_forward(model, c) if c != 1 else None for c in checked}
    sums = Sums()
    labels: list[str] = []
    for batch in prepared.iterate("convergence to the limit", progress=progress):
        target = forward(model, batch.inputs, limit)
        labels = labels or [name for stack, _ in batch.stacks for name in layer_labels(
            stack, len(hidden_states(target, stack, model)))]
        for c, run in runs.items():
            grown = forward(model, batch.inputs, run)
            sums.add(c, torch.stack([
                token_cosines(a, b, mask).sum() for stack, mask in batch.stacks
                for a, b in zip(hidden_states(grown, stack, model), hidden_states(target, stack, model))
            ]))
        # Every stack of a batch has the same real tokens (see empirical.models.batching).
        sums.count("", int(batch.stacks[0][1].sum()))
    ranks = sums.provenance()
    totals, counts = sums.reduced()
    count = counts[""]
    return Convergence(tuple(labels), tuple(checked),
                       {c: tuple(float(v) / count for v in total) for c, total in totals.items()},
                       count, ranks)
