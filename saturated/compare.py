"""Layer-by-layer comparison of a saturated reference network with an ordinary one.

Both networks are given as their per-layer outputs on the same inputs (e.g. the hidden states of
a pretrained model and of its :func:`~saturated.saturate` limit, or of a hard-attention
reference head and a softmax head); the comparison is the mean cosine per layer over the
positions that count, and, where the networks end in a head, how often their argmax agrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from homogeneity.validation import check_sequence, describe
from saturated.errors import SaturationError

__all__ = ["LayerComparison", "compare_layers"]


@dataclass(frozen=True)
class LayerComparison:
    """Per-layer mean cosine (over the positions compared) and, with logits, argmax agreement."""

    cosines: tuple[float, ...]
    argmax_agreement: float | None
    positions: int


def compare_layers(reference: Sequence[Tensor], other: Sequence[Tensor], mask: Tensor | None = None,
                   logits: tuple[Tensor, Tensor] | None = None) -> LayerComparison:
    """Compare two networks layer by layer on the same inputs.

    Args:
        reference: per-layer outputs of the reference network, each ``(..., d)``.
        other: the other network's outputs, layer for layer, same shapes.
        mask: boolean ``(...)``, True at the positions to compare (default: all).
        logits: (reference logits, other logits), ``(..., classes)``, for argmax agreement.

    Returns:
        A :class:`LayerComparison`.

    Raises:
        SaturationError: a side that is not a list of real tensors (a bare tensor included),
            different numbers of layers, mismatched shapes (layers, mask, logits), or no
            position to compare.

    >>> a = [torch.tensor([[1.0, 0.0], [0.0, 2.0]])]
    >>> b = [torch.tensor([[2.0, 0.0], [1.0, 0.0]])]
    >>> compare_layers(a, b).cosines
    (0.5,)
    """
    reference, other = (check_sequence(side, name, what="per-layer tensors", error=SaturationError)
                        for side, name in ((reference, "reference"), (other, "other")))
    for name, side in (("reference", reference), ("other", other)):
        wrong = [layer for layer in side if not isinstance(layer, Tensor) or layer.is_complex()]
        if wrong:
            raise SaturationError(f"expected {name} to hold real tensors, got {describe(wrong[0])}")
    if len(reference) != len(other):
        raise SaturationError(f"expected as many layers on both sides, got {len(reference)} and {len(other)}")
    if not reference:
        raise SaturationError("expected at least one layer to compare")
    for index, (a, b) in enumerate(zip(reference, other)):
        if a.shape != b.shape:
            raise SaturationError(f"layer {index} has shape {tuple(a.shape)} against {tuple(b.shape)}")
    positions_shape = reference[0].shape[:-1]
    if mask is not None and (not isinstance(mask, Tensor) or mask.shape != positions_shape):
        raise SaturationError(f"expected a mask of shape {tuple(positions_shape)} (the layers' shape "
                              f"without the last dimension), got {_shape(mask)}")
    if logits is not None and (not isinstance(logits, tuple | list) or len(logits) != 2 or any(
            not isinstance(t, Tensor) or t.shape[:-1] != positions_shape for t in logits)):
        raise SaturationError(f"expected logits as (reference, other), each of shape "
                              f"{tuple(positions_shape)} + (classes,), got {describe(logits)}")
    keep = torch.ones(positions_shape, dtype=torch.bool) if mask is None else mask.bool()
    positions = int(keep.sum())
    if positions == 0:
        raise SaturationError("the mask selects no position to compare")
    cosines = tuple(
        float(torch.nn.functional.cosine_similarity(a[keep].double(), b[keep].double(), dim=-1).mean())
        for a, b in zip(reference, other)
    )
    agreement = None
    if logits is not None:
        ours, theirs = (t[keep].argmax(dim=-1) for t in logits)
        agreement = float((ours == theirs).double().mean())
    return LayerComparison(cosines, agreement, positions)


def _shape(value: object) -> str:
    return f"shape {tuple(value.shape)}" if isinstance(value, Tensor) else describe(value)
