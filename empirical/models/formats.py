"""Weights of a local Hugging Face model folder, in every common format, loaded into a bare model.

Formats: ``model.safetensors``, sharded safetensors (``model.safetensors.index.json``),
``pytorch_model.bin`` and its sharded index, all read by
:func:`empirical.checkpoints.read_state_dict` (``torch.load(weights_only=True)`` for pickles).
Checkpoints of task models (``BertForMaskedLM``: keys under ``bert.``) load into the bare model by
dropping the base model's prefix; the task head's keys are left out. Every parameter must receive a
value: a model that would keep random weights is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["WEIGHT_FILES", "LoadedWeights", "load_weights", "read_weights", "weight_files"]

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


def weight_files(folder: Path) -> tuple[Path, ...]:
    """The files holding the folder's weights (the shards of an index), in the preferred format."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            return (path,)
        try:
            weight_map = json.loads(path.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted({str(shard) for shard in weight_map.values()})
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise EmpiricalError(
                f"expected {path} to be a shard index (JSON with a 'weight_map' of key → file), "
                f"but it cannot be read: {err}"
            ) from err
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise EmpiricalError(f"the shard index {path} names files that do not exist: {_listing(missing)}")
        return tuple(folder / shard for shard in shards)
    raise EmpiricalError(
        f"expected model weights in {folder} (one of {', '.join(WEIGHT_FILES)}), found none; "
        "pass random_init=True (CLI: --random-init) to measure the architecture with fresh weights"
    )


def read_weights(folder: str | Path) -> tuple[dict[str, torch.Tensor], tuple[Path, ...]]:
    """Every tensor of the folder's checkpoint, and the files it came from."""
    # Imported here: empirical.checkpoints (one reader for every checkpoint) imports this module.
    from empirical.checkpoints import read_state_dict

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


def load_weights(model: nn.Module, state: dict[str, torch.Tensor], source: str,
                 files: tuple[Path, ...] = ()) -> LoadedWeights:
    """Copy ``state`` into ``model`` and refuse if any parameter keeps its initial value.

    A missing pooler (task checkpoints such as masked-LM ones have none) is removed from the bare
    model instead: it does not feed the hidden states, and a random one must not be measured.

    Raises:
        EmpiricalError: a parameter the checkpoint does not provide, or a tensor of the wrong shape.
    """
    matched, unused = _matched(model, state)
    loaded = set(matched)
    missing = [name for name, _ in model.named_parameters() if name not in loaded]
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
    model.load_state_dict(matched, strict=False)
    return LoadedWeights(files, tuple(unused), removed_pooler)
