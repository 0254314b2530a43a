"""``normsat --help`` stays fast: registering the commands is argparse only, and every command
imports torch, transformers and the rest of its machinery inside its ``run``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("torch", "transformers", "huggingface_hub", "safetensors", "numpy", "scipy", "sympy", "mpmath",
         "matplotlib", "tqdm")
"""Packages that cost seconds to import, none of which the parser needs."""

PROBE = """
import argparse, contextlib, io, json, sys
import empirical.cli
parser = empirical.cli.build_parser()
commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
helps = {}
for name in commands:  # each command's --help, as `normsat NAME --help` prints it
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        parser.parse_args([name, "--help"])
    helps[name] = out.getvalue()
print(json.dumps({"modules": sorted(sys.modules), "helps": helps}))
"""


def test_the_parser_and_every_help_build_without_heavy_imports() -> None:
    # A fresh interpreter: the test session itself has imported torch long ago.
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True,
                           check=True, timeout=120)
    seen = json.loads(probe.stdout)
    loaded = {module.split(".")[0] for module in seen["modules"]}
    assert "empirical" in loaded and "argparse" in loaded  # the probe did import the command line
    assert {"similarity", "degree", "check", "lemmas", "report", "norms", "projection", "train", "grid",
            "heads"} == set(seen["helps"])
    for name, text in seen["helps"].items():
        assert text.startswith(f"usage: normsat {name}"), name
    # The names come from the light tables (whitespace joined: argparse wraps to the terminal).
    flat = {name: " ".join(text.split()) for name, text in seen["helps"].items()}
    assert "built-in model (minilm, bert, roberta, t5," in flat["similarity"]
    assert "{bfloat16,float16,float32,float64}" in flat["similarity"]
    assert "(default: all of attention, attention (no biases)," in flat["projection"]
    assert "{post,pre,scale-invariant,t5}" in flat["train"] and "post: a BERT decoder" in flat["train"]
    assert sorted(loaded & set(HEAVY)) == []
