"""One interrupt policy: Ctrl-C (SIGINT) and SIGTERM take the same road.

Python turns SIGINT into :class:`KeyboardInterrupt`; SIGTERM, what ``kill``, ``timeout`` and job
schedulers send, would end the process at once, without running a single ``finally`` block, so
temporary files would stay behind. :func:`signals_as_interrupts` makes both signals raise
:class:`Interrupted` (a :class:`KeyboardInterrupt` naming its signal), so every command cleans up
the same way whichever one arrived, and :func:`exit_code` gives the shell's convention, 128 + the
signal's number: 130 for SIGINT, 143 for SIGTERM. :func:`deferred` holds both signals back while
a few files are swapped into place, so a folder is never left half old and half new.

>>> import os, signal
>>> with signals_as_interrupts():
...     try:
...         os.kill(os.getpid(), signal.SIGTERM)
...     except Interrupted as err:
...         print(err, exit_code(err))
interrupted by SIGTERM 143
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = [
    "SIGNALS", "Interrupted", "deferred", "exit_code", "interrupt_signal", "signal_name",
    "signals_as_interrupts",
]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that interrupt a command: Ctrl-C, and the polite stop of ``kill`` and schedulers."""


class Interrupted(KeyboardInterrupt):
    """A command stopped by ``signum`` (a :class:`KeyboardInterrupt`, so code that already cleans
    up after Ctrl-C cleans up after SIGTERM too)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal_name(self.signum)}")


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``, … for a signal number.

    >>> signal_name(15)
    'SIGTERM'
    """
    return signal.Signals(signum).name


def interrupt_signal(err: BaseException) -> int:
    """The signal behind an interrupt: its own for :class:`Interrupted`, SIGINT for a plain
    :class:`KeyboardInterrupt` (Python's own Ctrl-C)."""
    return err.signum if isinstance(err, Interrupted) else int(signal.SIGINT)


def exit_code(err: BaseException) -> int:
    """128 + the interrupting signal's number: 130 for Ctrl-C, 143 for SIGTERM.

    >>> exit_code(KeyboardInterrupt()), exit_code(Interrupted(signal.SIGTERM))
    (130, 143)
    """
    return 128 + interrupt_signal(err)


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextmanager
def _swapped(handler: Callable[[int, FrameType | None], None]) -> Iterator[dict[int, Any]]:
    """``handler`` for SIGINT and SIGTERM within the block (except a signal the process ignores);
    yields the handlers it replaced and puts them back afterwards. Outside the main thread, where
    Python cannot install handlers, it changes nothing and yields ``{}``."""
    if threading.current_thread() is not threading.main_thread():
        yield {}
        return
    previous: dict[int, Any] = {signum: signal.signal(signum, handler) for signum in SIGNALS
                                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield previous
    finally:
        for signum, replaced in previous.items():
            signal.signal(signum, replaced)


@contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted`; the previous handlers come
    back afterwards. A signal the process was started to ignore (``nohup``, ``&`` in a script)
    stays ignored. Outside the main thread (where Python cannot install handlers) it does nothing.
    """
    with _swapped(_raise):
        yield


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block (a few renames that must happen together); a
    signal that arrived meanwhile is handled, as it would have been, when the block ends.

    The Python-level handlers are swapped rather than the signals masked: a mask is per thread,
    and torch's worker threads would still take the signal and have it handled mid-block.
    """
    pending: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        pending.append(signum)

    previous: dict[int, Any] = {}
    try:
        with _swapped(hold) as previous:
            yield
    finally:
        if pending:  # the block has ended: now the signal takes its course
            handler = previous[pending[0]]
            if callable(handler):
                handler(pending[0], None)
            else:  # the default action (end the process)
                signal.raise_signal(pending[0])
