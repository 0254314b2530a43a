"""Checks of the values that enter :mod:`saturated`'s public functions and settings.

The checks themselves are :mod:`homogeneity.validation`'s; here they raise
:class:`~saturated.errors.SaturationError` and know the limit computation's own arguments.

>>> check_rtol(None), check_rtol(0)
(None, 0.0)
>>> check_rtol(-1)
Traceback (most recent call last):
saturated.errors.SaturationError: expected rtol (the tie tolerance) to be a number ≥ 0, got -1
"""

from __future__ import annotations

from typing import Any

import torch

from homogeneity.validation import check_number, describe
from saturated.errors import SaturationError

__all__ = ["check_dim", "check_rtol", "check_scores"]


def check_rtol(rtol: Any, name: str = "rtol") -> float | None:
    """A tie tolerance: None (the dtype's default) or a finite number ≥ 0.

    A negative tolerance would make even the maximum fail its own test (an all-zero "limit"), NaN
    every comparison false, and ∞ tie every position of a row.
    """
    if rtol is None:
        return None
    return check_number(rtol, f"{name} (the tie tolerance)", low=0, error=SaturationError)


def check_scores(scores: Any, name: str = "scores") -> torch.Tensor:
    """``scores`` if it is a real tensor with at least one dimension (bool and complex refused).

    >>> check_scores([1.0, 2.0])
    Traceback (most recent call last):
    saturated.errors.SaturationError: expected scores to be a real torch.Tensor, got [1.0, 2.0] (list)
    """
    if not isinstance(scores, torch.Tensor) or scores.is_complex() or scores.dtype == torch.bool:
        shown = describe(scores) if not isinstance(scores, torch.Tensor) else f"a {scores.dtype} tensor"
        raise SaturationError(f"expected {name} to be a real torch.Tensor, got {shown}")
    if scores.dim() == 0:
        raise SaturationError(f"expected {name} with at least one dimension to normalize over, got a "
                              "0-dimensional tensor")
    return scores


def check_dim(dim: Any, tensor: torch.Tensor, name: str = "dim") -> int:
    """``dim`` if it is an integer naming one of ``tensor``'s dimensions (negative counts back)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or not -tensor.dim() <= dim < tensor.dim():
        raise SaturationError(f"expected {name} to be an integer in [{-tensor.dim()}, {tensor.dim() - 1}] "
                              f"for a tensor of shape {tuple(tensor.shape)}, got {describe(dim)}")
    return dim
