"""Exported graphs kept on disk, so that a model is exported once, not once per process.

``torch.export`` of a Hugging Face model costs seconds (most of it reasoning about dynamic shapes),
far more than a limit call on a batch. :func:`cached_export` keeps each graph in a cache
directory under a key made of everything the graph depends on besides the weights: the model's
class, its configuration, its parameters' and buffers' names, shapes and dtypes, its modules'
classes, the inputs' structure (their shapes too for a per-shape graph), whether the export is
dynamic, the library versions and the source of the module that exports
(:mod:`homogeneity.tracing`). The weights are not stored: the graph is saved with its parameters
and buffers on the meta device, and every interpretation reads the model's own
(:func:`~saturated.interpreter.run_terms`). Constants the graph lifts are stored with it.

Only models with a Hugging Face ``config`` are cached (their configuration says what their
forward does); any other module is exported every time. The directory is ``$NORMSAT_CACHE_DIR``
if set (an empty value turns the cache off), else ``$XDG_CACHE_HOME/normsat/exports`` or
``~/.cache/normsat/exports``. A file that cannot be read (partly written, corrupt, from another
version) is exported again and replaced; files are written to a temporary name and renamed, so
a reader never sees half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

import homogeneity.tracing
from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model

__all__ = ["cache_dir", "cached_export"]


def cache_dir() -> Path | None:
    """Where exported graphs are kept (None: nowhere, with ``NORMSAT_CACHE_DIR`` set empty).
    """
    chosen = os.environ.get("NORMSAT_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "normsat" / "exports"


def _versions() -> dict[str, str]:
    found = {"torch": torch.__version__,
             "tracing": hashlib.sha256(inspect.getsource(homogeneity.tracing).encode()).hexdigest()}
    try:
        import transformers
        found["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    return found


def _key(model: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any], dynamic: bool) -> str | None:
    """The cache key of this export (None: not cached, the model has no configuration)."""
    config = getattr(model, "config", None)
    to_json = getattr(config, "to_json_string", None)
    if to_json is None:
        return None
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    inputs = [(str(leaf.dtype), leaf.dim() if dynamic else tuple(leaf.shape), str(leaf.device))
              if isinstance(leaf, torch.Tensor) else repr(leaf) for leaf in leaves]
    record = {
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "config": to_json(use_diff=False),
        "tensors": [(name, tuple(t.shape), str(t.dtype)) for name, t in
                    [*model.named_parameters(), *model.named_buffers()]],
        "modules": [(name, f"{type(m).__module__}.{type(m).__qualname__}")
                    for name, m in model.named_modules()],
        "inputs": [str(spec), inputs],
        "dynamic": dynamic,
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def _without_weights(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``program`` with its parameters and buffers on the meta device (the model supplies them)."""
    def meta(value: torch.Tensor) -> torch.Tensor:
        empty = value.detach().to("meta")
        return nn.Parameter(empty, requires_grad=value.requires_grad) if isinstance(value, nn.Parameter) \
            else empty
    # A shallow copy that shares the graph (saving reads it, never changes it).
    light = object.__new__(type(program))
    light.__dict__.update(program.__dict__)
    light._state_dict = {name: meta(value) for name, value in program.state_dict.items()}
    return light


def _write(path: Path, save: Any) -> None:
    """Write ``path`` through ``save(file)`` at a temporary name, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".part")
    try:
        with os.fdopen(handle, "wb") as file:
            save(file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def cached_export(model: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                  dynamic: bool = False) -> torch.export.ExportedProgram:
    """:func:`homogeneity.tracing.export_model`, read from the cache when this export was made
    before (in any process) and stored there otherwise; the graph's parameters and buffers are on
    the meta device when it comes from the cache. A dynamic export that failed is remembered too,
    and fails again at once.

    Raises:
        HomogeneityError: as :func:`~homogeneity.tracing.export_model`.

    >>> program = cached_export(nn.Linear(2, 1), (torch.randn(3, 2),), {})  # no config: not stored
    >>> sorted(program.state_dict), program.state_dict["weight"].device.type
    (['bias', 'weight'], 'cpu')
    """
    root = cache_dir()
    key = None if root is None else _key(model, args, kwargs, dynamic)
    if root is None or key is None:
        return export_model(model, args, kwargs, dynamic=dynamic)
    path, refused = root / f"{key}.pt2", root / f"{key}.refused"
    if refused.is_file():
        raise HomogeneityError(refused.read_text(encoding="utf-8"))
    if path.is_file():
        with contextlib.suppress(Exception):  # any unreadable file is made again
            return torch.export.load(path)
    try:
        program = export_model(model, args, kwargs, dynamic=dynamic)
    except HomogeneityError as err:
        message = str(err).encode("utf-8")
        with contextlib.suppress(OSError):  # an unwritable cache only costs the export next time
            _write(refused, lambda file: file.write(message))
        raise
    with contextlib.suppress(Exception):  # a graph that cannot be saved is exported next time
        _write(path, lambda file: torch.export.save(_without_weights(program), file))
    return program
