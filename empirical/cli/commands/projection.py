"""``normsat projection``: gradient projection at fixed accuracy (Figure 1), component saturation
(Figure 5), for the paper's five transformer sublayer variants."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from empirical.cli.options import device_options, finite_float, output_options, positive_int, runtime_options
from empirical.errors import EmpiricalError
from empirical.measure.variants import SUBLAYER_VARIANTS
from empirical.outputs import PLOT_SUFFIXES, check_output, write_json

if TYPE_CHECKING:
    from empirical.training.projection import ProjectionCurves

__all__ = ["figure1_scales", "register", "run", "saturation_scales", "sign_summary"]

SCHEMA = "normsat.projection-run/1"
REPORTED_SCALES = (1.0, 10.0, 100.0, 10000.0)
"""The scales at which Figure 5's cosines are printed."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "projection",
        help="gradient projection θᵀ∇L at fixed accuracy and component saturation (Figures 1, 5)",
        description="For the paper's transformer sublayer variants (hidden size 10, random init), "
        "the gradient projection cθ₀ᵀ∇L at cθ₀ under a random affine layer and softmax "
        "cross-entropy with labels that fix the accuracy at a, and the equilibrium norm ρ*(a) "
        "(Figure 1); and the cosine of each component's output at c·θ with its output at "
        "c = 1000 and with its exact limit (Figure 5).",
        parents=[device_options(dtypes=["float32", "float64"], dtype_default="float64"),
                 output_options(json_help="write Figure 1 and Figure 5 data as JSON to this path",
                                plot=True),
                 runtime_options(seed_help="seed: components use it, inputs seed + 1, "
                                 "the loss seed + 2 (default: 0)")],
    )
    parser.add_argument("--variants", nargs="+", choices=list(SUBLAYER_VARIANTS), default=None,
                        metavar="NAME",
                        help=f"sublayer variants (default: all of {', '.join(SUBLAYER_VARIANTS)})")
    parser.add_argument("--hidden", type=positive_int, default=10, help="hidden size (default: 10)")
    parser.add_argument("--sequences", type=positive_int, default=64,
                        help="random input sequences (default: 64)")
    parser.add_argument("--length", type=positive_int, default=8,
                        help="tokens per sequence; every token is a sample (default: 8)")
    parser.add_argument("--classes", type=positive_int, default=10,
                        help="outputs of the random affine layer (default: 10)")
    parser.add_argument("--max-scale", type=finite_float, default=50.0,
                        help="largest scale c of Figure 1 (default: 50)")
    parser.add_argument("--scale-step", type=finite_float, default=0.25,
                        help="step between Figure 1's scales, from c = 1 (default: 0.25)")
    parser.add_argument("--accuracies", type=finite_float, nargs="+", default=None, metavar="A",
                        help="fixed accuracies a (default: 0.75, 0.775, …, 1.0)")
    parser.add_argument("--no-saturation", action="store_true",
                        help="skip Figure 5 (component saturation)")
    parser.add_argument("--saturation-plot", default=None, metavar="PATH",
                        help="write Figure 5's plot to this path")
    parser.set_defaults(func=run)


MAX_SCALES = 10_000
"""The most scales Figure 1 computes (the default grid has 197)."""


def figure1_scales(max_scale: float, step: float) -> list[float]:
    """c = 1, 1 + step, …, up to ``max_scale``.

    >>> figure1_scales(2.0, 0.25)
    [1.0, 1.25, 1.5, 1.75, 2.0]
    """
    if not (step > 0 and max_scale >= 1) or math.isinf(max_scale):
        raise EmpiricalError(f"expected --scale-step > 0 and a finite --max-scale ≥ 1, got {step} and "
                             f"{max_scale}")
    count = math.floor((max_scale - 1.0) / step + 1e-9)  # never past max_scale
    if count + 1 > MAX_SCALES:  # refused before it runs: each scale costs every variant's gradients
        raise EmpiricalError(f"expected at most {MAX_SCALES} scales in Figure 1, got "
                             f"{count + 1:.3g} (--max-scale {max_scale:g} in steps of {step:g}); "
                             "raise --scale-step or lower --max-scale")
    return [round(1.0 + i * step, 10) for i in range(count + 1)]


def saturation_scales() -> list[float]:
    """Figure 5's scales: 10^(i/4) from 1 to 10⁴ (1, 10, 100, 1000 and 10⁴ exactly).

    >>> s = saturation_scales(); (len(s), s[0], s[4], s[-1])
    (17, 1.0, 10.0, 10000.0)
    """
    return [10.0 ** (i / 4) for i in range(17)]


