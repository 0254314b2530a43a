"""``normsat lemmas``: every rule target's lemma, proved with sympy and checked against its rule."""

from __future__ import annotations

import argparse
from typing import Any

from empirical.cli.options import output_options, runtime_options
from empirical.outputs import write_json

__all__ = ["register", "run"]

SCHEMA = "normsat.lemmas/1"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lemmas",
        help="prove the lemma behind every degree rule and check each registered rule against it",
        description="For every op in the rule table, prove its lemma with sympy (the degree and "
        "grade the op gives for each sign of the input degree) and check that the registered rule "
        "gives what the lemma proves. Prints one row per op; exit code 1 if any is unproved.",
        parents=[output_options(json_help="write every target's result as JSON to this path"),
                 runtime_options()],
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from empirical.cli.commands.common import check_outputs
    from empirical.models.provenance import versions
    from homogeneity.verify import check_lemmas, lemma_rows, lemma_targets

    check_outputs(args)
    results = {}
    for target in tqdm(lemma_targets(), desc="lemmas", unit="target", disable=args.quiet):
        results.update(check_lemmas([target]))
    rows = lemma_rows(results)
    width = max(len(target) for target, _, _ in rows)
    for target, statement, verdict in rows:
        print(f"{target:<{width}}  {verdict if verdict != 'proved' else 'proved  '}  {statement}")
    unproved = sum(not r.proved for r in results.values())
    print(f"\n{len(results) - unproved} of {len(results)} targets proved"
          + (f"; {unproved} UNPROVED" if unproved else ""))
    if args.json:
        data = {"schema": SCHEMA, "results": [r.to_dict() for r in results.values()],
                "versions": versions()}
        print(f"JSON: {write_json(data, args.json)}")
    return 1 if unproved else 0
