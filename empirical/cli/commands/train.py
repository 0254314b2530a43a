"""``normsat train``: train a small causal LM on CPU and watch its norm grow and its layers saturate."""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from empirical.cli.options import device_options, finite_float, runtime_options
from empirical.errors import EmpiricalError
from empirical.models.loading import check_device
from empirical.outputs import check_output_dir
from empirical.training.fits import best_fit, skipped_lines
from empirical.training.plots import plot_norms, plot_saturation
from empirical.training.runs import ARCHITECTURES, OPTIMIZERS, SCHEDULES, TrainConfig, TrainResult, train

__all__ = ["add_training_options", "check_run_folder", "config_from_args", "register", "staged_folder",
           "write_run"]


SEED_HELP = "seed of the init and batch order (default: 0)"


def add_training_options(parser: argparse.ArgumentParser, *, grid: bool = False) -> None:
    """The options shared by ``train`` and ``grid`` (``grid`` takes lr and weight decay as lists)."""
    parser.add_argument("--arch", default="pre", help=f"{', '.join(ARCHITECTURES)}: GPT-2 pre-LN, a "
                        "BERT decoder (post-LN), or a bias-free 0-homogeneous LM (default: pre)")
    parser.add_argument("--layers", type=int, default=2, help="transformer layers (default: 2)")
    parser.add_argument("--width", type=int, default=64, help="hidden size (default: 64)")
    parser.add_argument("--heads", type=int, default=2, help="attention heads (default: 2)")
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps (default: 2000)")
    if not grid:
        parser.add_argument("--lr", type=finite_float, default=1e-3,
                            help="peak learning rate (default: 1e-3)")
        parser.add_argument("--weight-decay", type=finite_float, default=0.0,
                            help="weight decay (default: 0)")
    parser.add_argument("--schedule", default="constant",
                        help=f"{', '.join(SCHEDULES)}: lr schedule (sqrt: lr/√t) (default: constant)")
    parser.add_argument("--optimizer", default="adamw",
                        help=f"{', '.join(OPTIMIZERS)} (default: adamw)")
    parser.add_argument("--blocks-per-step", type=int, default=16,
                        help="LM blocks (of --context tokens) per optimizer step (default: 16)")
    parser.add_argument("--context", type=int, default=64, help="tokens per block (default: 64)")


def config_from_args(args: argparse.Namespace, **override: Any) -> TrainConfig:
    """The :class:`TrainConfig` of parsed options (``override`` sets the rest, e.g. lr in a grid)."""
    fields = {"arch": args.arch, "layers": args.layers, "width": args.width, "heads": args.heads,
              "steps": args.steps, "schedule": args.schedule, "optimizer": args.optimizer,
              "batch_size": args.blocks_per_step, "context": args.context, "seed": args.seed}
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
        parents=[device_options(dtype=False), runtime_options(seed_help=SEED_HELP)],
    )
    add_training_options(parser)
    parser.add_argument("--evaluations", type=int, default=10,
                        help="log-spaced evaluation/checkpoint steps besides step 0 (default: 10)")
    parser.add_argument("--eval-sentences", type=int, default=64,
                        help="held-out sentences for the saturation measurement (default: 64)")
    parser.add_argument("--out", default="normsat-train", help="run folder (default: normsat-train)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run already in --out (its train.json, figures and "
                        "checkpoints/; other files are kept); without it a folder that holds "
                        "anything is refused")
    parser.set_defaults(func=run)


_RUN_FILES = ("train.json", "norms.png", "saturation.png")
_CHECKPOINT = re.compile(r"step-\d{7}\.safetensors")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def check_run_folder(out: Path, *, overwrite: bool) -> None:
    """Refuse a run folder that holds anything, unless ``overwrite``; then refuse one whose
    ``checkpoints/`` holds files a run does not write (replacing that folder would delete them).

    Raises:
        EmpiricalError: naming the folder and what it holds.
    """
    if not out.is_dir():
        return
    held = sorted(p.name for p in out.iterdir())
    if held and not overwrite:
        what = "a run (train.json)" if "train.json" in held else f"{len(held)} entries ({_listed(held)})"
        raise EmpiricalError(f"--out {out} already holds {what}; pass --overwrite to replace the "
                             f"run's own files there (other files are kept) or choose another folder")
    checkpoints = out / "checkpoints"
    if checkpoints.exists():
        foreign = (sorted(p.name for p in checkpoints.iterdir()
                          if not (p.is_file() and _CHECKPOINT.fullmatch(p.name)))
                   if checkpoints.is_dir() else ["(a file, not a folder)"])
        if foreign:
            raise EmpiricalError(f"--out {out}: checkpoints/ holds files a run does not write "
                                 f"({_listed(foreign)}); --overwrite replaces that folder as a whole, "
                                 f"so move them first or choose another folder")
    for name in _RUN_FILES:
        if (out / name).is_dir():
            raise EmpiricalError(f"--out {out}: {name} is a folder, where the run writes a file")


def write_run(result: TrainResult, out: Path) -> dict[str, Path]:
    """``train.json`` and the figures of a finished run."""
    data = result.to_dict()
    title = (f"{result.config.arch}, {result.config.optimizer} lr {result.config.lr:g}, "
             f"wd {result.config.weight_decay:g}")
    written = {"json": result.to_json(out / "train.json"),
               "norms": plot_norms(data, out / "norms.png", title=title)}
    if result.config.limit_similarity:
        written["saturation"] = plot_saturation(result.evaluations, out / "saturation.png", title=title)
    return written


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A temporary folder beside ``out`` that takes ``out``'s place when the block succeeds.

    A run that diverges, or whose fit or figures fail, writes its checkpoints all the same; staging
    them means nothing is left half-way: on an error the temporary folder is removed and ``out``
    is untouched. On success each entry of the temporary folder replaces the one of the same name
    in ``out`` (a ``checkpoints/`` folder as a whole, so no step of an older run stays mixed in);
    other files in ``out`` are kept.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not out.exists():
        staging.rename(out)
        return
    for entry in sorted(staging.iterdir()):
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        entry.replace(target)
    staging.rmdir()


def run(args: argparse.Namespace) -> int:
    out = check_output_dir(args.out, what="--out")
    check_run_folder(out, overwrite=args.overwrite)
    check_device(args.device)
    config = config_from_args(args)
    with staged_folder(out) as staging:
        result = train(config, staging, progress=not args.quiet, device=args.device)
        written = write_run(result, staging)
    best = best_fit(result.fits)
    if best is None:  # train() raises when no law fits; a run without one has nothing to print
        raise EmpiricalError("expected a fitted growth law of the norm, got none")
    last = result.evaluations[-1]
    print(f"norm {result.records[0]['norm']:.3f} → {last['norm']:.3f}; best law {best['law']} "
          f"({best['formula']}, R² {best['r2']:.4f})")
    for line in skipped_lines(result.fits):
        print(line)
    print(f"held-out loss {last['loss']:.3f}, perplexity {last['perplexity']:.1f}, "
          f"accuracy {last['accuracy']:.3f}")
    for name, path in written.items():
        print(f"{name}: {out / path.relative_to(staging)}")
    return 0
