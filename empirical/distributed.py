"""Data-parallel corpus measurements over ``torch.distributed`` ranks, written once for all of them.

Started with ``torchrun --nproc-per-node N``, every rank tokenizes the whole corpus (cheap), checks
that all ranks read the same text (its SHA-256), keeps every N-th of the length-sorted batches
(:func:`shard`: round-robin, so each rank gets short and long sentences alike), and measures its
share. Per-layer sums and token counts are then added up across ranks (:func:`reduce_sums`), so
every rank holds the corpus-wide result; rank 0 writes the files (:func:`is_writer`), and the
result records ``world_size`` and the tokens each rank measured (:func:`provenance`).

Without a process group, every function is the single-process identity: one rank, all batches.
The collectives run on CPU tensors with gloo and on the rank's GPU with NCCL.

>>> current()
World(rank=0, size=1, backend=None)
>>> shard(["b0", "b1", "b2"])
['b0', 'b1', 'b2']
>>> provenance(42)
{'world_size': 1, 'backend': None, 'tokens_per_rank': [42]}
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from empirical.errors import EmpiricalError

__all__ = [
    "World",
    "check_same_corpus",
    "current",
    "gather",
    "init_from_environment",
    "is_writer",
    "provenance",
    "reduce_counts",
    "reduce_sums",
    "shard",
    "shutdown",
]

T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True)
class World:
    """This process's rank, the number of ranks and the backend (None: a single process)."""

    rank: int
    size: int
    backend: str | None


def current() -> World:
    """The process group this process belongs to (rank 0 of 1 when there is none)."""
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))
    return World(0, 1, None)


def init_from_environment() -> World:
    """Join the process group ``torchrun`` describes in the environment; a no-op without one.

    NCCL when CUDA is available (each rank on the GPU ``LOCAL_RANK``, so that ``device="cuda"``
    means that rank's GPU), gloo otherwise. Reads ``WORLD_SIZE`` and ``LOCAL_RANK`` when called,
    never at import.
    """
    if current().size > 1 or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return current()
    if not dist.is_available():
        raise EmpiricalError("WORLD_SIZE > 1 asks for several ranks, but this torch build has no "
                             "torch.distributed")
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    return current()


def shutdown() -> None:
    """Leave the process group once every rank has finished (a barrier, then
    ``destroy_process_group``), so that no rank tears down its connections while another still
    uses them; a no-op without one. Call it only on success: after a failure the other ranks may
    never reach the barrier."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def is_writer() -> bool:
    """Whether this process writes the outputs: rank 0, or the only process."""
    return current().rank == 0


def shard(batches: Sequence[T]) -> list[T]:
    """This rank's share of length-sorted batches: batches rank, rank + N, rank + 2N, …

    Raises:
        EmpiricalError: fewer batches than ranks (a rank would measure nothing).
    """
    world = current()
    if len(batches) < world.size:
        raise EmpiricalError(
            f"expected at least one batch per rank, got {len(batches)} batches for {world.size} "
            "ranks; use a smaller batch size, more sentences or fewer ranks"
        )
    return list(batches[world.rank::world.size])


def _device() -> torch.device:
    """Where the collectives run: this rank's GPU for NCCL, the CPU otherwise."""
    if current().backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather(value: Any) -> list[Any]:
    """Every rank's ``value`` (any picklable object), in rank order, on every rank."""
    world = current()
    if world.size == 1:
        return [value]
    gathered: list[Any] = [None] * world.size
    dist.all_gather_object(gathered, value)
    return gathered


def check_same_corpus(sha256: str) -> None:
    """Check that every rank measures the same text (by its SHA-256).

    Raises:
        EmpiricalError: on every rank, when the ranks' corpora differ; the message lists them.
    """
    hashes = gather(sha256)
    if len(set(hashes)) > 1:
        listed = ", ".join(f"rank {r}: {h[:12]}…" for r, h in enumerate(hashes))
        raise EmpiricalError(
            f"the ranks disagree on the corpus (SHA-256 {listed}); expected every rank to read the "
            "same sentences: the same file and the same number of sentences on every rank"
        )


def reduce_sums(sums: Mapping[K, torch.Tensor]) -> dict[K, torch.Tensor]:
    """The element-wise sums of each rank's tensors, in float64, on every rank.

    One all-reduce of all the tensors laid end to end, in the order of ``sums`` (the same on every
    rank, since every rank runs the same measurement).

    Raises:
        EmpiricalError: the ranks hold different keys or shapes.
    """
    world = current()
    if world.size == 1:
        return {key: value.double() for key, value in sums.items()}
    layout = [(repr(key), tuple(value.shape)) for key, value in sums.items()]
    layouts = gather(layout)
    if any(other != layout for other in layouts):
        raise EmpiricalError(f"expected every rank to hold the same sums; rank layouts differ: {layouts}")
    flat = torch.cat([value.detach().double().reshape(-1).to(_device()) for value in sums.values()])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    out: dict[K, torch.Tensor] = {}
    offset = 0
    for key, value in sums.items():
        out[key] = flat[offset:offset + value.numel()].reshape(value.shape).to(value.device)
        offset += value.numel()
    return out


def reduce_counts(counts: Mapping[K, int]) -> dict[K, int]:
    """The sums of each rank's integer counts, on every rank (exact below 2⁵³)."""
    total = reduce_sums({key: torch.tensor(float(n)) for key, n in counts.items()})
    return {key: int(value) for key, value in total.items()}


def provenance(tokens: int) -> dict[str, Any]:
    """What a result records about the ranks: world size, backend, and the tokens each measured."""
    world = current()
    return {"world_size": world.size, "backend": world.backend, "tokens_per_rank": gather(int(tokens))}
