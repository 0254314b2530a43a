"""The option groups the commands share, as argparse parents: one flag, one meaning, everywhere.

Each function returns a parser without ``--help`` to pass as ``parents=[...]`` to
``add_parser``; its options appear under a titled group in the command's ``--help``.

>>> import argparse
>>> parser = argparse.ArgumentParser(parents=[corpus_options(sentences=8), runtime_options()])
>>> args = parser.parse_args(["--quiet"])
>>> (args.sentences, args.quiet, args.corpus)
(8, True, None)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import TextIO

from empirical.errors import EmpiricalError
from empirical.models.builtin import DTYPE_NAMES, MODEL_NAMES
from empirical.outputs import PLOT_SUFFIXES

__all__ = [
    "DEBUG_VARIABLE",
    "MODEL_HELP",
    "batching_options",
    "corpus_options",
    "device_options",
    "finite_float",
    "model_options",
    "output_options",
    "params_options",
    "positive_int",
    "runtime_options",
    "scale_float",
    "seed_int",
    "settle_progress",
    "step_int",
]

DEBUG_VARIABLE = "NORMSAT_DEBUG"
"""Set to 1 to see tracebacks, like ``--debug``."""

MODEL_HELP = (f"built-in model ({', '.join(MODEL_NAMES)}), a local Hugging Face model directory, a "
              "repo id already in the local Hugging Face cache (org/name), or module.path:Factory")


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1 (argparse turns the ValueError into exit code 2)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "positive integer"  # argparse names the type in its message


def step_int(text: str) -> int:
    """argparse type: a training step, an integer ≥ 0 (a fraction is refused, not truncated)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


step_int.__name__ = "step (integer ≥ 0)"


def precision_bits(text: str) -> int:
    """argparse type: a precision cap in bits, an integer in [0, 2²⁰] (0: no refinement).

    >>> precision_bits("512")
    512
    >>> precision_bits("-1")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a precision in bits, an integer from 0 to 1048576, got '-1'
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 1 << 20:
        raise argparse.ArgumentTypeError(
            f"expected a precision in bits, an integer from 0 to {1 << 20}, got {text!r}")
    return value


def seed_int(text: str) -> int:
    """argparse type: a seed, an integer in [0, 2⁶³ − 1] (torch's generators take 64 bits).

    >>> seed_int("7")
    7
    >>> seed_int(str(2**63))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected seed to be an integer ≥ 0 and ≤ 9223372036854775807, got ...
    """
    from empirical.validation import check_seed  # loads torch: parsing a seed means a command runs

    try:
        return check_seed(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seed to be an integer, got {text!r}") from None
    except EmpiricalError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


_INFINITY = ("inf", "+inf", "infinity", "+infinity")


def _float(text: str, *, infinite: bool) -> float:
    """``text`` as a float; a number that overflows to ±∞ is refused: ∞ only when written as inf."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r} (NaN)")
    if math.isinf(value):
        if infinite and text.strip().lower() in _INFINITY:
            return value
        named = " (write inf for the exact limit)" if infinite else ""
        if text.strip().lower().lstrip("+-") in ("inf", "infinity"):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        raise argparse.ArgumentTypeError(f"expected a number that fits a float, got {text!r}, which "
                                         f"overflows to infinity{named}")
    return value


def finite_float(text: str) -> float:
    """argparse type: a finite float (NaN, ±inf and overflowing numbers such as 1e400 refused).

    >>> finite_float("1e-3")
    0.001
    >>> finite_float("1e400")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a number that fits a float, got '1e400', which overflows to infinity
    """
    return _float(text, infinite=False)


def scale_float(text: str) -> float:
    """argparse type: a scale c, finite, or ∞ (the exact limit) only when written ``inf``.

    >>> scale_float("inf"), scale_float("1e3")
    (inf, 1000.0)
    >>> scale_float("1e400")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    argparse.ArgumentTypeError: ... got '1e400', which overflows to infinity (write inf for the exact limit)
    """
    return _float(text, infinite=True)


