"""Report section: a model trained on CPU, its norm growth law and its saturation while training."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from empirical.sections.context import ReportContext, Section
from empirical.training import TrainConfig, read_run, train
from empirical.training_plots import plot_norms, plot_saturation

__all__ = ["SHORT_RUN", "run_markdown", "training_section"]

SHORT_RUN = TrainConfig(arch="pre", layers=2, width=32, steps=300, evaluations=5, eval_sentences=16)
"""The run the report trains when no ``--train-dir`` is given (well under a minute on 2 cores)."""


def _cell(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def run_markdown(run: Mapping[str, Any], norms_png: str, saturation_png: str | None) -> str:
    """Markdown of a ``normsat.train/1`` document: fits, gradient projection, evaluations, layers."""
    config, fits, records = run["config"], run["fits"], run["records"]
    best = next(f for f in fits["fits"] if f["law"] == fits["best"])
    tail = records[-max(1, len(records) // 10):]
    negative = sum(r["grad_projection"] < 0 for r in records) / len(records)
    cosines = {c["step"]: c["cosine_prev"] for c in run["checkpoints"]}
    lines = [
        f"A `{config['arch']}` causal LM ({config['layers']} layers, width {config['width']}, "
        f"{run['model']['num_parameters']:,} parameters) trained {config['steps']} steps with "
        f"{config['optimizer']}, lr {config['lr']:g} ({config['schedule']}), weight decay "
        f"{config['weight_decay']:g}, on the built-in corpus (every tenth sentence held out).",
        "",
        f"**Norm growth.** Best law: **{best['law']}**, {best['formula']} with "
        + ", ".join(f"{k} = {v:.4g}" for k, v in best["params"].items())
        + f" (R² {_cell(best['r2'], 4)}; lowest AIC: {fits['best_by_aic']}). "
        f"θᵀ∇L was negative (norm-growing) at {negative:.0%} of the steps; mean over the last "
        f"10% of steps {sum(r['grad_projection'] for r in tail) / len(tail):.3g}.",
        "",
        "| law | R² | AIC |",
        "|---|---|---|",
        *(f"| {f['law']} | {_cell(f['r2'], 4)} | {f['aic']:.1f} |" for f in fits["fits"]),
        "",
        "| layer | norm at start | at end | relative growth |",
        "|---|---|---|---|",
        *(f"| {row['layer']} | {row['start']:.3f} | {row['end']:.3f} | {_cell(row['relative_growth'])} |"
          for row in fits["layers"]),
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
    lines += ["", f"![norms]({norms_png})"]
    if saturation_png:
        lines += ["", "Per-layer similarity to the saturated network while training "
                  "(cos(h(x; θ_t), h(x; c·θ_t)) on held-out sentences):", "",
                  f"![saturation while training]({saturation_png})"]
    return "\n".join(lines)


def training_section(ctx: ReportContext) -> Section:
    """Norm growth and saturation while training: from ``--train-dir``, or a short run made here."""
    train_dir = ctx.train_dir
    if train_dir is not None:
        run, source = read_run(train_dir), f"Read from the run folder `{train_dir}`."
    else:
        run = train(SHORT_RUN, progress=ctx.progress).to_dict()
        source = ("A short run made for this report (`normsat train` makes longer ones; pass its "
                  "folder with `--train-dir`).")
    title = f"{run['config']['arch']}, {run['config']['optimizer']}"
    norms = plot_norms(run, ctx.figure("training_norms.png"), title=title)
    saturation = None
    if any("saturation" in e for e in run["evaluations"]):
        saturation = plot_saturation(run["evaluations"], ctx.figure("training_saturation.png"),
                                     title=title).name
    markdown = source + "\n\n" + run_markdown(run, norms.name, saturation)
    data = {key: run[key] for key in ("config", "model", "fits", "best", "evaluations", "checkpoints",
                                      "homogeneity", "provenance")}
    data["source"] = str(train_dir) if train_dir is not None else {"short_run": asdict(SHORT_RUN)}
    return Section("training", "Norm growth and saturation while training", markdown, data)
