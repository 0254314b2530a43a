"""Running a model at scaled parameters c·θ without touching the model.

Scaled copies of the parameters are passed through ``torch.func.functional_call``; the model's own
tensors are never written, so they are bit-identical afterwards, also when the forward pass raises.

A model placed by accelerate (weights streamed from disk) or held in bfloat16 or float16 runs
*streamed* instead (:func:`streamed`): each module, as it runs, sees its own parameters scaled by
c and cast to the compute dtype (:func:`compute_dtype`: float32 for the 16-bit dtypes, whose range
a layer at c = 1000 exceeds), and gets its own back when it returns. Nothing is written into the
weights, on disk or in memory, and at most one module's scaled copy exists at a time. The exact
limit (c = ∞) of a placed model reads its weights one tensor at a time as the exported graph
needs them (:func:`limit_model`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map_only

from empirical.errors import EmpiricalError
from empirical.models.offload import is_dispatched
from empirical.models.placed_weights import PlacedWeights
from empirical.validation import check_real
from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import SaturatedModel

__all__ = ["call_scaled", "check_scale", "compute_dtype", "limit_model", "parameter_norm", "plain_forward",
           "scaled_forward", "scaled_parameters", "streamed"]

_NARROW = (torch.float16, torch.bfloat16)


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
                   undetermined: str = "raise", max_precision: int = 1024,
                   read_padding: bool = True, one_shape: bool = False) -> Callable[..., Any]:
    """``model`` at c·θ as a function of keyword inputs; for c = ∞, the exact saturated network.

    The limit's outputs are normalized by their degree in c (see :func:`saturated.saturate`), which
    leaves every cosine with f(x; θ) as the limit of the cosines at c·θ. ``outputs``: the output
    fields the caller reads; the limit computes only those (the others are None).
    ``undetermined="nan"``: the limit is NaN where it is undetermined instead of raising
    (:class:`saturated.saturate.SaturatedModel`). ``max_precision``: the cap of the refinement
    in ball arithmetic (:class:`saturated.rules.Settings`). ``read_padding=False``: the caller
    reads no padded position, which the limit then decides no further than its first levels do.
    ``one_shape=True``: the caller runs inputs of one shape, for which alone the limit exports its
    graph (:class:`~saturated.saturate.SaturatedModel`).
    """
    if _streams(model) and not math.isinf(scale):
        dtype = compute_dtype(model)
        return lambda **inputs: _call_streamed(model, scale, dtype, inputs)
    if math.isinf(scale):
        try:
            settings = Settings(max_precision=max_precision)
        except SaturationError as err:
            raise EmpiricalError(str(err)) from err
        return LimitForward(limit_model(model, settings, outputs, undetermined, read_padding, one_shape))
    scaled = scaled_parameters(model, scale)
    return lambda **inputs: call_scaled(model, scaled, **inputs)


def limit_model(model: nn.Module, settings: Settings, outputs: Collection[str] | None = None,
                undetermined: str = "raise", read_padding: bool = True, one_shape: bool = False
                ) -> SaturatedModel:
    """The exact saturated network of ``model`` (:class:`~saturated.saturate.SaturatedModel`); for a
    model placed by accelerate, its weights are read one tensor at a time as the graph needs them,
    offloaded ones from disk (:class:`~empirical.models.placed_weights.PlacedWeights`)."""
    weights = PlacedWeights(model) if is_dispatched(model) else None
    return SaturatedModel(model, settings, outputs, undetermined, weights=weights, read_padding=read_padding,
                          one_shape=one_shape)


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


def compute_dtype(model: nn.Module, scale: float = 1.0) -> torch.dtype:
    """The dtype a measurement at c = ``scale`` computes in: the parameters' own, float32 for
    bfloat16 and float16 at finite c (the exact limit runs on the model's own tensors, with its own
    rounding bounds).

    >>> compute_dtype(nn.Linear(2, 2).to(torch.bfloat16)), compute_dtype(nn.Linear(2, 2))
    (torch.float32, torch.float32)
    """
    dtype = next(model.parameters()).dtype
    return torch.float32 if dtype in _NARROW and not math.isinf(scale) else dtype


def _streams(model: nn.Module) -> bool:
    """Whether ``model`` runs streamed: placed by accelerate, or held in a 16-bit dtype."""
    return is_dispatched(model) or next(model.parameters()).dtype in _NARROW


def plain_forward(model: nn.Module, scale: float = 1.0) -> Callable[..., Any]:
    """``model`` at θ, computing in :func:`compute_dtype` of a measurement at c = ``scale`` (the
    model itself where that is its own dtype)."""
    dtype = compute_dtype(model, scale)
    if not is_dispatched(model) and dtype == next(model.parameters()).dtype:
        return lambda **inputs: model(**inputs)
    return lambda **inputs: _call_streamed(model, 1.0, dtype, inputs)


def _call_streamed(model: nn.Module, scale: float, dtype: torch.dtype, inputs: dict[str, Any]) -> Any:
    with streamed(model, scale, dtype):
        return model(**inputs)


@contextmanager
def streamed(model: nn.Module, scale: float, dtype: torch.dtype) -> Iterator[None]:
    """Within the block, every module of ``model`` runs with its own parameters times ``scale`` and
    its floating tensors in ``dtype``, made as it runs and dropped when it returns.

    The module's forward is wrapped (inside accelerate's hook where there is one, so the weights
    it streams in are already there); the module's own tensors are put back in a ``finally``, and
    the wrappers are removed on leaving the block, also when the forward pass raises.

    >>> layer = nn.Linear(2, 1, bias=False)
    >>> before = layer.weight.clone()
    >>> with streamed(layer, 10.0, torch.float64):
    ...     out = layer(torch.ones(1, 2, dtype=torch.float64))
    >>> bool(torch.allclose(out, 10 * before.double().sum())), torch.equal(layer.weight, before)
    (True, True)
    """
    wrapped: list[tuple[nn.Module, str, Any, bool]] = []
    try:
        for module in model.modules():
            if next(module.parameters(recurse=False), None) is None:
                continue
            attribute = "_old_forward" if hasattr(module, "_hf_hook") else "forward"
            own = attribute in vars(module)
            original = getattr(module, attribute)
            setattr(module, attribute, _scaling(module, original, scale, dtype))
            wrapped.append((module, attribute, original, own))
        yield
    finally:
        for module, attribute, original, own in reversed(wrapped):
            if own:
                setattr(module, attribute, original)
            else:
                delattr(module, attribute)


def _scaling(module: nn.Module, forward: Callable[..., Any], scale: float, dtype: torch.dtype
             ) -> Callable[..., Any]:
    """``forward`` run with the module's direct parameters scaled and cast, its floating buffers and
    inputs cast."""
    def run(*args: Any, **kwargs: Any) -> Any:
        parameters: dict[str, Any] = dict(module._parameters)
        buffers = dict(module._buffers)
        try:
            with torch.no_grad():
                for name, value in parameters.items():
                    if value is not None:
                        module._parameters[name] = value.detach().to(dtype) * scale
                for name, value in buffers.items():
                    if value is not None and value.is_floating_point():
                        module._buffers[name] = value.to(dtype)
            # Inputs too: a parent may cast them to a child's dtype as it reads it before the
            # child runs (T5's feed-forward reads wo.weight.dtype).
            args, kwargs = tree_map_only(torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t,
                                         (args, kwargs))
            return forward(*args, **kwargs)
        finally:
            module._parameters.update(parameters)
            module._buffers.update(buffers)

    return run
