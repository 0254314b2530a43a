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

Reading a graph costs what ``torch.export.load`` spends rebuilding every node's example value, which
for a dynamic graph means parsing each size's symbolic expression (seconds for a six-layer model,
as long as the export). Nothing here reads the example values of inner nodes (the limit reads
those of the inputs and outputs, for their symbolic batch and lengths), so they are stored with
their sizes in the example the graph was exported for (:func:`_concrete_inner_values`), and a
load then parses only the inputs' and outputs' expressions, and builds the inner values' fake
tensors without a dispatch each (:func:`_concrete_meta`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import tempfile
import threading
import types
import typing
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch._export.serde import serialize
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree

import homogeneity.tracing
from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model

__all__ = ["cache_dir", "cached_export", "stored_key"]


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
    pattern: dict[int, str] = {}
    inputs = [(str(leaf.dtype), _dynamic_sizes(leaf.shape, pattern) if dynamic else tuple(leaf.shape),
               str(leaf.device)) if isinstance(leaf, torch.Tensor) else repr(leaf) for leaf in leaves]
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


def _dynamic_sizes(shape: torch.Size, pattern: dict[int, str]) -> tuple[int | str, ...]:
    """An input's sizes as far as a dynamic graph depends on them: a size 1 stays (the exporter
    fixes it, see :func:`homogeneity.tracing.positional`), and each other size is named after the
    first input dimension of the call that had it (``pattern``, shared by the call's inputs), as
    inputs of equal lengths share a symbol. A graph exported from one sentence (its batch fixed)
    is then not read for a batch.

    >>> pattern = {}
    >>> _dynamic_sizes(torch.Size([8, 45]), pattern), _dynamic_sizes(torch.Size([8, 1]), pattern)
    (('d0', 'd1'), ('d0', 1))
    """
    return tuple(1 if size == 1 else pattern.setdefault(int(size), f"d{len(pattern)}") for size in shape)


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


def _concrete(size: Any) -> int | None:
    """A size as the example the graph was exported for had it (None: data-dependent, no example)."""
    return size.node.hint if isinstance(size, torch.SymInt) else int(size)


def _concrete_value(value: Any) -> Any:
    """An inner node's example value with concrete sizes, as a tensor on the meta device (made
    without the fake-tensor dispatch, a hundredth of the cost: only its sizes, strides and dtype
    are stored); itself where its sizes are concrete already or one has no example."""
    if not isinstance(value, FakeTensor):
        return value
    sizes = (*value.shape, *value.stride())
    known = [_concrete(size) for size in sizes]
    concrete = [size for size in known if size is not None]
    if len(concrete) < len(known) or not any(isinstance(size, torch.SymInt) for size in sizes):
        return value
    return torch.empty_strided(concrete[:value.dim()], concrete[value.dim():], dtype=value.dtype,
                               device="meta", requires_grad=value.requires_grad)


@contextlib.contextmanager
def _concrete_inner_values(program: torch.export.ExportedProgram) -> Iterator[None]:
    """Within the block, the example values of ``program``'s inner nodes (neither inputs nor
    outputs) have the sizes of the example it was exported for instead of symbolic ones (on the
    meta device, see :func:`_concrete_value`): what a load reads of them is parsed in a fraction of
    the time. The graph's own values are restored on exit (the program in memory keeps its
    symbols)."""
    output = next(node for node in program.graph.nodes if node.op == "output")
    outputs = {arg for arg in pytree.tree_leaves(output.args) if isinstance(arg, torch.fx.Node)}
    saved: dict[torch.fx.Node, Any] = {}
    try:
        for node in program.graph.nodes:
            if node.op in ("placeholder", "output") or node in outputs or "val" not in node.meta:
                continue
            value = node.meta["val"]
            if isinstance(value, torch.Tensor | list | tuple):
                saved[node] = value
                node.meta["val"] = pytree.tree_map(_concrete_value, value)
        yield
    finally:
        for node, value in saved.items():
            node.meta["val"] = value


class _SchemaReader:
    """torch's graph reader's conversion of the stored JSON into its schema's dataclasses
    (``serialize._dict_to_dataclass``), with the work that depends on the class alone (resolving
    it, its origin, its fields and their type hints) done once per class instead of once per object:
    a graph holds tens of thousands of them, and that work was most of a static graph's load. The
    objects built are those torch's own function builds (same branches, same order)."""

    def __init__(self) -> None:
        self._plans: dict[Any, Any] = {}

    def __call__(self, cls: Any, data: Any) -> Any:
        plan = self._plans.get(cls)
        if plan is None:
            plan = self._plans[cls] = self._plan(cls)
        return plan(data)

    def _plan(self, cls: Any) -> Any:
        cls = serialize._resolve_schema_cls(cls)
        if isinstance(cls, str):
            raise AssertionError(f"Unresolved class type: '{cls}'.")
        origin = typing.get_origin(cls)
        if origin is typing.Annotated:
            inner = cls.__origin__
            return lambda data: self(inner, data)
        if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(cls):
            arguments = typing.get_args(cls)
            if len(arguments) != 2:
                raise AssertionError(f"expected 2 type args, got {len(arguments)}")
            return lambda data: None if data is None else self(arguments[0], data)
        if isinstance(cls, type) and issubclass(cls, serialize._Union):
            hints = typing.get_type_hints(cls, globalns=vars(serialize.schema))

            def union(data: Any) -> Any:
                if not isinstance(data, dict) or len(data) != 1:
                    raise AssertionError(f"expected a dict with 1 key, got {data!r}")
                ((name, value),) = data.items()
                return cls.create(**{name: self(hints[name], value)})
            return union
        if dataclasses.is_dataclass(cls):
            hints = typing.get_type_hints(cls, globalns=vars(serialize.schema))
            fields = [(field.name, hints[field.name]) for field in dataclasses.fields(cls)]
            make: Any = cls
            # keys the dataclass does not define are ignored, as torch does (forward compatibility)
            return lambda data: make(**{name: self(hint, data[name])
                                        for name, hint in fields if name in data})
        arguments = typing.get_args(cls)

        def other(data: Any) -> Any:
            if isinstance(data, list):
                return [self(arguments[0], item) for item in data] if data else data
            if isinstance(data, dict):
                return {key: self(arguments[1], value) for key, value in data.items()}
            return float(data) if cls is float else data
        return other


# Held while torch's serializer has one of its functions swapped (a read or a save), so that
# concurrent threads do not restore each other's swaps.
_PATCHING = threading.Lock()

# The cache key of each program cached_export returned from (or wrote to) the cache directory.
_KEYS: weakref.WeakKeyDictionary[torch.export.ExportedProgram, str] = weakref.WeakKeyDictionary()


def stored_key(program: torch.export.ExportedProgram) -> str | None:
    """The cache key under which :func:`cached_export` keeps ``program`` (None: not kept on disk).
    What is learnt about running the graph can be kept beside it under the same key."""
    return _KEYS.get(program)


def _concrete_meta(read: Any) -> Any:
    """``GraphModuleDeserializer.deserialize_tensor_meta`` (``read``), building the example value of
    a tensor whose sizes and strides are all plain integers (every inner node's, see
    :func:`_concrete_inner_values`) as a fake tensor around a meta tensor directly: the same
    fake tensor, without a dispatch through the fake mode for each of the graph's hundreds of
    nodes (a quarter of a T5 graph's load). Symbolic ones (the inputs' and outputs') are read as
    torch reads them."""

    def deserialize(self: Any, tensor_meta: Any) -> Any:
        stored = [*tensor_meta.sizes, *tensor_meta.strides]
        if not all(value.type == "as_int" for value in stored):  # read once, by torch
            return read(self, tensor_meta)
        sizes = [self.deserialize_sym_int(size) for size in tensor_meta.sizes]
        strides = [self.deserialize_sym_int(stride) for stride in tensor_meta.strides]
        meta = torch.empty_strided(sizes, strides, device="meta", requires_grad=tensor_meta.requires_grad,
                                   dtype=serialize._SERIALIZE_TO_TORCH_DTYPE[tensor_meta.dtype])
        return FakeTensor(self.fake_tensor_mode, meta, serialize.deserialize_device(tensor_meta.device))
    return deserialize


def _load(path: Path) -> torch.export.ExportedProgram:
    """``torch.export.load(path)``, with the stored JSON converted by :class:`_SchemaReader` and
    the inner nodes' example values built by :func:`_concrete_meta`, where torch's reader is the
    one they were written for (else by torch's own functions)."""
    with _PATCHING:
        known = all(hasattr(serialize, name) for name in
                    ("_dict_to_dataclass", "_resolve_schema_cls", "_Union", "schema",
                     "_SERIALIZE_TO_TORCH_DTYPE", "deserialize_device", "GraphModuleDeserializer"))
        if not known or serialize._dict_to_dataclass.__module__ != serialize.__name__ \
                or not hasattr(serialize.GraphModuleDeserializer, "deserialize_tensor_meta"):
            return torch.export.load(path)
        reader: Any = serialize.GraphModuleDeserializer
        with _swapped(serialize, "_dict_to_dataclass", _SchemaReader()), \
                _swapped(reader, "deserialize_tensor_meta", _concrete_meta(reader.deserialize_tensor_meta)):
            return torch.export.load(path)


def _save(program: torch.export.ExportedProgram, file: Any) -> None:
    """``torch.export.save(program, file)`` without the check that the serialized program has a
    canonical form: torch computes that form (a deep copy of the whole serialized graph, its nodes
    sorted and renamed) and drops it: T5's save took 1.22 s with it, 0.33 s without. The bytes
    written are the same."""
    with _PATCHING:
        if not hasattr(serialize, "canonicalize"):
            torch.export.save(program, file)
            return
        with _swapped(serialize, "canonicalize", lambda ep, constants=None: ep):
            torch.export.save(program, file)


@contextlib.contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is ``value`` within the block, and what it was again after it (one of
    torch's serializer's functions, swapped under :data:`_PATCHING`)."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


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
            program = _load(path)
            _KEYS[program] = key
            return program
    try:
        program = export_model(model, args, kwargs, dynamic=dynamic)
    except HomogeneityError as err:
        message = str(err).encode("utf-8")
        with contextlib.suppress(OSError):  # an unwritable cache only costs the export next time
            _write(refused, lambda file: file.write(message))
        raise
    with contextlib.suppress(Exception), _concrete_inner_values(program):  # else exported next time
        _write(path, lambda file: _save(_without_weights(program), file))
        _KEYS[program] = key
    return program
