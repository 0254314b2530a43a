"""The normsat command: one module per subcommand, the report and its sections; imports anything."""

from empirical.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
