"""The checks of a run's state as read back from disk: ``train.json`` and the resume file's copy.

A run folder can be edited, damaged or swapped by hand, and what is read from it drives a resumed
run or a report. :func:`check_run_document` checks every field a reader uses (its type, its range,
the order of the steps, the configuration with :class:`~empirical.training.runs.TrainConfig`'s own
checks) and refuses an unknown key or a missing one, naming the file, the field and what was
expected; :func:`read_run_file` reads ``train.json`` with its size, nesting and numbers bounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from empirical.errors import EmpiricalError
from empirical.validation import read_json_document
from homogeneity.validation import check_integer, describe

__all__ = ["RUN_MAX_BYTES", "SCHEMA", "check_run_document", "read_run_file"]

SCHEMA = "normsat.train/2"
RUN_MAX_BYTES = 256 * 2**20
"""The longest train.json read: a run records about 1 kB a step (per-layer norms included), so
this holds some 200,000 steps, and parses in a few seconds."""
_FIT_KEYS = frozenset({"fits", "best", "best_by_aic", "best_by_information", "best_by_extrapolation",
                       "n", "skipped", "layer_growth"})
_REQUIRED = frozenset({"schema", "config", "stopped", "model", "corpus", "homogeneity", "evaluations",
                       "checkpoints", "records", "vocabulary", "provenance"})
_OPTIONAL = _FIT_KEYS | {"checkpoint_sha256"}
_STOPPED = frozenset({"last_checkpoint", "at_step", "signal"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _fail(path: Path | str, field: str, expected: str, value: Any) -> EmpiricalError:
    return EmpiricalError(f"expected {field} in {path} to be {expected}, got {describe(value)}")


def _steps(path: Path | str, field: str, entries: Any) -> list[int]:
    """The steps of a list of records (objects with an integer ``step``), strictly increasing."""
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise _fail(path, field, "a list of records (objects)", entries)
    steps = [check_integer(e.get("step"), f"{field}[{i}].step in {path}", low=0, error=EmpiricalError)
             for i, e in enumerate(entries)]
    for index in range(1, len(steps)):
        if steps[index] <= steps[index - 1]:
            raise EmpiricalError(f"expected the steps of {field} in {path} to increase, got "
                                 f"{steps[index]} after {steps[index - 1]} (at {field}[{index}]): "
                                 "the file was edited or is damaged")
    return steps


def _check_stopped(path: Path | str, stopped: Any) -> None:
    if stopped is None:
        return
    if not isinstance(stopped, Mapping) or set(stopped) != _STOPPED:
        raise _fail(path, "stopped", f"null or an object with {', '.join(sorted(_STOPPED))}", stopped)
    check_integer(stopped["last_checkpoint"], f"stopped.last_checkpoint in {path}", low=0,
                  error=EmpiricalError)
    if stopped["at_step"] is not None:
        check_integer(stopped["at_step"], f"stopped.at_step in {path}", low=0, error=EmpiricalError)
    if stopped["signal"] is not None and not isinstance(stopped["signal"], str):
        raise _fail(path, "stopped.signal", "null or a signal's name", stopped["signal"])


def _check_config(path: Path | str, config: Any) -> None:
    from dataclasses import fields

    from empirical.training.runs import TrainConfig

    if not isinstance(config, Mapping):
        raise _fail(path, "config", "an object", config)
    names = [f.name for f in fields(TrainConfig)]
    missing = [name for name in names if name not in config]
    unknown = [name for name in config if name not in names]
    if missing or unknown:
        problem = (f"no entry {missing[0]!r}" if missing else f"the unknown entry {unknown[0]!r}")
        raise EmpiricalError(f"expected config in {path} to have the entries {', '.join(names)}, "
                             f"got {problem}")
    try:
        TrainConfig(**config)
    except EmpiricalError as err:
        raise EmpiricalError(f"expected a valid config in {path}, got: {err}") from None


def check_run_document(data: Any, path: Path | str) -> dict[str, Any]:
    """``data`` if it is a ``normsat.train/2`` document whose fields a reader uses are well formed.

    Args:
        data: the parsed document (``train.json``, or the resume file's copy of it).
        path: where it was read, for messages.

    Raises:
        EmpiricalError: another schema, an unknown or a missing key, a configuration
            :class:`~empirical.training.runs.TrainConfig` refuses or with an entry missing, steps
            that do not increase, a vocabulary that is not a list of distinct ids, checkpoint
            checksums that are not SHA-256 digests.
    """
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
        raise EmpiricalError(f"expected a {SCHEMA} document in {path}, got schema {found!r}")
    unknown = sorted(set(data) - _REQUIRED - _OPTIONAL)
    missing = sorted(_REQUIRED - set(data))
    if unknown or missing:
        problem = f"the unknown key {unknown[0]!r}" if unknown else f"no key {missing[0]!r}"
        raise EmpiricalError(f"expected the keys of a {SCHEMA} document in {path}, got {problem}")
    _check_config(path, data["config"])
    _check_stopped(path, data["stopped"])
    for name in ("records", "checkpoints", "evaluations"):
        _steps(path, name, data[name])
    for index, evaluation in enumerate(data["evaluations"]):
        norm = evaluation.get("norm")
        if isinstance(norm, bool) or not isinstance(norm, int | float) or norm < 0:
            raise _fail(path, f"evaluations[{index}].norm", "a number ≥ 0", norm)
    vocabulary = data["vocabulary"]
    if not isinstance(vocabulary, Sequence) or isinstance(vocabulary, str) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in vocabulary) \
            or len(set(vocabulary)) != len(vocabulary):
        raise _fail(path, "vocabulary", "a list of distinct token ids", vocabulary)
    checksums = data.get("checkpoint_sha256", {})
    if not isinstance(checksums, Mapping) or not all(
            isinstance(step, str) and step.isdigit() and isinstance(digest, str)
            and _SHA256.fullmatch(digest) for step, digest in checksums.items()):
        raise _fail(path, "checkpoint_sha256", "an object of step → SHA-256 hex digest", checksums)
    return dict(data)


def read_run_file(path: Path) -> dict[str, Any]:
    """The checked document of the ``train.json`` at ``path``, read with bounds."""
    data = read_json_document(path, "run file", max_bytes=RUN_MAX_BYTES, max_depth=16)
    return check_run_document(data, path)
