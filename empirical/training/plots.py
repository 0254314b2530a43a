"""Figures of training runs: norms with the fitted law, saturation while training, the LR × WD grid."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from empirical.errors import EmpiricalError
from empirical.measure.plotting import text_color
from empirical.outputs import save_figure
from empirical.training.fits import growth_curve
from empirical.training.norms import plot_records

__all__ = ["plot_grid", "plot_norm_comparison", "plot_norms", "plot_saturation"]


def plot_norms(run: Mapping[str, Any], path: str | Path, *, title: str = "") -> Path:
    """Total norm with the best fitted law, per-layer norms (Fig. 2 right), per-layer cosine between
    consecutive evaluation checkpoints (Fig. 3), from a ``normsat.train/2`` document."""
    records = run["records"]
    # Per-step records give the total and per-layer norms; the cosines come from the log-spaced
    # checkpoints, as in the paper (consecutive saved checkpoints, not consecutive steps).
    cosines = {c["step"]: c["layer_cosine_prev"] for c in run["checkpoints"]}
    merged = [{**r, "layer_cosine_prev": cosines.get(r["step"])} for r in records]
    fitted = growth_curve(run, records[0]["step"], records[-1]["step"])
    return plot_records(merged, path, fitted=fitted, title=title)


def plot_norm_comparison(runs: Sequence[Mapping[str, Any]], path: str | Path, *,
                         title: str = "") -> Path:
    """Total norm against step of several ``normsat.train/2`` runs, each with its best fitted law,
    labelled by weight decay (one panel: the growth laws side by side)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0), dpi=110)
    ax = fig.subplots()
    for index, run in enumerate(runs):
        records, color = run["records"], f"C{index % 10}"
        label = f"wd {run['config']['weight_decay']:g}"
        ax.plot([r["step"] for r in records], [r["norm"] for r in records], ".", markersize=2,
                color=color, alpha=0.5, label=f"{label}: ‖θ‖")
        fitted = growth_curve(run, records[0]["step"], records[-1]["step"])
        if fitted is not None:
            law, steps, norms = fitted
            ax.plot(steps, norms, "-", color=color, label=f"{label}: {law}")
    ax.set_xlabel("step")
    ax.set_ylabel("parameter norm ‖θ‖")
    ax.grid(alpha=0.3)
    # beside the axes: inside, it covers the first steps, where the norm changes most
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if title:
        ax.set_title(title)
    return _save(fig, path)


VISIBLE_DIFFERENCE = 0.005
"""A difference in cosine below this rounds away in the cells' two decimals: a heatmap of such
differences would show nothing."""


def plot_saturation(evaluations: Sequence[Mapping[str, Any]], path: str | Path, *,
                    title: str = "") -> Path:
    """Heatmap, layers × evaluation steps, of cos(h(x; θ_t), h(x; c·θ_t)) at the exact limit (or at
    the largest measured c without it), and beside it, for each other measured c, a heatmap of its
    difference from that one; a c whose difference stays below :data:`VISIBLE_DIFFERENCE`
    everywhere gets no panel (it would repeat the first), the first panel's title says so."""
    from matplotlib.figure import Figure

    measured = [e for e in evaluations if "saturation" in e]
    if not measured:
        raise EmpiricalError("expected evaluations with saturation measurements, got none "
                             "(the run was made without saturation)")
    scales = list(measured[0]["saturation"])
    reference = "inf" if "inf" in scales else scales[-1]
    layers = list(measured[0]["saturation"][reference])
    grids = {scale: [[e["saturation"][scale][layer] for e in measured] for layer in layers]
             for scale in scales}
    differences = {scale: [[a - b for a, b in zip(row, base)]
                           for row, base in zip(grids[scale], grids[reference])]
                   for scale in scales if scale != reference}
    largest = {scale: max(abs(d) for row in grid for d in row) for scale, grid in differences.items()}
    drawn = [scale for scale in differences if largest[scale] >= VISIBLE_DIFFERENCE]
    # constrained: the suptitle, two-line panel titles and colour bars never overlap
    fig = Figure(figsize=(5.2 * (1 + len(drawn)), 0.45 * len(layers) + 2.6), dpi=110,
                 layout="constrained")
    axes = fig.subplots(1, 1 + len(drawn), squeeze=False)[0]
    name = _scale_name(reference)
    hidden = [f"c = {scale} within {_thousandths_above(largest[scale])} of it everywhere (not drawn)"
              for scale in differences if scale not in drawn]
    _heatmap(fig, axes[0], grids[reference], measured, layers, (-1.0, 1.0),
             title="\n".join([name, *hidden]),
             label=r"cos(h(x; $\theta_t$), h(x; c·$\theta_t$))")
    for ax, scale in zip(axes[1:], drawn):
        bound = largest[scale]
        _heatmap(fig, ax, differences[scale], measured, layers, (-bound, bound),
                 title=f"c = {scale} minus {name.split(' (')[0]}", label="difference in cosine",
                 digits=3)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _thousandths_above(value: float) -> str:
    """The smallest whole number of thousandths at least ``value`` (and at least 0.001): a bound
    that the three decimals shown do not round below the value."""
    return f"{max(math.ceil(round(value * 1000, 6)), 1) / 1000:.3f}"


