"""JSON from outside, read with limits that hold before any work is done on it.

A document from a source one does not trust is refused, with the file and the limit named, when
it is larger than its kind allows (checked before reading), is not UTF-8, or nests deeper than its
format (checked before parsing, by a scan of bounded cost that never recurses). Its numbers are
kept as the text they were written as (:class:`RawNumber`): a 5,000-digit integer or ``1e999999999``
costs nothing to read, and a reader that wants a number checks the text's length first.

>>> parse_json('{"a": [1e999999999, "x"]}', source="doc.json", max_depth=2)
{'a': [RawNumber('1e999999999'), 'x']}
>>> parse_json('[[[]]]', source="doc.json", max_depth=2)  # doctest: +ELLIPSIS
Traceback (most recent call last):
homogeneity.errors.HomogeneityError: doc.json: its arrays and objects nest deeper than 2 levels; ...
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homogeneity.errors import HomogeneityError

__all__ = ["RawNumber", "parse_json", "read_text"]

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


@dataclass(frozen=True)
class RawNumber:
    """A JSON number as written, never converted to ``int`` or ``float``."""

    text: str

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 40 else f"{self.text[:20]}…({len(self.text)} characters)"
        return f"RawNumber({shown!r})"


def read_text(path: str | Path, *, max_bytes: int, what: str) -> str:
    """The UTF-8 text of the file at ``path``, refused unread when it has more than ``max_bytes``.

    Raises:
        HomogeneityError: the file is larger than ``max_bytes`` or is not UTF-8 (the first bad
            byte's offset named). ``OSError`` when it cannot be read.
    """
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)  # no more, even if the file grows while it is read
    if max(size, len(data)) > max_bytes:
        raise HomogeneityError(f"{path}: {max(size, len(data)):,} bytes; expected a {what} of at most "
                               f"{max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise HomogeneityError(f"{path}: byte {err.start} ({data[err.start]:#04x}) is not UTF-8; "
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


def _unique_keys(source: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise HomogeneityError(f"{source}: the key {key!r} appears twice in one object; "
                                       "expected each key once (parsers differ on which one counts)")
            seen.add(key)
        return dict(items)

    return pairs


def parse_json(text: str, *, source: str, max_depth: int) -> Any:
    """``text`` parsed as JSON, numbers as :class:`RawNumber`, each object's keys unique.

    Args:
        text: the document.
        source: how to name it in an error (a file name).
        max_depth: the deepest nesting of arrays and objects its format has.

    Raises:
        HomogeneityError: not JSON, nested deeper than ``max_depth``, or a key twice in an object.
    """
    too_deep = HomogeneityError(f"{source}: its arrays and objects nest deeper than {max_depth} levels; "
                                f"expected at most {max_depth}")
    if _nests_deeper(text, max_depth):
        raise too_deep
    try:
        return json.loads(text, parse_int=RawNumber, parse_float=RawNumber, parse_constant=RawNumber,
                          object_pairs_hook=_unique_keys(source))
    except json.JSONDecodeError as err:
        raise HomogeneityError(f"{source}: not JSON ({err})") from None
    except RecursionError:
        raise too_deep from None
