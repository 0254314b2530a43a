"""Fixtures of the homogeneity tests."""

from __future__ import annotations

import signal
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


@pytest.fixture
def ends_within_a_minute() -> Iterator[None]:
    """Fail a test still running after 60 s (SIGALRM): a hang guard for checks that loop until
    something settles, not a timing assertion."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError("still running after 60 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 60)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
