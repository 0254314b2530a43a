"""``normsat norms``: parameter norm, per-layer norms and directions over a run's checkpoints."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from empirical.cli.options import output_options, runtime_options, step_int
from empirical.outputs import save_figure, write_json

__all__ = ["measure", "register"]

SCHEMA = "normsat.norms-checkpoints/1"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "norms",
        help="parameter norm growth and direction over checkpoints (paper Figures 2 and 3)",
        description="Read a training run's checkpoints in step order (at most two in memory), "
        "record the total, per-layer and per-group parameter norm and the cosine between "
        "consecutive checkpoints, and fit growth laws (linear, √t, t^¼, t^p, equilibrium) to the "
        "norm. Checkpoints: safetensors files, Hugging Face model folders, or torch.save state "
        "dicts (read with weights_only=True).",
        parents=[output_options(json_help="write records, fits and provenance to this path",
                                plot=True),
                 runtime_options()],
    )
    parser.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT",
                        help="checkpoint files or model folders; the step is the last integer of "
                        "each name (step-00400.safetensors, checkpoint-400/) unless --at-steps is given")
    parser.add_argument("--at-steps", nargs="+", type=step_int, default=None, metavar="STEP",
                        help="the checkpoints' steps, in the same order (must increase)")
    parser.set_defaults(func=run)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Scan the checkpoints and fit the norm; the JSON document of the command."""
    from empirical.models.provenance import versions
    from empirical.training.checkpoints import scan_checkpoints
    from empirical.training.fits import fit_norm_growth

    tracker, ordered = scan_checkpoints(args.checkpoints, args.at_steps, progress=not args.quiet)
    growth = fit_norm_growth(
        [r["step"] for r in tracker.records], [r["norm"] for r in tracker.records],
        {layer: [r["layers"][layer] for r in tracker.records] for layer in tracker.layer_names})
    return {
        "schema": SCHEMA,
        "checkpoints": [{"path": str(path), "step": step} for path, step in ordered],
        "layers": tracker.layer_names,
        "groups": tracker.group_names,
        "records": tracker.records,
        **growth,
        "versions": versions(),
    }


def _table(data: dict[str, Any]) -> str:
    from empirical.training.fits import skipped_lines

    lines = [f"{'step':>10}  {'‖θ‖':>12}  {'cos(θ, θ_prev)':>14}"]
    for r in data["records"]:
        cos = "" if r["cosine_prev"] is None else f"{r['cosine_prev']:.6f}"
        lines.append(f"{r['step']:>10}  {r['norm']:>12.4f}  {cos:>14}")
    if not data["fits"]:
        lines.append("\nno growth law fitted:")
        lines += skipped_lines(data)
        return "\n".join(lines)
    lines.append(f"\n{'law':<12} {'R²':>8} {'AIC':>10}  parameters (± standard error)")
    for fit in data["fits"]:
        params = ", ".join(
            f"{name}={value:.4g}" + ("" if fit["stderr"][name] is None
                                     else f"±{fit['stderr'][name]:.2g}")
            for name, value in fit["params"].items())
        r2 = "" if fit["r2"] is None else f"{fit['r2']:.4f}"
        mark = "  ← best" if fit["law"] == data["best"] else ""
        lines.append(f"{fit['law']:<12} {r2:>8} {fit['aic']:>10.2f}  {params}{mark}")
    lines += skipped_lines(data)
    if data["best"] != data.get("best_by_information", data["best"]):
        lines.append(f"(AIC rule: {data['best_by_information']}, which extrapolates the last 30% of "
                     f"the run worse than {data['best']})")
    elif data["best"] != data["best_by_aic"]:
        lines.append(f"(lowest AIC: {data['best_by_aic']}, whose extra parameter is not significant)")
    ranking = ", ".join(f"{row['layer']} ({row['relative_growth']:+.1%})"
                        for row in data["layer_growth"] if row["relative_growth"] is not None)
    lines.append(f"\nlayers by relative growth under the {data['best']} law: {ranking}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from empirical.cli.commands.common import check_outputs
    from empirical.training.fits import growth_curve
    from empirical.training.norms import render_records

    check_outputs(args)  # before the scan, so a bad path costs no run
    data = measure(args)
    print(_table(data))
    # Everything is computed (and the plot rendered) before the first file is written.
    first, last = data["records"][0]["step"], data["records"][-1]["step"]
    figure = render_records(data["records"], fitted=growth_curve(data, first, last),
                            title=Path(data["checkpoints"][0]["path"]).resolve().parent.name) \
        if args.plot else None
    if args.json:
        print(f"\nJSON: {write_json(data, args.json)}")
    if figure is not None:
        print(f"plot: {save_figure(figure, args.plot)}")
    return 0
