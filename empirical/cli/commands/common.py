"""Options and helpers shared by several subcommands.

Every command that takes a model uses :func:`add_model_option` and :func:`load_args_model` (one
model argument: ``--model NAME|DIR|ORG/NAME|module.path:Factory``); every output file is checked with
:func:`check_output` before the computation and written with :func:`write_json` (atomic).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.models.loading import DTYPES, MODEL_NAMES, check_device, load_model, parse_dtype
from empirical.outputs import atomic_path, check_output, check_output_dir, write_json, write_text

__all__ = [
    "add_corpus_options",
    "add_device_option",
    "add_device_options",
    "add_model_option",
    "add_output_options",
    "atomic_path",
    "check_output",
    "check_output_dir",
    "check_outputs",
    "load_args_model",
    "model_spec",
    "parse_dtype",
    "positive_int",
    "write_json",
    "write_text",
]

MODEL_HELP = (f"built-in model ({', '.join(MODEL_NAMES)}), a local Hugging Face model directory, a "
              "repo id already in the local Hugging Face cache (org/name), or module.path:Factory")


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1 (argparse turns the ValueError into exit code 2)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "positive integer"  # argparse names the type in its message


def add_model_option(parser: argparse.ArgumentParser, *, flag: bool = True,
                     default: str = "minilm") -> None:
    """``--model``, ``--random-init``, ``--seed``, ``--num-layers``, ``--tokenizer``, ``--cache-dir``.

    ``flag=False`` also accepts the model as a positional argument (the older form of ``degree``).
    """
    # With the positional form, --model has no default, so that the two cannot silently disagree.
    parser.add_argument("--model", default=default if flag else None,
                        help=f"{MODEL_HELP} (default: {default})")
    if not flag:
        parser.add_argument("model_positional", nargs="?", default=None, metavar="MODEL",
                            help="the model, as --model (kept for older scripts)")
    parser.set_defaults(default_model=default)
    parser.add_argument("--random-init", action="store_true",
                        help="same architecture with fresh seeded weights (the paper's baseline)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random initialization")
    parser.add_argument("--num-layers", type=positive_int, default=None,
                        help="keep only this many layers (default: all; at most the checkpoint's "
                        "depth unless --random-init)")
    parser.add_argument("--tokenizer", default=None, metavar="DIR",
                        help="tokenizer folder, for model folders that ship without one")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="Hugging Face cache to find repo ids in (default: HF_HUB_CACHE); "
                        "nothing is downloaded")


def model_spec(args: argparse.Namespace) -> str:
    """The model named on the command line (``--model`` or the positional form)."""
    flagged, positional = getattr(args, "model", None), getattr(args, "model_positional", None)
    if flagged is not None and positional is not None and flagged != positional:
        raise EmpiricalError(f"expected one model, got --model {flagged} and MODEL {positional}")
    return str(flagged or positional or args.default_model)


def add_corpus_options(parser: argparse.ArgumentParser, *, sentences: int = 100) -> None:
    """``--corpus FILE`` and ``--sentences N``, read with :func:`empirical.models.corpus.load_corpus`."""
    parser.add_argument("--corpus", default=None,
                        help="text file: one sentence per line, or blank-line-separated paragraphs "
                        "with # comments (default: built-in standard-library sentences)")
    parser.add_argument("--sentences", type=positive_int, default=sentences,
                        help=f"how many sentences (default: {sentences})")


def add_device_options(parser: argparse.ArgumentParser, *, dtypes: Sequence[str] | None = None,
                       dtype_default: str | None = "float32", dtype_help: str | None = None) -> None:
    """``--dtype`` (among ``dtypes``, default: all of :data:`empirical.models.loading.DTYPES`) and
    ``--device``; :func:`check_outputs` refuses a device that does not exist here (exit code 2)."""
    parser.add_argument("--dtype", choices=sorted(DTYPES) if dtypes is None else list(dtypes),
                        default=dtype_default,
                        help=f"parameter dtype (default: {dtype_help or dtype_default})")
    add_device_option(parser)


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device`` alone, for commands whose dtype is fixed; checked by :func:`check_outputs`."""
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 "
                        "(default: cpu)")


def add_output_options(parser: argparse.ArgumentParser, *, json_help: str, plot: bool = False) -> None:
    """``--json PATH`` (and ``--plot PATH``); check them with :func:`check_outputs`."""
    parser.add_argument("--json", default=None, metavar="PATH", help=json_help)
    if plot:
        from empirical.measure.plotting import PLOT_SUFFIXES

        parser.add_argument("--plot", default=None, metavar="PATH",
                            help=f"write a plot to this path ({', '.join(PLOT_SUFFIXES)})")


def check_outputs(args: argparse.Namespace) -> None:
    """Check ``--json`` and ``--plot`` before any computation, so a bad path costs no run."""
    if getattr(args, "json", None):
        check_output(args.json, suffixes=(".json",), what="--json")
    if getattr(args, "plot", None):
        from empirical.measure.plotting import PLOT_SUFFIXES

        check_output(args.plot, suffixes=PLOT_SUFFIXES, what="--plot")
    if getattr(args, "device", None):
        check_device(args.device)


def load_args_model(args: argparse.Namespace, *, random_init: bool | None = None,
                    device: str | None = None) -> tuple[nn.Module, Any]:
    """The model and tokenizer the command-line options name (``random_init`` and ``device``
    override the options)."""
    dtype: torch.dtype = parse_dtype(getattr(args, "dtype", None) or "float32")
    return load_model(
        model_spec(args), random_init=args.random_init if random_init is None else random_init,
        seed=args.seed, num_layers=args.num_layers, dtype=dtype,
        device=device or getattr(args, "device", None) or "cpu", tokenizer=args.tokenizer,
        cache_dir=args.cache_dir,
    )
