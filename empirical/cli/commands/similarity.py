"""``normsat similarity``: per-layer similarity of a model at θ and at c·θ (paper Figure 4)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from empirical.cli.options import (
    batching_options,
    corpus_options,
    device_options,
    model_options,
    output_options,
    placement_options,
    precision_bits,
    runtime_options,
    scale_float,
)
from empirical.errors import EmpiricalError
from empirical.outputs import write_json

if TYPE_CHECKING:
    from empirical.measure.similarity import SimilarityResult

__all__ = ["register", "run_variants"]

SCHEMA = "normsat.similarity-runs/1"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "similarity",
        help="per-layer cosine of hidden states at θ and at c·θ (paper Figure 4)",
        description="Mean token cosine between each hidden state of a model at θ and at c·θ, "
        "over a corpus. Prints a table; writes JSON and a plot on request.",
        parents=[model_options(), corpus_options(), batching_options(batch_size=32), device_options(),
                 placement_options(),
                 output_options(json_help="write the results as JSON to this path", plot=True),
                 runtime_options(seed_help="seed of the random initialization (default: 0)")],
    )
    parser.add_argument("--compare-random", action="store_true",
                        help="also measure the same architecture with random-init weights")
    parser.add_argument("--scale", type=scale_float, default=1000.0,
                        help="the factor c ≥ 1 applied to every parameter (default: 1000); inf "
                        "compares with the exact saturated network (the c → ∞ limit, not a "
                        "large c)")
    parser.add_argument("--max-precision", type=precision_bits, default=1024, metavar="BITS",
                        help="with --scale inf: the highest precision, in bits, at which tokens "
                        "float64 leaves undetermined are decided again in ball arithmetic "
                        "(128, 256, … up to this; below 128, off; default: 1024)")
    parser.set_defaults(func=run)


def run_variants(args: argparse.Namespace) -> dict[str, tuple[dict[str, Any], SimilarityResult]]:
    """Measure the requested model (and its random-init twin with --compare-random)."""
    from empirical.cli.commands.common import load_args_model, model_spec
    from empirical.measure.similarity import representation_similarity
    from empirical.models.corpus import load_corpus
    from empirical.models.factories import is_factory

    corpus = load_corpus(args.corpus, n=args.sentences)
    name = model_spec(args)
    if args.compare_random and is_factory(name):
        raise EmpiricalError(f"--compare-random needs a named model or a folder, got the factory {name}")
    variants = [args.random_init] + ([True] if args.compare_random and not args.random_init else [])
    measured = {}
    for random_init in variants:
        model, tokenizer = load_args_model(args, random_init=random_init)
        result = representation_similarity(
            model, tokenizer, corpus, scale=args.scale, batch_size=args.batch_size,
            max_length=args.max_length, progress=not args.quiet, max_precision=args.max_precision,
        )
        label = "random-init" if random_init else "pretrained"
        identity = {"name": name, "random_init": random_init,
                    "seed": args.seed if random_init else None}
        measured[label] = (identity, result)
    return measured


def runs_to_json(measured: dict[str, tuple[dict[str, Any], SimilarityResult]]) -> dict[str, Any]:
    """The JSON document of a set of labelled runs."""
    from empirical.models.provenance import versions

    runs = []
    for label, (identity, result) in measured.items():
        data = result.to_dict()
        data["model"] = {**identity, **data["model"]}
        runs.append({"label": label, **data})
    return {"schema": SCHEMA, "runs": runs, "versions": versions()}


def run(args: argparse.Namespace) -> int:
    from empirical import distributed
    from empirical.cli.commands.common import check_outputs, model_spec
    from empirical.measure.plotting import plot_similarity

    check_outputs(args)
    measured = run_variants(args)
    if not distributed.is_writer():  # under torchrun every rank holds the result; one prints it
        return 0
    for label, (identity, result) in measured.items():
        print(f"\n{identity['name']} ({label}), {result.n_sentences} sentences, "
              f"{sum(result.n_tokens.values())} tokens, {result.n_truncated} truncated")
        print(result.table())
    if args.json:
        print(f"\nJSON: {write_json(runs_to_json(measured), args.json)}")
    if args.plot:
        results = {label: result for label, (_identity, result) in measured.items()}
        print(f"plot: {plot_similarity(results, args.plot, title=model_spec(args))}")
    return 0
