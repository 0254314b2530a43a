"""Weights of a local Hugging Face model folder, in every common format, loaded into a bare model.

Formats: ``model.safetensors``, sharded safetensors (``model.safetensors.index.json``),
``pytorch_model.bin`` and its sharded index, all read by
:func:`read_state_dict` (``torch.load(weights_only=True)`` for pickles).
Checkpoints of task models (``BertForMaskedLM``: keys under ``bert.``) load into the bare model by
dropping the base model's prefix; the task head's keys are left out. Every parameter must receive a
value: a model that would keep random weights is refused.

State dicts readable by :func:`read_state_dict` and :func:`iter_state_dict`:

- a ``.safetensors`` file;
- a ``.bin`` / ``.pt`` / ``.pth`` (or any other) file saved with ``torch.save``, read with
  ``torch.load(weights_only=True)`` only: a pickle that needs code to load is refused, normsat
  never unpickles code. A dict wrapping the weights under ``state_dict`` or ``model`` (as many
  training scripts save them) is unwrapped;
- a Hugging Face model folder: ``model.safetensors``, sharded safetensors with
  ``model.safetensors.index.json``, ``pytorch_model.bin`` or its sharded index (the files named by
  :func:`weight_files`).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from empirical.errors import EmpiricalError
from empirical.models.keys import to_model_keys
from empirical.validation import read_json_document
from homogeneity.validation import describe

__all__ = ["WEIGHT_FILES", "LoadedWeights", "iter_state_dict", "load_weights", "read_state_dict",
           "read_weights", "weight_files"]

WEIGHT_FILES = (
    "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
"""The weight files looked for, in order of preference (safetensors first)."""

_SHOWN = 5  # names listed in a message before "and N more"


@dataclass(frozen=True)
class LoadedWeights:
    """What loading did: the files read, the keys left out (a task head), the pooler removed."""

    files: tuple[Path, ...]
    unused: tuple[str, ...]
    removed_pooler: bool

    def to_dict(self) -> dict[str, object]:
        """JSON-ready record for provenance (the unused keys capped at 20, with their count)."""
        return {"files": [str(path) for path in self.files], "n_unused_keys": len(self.unused),
                "unused_keys": list(self.unused[:20]), "removed_pooler": self.removed_pooler}


def _listing(names: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


_INDEX_MAX_BYTES = 64 * 2**20
"""The longest shard index read (one line per tensor: a model of 100,000 tensors has about 10 MB)."""


def weight_files(folder: Path) -> tuple[Path, ...]:
    """The files holding the folder's weights (the shards of an index), in the preferred format."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            return (path,)
        index = read_json_document(path, "shard index", max_bytes=_INDEX_MAX_BYTES)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(
                isinstance(shard, str) and shard == Path(shard).name for shard in weight_map.values()):
            raise EmpiricalError(f"expected {path} to be a shard index (JSON with a 'weight_map' of "
                                 f"key → file name in {folder}), got {describe(index)}")
        shards = sorted(set(weight_map.values()))
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise EmpiricalError(f"the shard index {path} names files that do not exist: {_listing(missing)}")
        return tuple(folder / shard for shard in shards)
    raise EmpiricalError(
        f"expected model weights in {folder} (one of {', '.join(WEIGHT_FILES)}), found none; "
        "pass random_init=True (CLI: --random-init) to measure the architecture with fresh weights"
    )


_WRAPPERS = ("state_dict", "model")  # keys under which training scripts nest the weights


def _files(path: Path) -> tuple[Path, ...]:
    if path.is_dir():
        return weight_files(path)
    if not path.is_file():
        raise EmpiricalError(f"expected a checkpoint file or a model folder, got {path}, which does "
                             "not exist")
    return (path,)


def _iter_safetensors(path: Path) -> Iterator[tuple[str, torch.Tensor]]:
    _start(path, "a safetensors file")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            for name in handle.keys():  # noqa: SIM118  (safe_open handles are not iterable)
                yield name, handle.get_tensor(name)
    except (SafetensorError, OSError) as err:
        raise EmpiricalError(f"expected {path} to be a safetensors file, but it cannot be read: "
                             f"{err}") from err


