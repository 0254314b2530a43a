"""The paper's √t setting in miniature: does ‖θ_t‖ grow like √t, and does saturation rise?

The paper (§5, Figure 2) reports ‖θ_t‖ ∝ √t over T5-base's pretraining (Adafactor, inverse
square-root schedule, no weight decay). This script trains the closest miniature the library
builds: T5's decoder as a causal LM (``normsat train --arch t5``: pre-norm RMSNorm, no biases,
ReLU feed-forward, relative position bias; no encoder, so no cross-attention), with
Adafactor, the inverse square-root schedule (``--schedule sqrt``), no weight decay, for
``--steps`` steps (≥ 5,000) and several seeds. For each seed it fits the growth laws (the rule of
docs/norms.md: AIC and extrapolation, intervals from the AR(1) effective sample size) to the
total norm, the norm without the embeddings and each layer's norm, and reads the per-layer
similarity to the exact limit at the log-spaced evaluations (does saturation rise?).

Run from the repository root: ``python docs/figures/sqrt_study.py`` (defaults: 5,000 steps,
3 seeds, one process per seed on 2 cores); writes docs/figures/sqrt_study.json, rewritten as each
seed finishes (the seeds done so far), so a study stopped early keeps its finished seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from empirical.errors import EmpiricalError
from empirical.models.provenance import versions
from empirical.outputs import save_figure, write_json
from empirical.training.fits import fit_growth, growth_curve
from empirical.training.norms import layer_labels
from empirical.training.runs import TrainConfig, train

HERE = Path(__file__).resolve().parent
POINTS = 400
"""Records fitted per curve (evenly spaced): the fits' cost does not grow with the run."""


def _fits(steps: list[int], values: list[float]) -> dict[str, Any]:
    result = fit_growth(steps, values)
    power = next(f for f in result["fits"] if f["law"] == "power")
    return {"best": result["best"], "best_by_aic": result["best_by_aic"],
            "best_by_extrapolation": result["best_by_extrapolation"],
            "power_p": power["params"]["p"], "power_p_interval": power["interval"]["p"],
            "fits": result["fits"]}


