"""The rule table, one family of ops per module; importing this package registers every rule."""

from homogeneity.rules import activations, elementwise, normalization, products, shape
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

FAMILIES = (products, elementwise, activations, normalization, shape)
"""The rule modules, one family of ops each; importing them is what fills :data:`RULES`."""


def rule_table_markdown() -> str:
    """The rule table as Markdown, one row per rule; ``docs/homogeneity.md`` embeds it verbatim.

    >>> print(rule_table_markdown().splitlines()[0])
    | rule | ops | maths |
    """
    grouped: dict[str, tuple[list[str], str]] = {}
    for op, name, summary in rule_table():
        grouped.setdefault(name, ([], summary))[0].append(f"`{op}`")
    lines = ["| rule | ops | maths |", "|---|---|---|"]
    for name, (ops, summary) in sorted(grouped.items()):
        lines.append(f"| `{name}` | {', '.join(ops)} | {summary.replace('|', '∣')} |")
    return "\n".join(lines)
