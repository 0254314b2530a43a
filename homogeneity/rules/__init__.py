"""The rule table, one family of ops per module; importing this package registers every rule."""

import inspect

from homogeneity.lemmas import lemma_for
from homogeneity.rules import activations, elementwise, normalization, products, routing, shape
from homogeneity.rules.registry import (
    RULES,
    Rule,
    register_rule,
    rule,
    rule_for,
    rule_table,
    target_name,
)

__all__ = [
    "RULES",
    "Rule",
    "register_rule",
    "rule",
    "rule_for",
    "rule_table",
    "rule_table_markdown",
    "target_name",
]

FAMILIES = (products, elementwise, activations, normalization, shape, routing)
"""The rule modules, one family of ops each; importing them is what fills :data:`RULES`."""


def rule_table_markdown() -> str:
    """The rule table as Markdown, one row per rule with the statement of the lemma that proves it;
    ``docs/homogeneity.md`` embeds it verbatim.

    >>> print(rule_table_markdown().splitlines()[0])
    | rule | ops | maths | proved lemma |
    """
    grouped: dict[str, tuple[list[str], str, str]] = {}
    for target, fn in RULES.items():
        lemma = lemma_for(target)
        doc = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        entry = grouped.setdefault(fn.__name__, ([], doc, lemma.statement if lemma else "none"))
        entry[0].append(f"`{target_name(target)}`")
    lines = ["| rule | ops | maths | proved lemma |", "|---|---|---|---|"]
    for name, (ops, summary, statement) in sorted(grouped.items()):
        cells = [f"`{name}`", ", ".join(sorted(ops)), summary, statement]
        lines.append("| " + " | ".join(c.replace("|", "∣") for c in cells) + " |")
    return "\n".join(lines)
