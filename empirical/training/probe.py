"""Saturation while training, live: :class:`SaturationProbe`.

Every ``every`` steps the probe measures, on a fixed small held-out batch, how close the model is
to its exact saturated limit: the per-layer similarity cos(h(x; θ), s-h(x; θ)) of
:func:`empirical.measure.similarity.representation_similarity` at c = ∞, and each attention
head's certified scale to saturate (:func:`empirical.measure.heads.head_atlas`, through
:func:`saturated.bounds.scale_to_saturate_map`): the smallest factor c by which the head's scores
must be multiplied for every query's attention to lie within ``eps`` of hard attention. A head
whose certified scale falls below ``threshold`` is close to hard attention (where the gradients
through its softmax vanish: the attention-logit growth that QK-normalisation fights); the probe
logs a warning naming the layer, the head and the step.

Used by :class:`~empirical.training.norms.NormTracker` (``probe=``) and
:class:`~empirical.training.callbacks.NormCallback` (``probe=``), which write its scalars with the
norms: ``<prefix>saturation/<layer>`` and ``<prefix>head_scale/layer<L>.head<H>`` (the upper end of
the certified interval; heads whose bound is infinite are left out).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["DEFAULT_EVERY", "SaturationProbe"]

logger = logging.getLogger("normsat.probe")

#: The default period in steps (docs/norms.md: the measured cost at this period).
DEFAULT_EVERY = 500


class SaturationProbe:
    """Measure saturation on a fixed held-out batch every ``every`` steps.

    Args:
        tokenizer: the model's tokenizer.
        sentences: the fixed held-out batch (a few short sentences keep it cheap).
        every: the period in steps (a measurement at each multiple, step 0 excluded).
        threshold: warn when a head's certified scale (upper end) falls below this.
        eps: the tolerance of the certified scales, in (0, 1).

    >>> SaturationProbe(None, ["A short sentence."], every=100).due(200), SaturationProbe(
    ...     None, ["A short sentence."], every=100).due(150)
    (True, False)
    """

    def __init__(self, tokenizer: Any, sentences: Sequence[str], *, every: int = DEFAULT_EVERY,
                 threshold: float = 2.0, eps: float = 1e-3) -> None:
        if every < 1:
            raise EmpiricalError(f"SaturationProbe expected every ≥ 1, got {every}")
        if not sentences or isinstance(sentences, str):
            raise EmpiricalError("SaturationProbe expected a list of held-out sentences, got "
                                 f"{sentences!r}")
        if not (math.isfinite(threshold) and threshold > 0):
            raise EmpiricalError(f"SaturationProbe expected a positive threshold, got {threshold}")
        self.tokenizer = tokenizer
        self.sentences = list(sentences)
        self.every = every
        self.threshold = threshold
        self.eps = eps
        self.records: list[dict[str, Any]] = []

    def due(self, step: int) -> bool:
        """Whether ``step`` is a measurement step."""
        return step > 0 and step % self.every == 0

    def measure(self, model: nn.Module, step: int) -> dict[str, Any]:
        """Measure ``model`` (in eval mode for the measurement, its mode restored), warn about
        heads below the threshold, and append and return the record."""
        from empirical.measure.heads import head_atlas
        from empirical.measure.similarity import representation_similarity

        training = model.training
        model.eval()
        try:
            similarity = representation_similarity(model, self.tokenizer, self.sentences,
                                                   scale=math.inf, batch_size=len(self.sentences))
            atlas = head_atlas(model, self.tokenizer, self.sentences, eps=self.eps, paper=False,
                               batch_size=len(self.sentences))
        finally:
            model.train(training)
        heads: list[dict[str, Any]] = [{"layer": h.layer, "head": h.head, "scale": list(h.scale)}
                                       for h in atlas.heads]
        saturation = dict(zip(similarity.layers, similarity.per_layer))
        record: dict[str, Any] = {"step": int(step), "saturation": saturation, "heads": heads}
        for head in heads:
            if head["scale"][1] < self.threshold:
                logger.warning("step %d: layer %d head %d is close to hard attention: certified "
                               "scale to saturate %.3g < threshold %g (eps %g)", step, head["layer"],
                               head["head"], head["scale"][1], self.threshold, self.eps)
        self.records.append(record)
        return record


def probe_scalars(record: dict[str, Any], prefix: str) -> dict[str, float]:
    """The dashboard scalars of one probe record, tag → value."""
    scalars = {f"{prefix}saturation/{layer}": float(value)
               for layer, value in record["saturation"].items()}
    for head in record["heads"]:
        if math.isfinite(head["scale"][1]):
            scalars[f"{prefix}head_scale/layer{head['layer']}.head{head['head']}"] = float(head["scale"][1])
    return scalars
