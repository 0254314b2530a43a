"""``normsat degree``: the homogeneity degree of a model in its parameters, node by node."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from empirical.cli.options import (
    device_options,
    model_options,
    output_options,
    params_options,
    placement_options,
    positive_int,
    runtime_options,
)
from empirical.errors import EmpiricalError
from empirical.outputs import check_output, write_json, write_text

if TYPE_CHECKING:
    import torch
    from torch import nn

    from homogeneity.report import HomogeneityReport

__all__ = ["SENTENCES", "model_inputs", "numeric_degrees", "register", "resolve_model", "run"]

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
        "Face directory, a cached repo id, or module.path:Factory, a callable returning (model, "
        "args) or (model, args, kwargs). The model may also be given as a positional argument.",
        parents=[model_options(positional=True),
                 device_options(dtype_default=None, dtype_help="float32; a factory's model keeps its own"),
                 placement_options(),
                 output_options(json_help="write the full report as JSON to this path"),
                 params_options(),
                 runtime_options(seed_help="seed of the random initialization (default: 0)")],
    )
    parser.add_argument("--depth", type=positive_int, default=3,
                        help="show modules at most this many levels deep (default: 3)")
    parser.add_argument("--certificate", default=None, metavar="PATH",
                        help="write the derivation as a certificate (JSON) that normsat check "
                        "re-checks without the rule table")
    parser.set_defaults(func=run)


def model_inputs(model: nn.Module, tokenizer: Any,
                 sentences: tuple[str, ...] = SENTENCES) -> dict[str, Any]:
    """Keyword inputs for a Hugging Face model: token ids, attention mask, all hidden states.

    Encoder-decoder models (T5) get the sentences shifted right as decoder inputs, as every
    corpus measurement does (:func:`empirical.models.batching.decoder_inputs`).
    """
    from empirical.models.batching import decoder_inputs

    enc = tokenizer(list(sentences), return_tensors="pt", padding=True)
    inputs: dict[str, Any] = {"input_ids": enc["input_ids"],
                              "attention_mask": enc["attention_mask"],
                              "output_hidden_states": True}
    return {**inputs, **decoder_inputs(model, tokenizer, enc["input_ids"], enc["attention_mask"])}


def resolve_model(args: argparse.Namespace) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any]]:
    """The model and example inputs named by the model argument."""
    import torch

    from empirical.cli.commands.common import load_args_model, model_spec, parse_dtype, placement_of
    from empirical.models.factories import check_factory_options, is_factory, make
    from empirical.models.loading import check_device, config_only

    name = model_spec(args)
    device = check_device(getattr(args, "device", "cpu"))
    if is_factory(name):
        check_factory_options(name, random_init=getattr(args, "random_init", False),
                              num_layers=args.num_layers)
        made = make(name)
        model = made.model.to(device)
        if getattr(args, "dtype", None):
            model = model.to(parse_dtype(args.dtype))
        if not made.args and not made.kwargs:
            if made.tokenizer is None:
                raise EmpiricalError(f"expected {name} to return (model, args) or (model, args, "
                                     "kwargs): degree needs example inputs to trace")
            return model, (), _on(model_inputs(model, made.tokenizer), device)
        return model, _on(made.args, device), _on(made.kwargs, device)
    placed = any(placement_of(args).values())
    if placed or (not getattr(args, "random_init", False) and config_only(name, args.cache_dir)):
        # A configuration without weights, or a model too large for memory: the degree does not
        # depend on the weights (the placement options are still checked).
        model, tokenizer = load_args_model(args, device="meta")
        device = torch.device("meta")
    else:
        model, tokenizer = load_args_model(args)
    return model, (), _on(model_inputs(model, tokenizer), device)


def _on(inputs: Any, device: torch.device) -> Any:
    """``inputs`` with every tensor moved to ``device`` (float tensors keep their dtype: inputs
    such as masks or positions are the user's choice)."""
    import torch
    import torch.utils._pytree as pytree

    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), inputs)


def _inputs_record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the model was traced on: shapes and dtypes of tensors, the values of the rest."""
    import torch

    def describe(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return {"shape": list(value.shape), "dtype": str(value.dtype)}
        return value if isinstance(value, bool | int | float | str | None) else type(value).__name__

    return {"args": [describe(a) for a in args],
            "kwargs": {key: describe(value) for key, value in kwargs.items()}}


def numeric_degrees(data: Any) -> Any:
    """``data`` with every ``"degree"`` that is a number as a JSON number (symbolic ones stay text).

    >>> numeric_degrees({"degree": "2", "cases": [{"degree": "k + 1"}, {"degree": "1/2"}]})
    {'degree': 2, 'cases': [{'degree': 'k + 1'}, {'degree': 0.5}]}
    """
    import sympy

    if isinstance(data, list):
        return [numeric_degrees(item) for item in data]
    if not isinstance(data, dict):
        return data
    converted = {key: numeric_degrees(value) for key, value in data.items()}
    degree = converted.get("degree")
    if isinstance(degree, str):
        value = sympy.sympify(degree)
        if value.is_Integer:
            converted["degree"] = int(value)
        elif value.is_number and value.is_finite:
            converted["degree"] = float(value)
    return converted


def report_json(report: HomogeneityReport, model: nn.Module, name: str,
                inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report with the model's identity, the inputs it was traced on and library versions."""
    from empirical.models.provenance import model_record, versions

    return {"schema": SCHEMA, "model": {"name": name, **model_record(model)}, "inputs": inputs,
            "report": numeric_degrees(report.to_dict()), "versions": versions()}


def run(args: argparse.Namespace) -> int:
    import torch

    from empirical.cli.commands.common import check_outputs, model_spec, stage_bar
    from empirical.models.factories import is_factory
    from homogeneity.analysis import analyze
    from homogeneity.certify import certify

    check_outputs(args)
    if args.certificate:
        check_output(args.certificate, suffixes=(".json",), what="--certificate")
    # Loaded before the bar: a model that cannot be loaded is a one-line error on a clean stderr.
    model, example_args, example_kwargs = resolve_model(args)
    with stage_bar(args, "degree", 2 if args.certificate else 1) as bar:
        bar.set_postfix_str("tracing and deriving")
        with torch.no_grad():
            report = analyze(model, *example_args, params=args.params, **example_kwargs)
            bar.update()
            certificate = None
            if args.certificate:
                bar.set_postfix_str("certificate")
                certificate = certify(model, *example_args, params=args.params, **example_kwargs)
                bar.update()
        bar.set_postfix_str("done")
    print(report.table(depth=args.depth))
    if certificate is not None:
        state = "complete" if certificate.complete else f"INCOMPLETE (no proved lemma for " \
            f"{', '.join(certificate.missing)})"
        print(f"\ncertificate ({len(certificate.steps)} steps, {state}): "
              f"{write_text(certificate.to_json(), args.certificate)}")
    if args.json:
        inputs = {**_inputs_record(example_args, example_kwargs), "params": args.params,
                  "sentences": None if is_factory(model_spec(args)) else list(SENTENCES)}
        data = report_json(report, model, model_spec(args), inputs)
        print(f"\nJSON: {write_json(data, args.json)}")
    return 0
