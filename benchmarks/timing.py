"""The one timing helper the benchmark scripts share (run them as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import timeit
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` single runs of ``fn``, in seconds (the least noisy estimate)."""
    return min(timeit.repeat(fn, number=1, repeat=repeats))
