"""What every JSON result records so that it can be reproduced: model, configuration, versions."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

import torch
from torch import nn

from empirical.models.formats import LoadedWeights

__all__ = ["model_record", "versions"]


def versions() -> dict[str, str]:
    """Versions of Python and of the libraries a measurement depends on."""
    found = {"python": platform.python_version()}
    for package in ("normsat", "torch", "transformers", "numpy", "sympy"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def model_record(model: nn.Module) -> dict[str, Any]:
    """Class, parameter count, dtype, device, (for Hugging Face models) the full configuration, and
    (for models loaded from a folder) the weight files read and the checkpoint keys left out."""
    first = next(model.parameters(), None)
    config = getattr(model, "config", None)
    weights = getattr(model, "normsat_weights", None)  # set by empirical.models.loading.load_model
    return {
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(first.dtype if first is not None else torch.get_default_dtype()),
        "device": str(first.device if first is not None else "cpu"),
        "config": config.to_dict() if config is not None and hasattr(config, "to_dict") else None,
        "weights": weights.to_dict() if isinstance(weights, LoadedWeights) else None,
    }
