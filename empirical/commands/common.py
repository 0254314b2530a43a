"""Options and helpers shared by several subcommands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from empirical.errors import EmpiricalError
from empirical.models import MODEL_NAMES

__all__ = ["add_device_options", "add_model_option", "parse_dtype", "write_json"]

_DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
           "float16": torch.float16}


def add_model_option(parser: argparse.ArgumentParser, *, flag: bool = True) -> None:
    """``--model NAME|DIR`` (or a positional MODEL), ``--random-init`` and ``--seed``."""
    help_text = f"built-in model ({', '.join(MODEL_NAMES)}) or a local Hugging Face model directory"
    if flag:
        parser.add_argument("--model", default="minilm", help=f"{help_text} (default: minilm)")
    else:
        parser.add_argument("model", help=help_text)
    parser.add_argument("--random-init", action="store_true",
                        help="same architecture with fresh seeded weights (the paper's baseline)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random initialization")
    parser.add_argument("--num-layers", type=int, default=None,
                        help="keep only this many layers (default: all)")


def add_device_options(parser: argparse.ArgumentParser) -> None:
    """``--dtype`` and ``--device``."""
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="float32",
                        help="parameter dtype (default: float32)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")


def parse_dtype(name: str) -> torch.dtype:
    """The torch dtype for a CLI name."""
    if name not in _DTYPES:
        raise EmpiricalError(f"expected a dtype among {', '.join(sorted(_DTYPES))}, got {name!r}")
    return _DTYPES[name]


def write_json(data: Any, path: str | Path) -> Path:
    """Write ``data`` as indented JSON, creating parent folders."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: strict JSON, so a NaN or infinity is an error here, not in the reader's parser
    out.write_text(json.dumps(data, indent=2, default=str, allow_nan=False) + "\n", encoding="utf-8")
    return out
