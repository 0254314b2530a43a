"""``normsat degree``: the homogeneity degree of a model in its parameters, node by node."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

import torch
from torch import nn

from empirical.commands.common import add_model_option, write_json
from empirical.errors import EmpiricalError
from empirical.models import load_model
from empirical.provenance import model_record, versions
from homogeneity.analysis import analyze
from homogeneity.report import HomogeneityReport

__all__ = ["SENTENCES", "model_inputs", "register", "resolve_model", "run"]

SCHEMA = "normsat.degree/1"

SENTENCES = ("The parameter norm grows during training.", "Saturated attention is hard.")
"""The example sentences a Hugging Face model is traced on (two, so padding masks appear)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "degree",
        help="homogeneity degree of a model in its parameters, with grades and reasons",
        description="Trace MODEL with torch.export and derive the degree of homogeneity of each "
        "output in the parameters (exact, approximate, asymptotic or none), where the grade "
        "weakens and why, and a per-module summary. MODEL is a built-in name, a local Hugging "
        "Face directory, or module.path:Factory, a callable returning (model, args) or "
        "(model, args, kwargs).",
    )
    add_model_option(parser, flag=False)
    parser.add_argument("--params", action="append", default=None, metavar="GLOB",
                        help="parameters that scale: a name or glob pattern, repeatable "
                        "(default: all parameters)")
    parser.add_argument("--depth", type=int, default=3,
                        help="show modules at most this many levels deep (default: 3)")
    parser.add_argument("--json", default=None, help="write the full report as JSON to this path")
    parser.set_defaults(func=run)


def model_inputs(model: nn.Module, tokenizer: Any,
                 sentences: tuple[str, ...] = SENTENCES) -> dict[str, Any]:
    """Keyword inputs for a Hugging Face model: token ids, attention mask, all hidden states.

    Encoder-decoder models (T5) get the same ids as decoder inputs.
    """
    enc = tokenizer(list(sentences), return_tensors="pt", padding=True)
    inputs: dict[str, Any] = {"input_ids": enc["input_ids"],
                              "attention_mask": enc["attention_mask"],
                              "output_hidden_states": True}
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = enc["input_ids"]
    return inputs


def resolve_model(args: argparse.Namespace) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any]]:
    """The model and example inputs named by the MODEL argument."""
    if ":" in args.model and not args.model.startswith(("/", ".")):
        module_name, _, attr = args.model.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise EmpiricalError(f"cannot load {args.model!r}: {err}") from err
        made = factory()
        if not (isinstance(made, tuple) and len(made) in (2, 3) and isinstance(made[0], nn.Module)):
            raise EmpiricalError(
                f"expected {args.model} to return (model, args) or (model, args, kwargs), got "
                f"{type(made).__name__}"
            )
        return made[0], tuple(made[1]), dict(made[2]) if len(made) == 3 else {}
    model, tokenizer = load_model(args.model, random_init=args.random_init, seed=args.seed,
                                  num_layers=args.num_layers)
    return model, (), model_inputs(model, tokenizer)


def report_json(report: HomogeneityReport, model: nn.Module, name: str) -> dict[str, Any]:
    """The report with the model's identity and library versions."""
    return {"schema": SCHEMA, "model": {"name": name, **model_record(model)},
            "report": report.to_dict(), "versions": versions()}


def run(args: argparse.Namespace) -> int:
    model, example_args, example_kwargs = resolve_model(args)
    with torch.no_grad():
        report = analyze(model, *example_args, params=args.params, **example_kwargs)
    print(report.table(depth=args.depth))
    if args.json:
        print(f"\nJSON: {write_json(report_json(report, model, args.model), args.json)}")
    return 0