def _tensors(loaded: Any, path: Path) -> Mapping[str, torch.Tensor]:
    """The name → tensor mapping in what ``torch.load`` returned, unwrapping one level of nesting."""
    if isinstance(loaded, Mapping):
        for key in _WRAPPERS:
            if isinstance(loaded.get(key), Mapping):
                loaded = loaded[key]
                break
    if not isinstance(loaded, Mapping):
        raise EmpiricalError(f"expected {path} to hold a state dict (name → tensor), got "
                             f"{type(loaded).__name__}")
    wrong = [str(name) for name, value in loaded.items() if not isinstance(value, torch.Tensor)]
    if wrong:
        raise EmpiricalError(f"expected {path} to hold a state dict (name → tensor), but "
                             f"{', '.join(wrong[:5])} {'is' if len(wrong) == 1 else 'are'} not tensors")
    return loaded


_REFUSED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


_LFS_POINTER = b"version https://git-lfs"
_CHECKPOINT = "a checkpoint saved with torch.save or safetensors"


def _start(path: Path, what: str) -> bytes:
    """The file's first bytes, after refusing an empty file and a Git LFS pointer (a clone made
    without ``git lfs``)."""
    try:
        with path.open("rb") as file:
            head = file.read(len(_LFS_POINTER))
    except OSError as err:
        raise EmpiricalError(f"expected {path} to be {what}, but it cannot be read: {err}") from err
    if not head:
        raise EmpiricalError(f"expected {path} to be {what}, but it is empty")
    if head == _LFS_POINTER:
        raise EmpiricalError(f"{path} is a Git LFS pointer, not the weights: fetch them first "
                             "(git lfs pull in the model's folder)")
    return head


def _load_pickle(path: Path) -> Mapping[str, torch.Tensor]:
    # A torch.save file is a zip archive or, in the legacy format, a pickle (protocol 2 or later);
    # anything else would reach torch's unpickler, whose errors then blame code or a missing key.
    head = _start(path, _CHECKPOINT)
    if not head.startswith((b"PK", b"\x80")):
        raise EmpiricalError(f"expected {path} to be {_CHECKPOINT}, but it is neither a zip archive nor "
                             f"a pickle (it starts with {head[:8]!r})")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # torch's message spans a dozen lines with terminal escape codes and advises loading with
        # weights_only=False; keep only what it refused (a class or function to import).
        refused = _REFUSED_GLOBAL.search(str(err))
        what = f" (it refers to {refused.group(1)})" if refused else ""
        raise EmpiricalError(
            f"normsat will not unpickle code: {path} is a pickle that needs code to load{what}, "
            f"which torch.load(weights_only=True) refuses; save a state dict "
            f"(torch.save(model.state_dict(), ...)) or safetensors instead"
        ) from None
    except (RuntimeError, OSError, EOFError, ValueError) as err:
        raise EmpiricalError(f"expected {path} to be {_CHECKPOINT}, but it cannot be read: {err}") from err
    return _tensors(loaded, path)


