"""Regenerate docs/figures/figure1.png, figure5.png and projection.json: the paper's Figures 1 and 5.

The five transformer sublayer variants at hidden size 10, random init (seed 0), 512 random tokens;
Figure 1 over c = 1, 1.25, …, 50 and a = 0.75, 0.775, …, 1; Figure 5 over c = 10^(i/4) up to 10⁴.
Run from the repository root: ``python docs/figures/projection.py``.
"""

from __future__ import annotations

from pathlib import Path

from empirical.cli import main as normsat

HERE = Path(__file__).resolve().parent


def main() -> None:
    normsat(["projection", "--seed", "0", "--json", str(HERE / "projection.json"),
             "--plot", str(HERE / "figure1.png"), "--saturation-plot", str(HERE / "figure5.png")])


if __name__ == "__main__":
    main()
