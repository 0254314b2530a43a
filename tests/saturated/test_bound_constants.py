"""The constants and rates of the paper's bounds (Lemmas 6–8), each against its closed form in
mpmath at 60 digits: a bound that merely holds is not enough, it must be the stated one."""

from __future__ import annotations

import math

import mpmath
import pytest

from saturated.bounds import (
    MAX_DPS,
    sigmoid_bound,
    sigmoid_error,
    softmax_bound,
    softmax_constant,
    softmax_error,
    tanh_bound,
    tanh_error,
)
from saturated.errors import SaturationError

POINTS = [(0.5, 1.0), (-2.0, 3.0), (1e-3, 1e4), (7.0, 0.0), (-0.25, 40.0)]


def close(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    return bool(mpmath.almosteq(a, b, rel_eps=mpmath.mpf(10) ** -45, abs_eps=0))


@pytest.mark.parametrize(("x", "c"), POINTS)
def test_sigmoid_bound_is_e_to_the_minus_u_and_tight(x: float, c: float) -> None:
    """Lemma 6: |σ(cx) − step(x)| = 1/(1 + eᵘ) ≤ e^(−u), u = c|x|; the ratio is 1/(1 + e^(−u))."""
    with mpmath.workdps(60):
        u = mpmath.mpf(c) * abs(mpmath.mpf(x))
        assert close(sigmoid_bound(x, c, dps=60), mpmath.exp(-u))
        assert close(sigmoid_error(x, c, dps=60), 1 / (1 + mpmath.exp(u)))
        assert close(sigmoid_error(x, c, dps=60) / sigmoid_bound(x, c, dps=60), 1 / (1 + mpmath.exp(-u)))


@pytest.mark.parametrize(("x", "c"), POINTS)
def test_tanh_bound_is_two_e_to_the_minus_two_u_and_tight(x: float, c: float) -> None:
    """Lemma 8: |tanh(cx) − sign(x)| = 2/(e^(2u) + 1) ≤ 2e^(−2u); the ratio is 1/(1 + e^(−2u))."""
    with mpmath.workdps(60):
        u = mpmath.mpf(c) * abs(mpmath.mpf(x))
        assert close(tanh_bound(x, c, dps=60), 2 * mpmath.exp(-2 * u))
        assert close(tanh_error(x, c, dps=60), 2 / (mpmath.exp(2 * u) + 1))
        assert close(tanh_error(x, c, dps=60) / tanh_bound(x, c, dps=60), 1 / (1 + mpmath.exp(-2 * u)))


@pytest.mark.parametrize(("n", "t", "constant"), [
    (2, 1, 1), (3, 1, 2), (5, 1, 4), (3, 2, mpmath.mpf(1) / 2), (4, 2, mpmath.mpf(1) / 2),
    (9, 3, mpmath.mpf(2) / 3), (5, 4, mpmath.mpf(1) / 4), (7, 7, mpmath.mpf(1) / 7),
])
def test_softmax_constant_is_the_larger_of_one_over_t_and_n_minus_t_over_t_squared(n, t, constant) -> None:
    assert softmax_constant(n, t) == constant
    if t == 1:  # one maximal position is the default: K = n − 1
        assert softmax_constant(n) == constant == n - 1


@pytest.mark.parametrize(("n", "t"), [(3, 0), (3, 4), (0, 0), (2.0, 1), (3, 1.0)])
def test_softmax_constant_refuses_impossible_counts(n, t) -> None:
    with pytest.raises(SaturationError, match="expected 1 ≤ t ≤ n"):
        softmax_constant(n, t)


@pytest.mark.parametrize(("row", "c", "k", "margin"), [
    ([0.0, 0.0, -1.0, -3.0], 2.0, mpmath.mpf(1) / 2, 1.0),        # n = 4, t = 2
    ([0.0, -0.5, -0.5, -math.inf], 3.0, 2, 0.5),                    # −∞ is not an allowed position
    ([2.0, -1.0], 1.5, 1, 3.0),                                     # n = 2, t = 1
])
def test_softmax_bound_is_k_e_to_the_minus_c_margin(row, c, k, margin) -> None:
    """Lemma 7 with the margin δ (top score minus the next allowed one), not the smallest score."""
    with mpmath.workdps(60):
        assert close(softmax_bound(row, c, dps=60), k * mpmath.exp(-mpmath.mpf(c) * margin))


def test_softmax_error_is_the_larger_of_the_winners_and_the_top_losers() -> None:
    """With R = Σ_k e^(−c·a_k) over the losers' gaps a_k, the winners' error is R/(t(t + R)) and
    the top loser's e^(−cδ)/(t + R). x = (0, −1, −1, −1), c = 1 (t = 1, R = 3/e): the winners'
    is the larger; x = (0, 0, −1, −3), c = 2 (t = 2, R = e^(−2) + e^(−6)): the loser's is."""
    with mpmath.workdps(60):
        r = 3 * mpmath.exp(-1)
        winners, loser = r / (1 + r), mpmath.exp(-1) / (1 + r)
        assert winners > loser
        assert close(softmax_error([0.0, -1.0, -1.0, -1.0], 1.0, dps=60), winners)
        r = mpmath.exp(-2) + mpmath.exp(-6)
        winners, loser = r / (2 * (2 + r)), mpmath.exp(-2) / (2 + r)
        assert loser > winners
        assert close(softmax_error([0.0, 0.0, -1.0, -3.0], 2.0, dps=60), loser)


def test_every_allowed_position_tied_has_no_error_and_no_bound() -> None:
    assert softmax_error([1.0, 1.0, -math.inf], 5.0) == 0
    assert softmax_bound([1.0, 1.0, -math.inf], 5.0) == 0


@pytest.mark.parametrize("dps", [0, MAX_DPS + 1, True, 10.0])
def test_precision_outside_the_allowed_digits_is_refused(dps) -> None:
    with pytest.raises(SaturationError, match=f"precision of 1 to {MAX_DPS}"):
        sigmoid_bound(1.0, dps=dps)


def test_the_extreme_allowed_precisions_are_accepted() -> None:
    assert sigmoid_bound(1.0, dps=1) > 0
    assert mpmath.almosteq(tanh_error(0.1, 1.0, dps=MAX_DPS), 2 / (mpmath.exp(0.2) + 1), rel_eps=1e-14)


@pytest.mark.parametrize("c", [-1.0, math.inf, math.nan])
def test_scales_must_be_finite_and_non_negative(c: float) -> None:
    for function in (sigmoid_error, tanh_error, sigmoid_bound, tanh_bound):
        with pytest.raises(SaturationError, match="finite scale c ≥ 0"):
            function(1.0, c)
    with pytest.raises(SaturationError, match="finite scale c ≥ 0"):
        softmax_bound([0.0, -1.0], c)


@pytest.mark.parametrize("x", [0.0, -0.0, math.inf, -math.inf])
@pytest.mark.parametrize(("function", "limit"), [
    (sigmoid_error, "step"), (sigmoid_bound, "step"), (tanh_error, "sign"), (tanh_bound, "sign"),
])
def test_inputs_at_the_decision_boundary_or_infinite_are_refused(x: float, function, limit: str) -> None:
    """The message names the limit that is undefined (step for σ, sign for tanh) and what arrived."""
    message = (rf"^{limit} is not determined at 0 \(its limit is undefined there\)$" if x == 0
               else f"^expected a finite input to {limit}, got {x!r}$")
    with pytest.raises(SaturationError, match=message):
        function(x, 1.0)


@pytest.mark.parametrize(("function", "closed_form"), [
    (sigmoid_error, lambda u: 1 / (1 + mpmath.exp(u))),
    (sigmoid_bound, lambda u: mpmath.exp(-u)),
    (tanh_error, lambda u: 2 / (mpmath.exp(2 * u) + 1)),
    (tanh_bound, lambda u: 2 * mpmath.exp(-2 * u)),
])
def test_sigmoid_and_tanh_default_to_scale_one_and_fifty_digits(function, closed_form) -> None:
    """Called with x alone, each function evaluates at c = 1 with 50 digits (its signature's
    documented defaults): the same number, bit for bit, as the explicit call."""
    value = function(-0.7)
    assert value == function(-0.7, 1, dps=50)
    with mpmath.workdps(80):
        assert mpmath.almosteq(value, closed_form(mpmath.mpf(0.7)), rel_eps=mpmath.mpf(10) ** -48)


def test_softmax_error_and_bound_default_to_scale_one_and_fifty_digits() -> None:
    """x = (0, −1, −3) at c = 1: t = 1, R = e^(−1) + e^(−3), error R/(1 + R); bound 2e^(−1)."""
    row = [0.0, -1.0, -3.0]
    error, bound = softmax_error(row), softmax_bound(row)
    assert error == softmax_error(row, 1, dps=50, rtol=None)
    assert bound == softmax_bound(row, 1, dps=50, rtol=None)
    with mpmath.workdps(80):
        r = mpmath.exp(-1) + mpmath.exp(-3)
        assert mpmath.almosteq(error, r / (1 + r), rel_eps=mpmath.mpf(10) ** -48)
        assert mpmath.almosteq(bound, 2 * mpmath.exp(-1), rel_eps=mpmath.mpf(10) ** -48)


def test_softmax_error_and_bound_follow_the_tie_tolerance_given() -> None:
    """x = (0, −1e-3, −1): by default −1e-3 is a loser (t = 1, δ = 1e-3, K = 2); with rtol = 1e-2
    it ties with the maximum (t = 2, δ = 1, K = max(1/2, 1/4)), and the loser's error
    e^(−c)/(2 + e^(−c)) exceeds the winners' e^(−c)/(2(2 + e^(−c)))."""
    row, c = [0.0, -1e-3, -1.0], 2.0
    with mpmath.workdps(60):
        tail = mpmath.exp(-c)
        assert close(softmax_bound(row, c, dps=60, rtol=1e-2), tail / 2)
        assert close(softmax_error(row, c, dps=60, rtol=1e-2), tail / (2 + tail))
        assert close(softmax_bound(row, c, dps=60), 2 * mpmath.exp(-c * (mpmath.mpf(0) - mpmath.mpf(-1e-3))))