def sign_summary(curves: ProjectionCurves, accuracy: float) -> dict[str, dict[str, Any]]:
    """Per variant at one accuracy: how many scales have a positive projection, the first such c,
    and whether the projection stays positive from there on."""
    from empirical.training.projection import equilibrium_scale

    summary = {}
    for name, by_accuracy in curves.projections.items():
        values = by_accuracy[accuracy]
        first = equilibrium_scale(curves.scales, values)
        after = values[curves.scales.index(first):] if first is not None else ()
        summary[name] = {"positive_scales": sum(v > 0 for v in values), "first_positive_scale": first,
                         "positive_from_then_on": bool(after) and all(v > 0 for v in after),
                         "at_largest_scale": values[-1]}
    return summary


def run(args: argparse.Namespace) -> int:
    from empirical.cli.commands.common import check_outputs, stage_bar
    from empirical.measure.components import build_components, component_saturation, random_inputs
    from empirical.models.loading import check_device, parse_dtype
    from empirical.models.provenance import versions
    from empirical.training.projection import projection_curves

    check_outputs(args)
    if args.saturation_plot:
        check_output(args.saturation_plot, suffixes=PLOT_SUFFIXES, what="--saturation-plot")
    if args.classes < 2:
        raise EmpiricalError(f"expected --classes ≥ 2, got {args.classes}")
    if args.saturation_plot and args.no_saturation:
        raise EmpiricalError("expected either --saturation-plot or --no-saturation, got both")
    accuracies = args.accuracies or [round(0.75 + 0.025 * i, 3) for i in range(11)]
    if args.plot and not {1.0, 0.8} <= set(accuracies):
        raise EmpiricalError(f"expected --accuracies to include 1.0 and 0.8 for --plot (its two top "
                             f"panels), got {accuracies}")
    if any(not 0.0 <= a <= 1.0 for a in accuracies):
        raise EmpiricalError(f"expected --accuracies in [0, 1], got {accuracies}")
    scales = figure1_scales(args.max_scale, args.scale_step)  # bad input fails before any bar
    dtype, device = parse_dtype(args.dtype), check_device(args.device)
    # Built and drawn on the CPU from their seeds (the same numbers on every device), then moved.
    components = {name: module.to(device) for name, module in
                  build_components(args.variants, hidden=args.hidden, seed=args.seed, dtype=dtype).items()}
    inputs = random_inputs(args.sequences, args.length, args.hidden, seed=args.seed + 1,
                           dtype=dtype).to(device)
    with stage_bar(args, "projection", 1 if args.no_saturation else 2) as bar:
        bar.set_postfix_str("Figure 1: gradient projection")
        curves = projection_curves(components, inputs, scales=scales, accuracies=accuracies,
                                   classes=args.classes, seed=args.seed + 2, progress=not args.quiet)
        bar.update()
        saturation = None
        if not args.no_saturation:
            bar.set_postfix_str("Figure 5: component saturation")
            saturation = component_saturation(components, inputs, saturation_scales())
            bar.update()
        bar.set_postfix_str("done")
    print("Equilibrium norm ρ*(a): the first norm c·ρ₀ with a positive projection (Figure 1)")
    print(curves.table())
    signs = {a: sign_summary(curves, a) for a in (1.0, 0.8) if a in curves.accuracies}
    for a, summary in signs.items():
        print(f"\nsigns at a = {a:g}:")
        for name, found in summary.items():
            first = found["first_positive_scale"]
            where = f"first at c = {first:g}" if first is not None else \
                f"never positive up to c = {curves.scales[-1]:g}"
            print(f"  {name}: positive at {found['positive_scales']} of {len(curves.scales)} scales, "
                  f"{where}, "
                  f"positive from then on: {found['positive_from_then_on']}, "
                  f"at c = {curves.scales[-1]:g}: {found['at_largest_scale']:.4g}")
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "seeds": {"components": args.seed, "inputs": args.seed + 1, "loss": args.seed + 2},
        "dtype": str(dtype),
        "device": str(device),
        "hidden": args.hidden,
        "projection": curves.to_dict(),
        "signs": {str(a): summary for a, summary in signs.items()},
    }
    if saturation is not None:
        print("\nComponent saturation (Figure 5): cos to f(x; 1000θ) / cos to the exact limit")
        print(saturation.table(REPORTED_SCALES))
        document["saturation"] = saturation.to_dict()
        if args.saturation_plot:
            print(f"saturation plot: {saturation.plot(args.saturation_plot)}")
    document["versions"] = versions()
    if args.json:
        print(f"JSON: {write_json(document, args.json)}")
    if args.plot:
        print(f"plot: {curves.plot(args.plot)}")
    return 0
