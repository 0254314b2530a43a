"""How scaling measurements are read, at the edges of each rule: the relative changes of
g(c) = f(cθ)/cᵏ per doubling of c, written down with known slopes log₂(change ratio)."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
import sympy
import torch

from homogeneity import Grade
from homogeneity.verify import classify_decay
from homogeneity.verify.scaling import (
    _FLOOR,
    _SHIFT_TOLERANCE,
    SHIFT_SCALE,
    _check,
    _relative_change,
    degree_shift,
    off_degree,
)


@pytest.mark.parametrize(("changes", "expected"), [
    ([1.0, 0.75], "not homogeneous"),             # slope log₂ 0.75 ≈ −0.42: not settling
    ([1.0, 0.7], "polynomial"),                   # slope ≈ −0.51: one steady step of a power law
    ([1.0, 1e-3, 1e-15], "exponential"),          # to rounding, a step steeper than 2⁻¹⁰
    ([2.0 ** (-11 * i) for i in range(5)], "exponential"),  # steady c⁻¹¹ to rounding: too steep
    ([1.0, 0.5, 0.0], "exponential"),             # an exact 0 counts as the rounding floor
    ([4e-13, 1e-13], "polynomial"),               # to rounding by a factor 4 only
    ([1e-13, 1e-13, 2e-13, 1e-13], "polynomial"), # leading changes at rounding are skipped
    ([1.0, 0.5, 0.25, 0.25 * 2**-1.6], "exponential"),  # last slope −1.6 below 1.5 × (−1)
    ([1.0, 0.5, 0.25, 0.25 * 2**-1.4], "polynomial"),   # −1.4: still the same power law
    ([1.0, 0.25, 0.0625, 0.0625 * 2**-2.8], "polynomial"),   # steady −2: 1.5 × (−2) = −3 not reached
    ([1.0, 0.25, 0.0625, 0.0625 * 2**-3.2], "exponential"),
    ([1.0, 0.25, 0.0625, 0.0625 * 2**-3], "polynomial"),      # −3 = 1.5 × (−2) exactly: not below
    ([_FLOOR] * 3, "exact"),                      # changes at the rounding floor itself are rounding
    ([1.0, 0.5, _FLOOR, 0.4], "exponential"),     # a change at the floor ends the reading there
    ([_FLOOR * 2**10, _FLOOR], "polynomial"),     # to rounding by exactly 2¹⁰: a power law c⁻¹⁰ still
    # slopes −3, −1, −1, −2: the last is judged against the median −1 of the earlier ones (−1.5),
    # not against the first (−4.5) nor the median of all but the last two (−3)
    ([1.0, 2**-3, 2**-4, 2**-5, 2**-7], "exponential"),
    # slopes −¾, −¾, −1¼: a slow power law is held to at least −1 per doubling (1.5 × −1 = −1.5)
    ([1.0, 2**-0.75, 2**-1.5, 2**-2.75], "polynomial"),
])
def test_decay_rules_at_their_thresholds(changes: list[float], expected: str) -> None:
    assert classify_decay(changes) == expected


def _halving(ratio: float, count: int) -> list[torch.Tensor]:
    return [torch.tensor([3.0, -4.0], dtype=torch.float64) * ratio**i for i in range(count)]


def test_a_steady_shift_needs_enough_doublings() -> None:
    g = _halving(0.5, 6)
    assert degree_shift(g, doublings=5) == pytest.approx(-1.0)
    assert degree_shift(g, doublings=6) is None  # 7 values needed


def test_a_shift_must_be_large_enough_to_be_another_degree() -> None:
    assert degree_shift(_halving(2**-0.3, 8), doublings=5) == pytest.approx(-0.3)
    assert degree_shift(_halving(2**-0.2, 8), doublings=5) is None  # |m| < ¼: settling slowly
    assert degree_shift(_halving(2**0.3, 8), doublings=5) == pytest.approx(0.3)


def test_a_shift_that_turns_the_tensor_is_not_steady() -> None:
    """Norms halve at every doubling, but the direction rotates: not g(2c) = 2ᵐ g(c)."""
    turning = [torch.tensor([1.0, float(i)], dtype=torch.float64) / torch.tensor([1.0, float(i)]).norm()
               * 0.5**i for i in range(8)]
    assert degree_shift(turning, doublings=5) is None


@pytest.mark.parametrize(("turned", "shift"), [
    (1, -1.0),   # before the last 5 doublings: not read
    (2, None),   # the first value of the window
    (7, None),   # the last value: the last doubling is checked too
])
def test_a_shift_is_read_over_the_last_doublings_only(turned: int, shift: float | None) -> None:
    """g halves at every doubling, but one value points another way (same norm, so the median
    slope stays −1): inside the last ``doublings`` doublings it breaks the steady shift."""
    g = _halving(0.5, 8)
    g[turned] = torch.tensor([4.0, 3.0], dtype=torch.float64) * 0.5**turned
    assert degree_shift(g, doublings=5) == shift


@pytest.mark.parametrize("size", [1e3, 1e-3])
@pytest.mark.parametrize(("wobble", "steady"), [(1e-4, True), (1e-2, False)])
def test_a_steady_shift_is_judged_relative_to_the_output_size(size: float, wobble: float,
                                                              steady: bool) -> None:
    """g(c) halving per doubling up to a factor 1 ± wobble: each step departs from the steady
    2ᵐ by about 4·wobble of ‖g‖ (within the 10⁻³ tolerance for 10⁻⁴, not for 10⁻²), whatever
    the output's size."""
    g = [torch.tensor([3.0, -4.0], dtype=torch.float64) * size * 0.5**i * (1 + wobble * (-1) ** i)
         for i in range(8)]
    shift = degree_shift(g, doublings=5)
    if steady:
        assert shift == pytest.approx(-1.0, abs=1e-3)
    else:
        assert shift is None


