"""Levels of the limit that failed wholesale for a graph, kept on disk beside it, so that a new
process does not run them again.

A :class:`~saturated.saturate.SaturatedModel` call runs levels in turn (the leading order in the
model's dtype, then float64 with 1, 2, 4, … orders) and remembers one that left every entry of a
batch undetermined (the float32 level of a deep decoder, T5's float64 level with one order): later
calls go straight to the next one. This module keeps that beside the graph in the export cache
(:func:`saturated.export_cache.cache_dir`), under the graph's own cache key
(:func:`~saturated.export_cache.stored_key`) and a digest of what else decides whether a level
fails: the outputs asked for, the settings, what becomes of undetermined values, whether padding
is read, the library's version and the source of its ``saturated`` package (a change to a rule
may decide what a level left undetermined before, within one version). The weights are in neither
key: a level skipped for weights it would have decided costs time, not a value, as the next levels
run every entry it would have (see :meth:`~saturated.saturate.SaturatedModel._note_whole_failure`).

A file that cannot be read, or that names levels other than those a call may skip, is ignored
(at worst a level is skipped that would have succeeded, which costs its time again).

>>> store_failed_level("graph", "call", "torch.float32", 1)
>>> read_failed_levels("graph", "call")
{('torch.float32', 1)}
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from saturated.export_cache import _write, cache_dir

__all__ = ["call_digest", "read_failed_levels", "store_failed_level"]

Level = tuple[str, int]


def call_digest(**call: Any) -> str:
    """A digest of a call's parameters (outputs, settings, …), the library's version and its
    limit's source, the part of a failed level's key besides its graph's.

    >>> call_digest(outputs=None) == call_digest(outputs=None) != call_digest(outputs=["x"])
    True
    """
    try:
        version = metadata.version("normsat")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        version = "unknown"
    record = json.dumps({"call": call, "normsat": version, "source": _source_digest()}, sort_keys=True,
                        default=repr)
    return hashlib.sha256(record.encode()).hexdigest()


@functools.cache
def _source_digest() -> str:
    """A digest of the ``saturated`` package's Python source (read once per process; a file that
    cannot be read counts by its name alone, as a record that cannot be read costs time only)."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _path(graph: str, call: str) -> Path | None:
    root = cache_dir()
    return None if root is None else root / "levels" / f"{graph}.{call}.json"


def read_failed_levels(graph: str, call: str) -> set[Level]:
    """The levels (dtype name, orders) stored as failed wholesale for this graph and call (none
    where the file is missing or cannot be read)."""
    path = _path(graph, call)
    if path is None or not path.is_file():
        return set()
    with contextlib.suppress(OSError, ValueError):
        stored = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(stored, list):
            return {(dtype, orders) for dtype, orders in (_level(item) for item in stored)
                    if dtype is not None and orders is not None}
    return set()


def _level(item: Any) -> tuple[str | None, int | None]:
    """A stored (dtype, orders) pair, or (None, None) for anything else."""
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) \
            and isinstance(item[1], int) and not isinstance(item[1], bool):
        return item[0], item[1]
    return None, None


def store_failed_level(graph: str, call: str, dtype: str, orders: int) -> None:
    """Add a level that failed wholesale to the graph's and call's file (nothing without a cache
    directory; an unwritable one costs the level's run next time)."""
    path = _path(graph, call)
    if path is None:
        return
    levels = sorted(read_failed_levels(graph, call) | {(dtype, orders)})
    text = json.dumps([list(level) for level in levels]).encode("utf-8")
    with contextlib.suppress(OSError):
        _write(path, lambda file: file.write(text))
