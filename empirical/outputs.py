"""Output files: checked before a measurement starts, written atomically when it ends.

A typo in an output path must not cost a finished run, so commands call :func:`check_output` (or
:func:`check_output_dir`) before computing, and :func:`check_distinct` when they write several
files. A crash must not leave half a file, so every file is written to a temporary sibling and
renamed into place (:func:`atomic_path`): JSON through :func:`write_json`, figures through
:func:`save_figure`. The early check tests the names that will be written, the temporary one
included (:func:`temporary_name`). Every result type is a :class:`Result`: ``to_dict()``,
``to_json(path)`` (returns the path written) and ``table()``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from empirical.errors import EmpiricalError
from empirical.interrupts import deferred

__all__ = [
    "PLOT_SUFFIXES", "Result", "atomic_path", "check_distinct", "check_output", "check_output_dir",
    "save_figure", "staged_files", "temporary_name", "write_json", "write_text",
]

PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg")
"""Extensions a plot may have: formats matplotlib writes without LaTeX or optional codecs."""

TEMPORARY_PREFIX = ".normsat-"
"""Start of a temporary file's name: short, so that any name that fits fits with it (and hidden)."""
_RANDOM_CHARACTERS = 8  # what tempfile.mkstemp puts between prefix and suffix


def temporary_name(path: str | Path) -> str:
    """The longest name :func:`atomic_path` gives the temporary sibling of ``path``: a short
    prefix, random characters and ``path``'s extension (so writers that pick a format by suffix
    still work), whatever the length of ``path``'s own name.

    >>> temporary_name("results/a-very-long-name-of-a-run.json")
    '.normsat-XXXXXXXX.json'
    """
    return f"{TEMPORARY_PREFIX}{'X' * _RANDOM_CHARACTERS}{Path(path).suffix}"


def _check_name_lengths(path: Path, ancestor: Path, what: str, shown: Path) -> None:
    """Refuse ``path`` if one of the names to create under ``ancestor`` (the folders still missing,
    the file and its temporary sibling) or the whole path is longer than the file system allows;
    ``shown`` is the path the user gave, for messages."""
    try:
        name_max = os.pathconf(ancestor, "PC_NAME_MAX")
        path_max = os.pathconf(ancestor, "PC_PATH_MAX")
    except (OSError, ValueError):  # no limit to ask for here (not POSIX): nothing to check early
        return
    missing = path.relative_to(ancestor).parts
    for name in (*missing, temporary_name(path)):
        if len(os.fsencode(name)) > name_max:
            raise EmpiricalError(f"cannot write {what} {shown}: the name {name[:40]}… is "
                                 f"{len(os.fsencode(name))} bytes long, and names in {ancestor} "
                                 f"may have at most {name_max}")
    # the file is written as its temporary sibling first: the longer of the two paths must fit
    own = len(os.fsencode(str(path.absolute())))
    sibling = len(os.fsencode(str(path.absolute().parent / temporary_name(path))))
    if max(own, sibling) >= path_max:
        which = ("the path is" if own >= sibling else
                 f"the path of its temporary file ({temporary_name(path)}) is")
        raise EmpiricalError(f"cannot write {what} {str(shown)[:60]}…: {which} {max(own, sibling)} "
                             f"bytes long, and paths in {ancestor} must be shorter than {path_max}")


def _as_path(path: Any, expected: str) -> Path:
    """``path`` as a Path (``~`` expanded) if it is a string or path-like object."""
    if not isinstance(path, str | os.PathLike):
        from homogeneity.validation import describe  # loads torch: only on this error's road

        raise EmpiricalError(f"expected {expected}, got {describe(path)}")
    return Path(path).expanduser()


def _exists(path: Path) -> bool:
    """``path.exists()``, where a name too long for the file system does not exist (pathlib raises)."""
    try:
        return path.exists()
    except OSError:
        return False


def _writable_ancestor(path: Path, what: str, shown: Path | None = None) -> None:
    """Refuse ``path`` unless its nearest existing ancestor is a folder we may create files in,
    and every name to create there fits the file system; messages name ``shown`` (the path the
    user gave, where ``path`` is a file to be written inside it), by default ``path``."""
    shown = path if shown is None else shown
    if "\x00" in str(path):  # no file system takes it; Python raises ValueError, not OSError
        raise EmpiricalError(f"cannot write {what} {str(shown)!r}: a path cannot hold a NUL byte")
    ancestor = path.parent
    while not _exists(ancestor):
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise EmpiricalError(f"cannot write {what} {shown}: {ancestor} is a file, not a folder")
    _check_name_lengths(path, ancestor, what, shown)
    try:  # a real probe: permission bits say nothing for root or on special file systems
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as err:
        raise EmpiricalError(
            f"cannot write {what} {shown}: the folder {ancestor} is not writable ({err.strerror})"
        ) from None


