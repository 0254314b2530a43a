"""Regenerate docs/figures/heads_training.png and heads_training.json: the head atlas of a post-LN
and a pre-LN model trained by ``normsat train``.

Two causal LMs of the same size (2 layers, width 64, 4 heads, context 64, seed 0), one BERT-style
post-LN decoder and one GPT-2 (pre-LN), trained for 400 AdamW steps on the built-in corpus (CPU,
a few minutes), then measured on the first 30 sentences with the exact limit (``ties="nan"``).
Run from the repository root: ``python docs/figures/heads_training.py [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from empirical.cli import main as normsat

HERE = Path(__file__).resolve().parent
SIZE = ["--layers", "2", "--width", "64", "--heads", "4", "--steps", "400", "--seed", "0",
        "--evaluations", "2", "--eval-sentences", "8", "--quiet"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="train into this folder and keep the runs (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep or scratch)
        runs = [root / arch for arch in ("post", "pre")]
        for run in runs:
            if normsat(["train", "--arch", run.name, *SIZE, "--out", str(run)]):
                raise SystemExit(f"training {run.name} failed")
        normsat(["heads", *(f"--run={run}" for run in runs), "--sentences", "30", "--quiet",
                 "--json", str(HERE / "heads_training.json"), "--plot", str(HERE / "heads_training.png")])


if __name__ == "__main__":
    main()
