"""One run per output folder: an advisory lock held for the length of a run.

Two runs started at once on one folder would write each other's checkpoints and leave the folder
holding one of them, both exiting 0. :func:`folder_lock` takes an ``fcntl`` lock on a file inside
the folder and writes the holder's process id and command into it; a second run on the folder is
refused at once, naming that process. The kernel drops the lock when its process ends however it
ends, so a killed run never blocks the next one; the file goes when the lock is released.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from empirical.errors import EmpiricalError
from empirical.interrupts import deferred

__all__ = ["LOCK_NAME", "FolderInUse", "folder_lock"]

LOCK_NAME = ".normsat-lock"
"""The lock file inside a locked folder (hidden, like the package's other temporary names)."""

_held: dict[Path, int] = {}
"""The folders this process holds, with how many nested holders: ``normsat train`` locks its
folder around :func:`empirical.training.runs.train`, which locks it too."""


class FolderInUse(EmpiricalError):
    """Another process holds the folder's lock."""


def _holder(descriptor: int) -> str:
    """What the lock file says about its holder (pid and command), or a plain description."""
    try:
        text = os.pread(descriptor, 512, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    pid, _, command = text.partition(" ")
    if not pid.isdigit():
        return "another process"
    return f"process {pid}" + (f": {command[:80]}" if command else "")


def _acquire(lock: Path, folder: str | Path, what: str) -> int | None:
    """An open descriptor of ``lock``, locked; None where the file system has no locks."""
    while True:
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor)
            os.close(descriptor)
            raise FolderInUse(f"{what} {folder} is in use by another run ({holder}); wait for it "
                              "to finish, or choose another folder") from None
        except OSError:  # a file system without locks: run unlocked, as before
            os.close(descriptor)
            lock.unlink(missing_ok=True)
            return None
        # The holder removes the file as it releases: a lock taken on a file no longer there
        # guards nothing, so take it again on the file that is.
        try:
            current = os.stat(lock).st_ino == os.fstat(descriptor).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return descriptor
        os.close(descriptor)


@contextmanager
def folder_lock(folder: str | Path, *, what: str = "the folder") -> Iterator[Path]:
    """Hold ``folder``'s lock (creating the folder) for the block; a folder this call created is
    removed again if the block leaves it empty. Nested calls on one folder in one process share
    the lock.

    Args:
        folder: the output folder.
        what: how the user named it, for the message (``"--out"``).

    Raises:
        FolderInUse: another process holds the lock; the message names it.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     with folder_lock(f"{parent}/run") as run:
    ...         print(sorted(p.name for p in run.iterdir()))
    ...     print(Path(f"{parent}/run").exists())
    ['.normsat-lock']
    False
    """
    path = Path(folder).expanduser()
    key = path.resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield path
        finally:
            _held[key] -= 1
        return
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK_NAME
    try:
        descriptor = _acquire(lock, folder, what)
    except BaseException:
        if created and not any(path.iterdir()):
            path.rmdir()
        raise
    if descriptor is not None:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()} {' '.join(sys.argv)}\n".encode())
    _held[key] = 1
    try:
        yield path
    finally:
        with deferred():  # a second Ctrl-C waits until the lock is gone
            del _held[key]
            if descriptor is not None:
                lock.unlink(missing_ok=True)
                os.close(descriptor)
            if created and path.is_dir() and not any(path.iterdir()):
                path.rmdir()