def check_output(path: str | Path, suffixes: Iterable[str] | None = None, *, what: str = "output") -> Path:
    """Check that a file can be written at ``path`` (creating nothing) and return it.

    Args:
        path: the output file.
        suffixes: the accepted extensions (``".json"``, ``".png"``, …); None accepts any.
        what: what the file is, for messages (``"--json"``).

    Raises:
        EmpiricalError: a folder at ``path``, an extension not in ``suffixes``, an existing file
            that is read-only, a parent that cannot be created, or a name (the file's, a missing
            folder's or the temporary file's) longer than the file system allows.

    >>> check_output("results/run.json", suffixes=[".json"]).name
    'run.json'
    """
    out = _as_path(path, f"a file name for {what}")
    _writable_ancestor(out, what)  # first: a name too long cannot even be looked up
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
    return out


def _resolved(path: Path) -> Path:
    """``path`` with symbolic links and ``..`` resolved; a name the system cannot look up (a NUL
    byte, a name too long) is compared as written, and refused later by :func:`check_output`."""
    try:
        return path.resolve()
    except (OSError, ValueError):
        return path.absolute()


def check_distinct(outputs: Mapping[str, str | Path | None]) -> None:
    """Refuse two outputs on one file: one would silently replace the other.

    Args:
        outputs: each output's option (``"--json"``) and its path; ``None`` for an output not asked for.

    Raises:
        EmpiricalError: naming both options and the file.

    >>> try:
    ...     check_distinct({"--json": "a.json", "--certificate": "./a.json", "--plot": None})
    ... except EmpiricalError as err:
    ...     print(err)
    expected different files for --json and --certificate, got a.json and ./a.json, the same file
    """
    seen: dict[Path, tuple[str, str | Path]] = {}
    for what, path in outputs.items():
        if path is None:
            continue
        resolved = _resolved(Path(path).expanduser())
        if resolved in seen:
            first, given = seen[resolved]
            same = f"{path} for both" if str(given) == str(path) else f"{given} and {path}, the same file"
            raise EmpiricalError(f"expected different files for {first} and {what}, got {same}")
        seen[resolved] = (what, path)


def check_output_dir(path: str | Path, *, what: str = "output folder") -> Path:
    """Check that ``path`` is, or can become, a writable folder (creating nothing) and return it."""
    out = _as_path(path, f"a folder for {what}")
    if out.is_symlink() and not _exists(out):
        raise EmpiricalError(f"expected a folder for {what}, but {out} is a symbolic link to "
                             f"{os.readlink(out)}, which does not exist")
    if _exists(out) and not out.is_dir():
        raise EmpiricalError(f"expected a folder for {what}, but {out} is an existing file")
    _writable_ancestor(out / "report", what, shown=out)  # a file the command will write inside
    return out


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed onto ``path`` only if the block succeeds.

    The temporary name keeps the extension, so writers that pick a format by suffix still work.
    Under ``torchrun`` only rank 0 renames it into place (:func:`empirical.distributed.is_writer`).
    """
    from empirical import distributed  # loads torch: not at import (the command line's --help)

    out = Path(path).expanduser()
    if out.is_dir():  # os.replace would raise IsADirectoryError only after the work is done
        raise EmpiricalError(f"expected a file name to write, got the existing folder {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, suffix=out.suffix, dir=out.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        if distributed.is_writer():
            # mkstemp makes the file private (and a writer may replace it with a private file of
            # its own): give it the mode a plain open() would
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
            os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def staged_files(folder: str | Path) -> Iterator[Path]:
    """A hidden staging folder inside ``folder`` whose files all move into ``folder`` together
    when the block succeeds (Ctrl-C and SIGTERM wait until they have), and that is deleted with
    its files if the block fails or is interrupted: ``folder`` then holds what it held before,
    never new files beside old ones. A staging folder left by a killed run is replaced.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with staged_files(folder) as staging:
    ...         _ = (staging / "report.md").write_text("new")
    ...     sorted(p.name for p in Path(folder).iterdir())
    ['report.md']
    """
    from empirical import distributed  # loads torch: not at import (the command line's --help)

    out = Path(folder).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    if not distributed.is_writer():  # under torchrun only rank 0 writes: the others stage privately
        with tempfile.TemporaryDirectory() as private:
            yield Path(private)
        return
    staging = out / f"{TEMPORARY_PREFIX}staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        with deferred():
            for entry in sorted(staging.iterdir()):
                entry.replace(out / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
        figure: a ``matplotlib.figure.Figure``.
        path: the output file (``.png``, ``.pdf``, ``.svg``, …: the format matplotlib writes for it).
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
