"""The resume file of an unfinished ``normsat train`` run: everything its checkpoint does not hold.

A checkpoint holds the model's parameters. Continuing the run exactly also needs the optimizer's
state (AdamW's moments, Adafactor's factored second moments, their step counts), the learning-rate
schedule's position, the batch generator's state, the parameters one step before the checkpoint
(the per-step tracker's cosine of the next step is taken against them) and the records measured so
far. :func:`save_state` writes them as one safetensors file (tensors, and the rest as JSON in its
metadata; no pickle), atomically, beside the checkpoints; :func:`load_state` reads it back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors
import safetensors.torch
import torch

from empirical.errors import EmpiricalError
from empirical.outputs import atomic_path
from empirical.training.choices import RESUME_FILE
from homogeneity.untrusted import parse_json
from homogeneity.validation import check_integer, describe

__all__ = ["RESUME_FILE", "ResumeState", "load_state", "resume_path", "save_state"]

_KEY = "normsat.resume"
_GENERATOR = "generator"
_PREVIOUS = "tracker.previous"
_OPTIMIZER = "optimizer."


def resume_path(out: str | Path) -> Path:
    """Where the resume file of a run folder lives."""
    return Path(out) / RESUME_FILE


@dataclass
class ResumeState:
    """What :func:`load_state` read: the step of the last checkpoint and what continues from it.

    Attributes:
        step: the last checkpoint's step; the run continues with step ``step + 1``.
        document: the run's ``train.json`` document as of that checkpoint (config, records,
            checkpoints, evaluations, …).
        optimizer: ``optimizer.state_dict()`` of that step. schedule: ``LRScheduler.state_dict()``.
        generator: the batch generator's state. previous: the per-step tracker's flat float64
            parameters before the checkpoint's update (``None`` at step 0).
    """

    step: int
    document: dict[str, Any]
    optimizer: dict[str, Any]
    schedule: dict[str, Any]
    generator: torch.Tensor
    previous: torch.Tensor | None


def save_state(path: Path, state: ResumeState) -> Path:
    """Write ``state`` to ``path`` atomically (optimizer tensors as tensors, the rest as JSON)."""
    tensors = {_GENERATOR: state.generator.contiguous()}
    if state.previous is not None:
        tensors[_PREVIOUS] = state.previous.detach().cpu().contiguous()
    scalars: dict[str, dict[str, Any]] = {}
    for index, values in state.optimizer["state"].items():
        for name, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{_OPTIMIZER}{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[name] = value
    meta = {"step": state.step, "document": state.document, "schedule": state.schedule,
            "optimizer": {"param_groups": state.optimizer["param_groups"], "scalars": scalars,
                          "indices": [int(i) for i in state.optimizer["state"]]}}
    text = json.dumps(meta, allow_nan=False)
    with atomic_path(path) as temporary:
        safetensors.torch.save_file(tensors, str(temporary), metadata={_KEY: text})
    return path


def load_state(path: Path, device: str | torch.device = "cpu") -> ResumeState:
    """Read a resume file written by :func:`save_state`; optimizer tensors go to ``device``.

    Raises:
        EmpiricalError: no resume file at ``path``, one that is not a normsat resume file, or one
            whose metadata (read with bounds) is not of the form :func:`save_state` writes.
    """
    if not path.is_file():
        raise EmpiricalError(f"expected the resume file {path} of an unfinished run, but it does not "
                             "exist (a finished run has none; a run stopped before its first "
                             "checkpoint has nothing to resume)")
    try:
        with safetensors.safe_open(str(path), framework="pt") as handle:
            text = (handle.metadata() or {}).get(_KEY)
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
        if text is None:
            raise ValueError(f"no {_KEY} metadata")
    except (OSError, ValueError, safetensors.SafetensorError) as err:
        raise EmpiricalError(f"expected a normsat resume file at {path}, got one that cannot be "
                             f"read: {err}") from None
    meta = _check_meta(parse_json(text, source=f"the resume file {path}", max_depth=16,
                                  max_number_digits=40, error=EmpiricalError), path)
    if _GENERATOR not in tensors or tensors[_GENERATOR].dtype != torch.uint8:
        raise EmpiricalError(f"expected the batch generator's state in the resume file {path}, got "
                             f"{'none' if _GENERATOR not in tensors else tensors[_GENERATOR].dtype}")
    optimizer_state: dict[int, dict[str, Any]] = {}
    for index in meta["optimizer"]["indices"]:
        values: dict[str, Any] = dict(meta["optimizer"]["scalars"].get(str(index), {}))
        prefix = f"{_OPTIMIZER}{index}."
        values.update({name.removeprefix(prefix): tensor.to(device) for name, tensor in tensors.items()
                       if name.startswith(prefix)})
        optimizer_state[index] = values
    return ResumeState(
        step=meta["step"], document=meta["document"], schedule=meta["schedule"],
        optimizer={"state": optimizer_state, "param_groups": meta["optimizer"]["param_groups"]},
        generator=tensors[_GENERATOR], previous=tensors.get(_PREVIOUS),
    )


def _check_meta(meta: Any, path: Path) -> dict[str, Any]:
    """The resume file's metadata if each part has the form :func:`save_state` writes."""
    def fail(field: str, expected: str, value: Any) -> EmpiricalError:
        return EmpiricalError(f"expected {field} in the resume file {path} to be {expected}, got "
                              f"{describe(value)}")

    if not isinstance(meta, Mapping) or set(meta) != {"step", "document", "schedule", "optimizer"}:
        raise fail("the metadata", "an object of step, document, schedule and optimizer", meta)
    check_integer(meta["step"], f"step in the resume file {path}", low=0, error=EmpiricalError)
    for name in ("document", "schedule"):  # the document's fields: by the run that resumes it
        if not isinstance(meta[name], Mapping):
            raise fail(name, "an object", meta[name])
    optimizer = meta["optimizer"]
    if not isinstance(optimizer, Mapping) or set(optimizer) != {"param_groups", "scalars", "indices"}:
        raise fail("optimizer", "an object of param_groups, scalars and indices", optimizer)
    if not isinstance(optimizer["param_groups"], list) or not all(
            isinstance(group, Mapping) for group in optimizer["param_groups"]):
        raise fail("optimizer.param_groups", "a list of objects", optimizer["param_groups"])
    if not isinstance(optimizer["scalars"], Mapping) or not all(
            isinstance(values, Mapping) for values in optimizer["scalars"].values()):
        raise fail("optimizer.scalars", "an object of objects", optimizer["scalars"])
    if not isinstance(optimizer["indices"], list):
        raise fail("optimizer.indices", "a list of parameter indices", optimizer["indices"])
    for index in optimizer["indices"]:
        check_integer(index, f"optimizer.indices in the resume file {path}", low=0, error=EmpiricalError)
    return dict(meta)