def iter_state_dict(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` of a checkpoint file or model folder, on the CPU.

    Safetensors are read one tensor at a time; a ``torch.save`` file is read whole (pickles cannot
    be read in parts); a sharded checkpoint one shard at a time. So a consumer that keeps only
    what it needs holds at most one pickle file in memory.

    Raises:
        EmpiricalError: a missing path, a folder without weights, an unreadable file, a pickle
            that would run code, or a file holding something other than tensors.
    """
    for file in _files(Path(path)):
        if file.suffix == ".safetensors":
            yield from _iter_safetensors(file)
        else:
            yield from _load_pickle(file).items()


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint file or model folder (see the module docstring for formats).

    >>> import tempfile, torch, safetensors.torch
    >>> folder = Path(tempfile.mkdtemp())
    >>> safetensors.torch.save_file({"w": torch.ones(2, 3)}, folder / "model.safetensors")
    >>> {name: tuple(t.shape) for name, t in read_state_dict(folder).items()}
    {'w': (2, 3)}
    """
    return dict(iter_state_dict(path))



def read_weights(folder: str | Path) -> tuple[dict[str, torch.Tensor], tuple[Path, ...]]:
    """Every tensor of the folder's checkpoint, and the files it came from."""
    files = weight_files(Path(folder))
    return read_state_dict(folder), files


def _matched(model: nn.Module, state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The checkpoint's tensors under the bare model's names, and the keys that have no place in it."""
    expected = set(model.state_dict())
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    matched: dict[str, torch.Tensor] = {}
    unused: list[str] = []
    for key, tensor in state.items():
        if key in expected:
            matched[key] = tensor
        elif prefix != "." and key.startswith(prefix) and key[len(prefix):] in expected:
            matched[key[len(prefix):]] = tensor
        else:
            unused.append(key)
    return matched, unused


def _aliases(model: nn.Module) -> dict[str, set[str]]:
    """Every parameter's names: a tied parameter (T5's ``shared`` and its encoder's and decoder's
    ``embed_tokens``) is loaded by a checkpoint that holds it under any of them."""
    first: dict[int, str] = {}
    names: dict[str, set[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(first.setdefault(id(parameter), name), set()).add(name)
    return names


def load_weights(model: nn.Module, state: dict[str, torch.Tensor], source: str,
                 files: tuple[Path, ...] = ()) -> LoadedWeights:
    """Copy ``state`` into ``model`` and refuse if any parameter keeps its initial value.

    A model built with its parameters on the meta device (no memory, no initialization) takes the
    checkpoint's tensors themselves, in their own dtype, instead of copies (tied parameters tied
    again): loading a 16-bit checkpoint never holds a float32 model besides it.

    A missing pooler (task checkpoints such as masked-LM ones have none) is removed from the bare
    model instead: it does not feed the hidden states, and a random one must not be measured.
    Per-expert keys and renamed keys of older versions are mapped first
    (:func:`empirical.models.keys.to_model_keys`); a tied parameter is loaded under any of its names.

    Raises:
        EmpiricalError: a parameter the checkpoint does not provide, or a tensor of the wrong shape.
    """
    matched, unused = _matched(model, to_model_keys(model, state))
    missing = [name for name, aliases in _aliases(model).items() if not aliases & set(matched)]
    removed_pooler = False
    if missing and all(name.startswith("pooler.") for name in missing) and \
            isinstance(getattr(model, "pooler", None), nn.Module):
        model.pooler = None  # type: ignore[assignment]  # Hugging Face models skip a None pooler
        removed_pooler, missing = True, []
    if missing:
        raise EmpiricalError(
            f"the checkpoint {source} has no values for {len(missing)} parameters of "
            f"{type(model).__name__} ({_listing(missing)}), which would keep their random "
            f"initialization; its keys look like {_listing(sorted(state))}. Expected a checkpoint of "
            "this architecture (with or without a task head)"
        )
    wrong = [f"{name} {tuple(t.shape)} (model: {tuple(model.state_dict()[name].shape)})"
             for name, t in matched.items() if t.shape != model.state_dict()[name].shape]
    if wrong:
        raise EmpiricalError(
            f"the checkpoint {source} does not fit {type(model).__name__}: tensors of the wrong shape "
            f"for {_listing(wrong)}; does config.json belong to these weights?"
        )
    if any(p.is_meta for p in model.parameters()):
        _assign(model, matched)
    else:
        model.load_state_dict(matched, strict=False)
    return LoadedWeights(files, tuple(unused), removed_pooler)


def _assign(model: nn.Module, matched: dict[str, torch.Tensor]) -> None:
    """The checkpoint's tensors become ``model``'s parameters (every one of them is in ``matched``
    under one of its names); buffers are copied into the model's own (their dtype stays)."""
    groups = _aliases(model)
    parameters = {name for names in groups.values() for name in names}
    model.load_state_dict({k: v for k, v in matched.items() if k in parameters}, strict=False, assign=True)
    model.load_state_dict({k: v for k, v in matched.items() if k not in parameters}, strict=False)
    for names in groups.values():
        shared = model.get_parameter(min(name for name in names if name in matched))
        for name in names:
            owner, _, leaf = name.rpartition(".")
            model.get_submodule(owner)._parameters[leaf] = shared