def settle_progress(args: argparse.Namespace, stream: TextIO) -> None:
    """Set ``args.quiet`` (which every progress bar of a command reads) to whether bars are off:
    with ``--quiet``, and when ``stream`` (stderr) is not a terminal unless ``--progress`` asks
    for them, so that a log or a pipe gets no bar redrawn into it.

    >>> import io
    >>> args = argparse.Namespace(quiet=False, progress=False)
    >>> settle_progress(args, io.StringIO()); args.quiet
    True
    >>> args = argparse.Namespace(quiet=False, progress=True)
    >>> settle_progress(args, io.StringIO()); args.quiet
    False
    """
    terminal = hasattr(stream, "isatty") and stream.isatty()
    args.quiet = bool(getattr(args, "quiet", False)) or not (terminal or getattr(args, "progress", False))


def _parent(title: str) -> tuple[argparse.ArgumentParser, argparse._ArgumentGroup]:
    parent = argparse.ArgumentParser(add_help=False)
    return parent, parent.add_argument_group(title)


def model_options(*, default: str = "minilm", positional: bool = False, random_init: bool = True,
                  model_help: str | None = None) -> argparse.ArgumentParser:
    """``--model``, ``--random-init``, ``--num-layers``, ``--tokenizer``, ``--cache-dir``.

    ``--model`` has no default of its own: :func:`empirical.cli.commands.common.model_spec` falls
    back to ``default``, so a command can tell a model that was named from one that was not.
    ``positional=True`` also accepts the model as a positional argument (the older form of
    ``degree``); ``random_init=False`` leaves out ``--random-init`` (the report measures both).
    The seed of a random initialization is :func:`runtime_options`' ``--seed``.
    """
    parent, group = _parent("model")
    group.add_argument("--model", default=None,
                       help=f"{model_help or MODEL_HELP} (default: {default})")
    if positional:
        group.add_argument("model_positional", nargs="?", default=None, metavar="MODEL",
                           help="the model, as --model (kept for older scripts)")
    parent.set_defaults(default_model=default, model_positional=None)
    if random_init:
        group.add_argument("--random-init", action="store_true",
                           help="same architecture with fresh seeded weights (the paper's baseline)")
    group.add_argument("--num-layers", type=positive_int, default=None,
                       help="keep only this many layers (default: all; at most the checkpoint's "
                       "depth unless the weights are random)")
    group.add_argument("--tokenizer", default=None, metavar="DIR",
                       help="tokenizer folder, for model folders that ship without one")
    group.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="Hugging Face cache to find repo ids in (default: HF_HUB_CACHE); "
                       "nothing is downloaded")
    return parent


def corpus_options(*, sentences: int = 100) -> argparse.ArgumentParser:
    """``--corpus FILE`` and ``--sentences N``, read with :func:`empirical.models.corpus.load_corpus`."""
    parent, group = _parent("corpus")
    group.add_argument("--corpus", default=None,
                       help="text file: one sentence per line, or blank-line-separated paragraphs "
                       "with # comments (default: built-in standard-library sentences)")
    group.add_argument("--sentences", type=positive_int, default=sentences,
                       help=f"how many sentences (default: {sentences})")
    return parent


def batching_options(*, batch_size: int = 32, max_length: int = 512,
                     why: str = "") -> argparse.ArgumentParser:
    """``--batch-size`` (sentences per forward pass) and ``--max-length`` (tokens per sentence);
    ``why`` says why a command's default batch differs from the others'.

    A training step's batch counts LM blocks instead, and is ``--blocks-per-step``.
    """
    parent, group = _parent("batching")
    group.add_argument("--batch-size", type=positive_int, default=batch_size,
                       help=f"sentences per batch (default: {batch_size}{': ' + why if why else ''})")
    group.add_argument("--max-length", type=positive_int, default=max_length,
                       help="truncate sentences to this many tokens, special tokens included "
                       f"(default: {max_length})")
    return parent


