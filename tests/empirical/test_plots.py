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


def _head(layer: int, head: int, kind: str = "local", margin: float | None = None) -> Any:
    return SimpleNamespace(layer=layer, head=head, kind=kind, positions=1.0, positions_std=0.0,
                           split=0.0, margin=1.0 + layer + 0.5 * head if margin is None else margin)


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(match=lambda artist: hasattr(artist, "get_text"))
            if t.get_text()]


def test_head_histograms_count_whole_heads_and_keep_a_constant_series_at_its_value(
        drawn: list[Figure], tmp_path: Any) -> None:
    heads = [_head(layer, head) for layer in range(2) for head in range(3)]
    plot_atlas({"A": _Atlas(heads, 2, 3), "B": _Atlas(heads, 2, 3)}, tmp_path / "heads.png")
    histograms = [ax for ax in drawn[-1].axes if ax.get_ylabel() == "heads"]
    assert len(histograms) == 3
    # Every query attends to at least 1 position, and the other statistics are ≥ 0: each axis
    # starts at its lowest possible value, never at 0 for the positions or at −0.5 for a constant.
    assert [ax.get_xlim() for ax in histograms] == [(1.0, 2.0), (0.0, 1.0), (0.0, 1.0)]
    for ax in histograms:
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
    heads = [_head(layer, head) for layer in range(2) for head in range(3)]
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


def test_heads_of_one_class_are_coloured_by_their_margins_on_one_scale(drawn: list[Figure],
                                                                       tmp_path: Any) -> None:
    """A grid of one class would be one solid colour: the margins are shown instead, on a scale
    common to the atlases so that their colours compare."""
    local = [_head(layer, head) for layer in range(2) for head in range(3)]
    flat = [_head(layer, head, "global", margin=0.5) for layer in range(2) for head in range(3)]
    plot_atlas({"A": _Atlas(local, 2, 3), "B": _Atlas(flat, 2, 3)}, tmp_path / "heads.png")
    grids = [ax for ax in drawn[-1].axes if ax.get_ylabel() == "layer"]
    assert len(grids) == 2
    for ax, heads in zip(grids, (local, flat)):
        image = ax.images[0]
        assert image.get_array().tolist() == [[h.margin for h in heads[3 * i:3 * i + 3]] for i in range(2)]
        assert (image.norm.vmin, image.norm.vmax) == (0.5, 3.0)  # the range of both atlases
        assert "all 6 heads" in ax.get_title() and "margin" in ax.get_title()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]  # heads from 1
    assert [text.get_text() for text in grids[0].texts] == ["1", "1.5", "2", "2", "2.5", "3"]


def test_a_grid_with_nothing_to_colour_says_so_in_words(drawn: list[Figure], tmp_path: Any) -> None:
    heads = [_head(layer, head, margin=2.0) for layer in range(2) for head in range(3)]
    plot_atlas({"A": _Atlas(heads, 2, 3)}, tmp_path / "heads.png")
    panel = drawn[-1].axes[0]
    assert not panel.images and not panel.axison  # no solid block of colour
    assert panel.get_title() == "A: all 6 heads local"
    assert [text.get_text() for text in panel.texts] == [
        "every head local:\na grid of one colour would show nothing"]


def _saturation(steps: list[int], at_1000: list[float], limit: list[float]) -> list[dict[str, Any]]:
    return [{"step": step, "saturation": {"1000": {"embeddings": 1.0, "layer 1": a},
                                         "inf": {"embeddings": 1.0, "layer 1": b}}}
            for step, a, b in zip(steps, at_1000, limit)]


def test_a_scale_that_repeats_the_limit_gets_no_panel(drawn: list[Figure], tmp_path: Any) -> None:
    plot_saturation(_saturation([0, 5, 50], [0.1, 0.802, 0.3], [0.1, 0.8, 0.3]), tmp_path / "s.png")
    heatmaps = [ax for ax in drawn[-1].axes if ax.images]
    assert len(heatmaps) == 1
    assert heatmaps[0].get_title() == ("c = ∞ (exact limit)\n"
                                      "c = 1000 within 0.002 of it everywhere (not drawn)")
    assert heatmaps[0].images[0].get_array().tolist() == [[1.0, 1.0, 1.0], [0.1, 0.8, 0.3]]


def test_a_scale_that_differs_from_the_limit_is_drawn_as_the_difference(drawn: list[Figure],
                                                                        tmp_path: Any) -> None:
    plot_saturation(_saturation([0, 5, 50], [0.1, 0.75, 0.3], [0.1, 0.8, 0.3]), tmp_path / "s.png")
    limit, difference = (ax for ax in drawn[-1].axes if ax.images)
    assert limit.get_title() == "c = ∞ (exact limit)"
    assert difference.get_title() == "c = 1000 minus c = ∞"
    values = difference.images[0].get_array().tolist()
    assert values[0] == [0.0, 0.0, 0.0] and values[1] == pytest.approx([0.0, -0.05, 0.0])
    assert (difference.images[0].norm.vmin, difference.images[0].norm.vmax) == pytest.approx((-0.05, 0.05))
    assert [t.get_text() for t in difference.texts][4] == "-0.050"


def _run(steps: list[int], norms: list[float]) -> dict[str, Any]:
    from empirical.training.fits import fit_norm_growth

    records = [{"step": step, "norm": norm, "layers": {"embeddings": norm / 2, "blocks.0": norm / 3},
                "layer_cosine_prev": None if step == steps[0] else {"embeddings": 0.9, "blocks.0": 0.8}}
               for step, norm in zip(steps, norms)]
    checkpoints = [{"step": r["step"], "layer_cosine_prev": r["layer_cosine_prev"]} for r in records]
    return {"records": records, "checkpoints": checkpoints, **fit_norm_growth(steps, norms)}


def test_the_fit_is_drawn_over_the_fitted_steps_with_the_fitted_law(drawn: list[Figure],
                                                                    tmp_path: Any) -> None:
    import math

    from empirical.training.fits import LAWS, best_fit
    from empirical.training.plots import plot_norms

    steps = list(range(5, 305, 5))
    run = _run(steps, [20.0 + 3.0 * math.sqrt(t) + 0.05 * math.sin(t) for t in steps])
    plot_norms(run, tmp_path / "norms.png")
    total = drawn[-1].axes[0]
    data, fit = total.get_lines()
    best = best_fit(run)
    assert best is not None and best["law"] == "sqrt"
    law = LAWS[best["law"]]
    fit_steps, fit_norms = fit.get_xdata(), fit.get_ydata()
    assert (fit_steps[0], fit_steps[-1]) == (5, 300)  # the fitted range, no more and no less
    assert fit_norms[0] == pytest.approx(float(law.fn(5.0, *best["params"].values())), rel=1e-12)
    assert fit_norms[-1] == pytest.approx(float(law.fn(300.0, *best["params"].values())), rel=1e-12)
    assert abs(fit_norms[0] - data.get_ydata()[0]) < 0.1  # starts at the first data point
    assert "\nto all 60 records, steps 5–300 (R² " in fit.get_label()


def test_the_per_layer_panel_names_the_parameter_norm_and_has_a_legend(drawn: list[Figure],
                                                                       tmp_path: Any) -> None:
    plot_records(_run([0, 1, 2], [3.0, 4.0, 5.0])["records"], tmp_path / "norms.png")
    per_layer = drawn[-1].axes[1]
    assert per_layer.get_ylabel() == "parameter norm per layer"
    assert [t.get_text() for t in per_layer.get_legend().get_texts()] == ["embeddings", "layer 1"]
