"""``normsat heads``: the head atlas (local, global or mixed heads), read from the exact limit."""

from __future__ import annotations

import argparse
from typing import Any

from empirical.commands.common import (
    add_corpus_options,
    add_device_options,
    add_model_option,
    add_output_options,
    check_outputs,
    load_args_model,
    model_spec,
    positive_int,
    write_json,
)
from empirical.corpus import load_corpus
from empirical.heads import HeadAtlas, head_atlas, plot_atlas
from empirical.provenance import versions
from saturated.rules import Settings

__all__ = ["register"]

SCHEMA = "normsat.heads-runs/1"


def _eps(text: str) -> float:
    """argparse type: a tolerance in (0, 1)."""
    value = float(text)
    if not 0 < value < 1:
        raise ValueError(text)
    return value


_eps.__name__ = "tolerance in (0, 1)"  # argparse names the type in its message


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "heads",
        help="head atlas: which attention heads are local, global or mixed in the exact limit",
        description="For every layer and head: how many positions each query attends to in the "
        "exact saturated network, the attention mass and entropy at θ, the certified scale at "
        "which the head is within eps of hard attention, the paper's approximation at 1000·θ, "
        "and a class (local, global, mixed). Prints a table; writes JSON and a plot on request.",
    )
    add_model_option(parser)
    add_corpus_options(parser)
    parser.add_argument("--eps", type=_eps, default=1e-3,
                        help="tolerance of the certified scales, in (0, 1) (default: 1e-3)")
    parser.add_argument("--ties", choices=("nan", "uniform"), default="nan",
                        help="nan (default): ties the model's lower orders break are broken, in "
                        "float64 where float32 cannot tell, the rest reported as undetermined; "
                        "uniform: much faster, every leading-order tie (float32 near-ties "
                        "included) is shared uniformly")
    parser.add_argument("--compare-random", action="store_true",
                        help="also measure the same architecture with random-init weights")
    parser.add_argument("--no-paper", action="store_true",
                        help="skip the paper's approximation at 1000·θ (one forward pass less)")
    parser.add_argument("--batch-size", type=positive_int, default=16,
                        help="sentences per batch (default: 16)")
    parser.add_argument("--max-length", type=positive_int, default=512,
                        help="truncate sentences to this many tokens (default: 512)")
    add_device_options(parser)
    add_output_options(parser, json_help="write the atlas as JSON to this path", plot=True)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_outputs(args)
    corpus = load_corpus(args.corpus, n=args.sentences)
    variants = [args.random_init] + ([True] if args.compare_random and not args.random_init else [])
    atlases: dict[str, HeadAtlas] = {}
    for random_init in variants:
        model, tokenizer = load_args_model(args, random_init=random_init)
        label = "random-init" if random_init else "pretrained"
        atlases[label] = head_atlas(model, tokenizer, corpus, eps=args.eps, batch_size=args.batch_size,
                                    max_length=args.max_length, paper=not args.no_paper,
                                    settings=Settings(ties=args.ties), progress=not args.quiet)
        counts = atlases[label].counts()
        print(f"\n{model_spec(args)} ({label}), {len(corpus)} sentences: "
              + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        print(atlases[label].table())
    if args.json:
        runs = [{"label": label, "name": model_spec(args), "random_init": label == "random-init",
                 "seed": args.seed if label == "random-init" else None, **atlas.to_dict()}
                for label, atlas in atlases.items()]
        print(f"\nJSON: {write_json({'schema': SCHEMA, 'runs': runs, 'versions': versions()}, args.json)}")
    if args.plot:
        print(f"plot: {plot_atlas(atlases, args.plot, title=model_spec(args))}")
    return 0
