"""Spectral norm bounds of weights kept on disk, so that each weight's is computed once, not once
per process.

A bound (:func:`~saturated.spectral.spectral_norm_bound`) costs a Gram product of the weight and
a factorization of it: 0.2–0.25 CPU seconds for a 768 × 3072 weight of T5 base, 4 s for a
2048 × 8192 one, against about 2 ms to hash the first one's bytes (BLAKE3, about 4 GB/s here;
hashlib's blake2b took 20 ms).
It is kept in the export cache's directory (:func:`saturated.export_cache.cache_dir`,
subdirectory ``spectral``) under a hash of everything it depends on: the model's own values'
bytes, their dtype and shape, the dtype the bound is computed in (the values are cast to it only
when the bound is not stored), the depth, and the source of :mod:`saturated.spectral` (a change
there computes every bound again). A file that cannot be read is computed again and replaced;
files are written under a temporary name and renamed into place.

The directory is trusted as the exported graphs are: a bound written there by hand is read as a
bound.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import math
from functools import cache
from pathlib import Path

import torch
from blake3 import blake3
from torch import Tensor

import saturated.spectral
from saturated.export_cache import _write, cache_dir
from saturated.spectral import spectral_norm_bound

__all__ = ["cast_dtype", "stored_spectral_norm_bound"]


def cast_dtype(source: torch.dtype, target: torch.dtype | None) -> torch.dtype:
    """The dtype a bound of a ``source`` tensor cast to ``target`` is computed in: ``source`` itself
    where the cast changes no value (None, or a wider dtype: float32 to float64), so that the
    bound is computed and kept once.

    >>> cast_dtype(torch.float32, torch.float64), cast_dtype(torch.float32, torch.float16)
    (torch.float32, torch.float16)
    """
    return source if target is None or torch.promote_types(source, target) == target else target


@cache
def _source_digest() -> bytes:
    return hashlib.sha256(inspect.getsource(saturated.spectral).encode()).digest()


def _key(matrix: Tensor, dtype: torch.dtype, depth: int) -> str:
    """A hash of the bound's inputs: the matrix's bytes, dtype and shape, the dtype the bound is
    computed in, the depth and the code."""
    values = matrix.detach().contiguous().cpu()
    digest = blake3()
    digest.update(_source_digest())
    digest.update(repr((str(values.dtype), tuple(values.shape), str(dtype), depth)).encode())
    digest.update(values.reshape(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest(length=20)


def _read(path: Path) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        bound = float.fromhex(path.read_text(encoding="ascii").strip())
        if bound >= 0 and not math.isnan(bound):
            return bound
    return None


def stored_spectral_norm_bound(matrix: Tensor, depth: int = 4, dtype: torch.dtype | None = None) -> float:
    """:func:`~saturated.spectral.spectral_norm_bound` of ``matrix`` cast to ``dtype`` (default:
    its own; a wider ``dtype`` holds the same values, and shares the bound and its entry), read
    from the cache directory when it was computed before (in any process) and stored there
    otherwise (computed every time with no cache directory). The key hashes ``matrix`` itself: a
    read makes no cast copy.

    >>> stored_spectral_norm_bound(torch.eye(3)) == stored_spectral_norm_bound(torch.eye(3)) >= 1.0
    True
    """
    dtype = cast_dtype(matrix.dtype, dtype)
    root = cache_dir()
    if root is None or matrix.dim() != 2:
        return spectral_norm_bound(matrix.to(dtype), depth)
    path = root / "spectral" / f"{_key(matrix, dtype, depth)}.txt"
    if path.is_file():
        stored = _read(path)
        if stored is not None:
            return stored
    bound = spectral_norm_bound(matrix.to(dtype), depth)
    with contextlib.suppress(OSError):  # an unwritable cache only costs the bound next time
        _write(path, lambda file: file.write(bound.hex().encode("ascii")))
    return bound
