"""``normsat grid``: final norm and its growth law over learning rates × weight decays."""

from __future__ import annotations

import argparse
import math
import multiprocessing
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from empirical.cli.commands.train import SEED_HELP, add_training_options, config_from_args
from empirical.cli.messages import show_warning_line
from empirical.cli.options import device_options, output_options, positive_int, runtime_options
from empirical.errors import EmpiricalError
from empirical.outputs import check_output_dir, write_json

if TYPE_CHECKING:
    from empirical.training.runs import TrainConfig

__all__ = ["register", "run_cell", "run_grid"]

SCHEMA = "normsat.grid/1"
TAIL = 0.1
"""The last fraction of the steps over which the mean gradient projection θᵀ∇L is reported."""


def run_cell(config: TrainConfig, device: str = "cpu") -> dict[str, Any]:
    """Train one cell (no checkpoints, no similarity to the limit) on ``device`` and summarize its
    norm growth.

    A cell that diverges or whose growth fit fails is marked (``diverged`` / ``failed``, with the
    reason under ``error``) instead of aborting the whole grid.
    """
    import torch

    from empirical.training.fits import best_fit
    from empirical.training.runs import TrainingDiverged, train

    torch.set_num_threads(1)  # one process per core: threads inside would only contend
    cell: dict[str, Any] = {"lr": config.lr, "weight_decay": config.weight_decay}
    try:
        result = train(config, device=device)
    except TrainingDiverged as err:
        return {**cell, "diverged": True, "failed": False, "error": str(err)}
    except EmpiricalError as err:  # e.g. no growth law converged on this cell's norms
        return {**cell, "diverged": False, "failed": True, "error": str(err)}
    records = result.records
    tail = records[-max(1, int(TAIL * len(records))):]
    best = best_fit(result.fits)
    if best is None:
        return {**cell, "diverged": False, "failed": True, "error": "no growth law fitted the norm"}
    return {**cell, "diverged": False, "failed": False,
            "initial_norm": result.checkpoints[0]["norm"],
            "final_norm": result.evaluations[-1]["norm"], "best": best["law"], "fit": best,
            "best_by_aic": result.fits["best_by_aic"], "skipped": result.fits["skipped"],
            "tail_grad_projection": sum(r["grad_projection"] for r in tail) / len(tail),
            "final_loss": result.evaluations[-1]["loss"],
            "final_accuracy": result.evaluations[-1]["accuracy"]}


def run_grid(base: TrainConfig, lrs: Sequence[float], decays: Sequence[float], *,
             jobs: int = 2, progress: bool = False, device: str = "cpu") -> list[dict[str, Any]]:
    """Every (lr, weight decay) cell of ``base``, in ``jobs`` spawned processes, in grid order, on
    ``device`` (``progress``: a tqdm bar counting the finished cells)."""
    from tqdm.auto import tqdm

    if jobs < 1:
        raise EmpiricalError(f"jobs must be a positive integer, got {jobs}")
    # replace() validates each cell as it builds it: every cell's error before any process starts
    configs = [replace(base, lr=lr, weight_decay=wd, limit_similarity=False) for wd in decays for lr in lrs]
    # spawn: a fresh interpreter per worker (fork after torch has started threads can deadlock)
    # Workers show warnings as the main process does: one line, without the source line.
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_one_line_warnings_here) as pool:
        try:
            return list(tqdm(pool.map(partial(run_cell, device=device), configs), total=len(configs),
                             desc="grid",
                             unit="cell", disable=not progress))
        except BaseException:
            # Ctrl-C or SIGTERM (docs/errors.md, "Interrupted"): the queued cells are dropped and
            # the running ones stopped, or leaving the block would wait for the whole grid.
            pool.shutdown(wait=False, cancel_futures=True)
            for worker in multiprocessing.active_children():
                worker.terminate()
            raise


def _one_line_warnings_here() -> None:
    """Initializer of a worker process: warnings as ``normsat: warning: …`` lines."""
    warnings.showwarning = show_warning_line


def _numbers(text: str, what: str) -> list[float]:
    """The comma-separated numbers of a list option; an empty, non-numeric or repeated item is an
    error naming it (a grid silently shorter than asked hides a typo)."""
    items = [item.strip() for item in text.split(",")]
    if items == [""]:
        raise EmpiricalError(f"--{what} expected at least one number, got {text!r}")
    values: list[float] = []
    for position, item in enumerate(items, start=1):
        if not item:
            raise EmpiricalError(f"--{what} expected numbers separated by commas, got an empty item "
                                 f"(item {position}) in {text!r}")
        try:
            value = float(item)
        except ValueError:
            raise EmpiricalError(f"--{what} expected numbers separated by commas, got {item!r} "
                                 f"(item {position}) in {text!r}") from None
        if not math.isfinite(value):  # 1e400 overflows to inf: never a value anyone asked for
            raise EmpiricalError(f"--{what} expected finite numbers, got {item!r} (item {position}) "
                                 f"in {text!r}")
        if value in values:
            raise EmpiricalError(f"--{what} expected distinct numbers, got {item!r} twice "
                                 f"(item {position}) in {text!r}")
        values.append(value)
    return values


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "grid",
        help="final norm and growth law over learning rates × weight decays",
        description="Train one small LM per (learning rate, weight decay) in parallel processes and "
        "draw the final parameter norm and its best growth law as a heatmap: where norm growth is "
        "tamed and where it runs away. Writes DIR/grid.json and DIR/grid.png.",
        parents=[device_options(dtype=False),
                 output_options(json_help="also write grid.json's record to this path"),
                 runtime_options(seed_help=SEED_HELP)],
    )
    parser.add_argument("--lr", required=True, help="learning rates, comma-separated, e.g. 1e-4,1e-3")
    parser.add_argument("--weight-decay", default="0",
                        help="weight decays, comma-separated (default: 0)")
    add_training_options(parser, grid=True)
    parser.add_argument("--jobs", type=positive_int, default=2, help="parallel processes (default: 2)")
    parser.add_argument("--out", default="normsat-grid", help="output folder (default: normsat-grid)")
    parser.set_defaults(func=run, evaluations=3)


def run(args: argparse.Namespace) -> int:
    from empirical.cli.commands.common import check_outputs
    from empirical.models.provenance import versions
    from empirical.training.plots import plot_grid

    lrs, decays = _numbers(args.lr, "lr"), _numbers(args.weight_decay, "weight-decay")
    out = check_output_dir(args.out, what="--out")
    check_outputs(args)
    base = config_from_args(args, lr=lrs[0], weight_decay=decays[0], limit_similarity=False)
    cells = run_grid(base, lrs, decays, jobs=args.jobs, progress=not args.quiet, device=args.device)
    document = {"schema": SCHEMA, "config": asdict(base) | {"lr": lrs, "weight_decay": decays},
                "cells": cells, "versions": versions()}
    path = write_json(document, out / "grid.json")
    figure = plot_grid(cells, out / "grid.png", title=f"{base.arch}, {base.optimizer}, {base.steps} steps")
    print(f"{'lr':>10} {'wd':>8} {'final norm':>11}  best law")
    for cell in cells:
        shown = ("diverged" if cell["diverged"] else f"failed: {cell['error']}" if cell["failed"]
                 else f"{cell['final_norm']:11.3f}  {cell['best']}")
        print(f"{cell['lr']:>10g} {cell['weight_decay']:>8g} {shown}")
    print(f"json: {path}\nplot: {figure}")
    if args.json:
        print(f"JSON: {write_json(document, args.json)}")
    return 0
