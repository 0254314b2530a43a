"""The paper's five sublayer variants (Section 4.2) as plain data, importing nothing heavy.

``normsat projection`` offers these names without loading torch;
:mod:`empirical.measure.components` builds the sublayers from the same table.

>>> SUBLAYER_VARIANTS["feed-forward (no biases)"]
('feed-forward', {'bias': False})
"""

from __future__ import annotations

__all__ = ["SUBLAYER_VARIANTS"]

SUBLAYER_VARIANTS: dict[str, tuple[str, dict[str, bool]]] = {
    "attention": ("attention", {}),
    "attention (no biases)": ("attention", {"bias": False}),
    "feed-forward": ("feed-forward", {}),
    "feed-forward (no biases)": ("feed-forward", {"bias": False}),
    "feed-forward (no biases or residual)": ("feed-forward", {"bias": False, "residual": False}),
}
"""Each variant's sublayer (``attention`` or ``feed-forward``) and the options it is built with."""
