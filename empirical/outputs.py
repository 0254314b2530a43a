"""Output files: checked before a measurement starts, written atomically when it ends.

A typo in an output path must not cost a finished run, so commands call :func:`check_output` (or
:func:`check_output_dir`) before computing. A crash must not leave half a file, so every file is
written to a temporary sibling and renamed into place (:func:`atomic_path`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from empirical import distributed
from empirical.errors import EmpiricalError

__all__ = ["atomic_path", "check_output", "check_output_dir", "write_json", "write_text"]


def _writable_ancestor(path: Path, what: str) -> None:
    """Refuse ``path`` unless its nearest existing ancestor is a folder we may create files in."""
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise EmpiricalError(f"cannot write {what} {path}: {ancestor} is a file, not a folder")
    try:  # a real probe: permission bits say nothing for root or on special file systems
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as err:
        raise EmpiricalError(
            f"cannot write {what} {path}: the folder {ancestor} is not writable ({err.strerror})"
        ) from None


def check_output(path: str | Path, suffixes: Iterable[str] | None = None, *, what: str = "output") -> Path:
    """Check that a file can be written at ``path`` (creating nothing) and return it.

    Args:
        path: the output file.
        suffixes: the accepted extensions (``".json"``, ``".png"``, …); None accepts any.
        what: what the file is, for messages (``"--json"``).

    Raises:
        EmpiricalError: a folder at ``path``, an extension not in ``suffixes``, an existing file
            that is read-only, or a parent that cannot be created.

    >>> check_output("results/run.json", suffixes=[".json"]).name
    'run.json'
    """
    out = Path(path).expanduser()
    if out.is_dir():
        raise EmpiricalError(f"expected a file name for {what}, got the existing folder {out}")
    if suffixes is not None:
        accepted = sorted({s.lower() for s in suffixes})
        if out.suffix.lower() not in accepted:
            raise EmpiricalError(
                f"expected {what} to end in one of {', '.join(accepted)}, got {str(out)!r}"
            )
    if out.exists() and not os.access(out, os.W_OK):
        raise EmpiricalError(f"cannot write {what} {out}: the file exists and is read-only")
    _writable_ancestor(out, what)
    return out


def check_output_dir(path: str | Path, *, what: str = "output folder") -> Path:
    """Check that ``path`` is, or can become, a writable folder (creating nothing) and return it."""
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise EmpiricalError(f"expected a folder for {what}, but {out} is an existing file")
    _writable_ancestor(out / "report", what)
    return out


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed onto ``path`` only if the block succeeds.

    The temporary name keeps the extension, so writers that pick a format by suffix still work.
    Under ``torchrun`` only rank 0 renames it into place (:func:`empirical.distributed.is_writer`).
    """
    out = Path(path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=out.suffix, dir=out.parent)
    os.close(handle)
    temporary = Path(name)
    umask = os.umask(0)  # mkstemp makes the file private; give it the mode a plain open() would
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)
    try:
        yield temporary
        if distributed.is_writer():
            os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(text: str, path: str | Path) -> Path:
    """Write ``text`` (UTF-8) atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(data: Any, path: str | Path) -> Path:
    """Write ``data`` as indented strict JSON, atomically, creating parent folders.

    >>> import tempfile, json
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     out = write_json({"scale": None}, f"{folder}/a/run.json")
    ...     json.loads(out.read_text())
    {'scale': None}
    """
    # allow_nan=False: strict JSON, so a NaN or infinity is an error here, not in the reader's parser
    text = json.dumps(data, indent=2, default=str, allow_nan=False) + "\n"
    return write_text(text, path)
