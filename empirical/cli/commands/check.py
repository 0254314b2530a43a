"""``normsat check``: re-check a degree certificate against the model, without the rule table."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from empirical.cli.commands.degree import resolve_model
from empirical.cli.options import (
    device_options,
    model_options,
    output_options,
    params_options,
    runtime_options,
)
from empirical.errors import EmpiricalError

if TYPE_CHECKING:
    from homogeneity.checker import CertificateCheck

__all__ = ["EXIT_CODES", "register", "run"]

SCHEMA = "normsat.check/1"

EXIT_CODES = {"accepted": 0, "rejected": 1, "bad input": 2}
"""The checker's one exit-code rule, by verdict (:attr:`homogeneity.checker.CertificateCheck.verdict`)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check a degree certificate (from normsat degree --certificate) against a model",
        description="Export MODEL again on the same example inputs as normsat degree and check "
        "every field of CERTIFICATE: the nodes are the graph's, each step is an instance of a "
        "proved lemma whose side conditions hold, the degrees compose, and the outputs, the "
        "parameters that scale and the graph hash are the model's. The check does not use the "
        "rule table that wrote the certificate. Exit code 0: accepted (each output's checked "
        "degree is printed); 1: rejected, a step or an output does not follow (each failure is "
        "printed, named); 2: bad input (a file that is not a certificate, a certificate of another "
        "model, graph or set of --params, or a model with an op no proved lemma covers).",
        parents=[model_options(), device_options(dtype_default=None,
                                                 dtype_help="float32; a factory's model keeps its own"),
                 output_options(json_help="write the verdict as JSON to this path: each output's "
                                "checked degree and grade, each failure with its node and field"),
                 params_options(),
                 runtime_options(seed_help="seed of the random initialization (default: 0)")],
    )
    parser.add_argument("certificate", metavar="CERTIFICATE", help="the certificate's JSON file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from empirical.cli.commands.common import check_outputs, model_spec, stage_bar
    from homogeneity.certificate import Certificate, CertificateFieldError
    from homogeneity.checker import CertificateCheck, Failure, check_certificate
    from homogeneity.errors import HomogeneityError

    check_outputs(args)
    path = Path(args.certificate).expanduser()
    if not path.is_file():
        raise EmpiricalError(f"expected a certificate file, but {args.certificate} "
                             f"{'is a folder' if path.is_dir() else 'does not exist'}")
    try:
        certificate = Certificate.read(path)
    except HomogeneityError as err:  # not a certificate: the verdict is bad input, field named
        field = err.field if isinstance(err, CertificateFieldError) else "(file)"
        return _report(args, CertificateCheck(False, (Failure(field, str(err)),), bad_input=str(err)))
    model, example_args, example_kwargs = resolve_model(args)
    with stage_bar(args, "check", 1) as bar, torch.no_grad():
        bar.set_postfix_str("exporting and checking")
        verdict = check_certificate(certificate, model, *example_args, params=args.params,
                                    **example_kwargs)
        bar.update()
    if verdict.bad_input:
        verdict = replace(verdict, bad_input=f"{args.certificate} does not apply to {model_spec(args)}: "
                          f"{verdict.bad_input}")
    return _report(args, verdict)


def _report(args: argparse.Namespace, verdict: CertificateCheck) -> int:
    """Write ``--json``, print the verdict, and give its exit code; bad input is a one-line error."""
    from empirical.cli.commands.common import model_spec
    from empirical.models.provenance import versions
    from empirical.outputs import write_json

    data = {"schema": SCHEMA, "certificate": args.certificate, "model": model_spec(args),
            "params": args.params, **verdict.to_dict(), "exit_code": EXIT_CODES[verdict.verdict],
            "versions": versions()}
    written = write_json(data, args.json) if args.json else None
    if verdict.bad_input:
        raise EmpiricalError(verdict.bad_input)
    print(verdict)
    for output, (degree, grade) in verdict.outputs.items():
        print(f"  {output}: degree {degree} ({grade})")
    if written:
        print(f"JSON: {written}")
    return EXIT_CODES[verdict.verdict]
