"""How the ``normsat`` command speaks on stderr, importing nothing heavy (``--help`` loads it)."""

from __future__ import annotations

import sys

__all__ = ["show_warning_line"]


def show_warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """``warnings.showwarning`` of the ``normsat`` command: one line, ``normsat: warning: …``,
    without the library's source line; also installed in worker processes (``grid``)."""
    print(f"normsat: warning: {message}", file=sys.stderr)
