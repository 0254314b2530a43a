"""Report section: a model trained on CPU, its norm growth law and its saturation while training."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from empirical.cli.sections.context import ReportContext, Section
from empirical.errors import EmpiricalError
from empirical.training.fits import best_fit
from empirical.training.norms import layer_labels
from empirical.training.plots import plot_norm_comparison, plot_norms, plot_saturation
from empirical.training.runs import TrainConfig, read_run, train
from empirical.training.shape import describe_shape

__all__ = ["SHORT_RUN", "SHORT_RUN_DECAY", "comparison_markdown", "loss_sentence", "run_markdown",
           "saturation_sentence", "training_section"]

SHORT_RUN = TrainConfig(arch="pre", layers=2, width=32, steps=300, evaluations=5, eval_sentences=16)
"""The run the report trains when no ``--train-dir`` is given (17 s measured on 2 shared cores)."""
SHORT_RUN_DECAY = replace(SHORT_RUN, weight_decay=1.0, limit_similarity=False)
"""The same run with weight decay (the paper's Figure 2 contrast); its saturation is not measured,
to keep the two runs near the report's budget of about a minute."""


def _cell(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


SHAPE_TOLERANCE = (0.01, 0.05)
"""Moves of a similarity curve smaller than the larger of 0.01 and 5% of its range are noise, not
turns (:func:`empirical.training.shape.describe_shape`)."""


def saturation_sentence(evaluations: Sequence[Mapping[str, Any]]) -> str | None:
    """The shape of the last hidden state's similarity to the saturated network over the
    evaluations that measured it: where it rose, peaked, fell and ended, in words and numbers
    (None: not measured).

    >>> sat = lambda v: {"inf": {"embeddings": 1.0, "layer 1": v}}
    >>> print(saturation_sentence([{"step": s, "saturation": sat(v)} for s, v in
    ...    ((0, 0.011), (4, 0.84), (17, 0.835), (73, 0.2), (300, -0.153))]))  # doctest: +NORMALIZE_WHITESPACE
    Saturation while training: the similarity of layer 1 to the exact limit (c = ∞) rose from
    0.011 at step 0 to a peak of 0.840 at steps 4–17 (held within 0.05), then fell to -0.153 at
    step 300.
    """
    measured = [e for e in evaluations if "saturation" in e]
    if len(measured) < 2:
        return None
    scale = "inf" if "inf" in measured[0]["saturation"] else list(measured[0]["saturation"])[-1]
    layer = list(measured[0]["saturation"][scale])[-1]
    points = [(e["step"], e["saturation"][scale][layer]) for e in measured]
    points = [(step, value) for step, value in points if value is not None and math.isfinite(value)]
    if len(points) < 2:
        return None
    steps, values = zip(*points)
    floor, share = SHAPE_TOLERANCE
    tolerance = float(f"{max(floor, share * (max(values) - min(values))):.2g}")  # as said
    where = "the exact limit (c = ∞)" if scale == "inf" else f"c = {scale}"
    return (f"Saturation while training: the similarity of {layer} to {where} "
            f"{describe_shape(steps, values, tolerance=tolerance)}.")


def loss_sentence(evaluations: Sequence[Mapping[str, Any]]) -> str:
    """Where held-out loss was lowest, and whether it rose after that (the run overfits).

    >>> evals = [{"step": s, "loss": v} for s, v in ((0, 9.0), (369, 4.47), (2000, 7.14))]
    >>> loss_sentence(evals)
    'Held-out loss was lowest at step 369 (4.470) and rose to 7.140 by step 2000: the run overfits.'
    """
    lowest = min(evaluations, key=lambda e: e["loss"])
    last = evaluations[-1]
    if last["loss"] > lowest["loss"]:
        return (f"Held-out loss was lowest at step {lowest['step']} ({lowest['loss']:.3f}) and rose "
                f"to {last['loss']:.3f} by step {last['step']}: the run overfits.")
    return (f"Held-out loss was lowest at the last evaluation, step {last['step']} "
            f"({last['loss']:.3f}): the run does not overfit.")


def run_markdown(run: Mapping[str, Any], norms_png: str, saturation_png: str | None) -> str:
    """Markdown of a ``normsat.train/2`` document: fits, gradient projection, evaluations, layers."""
    config, records = run["config"], run["records"]
    best = _best(run)
    tail = records[-max(1, len(records) // 10):]
    negative = sum(r["grad_projection"] < 0 for r in records) / len(records)
    cosines = {c["step"]: c["cosine_prev"] for c in run["checkpoints"]}
    names = layer_labels([row["layer"] for row in run["layer_growth"]])
    lines = [
        f"A `{config['arch']}` causal LM ({config['layers']} layers, width {config['width']}, "
        f"{run['model']['num_parameters']:,} parameters) trained {config['steps']} steps with "
        f"{config['optimizer']}, lr {config['lr']:g} ({config['schedule']}), weight decay "
        f"{config['weight_decay']:g}, on the built-in corpus (every tenth sentence held out).",
        "",
        f"**Norm growth.** Best law: **{best['law']}**, {best['formula']} with "
        + ", ".join(f"{k} = {v:.4g}" for k, v in best["params"].items())
        + f" (R² {_cell(best['r2'], 4)}; lowest AIC: {run['best_by_aic']}). "
        f"θᵀ∇L was negative (norm-growing) at {negative:.0%} of the steps; mean over the last "
        f"10% of steps {sum(r['grad_projection'] for r in tail) / len(tail):.3g}.",
        "",
        "| law | R² | AIC |",
        "|---|---|---|",
        *(f"| {f['law']} | {_cell(f['r2'], 4)} | {f['aic']:.1f} |" for f in run["fits"]),
        *(f"| {row['law']} | not fitted: {row['reason']} | |" for row in run.get("skipped", [])),
        "",
        "| layer | norm at start | at end | relative growth |",
        "|---|---|---|---|",
        *(f"| {names[row['layer']]} | {row['start']:.3f} | {row['end']:.3f} | "
          f"{_cell(row['relative_growth'])} |" for row in run["layer_growth"]),
        "",
    ]
    with_saturation = [e for e in run["evaluations"] if "saturation" in e]
    last_layer = list(with_saturation[0]["saturation"]["inf"])[-1] if with_saturation else None
    columns = ["step", "held-out loss", "perplexity", "accuracy", "‖θ‖", "cos to previous checkpoint"]
    if last_layer:
        columns += [f"{last_layer}, c = 1000", f"{last_layer}, c = ∞"]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for e in run["evaluations"]:
        row = (f"| {e['step']} | {e['loss']:.3f} | {e['perplexity']:.1f} | {e['accuracy']:.3f} | "
               f"{e['norm']:.3f} | {_cell(cosines.get(e['step']), 5)} |")
        if last_layer and "saturation" in e:
            row += f" {e['saturation']['1000'][last_layer]:.3f} | {e['saturation']['inf'][last_layer]:.3f} |"
        lines.append(row)
    said = [sentence for sentence in (saturation_sentence(run["evaluations"]),
                                      loss_sentence(run["evaluations"])) if sentence]
    lines += ["", " ".join(said), "", f"![norms]({norms_png})"]
    if saturation_png:
        lines += ["", "Per-layer similarity to the saturated network while training "
                  "(cos(h(x; θ_t), h(x; c·θ_t)) on held-out sentences):", "",
                  f"![saturation while training]({saturation_png})"]
    return "\n".join(lines)


def _best(run: Mapping[str, Any]) -> dict[str, Any]:
    best = best_fit(run)
    if best is None:
        raise EmpiricalError(f"expected a fitted growth law in the run, got none (best: {run['best']})")
    return best


def comparison_markdown(runs: Sequence[Mapping[str, Any]], figure: str) -> str:
    """Markdown table of runs side by side (one column per run): the fitted growth law and norms."""
    best = [_best(run) for run in runs]
    rows = [
        ("weight decay", [f"{run['config']['weight_decay']:g}" for run in runs]),
        ("best law", [f"**{b['law']}**, {b['formula']}" for b in best]),
        ("parameters", [", ".join(f"{k} = {v:.4g}" for k, v in b["params"].items()) for b in best]),
        ("R²", [_cell(b["r2"], 4) for b in best]),
        ("lowest AIC", [str(run["best_by_aic"]) for run in runs]),
        ("‖θ‖ at start → end", [f"{run['evaluations'][0]['norm']:.3f} → "
                                f"{run['evaluations'][-1]['norm']:.3f}" for run in runs]),
        ("θᵀ∇L < 0 (norm-growing) at", [
            f"{sum(r['grad_projection'] < 0 for r in run['records']) / len(run['records']):.0%} "
            "of steps" for run in runs]),
    ]
    lines = ["| | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |",
             "|---|" + "---|" * len(runs)]
    lines += [f"| {name} | " + " | ".join(values) + " |" for name, values in rows]
    return "\n".join([*lines, "", f"![norm growth without and with weight decay]({figure})"])


def training_section(ctx: ReportContext) -> Section:
    """Norm growth and saturation while training: from ``--train-dir``, or two short runs made here
    (without and with weight decay, the paper's Figures 2 and 3)."""
    train_dir = ctx.train_dir
    decayed = None
    if train_dir is not None:
        run, source = read_run(train_dir), f"Read from the run folder `{train_dir}`."
    else:
        run = train(SHORT_RUN, progress=ctx.progress).to_dict()
        decayed = train(SHORT_RUN_DECAY, progress=ctx.progress).to_dict()
        source = ("Two short runs made for this report, the same model, data and seed without and "
                  "with (decoupled) weight decay (`normsat train` makes longer ones; pass a run "
                  "folder with `--train-dir`). Each run's growth law is the one fitted to its "
                  "norms, whatever the paper led us to expect.")
    title = f"{run['config']['arch']}, {run['config']['optimizer']}"
    norms = plot_norms(run, ctx.figure("training_norms.png"), title=title)
    saturation = None
    if any("saturation" in e for e in run["evaluations"]):
        saturation = plot_saturation(run["evaluations"], ctx.figure("training_saturation.png"),
                                     title=title).name
    keys = ("config", "model", "fits", "best", "best_by_aic", "skipped", "layer_growth",
            "evaluations", "checkpoints", "homogeneity", "provenance")
    data = {key: run.get(key) for key in keys}
    parts = [source]
    if decayed is not None:
        figure = plot_norm_comparison([run, decayed], ctx.figure("training_norms_weight_decay.png"),
                                      title=title)
        parts += ["**Without and with weight decay.**", comparison_markdown([run, decayed],
                                                                            figure.name),
                  f"**Run 1 (weight decay {run['config']['weight_decay']:g}) in detail.**"]
        data["weight_decay_run"] = {key: decayed.get(key) for key in keys}
    parts.append(run_markdown(run, norms.name, saturation))
    data["source"] = str(train_dir) if train_dir is not None else {
        "short_runs": [asdict(SHORT_RUN), asdict(SHORT_RUN_DECAY)]}
    return Section("training", "Norm growth and saturation while training", "\n\n".join(parts), data)
