"""Fixtures of the homogeneity tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from homogeneity.rules import RULES, register_rule


@pytest.fixture
def swapped_rule() -> Iterator[Callable[[Any, Any], None]]:
    """Register a rule for a test; the rule table is restored afterwards."""
    saved: dict[Any, Any] = {}

    def swap(target: Any, fn: Any) -> None:
        saved.setdefault(target, RULES[target])
        register_rule(target, fn)

    yield swap
    for target, fn in saved.items():
        register_rule(target, fn)
