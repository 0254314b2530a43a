"""The weights of a model placed by accelerate, read one tensor at a time for the exact limit.

accelerate keeps an offloaded module's parameters on the meta device and reads them from its
hook's weights map (the checkpoint's safetensors, memory-mapped, or the offload folder) as the
module runs. The exact limit does not run the modules: it interprets the model's exported graph
(:class:`saturated.saturate.SaturatedModel`), so :class:`PlacedWeights` hands it the same weights
map as a mapping read on demand: each tensor is read when the graph first needs it and dropped
after its last use, and at most the tensors of the nodes in flight are in memory besides those
accelerate keeps there. The graph is exported with the hooks lifted and the offloaded tensors
replaced by fake ones (shapes and dtypes, no storage), which ``torch.export`` traces as it would
the real weights; everything is put back when the export returns, also when it raises.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from empirical.errors import EmpiricalError
from saturated.errors import SaturationError

__all__ = ["PlacedWeights"]


def _hooks(module: nn.Module) -> list[Any]:
    """accelerate's hooks on ``module`` (a SequentialHook holds several)."""
    hook = getattr(module, "_hf_hook", None)
    return [] if hook is None else list(getattr(hook, "hooks", None) or [hook])


class _Offloaded:
    """Where an offloaded tensor is: its hook's weights map, its key there, and its dtype and device
    in the model (accelerate casts to the model's dtype as it loads; so does :meth:`read`)."""

    __slots__ = ("device", "dtype", "key", "weights_map")

    def __init__(self, weights_map: Any, key: str, dtype: torch.dtype, device: torch.device) -> None:
        self.weights_map, self.key, self.dtype, self.device = weights_map, key, dtype, device

    def read(self) -> torch.Tensor:
        value = self.weights_map[self.key]
        return value.to(device=self.device, dtype=self.dtype if value.is_floating_point() else value.dtype)


def _locate(model: nn.Module, name: str, tensor: torch.Tensor) -> _Offloaded:
    """The weights map holding the meta tensor ``name``: that of the nearest module on its path
    whose hook offloads (accelerate hooks a block, or each of its leaves)."""
    parts = name.split(".")
    for depth in range(len(parts) - 1, -1, -1):
        module = model.get_submodule(".".join(parts[:depth]))
        for hook in _hooks(module):
            if getattr(hook, "offload", False) and getattr(hook, "weights_map", None) is not None:
                device = getattr(hook, "execution_device", None)
                return _Offloaded(hook.weights_map, ".".join(parts[depth:]), tensor.dtype,
                                  torch.device("cpu" if device is None else device))
    raise EmpiricalError(f"the tensor {name!r} of {type(model).__name__} is on the meta device and no "
                         "accelerate hook offloads it; expected a model loaded with --device-map, "
                         "--max-memory or --offload-folder, or one with all its weights")


class _Tensors(Mapping[str, torch.Tensor]):
    """Name → tensor: those in memory as they are, offloaded ones read from disk at each lookup
    (the caller keeps a tensor only while it needs it). Parameters are checked finite as read."""

    def __init__(self, places: dict[str, torch.Tensor | _Offloaded], parameters: set[str]) -> None:
        self._places, self._parameters = places, parameters

    def __getitem__(self, name: str) -> torch.Tensor:
        place = self._places[name]
        value = place.read() if isinstance(place, _Offloaded) else place
        if name in self._parameters and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise SaturationError(f"parameter '{name}' has non-finite entries; expected finite θ")
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._places)

    def __len__(self) -> int:
        return len(self._places)


class PlacedWeights:
    """A :class:`saturated.sources.WeightSource` for a model placed by accelerate: its tensors
    under every qualified name (tied ones under each), offloaded ones read from accelerate's
    weights map when looked up.

    Raises:
        EmpiricalError: a tensor on the meta device that no accelerate hook offloads.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        named = [*model.named_buffers(remove_duplicate=False),
                 *model.named_parameters(remove_duplicate=False)]
        self._places: dict[str, torch.Tensor | _Offloaded] = {
            name: _locate(model, name, tensor) if tensor.is_meta else tensor for name, tensor in named}
        self._parameters = {name for name, _ in model.named_parameters(remove_duplicate=False)}

    def tensors(self) -> Mapping[str, torch.Tensor]:
        return _Tensors(self._places, self._parameters)

    @contextmanager
    def exporting(self) -> Iterator[None]:
        """The model as ``torch.export`` should trace it: accelerate's forward wrappers lifted (they
        would stream weights in), and each offloaded tensor a fake one of its shape, dtype and
        execution device (meta tensors do not mix with the inputs' device in a trace). A tensor
        tied under several names stays one tensor."""
        lifted = [(module, vars(module)["forward"]) for module in self.model.modules()
                  if hasattr(module, "_hf_hook") and "forward" in vars(module)]
        fake_mode = FakeTensorMode()
        fakes: dict[int, torch.Tensor] = {}
        swapped: list[tuple[dict[str, Any], str, torch.Tensor]] = []
        try:
            for module, _ in lifted:
                del module.forward  # the class's own forward again
            for prefix, module in self.model.named_modules(remove_duplicate=False):
                for table in (module._parameters, module._buffers):
                    for leaf, tensor in table.items():
                        if tensor is None or not tensor.is_meta:
                            continue
                        if id(tensor) not in fakes:
                            fakes[id(tensor)] = self._fake(f"{prefix}.{leaf}" if prefix else leaf, tensor,
                                                           fake_mode)
                        swapped.append((table, leaf, tensor))
                        table[leaf] = fakes[id(tensor)]
            yield
        finally:
            for table, leaf, tensor in reversed(swapped):
                table[leaf] = tensor
            for module, forward in lifted:
                module.forward = forward

    def _fake(self, name: str, tensor: torch.Tensor, mode: FakeTensorMode) -> torch.Tensor:
        place = self._places.get(name)
        device = place.device if isinstance(place, _Offloaded) else torch.device("cpu")
        with mode:
            fake = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
        return nn.Parameter(fake, requires_grad=False) if isinstance(tensor, nn.Parameter) else fake
