"""Plot properties a reader relies on: whole head counts, a constant series at its value, cell
numbers that contrast with their cell, and labels without literal underscores."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from matplotlib import colormaps
from matplotlib.figure import Figure

from empirical.measure.heads import CLASSES, plot_atlas
from empirical.measure.plotting import text_color
from empirical.training.norms import plot_records
from empirical.training.plots import plot_grid, plot_saturation


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plotting functions save, kept for inspection."""
    figures: list[Figure] = []
    save = Figure.savefig

    def keep(self: Figure, *args: Any, **kwargs: Any) -> None:
        figures.append(self)
        save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


class _Atlas:
    def __init__(self, heads: list[Any], num_layers: int, n_heads: int) -> None:
        self.heads, self.num_layers, self.n_heads = heads, num_layers, n_heads

    def grid(self) -> list[list[str]]:
        return [[h.kind for h in self.heads if h.layer == layer] for layer in range(self.num_layers)]

    def counts(self) -> dict[str, int]:
        return {k: sum(h.kind == k for h in self.heads) for k in CLASSES}


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(match=lambda artist: hasattr(artist, "get_text"))
            if t.get_text()]


def test_head_histograms_count_whole_heads_and_keep_a_constant_series_at_its_value(
        drawn: list[Figure], tmp_path: Any) -> None:
    heads = [SimpleNamespace(layer=layer, head=head, kind="local", positions=1.0, positions_std=0.0,
                             split=0.0) for layer in range(2) for head in range(3)]
    plot_atlas({"A": _Atlas(heads, 2, 3), "B": _Atlas(heads, 2, 3)}, tmp_path / "heads.png")
    histograms = [ax for ax in drawn[-1].axes if ax.get_ylabel() == "heads"]
    assert len(histograms) == 3
    for ax in histograms:
        assert ax.get_xlim() == (0.0, 1.0)  # all statistics are ≥ 0: no axis from −0.5 to 0.5
        ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)


def _luminance(rgba: tuple[float, ...]) -> float:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in rgba[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


@pytest.mark.parametrize("cmap", ["RdBu_r", "viridis"])
def test_cell_text_takes_the_contrasting_colour(cmap: str) -> None:
    for i in range(21):
        cell = colormaps[cmap](i / 20)
        chosen = _luminance((0.0, 0.0, 0.0) if text_color(cell) == "black" else (1.0, 1.0, 1.0))
        other = 1.0 if chosen == 0.0 else 0.0
        assert _contrast(chosen, _luminance(cell)) >= _contrast(other, _luminance(cell))
    assert text_color(colormaps["RdBu_r"](1.0)) == "white"   # dark red
    assert text_color(colormaps["viridis"](1.0)) == "black"  # yellow


def test_heatmap_numbers_contrast_with_their_cells(drawn: list[Figure], tmp_path: Any) -> None:
    evaluations = [{"step": step, "saturation": {"inf": {f"layer {i}": -1.0 + 0.5 * i for i in range(5)}}}
                   for step in (0, 100)]
    plot_saturation(evaluations, tmp_path / "saturation.png")
    cells = [{"lr": lr, "weight_decay": 0.0, "final_norm": norm, "best": "sqrt"}
             for lr, norm in ((1e-3, 1.0), (1e-2, 100.0))]
    plot_grid(cells, tmp_path / "grid.png")
    for fig in drawn:
        ax = fig.axes[0]
        image = ax.images[0]
        for text in ax.texts:
            x, y = (round(v) for v in text.get_position())
            value = image.get_array()[y][x]
            cell = image.cmap(image.norm(value))
            assert text.get_color() == text_color(cell)
            assert _contrast(_luminance(cell), 0.0 if text.get_color() == "black" else 1.0) >= 4.5


def test_labels_have_no_literal_underscore(drawn: list[Figure], tmp_path: Any) -> None:
    records = [{"step": step, "norm": 1.0 + step, "layers": {"layer 1": 1.0 + step},
                "layer_cosine_prev": None if step == 0 else {"layer 1": 0.99}} for step in range(3)]
    plot_records(records, tmp_path / "norms.png", fitted=("√t", [0, 2], [1.0, 3.0]))
    plot_saturation([{"step": 0, "saturation": {"1000": {"layer 1": 0.5}}}], tmp_path / "s.png")
    texts = [text for fig in drawn for text in _texts(fig)]
    assert any("theta_t" in text for text in texts)
    for text in texts:
        plain = re.sub(r"\$[^$]*\$", "", text)  # mathtext renders its underscores as subscripts
        assert "_" not in plain, text


def test_layers_are_numbered_as_the_similarity_measure_does(drawn: list[Figure], tmp_path: Any) -> None:
    """Layer 1 is the first block in the head atlas grid and in the per-layer norm legends."""
    heads = [SimpleNamespace(layer=layer, head=head, kind="local", positions=1.0, positions_std=0.0,
                             split=0.0) for layer in range(2) for head in range(3)]
    plot_atlas({"A": _Atlas(heads, 2, 3)}, tmp_path / "heads.png")
    grid = next(ax for ax in drawn[-1].axes if ax.get_ylabel() == "layer")
    assert [t.get_text() for t in grid.get_yticklabels()] == ["1", "2"]
    records = [{"step": step, "norm": 1.0, "layers": {"embeddings": 1.0, "blocks.0": 1.0, "blocks.1": 1.0},
                "layer_cosine_prev": None if step == 0 else {"embeddings": 0.9, "blocks.0": 0.9,
                                                             "blocks.1": 0.9}} for step in range(3)]
    plot_records(records, tmp_path / "norms.png")
    legends = [text.get_text() for ax in drawn[-1].axes if ax.get_legend()
               for text in ax.get_legend().get_texts()]
    assert {"embeddings", "layer 1", "layer 2"} <= set(legends) and "blocks.0" not in legends
