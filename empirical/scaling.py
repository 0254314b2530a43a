"""Running a model at scaled parameters c·θ without touching the model.

Scaled copies of the parameters are passed through ``torch.func.functional_call``; the model's own
tensors are never written, so they are bit-identical afterwards, also when the forward pass raises.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["call_scaled", "check_scale", "scaled_parameters"]


def check_scale(scale: float) -> float:
    """Return ``scale`` as a float if it is a finite c ≥ 1; otherwise raise a clear error.

    >>> check_scale(1000)
    1000.0
    """
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise EmpiricalError(f"expected a number c ≥ 1 as the scale, got {scale!r}") from None
    if math.isinf(value) and value > 0:
        raise EmpiricalError(
            "scale=inf asks for the exact saturated network (c → ∞), which the saturated package "
            "computes; for a finite scale pass a number c ≥ 1 such as 1000"
        )
    if not math.isfinite(value) or value < 1:
        raise EmpiricalError(f"expected a finite scale c ≥ 1 (parameters are multiplied by c), got {scale!r}")
    return value


def scaled_parameters(model: nn.Module, scale: float) -> dict[str, torch.Tensor]:
    """Fresh tensors c·θ for every parameter of ``model`` (buffers are not parameters: unscaled)."""
    with torch.no_grad():
        return {name: p.detach() * scale for name, p in model.named_parameters()}


def call_scaled(model: nn.Module, parameters: dict[str, torch.Tensor], **inputs: Any) -> Any:
    """Call ``model(**inputs)`` with ``parameters`` in place of its own, without modifying it."""
    return torch.func.functional_call(model, parameters, args=(), kwargs=inputs, strict=False)