def test_the_shift_tolerance_is_inclusive() -> None:
    """g halves exactly but for the last value, off by a vector y ⊥ g: ‖g(2c) − 2⁻¹ g(c)‖ = y,
    taken at exactly the tolerance times ‖g(2c)‖ in float64, and one float above it."""
    def last(y: float) -> torch.Tensor:
        return torch.tensor([1.0, y], dtype=torch.float64)

    y = _SHIFT_TOLERANCE / math.sqrt(1 - _SHIFT_TOLERANCE**2)  # y = tol·√(1 + y²)
    for _ in range(1000):  # the float64 y nearest to it where the two sides are equal
        if y == _SHIFT_TOLERANCE * float(last(y).norm()):
            break
        y = math.nextafter(y, 0.0 if y > _SHIFT_TOLERANCE * float(last(y).norm()) else 1.0)
    assert y == _SHIFT_TOLERANCE * float(last(y).norm())
    head = [torch.tensor([2.0 ** (5 - i), 0.0], dtype=torch.float64) for i in range(5)]
    assert degree_shift([*head, last(y)], doublings=5) == -1.0
    assert degree_shift([*head, last(math.nextafter(y, 1.0))], doublings=5) is None


def _median_slope(norms: list[float]) -> float:
    return statistics.median(math.log2(b / a) for a, b in itertools.pairwise(norms))


def _nudged(x: float, ulps: int) -> float:
    for _ in range(abs(ulps)):
        x = math.nextafter(x, math.inf if ulps > 0 else 0.0)
    return x


def test_a_shift_of_exactly_a_quarter_counts() -> None:
    """Norms shrinking by 2^(−¼) per doubling, rounded so that the median of the 10 slopes is
    exactly −0.25 in float64 (the mean of the two middle ones): |m| = ¼ is another degree.
    The median depends on log2's last bit, which libms do not agree on: if this platform's log2
    does not give exactly −0.25 on these norms, two of them are nudged by up to 4 units in the
    last place until it does (the first such pair, nearest first)."""
    start = [1.0, 0.8408964152537147, 0.7071067811865476, 0.5946035575013604, 0.5,
             0.42044820762685736, 0.3535533905932738, 0.29730177875068037, 0.25000000000000017,
             0.21022410381342868, 0.17677669529663684]
    nudges = sorted(itertools.product(range(-4, 5), repeat=2), key=lambda n: abs(n[0]) + abs(n[1]))
    candidates = ([_nudged(v, u if k == i else w if k == j else 0) for k, v in enumerate(start)]
                  for u, w in nudges for i, j in itertools.combinations(range(1, len(start)), 2))
    norms = next((n for n in candidates if _median_slope(n) == -0.25), None)
    assert norms is not None, "no norms within 4 ulps of these have a median log2 slope of exactly -0.25"
    g = [torch.tensor([n], dtype=torch.float64) for n in norms]
    assert degree_shift(g, doublings=10) == -0.25


