"""``normsat check``: re-check a degree certificate against the model, without the rule table."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from empirical.cli.commands.degree import resolve_model
from empirical.cli.options import device_options, model_options, runtime_options
from empirical.errors import EmpiricalError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check a degree certificate (from normsat degree --certificate) against a model",
        description="Export MODEL again on the same example inputs as normsat degree and check "
        "every step of CERTIFICATE: the nodes are the graph's, each step is an instance of a "
        "proved lemma whose side conditions hold, and the degrees compose. The check does not use "
        "the rule table that wrote the certificate. Exit code 0: accepted; 1: rejected (the "
        "failing steps are printed); 2: bad input (an unreadable certificate, one of another "
        "model or graph, or a model with an op no proved lemma covers).",
        parents=[model_options(), device_options(dtype_default=None,
                                                 dtype_help="float32; a factory's model keeps its own"),
                 runtime_options(quiet=False, seed_help="seed of the random initialization (default: 0)")],
    )
    parser.add_argument("certificate", metavar="CERTIFICATE", help="the certificate's JSON file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from empirical.cli.commands.common import model_spec
    from homogeneity.certificate import Certificate
    from homogeneity.checker import check_certificate

    path = Path(args.certificate).expanduser()
    if not path.is_file():
        raise EmpiricalError(f"expected a certificate file, but {args.certificate} "
                             f"{'is a folder' if path.is_dir() else 'does not exist'}")
    certificate = Certificate.from_json(path.read_text(encoding="utf-8"))
    model, example_args, example_kwargs = resolve_model(args)
    with torch.no_grad():
        verdict = check_certificate(certificate, model, *example_args, **example_kwargs)
    if verdict.bad_input:
        raise EmpiricalError(f"{args.certificate} does not apply to {model_spec(args)}: "
                             f"{verdict.bad_input}")
    print(verdict)
    if verdict.ok:
        for output, (degree, grade) in certificate.output_degrees().items():
            print(f"  {output}: degree {degree} ({grade})")
    return 0 if verdict.ok else 1
