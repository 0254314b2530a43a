"""The paper's √t setting in miniature: does ‖θ_t‖ grow like √t, and does saturation rise?

The paper (§5, Figure 2) reports ‖θ_t‖ ∝ √t over T5-base's pretraining (Adafactor, inverse
square-root schedule, no weight decay). This script trains the closest miniature the library
builds: a pre-LN causal LM (``normsat train --arch pre``: GPT-2's pre-LN block; T5's RMSNorm
without biases and its relative positions are not among the library's architectures), with
Adafactor, the inverse square-root schedule (``--schedule sqrt``), no weight decay, for
``--steps`` steps (≥ 5,000) and several seeds. For each seed it fits the growth laws (the rule of
docs/norms.md: AIC and extrapolation, intervals from the AR(1) effective sample size) to the
total norm, the norm without the embeddings and each layer's norm, and reads the per-layer
similarity to the exact limit at the log-spaced evaluations (does saturation rise?).

Run from the repository root: ``python docs/figures/sqrt_study.py`` (defaults: 5,000 steps,
3 seeds, one process per seed on 2 cores); writes docs/figures/sqrt_study.json.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from empirical.models.provenance import versions
from empirical.outputs import write_json
from empirical.training.fits import fit_growth
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
    saturation = [{"step": e["step"], "per_layer": e.get("saturation", {}).get("inf")}
                  for e in result.evaluations]
    return {"seed": config.seed, "total": _fits(steps, total),
            "without_embeddings": _fits(steps, without),
            "layers": {layer: _fits(steps, values) for layer, values in layers.items()},
            "norms": {"steps": steps, "total": total, "without_embeddings": without, "layers": layers},
            "saturation": saturation}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "sqrt_study.json")
    args = parser.parse_args()
    configs = [TrainConfig(arch="pre", optimizer="adafactor", schedule="sqrt", weight_decay=0.0,
                           lr=args.lr, steps=args.steps, evaluations=12, seed=seed)
               for seed in range(args.seeds)]
    with ProcessPoolExecutor(max_workers=args.jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        seeds = list(pool.map(run_seed, configs))
    document = {"schema": "normsat.sqrt_study/1", "config": vars(configs[0]) | {"seeds": args.seeds},
                "paper": "T5-base pretraining: ‖θ_t‖ ∝ √t, R² = 1.00 (Merrill et al. 2021, Figure 2)",
                "seeds": seeds, "versions": versions()}
    write_json(document, args.out)
    for seed in seeds:
        print(f"seed {seed['seed']}: total {seed['total']['best']} (p {seed['total']['power_p']:.3f}, "
              f"interval {seed['total']['power_p_interval']}), without embeddings "
              f"{seed['without_embeddings']['best']} (p {seed['without_embeddings']['power_p']:.3f})")
    print(f"json: {args.out}")


if __name__ == "__main__":
    main()
