"""Scanning a training run's checkpoints offline: their steps, order and norms.

:func:`scan_checkpoints` runs a :class:`~empirical.training.norms.NormTracker` over a run's checkpoints in
step order with at most two of them in memory: the previous one (for the cosine) and the current.
Each checkpoint is read by :func:`empirical.models.formats.read_state_dict` (every readable format is
listed there).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path

import torch
from tqdm.auto import tqdm

from empirical.errors import EmpiricalError
from empirical.models.formats import read_state_dict
from empirical.training.norms import NormTracker
from empirical.validation import check_list, check_step
from homogeneity.validation import describe

__all__ = ["order_checkpoints", "scan_checkpoints", "step_from_name"]

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# Hugging Face weight file names (whole or sharded): their numbers are shard indices, not steps,
# and their step is the folder's (checkpoint-400/model.safetensors).
_HF_WEIGHT_FILE = re.compile(
    r"(?:model|pytorch_model)(?:-\d+-of-\d+)?\.(?:safetensors|bin)(?:\.index\.json)?")


def _last_integer(name: str) -> int | None:
    numbers = re.findall(r"\d+", name)
    return int(numbers[-1]) if numbers else None


def step_from_name(path: str | Path) -> int | None:
    """The step in a checkpoint's name: the last integer of the file name (without its weight
    suffix ``.safetensors`` / ``.bin`` / ``.pt`` / ``.pth``) or of the folder name.

    A Hugging Face weight file (``model.safetensors``, ``pytorch_model.bin``, their shards and
    indices) takes its folder's step. Any other name without a number has no step (``None``): a
    parent folder's number (``run1/final.pt``) is not taken for one.

    >>> step_from_name("run/step-00400.safetensors"), step_from_name("out/checkpoint-1200")
    (400, 1200)
    >>> step_from_name("gpt2-lr0.001-step400.safetensors"), step_from_name("ckpt.step100.pt")
    (400, 100)
    >>> step_from_name("checkpoint-300/model.safetensors"), step_from_name("run1/final.pt")
    (300, None)
    """
    path = Path(path)
    if _HF_WEIGHT_FILE.fullmatch(path.name):
        return _last_integer(path.parent.name)
    name = path.name
    for suffix in _WEIGHT_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _last_integer(name)


def _check_checkpoint_path(path: Path) -> None:
    """Refuse a path that cannot be one checkpoint, saying why: a shell pattern that matched
    nothing (the shell passes it on as it is), a missing file, or a folder of checkpoints (which
    is a run, not one checkpoint)."""
    if not path.exists():
        if any(char in str(path) for char in "*?["):
            raise EmpiricalError(f"the pattern {path} matched no file (the shell passed it on "
                                 "unexpanded); expected checkpoint files")
        raise EmpiricalError(f"expected a checkpoint file or a model folder, got {path}, which does "
                             "not exist")
    if path.is_dir() and not any(_HF_WEIGHT_FILE.fullmatch(child.name) for child in path.iterdir()):
        inside = sorted(child.name for child in path.iterdir()
                        if child.name.endswith(_WEIGHT_SUFFIXES)
                        or (child.is_dir() and _last_integer(child.name) is not None))
        if inside:
            raise EmpiricalError(
                f"expected checkpoint files, got the folder {path}, which holds {len(inside)} "
                f"checkpoints ({', '.join(inside[:3])}{', …' if len(inside) > 3 else ''}); pass the "
                f"files themselves, e.g. {path}/*")


def order_checkpoints(paths: Sequence[str | Path], steps: Sequence[int] | None = None
                      ) -> list[tuple[Path, int]]:
    """Pair each checkpoint with its step, in step order.

    Args:
        paths: checkpoint files or folders.
        steps: their steps, in the order of ``paths`` (must increase); ``None``: read each step
            from its name (:func:`step_from_name`) and sort, so a shell glob's order does not matter.

    Raises:
        EmpiricalError: no paths (or a bare string), a path that does not exist (a pattern that
            matched nothing is named as such), a folder of checkpoints instead of the files, a
            count mismatch, steps that are not integers ≥ 0 (fractions are refused, not
            truncated), unsorted or duplicate steps, or a name without a step when ``steps`` is
            not given.
    """
    paths = check_list(paths, "paths", "checkpoint files or folders")
    if not paths:
        raise EmpiricalError("expected at least one checkpoint, got none")
    resolved = [Path(p) for p in paths]
    if steps is not None:
        steps = [check_step(step, f"steps[{index}]")
                 for index, step in enumerate(check_list(steps, "steps", "integers"))]
        if len(steps) != len(resolved):
            raise EmpiricalError(f"expected one step per checkpoint, got {len(steps)} steps for "
                                 f"{len(resolved)} checkpoints")
        for (before, after), path in zip(pairwise(steps), resolved[1:]):
            if after <= before:
                raise EmpiricalError(f"expected steps in increasing order without duplicates, got "
                                     f"{after} after {before} (for {path})")
        return list(zip(resolved, steps))
    named = []
    for path in resolved:
        step = step_from_name(path)
        if step is None:
            where = (f"the folder of {path}" if _HF_WEIGHT_FILE.fullmatch(path.name)
                     else f"the name of {path}")
            raise EmpiricalError(f"expected a step number in {where} (e.g. step-00400.safetensors "
                                 "or checkpoint-400/), found none; pass the steps with --at-steps "
                                 "(Python: steps=[...])")
        named.append((path, step))
    named.sort(key=lambda pair: pair[1])
    for (first, before), (second, after) in pairwise(named):
        if after == before:
            raise EmpiricalError(f"expected one checkpoint per step, got step {after} twice: {first} "
                                 f"and {second}")
    return named


def _is_buffer(name: str, tensor: torch.Tensor) -> bool:
    """Entries of a state dict that are not parameters.

    Integer and boolean tensors (position ids, masks), and GPT-2's causal-mask buffers that older
    transformers versions saved (``h.N.attn.bias``, 4-D, and ``h.N.attn.masked_bias``, a scalar).
    """
    if not tensor.is_floating_point():
        return True
    return (name.endswith("attn.bias") and tensor.dim() == 4) or \
        (name.endswith("attn.masked_bias") and tensor.dim() == 0)


def _parameters(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The parameters of a state dict, each counted once: tied tensors that a ``torch.save``
    pickle stores as views of one storage (input and output embeddings) keep their first name."""
    kept: dict[str, torch.Tensor] = {}
    seen: set[tuple[int, int, tuple[int, ...], tuple[int, ...]]] = set()
    for name, tensor in state.items():
        if _is_buffer(name, tensor):
            continue
        key = (tensor.untyped_storage().data_ptr(), int(tensor.storage_offset()), tuple(tensor.shape),
               tuple(tensor.stride()))
        if key in seen:
            continue
        seen.add(key)
        kept[name] = tensor
    return kept


