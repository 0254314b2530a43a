"""JSON from outside, read with limits that hold before any work is done on it: the one reader
of certificates, run files, configurations, shard indexes and resume files.

A document from a source one does not trust is refused, with the file and the limit named, when
it is larger than its kind allows (checked before reading), is not UTF-8, or nests deeper than its
format (checked before parsing, by a scan of bounded cost that never recurses). Its numbers are
kept as the text they were written as (:class:`RawNumber`): a 5,000-digit integer or ``1e999999999``
costs nothing to read, and a reader that wants a number checks the text's length first. A format
whose fields are numbers asks for them converted instead (``max_number_digits``): each literal's
length is checked before it is converted, and only finite values are taken.

>>> parse_json('{"a": [1e999999999, "x"]}', source="doc.json", max_depth=2)
{'a': [RawNumber('1e999999999'), 'x']}
>>> parse_json('{"a": [1, 2.5]}', source="doc.json", max_depth=2, max_number_digits=8)
{'a': [1, 2.5]}
>>> parse_json('[[[]]]', source="doc.json", max_depth=2)  # doctest: +ELLIPSIS
Traceback (most recent call last):
homogeneity.errors.HomogeneityError: doc.json: its arrays and objects nest deeper than 2 levels; ...
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homogeneity.errors import HomogeneityError

__all__ = ["RawNumber", "load_json", "parse_json", "read_text"]

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


@dataclass(frozen=True)
class RawNumber:
    """A JSON number as written, never converted to ``int`` or ``float``."""

    text: str

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 40 else f"{self.text[:20]}…({len(self.text)} characters)"
        return f"RawNumber({shown!r})"


def read_text(path: str | Path, *, max_bytes: int, what: str, source: str | None = None,
              error: type[Exception] = HomogeneityError) -> str:
    """The UTF-8 text of the file at ``path``, refused unread when it has more than ``max_bytes``;
    ``what`` names its kind (``"certificate"``), ``source`` the file in errors (its path if None),
    ``error`` is the exception class to raise (the calling package's own).

    Raises:
        error: the file is larger than ``max_bytes`` or is not UTF-8 (the first bad byte's offset
            named). ``OSError`` when it cannot be read.
    """
    path = Path(path)
    source = str(path) if source is None else source
    size = path.stat().st_size
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)  # no more, even if the file grows while it is read
    if max(size, len(data)) > max_bytes:
        raise error(f"{source}: {max(size, len(data)):,} bytes; expected a {what} of at most "
                    f"{max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{source}: byte {err.start} ({data[err.start]:#04x}) is not UTF-8; "
                    f"expected a {what} in UTF-8 text") from None


def _nests_deeper(text: str, max_depth: int) -> bool:
    """Whether matched brackets outside strings nest deeper than ``max_depth``.

    Linear and done by str/bytes methods: escaped backslashes and quotes are dropped, so every
    quote left opens or closes a string; what lies between strings is kept, reduced to its
    brackets (both kinds as ``[]``), and each pass removes the innermost pairs, one level. A pair
    left after ``max_depth`` passes is deeper. (Brackets that never close are the parser's to
    refuse, whose recursion guard raises ``RecursionError`` on a long run of them.)
    """
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    between = "".join(unescaped.split('"')[::2]).encode("utf-8", "surrogatepass")
    brackets = between.translate(_ONE_KIND, _NOT_BRACKETS)
    for _ in range(max_depth):
        brackets = brackets.replace(b"[]", b"")
    return b"[]" in brackets


def _unique_keys(source: str, error: type[Exception]) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise error(f"{source}: the key {key!r} appears twice in one object; "
                            "expected each key once (parsers differ on which one counts)")
            seen.add(key)
        return dict(items)

    return pairs


def _numbers(source: str, max_digits: int, error: type[Exception]) -> dict[str, Any]:
    """The parser's hooks that convert each number literal once its length is checked, and refuse
    NaN, Infinity and values that overflow to them."""
    def number(literal: str) -> int | float:
        if len(literal) > max_digits:
            shown = literal if len(literal) <= 20 else f"{literal[:20]}…"
            raise error(f"{source}: a number of {len(literal):,} characters ({shown}); expected "
                        f"numbers of at most {max_digits} characters")
        value = float(literal) if any(c in literal for c in ".eE") else int(literal)
        if isinstance(value, float) and not math.isfinite(value):
            raise error(f"{source}: {literal} is not a finite number; expected finite numbers")
        return value

    def constant(name: str) -> Any:
        raise error(f"{source}: {name} is not a JSON number; expected strict JSON")

    return {"parse_int": number, "parse_float": number, "parse_constant": constant}


def parse_json(text: str, *, source: str, max_depth: int, max_number_digits: int | None = None,
               error: type[Exception] = HomogeneityError) -> Any:
    """``text`` parsed as JSON, each object's keys unique, numbers as :class:`RawNumber` or, with
    ``max_number_digits``, converted.

    Args:
        text: the document.
        source: how to name it in an error (a file name).
        max_depth: the deepest nesting of arrays and objects its format has.
        max_number_digits: None: numbers stay text (:class:`RawNumber`); otherwise each is
            converted to ``int`` or ``float`` once its literal is found at most this long, and
            NaN, Infinity and literals that overflow are refused.
        error: the exception class to raise (the calling package's own).

    Raises:
        error: not JSON, nested deeper than ``max_depth``, a key twice in an object, or (converting)
            a number too long or not finite.
    """
    too_deep = error(f"{source}: its arrays and objects nest deeper than {max_depth} levels; "
                     f"expected at most {max_depth}")
    if _nests_deeper(text, max_depth):
        raise too_deep
    numbers: dict[str, Any] = (
        {"parse_int": RawNumber, "parse_float": RawNumber, "parse_constant": RawNumber}
        if max_number_digits is None else _numbers(source, max_number_digits, error))
    try:
        return json.loads(text, object_pairs_hook=_unique_keys(source, error), **numbers)
    except json.JSONDecodeError as err:
        raise error(f"{source}: not JSON ({err})") from None
    except RecursionError:
        raise too_deep from None


def load_json(path: str | Path, *, max_bytes: int, max_depth: int, what: str,
              max_number_digits: int | None = None, error: type[Exception] = HomogeneityError) -> Any:
    """:func:`parse_json` of the file at ``path`` read by :func:`read_text`, every error naming
    "the ``what`` ``path``" (a file that cannot be read too, with ``error``).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
    ...     _ = file.write('{"steps": 2000}'); file.flush()
    ...     load_json(file.name, max_bytes=100, max_depth=1, what="run file", max_number_digits=40)
    {'steps': 2000}
    """
    source = f"the {what} {path}"
    try:
        text = read_text(path, max_bytes=max_bytes, what=what, source=source, error=error)
    except OSError as err:
        raise error(f"cannot read {source}: {err.strerror or err}") from None
    return parse_json(text, source=source, max_depth=max_depth,
                      max_number_digits=max_number_digits, error=error)