def _scale_name(scale: str) -> str:
    return "c = ∞ (exact limit)" if scale == "inf" else f"c = {scale}"


def _heatmap(fig: Any, ax: Any, grid: Sequence[Sequence[float]],
             measured: Sequence[Mapping[str, Any]], layers: Sequence[str],
             limits: tuple[float, float], *, title: str, label: str, digits: int = 2) -> None:
    """One layers × steps heatmap with its value in each cell and its own colour bar."""
    image = ax.imshow(grid, aspect="auto", origin="lower", vmin=limits[0], vmax=limits[1],
                      cmap="RdBu_r")
    ax.set_xticks(range(len(measured)), [str(e["step"]) for e in measured], rotation=60,
                  fontsize="x-small")
    ax.set_yticks(range(len(layers)), layers, fontsize="small")
    ax.set_xlabel("step")
    ax.set_title(title, fontsize="medium")
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.{digits}f}", ha="center", va="center", fontsize=6,
                    color=text_color(image.to_rgba(value)))
    fig.colorbar(image, ax=ax, label=label, shrink=0.9)


def plot_grid(cells: Sequence[Mapping[str, Any]], path: str | Path, *, title: str = "") -> Path:
    """Heatmap of the final norm over learning rates × weight decays, each cell labelled with its
    best growth law; a cell without a result (``diverged`` when the loss stopped being finite,
    ``failed`` when its fit failed, or missing) is left blank and hatched."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    lrs = sorted({c["lr"] for c in cells})
    decays = sorted({c["weight_decay"] for c in cells})
    by_key = {(c["lr"], c["weight_decay"]): c for c in cells}
    values = [[_final_norm(by_key.get((lr, wd))) for lr in lrs] for wd in decays]
    fig = Figure(figsize=(1.3 * len(lrs) + 2.8, 0.9 * len(decays) + 1.8), dpi=110)
    ax = fig.subplots()
    finite = [v for row in values for v in row if not math.isnan(v)]
    image = ax.imshow(values, aspect="auto", origin="lower", cmap="viridis",
                      vmin=min(finite, default=0.0), vmax=max(finite, default=1.0))
    for i, wd in enumerate(decays):
        for j, lr in enumerate(lrs):
            cell = by_key.get((lr, wd))
            if math.isnan(values[i][j]):  # imshow leaves NaN blank; the hatch says "no value"
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1.0, 1.0, fill=False, hatch="//",
                                       edgecolor="0.6", linewidth=0.0))
            text = "—" if cell is None else (
                "diverged" if cell.get("diverged") else "failed" if cell.get("failed")
                else f"{cell['final_norm']:.3g}\n{cell['best']}")
            value: Any = values[i][j]
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if math.isnan(value) else text_color(image.to_rgba(value)))
    ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs])
    ax.set_yticks(range(len(decays)), [f"{wd:g}" for wd in decays])
    ax.set_xlabel("learning rate")
    ax.set_ylabel("weight decay")
    fig.colorbar(image, ax=ax, label="final ‖θ‖")
    if title:
        ax.set_title(title)
    return _save(fig, path)


def _save(fig: Any, path: str | Path) -> Path:
    return save_figure(fig, path, bbox_inches="tight")  # tight: colorbars and rotated step labels stay inside


def _final_norm(cell: Mapping[str, Any] | None) -> float:
    if cell is None or cell.get("diverged") or cell.get("failed"):
        return math.nan
    return float(cell["final_norm"])