def device_options(*, dtypes: Sequence[str] | None = None, dtype_default: str | None = "float32",
                   dtype_help: str | None = None, dtype: bool = True) -> argparse.ArgumentParser:
    """``--device`` and (unless ``dtype=False``) ``--dtype`` among ``dtypes`` (default: all of
    :data:`empirical.models.builtin.DTYPE_NAMES`); ``check_outputs`` refuses a device that does not
    exist here (exit code 2)."""
    parent, group = _parent("device")
    group.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 "
                       "(default: cpu)")
    if dtype:
        group.add_argument("--dtype", choices=sorted(DTYPE_NAMES) if dtypes is None else list(dtypes),
                           default=dtype_default,
                           help=f"parameter dtype (default: {dtype_help or dtype_default})")
    return parent


def placement_options() -> argparse.ArgumentParser:
    """``--device-map``, ``--max-memory``, ``--offload-folder``: a model larger than memory, placed by
    accelerate and streamed module by module (:mod:`empirical.models.offload`)."""
    parent, group = _parent("models larger than memory (accelerate)")
    group.add_argument("--device-map", default=None, metavar="MAP",
                       help="auto, balanced, sequential, a device, or a JSON object (or .json file) of "
                       "module → device (cpu, disk, cuda:N)")
    group.add_argument("--max-memory", default=None, metavar="SIZE",
                       help="memory the weights may take, e.g. 1GiB (the CPU) or cpu=1GiB,0=10GiB; "
                       "implies --device-map auto")
    group.add_argument("--offload-folder", default=None, metavar="DIR",
                       help="where weights that do not fit are kept and streamed from")
    return parent


def output_options(*, json_help: str, plot: bool = False,
                   plot_suffixes: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """``--json PATH`` (and ``--plot PATH``); ``check_outputs`` checks them before any work.

    ``plot_suffixes`` narrows the plot formats a command writes (default: every format of
    :data:`empirical.outputs.PLOT_SUFFIXES`); it is recorded as ``plot_suffixes``.
    """
    parent, group = _parent("outputs")
    group.add_argument("--json", default=None, metavar="PATH", help=json_help)
    if plot:
        if plot_suffixes is None:
            plot_suffixes = PLOT_SUFFIXES
        group.add_argument("--plot", default=None, metavar="PATH",
                           help=f"write a plot to this path ({', '.join(plot_suffixes)})")
        parent.set_defaults(plot_suffixes=tuple(plot_suffixes))
    return parent


def params_options() -> argparse.ArgumentParser:
    """``--params GLOB``, repeatable: the parameters that scale (default: all). A certificate is
    checked with the ``--params`` it was written with."""
    parent, group = _parent("parameters")
    group.add_argument("--params", action="append", default=None, metavar="GLOB",
                       help="parameters that scale: a name or glob pattern, repeatable "
                       "(default: all parameters)")
    return parent


def runtime_options(*, quiet: bool = True, seed_help: str | None = None,
                    seed_default: int | None = 0) -> argparse.ArgumentParser:
    """``--debug`` (also accepted before the command's name), ``--quiet`` and ``--progress``
    (progress bars never, or also when stderr is not a terminal: :func:`settle_progress`) and,
    with ``seed_help``, ``--seed``."""
    parent, group = _parent("runtime")
    if quiet:
        group.add_argument("--quiet", action="store_true", help="no progress bars")
        group.add_argument("--progress", action="store_true",
                           help="progress bars also when stderr is not a terminal (by default they "
                                "are shown on a terminal only; --quiet wins)")
    if seed_help is not None:
        group.add_argument("--seed", type=seed_int, default=seed_default, help=seed_help)
    # SUPPRESS: `normsat --debug COMMAND` sets it before the command's parser runs; keep it.
    group.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=f"show the full traceback of an error (or set {DEBUG_VARIABLE}=1)")
    return parent
