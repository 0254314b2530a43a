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

import numpy as np
import torch

from homogeneity.validation import check_number, describe
from saturated.errors import SaturationError

__all__ = ["check_dim", "check_operands", "check_rtol", "check_score_array", "check_scores"]


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
    if scores.is_meta:
        raise SaturationError(f"expected {name} with values, got a tensor on the meta device (shape "
                              f"{tuple(scores.shape)}, no values): the limit reads every score")
    return scores


def check_operands(**tensors: torch.Tensor) -> None:
    """Refuse operands of one product (already :func:`check_scores`-checked) that are not all
    floating, or not all of one dtype and on one device: PyTorch would refuse the product with a
    message naming none of them, and an integer tensor would be cast silently elsewhere.

    >>> check_operands(q=torch.ones(1, 2), k=torch.ones(1, 2, dtype=torch.float64))
    Traceback (most recent call last):
    saturated.errors.SaturationError: expected q and k of one dtype, got float32 and float64
    """
    for name, tensor in tensors.items():
        if not tensor.is_floating_point():
            raise SaturationError(f"expected a floating {name}, got dtype "
                                  f"{str(tensor.dtype).removeprefix('torch.')} (cast it with .float())")
    names = " and ".join(", ".join(tensors).rsplit(", ", 1))
    for attribute in ("dtype", "device"):
        found = [str(getattr(t, attribute)).removeprefix("torch.") for t in tensors.values()]
        if len(set(found)) > 1:
            shown = " and ".join(", ".join(found).rsplit(", ", 1))
            raise SaturationError(f"expected {names} of one {attribute}, got {shown}")


def check_score_array(scores: Any, name: str = "scores") -> torch.Tensor:
    """``scores`` (a tensor, a NumPy array or nested lists of numbers) as a float64 tensor on the
    CPU, if they are real numbers in a rectangular array; complex scores are refused (their
    imaginary part would be dropped), and so are strings, booleans and rows of different lengths.

    >>> check_score_array([[1, 2], [3, 4.5]]).dtype
    torch.float64
    >>> check_score_array([[1.0, 2.0], [1.0]])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    saturated.errors.SaturationError: expected scores as a rectangular array of numbers, got rows of ...
    """
    if isinstance(scores, torch.Tensor):
        return check_scores(scores, name).detach().to("cpu", torch.float64)
    if isinstance(scores, str | bytes):
        raise SaturationError(f"expected {name} as numbers, got the string {describe(scores)}")
    try:
        array = np.asarray(scores)
    except ValueError:  # NumPy refuses ragged nesting
        raise SaturationError(f"expected {name} as a rectangular array of numbers, got rows of "
                              "different lengths") from None
    if array.dtype.kind not in "iuf":
        kinds = {"c": "complex numbers", "b": "booleans", "U": "strings", "S": "strings"}
        raise SaturationError(f"expected {name} as real numbers, got "
                              f"{kinds.get(array.dtype.kind, f'{array.dtype} values')}: {describe(scores)}")
    return torch.as_tensor(array.astype(np.float64))


def check_dim(dim: Any, tensor: torch.Tensor, name: str = "dim") -> int:
    """``dim`` if it is an integer naming one of ``tensor``'s dimensions (negative counts back)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or not -tensor.dim() <= dim < tensor.dim():
        raise SaturationError(f"expected {name} to be an integer in [{-tensor.dim()}, {tensor.dim() - 1}] "
                              f"for a tensor of shape {tuple(tensor.shape)}, got {describe(dim)}")
    return dim
