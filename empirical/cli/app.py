"""The ``normsat`` command: one subcommand per module in :mod:`empirical.cli.commands`."""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import NoReturn

from empirical import interrupts
from empirical.cli.commands import (
    check,
    degree,
    grid,
    heads,
    lemmas,
    norms,
    projection,
    report,
    similarity,
    train,
)
from empirical.cli.messages import show_warning_line
from empirical.cli.options import DEBUG_VARIABLE, settle_progress
from empirical.errors import EmpiricalError

__all__ = ["DEBUG_VARIABLE", "build_parser", "main", "one_line"]

COMMANDS = (similarity, degree, check, lemmas, report, norms, projection, train, grid, heads)

# Terminal escape sequences (CSI such as colours, and OSC such as hyperlinks) that dependencies put
# in their messages: noise in a log file, and they can hide the message on some terminals.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def one_line(message: object) -> str:
    r"""``message`` as one clean line: escape sequences removed, lines and runs of spaces joined.

    >>> one_line("cannot load:\n\n  \x1b[1mWeightsUnpickler\x1b[0m error\n")
    'cannot load: WeightsUnpickler error'
    """
    return " ".join(_ESCAPES.sub("", str(message)).split())


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its usage errors as one line, like normsat's own (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered (sub-parsers are of the same class)."""
    parser = _Parser(
        prog="normsat",
        description="Homogeneity, exact saturation and saturation measurements of transformers "
        "as their parameter norm grows.",
    )
    try:
        version = metadata.version("normsat")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    parser.add_argument("--version", action="version", version=f"normsat {version}")
    parser.add_argument("--debug", action="store_true",
                        help=f"show the full traceback of an error (or set {DEBUG_VARIABLE}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


@contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Warnings as one line each (``normsat: warning: …``), without the library's source line."""
    with warnings.catch_warnings():
        warnings.showwarning = show_warning_line
        yield


class _DropTorchRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith("torch")


@contextmanager
def _quiet_torch_logging(debug: bool) -> Iterator[None]:
    """Without ``--debug``, torch's own log records (the tracebacks and graph dumps the exporter
    logs before it raises) are dropped for the command's duration, so that a failure is normsat's
    one line alone; the handlers are left as they were afterwards."""
    if debug:
        yield
        return
    drop = _DropTorchRecords()
    loggers = [logging.getLogger(), logging.getLogger("torch"),
               *(logger for name, logger in logging.root.manager.loggerDict.items()
                 if name.startswith("torch.") and isinstance(logger, logging.Logger))]
    handlers = {handler for logger in loggers for handler in logger.handlers}
    if logging.lastResort is not None:
        handlers.add(logging.lastResort)
    for handler in handlers:
        handler.addFilter(drop)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(drop)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code.

    Bad input (the packages' errors, and files that cannot be read or written) gives exit code 2
    and one line on stderr; Ctrl-C or SIGTERM gives 128 + the signal's number (130, 143), and a
    reader of the output that goes away (``| head``) 141, as SIGPIPE would, without a message;
    anything else is a bug: one line, exit code 1, and the traceback with ``--debug`` or
    ``NORMSAT_DEBUG=1``.
    """
    args = build_parser().parse_args(argv)
    settle_progress(args, sys.stderr)
    # Imported once a command runs: these packages load torch, which ``--help`` does without.
    from empirical import distributed
    from homogeneity.errors import HomogeneityError
    from saturated.errors import SaturationError

    debug = args.debug or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    try:
        with interrupts.signals_as_interrupts(), _one_line_warnings(), _quiet_torch_logging(debug):
            distributed.init_from_environment()  # started by torchrun: join the ranks
            code = int(args.func(args))
            distributed.shutdown()
            sys.stdout.flush()  # here, where a reader that has gone is caught, not at exit
            return code
    except BrokenPipeError:
        # The reader of stdout has gone (`normsat check cert.json | head -1`): end as a program
        # that SIGPIPE stopped, silently, with nothing more written to the closed pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + int(signal.SIGPIPE)
    except (EmpiricalError, HomogeneityError, SaturationError, OSError) as err:
        if debug:
            traceback.print_exc()
        print(f"normsat {args.command}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: docs/errors.md, "Interrupted"
        signal_name = interrupts.signal_name(interrupts.interrupt_signal(err))
        print(f"normsat {args.command}: interrupted by {signal_name}", file=sys.stderr)
        return interrupts.exit_code(err)
    except Exception as err:  # a bug: say so in one line, the traceback on request
        if debug:
            traceback.print_exc()
        print(f"normsat {args.command}: internal error: {type(err).__name__}: {one_line(err)} (a bug in "
              f"normsat; rerun with --debug for the traceback and report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
