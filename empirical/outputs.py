"""Output files: checked before a measurement starts, written atomically when it ends.

A typo in an output path must not cost a finished run, so commands call :func:`check_output` (or
:func:`check_output_dir`) before computing. A crash must not leave half a file, so every file is
written to a temporary sibling and renamed into place (:func:`atomic_path`): JSON through
:func:`write_json`, figures through :func:`save_figure`. Every result type is a :class:`Result`:
``to_dict()``, ``to_json(path)`` (returns the path written) and ``table()``.
"""

from __future__ import annotations

import json
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from empirical.errors import EmpiricalError

__all__ = [
    "PLOT_SUFFIXES", "Result", "atomic_path", "check_output", "check_output_dir", "save_figure", "write_json",
    "write_text",
]

PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg")
"""Extensions a plot may have: formats matplotlib writes without LaTeX or optional codecs."""


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
    # Imported here: the command line's options read this module, and torch must wait for a command.
    from empirical import distributed

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


def save_figure(figure: Any, path: str | Path, **options: Any) -> Path:
    """Write a matplotlib figure atomically (its format from the extension, PNG without one).

    Args:
        figure: a ``matplotlib.figure.Figure``, or image bytes already rendered (written as they are).
        path: the output file.
        options: passed to ``Figure.savefig`` (``bbox_inches="tight"``, …).

    >>> import tempfile
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(1, 1))
    >>> _ = fig.add_subplot().plot([0, 1])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     out = save_figure(fig, f"{folder}/plots/a.png")
    ...     out.name, out.read_bytes()[:4]
    ('a.png', b'\\x89PNG')
    """
    out = Path(path)
    with atomic_path(out) as temporary:
        if isinstance(figure, bytes | bytearray):
            temporary.write_bytes(figure)
        else:
            figure.savefig(temporary, format=out.suffix.lstrip(".").lower() or "png", **options)
    return out


class Result(ABC):
    """What every result type offers: a JSON-ready dictionary, an atomic JSON file and a text table.

    A subclass writes :meth:`to_dict` and :meth:`table`; :meth:`to_json` writes the dictionary as
    strict JSON through :func:`write_json` and returns the path.

    >>> import tempfile
    >>> class Answer(Result):
    ...     def to_dict(self): return {"answer": 42}
    ...     def table(self): return "answer  42"
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     Answer().to_json(f"{folder}/a.json").read_text()
    '{\\n  "answer": 42\\n}\\n'
    """

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dictionary, with its schema and provenance."""

    @abstractmethod
    def table(self) -> str:
        """The result as a plain-text table."""

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as strict JSON (a NaN or infinity is an error) to ``path``,
        atomically; returns the path."""
        return write_json(self.to_dict(), path)
