"""A curve's shape in words: where it rose, peaked, fell and ended, not only its two endpoints.

A measured curve along training (a similarity, a loss) often rises and falls again; "went from A
at the first step to B at the last" hides that. :func:`describe_shape` names the turns instead.
A turn counts only when the curve moves back by more than ``tolerance`` from its extreme (smaller
wiggles are noise), and an extreme held within ``tolerance`` over several points is given as the
range of steps where it was held.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

from empirical.errors import EmpiricalError

__all__ = ["describe_shape", "turning_points"]

MOST_TURNS = 2
"""Turns told one by one; a curve with more is summarised by its range."""


def turning_points(values: Sequence[float], tolerance: float) -> list[int]:
    """Indices of the curve's start, of each extreme that a move back by more than ``tolerance``
    confirms, and of its last extreme (the end, or the extreme it was held within ``tolerance`` of
    until the end). A curve that never leaves ``tolerance`` of its start gives ``[0]``.

    >>> turning_points([0.0, 0.84, 0.835, 0.2, -0.15], 0.01)
    [0, 1, 4]
    >>> turning_points([0.5, 0.505, 0.498], 0.01)
    [0]
    """
    if tolerance < 0 or not math.isfinite(tolerance):
        raise EmpiricalError(f"turning_points expected a finite tolerance >= 0, got {tolerance}")
    pivots, trend, candidate = [0], 0, 0
    for index, value in enumerate(values):
        if trend == 0:  # not yet away from the start by more than the tolerance
            if abs(value - values[0]) > tolerance:
                trend, candidate = (1 if value > values[0] else -1), index
        elif trend * (value - values[candidate]) >= 0:  # further the same way: a new extreme
            candidate = index
        elif abs(value - values[candidate]) > tolerance:  # moved back: the extreme was a turn
            pivots.append(candidate)
            trend, candidate = -trend, index
    if trend != 0:
        pivots.append(candidate)
    return pivots


def describe_shape(steps: Sequence[float], values: Sequence[float], *, tolerance: float,
                   digits: int = 3) -> str:
    """The curve ``values`` over ``steps`` in words: a verb phrase such as "rose from 0.011 at step 0
    to a peak of 0.840 at steps 4–17 (held within 0.01), then fell to -0.153 at step 300".

    Turns are :func:`turning_points`; an extreme held within ``tolerance`` over several steps is
    given as that range of steps. A curve with more than two turns is summarised by its lowest and
    highest values and its end.

    >>> print(describe_shape([0, 4, 17, 73, 300], [0.011, 0.84, 0.835, 0.2, -0.153],
    ...                      tolerance=0.01))  # doctest: +NORMALIZE_WHITESPACE
    rose from 0.011 at step 0 to a peak of 0.840 at steps 4–17 (held within 0.01),
    then fell to -0.153 at step 300
    >>> describe_shape([0, 10, 20], [0.5, 0.505, 0.498], tolerance=0.01)
    'stayed at 0.500 (within 0.01) from step 0 to step 20'
    """
    if len(steps) != len(values) or not values:
        raise EmpiricalError(f"describe_shape expected as many steps as values, at least one, got "
                             f"{len(steps)} steps and {len(values)} values")
    pivots = turning_points(values, tolerance)

    def value(index: int) -> str:
        return f"{values[index]:.{digits}f}"

    def where(index: int) -> str:
        """The step of point ``index``, or the steps over which its value was held."""
        first = last = index
        while first > 0 and abs(values[first - 1] - values[index]) <= tolerance:
            first -= 1
        while last < len(values) - 1 and abs(values[last + 1] - values[index]) <= tolerance:
            last += 1
        if first == last:
            return f"at step {steps[index]:g}"
        return f"at steps {steps[first]:g}–{steps[last]:g} (held within {tolerance:g})"

    if len(pivots) == 1:
        return (f"stayed at {value(0)} (within {tolerance:g}) from step {steps[0]:g} to step "
                f"{steps[-1]:g}")
    if len(pivots) - 2 > MOST_TURNS:
        low = min(range(len(values)), key=values.__getitem__)
        high = max(range(len(values)), key=values.__getitem__)
        return (f"went up and down ({len(pivots) - 2} turns) between {value(low)} {where(low)} and "
                f"{value(high)} {where(high)}, from {value(0)} {where(0)} to {value(pivots[-1])} "
                f"{where(pivots[-1])}")
    words = [f"{_verb(values, pivots[0], pivots[1])} from {value(0)} {where(0)}"]
    for number, (start, end) in enumerate(pairwise(pivots)):
        last = number == len(pivots) - 2
        extreme = "" if last else ("a peak of " if values[end] > values[start] else "a trough of ")
        then = "" if number == 0 else f", then {_verb(values, start, end)}"
        words.append(f"{then} to {extreme}{value(end)} {where(end)}")
    return "".join(words)


def _verb(values: Sequence[float], start: int, end: int) -> str:
    return "rose" if values[end] > values[start] else "fell"
