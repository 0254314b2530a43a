"""Where a :class:`~saturated.saturate.SaturatedModel` reads the model's tensors from.

By default from the model itself. A model whose weights are not all in memory (placed by a
big-model loader that streams layers from disk) hands the limit a :class:`WeightSource`
instead: a mapping that reads each tensor when the graph first needs it (the interpreter drops
it after its last use, :class:`~saturated.interpreter.LimitInterpreter`), and a context in which
the model exports without reading its weights' values.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol

import torch

__all__ = ["WeightSource"]


class WeightSource(Protocol):
    """The model's parameters and buffers by every qualified name (tied ones under each), read on
    demand, and the state in which ``torch.export`` traces the model without their values."""

    def tensors(self) -> Mapping[str, torch.Tensor]:
        """Name → tensor, each read when it is looked up (and checked finite as it is read)."""
        ...

    def exporting(self) -> AbstractContextManager[None]:
        """Within the block, the model exports as it would with its weights in memory."""
        ...
