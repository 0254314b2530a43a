"""How scaling measurements are read, at the edges of each rule: the relative changes of
g(c) = f(cθ)/cᵏ per doubling of c, written down with known slopes log₂(change ratio)."""

from __future__ import annotations

import pytest
import sympy
import torch

from homogeneity import Grade
from homogeneity.verify import classify_decay
from homogeneity.verify.scaling import SHIFT_SCALE, _check, degree_shift, off_degree


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
