"""The ``normsat`` command: one subcommand per module in :mod:`empirical.commands`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from empirical.commands import degree, report, similarity
from empirical.errors import EmpiricalError
from homogeneity.errors import HomogeneityError
from saturated.errors import SaturationError

__all__ = ["build_parser", "main"]

COMMANDS = (similarity, degree, report)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="normsat",
        description="Homogeneity, exact saturation and saturation measurements of transformers "
        "as their parameter norm grows.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code (2 for bad input)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (EmpiricalError, HomogeneityError, SaturationError) as err:
        print(f"normsat {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
