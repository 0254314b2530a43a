"""Helpers shared by several subcommands (their options are :mod:`empirical.cli.options`).

Every command that takes a model reads it with :func:`load_args_model` (one model argument:
``--model NAME|DIR|ORG/NAME|module.path:Factory``); every output file is checked with
:func:`check_outputs` before the computation and written with :func:`write_json` (atomic).
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from empirical.cli.options import MODEL_HELP, positive_int
from empirical.errors import EmpiricalError
from empirical.models.loading import check_device, load_model, parse_dtype
from empirical.outputs import (
    atomic_path,
    check_distinct,
    check_output,
    check_output_dir,
    write_json,
    write_text,
)

__all__ = [
    "MODEL_HELP",
    "OUTPUT_OPTIONS",
    "atomic_path",
    "check_output",
    "check_output_dir",
    "check_outputs",
    "load_args_model",
    "model_spec",
    "parse_dtype",
    "placement_of",
    "positive_int",
    "stage_bar",
    "write_json",
    "write_text",
]

def stage_bar(args: argparse.Namespace, desc: str, stages: int) -> tqdm:
    """A progress bar on stderr over a command's ``stages`` (silent with ``--quiet`` and, unless
    ``--progress``, off a terminal: :func:`~empirical.cli.options.settle_progress`): name the
    stage under way with ``set_postfix_str``, count it done with ``update()``."""
    return tqdm(total=stages, desc=desc, unit="stage", disable=bool(getattr(args, "quiet", False)))


def model_spec(args: argparse.Namespace) -> str:
    """The model named on the command line (``--model`` or the positional form)."""
    flagged, positional = getattr(args, "model", None), getattr(args, "model_positional", None)
    if any(given is not None and not given.strip() for given in (flagged, positional)):
        # What an unset shell variable ($MODEL) gives: never a request for the default model.
        raise EmpiricalError(f"expected a model, got an empty name (an unset shell variable?); "
                             f"leave out --model for the default ({args.default_model})")
    if flagged is not None and positional is not None and flagged != positional:
        raise EmpiricalError(f"expected one model, got --model {flagged} and MODEL {positional}")
    return str(flagged or positional or args.default_model)


OUTPUT_OPTIONS = {"json": "--json", "plot": "--plot", "certificate": "--certificate",
                  "saturation_plot": "--saturation-plot"}
"""Every option that names an output file (attribute → flag): no two may name the same file."""


def check_outputs(args: argparse.Namespace) -> None:
    """Check ``--json`` and ``--plot`` before any computation, so a bad path costs no run, and
    refuse two output options on one file (:data:`OUTPUT_OPTIONS`)."""
    check_distinct({flag: getattr(args, name, None) or None for name, flag in OUTPUT_OPTIONS.items()})
    if getattr(args, "json", None):
        check_output(args.json, suffixes=(".json",), what="--json")
    if getattr(args, "plot", None):
        check_output(args.plot, suffixes=args.plot_suffixes, what="--plot")
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
        cache_dir=args.cache_dir, **placement_of(args),
    )


def placement_of(args: argparse.Namespace) -> dict[str, Any]:
    """``--device-map``, ``--max-memory`` and ``--offload-folder`` as ``load_model`` takes them."""
    return {name: getattr(args, name, None) for name in ("device_map", "max_memory", "offload_folder")}
