"""Running a model at scaled parameters c·θ without touching the model.

Scaled copies of the parameters are passed through ``torch.func.functional_call``; the model's own
tensors are never written, so they are bit-identical afterwards, also when the forward pass raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.validation import check_real
from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import SaturatedModel

__all__ = ["call_scaled", "check_scale", "parameter_norm", "scaled_forward", "scaled_parameters"]


def parameter_norm(parameters: Iterable[torch.Tensor]) -> float:
    """‖θ‖: the Euclidean norm of all the tensors together, summed in float64 tensor by tensor (no
    concatenated copy of θ).

    >>> parameter_norm([torch.tensor([3.0]), torch.tensor([[4.0]])])
    5.0
    """
    return math.sqrt(sum(float(p.detach().double().square().sum()) for p in parameters))


def check_scale(scale: float) -> float:
    """Return ``scale`` as a float if it is a c ≥ 1 or ∞ (the exact limit); otherwise raise.

    >>> check_scale(1000), check_scale(float("inf"))
    (1000.0, inf)
    """
    return check_real(scale, "the scale c (parameters are multiplied by c)", low=1, infinite=True)


def scaled_forward(model: nn.Module, scale: float, outputs: Collection[str] | None = None,
                   undetermined: str = "raise", max_precision: int = 1024) -> Callable[..., Any]:
    """``model`` at c·θ as a function of keyword inputs; for c = ∞, the exact saturated network.

    The limit's outputs are normalized by their degree in c (see :func:`saturated.saturate`), which
    leaves every cosine with f(x; θ) as the limit of the cosines at c·θ. ``outputs``: the output
    fields the caller reads; the limit computes only those (the others are None).
    ``undetermined="nan"``: the limit is NaN where it is undetermined instead of raising
    (:class:`saturated.saturate.SaturatedModel`). ``max_precision``: the cap of the refinement
    in ball arithmetic (:class:`saturated.rules.Settings`).
    """
    if math.isinf(scale):
        try:
            settings = Settings(max_precision=max_precision)
        except SaturationError as err:
            raise EmpiricalError(str(err)) from err
        return LimitForward(SaturatedModel(model, settings, outputs, undetermined))
    scaled = scaled_parameters(model, scale)
    return lambda **inputs: call_scaled(model, scaled, **inputs)


class LimitForward:
    """The exact saturated network called like the model (its outputs' values); ``reasons`` holds,
    after each call, why each batch entry still undetermined is (see
    :attr:`saturated.saturate.SaturatedOutput.reasons`)."""

    def __init__(self, limit: SaturatedModel) -> None:
        self.limit = limit
        self.reasons: dict[int, tuple[str, ...]] = {}

    def __call__(self, **inputs: Any) -> Any:
        try:
            out = self.limit(**inputs)
        except SaturationError as err:
            raise EmpiricalError(f"the exact limit (c = ∞) is not available: {err}") from err
        self.reasons = out.reasons
        return out.value


def scaled_parameters(model: nn.Module, scale: float) -> dict[str, torch.Tensor]:
    """Fresh tensors c·θ for every parameter of ``model`` (buffers are not parameters: unscaled)."""
    with torch.no_grad():
        return {name: p.detach() * scale for name, p in model.named_parameters()}


def call_scaled(model: nn.Module, parameters: dict[str, torch.Tensor], **inputs: Any) -> Any:
    """Call ``model(**inputs)`` with ``parameters`` in place of its own, without modifying it.

    Buffers go in as copies: a forward pass that updates buffers in place (BatchNorm's running
    statistics in training mode) updates the copies, never the model's own.
    """
    with torch.no_grad():
        buffers = {name: b.clone() for name, b in model.named_buffers()}
    return torch.func.functional_call(model, {**buffers, **parameters}, args=(), kwargs=inputs,
                                      strict=False)
