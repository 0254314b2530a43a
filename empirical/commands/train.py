"""``normsat train``: train a small causal LM on CPU and watch its norm grow and its layers saturate."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from empirical.outputs import check_output_dir
from empirical.training import ARCHITECTURES, OPTIMIZERS, SCHEDULES, TrainConfig, TrainResult, train
from empirical.training_plots import plot_norms, plot_saturation

__all__ = ["add_training_options", "config_from_args", "register", "write_run"]


def add_training_options(parser: argparse.ArgumentParser, *, grid: bool = False) -> None:
    """The options shared by ``train`` and ``grid`` (``grid`` takes lr and weight decay as lists)."""
    parser.add_argument("--arch", default="pre", help=f"{', '.join(ARCHITECTURES)}: GPT-2 pre-LN, a "
                        "BERT decoder (post-LN), or a bias-free 0-homogeneous LM (default: pre)")
    parser.add_argument("--layers", type=int, default=2, help="transformer layers (default: 2)")
    parser.add_argument("--width", type=int, default=64, help="hidden size (default: 64)")
    parser.add_argument("--heads", type=int, default=2, help="attention heads (default: 2)")
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps (default: 2000)")
    if not grid:
        parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default: 1e-3)")
        parser.add_argument("--weight-decay", type=float, default=0.0, help="weight decay (default: 0)")
    parser.add_argument("--schedule", default="constant",
                        help=f"{', '.join(SCHEDULES)}: lr schedule (sqrt: lr/√t) (default: constant)")
    parser.add_argument("--optimizer", default="adamw",
                        help=f"{', '.join(OPTIMIZERS)} (default: adamw)")
    parser.add_argument("--batch-size", type=int, default=16, help="blocks per step (default: 16)")
    parser.add_argument("--context", type=int, default=64, help="tokens per block (default: 64)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the init and batch order")


def config_from_args(args: argparse.Namespace, **override: Any) -> TrainConfig:
    """The :class:`TrainConfig` of parsed options (``override`` sets the rest, e.g. lr in a grid)."""
    fields = {"arch": args.arch, "layers": args.layers, "width": args.width, "heads": args.heads,
              "steps": args.steps, "schedule": args.schedule, "optimizer": args.optimizer,
              "batch_size": args.batch_size, "context": args.context, "seed": args.seed}
    for name in ("lr", "weight_decay", "evaluations", "eval_sentences"):
        if hasattr(args, name):
            fields[name] = getattr(args, name)
    config = TrainConfig(**{**fields, **override})
    config.validate()
    return config


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a small causal LM on CPU, tracking norm growth and saturation",
        description="Train a small random-init causal transformer LM on the built-in corpus, record "
        "the parameter norm, θᵀ∇L and θᵀδ at every step, evaluate held-out loss, accuracy and "
        "per-layer saturation (c = 1000 and c = ∞) at log-spaced steps, and save safetensors "
        "checkpoints there. Writes DIR/train.json and PNG figures.",
    )
    add_training_options(parser)
    parser.add_argument("--evaluations", type=int, default=10,
                        help="log-spaced evaluation/checkpoint steps besides step 0 (default: 10)")
    parser.add_argument("--eval-sentences", type=int, default=64,
                        help="held-out sentences for the saturation measurement (default: 64)")
    parser.add_argument("--out", default="normsat-train", help="run folder (default: normsat-train)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def write_run(result: TrainResult, out: Path) -> dict[str, Path]:
    """``train.json`` and the figures of a finished run."""
    data = result.to_dict()
    title = (f"{result.config.arch}, {result.config.optimizer} lr {result.config.lr:g}, "
             f"wd {result.config.weight_decay:g}")
    written = {"json": result.to_json(out / "train.json"),
               "norms": plot_norms(data, out / "norms.png", title=title)}
    if result.config.saturation:
        written["saturation"] = plot_saturation(result.evaluations, out / "saturation.png", title=title)
    return written


def run(args: argparse.Namespace) -> int:
    out = check_output_dir(args.out, what="--out")
    result = train(config_from_args(args), out, progress=not args.quiet)
    written = write_run(result, out)
    best = next(f for f in result.fits["fits"] if f["law"] == result.fits["best"])
    last = result.evaluations[-1]
    print(f"norm {result.records[0]['norm']:.3f} → {last['norm']:.3f}; best law {best['law']} "
          f"({best['formula']}, R² {best['r2']:.4f})")
    print(f"held-out loss {last['loss']:.3f}, perplexity {last['perplexity']:.1f}, "
          f"accuracy {last['accuracy']:.3f}")
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0
