"""Input text: a deterministic default corpus of English sentences, or the user's own file.

The default sentences come from the docstrings of a fixed list of Python standard-library modules,
read with ``ast`` (nothing is imported), so every machine with the same Python builds the same
corpus without any download. Its SHA-256 is recorded with every result.
"""

from __future__ import annotations

import ast
import codecs
import functools
import hashlib
import re
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from empirical.errors import EmpiricalError
from empirical.validation import check_count

__all__ = ["Corpus", "load_corpus"]

# Modules with long prose docstrings; a fixed order keeps the corpus deterministic.
_DEFAULT_MODULES = (
    "argparse.py", "asyncio/events.py", "bisect.py", "calendar.py", "collections/__init__.py",
    "concurrent/futures/_base.py", "configparser.py", "contextlib.py", "csv.py", "dataclasses.py",
    "datetime.py", "decimal.py", "difflib.py", "email/message.py", "enum.py", "fractions.py",
    "functools.py", "gettext.py", "heapq.py", "http/client.py", "inspect.py", "logging/__init__.py",
    "mailbox.py", "pathlib.py", "pickle.py", "pydoc.py", "queue.py", "random.py", "shutil.py",
    "smtplib.py", "statistics.py", "string.py", "subprocess.py", "tarfile.py", "tempfile.py",
    "textwrap.py", "threading.py", "typing.py", "unittest/case.py", "zipfile/__init__.py",
    "zipfile.py",
)
# A sentence ends at . ! or ? followed by white space and a capital letter.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_CODE_LIKE = re.compile(r"[`_=<>{}\[\]|\\#*@$~^]|\(\)|>>>|\.\.\.|:\s*$|https?:|\b\w+\.\w+\(")


@dataclass(frozen=True)
class Corpus:
    """Sentences with a description of where they came from."""

    sentences: tuple[str, ...]
    source: str

    @property
    def sha256(self) -> str:
        """Fingerprint of the exact text measured, for reproducibility records."""
        return hashlib.sha256("\n".join(self.sentences).encode("utf-8")).hexdigest()

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[str]:
        return iter(self.sentences)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready record of the corpus."""
        return {"source": self.source, "n_sentences": len(self), "sha256": self.sha256}


def _is_english_sentence(text: str) -> bool:
    words = text.split()
    return (
        6 <= len(words) <= 40
        and text[0].isupper()
        and text[-1] in ".!?"
        and not _CODE_LIKE.search(text)
        and sum(w.isalpha() for w in words) >= 0.7 * len(words)
    )


def _docstring_sentences(source: str) -> list[str]:
    tree = ast.parse(source)
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    sentences: list[str] = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if not doc:
            continue
        for paragraph in re.split(r"\n\s*\n", doc):
            text = " ".join(paragraph.split())
            sentences.extend(s for s in _SENTENCE_END.split(text) if _is_english_sentence(s))
    return sentences


@functools.cache
def _default_sentences() -> tuple[str, ...]:
    """Sentences taken round-robin across the modules, so any prefix mixes many subjects (read
    once per process: parsing the standard library takes about a second)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    per_module = [
        _docstring_sentences((stdlib / relative).read_text(encoding="utf-8"))
        for relative in _DEFAULT_MODULES
        if (stdlib / relative).is_file()
    ]
    seen: set[str] = set()
    sentences: list[str] = []
    for rank in range(max(map(len, per_module), default=0)):
        for module_sentences in per_module:
            if rank < len(module_sentences) and module_sentences[rank] not in seen:
                seen.add(module_sentences[rank])
                sentences.append(module_sentences[rank])
    return tuple(sentences)


def _utf16(data: bytes) -> str:
    """How ``data`` shows itself to be UTF-16 ('' if it does not): a byte-order mark, or the NUL
    high bytes that ASCII text has in every other byte."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "it starts with a UTF-16 byte-order mark"
    sample = data[:4096]
    for parity, endian in ((1, "little-endian"), (0, "big-endian")):
        zeros = sample[parity::2].count(0)
        if len(sample) >= 4 and zeros >= 0.9 * (len(sample) // 2) and not sample[1 - parity::2].count(0):
            return f"{endian} without a byte-order mark: every other byte is NUL"
    return ""


def _read_text(path: Path) -> str:
    """The file's text; binary data and encodings other than UTF-8 are refused, not guessed."""
    data = path.read_bytes()
    utf16 = _utf16(data)
    if utf16:
        raise EmpiricalError(
            f"expected a UTF-8 text file of sentences, but {path} is UTF-16 text ({utf16}); convert "
            f"it, e.g. iconv -f utf-16 -t utf-8"
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise EmpiricalError(
            f"expected a UTF-8 text file of sentences, but {path} holds binary data (a NUL byte at "
            f"offset {nul})"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise EmpiricalError(
            f"expected a UTF-8 text file of sentences, but {path} has byte 0x{data[err.start]:02x} at "
            f"offset {err.start} that is not UTF-8 (Latin-1 or another encoding?); convert it, e.g. "
            f"iconv -f latin1 -t utf-8"
        ) from None


def _file_sentences(path: Path) -> list[str]:
    """One text per line, or one per paragraph when blank lines separate multi-line paragraphs.

    Lines starting with ``#`` are comments (the layout of the Brown corpus file). Lines end at
    ``\n``, ``\r\n`` or ``\r`` only: Unicode's other line breaks (U+2028, U+0085, form feed…)
    stay inside their sentence, as a text editor shows it, rather than splitting it in two.
    """
    text = _read_text(path).replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.strip() for line in text.split("\n") if not line.lstrip().startswith("#")]
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    paragraphs = [p for p in paragraphs if p]
    if len(paragraphs) > 1 and any(len(p) > 1 for p in paragraphs):
        return [" ".join(p) for p in paragraphs]
    return [line for p in paragraphs for line in p]


def load_corpus(path: str | Path | None = None, n: int | None = 100) -> Corpus:
    """Load up to ``n`` sentences (all of them when ``n`` is None).

    Args:
        path: a text file: one sentence per line, or paragraphs separated by blank lines with
            ``#`` comment lines. None: the built-in standard-library docstring corpus.
        n: how many sentences to keep, from the start.

    Raises:
        EmpiricalError: a missing, empty, binary or non-UTF-8 file, a folder, or ``n`` < 1.

    >>> corpus = load_corpus(n=3)
    >>> len(corpus), all(s[0].isupper() and s[-1] in ".!?" for s in corpus)
    (3, True)
    """
    if n is not None:
        n = check_count(n, "n (the number of sentences)")
    if path is not None and (not isinstance(path, str | Path) or not str(path).strip()):
        # An empty name is an unset shell variable, not the current folder.
        raise EmpiricalError(f"expected path to be a file name, got {path!r}")
    if path is None:
        sentences, source = list(_default_sentences()), "python-stdlib-docstrings"
    else:
        file = Path(path).expanduser()
        if file.is_dir():
            raise EmpiricalError(f"expected a text file of sentences, but {file} is a folder")
        if not file.is_file():
            raise EmpiricalError(f"expected a text file of sentences, but {file} does not exist")
        sentences, source = _file_sentences(file), str(file)
    if not sentences:
        raise EmpiricalError(f"expected at least one sentence, but the corpus {source} is empty")
    return Corpus(tuple(sentences[:n] if n is not None else sentences), source)
