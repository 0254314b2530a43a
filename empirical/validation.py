"""Checks of the values that enter :mod:`empirical`'s public functions and the ``normsat`` options.

The checks themselves are :mod:`homogeneity.validation`'s; here they raise
:class:`~empirical.errors.EmpiricalError` and know the measurements' own arguments (seeds, steps,
counts, token ids, models with weights).

>>> check_seed(2**63)  # doctest: +ELLIPSIS
Traceback (most recent call last):
empirical.errors.EmpiricalError: expected seed to be an integer ≥ 0 and ≤ 9223372036854775807, got ...
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError
from homogeneity.untrusted import load_json
from homogeneity.validation import (
    check_integer,
    check_number,
    check_sequence,
    check_weights,
    describe,
)

__all__ = [
    "SEED_MAX",
    "check_count",
    "check_list",
    "check_measurable",
    "check_real",
    "check_seed",
    "check_step",
    "check_token_rows",
    "read_json_document",
]

SEED_MAX = 2**63 - 1
"""The largest seed: torch seeds its generators with a signed 64-bit integer."""


def check_seed(seed: Any, name: str = "seed") -> int:
    """A seed: an integer in [0, 2⁶³ − 1] (torch seeds its generators with a 64-bit integer)."""
    return check_integer(seed, name, low=0, high=SEED_MAX, error=EmpiricalError)


def check_count(value: Any, name: str, low: int = 1) -> int:
    """A count (sentences, layers, a batch size): an integer ≥ ``low``, fractions refused.

    >>> check_count(2, "batch_size")
    2
    """
    return check_integer(value, name, low=low, error=EmpiricalError)


def check_step(value: Any, name: str = "step") -> int:
    """A training step: an integer ≥ 0. A fractional step is refused, never truncated, so that two
    different steps cannot silently become one."""
    return check_integer(value, name, low=0, error=EmpiricalError)


def check_real(value: Any, name: str, **bounds: Any) -> float:
    """A real number within ``bounds`` (the keywords of :func:`homogeneity.validation.check_number`)."""
    return check_number(value, name, error=EmpiricalError, **bounds)


def check_list(value: Any, name: str, what: str) -> list[Any]:
    """A list (not a bare string, which would be read character by character)."""
    return check_sequence(value, name, what=what, error=EmpiricalError)


def check_measurable(model: Any, what: str) -> nn.Module:
    """``model`` if it is an ``nn.Module`` with real weights that ``what`` can read (not on the
    meta device, not complex)."""
    if not isinstance(model, nn.Module):
        raise EmpiricalError(f"expected an nn.Module for {what}, got {describe(model)}")
    if not any(hasattr(module, "_hf_hook") for module in model.modules()):
        # accelerate's hooks stream offloaded weights in as each module runs: meta is disk there
        check_weights(model, what, error=EmpiricalError)
    complex_names = [name for name, p in model.named_parameters() if p.is_complex()]
    if complex_names:
        raise EmpiricalError(f"expected real parameters for {what}, got the complex parameter "
                             f"'{complex_names[0]}': its imaginary part would be ignored")
    return model


def read_json_document(path: str | Path, what: str, *, max_bytes: int, max_depth: int = 32,
                       max_number_digits: int = 40) -> Any:
    """A JSON file from outside (a run's ``train.json``, a model's ``config.json``), read with its
    size, nesting and number length bounded (:func:`homogeneity.untrusted.load_json`, the reader
    certificates use too, here with its numbers converted); ``what`` names its kind (``"run file"``:
    errors say "the run file PATH"); 40 characters hold any float64 and any count this package reads.

    Raises:
        EmpiricalError: naming ``path`` and what was expected.
    """
    return load_json(path, max_bytes=max_bytes, max_depth=max_depth, what=what,
                     max_number_digits=max_number_digits, error=EmpiricalError)


def check_token_rows(inputs: Any) -> list[list[int]]:
    """Token ids, one sequence (a list of ints) or several, as lists of ints.

    Ids must be integers (Python or NumPy ints, integral tensors): a float id such as 101.7 is
    refused, never truncated to 101.

    >>> check_token_rows([101, 7, 102]), check_token_rows([[1, 2], [3]])
    ([[101, 7, 102]], [[1, 2], [3]])
    >>> check_token_rows([[101.7, 7.0]])
    Traceback (most recent call last):
    empirical.errors.EmpiricalError: expected token ids to be integers, got 101.7 (float) in sequence 0
    """
    if isinstance(inputs, torch.Tensor):
        if inputs.is_floating_point() or inputs.is_complex() or inputs.dim() not in (1, 2):
            raise EmpiricalError(f"expected token ids as an integer tensor of 1 or 2 dimensions, got "
                                 f"{inputs.dtype} of shape {tuple(inputs.shape)}")
        inputs = inputs.tolist()
    rows_in = check_list(inputs, "token ids", "token ids or of token id sequences")
    single = bool(rows_in) and not isinstance(rows_in[0], Sequence | torch.Tensor)
    rows = [rows_in] if single else [check_list(row, f"token id sequence {index}", "token ids")
                                      for index, row in enumerate(rows_in)]
    for index, row in enumerate(rows):
        for token in row:
            if isinstance(token, bool) or not isinstance(token, numbers.Integral):
                raise EmpiricalError(f"expected token ids to be integers, got {describe(token)} in "
                                     f"sequence {index}")
    return [[int(token) for token in row] for row in rows]