def run_seed(config: TrainConfig) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    result = train(config)
    stride = max(1, len(result.records) // POINTS)
    kept = result.records[1::stride]  # from step 1: step 0 is the initialisation
    steps = [r["step"] for r in kept]
    total = [r["norm"] for r in kept]
    without = [math.sqrt(max(r["norm"] ** 2 - r["layers"].get("embeddings", 0.0) ** 2, 0.0)) for r in kept]
    layers = {layer: [r["layers"][layer] for r in kept] for layer in kept[0]["layers"]}
    # A layer with no determined token has a NaN similarity: null in JSON, as in similarity files.
    saturation = [{"step": e["step"], "per_layer": {layer: value if math.isfinite(value) else None
                                                    for layer, value in e["saturation"]["inf"].items()}}
                  for e in result.evaluations]
    return {"seed": config.seed, "total": _fits(steps, total),
            "without_embeddings": _fits(steps, without),
            "layers": {layer: _fits(steps, values) for layer, values in layers.items()},
            "norms": {"steps": steps, "total": total, "without_embeddings": without, "layers": layers},
            "saturation": saturation}


def _document(config: TrainConfig, seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """The study's JSON: the shared configuration, the paper's result and the finished seeds."""
    return {"schema": "normsat.sqrt_study/1",
            "config": vars(config) | {"seed": None, "seeds": [seed["seed"] for seed in seeds]},
            "paper": "T5-base pretraining: ‖θ_t‖ ∝ √t, R² = 1.00 (Merrill et al. 2021, Figure 2)",
            "seeds": sorted(seeds, key=lambda seed: seed["seed"]), "versions": versions()}


def merge(paths: list[Path]) -> dict[str, Any]:
    """One study from the JSON files of runs of other seeds under the same configuration.

    Raises:
        EmpiricalError: the files differ in anything but their seeds, or repeat a seed.
    """
    documents = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    shared = [{k: v for k, v in d["config"].items() if k not in ("seed", "seeds")} for d in documents]
    if any(config != shared[0] for config in shared):
        raise EmpiricalError(f"expected studies of one configuration to merge, got {shared}")
    seeds = [seed for d in documents for seed in d["seeds"]]
    if len({seed["seed"] for seed in seeds}) < len(seeds):
        raise EmpiricalError(f"expected each seed once, got seeds {[s['seed'] for s in seeds]}")
    return _document(TrainConfig(**shared[0]), seeds)


def plot(document: dict[str, Any], path: Path) -> Path:
    """Three panels from a study's JSON: the norm without embeddings with each seed's best law,
    each layer's norm relative to its first record, each layer's similarity to the exact limit."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.2), dpi=110)
    growth, layers, saturation = fig.subplots(1, 3)
    for index, seed in enumerate(document["seeds"]):
        norms, style = seed["norms"], ("-", "--", ":")[index % 3]
        steps = norms["steps"]
        growth.plot(steps, norms["without_embeddings"], color=f"C{index}", lw=1,
                    label=f"seed {seed['seed']}")
        fitted = growth_curve(seed["without_embeddings"], steps[0], steps[-1])
        if fitted is not None:
            growth.plot(fitted[1], fitted[2], color="black", ls=style, lw=0.8,
                        label=f"{fitted[0]}, p = {seed['without_embeddings']['power_p']:.3f}")
        names = layer_labels(list(norms["layers"]))  # layer 1 is the first block, as in the report
        for number, (layer, values) in enumerate(norms["layers"].items()):
            layers.plot(steps, [v / values[0] for v in values], color=f"C{number}", ls=style, lw=1,
                        label=names[layer] if index == 0 else None)
        points = seed["saturation"]
        for number, layer in enumerate(points[0]["per_layer"]):
            saturation.plot([p["step"] for p in points], [p["per_layer"][layer] for p in points],
                            color=f"C{number}", ls=style, marker="o", ms=3,
                            label=layer if index == 0 else None)
    growth.set(xscale="log", xlabel="step t", ylabel=r"$\|\theta_t\|$ without embeddings",
               title="norm without embeddings, best law per seed")
    layers.set(xscale="log", xlabel="step t", ylabel=r"$\|\theta_t\|$ per layer / its first record",
               title="per layer (line style: seed)")
    saturation.set(xscale="symlog", xlabel="step t", ylabel="cos(h, exact-limit h)",
                   title="similarity to the exact limit (held-out)")
    for ax in (growth, layers, saturation):
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    config = document["config"]
    fig.suptitle(f"T5 decoder ({config['layers']} layers, width {config['width']}), Adafactor, "
                 f"lr {config['lr']:g}/√t, no weight decay, {config['steps']} steps")
    fig.tight_layout()
    return save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                        help="write one study from these studies' JSON files instead of training")
    parser.add_argument("--figure-only", action="store_true",
                        help="redraw the figure from --out's JSON instead of training")
    parser.add_argument("--out", type=Path, default=HERE / "sqrt_study.json")
    args = parser.parse_args()
    figure = args.out.with_suffix(".png")
    if args.figure_only:
        print(f"figure: {plot(json.loads(args.out.read_text(encoding='utf-8')), figure)}")
        return
    if args.merge:
        document = merge(args.merge)
        print(f"json: {write_json(document, args.out)}\nfigure: {plot(document, figure)}")
        return
    configs = [TrainConfig(arch="t5", optimizer="adafactor", schedule="sqrt", weight_decay=0.0,
                           lr=args.lr, steps=args.steps, evaluations=12, seed=seed)
               for seed in range(args.first_seed, args.first_seed + args.seeds)]
    seeds: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        for done in as_completed([pool.submit(run_seed, config) for config in configs]):
            seeds.append(done.result())
            write_json(_document(configs[0], seeds), args.out)
    plot(_document(configs[0], seeds), figure)
    for seed in seeds:
        print(f"seed {seed['seed']}: total {seed['total']['best']} (p {seed['total']['power_p']:.3f}, "
              f"interval {seed['total']['power_p_interval']}), without embeddings "
              f"{seed['without_embeddings']['best']} (p {seed['without_embeddings']['power_p']:.3f})")
    print(f"json: {args.out}\nfigure: {figure}")


if __name__ == "__main__":
    main()
