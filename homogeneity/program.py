"""What an exported program says about itself: its outputs by name and the parameters that scale.

The analysis, the certificate writer and the certificate checker each read these from the program
(the checker, which does not use the analysis, through this module alone).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import TensorArgument

from homogeneity.errors import HomogeneityError
from homogeneity.validation import check_sequence, describe

__all__ = ["leaf_name", "output_names", "select_parameters"]


def select_parameters(names: Iterable[str], params: str | Sequence[str] | None) -> set[str]:
    """The parameter names matching ``params`` (exact names or glob patterns; ``None``: all).

    Raises:
        HomogeneityError: a pattern matches no parameter.

    >>> sorted(select_parameters(["0.weight", "0.bias", "2.weight"], "*.weight"))
    ['0.weight', '2.weight']
    """
    available = list(names)
    if params is None:
        return set(available)
    patterns = [params] if isinstance(params, str) else \
        check_sequence(params, "params", what="parameter names or glob patterns")
    wrong = [pattern for pattern in patterns if not isinstance(pattern, str)]
    if wrong:
        raise HomogeneityError(f"expected params to hold parameter names or glob patterns, got "
                               f"{describe(wrong[0])}")
    chosen: set[str] = set()
    unmatched = []
    for pattern in patterns:
        hits = {name for name in available if fnmatch.fnmatchcase(name, pattern)}
        if not hits:
            unmatched.append(pattern)
        chosen |= hits
    if unmatched:
        sample = ", ".join(available[:8]) + (", …" if len(available) > 8 else "")
        raise HomogeneityError(
            f"params pattern(s) {', '.join(map(repr, unmatched))} match no parameter; expected "
            f"names or glob patterns over the model's {len(available)} parameters, e.g. {sample}"
        )
    return chosen


def output_names(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Map each user output's readable path (``last_hidden_state``, ``hidden_states.3``) to its node.

    Raises:
        HomogeneityError: an output is not a tensor.
    """
    specs = [s for s in program.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
    bad = [str(s.arg) for s in specs if not isinstance(s.arg, TensorArgument)]
    labels = [s.arg.name if isinstance(s.arg, TensorArgument) else "" for s in specs]
    structure = pytree.tree_unflatten(labels, program.call_spec.out_spec)
    named = {leaf_name(path): label for path, label in pytree.tree_leaves_with_path(structure)}
    if bad:
        kinds = ", ".join(n for n, label in named.items() if not label)
        raise HomogeneityError(
            f"expected tensor outputs, but output(s) {kinds or ', '.join(bad)} are not tensors "
            f"({', '.join(bad)}); return only tensors (or wrap the model) to analyse degrees"
        )
    return named


def leaf_name(path: Sequence[Any]) -> str:
    """A readable name for a pytree key path: ``hidden_states.3``; ``output`` for the root."""
    keys = (getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in path)
    return ".".join(str(k) for k in keys) or "output"
