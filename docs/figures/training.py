"""Regenerate docs/figures/training_norms.png, training_norms_weight_decay.png and
training_saturation.png: the figures ``normsat train`` draws for two runs of its default
configuration (GPT-2 pre-LN, 2 layers, width 64, AdamW lr 10⁻³, 2,000 steps, seed 0), without and
with weight decay 1.0; the second skips the saturation measurement, which the docs show for the
first run only.

A few minutes on 2 quiet cores, most of it the first run's exact limits; far longer under load.
Run from the repository root: ``python docs/figures/training.py [--keep DIR]``. With ``--keep``, a
run that finished in DIR before is not trained again (its figures are redrawn from its train.json).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from empirical.cli import main as normsat
from empirical.cli.commands.train import draw_run
from empirical.errors import EmpiricalError
from empirical.training.runs import read_run

HERE = Path(__file__).resolve().parent
RUNS = {"nowd": [], "wd": ["--weight-decay", "1", "--no-saturation"]}
FIGURES = {"training_norms.png": ("nowd", "norms.png"),
           "training_saturation.png": ("nowd", "saturation.png"),
           "training_norms_weight_decay.png": ("wd", "norms.png")}


def finished(run: Path) -> bool:
    """Whether ``run`` holds a finished run (not an interrupted one, nor nothing)."""
    try:
        read_run(run)
    except EmpiricalError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="train into DIR/nowd and DIR/wd and keep the runs (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep or scratch)
        for name, options in RUNS.items():
            run = root / name
            if not finished(run) and normsat(["train", "--steps", "2000", "--seed", "0", *options,
                                              "--out", str(run), "--overwrite"]):
                raise SystemExit(f"training {name} failed")
        for name in RUNS:  # redrawn by the current code, also for runs trained before
            draw_run(read_run(root / name), root / name)
        for target, (name, figure) in FIGURES.items():
            shutil.copyfile(root / name / figure, HERE / target)


if __name__ == "__main__":
    main()
