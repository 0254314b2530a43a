"""``saturate(model, *args, **kwargs)``: the exact saturated network s-f(x; θ) = lim f(x; c·θ).

The model is exported once per input signature (shapes, dtypes and non-tensor arguments) and the
graph is interpreted on leading-order terms (:mod:`saturated.interpreter`). Every output is
returned normalized by its degree: for an output of degree d the value is lim f(x; c·θ)/cᵈ, the
direction the output takes as the parameters grow (d = 0: the limit itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model
from saturated.errors import SaturationError
from saturated.interpreter import run_terms
from saturated.rules import Settings
from saturated.terms import NeedsOrders, Term

__all__ = ["SaturatedModel", "SaturatedOutput", "saturate"]


@dataclass(frozen=True)
class SaturatedOutput:
    """The saturated outputs and their degrees in c.

    Attributes:
        value: the model's output structure (e.g. a Hugging Face ``ModelOutput``) holding
            lim f(x; c·θ)/cᵈ for each tensor.
        degrees: the same structure holding each tensor's degree d (0.0 for exact outputs).
        orders: how many orders of the expansion were tracked to decide the limit.
    """

    value: Any
    degrees: Any
    orders: int


def _normalized(term: Term, index: int) -> tuple[torch.Tensor, float]:
    """lim v/cᴰ for the highest degree D with a nonzero coefficient: that part's coefficients."""
    for coef, degree in term.parts:
        if not bool(coef.any()):
            continue
        if not math.isfinite(degree):
            raise SaturationError(f"output {index} holds a masking constant (±∞ in the limit)")
        if not bool(torch.isfinite(coef).all()):
            raise SaturationError(f"output {index} has non-finite leading coefficients (overflow or 0·∞)")
        return coef, degree
    if term.floor == -math.inf:
        return term.lead, -math.inf
    raise NeedsOrders(f"output {index} is zero at every tracked order")


def _schedule(most: int) -> list[int]:
    """Orders to try: 1, 2, 4, … up to ``most`` (each failure costs less than the next attempt).

    >>> _schedule(12)
    [1, 2, 4, 8, 12]
    """
    steps = [1]
    while steps[-1] < most:
        steps.append(min(2 * steps[-1], most))
    return steps


def _signature(spec: pytree.TreeSpec, leaves: list[Any]) -> tuple[Any, ...]:
    shapes = tuple(
        (tuple(leaf.shape), leaf.dtype, str(leaf.device)) if isinstance(leaf, torch.Tensor) else repr(leaf)
        for leaf in leaves
    )
    return (str(spec), shapes)


def _check_masks(kwargs: dict[str, Any]) -> None:
    """Reject attention masks with a row that allows no position at all (the limit has no weights)."""
    for name, value in kwargs.items():
        if "attention_mask" in name and isinstance(value, torch.Tensor) and value.dim() == 2:
            empty = ~(value.bool().any(dim=-1))
            if bool(empty.any()):
                raise SaturationError(
                    f"{name} masks every position of row {int(torch.nonzero(empty)[0])}; expected "
                    "at least one real token per sequence"
                )


class SaturatedModel:
    """A model's saturated version, called like the model itself.

    Build it with :func:`saturate`. Each distinct input signature is exported once and cached; the
    model's current parameters are read at every call (never modified).
    """

    def __init__(self, model: nn.Module, settings: Settings) -> None:
        if not isinstance(model, nn.Module):
            raise SaturationError(f"expected an nn.Module to saturate, got {type(model).__name__}")
        self.model = model
        self.settings = settings
        self._programs: dict[tuple[Any, ...], torch.export.ExportedProgram] = {}
        self._checked: set[tuple[str, int, int]] = set()

    def _check_parameters(self) -> None:
        """Non-finite parameters have no direction to grow in; checked once per parameter version."""
        for name, p in self.model.named_parameters():
            key = (name, p.data_ptr(), p._version)
            if key not in self._checked:
                if not bool(torch.isfinite(p).all()):
                    raise SaturationError(f"parameter '{name}' has non-finite entries; expected finite θ")
                self._checked.add(key)

    def program(self, *args: Any, **kwargs: Any) -> torch.export.ExportedProgram:
        """The exported graph for these inputs (exported on first use)."""
        leaves, spec = pytree.tree_flatten((args, kwargs))
        key = _signature(spec, leaves)
        if key not in self._programs:
            try:
                self._programs[key] = export_model(self.model, args, kwargs)
            except HomogeneityError as err:
                raise SaturationError(f"cannot saturate: {err}") from err
        return self._programs[key]

    def __call__(self, *args: Any, **kwargs: Any) -> SaturatedOutput:
        """The saturated outputs for these inputs (see :class:`SaturatedOutput`).

        The leading order is tried first; where it does not decide the limit (a hard-attention
        tie, a cancellation), the pass is repeated tracking ``settings.orders`` parts.
        """
        _check_masks(kwargs)
        program = self.program(*args, **kwargs)
        leaves = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
        tensors = {**dict(self.model.named_buffers()), **dict(self.model.named_parameters())}
        self._check_parameters()
        for orders in _schedule(self.settings.orders):
            try:
                with torch.no_grad():
                    outputs = run_terms(program, tensors, leaves, replace(self.settings, orders=orders))
                pairs = [_normalized(out, i) if isinstance(out, Term)
                         else (out, 0.0 if isinstance(out, torch.Tensor) else None)
                         for i, out in enumerate(outputs)]
                break
            except NeedsOrders as err:
                if orders == self.settings.orders:
                    raise SaturationError(f"{err} (tracking {orders} orders)") from err
        out_spec = program.call_spec.out_spec
        assert out_spec is not None
        return SaturatedOutput(pytree.tree_unflatten([v for v, _ in pairs], out_spec),
                               pytree.tree_unflatten([d for _, d in pairs], out_spec), orders)


def saturate(model: nn.Module, *args: Any, settings: Settings | None = None,
             **kwargs: Any) -> SaturatedModel:
    """The exact saturated network of ``model``, checked on example inputs.

    Args:
        model: any ``nn.Module`` that :func:`homogeneity.tracing.export_model` can trace
            (Hugging Face models are exported in eval mode, without cache, with eager attention).
        *args: example positional inputs.
        settings: mask threshold, tie tolerance and tie policy (:class:`~saturated.rules.Settings`).
        **kwargs: example keyword inputs.

    Returns:
        A :class:`SaturatedModel`; call it like the model to get a :class:`SaturatedOutput`.

    Raises:
        SaturationError: the model cannot be traced, an op has no limit rule, or the limit is not
            determined on the example inputs; messages name the node, op and module.

    >>> _ = torch.manual_seed(0)
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> x = torch.randn(4, 2)
    >>> sat = saturate(net, x)
    >>> out = sat(x)
    >>> out.degrees                        # two weight layers: f(x; cθ) ≈ c² · out.value
    2.0
    >>> big = torch.func.functional_call(net, {k: 1e4 * p for k, p in net.named_parameters()}, (x,))
    >>> bool((big / 1e8 - out.value).abs().max() < 1e-3)   # what is left is O(1/c)
    True
    """
    saturated = SaturatedModel(model, settings or Settings())
    saturated(*args, **kwargs)
    return saturated