def _check_same_architecture(reference: Mapping[str, torch.Tensor], reference_path: Path,
                             state: Mapping[str, torch.Tensor], path: Path) -> None:
    for name, tensor in reference.items():
        other = state.get(name)
        if other is None:
            raise EmpiricalError(f"checkpoints do not share one architecture: tensor {name!r} "
                                 f"(shape {tuple(tensor.shape)} in {reference_path}) is missing "
                                 f"from {path}")
        if other.shape != tensor.shape:
            raise EmpiricalError(f"checkpoints do not share one architecture: tensor {name!r} has "
                                 f"shape {tuple(other.shape)} in {path} but {tuple(tensor.shape)} "
                                 f"in {reference_path}")
    extra = [name for name in state if name not in reference]
    if extra:
        raise EmpiricalError(f"checkpoints do not share one architecture: tensor {extra[0]!r} "
                             f"(shape {tuple(state[extra[0]].shape)}) is in {path} but not in "
                             f"{reference_path}")


def _non_finite(path: Path, state: Mapping[str, torch.Tensor]) -> str:
    """Why a checkpoint's norm is not finite: NaN or infinite entries (named), or finite entries
    whose squares overflow float64 (where the norms are summed)."""
    for name, tensor in state.items():
        if not bool(torch.isfinite(tensor).all()):
            kind = "NaN" if bool(torch.isnan(tensor).any()) else "infinite"
            return f"expected finite parameters in {path}, found {kind} entries in {name!r}"
    largest = max(float(tensor.detach().abs().max()) for tensor in state.values() if tensor.numel())
    return (f"the parameters of {path} are finite, but their norm overflows float64, in which it is "
            f"summed (largest |θ| = {largest:.3g}; squares above about 1.8e308 overflow)")


def scan_checkpoints(
    paths: Sequence[str | Path],
    steps: Sequence[int] | None = None,
    *,
    groups: Mapping[str, Sequence[str]] | None = None,
    progress: bool = False,
) -> tuple[NormTracker, list[tuple[Path, int]]]:
    """Record norms, per-layer and per-group norms and consecutive cosines over checkpoints.

    Args:
        paths: checkpoint files or model folders of one run (one architecture).
        steps: their steps (see :func:`order_checkpoints`); ``None``: from the names.
        groups: parameter groups for the tracker (``None``: the default groups).
        progress: show a progress bar.

    Returns:
        The tracker (one record per checkpoint, without gradient fields) and the (path, step)
        pairs in the order read.

    Raises:
        EmpiricalError: see :func:`order_checkpoints` and :func:`read_state_dict`; also
            checkpoints of different architectures (naming the first differing tensor).
    """
    for path in check_list(paths, "paths", "checkpoint files or folders"):
        if not isinstance(path, str | Path):
            raise EmpiricalError(f"expected checkpoint paths, got {describe(path)}")
        _check_checkpoint_path(Path(path))  # before the steps: a missing file is the first news
    ordered = order_checkpoints(paths, steps)
    tracker: NormTracker | None = None
    first: tuple[Path, dict[str, torch.Tensor]] | None = None  # names and shapes only are used
    for path, step in tqdm(ordered, desc="checkpoints", unit="ckpt", disable=not progress):
        state = _parameters(read_state_dict(path))
        if first is None:
            if not state:
                raise EmpiricalError(f"expected floating-point parameters in {path}, found none")
            first = (path, {name: torch.empty(t.shape, device="meta") for name, t in state.items()})
            tracker = NormTracker(state, groups)
        else:
            _check_same_architecture(first[1], first[0], state, path)
        assert tracker is not None
        if not math.isfinite(tracker.record(step, state)["norm"]):
            raise EmpiricalError(_non_finite(path, state))
        del state  # the tracker holds it as "previous" until the next record replaces it
    assert tracker is not None
    return tracker, ordered
