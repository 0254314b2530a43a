"""``normsat train``: train a small causal LM on CPU and watch its norm grow and its layers saturate."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from empirical import interrupts
from empirical.cli.options import device_options, finite_float, output_options, runtime_options
from empirical.errors import EmpiricalError
from empirical.locking import LOCK_NAME, folder_lock
from empirical.outputs import check_output_dir
from empirical.training.choices import (
    ARCHITECTURE_HELP,
    ARCHITECTURES,
    OPTIMIZER_HELP,
    OPTIMIZERS,
    RESUME_FILE,
    SCHEDULE_HELP,
    SCHEDULES,
    choices_help,
)

if TYPE_CHECKING:
    from empirical.training.runs import TrainConfig, TrainResult

__all__ = ["add_training_options", "check_run_folder", "config_from_args", "register", "remove_run",
           "resumed_config", "write_run"]


SEED_HELP = "seed of the init and batch order (default: 0)"

_TRAINING_OPTIONS = ("arch", "layers", "width", "heads", "steps", "lr", "weight_decay", "schedule",
                     "optimizer", "blocks_per_step", "context", "evaluations", "eval_sentences",
                     "no_saturation", "seed")
"""The options that define a run (their ``dest``): :func:`config_from_args` reads them."""


def _metavar(choices: tuple[str, ...]) -> str:
    return "{" + ",".join(choices) + "}"


def add_training_options(parser: argparse.ArgumentParser, *, grid: bool = False) -> None:
    """The options shared by ``train`` and ``grid`` (``grid`` takes lr and weight decay as lists)."""
    # Choices are listed, not enforced by argparse: TrainConfig refuses others with one line.
    parser.add_argument("--arch", default="pre", metavar=_metavar(ARCHITECTURES),
                        help=choices_help(ARCHITECTURE_HELP, "pre"))
    parser.add_argument("--layers", type=int, default=2, help="transformer layers (default: 2)")
    parser.add_argument("--width", type=int, default=64, help="hidden size (default: 64)")
    parser.add_argument("--heads", type=int, default=2, help="attention heads (default: 2)")
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps (default: 2000)")
    if not grid:
        parser.add_argument("--lr", type=finite_float, default=1e-3,
                            help="peak learning rate (default: 1e-3)")
        parser.add_argument("--weight-decay", type=finite_float, default=0.0,
                            help="weight decay (default: 0)")
    parser.add_argument("--schedule", default="constant", metavar=_metavar(SCHEDULES),
                        help="lr schedule: " + choices_help(SCHEDULE_HELP, "constant"))
    parser.add_argument("--optimizer", default="adamw", metavar=_metavar(OPTIMIZERS),
                        help=choices_help(OPTIMIZER_HELP, "adamw"))
    parser.add_argument("--blocks-per-step", type=int, default=16,
                        help="LM blocks (of --context tokens) per optimizer step (default: 16)")
    parser.add_argument("--context", type=int, default=64, help="tokens per block (default: 64)")


def config_from_args(args: argparse.Namespace, **override: Any) -> TrainConfig:
    """The :class:`TrainConfig` of parsed options (``override`` sets the rest, e.g. lr in a grid)."""
    from empirical.training.runs import TrainConfig

    fields = {"arch": args.arch, "layers": args.layers, "width": args.width, "heads": args.heads,
              "steps": args.steps, "schedule": args.schedule, "optimizer": args.optimizer,
              "batch_size": args.blocks_per_step, "context": args.context, "seed": args.seed}
    for name in ("lr", "weight_decay", "evaluations", "eval_sentences"):
        if hasattr(args, name):
            fields[name] = getattr(args, name)
    if getattr(args, "no_saturation", False):
        fields["limit_similarity"] = False
    return TrainConfig(**{**fields, **override})  # validated as it is built


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a small causal LM on CPU, tracking norm growth and saturation",
        description="Train a small random-init causal transformer LM on the built-in corpus, record "
        "the parameter norm, θᵀ∇L and θᵀδ at every step, evaluate held-out loss, accuracy and "
        "per-layer saturation (c = 1000 and c = ∞) at log-spaced steps, and save safetensors "
        "checkpoints there. Writes DIR/train.json and PNG figures.",
        parents=[device_options(dtype=False),
                 output_options(json_help="also write train.json's record to this path"),
                 runtime_options(seed_help=SEED_HELP)],
    )
    add_training_options(parser)
    parser.add_argument("--evaluations", type=int, default=10,
                        help="log-spaced evaluation/checkpoint steps besides step 0 (default: 10)")
    parser.add_argument("--eval-sentences", type=int, default=64,
                        help="held-out sentences for the saturation measurement (default: 64)")
    parser.add_argument("--no-saturation", action="store_true",
                        help="skip the per-layer similarity to the saturated model at each "
                        "evaluation (the slow part; no saturation figure)")
    parser.add_argument("--out", default="normsat-train", help="run folder (default: normsat-train)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run already in --out (its train.json, figures, resume file "
                        "and checkpoints/step-*.safetensors are deleted first; other files are "
                        "kept); without it a folder that holds anything is refused")
    parser.add_argument("--resume", action="store_true",
                        help="continue the interrupted run in --out from its last checkpoint, with "
                        "the options its train.json records")
    parser.set_defaults(func=run, option_defaults={dest: parser.get_default(dest)
                                                   for dest in _TRAINING_OPTIONS})


_RUN_FILES = ("train.json", "norms.png", "saturation.png", RESUME_FILE)
_CHECKPOINT = re.compile(r"step-\d{7}\.safetensors")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def check_run_folder(out: Path, *, overwrite: bool) -> None:
    """Refuse a run folder that holds anything, unless ``overwrite``; then refuse one whose
    ``checkpoints/`` holds files a run does not write (they would be mixed with its checkpoints).

    Raises:
        EmpiricalError: naming the folder and what it holds.
    """
    if not out.is_dir():
        return
    held = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME)
    if held and not overwrite:
        what = "a run (train.json)" if "train.json" in held else f"{len(held)} entries ({_listed(held)})"
        raise EmpiricalError(f"--out {out} already holds {what}; pass --overwrite to replace the "
                             f"run's own files there (other files are kept), --resume to continue "
                             f"an interrupted run, or choose another folder")
    checkpoints = out / "checkpoints"
    if checkpoints.exists():
        foreign = (sorted(p.name for p in checkpoints.iterdir()
                          if not (p.is_file() and _CHECKPOINT.fullmatch(p.name)))
                   if checkpoints.is_dir() else ["(a file, not a folder)"])
        if foreign:
            raise EmpiricalError(f"--out {out}: checkpoints/ holds files a run does not write "
                                 f"({_listed(foreign)}); they would be mixed with the run's "
                                 f"checkpoints, so move them first or choose another folder")
    for name in _RUN_FILES:
        if (out / name).is_dir():
            raise EmpiricalError(f"--out {out}: {name} is a folder, where the run writes a file")


def resumed_config(args: argparse.Namespace, out: Path) -> TrainConfig:
    """The configuration of the unfinished run in ``out``; an option given on the command line
    must agree with it (``--resume`` continues that run, it cannot change it).

    Raises:
        EmpiricalError: no unfinished run in ``out``, ``--overwrite`` as well, or an option that
            differs from the run's.
    """
    if args.overwrite:
        raise EmpiricalError("expected either --resume or --overwrite, got both")
    from empirical.training.runs import TrainConfig, read_run

    document = read_run(out, unfinished=True)
    if document.get("stopped") is None:
        raise EmpiricalError(f"--resume expected an unfinished run in {out}, got a finished one")
    stored = TrainConfig(**document["config"])
    given = asdict(config_from_args(args))
    default = asdict(config_from_args(argparse.Namespace(**{**vars(args), **args.option_defaults})))
    changed = [f"{name} {value!r} (the run's: {getattr(stored, name)!r})" for name, value in given.items()
               if value != default[name] and value != getattr(stored, name)]
    if changed:
        raise EmpiricalError(f"--resume continues the run as {out / 'train.json'} records it, got "
                             f"{', '.join(changed)}; leave those options out")
    return stored


def remove_run(out: Path) -> None:
    """Delete the files a run writes in ``out`` (:data:`_RUN_FILES`, ``checkpoints/step-*``) and
    ``checkpoints/`` if that leaves it empty; any other file stays."""
    for name in _RUN_FILES:
        (out / name).unlink(missing_ok=True)
    checkpoints = out / "checkpoints"
    if checkpoints.is_dir():
        for path in checkpoints.iterdir():
            if path.is_file() and _CHECKPOINT.fullmatch(path.name):
                path.unlink()
    if checkpoints.is_dir() and not any(checkpoints.iterdir()):
        checkpoints.rmdir()


def draw_run(run: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """A run's figures from its ``normsat.train/2`` document: ``norms.png`` and, when the run
    measured saturation, ``saturation.png`` in ``out`` (also a finished run's, redrawn)."""
    from empirical.training.plots import plot_norms, plot_saturation

    config = run["config"]
    title = f"{config['arch']}, {config['optimizer']} lr {config['lr']:g}, wd {config['weight_decay']:g}"
    written = {"norms": plot_norms(run, out / "norms.png", title=title)}
    if config["limit_similarity"]:
        written["saturation"] = plot_saturation(run["evaluations"], out / "saturation.png", title=title)
    return written


def write_run(result: TrainResult, out: Path) -> dict[str, Path]:
    """The figures and ``train.json`` of a finished run, then the resume file goes: the run is no
    longer one to continue. Signals wait until all is written (docs/errors.md, "Interrupted")."""
    with interrupts.deferred():
        written = draw_run(result.to_dict(), out)
        written = {"json": result.to_json(out / "train.json"), **written}
        (out / RESUME_FILE).unlink(missing_ok=True)
    return written


def run(args: argparse.Namespace) -> int:
    from empirical.cli.commands.common import check_outputs
    from empirical.models.loading import check_device
    from empirical.training.fits import best_fit, skipped_lines
    from empirical.training.runs import TrainingInterrupted, train

    out = check_output_dir(args.out, what="--out")
    check_outputs(args)
    check_device(args.device)
    config = None if args.resume else config_from_args(args)
    # Locked before the folder is read: a second run on it is refused, never interleaved.
    with folder_lock(out, what="--out"):
        if args.resume:
            config = resumed_config(args, out)
        else:
            check_run_folder(out, overwrite=args.overwrite)
        assert config is not None
        started = False

        def start() -> None:  # every input is checked: only now may the replaced run go
            nonlocal started
            if args.overwrite:
                remove_run(out)
            started = True

        try:
            result = train(config, out, progress=not args.quiet, device=args.device,
                           resume=args.resume, before_writing=start)
            written = write_run(result, out)
        except TrainingInterrupted as stop:
            if stop.result is None or stop.result.stopped is None:
                if started and not args.resume:
                    remove_run(out)  # not one checkpoint finished: nothing to keep
            else:
                print(f"normsat train: stopped at step {stop.result.stopped['at_step']}; {out} keeps "
                      f"the checkpoints up to step {stop.result.stopped['last_checkpoint']} and a "
                      f"train.json that says so; continue with: normsat train --out {out} --resume",
                      file=sys.stderr)
            raise
        except Exception:
            if started and not args.resume:  # a failed new run leaves nothing; a resumed one
                remove_run(out)              # keeps its checkpoints
            raise
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
        print(f"{name}: {path}")
    if args.json:
        print(f"JSON: {result.to_json(args.json)}")
    return 0
