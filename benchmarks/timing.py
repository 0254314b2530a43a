"""The timing and memory helpers the benchmark scripts share (run them as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import os
import threading
import time
import timeit
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int, timer: Callable[[], float] = time.perf_counter) -> float:
    """The fastest of ``repeats`` single runs of ``fn``, in seconds of ``timer`` (the least noisy
    estimate; ``time.process_time`` leaves out the time other processes took the cores)."""
    return min(timeit.repeat(fn, number=1, repeat=repeats, timer=timer))


def _resident() -> int:
    """The process's resident memory in bytes (Linux ``/proc``)."""
    with open("/proc/self/statm") as stats:
        return int(stats.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_resident(fn: Callable[[], object], every: float = 0.002) -> int:
    """The process's peak resident memory while ``fn`` ran, in bytes, the model and everything
    already held included (sampled every ``every`` seconds: tensors live outside Python's
    allocator, where ``tracemalloc`` does not see them)."""
    peak = _resident()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _resident())
            done.wait(every)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        fn()
    finally:
        done.set()
        watcher.join()
    return max(peak, _resident())