@pytest.mark.parametrize(("measured", "shown"), [
    (1.0000001, "1"), (-0.5, "-0.5"), (1.5, "1.5"), (1.004, "1"), (2.346, "2.35"),
])
def test_an_off_degree_is_named_to_two_decimals(measured: float, shown: str) -> None:
    assert off_degree(measured) == f"not homogeneous of the claimed degree (measured degree ≈ {shown})"


@pytest.mark.parametrize(("a", "b", "change"), [
    ([0.0, 0.0], [0.0, 0.0], 0.0),            # an output that is zero at every scale: unchanged
    ([3.0, 4.0], [0.0, 0.0], math.inf),       # a nonzero output dropped to zero: overflow
    ([0.6, 0.8], [0.0, 0.0], math.inf),       # also when it had norm 1
    ([3.0, 4.0], [3.0, 4.0], 0.0),
    ([3.0, 4.0], [0.0, 5.0], math.sqrt(10) / 5),  # ‖(−3, 1)‖ / ‖(0, 5)‖
])
def test_relative_change(a: list[float], b: list[float], change: float) -> None:
    result = _relative_change(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
    assert result == pytest.approx(change, rel=1e-15)


def test_an_output_zero_at_every_scale_is_exact() -> None:
    """0 is homogeneous of every degree: no change, measured exact."""
    runs = [{"y": torch.zeros(2, dtype=torch.float64)} for _ in range(3)]
    check = _check("y", sympy.Integer(1), Grade.EXACT, runs, [1.0, 2.0, 4.0])
    assert (check.scales, check.changes, check.measured) == ((1.0, 2.0, 4.0), (0.0, 0.0), "exact")


def test_a_zero_or_non_finite_norm_has_no_shift() -> None:
    g = _halving(0.5, 8)
    assert degree_shift([*g[:-1], torch.zeros(2, dtype=torch.float64)], doublings=5) is None
    assert degree_shift([*g[:-1], torch.tensor([float("inf"), 0.0])], doublings=5) is None


def _one_degree_more(scales: list[float]) -> list[dict[str, torch.Tensor]]:
    """Runs of an output f(cθ) = c²·v checked against a claimed degree 1: g(c) = c·v doubles per
    doubling of c, a steady shift m = 1."""
    v = torch.tensor([3.0, -1.0], dtype=torch.float64)
    return [{"y": c**2 * v} for c in scales]


@pytest.mark.parametrize(("grade", "first", "count", "measured"), [
    # exact: 6 doublings reach the 5 an exact output needs
    (Grade.EXACT, 0, 7, off_degree(2.0)),
    # asymptotic: 6 doublings out to SHIFT_SCALE are fewer than the 10 it needs
    (Grade.ASYMPTOTIC, 14, 7, "not homogeneous"),
    # 10 doublings out to SHIFT_SCALE are enough
    (Grade.ASYMPTOTIC, 10, 11, off_degree(2.0)),
    # an output of no degree is measured, never given one
    (Grade.NONE, 10, 11, "not homogeneous"),
])
def test_a_steady_shift_counts_after_the_doublings_its_grade_needs(grade, first, count, measured) -> None:
    scales = [2.0**i for i in range(first, first + count)]
    assert scales[-1] == SHIFT_SCALE or first == 0
    check = _check("y", sympy.Integer(1), grade, _one_degree_more(scales), scales)
    assert (check.output, check.scales, check.measured) == ("y", tuple(scales), measured)
    assert check.changes == pytest.approx([0.5] * (count - 1))  # |1 − 2⁻¹| at every doubling


def test_a_run_that_overflows_at_once_keeps_only_its_first_scale() -> None:
    """The second run's output is exactly zero (an overflow inside the model): an infinite change
    at the first step, so one scale and no change remain: nothing was measured."""
    runs = [{"y": torch.tensor([1.0, 2.0])}, {"y": torch.zeros(2)}, {"y": torch.tensor([1.0, 2.0])}]
    check = _check("y", sympy.Integer(0), Grade.EXACT, runs, [1.0, 2.0, 4.0])
    assert (check.scales, check.changes, check.measured) == ((1.0,), (), "not homogeneous")
