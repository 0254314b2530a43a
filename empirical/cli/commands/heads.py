"""``normsat heads``: the head atlas (local, global or mixed heads), read from the exact limit."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from empirical.cli.options import (
    batching_options,
    corpus_options,
    device_options,
    model_options,
    output_options,
    placement_options,
    runtime_options,
    step_int,
)
from empirical.errors import EmpiricalError
from empirical.outputs import write_json

if TYPE_CHECKING:
    from empirical.measure.heads import HeadAtlas

__all__ = ["register"]

SCHEMA = "normsat.heads-runs/1"
_ARCH_LABELS = {"post": "post-LN", "pre": "pre-LN"}
RUN_NAMES = {"--model": "model", "--num-layers": "num_layers", "--tokenizer": "tokenizer",
             "--seed": "seed", "--cache-dir": "cache_dir"}
"""What a ``--run`` folder decides itself: these flags are refused beside it, not ignored."""


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
        parents=[model_options(), corpus_options(),
                 batching_options(batch_size=16, why="half of similarity's: the atlas holds every "
                                  "layer's attention weights of a batch, length² per head"),
                 device_options(), placement_options(),
                 output_options(json_help="write the atlas as JSON to this path", plot=True),
                 runtime_options(seed_help="seed of the random initialization (default: 0)",
                                 seed_default=None)],
    )
    parser.add_argument("--eps", type=_eps, default=1e-3,
                        help="tolerance of the certified scales, in (0, 1) (default: 1e-3)")
    parser.add_argument("--ties", choices=("nan", "uniform"), default="nan",
                        help="nan (default): ties the model's lower orders break are broken, in "
                        "float64 where float32 cannot tell, the rest reported as undetermined; "
                        "uniform: much faster, every leading-order tie (float32 near-ties "
                        "included) is shared uniformly")
    parser.add_argument("--compare-random", action="store_true",
                        help="also measure the same architecture with random-init weights")
    parser.add_argument("--run", action="append", default=None, metavar="DIR",
                        help="a normsat train folder: measure its checkpoint instead of --model (the "
                        "run names its model, tokenizer, depth and seed); repeat to compare runs "
                        "(e.g. post-LN beside pre-LN)")
    parser.add_argument("--step", type=step_int, default=None,
                        help="the checkpoint step of each --run (default: the last one saved)")
    parser.add_argument("--no-paper", action="store_true",
                        help="skip the paper's approximation at 1000·θ (one forward pass less)")
    parser.set_defaults(func=run)


def _last_step(folder: Path) -> int:
    saved = (folder / "checkpoints").glob("step-*.safetensors")
    steps = sorted(int(p.stem.removeprefix("step-")) for p in saved)
    if not steps:
        raise EmpiricalError(f"expected checkpoints in {folder / 'checkpoints'}, found none")
    return steps[-1]


def _variants(args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any], Any, Any, int]]:
    """(label, JSON fields, model, tokenizer, max_length) per model to measure."""
    from empirical.cli.commands.common import load_args_model, model_spec
    from empirical.models.loading import parse_dtype
    from empirical.training.runs import load_checkpoint, read_run

    if args.run:
        if args.random_init or args.compare_random:
            raise EmpiricalError("expected --run or --random-init/--compare-random, got both")
        given = [flag for flag, value in RUN_NAMES.items() if getattr(args, value) is not None]
        if given:
            raise EmpiricalError(f"expected --run without {', '.join(given)}: a normsat train folder "
                                 "names its own model, tokenizer, depth and seed")
        dtype = parse_dtype(args.dtype)
        labels: set[str] = set()
        for run in args.run:
            folder = Path(run)
            step = _last_step(folder) if args.step is None else args.step
            config = read_run(folder)["config"]
            model, tokenizer = load_checkpoint(folder, step)
            label = _ARCH_LABELS.get(config["arch"], config["arch"])
            label = label if label not in labels else f"{label} ({folder.name})"
            labels.add(label)
            # A trained model has positions only up to its context.
            yield (label, {"name": str(folder), "step": step, "arch": config["arch"]},
                   model.to(device=args.device, dtype=dtype), tokenizer,
                   min(args.max_length, config["context"]))
        return
    if args.seed is None:
        args.seed = 0
    for random_init in [args.random_init] + ([True] if args.compare_random and not args.random_init else []):
        model, tokenizer = load_args_model(args, random_init=random_init)
        label = "random-init" if random_init else "pretrained"
        yield (label, {"name": model_spec(args), "random_init": random_init,
                       "seed": args.seed if random_init else None}, model, tokenizer, args.max_length)


def run(args: argparse.Namespace) -> int:
    from empirical import distributed
    from empirical.cli.commands.common import check_outputs, model_spec
    from empirical.measure.heads import head_atlas, plot_atlas
    from empirical.models.corpus import load_corpus
    from empirical.models.provenance import versions
    from saturated.rules import Settings

    check_outputs(args)
    corpus = load_corpus(args.corpus, n=args.sentences)
    atlases: dict[str, HeadAtlas] = {}
    fields: dict[str, dict[str, Any]] = {}
    for label, extra, model, tokenizer, max_length in _variants(args):
        atlases[label] = head_atlas(model, tokenizer, corpus, eps=args.eps, batch_size=args.batch_size,
                                    max_length=max_length, paper=not args.no_paper,
                                    settings=Settings(ties=args.ties), progress=not args.quiet)
        fields[label] = extra
    if not distributed.is_writer():  # under torchrun every rank holds the atlas; one reports it
        return 0
    for label, atlas in atlases.items():
        print(f"\n{fields[label]['name']} ({label}), {len(corpus)} sentences: "
              + ", ".join(f"{n} {kind}" for kind, n in atlas.counts().items()))
        print(atlas.table())
    title = ("normsat train runs: " + ", ".join(Path(run).name for run in args.run) if args.run
             else model_spec(args))
    if args.json:
        runs = [{"label": label, **fields[label], **atlas.to_dict()} for label, atlas in atlases.items()]
        print(f"\nJSON: {write_json({'schema': SCHEMA, 'runs': runs, 'versions': versions()}, args.json)}")
    if args.plot:
        print(f"plot: {plot_atlas(atlases, args.plot, title=title)}")
    return 0
