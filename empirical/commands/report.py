"""``normsat report``: the main job on the built-in default."""

from __future__ import annotations

import argparse
from typing import Any

from empirical.report import write_report

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="the main job: a Markdown report with figures and results.json",
        description="Measure the default model (pretrained MiniLM) against its random-init twin "
        "on the default corpus and write DIR/report.md, its PNG figures and DIR/results.json.",
    )
    parser.add_argument("--out", default="normsat-report", help="report folder (default: normsat-report)")
    parser.add_argument("--model", default="minilm",
                        help="model with pretrained weights: minilm or a local directory (default: minilm)")
    parser.add_argument("--sentences", type=int, default=100, help="corpus size (default: 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random-init twin")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = write_report(args.out, model=args.model, sentences=args.sentences, seed=args.seed,
                        progress=not args.quiet)
    print(f"report: {path}")
    print(f"results: {path.parent / 'results.json'}")
    return 0
