"""``normsat report``: the main job on the built-in default."""

from __future__ import annotations

import argparse
import shutil
from typing import Any

from empirical.cli.options import (
    MODEL_HELP,
    corpus_options,
    device_options,
    model_options,
    placement_options,
    runtime_options,
)
from empirical.outputs import check_output_dir

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="the main job: a Markdown report with figures and results.json",
        description="Measure the default model (pretrained MiniLM) against its random-init twin "
        "on the default corpus and write DIR/report.md, its PNG figures and DIR/results.json.",
        parents=[model_options(random_init=False,
                               model_help=f"model with pretrained weights: {MODEL_HELP}; a factory "
                               "has no random-init twin: the sections that need one are skipped"),
                 corpus_options(), device_options(), placement_options(),
                 runtime_options(seed_help="seed of the random-init twin (default: 0)")],
    )
    parser.add_argument("--out", default="normsat-report", metavar="DIR",
                        help="report folder (default: normsat-report)")
    parser.add_argument("--train-dir", default=None, metavar="DIR",
                        help="a normsat train folder for the training section (default: a short run)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from empirical import distributed
    from empirical.cli.commands.common import model_spec, parse_dtype, placement_of
    from empirical.cli.report import sections_for, write_report
    from empirical.models.factories import is_factory, resolve
    from empirical.models.loading import check_device
    from empirical.training.runs import read_run

    name = model_spec(args)
    if is_factory(name):
        resolve(name)  # a missing module or attribute fails before any work
    folder = check_output_dir(args.out, what="--out")
    check_device(args.device)
    if args.train_dir is not None:
        read_run(args.train_dir)  # a bad folder fails before any measurement
    created = not folder.exists()
    options = {"num_layers": args.num_layers, "dtype": parse_dtype(args.dtype),
               "device": args.device, "tokenizer": args.tokenizer, "cache_dir": args.cache_dir,
               **placement_of(args)}
    try:
        path = write_report(folder, sections=sections_for(name), model=name,
                            sentences=args.sentences, seed=args.seed,
                            progress=not args.quiet, corpus_path=args.corpus, load_options=options,
                            train_dir=args.train_dir)
    except BaseException:
        if created:  # a folder this run made holds only this run's partial output
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if distributed.is_writer():  # under torchrun every rank runs the report; one prints it
        print(f"report: {path}")
        print(f"results: {path.parent / 'results.json'}")
    return 0
