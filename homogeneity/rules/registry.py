"""The one table of rules: ATen op → function from input degrees to output degree.

A rule mirrors its op's signature: every tensor argument arrives as a :class:`~homogeneity.Degree`
(lists of tensors as lists of degrees), every other argument as it appears in the graph. Its
docstring states the maths it rests on; the first line is the summary shown in the rule table.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from homogeneity.degree import Degree
from homogeneity.tracing import target_name

__all__ = ["RULES", "Rule", "register_rule", "rule", "rule_for", "rule_table", "target_name"]

Rule = Callable[..., Degree]

RULES: dict[Any, Rule] = {}
"""Every registered rule, keyed by op (an ATen overload such as ``torch.ops.aten.add.Tensor``)."""


def register_rule(target: Any, fn: Rule) -> Rule:
    """Register ``fn`` as the rule of op ``target``, replacing any earlier rule; returns ``fn``.

    Args:
        target: the op as it appears as ``node.target`` in exported graphs, e.g.
            ``torch.ops.aten.silu.default``.
        fn: called like the op, with a :class:`~homogeneity.Degree` in place of each tensor.

    >>> import torch
    >>> from homogeneity.degree import Degree
    >>> def silu(x: Degree) -> Degree:
    ...     '''SiLU(z) = z·σ(z): approximately ReLU, so degree k (approximate) for k > 0.'''
    ...     return x
    >>> built_in = RULES[torch.ops.aten.silu.default]
    >>> register_rule(torch.ops.aten.silu.default, silu) is silu
    True
    >>> _ = register_rule(torch.ops.aten.silu.default, built_in)   # put the built-in rule back
    """
    if not callable(fn):
        raise TypeError(f"a rule must be callable, got {type(fn).__name__}")
    RULES[target] = fn
    return fn


def rule(*targets: Any) -> Callable[[Rule], Rule]:
    """Decorator registering one function as the rule of each of ``targets``."""

    def decorate(fn: Rule) -> Rule:
        for target in targets:
            register_rule(target, fn)
        return fn

    return decorate


def rule_for(target: Any) -> Rule | None:
    """The rule of ``target``, or ``None`` if it has none (also for what cannot be an op)."""
    try:
        return RULES.get(target)
    except TypeError:  # unhashable: no op is
        return None


def rule_table(targets: Iterable[Any] | None = None) -> list[tuple[str, str, str]]:
    """Rows ``(op, rule function, docstring summary)``, sorted by op name."""
    chosen = RULES if targets is None else {t: RULES[t] for t in targets}
    rows = []
    for target, fn in chosen.items():
        doc = inspect.getdoc(fn) or ""
        rows.append((target_name(target), fn.__name__, doc.split("\n\n")[0].replace("\n", " ")))
    return sorted(rows)
