"""Figures in the style of the paper: one line per model variant, layers on the x axis."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from empirical.measure.similarity import SimilarityResult
from empirical.outputs import PLOT_SUFFIXES, save_figure

__all__ = ["PLOT_SUFFIXES", "plot_similarity", "text_color"]


def text_color(rgba: Iterable[float]) -> str:
    """Black or white, whichever contrasts more with a cell of colour ``rgba`` (sRGB in [0, 1]):
    black on a cell whose relative luminance (WCAG 2) is above 0.179, where the two contrast
    ratios are equal, white below.

    >>> text_color((0.4, 0.0, 0.05, 1.0)), text_color((1.0, 1.0, 0.6, 1.0))  # dark red, yellow
    ('white', 'black')
    """
    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(float(c)) for c in list(rgba)[:3])
    luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue
    return "black" if luminance > 0.179 else "white"


def plot_similarity(
    results: Mapping[str, SimilarityResult], path: str | Path, *, title: str = ""
) -> Path:
    """Plot per-layer similarity of several results (e.g. pretrained and random-init) to a PNG.

    Encoder–decoder results are drawn as one line per stack, so encoder and decoder layers are
    never joined. The format follows the extension (:data:`PLOT_SUFFIXES`); the file is written
    atomically.
    """
    # A bare Figure renders with Agg and leaves pyplot's global backend and state alone.
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    lines = sum(len(result.by_stack()) for result in results.values())
    crowded = lines > 3  # many lines: the legend goes beside the axes, not over the data
    fig = Figure(figsize=(9.0 if crowded else 6.4, 4.0), dpi=120)
    ax = fig.subplots()
    for index, (label, result) in enumerate(results.items()):
        color = f"C{index % 10}"  # matplotlib's default cycle, one color per result
        for (stack, values), style in zip(result.by_stack().items(), ("-", "--")):
            name = f"{label} ({stack})" if stack else label
            ax.plot(range(len(values)), values, style, marker="o", color=color, label=name)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    first = next(iter(results.values()))
    against = "s-h(x; θ)), the exact c → ∞ limit" if math.isinf(first.scale) else \
        f"h(x; {first.scale:g}·θ))"
    ax.set_ylabel(f"cos(h(x; θ), {against}")
    ax.set_ylim(-0.1, 1.05)
    ax.axhline(0.0, color="0.8", linewidth=0.8)
    ax.grid(alpha=0.3)
    if crowded:
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    else:
        ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return save_figure(fig, path)
