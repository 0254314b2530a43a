"""Certified saturation bounds: errors against their definitions, bounds against errors, scales."""

from __future__ import annotations

import contextlib
import math
import warnings

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from saturated import bounds
from saturated.bounds import (
    MAX_DPS,
    certify_bound,
    scale_to_saturate,
    scale_to_saturate_map,
    sigmoid_bound,
    sigmoid_error,
    softmax_bound,
    softmax_constant,
    softmax_error,
    tanh_bound,
    tanh_error,
)
from saturated.errors import SaturationError
from saturated.functional import hardmax

magnitudes = st.one_of(
    st.floats(1e-300, 1e-3), st.floats(1e-3, 1e3), st.floats(1e3, 1e300),
    st.sampled_from([5e-324, 2.0**-1022, 1.0, 1.7976931348623157e308]),
)
signed = st.builds(lambda m, s: m * s, magnitudes, st.sampled_from([-1.0, 1.0]))
scales = st.one_of(st.floats(0.0, 10.0), st.floats(10.0, 1e6), st.just(1.0))


def _direct_softmax_error(scores: list[float], c: float, dps: int) -> mpmath.mpf:
    """max_i |softmax(c·x)_i − hardmax(x)_i| straight from the definitions, at ``dps`` digits."""
    winners = hardmax(torch.tensor(scores, dtype=torch.float64), rtol=0) > 0
    with mpmath.workdps(dps):
        limit = [mpmath.mpf(1) / int(winners.sum()) if w else mpmath.mpf(0) for w in winners.tolist()]
        allowed = [mpmath.mpf(x) for x in scores if x > -math.inf]
        top = max(allowed)
        weights = [mpmath.exp(c * (mpmath.mpf(x) - top)) if x > -math.inf else mpmath.mpf(0) for x in scores]
        total = mpmath.fsum(weights)
        return max(abs(w / total - h) for w, h in zip(weights, limit))


@given(signed, st.floats(0.0, 50.0))
def test_sigmoid_and_tanh_errors_match_their_definitions(x: float, c: float) -> None:
    """The cancellation-free forms equal |σ(cx) − step(x)| and |tanh(cx) − sign(x)| computed from
    the definitions with enough digits to survive the cancellation."""
    u = c * abs(x)
    if u > 200:  # the definition needs ~u/2.3 extra digits; the identity is checked below that
        return
    with mpmath.workdps(40 + int(u)):
        s = 1 / (1 + mpmath.exp(-c * mpmath.mpf(x)))
        direct_sigmoid = abs(s - (1 if x > 0 else 0))
        direct_tanh = abs(mpmath.tanh(c * mpmath.mpf(x)) - (1 if x > 0 else -1))
    assert mpmath.almosteq(sigmoid_error(x, c, dps=30), direct_sigmoid, rel_eps=1e-25)
    assert mpmath.almosteq(tanh_error(x, c, dps=30), direct_tanh, rel_eps=1e-25)


# The bounds are tight as u → ∞ (error/bound → 1), so at 50 digits the two may round to the same
# number or swap in the last digit: compared up to the working precision.
def _within(error: mpmath.mpf, bound: mpmath.mpf) -> bool:
    with mpmath.workdps(60):
        return bool(error <= bound * (1 + mpmath.mpf(10) ** -45))


@given(signed, scales)
def test_sigmoid_and_tanh_bounds_hold(x: float, c: float) -> None:
    assert _within(sigmoid_error(x, c), sigmoid_bound(x, c))
    assert _within(tanh_error(x, c), tanh_bound(x, c))


def _adversarial_row(draw: st.DrawFn) -> list[float]:
    base = draw(st.one_of(st.floats(-1e3, 1e3), st.floats(-1e300, 1e300), st.floats(-1e-300, 1e-300)))
    kinds = draw(st.lists(st.sampled_from(["tie", "ulp", "below", "far", "masked"]), min_size=1, max_size=7))
    row = [base]
    for kind in kinds:
        if kind == "tie":
            row.append(base)
        elif kind == "ulp":
            row.append(float(np.nextafter(base, -math.inf)))
        elif kind == "below":
            row.append(base - draw(st.floats(1e-6, 10.0)) * max(1.0, abs(base)))
        elif kind == "far":
            row.append(-draw(st.floats(1e10, 1e300)))
        else:
            row.append(-math.inf)
    return [x for x in row if math.isfinite(x) or x == -math.inf]


adversarial_rows = st.composite(_adversarial_row)()
_RISING = [0.0, 0.0, -0.05] + [-3.0] * 30  # tied winners whose top loser's error first rises


@given(adversarial_rows, scales)
def test_softmax_bound_holds_on_adversarial_rows(row: list[float], c: float) -> None:
    """Exact ties, ties one ulp apart (inside the tie tolerance), huge and tiny magnitudes, −∞."""
    assert _within(softmax_error(row, c), softmax_bound(row, c))


@given(st.lists(st.floats(-30, 30), min_size=1, max_size=8), st.floats(0.0, 20.0))
def test_softmax_error_matches_the_definition(row: list[float], c: float) -> None:
    """With ties only where scores are equal (rtol=0), the error formula is the definition."""
    ours = softmax_error(row, c, dps=40, rtol=0)
    theirs = _direct_softmax_error(row, c, dps=80)
    assert mpmath.almosteq(ours, theirs, rel_eps=1e-30, abs_eps=mpmath.mpf(10) ** -60)


def test_paper_step_41_needs_the_margin_not_the_minimum() -> None:
    """Lemma 7's (41) bounds the sum with min(x); for x = (0, −ε, −10) at c = 1 the winner's error
    exceeds the resulting 1 − 1/(1 + (n − 1)e^(min − max)), while the margin-based bound holds."""
    row = [0.0, -1e-3, -10.0]
    error = softmax_error(row, 1)
    with_minimum = 1 - 1 / (1 + 2 * mpmath.exp(-10))
    assert error > 100 * with_minimum
    assert error <= softmax_bound(row, 1)


@pytest.mark.parametrize(("function", "n", "t"), [("sigmoid", 2, 1), ("tanh", 2, 1), ("softmax", 2, 1),
                                                  ("softmax", 9, 3), ("softmax", 5, 4), ("softmax", 40, 1)])
def test_bounds_are_certified_and_tight(function: str, n: int, t: int) -> None:
    certificate = certify_bound(function, n=n, t=t, points=200)
    assert certificate.holds and certificate.increasing
    assert certificate.worst == pytest.approx(1.0)  # the computed constants cannot be lowered
    assert not certify_bound(function, n=n, t=t, points=200, bound_scale=0.999).holds


def test_the_monotone_ratio_extends_the_grid() -> None:
    """Between grid points the ratio error/bound lies below its value at the next point: checked
    at random points off the grid, in high precision."""
    rng = np.random.default_rng(0)
    for function, n, t in [("sigmoid", 2, 1), ("tanh", 2, 1), ("softmax", 7, 2)]:
        rho = bounds._worst_ratio(function, n, t)
        grid = np.linspace(0, 60, 61)
        for u in rng.uniform(0, 60, 20):
            after = grid[np.searchsorted(grid, u)]
            with mpmath.workdps(50):
                assert rho(mpmath.mpf(u)) <= rho(mpmath.mpf(after))


def test_softmax_constant_is_attained() -> None:
    """K e^(−cδ) is the sup of the error: every loser at the margin attains it for the winners."""
    n, t, c = 6, 2, 3.0
    row = [0.0] * t + [-1.0] * (n - t)
    with mpmath.workdps(50):
        ratio = softmax_error(row, c, dps=50) / (softmax_constant(n, t) * mpmath.exp(-c))
        assert mpmath.almosteq(ratio, 1 / (1 + (n - t) * mpmath.exp(-c) / t), rel_eps=1e-40)


def _true_scale(row: list[float], eps: float) -> mpmath.mpf:
    """c* in high precision: bisection on the definition's error over a fine search for its last
    crossing of eps (independent of the module's structure argument)."""
    with mpmath.workdps(40):
        def err(c: mpmath.mpf) -> mpmath.mpf:
            return _direct_softmax_error(row, float(c), dps=40)
        hi = mpmath.mpf(1)
        while err(hi) > eps or err(2 * hi) > eps:
            hi *= 2
        grid = [hi * k / 200 for k in range(201)]
        last = max((i for i, c in enumerate(grid) if err(c) > eps), default=None)
        if last is None:
            return mpmath.mpf(0)
        lo, hi = grid[last], grid[last + 1]
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if err(mid) > eps else (lo, mid)
        return hi


@pytest.mark.parametrize(("row", "eps"), [
    ([0.0, -1.0], 0.01),
    ([0.0, -10.0], 0.01),  # c* = log(99)/10 < 1
    ([3.0, 1.0, 0.5, -2.0, -math.inf], 1e-6),
    ([0.0, 0.0, -0.05] + [-3.0] * 30, 0.02),  # tied winners: the top loser's error first rises
    ([1e-3, 0.0, 0.0, -1e-3], 1e-4),
    ([0.0, 0.0, -1.0, -3.0], 0.01),  # as many losers as winners: the top loser's error sets c*
    ([5.0, 5.0, 5.0, 4.0], 0.05),  # one loser, three winners
    ([0.0, 0.0] + [-0.1] * 10, 0.01),  # K = (n − t)/t² = 2.5 sets the float search's end (c* ≈ 55)
])
def test_scale_to_saturate_contains_the_true_scale(row: list[float], eps: float) -> None:
    lo, hi = scale_to_saturate(row, eps)
    true = _true_scale(row, eps)
    assert lo <= true <= hi
    assert hi <= lo * (1 + 1e-3)
    # The float64 bisection that the certificate starts from is itself accurate, and from it the
    # certificate is c·(1 ∓ h) with (1 + h)/(1 − h) = 1 + 0.9·rel_width (docs/bounds.md).
    estimate = float(bounds._float_scales(bounds._Padded.of([bounds._row(row)]), eps)[0])
    assert estimate == pytest.approx(float(true), rel=1e-9)
    h = 0.9e-3 / (2 + 0.9e-3)
    assert bounds._certify(bounds._row(row), estimate, eps, 1e-3) == pytest.approx(
        (estimate * (1 - h), estimate * (1 + h)), rel=1e-15, abs=0)


def test_the_error_can_rise_before_it_falls() -> None:
    """Why c* is 'from then on': with tied winners, far losers hand their weight to the near one,
    whose error first rises, and it is that loser, not the winners, that sets c*."""
    row = [0.0, 0.0, -0.05] + [-3.0] * 30

    def weights(c: float) -> list[float]:
        return torch.softmax(c * torch.tensor(row, dtype=torch.float64), -1).tolist()

    assert weights(10.0)[2] > 5 * weights(0.0)[2]
    lo, hi = scale_to_saturate(row, 0.02)
    at_lo = weights(lo)
    assert at_lo[2] > 0.02 and 0.5 - at_lo[0] < 0.02  # the loser above eps, the winners within
    assert hi == pytest.approx(math.log(25) / 0.05, rel=1e-2)  # e^(−0.05c)/2 ≈ 0.02


def test_scale_is_zero_when_the_error_never_exceeds_eps() -> None:
    assert scale_to_saturate([0.0, -1.0], eps=0.6) == (0.0, 0.0)
    assert scale_to_saturate([2.0, 2.0, -math.inf], eps=1e-9) == (0.0, 0.0)  # all allowed tied


@pytest.mark.parametrize(("row", "eps"), [([0.5, 0.0, -0.7, -0.7], 1e-5), (_RISING, 0.02),
                                          ([0.0, -10.0], 0.01)])
@pytest.mark.parametrize("factor", [0.0, 0.01, 3.0, 1e4])
def test_interval_fallback_certifies_from_a_wrong_estimate(row: list[float], eps: float,
                                                           factor: float) -> None:
    """From an estimate that is 0, far too small or too large, the mpmath bisection still returns
    an interval around the true scale within the relative width (one winner; tied winners whose
    top loser rises first; a scale below 1)."""
    true = float(_true_scale(row, eps))
    lo, hi = bounds._certify(bounds._row(row), factor * true, eps, 1e-3)
    assert lo <= true <= hi and hi <= lo * (1 + 1e-3)


@pytest.mark.parametrize(("estimate", "eps", "rel_width"),
                         [(1.7, 0.3, 1e-3), (1.3, 0.3, 1e-3), (1.7, 0.3035, 1.0)])
def test_interval_fallback_crosses_a_dip_of_the_error_below_eps(estimate: float, eps: float,
                                                                 rel_width: float) -> None:
    """With tied winners the error can fall below eps and rise above it again: for the rising row
    it is 0.275 at c = 1, 0.29 at c = 1.7, 0.3037 at c = 2 (near the top loser's peak), and meets
    eps = 0.3 last near c = 3.05 (eps = 0.3035 near 2.64). From an estimate inside the dip, the
    mpmath bisection must still return an interval around the true scale with the error above eps
    at lo (checked from the definition), not give up where the error is below eps; also when the
    allowed width (rel_width = 1) is wider than the stretch above eps before c*."""
    true = float(_true_scale(_RISING, eps))
    with mpmath.workdps(40):
        assert _direct_softmax_error(_RISING, 1.0, 40) < eps < _direct_softmax_error(_RISING, 2.0, 40)
        assert _direct_softmax_error(_RISING, estimate, 40) < eps
    lo, hi = bounds._certify(bounds._row(_RISING), estimate, eps, rel_width)
    assert lo <= true <= hi and hi <= lo * (1 + rel_width)
    assert _direct_softmax_error(_RISING, lo, 40) > eps


@pytest.mark.parametrize(("row", "eps"), [
    ([0.0, -1.0], 0.5),  # at c = 0 the winner's error is 1 − 1/2 = 1/2
    ([0.0, 0.0, 0.0, -1.0], 0.25),  # at c = 0 the loser's weight is 1/4, the winners' error 1/3 − 1/4
])
def test_an_error_equal_to_eps_is_not_above_it(row: list[float], eps: float) -> None:
    """"Above eps" is strict: at c = 0 the weights are uniform and the error is exactly eps (a
    float, so the interval check is exact), which is not above eps; 10⁻¹² lower it is."""
    assert _direct_softmax_error(row, 0.0, 40) == eps
    with bounds.interval_bits(80):
        assert not bounds._above_eps(bounds._row(row), 0.0, mpmath.iv.mpf(eps))
        assert bounds._above_eps(bounds._row(row), 0.0, mpmath.iv.mpf(eps * (1 - 1e-12)))


def test_interval_fallback_with_nothing_to_certify() -> None:
    """Every allowed position tied, or an error never above eps: the scale is 0."""
    assert bounds._certify(bounds._row([1.0, 1.0, -math.inf]), 5.0, 1e-3, 1e-3) == (0.0, 0.0)
    assert bounds._certify(bounds._row([0.0, -1.0]), 5.0, 0.6, 1e-3) == (0.0, 0.0)


def test_scores_too_close_to_certify_are_refused() -> None:
    """A subnormal margin (10⁻³¹⁰) needs c ~ 10³¹⁰, beyond the float range: no float64 estimate,
    and the interval search gives up at 10³⁰⁰."""
    with warnings.catch_warnings():  # the float search overflows quietly on the way
        warnings.simplefilter("error")
        with pytest.raises(SaturationError, match=r"^no certified scale below 1e300; the scores are too "
                                                  r"close$"):
            scale_to_saturate([1e-310, 0.0], 1e-3, rtol=0.0)


def test_float_scales_are_the_crossing_and_zero_without_losers() -> None:
    """The float estimate, row by row: 0 for rows without a loser (all tied, a single position, all
    others masked), and for x = (0, −1) the c where 1/(1 + e^c) = 0.01, log 99, to rounding."""
    rows = [[1.0, 1.0, -math.inf], [0.5], [0.0, -1.0], [2.0, 2.0, 2.0]]
    found = bounds._float_scales(bounds._Padded.of([bounds._row(row) for row in rows]), 0.01)
    assert found[[0, 1, 3]].tolist() == [0.0, 0.0, 0.0]
    assert found[2] == pytest.approx(math.log(99), rel=1e-14)


def _float_certificate(rows: list[list[float]], eps: float, rel_width: float,
                       estimates: list[float] | None = None) -> tuple[np.ndarray, ...]:
    """The float64 certificate of ``rows`` side by side, from their float estimates or the ones given."""
    padded = bounds._Padded.of([bounds._row(row) for row in rows])
    found = bounds._float_scales(padded, eps) if estimates is None else np.array(estimates, dtype=np.float64)
    return (found, *bounds._certify_rows(padded, found, eps, rel_width))


@pytest.mark.parametrize(("rows", "eps"), [
    # one winner; a scale below 1; tied winners whose top loser sets c*; no loser at all
    ([[0.0, -1.0], [0.0, -10.0], [0.0, 0.0, -1.0, -3.0], [1.0, 1.0, -math.inf]], 0.01),
    # one winner whose top loser still rises at c* (its error is the winner's, which falls)
    ([[0.0, -0.001] + [-3.0] * 30, [0.0, -1.0, -1.0]], 0.6),
])
def test_float_certificate_of_rows_side_by_side(rows: list[list[float]], eps: float) -> None:
    """Rows of different lengths at once: each row's interval is its float estimate c times
    (1 ∓ h), certified, and checked here from the definition (the error above eps at lo, within
    eps at hi and beyond); a row without losers is certified at (0, 0) whatever its estimate."""
    h = 0.9e-3 / (2 + 0.9e-3)
    losers = [len(set(row) - {-math.inf}) > 1 for row in rows]
    estimates = np.where(losers, _float_certificate(rows, eps, 1e-3)[0], 5.0)
    _, lo, hi, certified = _float_certificate(rows, eps, 1e-3, list(estimates))
    assert certified.all()
    for row, c, a, b, any_loser in zip(rows, estimates, lo, hi, losers):
        if not any_loser:
            assert (a, b) == (0.0, 0.0)
            continue
        assert (a, b) == (c * (1 - h), c * (1 + h))
        assert 0 < a < 1 if row in ([0.0, -10.0], [0.0, -1.0, -1.0]) else a > 0
        assert _direct_softmax_error(row, a, 60) > eps
        assert all(_direct_softmax_error(row, b * k, 60) <= eps for k in (1, 1.5, 3, 10))


@pytest.mark.parametrize(("row", "where"), [([0.0, -1.0], "lo"), ([0.0, -1.0], "hi")])
def test_float_certificate_refuses_an_end_within_rounding_of_the_scale(row: list[float], where: str) -> None:
    """One loser: c* = log(1/eps − 1) exactly. An estimate that puts lo (or hi) within a few
    units of rounding of c* leaves the error there within rounding of eps: neither above nor within
    can be proved, so the row is not certified (the interval fallback takes it)."""
    eps, h = 0.01, 0.9e-3 / (2 + 0.9e-3)
    true = math.log(1 / eps - 1)
    estimate = true / (1 - h) if where == "lo" else true / (1 + h)
    _, lo, hi, certified = _float_certificate([row], eps, 1e-3, [estimate])
    assert (lo[0] if where == "lo" else hi[0]) == pytest.approx(true, rel=1e-15)
    assert not certified[0]


def test_float_certificate_refuses_a_hi_where_the_top_loser_still_rises() -> None:
    """The rising row at eps = 0.3 (c* ≈ 3.05): from an estimate giving [0.79, 1.50] at width 1,
    the error exceeds eps at lo and is below eps at hi (0.285), but the top loser still rises
    there (slope ≈ 0.27 > 0) and crosses eps again later: not certified."""
    eps = 0.3
    _, lo, hi, certified = _float_certificate([_RISING], eps, 1.0, [1.5 / (1 + 0.9 / 2.9)])
    assert _direct_softmax_error(_RISING, lo[0], 40) > eps > _direct_softmax_error(_RISING, hi[0], 40)
    assert _direct_softmax_error(_RISING, 2.0, 40) > eps
    assert not certified[0]


@pytest.mark.parametrize(("row", "end"), [([0.0, -1.0], "winners at lo"), ([0.0, 0.0, -1.0], "loser at lo"),
                                          ([0.0, -1.0], "winners at hi"), ([0.0, 0.0, -1.0], "loser at hi")])
def test_float_certificate_compares_with_eps_as_its_contract_says(row: list[float], end: str) -> None:
    """The error must be strictly above eps at lo and at most eps at hi: with eps set to the end of
    an enclosure that decides it (the winners' with one winner, the top loser's with two), the
    certificate flips between eps and the float just below it: not certified at lo's end, and
    certified at hi's (with eps one float lower, the reverse)."""
    estimate, h = 2.0, 0.9e-3 / (2 + 0.9e-3)
    padded = bounds._Padded.of([bounds._row(row)])
    which, at = end.split(" at ")
    box = bounds._Box.at(padded, np.array([estimate * (1 - h if at == "lo" else 1 + h)]))
    enclosure = box.winners() if which == "winners" else box.loser()
    eps = float(enclosure[0 if at == "lo" else 1][0])
    below = float(np.nextafter(eps, 0.0))
    certified = [_float_certificate([row], e, 1e-3, [estimate])[3][0] for e in (eps, below)]
    assert certified == ([False, True] if at == "lo" else [True, False])


def test_maps_with_padding_and_rows_without_losers_warn_nothing() -> None:
    """A map with an all-tied row (its enclosures are NaN and set apart), rows of different
    lengths (padded with +∞ gaps) and a far loser (its term underflows) raises no warning."""
    scores = [[1.0, 1.0, -math.inf, -math.inf], [0.0, -1.0, -math.inf, -math.inf],
              [0.0, -0.5, -1e300, -1.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = scale_to_saturate_map(scores, 0.01)
    assert result.rows[0] == (0.0, 0.0)
    assert result.rows[1:] == tuple(scale_to_saturate(row, 0.01) for row in scores[1:])


def test_a_tiny_margin_beside_a_far_loser_warns_nothing() -> None:
    """Margin δ = 10⁻²⁰⁰ and a loser 10²⁰⁰ further: the float search's brackets reach c ~ 10²⁰⁰, so
    c times the far gap overflows to ∞ (its term is 0, as it should be) without a warning. The far
    term is 0 at these scales, so c* is where the near loser alone meets eps: one winner,
    1/(1 + e^(cδ)) = eps; two tied winners, the loser's e^(−cδ)/(2 + e^(−cδ)) = eps (above the
    winners' crossing)."""
    eps, delta = 1e-3, 1e-200
    scores = [[delta, 0.0, -1e200, -math.inf], [0.0, 0.0, -delta, -1e200]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = scale_to_saturate_map(scores, eps, rtol=0.0).rows
    with mpmath.workdps(30):
        one = mpmath.log((1 - mpmath.mpf(eps)) / eps) / delta
        two = mpmath.log((1 - mpmath.mpf(eps)) / (2 * mpmath.mpf(eps))) / delta
    assert rows[0][0] <= one <= rows[0][1] and rows[1][0] <= two <= rows[1][1]


def _exact_box(gaps: list, t: int, c: float) -> tuple[dict[str, mpmath.mpf], mpmath.mpf, mpmath.mpf]:
    """At 60 digits, what a float box encloses for a row with these gaps and t winners at scale c:
    R = Σ e^(−c·a), its moment, the top term, the winners' and the top loser's errors; with the
    top loser's log-error slope and the margin."""
    with mpmath.workdps(60):
        exact_gaps = [mpmath.mpf(g) for g in gaps]
        terms = [mpmath.exp(-mpmath.mpf(c) * a) for a in exact_gaps]
        r, m = mpmath.fsum(terms), mpmath.fsum(a * e for a, e in zip(exact_gaps, terms))
        exact = {"r": r, "moment": m, "top": terms[0], "winners": r / (t * (t + r)),
                 "loser": terms[0] / (t + r)}
        return exact, -exact_gaps[0] + m / (t + r), exact_gaps[0]


def test_float_boxes_of_rows_side_by_side_contain_the_exact_sums() -> None:
    """R, the moment Σ a_k e^(−c·a_k), the top loser's e^(−cδ), the errors and the slope's upper
    bound, for rows of different lengths at a scale each, contain the mpmath values and are tight
    (10⁻¹² relatively)."""
    rows = [[0.0, 0.0, -0.5, -1.0, -4.0], [0.0, -2.0], [3.0, 1.0, 0.5, 0.5, -2.0, -7.0]]
    scales = np.array([0.7, 3.0, 12.0])
    parsed = [bounds._row(row) for row in rows]
    box = bounds._Box.at(bounds._Padded.of(parsed), scales)
    for i, (row, c) in enumerate(zip(parsed, scales)):
        with mpmath.workdps(60):  # the gaps as exact differences of the two doubles
            exact, slope, margin = _exact_box(row.exact_gaps(), row.t, c)
        ends = {"r": box.r, "moment": box.moment, "top": box.top, "winners": box.winners(),
                "loser": box.loser()}
        for name, value in exact.items():
            low, high = float(ends[name][0][i]), float(ends[name][1][i])
            assert low <= value <= high, (i, name)
            assert high - low <= 1e-12 * value, (i, name)
        assert slope <= box.slope_high()[i] <= slope + 1e-12 * abs(margin)


def test_float_boxes_of_wide_rows_contain_the_exact_sums() -> None:
    """Rows with thousands of losers at a small scale, where R = Σ e^(−c·a_k) is in the thousands
    (R ≫ t): the rounding of the long sums is then the whole width of R's enclosure, and the
    winners' error R/(t(t + R)) and the top loser's e^(−cδ)/(t + R) inherit it; every enclosure
    still contains the mpmath value, and the slope's upper bound is above the exact slope."""
    rng = np.random.default_rng(7)
    rows = [[0.0, *(-rng.uniform(0.5, 1.5, 3000))], [0.0, 0.0, *(-rng.uniform(0.5, 1.5, 3000))],
            [0.0, 0.0, 0.0, *(-rng.uniform(1.0, 2.0, 400))]]
    scales = np.array([1e-3, 2e-3, 0.5])
    parsed = [bounds._row(row, rtol=0.0) for row in rows]
    box = bounds._Box.at(bounds._Padded.of(parsed), scales)
    ends = {"r": box.r, "moment": box.moment, "top": box.top, "winners": box.winners(), "loser": box.loser()}
    for i, (row, c) in enumerate(zip(parsed, scales)):
        exact, slope, _ = _exact_box([float(g) for g in row.gaps], row.t, c)
        assert exact["r"] > 50 * row.t, i  # the regime this test is for
        for name, value in exact.items():
            low, high = float(ends[name][0][i]), float(ends[name][1][i])
            assert low <= value <= high, (i, name)
            assert high - low <= 1e-11 * value, (i, name)
        assert slope <= box.slope_high()[i], i


@pytest.mark.parametrize("c", [0.0, 1e-3, 0.37, 1.0, 3.5, 40.0])
def test_float_enclosure_is_no_wider_than_its_budget(c: float) -> None:
    """Below the subnormal cut (c·a < 1000·ln 2) the enclosure is the float value times 1 ∓ 2B, B
    the budget _exp_neg itemizes: 1.01·(2.01u·y + 2.01u·y + 1.01u) for the exponent (the gap's and
    the product's rounding, the reduction), 10⁻¹⁸ for the truncation, γ₃₆ for Horner's scheme and
    u for the division. So it contains e^(−c·a) and is at most 4B wide (and the few units u of the
    two products), relatively: from y ≈ 0 (B ≈ 38u) to y ≈ 690 (B ≈ 2800u)."""
    u = 2.0**-53
    gamma_36 = 36 * u / (1 - 36 * u)
    a = np.array([0.0, 1e-9, 0.25, 0.693, 1.0, 2.5, 7.0, 17.0])
    a = a[c * a < 690.0]
    low, high = bounds._exp_neg(np.array([c]), a[None, :])
    with mpmath.workdps(60):
        for ai, lo, hi in zip(a, low[0], high[0]):
            y = mpmath.mpf(c) * mpmath.mpf(ai)
            exact = mpmath.exp(-y)
            budget = 1.01 * (4.02 * u * y + 1.01 * u) + mpmath.mpf(10) ** -18 + gamma_36 + u
            assert lo <= exact <= hi, ai
            assert mpmath.mpf(hi) - mpmath.mpf(lo) <= (4 * budget + 3 * u) * exact, ai


def test_float_enclosures_contain_the_exponential() -> None:
    """The IEEE-754 enclosures of e^(−c·a) contain mpmath's value, across magnitudes."""
    rng = np.random.default_rng(1)
    c = np.concatenate([rng.uniform(0, 5, 50), 10 ** rng.uniform(-3, 4, 50), [0.0, 1.0]])
    a = np.concatenate([rng.uniform(0, 5, 50), 10 ** rng.uniform(-8, 2.5, 50), [3.0, 700.0]])
    low, high = bounds._exp_neg(c, a[:, None])
    with mpmath.workdps(60):
        for ci, ai, lo, hi in zip(c, a, low[:, 0], high[:, 0]):
            true = mpmath.exp(-mpmath.mpf(ci) * mpmath.mpf(ai))
            assert lo <= true <= hi
            if true > 2.0**-990:
                assert hi - lo <= 1e-9 * true


def test_float_enclosure_below_the_normal_range() -> None:
    """Where 2^(−k) falls below the normal range (k > 1000, here c·a = 800 and 10⁶) the enclosure
    is [0, 2^(−999)]; an infinite exponent (padding, or c·a overflowing) gives [0, 0]; neither that
    overflow nor 0·∞ (c = 0 on padding) raises a warning."""
    c = np.array([1.0, 1e3, 2.0, 1e300, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = bounds._exp_neg(c, np.array([[800.0, 1e3, math.inf, 1e300, math.inf]]).T)
    with mpmath.workdps(30):
        assert mpmath.exp(-800) < mpmath.mpf(2) ** -999
    assert low[:, 0].tolist() == [0.0] * 5
    assert high[:4, 0].tolist() == [2.0**-999, 2.0**-999, 0.0, 0.0]


def test_float_enclosure_at_the_edge_of_the_normal_range() -> None:
    """c·a in [1000, 1001)·ln 2 (k = 1000): 2^(−k) is still normal and the enclosure tight (its
    budget is about 8u·c·a relatively); one step further (k = 1001) it is [0, 2^(−999)] as
    documented."""
    a = np.array([[1000.5 * math.log(2), 1001.5 * math.log(2)]]).T
    low, high = bounds._exp_neg(np.array([1.0, 1.0]), a)
    with mpmath.workdps(40):
        true = mpmath.exp(-mpmath.mpf(float(a[0, 0])))
        assert 0 < low[0, 0] <= true <= high[0, 0] and high[0, 0] - low[0, 0] <= 1e-11 * true  # ~8u·c·a
    assert (low[1, 0], high[1, 0]) == (0.0, 2.0**-999)


@pytest.mark.parametrize("rel_width", [0.0, 1e-13, 1.000001, 2.0, "0.1", None])
def test_a_relative_width_outside_its_range_is_refused(rel_width: object) -> None:
    message = rf"^expected a relative width in \[1e-12, 1\], got {rel_width!r}$"
    with pytest.raises(SaturationError, match=message):
        scale_to_saturate([0.0, -1.0], 0.01, rel_width=rel_width)  # type: ignore[arg-type]


def test_the_narrowest_relative_width_is_allowed() -> None:
    """rel_width = 10⁻¹² (the smallest allowed): one loser, c* = log(1/eps − 1) inside, that narrow."""
    lo, hi = scale_to_saturate([0.0, -1.0], 0.01, rel_width=1e-12)
    with mpmath.workdps(40):
        assert lo <= mpmath.log(99) <= hi and hi / lo - 1 <= 1e-12


def test_map_matches_rows_and_its_maximum() -> None:
    torch.manual_seed(0)
    scores = torch.randn(12, 16, dtype=torch.float64) * 2
    scores[3, 5:] = -math.inf
    scores[4, :3] = scores[4].max()  # a planted three-way tie
    result = scale_to_saturate_map(scores, eps=1e-3)
    for row, interval in zip(scores, result.rows):
        assert interval == scale_to_saturate(row, eps=1e-3)
    assert result.maximum == (max(lo for lo, _ in result.rows), max(hi for _, hi in result.rows))


def test_map_defaults_and_tie_tolerance() -> None:
    """eps = 1e-3 and a relative width of 1e-3 by default, as for one row; a given rtol decides the
    ties: with rtol = 1e-2, −1e-3 ties with 0 and the row is (0, 0, −1)."""
    scores = [[0.0, -1e-3, -1.0], [0.0, -2.0, -2.5]]
    found = scale_to_saturate_map(scores)
    assert found == scale_to_saturate_map(scores, 1e-3, rel_width=1e-3, rtol=None)
    assert found.rows == tuple(scale_to_saturate(row) for row in scores)
    assert scale_to_saturate_map(scores, rtol=1e-2).rows[0] == scale_to_saturate([0.0, 0.0, -1.0], rtol=0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_map_reads_its_scores_as_float64_numbers(dtype: type) -> None:
    """A float32 or integer map gives what its values give as float64, with float64's tie
    tolerance: 0.999999 in float32 is 1 − 1.0·10⁻⁶, a loser by 1.4·10⁻¹⁴ (float32's own tolerance,
    7.6·10⁻⁶, would tie it and give a scale near 7 instead of 6.8·10⁶)."""
    values = [[1.0, 0.999999, 0.0], [2.0, 0.0, 1.0]] if dtype is np.float32 else [[2, 0, 1], [0, -1, -3]]
    scores = np.array(values, dtype=dtype)
    found = scale_to_saturate_map(scores, 1e-3)
    assert found == scale_to_saturate_map(scores.astype(np.float64), 1e-3)
    assert found.rows == tuple(scale_to_saturate(row, 1e-3) for row in scores.astype(np.float64))
    if dtype is np.float32:
        margin = 1.0 - float(np.float32(0.999999))
        assert found.rows[0][0] > math.log(1 / 1e-3 - 1) / margin * (1 - 1e-3)


@pytest.mark.parametrize(("scores", "shape"), [
    ([0.0, -1.0], r"\(2,\)"), ([[]], r"\(1, 0\)"), ([[[0.0, -1.0]]], r"\(1, 1, 2\)"),
])
def test_a_map_must_be_two_dimensional_and_non_empty(scores: list, shape: str) -> None:
    with pytest.raises(SaturationError, match=f"^expected a non-empty 2-d map of scores, got shape {shape}$"):
        scale_to_saturate_map(scores, 0.1)


def test_a_one_by_one_map_is_a_map() -> None:
    """One query, one key: the error is 0 from c = 0 on."""
    assert scale_to_saturate_map([[0.5]], 0.1) == bounds.MapScales(((0.0, 0.0),), (0.0, 0.0))


def test_a_gap_at_the_top_of_the_float_range_is_certified_without_warnings() -> None:
    """Scores 1e308 and 1e307: the gap is finite, the scale c* = log((1 − eps)/eps)/gap lies in the
    subnormal range, and the enclosure's cut-off past the float range keeps every term."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = scale_to_saturate([1e308, 1e307], eps=1e-3)
    with mpmath.workdps(40):
        true = mpmath.log(mpmath.mpf(0.999) / mpmath.mpf(0.001)) / (mpmath.mpf(1e308) - mpmath.mpf(1e307))
    assert lo <= true <= hi and lo > 0


@pytest.mark.parametrize(("call", "message"), [
    (lambda: scale_to_saturate([0.0, -1.0], eps=0.0), "eps in"),
    (lambda: scale_to_saturate([0.0, -1.0], eps=1.0), "eps in"),
    (lambda: scale_to_saturate([0.0, math.nan], eps=0.1),
     r"expected finite scores or −∞ \(masked\), got nan at \[0, 1\]"),
    (lambda: scale_to_saturate([0.0, math.inf], eps=0.1), r"finite scores .*got inf at \[0, 1\]"),
    (lambda: scale_to_saturate_map([[0.0, 1.0], [2.0, math.nan]], eps=0.1), r"got nan at \[1, 1\]"),
    (lambda: scale_to_saturate([-math.inf, -math.inf], eps=0.1), "masks every position"),
    (lambda: scale_to_saturate_map([[0.0], [-math.inf]], eps=0.1),
     "row 1 masks every position; expected at least one allowed score per row"),
    (lambda: scale_to_saturate([1e308, -1e308], eps=0.1),
     r"^row 0 holds scores 1e\+308 and -1e\+308, whose gap exceeds the float64 range; rescale"),
    (lambda: scale_to_saturate_map([[0.0, -1.0], [1e308, -1e308]], eps=0.1),
     r"^row 1 holds scores 1e\+308 and -1e\+308, whose gap"),
    (lambda: sigmoid_error(1.0, dps=MAX_DPS + 1), "precision of 1 to"),
    (lambda: sigmoid_error(0.0), "not determined at 0"),
    (lambda: tanh_bound(math.nan), "finite input"),
    (lambda: certify_bound("relu"), "expected 'sigmoid'"),
])
def test_bad_input_is_rejected_clearly(call: object, message: str) -> None:
    with pytest.raises(SaturationError, match=message):
        call()  # type: ignore[operator]


def _mp_linear(weight: torch.Tensor, bias: torch.Tensor | None, x: list[mpmath.mpf],
               c: mpmath.mpf) -> list[mpmath.mpf]:
    """c·W x + c·b in mpmath, from the layer's exact float64 entries."""
    rows = weight.double().tolist()
    shift = [0.0] * len(rows) if bias is None else bias.double().tolist()
    return [c * (mpmath.fsum(mpmath.mpf(w) * v for w, v in zip(row, x)) + mpmath.mpf(b))
            for row, b in zip(rows, shift)]


def test_approximate_grade_decays_exponentially_at_the_predicted_rate() -> None:
    """σ(W x) is graded approximately 0-homogeneous; ‖σ(cW x) − s-f‖ decays like e^(−c·min|w·x|)."""
    from homogeneity import analyze
    from saturated import saturate

    torch.manual_seed(1)
    layer = torch.nn.Linear(2, 3, bias=False).double()
    net = torch.nn.Sequential(layer, torch.nn.Sigmoid())
    x = torch.randn(1, 2, dtype=torch.float64)
    assert str(analyze(net, x).grade) == "approximate"
    limit = saturate(net, x)(x).value[0].tolist()
    inputs = [mpmath.mpf(v) for v in x[0].tolist()]

    def error(c: mpmath.mpf) -> mpmath.mpf:
        z = _mp_linear(layer.weight, None, inputs, c)
        return max(abs(1 / (1 + mpmath.exp(-v)) - s) for v, s in zip(z, limit))

    fit = bounds.scaling_rate(error, [200, 400, 800, 1600], kind="exponential", dps=400)
    smallest = float(min(abs(v) for v in _mp_linear(layer.weight, None, inputs, mpmath.mpf(1))))
    assert fit.rate == pytest.approx(smallest, rel=1e-6) and fit.r_squared > 0.999999


def test_asymptotic_grade_decays_with_the_order_the_degree_report_predicts() -> None:
    """Linear–ReLU–Linear with biases: degree 2, asymptotic because of a degree-1 term, so
    f(cθ)/c² − s-f should vanish like c^(−(2 − 1))."""
    import re

    from homogeneity import analyze
    from saturated import saturate

    torch.manual_seed(2)
    first, last = torch.nn.Linear(2, 3).double(), torch.nn.Linear(3, 1).double()
    net = torch.nn.Sequential(first, torch.nn.ReLU(), last)
    x = torch.randn(1, 2, dtype=torch.float64)
    report = analyze(net, x)
    degree = report.outputs[report.main_output]
    assert str(degree.grade) == "asymptotic" and int(degree.value) == 2
    found = re.search(r"degree-(\d+) term is lower order than the degree-(\d+)", degree.reason)
    assert found is not None, degree.reason
    lower, higher = map(int, found.groups())
    limit = saturate(net, x)(x).value[0, 0].item()
    inputs = [mpmath.mpf(v) for v in x[0].tolist()]

    def error(c: mpmath.mpf) -> mpmath.mpf:
        hidden = [max(v, 0) for v in _mp_linear(first.weight, first.bias, inputs, c)]
        out = _mp_linear(last.weight, last.bias, hidden, c)[0]
        return abs(out / c**2 - limit)

    fit = bounds.scaling_rate(error, [1e2, 1e3, 1e4, 1e5], kind="polynomial", dps=50)
    assert fit.rate == pytest.approx(higher - lower, rel=1e-3)


def _previous(value: float, dtype: torch.dtype) -> float:
    """The number of ``dtype`` just below the positive ``value``."""
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}[dtype]
    code = torch.tensor(value, dtype=dtype).view(bits)
    return float((code - 1).view(dtype))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_format_thresholds_are_the_first_exactly_saturated_numbers(name: str) -> None:
    """At each exact threshold the correctly rounded value is the limit and one number below it is
    not (checked on σ and tanh evaluated directly in high precision); torch's measured thresholds
    are checked the same way on what torch computes."""
    p = {"float16": 11, "bfloat16": 8, "float32": 24}[name]
    dtype = getattr(torch, name)
    sigmoid, tanh = bounds.format_thresholds(["sigmoid", "tanh"], [name])
    with mpmath.workdps(60):
        midpoint = 1 - mpmath.mpf(2) ** (-p - 1)  # rounds up to 1 (ties to even)

        def up(f: str, x: float) -> bool:
            value = 1 / (1 + mpmath.exp(-mpmath.mpf(x))) if f == "sigmoid" else mpmath.tanh(mpmath.mpf(x))
            return bool(value >= midpoint)

        for row, f in ((sigmoid, "sigmoid"), (tanh, "tanh")):
            assert up(f, row.upper) and not up(f, _previous(row.upper, dtype))
    for row, fn in ((sigmoid, torch.sigmoid), (tanh, torch.tanh)):
        x = torch.tensor([row.torch_upper, _previous(row.torch_upper, dtype)], dtype=dtype)
        assert fn(x).tolist()[0] == 1.0 and fn(x).tolist()[1] != 1.0


def _direct_error(scores: list[float], c: mpmath.mpf, dps: int, rtol: float | None) -> mpmath.mpf:
    """max_i |softmax(c·x)_i − hardmax(x)_i| from the definitions, hardmax with the tie rule ``rtol``
    (scores it ties with the maximum are taken as equal to it, as the rule says)."""
    winners = hardmax(torch.tensor(scores, dtype=torch.float64), rtol=rtol) > 0
    with mpmath.workdps(dps):
        limit = [mpmath.mpf(1) / int(winners.sum()) if w else mpmath.mpf(0) for w in winners.tolist()]
        top = max(mpmath.mpf(x) for x in scores if x > -math.inf)
        scores = [float(top) if w else x for x, w in zip(scores, winners.tolist())]
        weights = [mpmath.exp(c * (mpmath.mpf(x) - top)) if x > -math.inf else mpmath.mpf(0) for x in scores]
        total = mpmath.fsum(weights)
        return max(abs(w / total - h) for w, h in zip(weights, limit))


def _exact_margin(row: list[float], rtol: float | None) -> mpmath.mpf | None:
    """The gap from the tied maximal scores to the next allowed one, exactly (None if all tie)."""
    tied = hardmax(torch.tensor(row, dtype=torch.float64), rtol=rtol) > 0
    top = max(mpmath.mpf(x) for x in row if x > -math.inf)
    losers = [top - mpmath.mpf(x) for x, t in zip(row, tied.tolist()) if not t and x > -math.inf]
    return min(losers) if losers else None


@given(adversarial_rows, st.sampled_from([0.3, 1e-3, 1e-9]))
def test_scale_to_saturate_contains_the_true_scale_on_adversarial_rows(row: list[float], eps: float) -> None:
    """Exact ties, one-ulp near-ties, huge and tiny magnitudes, −∞ masks: evaluated from the
    definition in high precision, the error exceeds eps at lo and is within eps at hi and beyond
    (so the smallest scale from which it stays within eps lies in [lo, hi])."""
    margin = _exact_margin(row, None)
    try:
        lo, hi = scale_to_saturate(row, eps)
    except SaturationError as err:  # c* ~ 1/δ beyond the float range: refused, and only then
        assert "no certified scale below 1e300" in str(err) and margin is not None and margin < 1e-290
        return
    assert hi <= lo * (1 + 1e-3)
    # u = c·δ up to ~60 needs ~30 extra digits for the winners' 1 − weight; 80 digits suffice.
    if lo > 0:
        assert _direct_error(row, mpmath.mpf(lo), 80, None) > eps
    if margin is None:
        assert hi == 0.0
        return
    with mpmath.workdps(80):
        further = [mpmath.mpf(hi) * k for k in (1, 1.001, 1.1, 2, 10)]
        if hi == 0.0:
            further = [mpmath.mpf(0)] + [k / margin for k in (0.01, 0.1, 1, 10)]
    for c in further:
        assert _direct_error(row, c, 80, None) <= eps


@st.composite
def _rows_and_scales(draw: st.DrawFn) -> tuple[list[float], mpmath.mpf]:
    """An adversarial row and a scale c = k/δ with k in [0, 40] (δ its exact margin, rtol=0)."""
    row = draw(adversarial_rows)
    margin = _exact_margin(row, 0.0)
    k = draw(st.floats(0.0, 40.0))
    with mpmath.workdps(40):
        return row, (mpmath.mpf(k) / margin if margin is not None else mpmath.mpf(k))


@given(_rows_and_scales())
def test_softmax_error_matches_the_definition_on_adversarial_rows(
        case: tuple[list[float], mpmath.mpf]) -> None:
    """Against the definition at huge and tiny magnitudes, with −∞ masks and one-ulp gaps (ties
    only where equal, rtol=0; the scale chosen so that c·δ stays where 100 digits resolve it)."""
    row, c = case
    ours = softmax_error(row, c, dps=40, rtol=0)
    theirs = _direct_error(row, c, 100, 0.0)
    assert mpmath.almosteq(ours, theirs, rel_eps=1e-30, abs_eps=mpmath.mpf(10) ** -80)


def test_certificate_reports_a_ratio_that_is_not_increasing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid check only extends between grid points if ρ does not decrease: a decreasing ρ
    (here ρ(u) = 1/(1 + u), below 1 everywhere) must be reported as not increasing."""
    monkeypatch.setattr(bounds, "_worst_ratio", lambda *_: lambda u: 1 / (1 + u))
    certificate = certify_bound("sigmoid", points=50)
    assert not certificate.increasing


def _inside(context: contextlib.AbstractContextManager[None]) -> None:
    with context:
        assert mpmath.iv.prec == 90


def test_global_precision_is_never_changed() -> None:
    """Every public function works in local precision contexts, also when it raises."""
    calls = [
        lambda: sigmoid_error(1.0, 3, dps=200), lambda: tanh_error(1.0, 3, dps=200),
        lambda: softmax_error([0.0, -1.0, -math.inf], 3, dps=200), lambda: sigmoid_bound(1.0, 2, dps=90),
        lambda: tanh_bound(1.0, 2, dps=90), lambda: softmax_bound([0.0, -1.0], 2, dps=90),
        lambda: softmax_constant(5, 2), lambda: certify_bound("softmax", n=4, t=2, points=20),
        lambda: scale_to_saturate([0.0, 0.0, -0.05] + [-3.0] * 30, 0.02),
        lambda: scale_to_saturate_map([[0.0, -1.0], [0.0, -2.0]], 0.01),
        lambda: bounds._certify(bounds._row([0.5, 0.0, -0.7]), 100.0, 1e-5, 1e-3),
        lambda: bounds.format_thresholds(["sigmoid"], ["float16"]),
        lambda: bounds.scaling_rate(lambda c: mpmath.exp(-c), [1, 2, 3], dps=120),
        lambda: sigmoid_error(1.0, dps=MAX_DPS + 1), lambda: scale_to_saturate([math.nan], 0.1),
        lambda: bounds.scaling_rate(lambda c: mpmath.mpf(0), [1, 2, 3]),
        lambda: _inside(bounds.interval_bits(90)),
        lambda: bounds.softmax_log_error(np.array([0.5, 1e-40]), np.array([0.0, 90.0]), 2**-24, 1e-45),
        lambda: bounds.scale_bounds_of_rows(torch.tensor([1.0]), torch.tensor([1]), torch.tensor([3]), 1e-3,
                                            torch.tensor([0.0])),
        lambda: bounds.certified_row_scales(np.array([[0.7, 0.2, 0.1]]), np.array([[True, False, False]]),
                                            np.ones((1, 3), dtype=bool), 1e-3, (2**-24, 1e-45)),
    ]
    assert {name for name in bounds.__all__ if callable(getattr(bounds, name))} - {
        "Certificate", "FormatThreshold", "MapScales", "RateFit"} <= {
        "sigmoid_error", "tanh_error", "softmax_error", "sigmoid_bound", "tanh_bound", "softmax_bound",
        "softmax_constant", "certify_bound", "scale_to_saturate", "scale_to_saturate_map",
        "format_thresholds", "scaling_rate", "interval_bits", "softmax_log_error", "scale_bounds_of_rows",
        "certified_row_scales"}
    old_dps, old_prec = mpmath.mp.dps, mpmath.iv.prec
    mpmath.mp.dps, mpmath.iv.prec = 23, 71
    try:
        for call in calls:
            with contextlib.suppress(SaturationError):
                call()
            assert (mpmath.mp.dps, mpmath.iv.prec) == (23, 71)
    finally:
        mpmath.mp.dps, mpmath.iv.prec = old_dps, old_prec


@pytest.mark.parametrize("rel_width", [0.2, 0.5, 1.0])
def test_relative_width_holds_for_every_allowed_value(rel_width: float) -> None:
    """hi/lo − 1 ≤ rel_width on the float64 path and on the mpmath path (from a wrong estimate)."""
    row = [0.5, 0.0, -0.7, -0.7]
    lo, hi = scale_to_saturate(row, 1e-5, rel_width=rel_width)
    true = _true_scale(row, 1e-5)
    assert lo <= true <= hi and hi / lo - 1 <= rel_width
    lo, hi = bounds._certify(bounds._row(row), 3 * hi, 1e-5, rel_width)
    assert lo <= true <= hi and hi / lo - 1 <= rel_width


def _neighbour_below(value: float, dtype: torch.dtype) -> float:
    """The number of ``dtype`` just below the positive ``value`` (any of the four formats)."""
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
            torch.float64: torch.int64}[dtype]
    return float((torch.tensor(value, dtype=dtype).view(bits) - 1).view(dtype))


_PRECISION = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126), "float64": (53, -1022)}


def test_float64_thresholds_are_the_first_exactly_saturated_numbers() -> None:
    """float64's sigmoid and tanh, both sides: correctly rounded, σ(x) is 1 from the midpoint
    1 − 2^(−54) on, σ(−m) is 0 from half the smallest subnormal 2^(−1075) down; torch's
    thresholds are checked on what torch computes, and one number below each is not saturated."""
    p, emin = _PRECISION["float64"]
    sigmoid, tanh = bounds.format_thresholds(["sigmoid", "tanh"], ["float64"])

    def below(x: float) -> float:
        return _neighbour_below(x, torch.float64)

    with mpmath.workdps(80):
        one, zero = 1 - mpmath.mpf(2) ** (-p - 1), mpmath.mpf(2) ** (emin - p)

        def sig(x: float) -> mpmath.mpf:
            return 1 / (1 + mpmath.exp(-mpmath.mpf(x)))

        assert sig(sigmoid.upper) >= one > sig(below(sigmoid.upper))
        assert sig(-sigmoid.lower) <= zero < sig(-below(sigmoid.lower))
        assert mpmath.tanh(tanh.upper) >= one > mpmath.tanh(below(tanh.upper))
        assert tanh.lower == tanh.upper
    x = torch.tensor([sigmoid.torch_upper, below(sigmoid.torch_upper)], dtype=torch.float64)
    assert torch.sigmoid(x).tolist() == [1.0, torch.sigmoid(x[1]).item()] and torch.sigmoid(x[1]) < 1
    m = torch.tensor([sigmoid.torch_lower, below(sigmoid.torch_lower)], dtype=torch.float64)
    assert torch.sigmoid(-m)[0] == 0 and torch.sigmoid(-m)[1] > 0
    t = torch.tensor([tanh.torch_upper, below(tanh.torch_upper)], dtype=torch.float64)
    assert torch.tanh(t)[0] == 1 and torch.tanh(t)[1] < 1 and torch.tanh(-t)[0] == -1


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_two_way_softmax_thresholds(name: str) -> None:
    """softmax(x, 0) = (1, 0) exactly needs σ(−x) to round to 0: from half the smallest subnormal
    down (correct rounding), and on what torch computes; one number below, it is not exact."""
    p, emin = _PRECISION[name]
    dtype = getattr(torch, name)
    (row,) = bounds.format_thresholds(["softmax2"], [name])
    assert row.upper == row.lower
    with mpmath.workdps(80):
        zero = mpmath.mpf(2) ** (emin - p)

        def sig(x: float) -> mpmath.mpf:
            return 1 / (1 + mpmath.exp(-mpmath.mpf(x)))

        assert sig(-row.upper) <= zero < sig(-_neighbour_below(row.upper, dtype))
        assert sig(row.upper) >= 1 - mpmath.mpf(2) ** (-p - 1)  # the other entry is already 1
    x = torch.tensor([row.torch_upper, _neighbour_below(row.torch_upper, dtype)], dtype=dtype)
    pair = torch.softmax(torch.stack([x, torch.zeros_like(x)], -1), -1)
    assert pair[0].tolist() == [1.0, 0.0] and pair[1].tolist() != [1.0, 0.0]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_sigmoid_lower_thresholds(name: str) -> None:
    """σ(−m) rounds to 0 from half the smallest subnormal down, and not one number below m;
    torch's lower threshold checked on what torch computes."""
    p, emin = _PRECISION[name]
    dtype = getattr(torch, name)
    (row,) = bounds.format_thresholds(["sigmoid"], [name])
    with mpmath.workdps(80):
        zero = mpmath.mpf(2) ** (emin - p)
        sig = [1 / (1 + mpmath.exp(mpmath.mpf(m))) for m in (row.lower, _neighbour_below(row.lower, dtype))]
        assert sig[0] <= zero < sig[1]
    m = torch.tensor([row.torch_lower, _neighbour_below(row.torch_lower, dtype)], dtype=dtype)
    assert torch.sigmoid(-m)[0] == 0 and torch.sigmoid(-m)[1] > 0


_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}


def _number(code: int, dtype: torch.dtype) -> float:
    return float(torch.tensor([code], dtype=_BITS[dtype]).view(dtype)[0])


def _first_at_least(x: mpmath.mpf, dtype: torch.dtype) -> float:
    """The smallest number of ``dtype`` ≥ x > 0, found by stepping through the format's codes from
    torch's rounding of x and comparing each number with x exactly."""
    code = int(torch.tensor([float(x)], dtype=dtype).view(_BITS[dtype])[0])
    while mpmath.mpf(_number(code, dtype)) < x:
        code += 1
    while code > 1 and mpmath.mpf(_number(code - 1, dtype)) >= x:
        code -= 1
    return _number(code, dtype)


def _crossings(p: int, emin: int) -> dict[str, tuple[mpmath.mpf, mpmath.mpf]]:
    """Where each function meets its rounding boundary, solved numerically from the definitions:
    σ(x) = 1 − 2^(−p−1), σ(−m) = 2^(emin−p), 1 − tanh(x) = 2^(−p−1) (tanh is odd, so the same m
    for −1); softmax(x, 0) = (1, 0) needs both σ(x) → 1 and σ(−x) → 0, so the larger m."""
    one, zero = 1 - mpmath.mpf(2) ** (-p - 1), mpmath.mpf(2) ** (emin - p)

    def solve(f: object, start: float) -> mpmath.mpf:
        return mpmath.findroot(f, start, tol=mpmath.mpf(10) ** -70)

    up = solve(lambda x: 1 / (1 + mpmath.exp(-x)) - one, (p + 1) * math.log(2))
    down = solve(lambda m: mpmath.log(1 / (1 + mpmath.exp(m)) / zero), (p - emin) * math.log(2))
    tanh = solve(lambda x: mpmath.log((1 - mpmath.tanh(x)) / (1 - one)), (p + 2) * math.log(2) / 2)
    return {"sigmoid": (up, down), "tanh": (tanh, tanh), "softmax2": (max(up, down), max(up, down))}


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_exact_thresholds_are_the_first_format_numbers_past_the_crossings(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The correctly rounded thresholds are numbers of the format, each the smallest one at or past
    where the function crosses its rounding boundary (solved in mpmath at 80 digits); torch's
    measurement (stubbed here, checked on torch in the tests above) is passed through unchanged."""
    p, emin = _PRECISION[name]
    dtype = getattr(torch, name)
    monkeypatch.setattr(bounds, "_measured", lambda function, d: (float(len(function)), float(d.itemsize)))
    with mpmath.workdps(80):
        crossings = _crossings(p, emin)
        rows = bounds.format_thresholds(["sigmoid", "tanh", "softmax2"], [name])
        for row in rows:
            up, down = crossings[row.function]
            assert (row.format, row.upper, row.lower) == (name, _first_at_least(up, dtype),
                                                          _first_at_least(down, dtype))
            assert (row.torch_upper, row.torch_lower) == (len(row.function), dtype.itemsize)
    assert [row.function for row in rows] == ["sigmoid", "tanh", "softmax2"]


def test_format_thresholds_cover_every_function_and_format_by_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "_measured", lambda function, dtype: (0.0, 0.0))
    rows = bounds.format_thresholds()
    assert [(row.format, row.function) for row in rows] == [
        (name, function) for name in ("float16", "bfloat16", "float32", "float64")
        for function in ("sigmoid", "tanh", "softmax2")]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: bounds.format_thresholds(["sigmoid"], ["float8"]),
     r"^expected a format among \['bfloat16', 'float16', 'float32', 'float64'\], got 'float8'$"),
    (lambda: bounds.format_thresholds(["relu"], ["float16"]),
     r"^expected 'sigmoid', 'tanh' or 'softmax2', got 'relu'$"),
])
def test_format_thresholds_name_what_they_expected(call: object, message: str) -> None:
    with pytest.raises(SaturationError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("value", ["8.5", "1", "8.50000001", "1e-7", "0.3", "65504", "3.4e38"])
def test_rounding_up_to_a_format_gives_its_smallest_number_at_or_above(name: str, value: str) -> None:
    """Numbers of the format come back unchanged, others go to the next one up (normal and
    subnormal alike), checked against a search through the format's codes."""
    p, emin = _PRECISION[name]
    dtype = getattr(torch, name)
    with mpmath.workdps(80), bounds.interval_bits(200):
        x = mpmath.mpf(value)
        if x > torch.finfo(dtype).max:
            return
        assert bounds._round_up(mpmath.iv.mpf(value), p, emin) == _first_at_least(x, dtype)


def test_rounding_up_an_interval_that_straddles_a_number_is_refused() -> None:
    p, emin = _PRECISION["float16"]
    message = "^the threshold lies too close to a representable number to decide$"
    with bounds.interval_bits(200), pytest.raises(SaturationError, match=message):
        bounds._round_up(mpmath.iv.mpf(["8.49", "8.51"]), p, emin)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_tanh_lower_thresholds_as_torch_computes_them(name: str) -> None:
    """tanh(−m) is −1 from torch's lower threshold on and not one number below it."""
    dtype = getattr(torch, name)
    (row,) = bounds.format_thresholds(["tanh"], [name])
    m = torch.tensor([row.torch_lower, _neighbour_below(row.torch_lower, dtype)], dtype=dtype)
    assert torch.tanh(-m)[0] == -1 and torch.tanh(-m)[1] > -1


@pytest.mark.parametrize(("name", "where"), [
    *[("float16", where) for where in ("smallest", "middle", "largest", "never")],
    ("float32", "grid"), ("float64", "middle"),  # the coarse search (2¹⁶ points) narrows first
])
def test_measured_threshold_search_finds_the_first_saturated_number(
        name: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search through a format's positive numbers, run on a stand-in for torch that saturates
    exactly from a chosen number T on (f(x) at its upper limit, f(−x) at its lower limit from the
    next number on): it returns T and the number after it, wherever T lies: the smallest positive
    number, a point of the first coarse grid, the largest finite number; ∞ if never saturated."""
    dtype = getattr(torch, name)
    top = int(torch.tensor([torch.finfo(dtype).max], dtype=dtype).view(_BITS[dtype])[0])
    grid = torch.linspace(1, top, 1 << 16, dtype=torch.float64).round().to(torch.int64)
    code = {"smallest": 1, "grid": int(grid[40_000]), "middle": top // 2 + 12_345, "largest": top - 1,
            "never": top + 1}[where]
    first = _number(code, dtype) if code <= top else math.inf
    second = _number(code + 1, dtype) if code + 1 <= top else math.inf

    def stand_in(function: str) -> object:
        return lambda x: (x >= first, x >= second)

    monkeypatch.setattr(bounds, "_torch_function", stand_in)
    assert bounds._measured("sigmoid", dtype) == (first, second)


def _worst_over_rows(function: str, n: int, t: int, u: float) -> mpmath.mpf:
    """sup over inputs of error/bound at u, from the definitions at 60 digits: x = 1 at c = u for σ
    and tanh; for softmax the larger over the two extreme rows at margin 1 and c = u (every loser
    at the margin, or one loser at the margin and the others 10⁴ below)."""
    with mpmath.workdps(60):
        if function == "sigmoid":
            return 1 / (1 + mpmath.exp(u)) / mpmath.exp(-u)
        if function == "tanh":
            return (1 - mpmath.tanh(u)) / (2 * mpmath.exp(-2 * u))
        bound = softmax_constant(n, t) * mpmath.exp(-u)
        close_row = [0.0] * t + [-1.0] * (n - t)
        far_row = [0.0] * t + [-1.0] + [-1e4] * (n - t - 1)
        return max(_direct_softmax_error(row, u, 60) for row in (close_row, far_row)) / bound


@pytest.mark.parametrize(("function", "n", "t"), [("sigmoid", 2, 1), ("tanh", 2, 1), ("softmax", 2, 1),
                                                  ("softmax", 6, 2), ("softmax", 7, 5), ("softmax", 3, 1)])
@pytest.mark.parametrize("u", [0.05, 0.3, 2.0, 9.0])
def test_worst_ratio_is_the_worst_error_over_the_bound(function: str, n: int, t: int, u: float) -> None:
    """ρ(u), in mpmath and in interval arithmetic, is the worst error at u divided by the bound,
    computed from the definitions on the rows that attain it (as the far losers go to −∞);
    ``scale`` divides it."""
    expected = _worst_over_rows(function, n, t, u)
    with mpmath.workdps(60):
        assert mpmath.almosteq(bounds._worst_ratio(function, n, t)(mpmath.mpf(u)), expected, rel_eps=1e-40)
        assert mpmath.almosteq(bounds._worst_ratio(function, n, t, 0.5)(mpmath.mpf(u)), 2 * expected,
                               rel_eps=1e-40)
    with bounds.interval_bits(64):
        enclosure = bounds._worst_ratio(function, n, t)(mpmath.iv.mpf(u))
        assert enclosure.a <= expected <= enclosure.b <= expected * (1 + 1e-15)  # the upper end is tight


def test_certificate_records_what_it_checked() -> None:
    """By default the sigmoid/tanh certificate is for n = 2, t = 1 on 400 evenly spaced points
    from u = 0 to 60; the fields report what was checked."""
    certificate = certify_bound("tanh")
    assert (certificate.function, certificate.n, certificate.t) == ("tanh", 2, 1)
    assert len(certificate.grid) == 400 and certificate.grid[0] == 0 and certificate.grid[-1] == 60
    assert np.allclose(np.diff(certificate.grid), 60 / 399, rtol=1e-12, atol=0)
    short = certify_bound("softmax", n=5, t=2, upto=0.5, points=2)
    assert (short.function, short.n, short.t, short.grid) == ("softmax", 5, 2, (0.0, 0.5))
    assert short.holds and short.increasing


def test_a_bound_too_small_only_beyond_the_grid_fails_at_the_limit() -> None:
    """Scaled by 1 − 2⁻⁵⁰, each bound still holds on a grid up to u = 25 (there ρ·(1 − 2⁻⁵⁰) is
    below 1 by about e^(−25) ≫ 2⁻⁵⁰) but not as u → ∞, where ρ → 1/(1 − 2⁻⁵⁰): the certificate
    must fail, and report that limit as its worst ratio."""
    scale = 1 - 2.0**-50
    for function, n, t in [("sigmoid", 2, 1), ("tanh", 2, 1), ("softmax", 4, 2)]:
        certificate = certify_bound(function, n=n, t=t, upto=25.0, points=40, bound_scale=scale)
        assert not certificate.holds and certificate.increasing
        assert certificate.worst == pytest.approx(1 / scale, rel=1e-15) and certificate.worst > 1


def test_certificate_fails_where_the_ratio_exceeds_one_on_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """ρ(u) = 1.5/(1 + u) is above 1 near 0 and its limit (1 for σ) is fine: the bound does not
    hold, and the worst ratio is ρ(0) = 1.5. A constant ρ counts as non-decreasing."""
    monkeypatch.setattr(bounds, "_worst_ratio", lambda *_: lambda u: 1.5 / (1 + u))
    certificate = certify_bound("sigmoid", points=50)
    assert not certificate.holds and certificate.worst == 1.5
    monkeypatch.setattr(bounds, "_worst_ratio", lambda *_: lambda u: 0 * u + mpmath.mpf(1) / 2)
    certificate = certify_bound("sigmoid", points=50)
    assert certificate.holds and certificate.increasing and certificate.worst == 1


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n": 2, "t": 3}, "^expected 1 ≤ t ≤ n tied and allowed positions, got n=2, t=3$"),
    ({"n": 4, "t": 0}, "expected 1 ≤ t ≤ n"),
    ({"n": 3, "t": 3}, "^with every position tied the error is 0; there is nothing to bound$"),
    ({"n": 3, "points": 1}, "^expected at least 2 points up to a positive u, got 1, 60.0$"),
    ({"n": 3, "upto": 0.0}, "^expected at least 2 points up to a positive u, got 400, 0.0$"),
    ({"n": 3, "upto": -1.0, "points": 1}, "at least 2 points"),
    ({"n": 3, "upto": math.nan}, "at least 2 points"),
])
def test_certificate_requests_that_make_no_sense_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(SaturationError, match=message):
        certify_bound("softmax", **kwargs)


def test_scaling_rate_defaults_to_an_exponential_fit_at_fifty_digits() -> None:
    """e(c) = 3e^(−c/2): rate 1/2, constant 3, an exact line (r² = 1); the error is evaluated inside
    a 50-digit context, and the fit reports the scales and the errors as floats."""
    seen = []

    def error(c: mpmath.mpf) -> mpmath.mpf:
        seen.append(mpmath.mp.dps)
        return 3 * mpmath.exp(-c / 2)

    fit = bounds.scaling_rate(error, [10, 20, 40])
    assert seen == [50, 50, 50]
    assert fit.kind == "exponential" and fit.scales == (10.0, 20.0, 40.0)
    assert fit.rate == pytest.approx(0.5, rel=1e-12) and fit.constant == pytest.approx(3.0, rel=1e-10)
    assert fit.errors == pytest.approx([3 * math.exp(-c / 2) for c in (10, 20, 40)], rel=1e-12, abs=0)
    assert fit.r_squared == pytest.approx(1.0, abs=1e-12)


def test_scaling_rate_reports_errors_below_the_float_range_as_zero() -> None:
    """e(c) = e^(−c) at c = 100, 740, 800: the first two are floats (the second subnormal), the
    third below the smallest float is reported as 0 while the fit, made on the logs, still finds
    rate 1 and constant 1."""
    fit = bounds.scaling_rate(lambda c: mpmath.exp(-c), [100, 740, 800])
    # The floats nearest e^(−c) (mpmath rounds correctly; a libm's exp may be an ulp off).
    with mpmath.workdps(50):
        nearest = tuple(float(mpmath.exp(-c)) for c in (100, 740))
    assert fit.errors[:2] == nearest and 0 < nearest[1] < 2.0**-1022 and fit.errors[2] == 0.0
    assert fit.rate == pytest.approx(1.0, rel=1e-12) and fit.constant == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("log10_constant", [308, 400])
def test_scaling_rate_reports_constants_and_errors_up_to_the_float_range(log10_constant: int) -> None:
    """e(c) = 10^k·e^(−c): C = 10³⁰⁸ and the errors 10³⁰⁸e^(−c) are floats and reported as such;
    with 10⁴⁰⁰ they are beyond the float range, reported as ∞; the rate is 1 either way."""
    fit = bounds.scaling_rate(lambda c: mpmath.mpf(10) ** log10_constant * mpmath.exp(-c), [1, 2, 3], dps=60)
    assert fit.rate == pytest.approx(1.0, rel=1e-9)
    if log10_constant == 308:
        assert fit.constant == pytest.approx(1e308, rel=1e-9)
        assert fit.errors == pytest.approx([1e308 * math.exp(-c) for c in (1, 2, 3)], rel=1e-9)
    else:
        assert fit.constant == math.inf and fit.errors == (math.inf,) * 3


def test_scaling_rate_accepts_integer_scales_of_any_size() -> None:
    """Scales are numbers: c = 10²⁰·k (beyond 64-bit integers) fit e^(−c/10²⁰) with rate 10⁻²⁰."""
    fit = bounds.scaling_rate(lambda c: mpmath.exp(-c / 10**20), [10**20, 2 * 10**20, 4 * 10**20])
    assert fit.rate == pytest.approx(1e-20, rel=1e-9, abs=0) and fit.scales == (1e20, 2e20, 4e20)


@pytest.mark.parametrize(("scales", "kind", "error", "message"), [
    ([1, 2, 3], "linear", None, "^expected kind 'exponential' or 'polynomial', got 'linear'$"),
    ([1, 2], "exponential", None, r"^expected at least three finite scales c > 0, got \[1, 2\]$"),
    ([0, 1, 2], "exponential", None, r"got \[0, 1, 2\]"),
    ([-1, 1, 2], "polynomial", None, "at least three finite scales"),
    ([1, 2, math.inf], "exponential", None, "at least three finite scales"),
    ([1, 2, 3], "exponential", lambda c: mpmath.mpf(0) * c,
     r"^the scaling error at c = 1 is 0.0; expected a positive finite number to fit \(raise dps if it "
     r"underflowed\)$"),
    ([1, 2, 3], "exponential", lambda c: -c, "the scaling error at c = 1 is -1.0; expected a positive"),
    ([1, 2, 3], "exponential", lambda c: mpmath.inf * c, "is [+]inf; expected a positive finite number"),
])
def test_scaling_rate_refuses_what_it_cannot_fit(scales: list, kind: str, error: object,
                                                  message: str) -> None:
    error = error or (lambda c: mpmath.exp(-c))
    with pytest.raises(SaturationError, match=message):
        bounds.scaling_rate(error, scales, kind=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(("scales", "kind"), [([1, 2, 3], "exponential"), ([0.25, 0.5, 0.75], "polynomial")])
def test_scaling_rate_needs_only_three_positive_scales(scales: list, kind: str) -> None:
    """Three scales suffice, and scales below 1 are scales too: e(c) = c⁻² or e^(−2c)."""
    def error(c: mpmath.mpf) -> mpmath.mpf:
        return c**-2 if kind == "polynomial" else mpmath.exp(-2 * c)

    fit = bounds.scaling_rate(error, scales, kind=kind)
    assert fit.kind == kind and fit.rate == pytest.approx(2.0, rel=1e-12)


def _last_crossing(error: object, eps: float, end: float) -> mpmath.mpf:
    """The largest c in (0, end) with error(c) > eps (0 if none), at 30 digits: a geometric scan
    from 10⁻⁴ (300 points), then bisection."""
    with mpmath.workdps(30):
        grid = [mpmath.mpf(10) ** -4 * (mpmath.mpf(end) * 10**4) ** (mpmath.mpf(k) / 299) for k in range(300)]
        above = [k for k, c in enumerate(grid) if error(c) > eps]  # type: ignore[operator]
        if not above:
            return mpmath.mpf(0)
        lo, hi = grid[above[-1]], grid[above[-1] + 1]
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if error(mid) > eps else (lo, mid)  # type: ignore[operator]
        return lo


def _lower_errors(t: int, near: list[float], far: list[float]) -> tuple[object, object]:
    """The two lower bounds of :func:`bounds._exceeds`, from their definitions: the winners'
    R/(t(t + R)) with R = Σ e^(−c·near), and the top loser's x/(t + x + S) with x = e^(−c·near[0])
    and S = Σ e^(−c·far)."""
    def winners(c: mpmath.mpf) -> mpmath.mpf:
        r = mpmath.fsum(mpmath.exp(-c * g) for g in near)
        return r / (t * (t + r))

    def loser(c: mpmath.mpf) -> mpmath.mpf:
        x = mpmath.exp(-c * near[0])
        return x / (t + x + mpmath.fsum(mpmath.exp(-c * g) for g in far))

    return winners, loser


@pytest.mark.parametrize(("t", "near", "far", "eps"), [
    (2, [1.0, 1.5, 4.0], [2.0, 5.0], 0.01),  # the top loser's error crosses last (3.90, the winners' 3.2)
    (2, [0.05, 3.0], [3.0] * 30, 0.02),  # the top loser's error rises first and sets it
    (3, [0.2] + [6.0] * 5, [6.0] * 5, 0.05),
    (2, [1.0], [], 0.165),  # the winners' error crosses eps at c = 0.015, early in the scan
    (2, [1.0, 2.0], [2.0], 0.4),  # never above eps
    (2, [0.5] * 10, [0.5] * 9, 0.01),  # ten losers at the margin: the winners' error crosses last (11.0)
    (2, [1.0] * 10, [1.0] * 9, 0.415),  # the winners' crossing (0.024) between the scan's first two points
    (2, [0.05], [3.0] * 30, 0.2),  # the winners' error never exceeds eps, the rising top loser's does
])
def test_exceeding_scale_is_certified_just_below_the_last_crossing(t, near, far, eps) -> None:
    """The interval check says each error exceeds eps just below its last crossing (relative
    10⁻⁶) and not just above it; the scale returned is 10⁻⁶ below the later of the two crossings
    (each error is log-concave, so its last crossing is unique), and 0 when neither exceeds eps."""
    crossings = []
    for which, error in enumerate(_lower_errors(t, near, far)):
        crossing = float(_last_crossing(error, eps, 200.0))
        crossings.append(crossing)
        points = [crossing * (1 - 1e-6), crossing * (1 + 1e-6)] if crossing else [None, 1.0]
        for c, exceeds in zip(points, (True, False)):
            if c is not None:
                assert bounds._certify_exceeds(t, np.array(near), np.array(far), c, eps, which) == exceeds
    found = bounds._exceeds(t, np.array(near), np.array(far), eps)
    assert found == pytest.approx(max(crossings) * (1 - 1e-6), rel=1e-9, abs=0)
    assert bounds._exceeds(t, np.array([]), np.array(far), eps) == 0.0
@pytest.mark.parametrize(("t", "near", "far", "eps", "which"), [
    (1, [1.0], [], 0.5, 0),  # at c = 0 the winners' lower bound is 1/(1·(1 + 1)) = 1/2
    (2, [1.0], [5.0], 0.25, 1),  # and the top loser's 1/(2 + 1 + 1) = 1/4
])
def test_exceeding_is_strict(t: int, near: list[float], far: list[float], eps: float, which: int) -> None:
    """"Exceeds eps" is strict: at c = 0 every term e^(−c·g) is exactly 1 and the lower bound is
    exactly eps (a float), which does not exceed it; 10⁻¹² lower it does."""
    near_, far_ = np.array(near), np.array(far)
    assert not bounds._certify_exceeds(t, near_, far_, 0.0, eps, which)
    assert bounds._certify_exceeds(t, near_, far_, 0.0, eps * (1 - 1e-12), which)


def _top_loser(row: list[float]) -> tuple[bounds._Row, object, mpmath.mpf]:
    """The row as the limit sees it, its top loser's error e^(−cδ)/(t + R) from the definition,
    and the height of that error's peak (its log is concave: bisection on the slope's sign)."""
    r = bounds._row(row)
    gaps = [mpmath.mpf(float(g)) for g in r.gaps]

    def loser(c: mpmath.mpf) -> mpmath.mpf:
        terms = [mpmath.exp(-c * g) for g in gaps]
        return terms[0] / (r.t + mpmath.fsum(terms))

    def slope(c: mpmath.mpf) -> mpmath.mpf:
        terms = [mpmath.exp(-c * g) for g in gaps]
        return -gaps[0] + mpmath.fsum(g * e for g, e in zip(gaps, terms)) / (r.t + mpmath.fsum(terms))

    with mpmath.workdps(30):
        lo, hi = mpmath.mpf(0), mpmath.mpf(1000)
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
        return r, loser, loser(lo)



@pytest.mark.parametrize("eps", [0.02, "just below the peak"])
def test_float_scale_of_the_top_loser_is_its_last_crossing(eps: float | str) -> None:
    """b, the right end of {c: top loser's error e^(−cδ)/(t + R) > eps}, from the float64
    bisection over rows of different lengths at once, against the definition in mpmath (0 when
    the error never exceeds eps); also when eps is 10⁻⁴ below the peak, so that the set is short."""
    rows = [_RISING, [0.0, 0.0] + [-1.0] * 60, [1.0, 1.0, 1.0, 0.8] + [-5.0] * 5, [2.0, 2.0, 1.9, -1.0]]
    tops = [_top_loser(row) for row in rows]
    if eps != 0.02:
        eps = float(tops[0][2]) * (1 - 1e-4)
    crossings = [float(_last_crossing(loser, eps, 1000.0)) for _, loser, _ in tops]
    assert crossings[0] > 0 and crossings[1] == 0  # 60 losers at the margin dilute the top one
    padded = bounds._Padded.of([r for r, _, _ in tops])
    found = bounds._float_scales_of_loser(padded, np.full(len(rows), 2000.0), eps)
    assert found == pytest.approx(crossings, rel=1e-9, abs=0)


@pytest.mark.parametrize(("margin", "t", "n", "eps", "slack"), [
    (1.0, 1, 3, 1e-3, 0.0),  # K = 2: the upper bound is attained with both losers at the margin
    (0.5, 2, 5, 1e-2, 0.1),  # K = max(1/2, 3/4)
    (2.0, 3, 4, 0.3, 0.0),  # K = 1/3 < eps·e: log(K/eps) < 1; eps·t < 1 but x = 27 > 1: no lower bound
    (1.0, 3, 9, 0.5, 0.0),  # eps·t > 1: x < 0, no lower bound
])
def test_cheap_scale_bounds_follow_their_formulas_and_contain_the_scale(margin, t, n, eps, slack) -> None:
    """upper = log(K/eps)/(δ − slack) with K = max(1/t, (n − t)/t²) (0 where K ≤ eps), lower =
    −log(x)/(δ + slack) with x = eps·t²/(1 − eps·t) where 0 < x < 1 (else 0); the certified scale
    of the row with t winners and n − t losers at the margin lies between them."""
    k = max(1 / t, (n - t) / t**2)
    x = eps * t**2 / (1 - eps * t)
    upper = max(math.log(k / eps), 0.0) / (margin - slack)
    lower = -math.log(x) / (margin + slack) if 0 < x < 1 else 0.0
    margins, slacks = torch.tensor([margin], dtype=torch.float64), torch.tensor([slack], dtype=torch.float64)
    low, high = bounds.scale_bounds_of_rows(margins, torch.tensor([t]), torch.tensor([n]), eps, slacks)
    assert float(high[0]) == pytest.approx(upper, rel=1e-12)
    assert float(low[0]) == pytest.approx(lower, rel=1e-12)
    lo, hi = scale_to_saturate([0.0] * t + [-margin] * (n - t), eps)
    assert float(low[0]) <= hi and lo <= float(high[0]) * (1 + 1e-9)


@pytest.mark.parametrize(("margin", "slack", "t", "n", "eps"), [
    (0.1, 0.2, 1, 3, 1e-3),  # δ − slack < 0: the margin may be 0 (rounding may hide a tie)
    (0.5, 0.5, 3, 4, 0.5),  # δ = slack and K = 1/3 ≤ eps: 0/0 in the formula
    (math.nan, 0.0, 1, 3, 1e-3),  # no margin known at all
])
def test_cheap_scale_bounds_claim_nothing_without_a_positive_margin(margin, slack, t, n, eps) -> None:
    """Where the margin is not known to be positive, no finite upper bound holds (∞, as the
    certified scale of such a row is, see certified_row_scales); the lower bound is the formula
    −log(x)/(δ + slack) where δ + slack is a number, and 0 where it is not."""
    margins, slacks = torch.tensor([margin], dtype=torch.float64), torch.tensor([slack], dtype=torch.float64)
    low, high = bounds.scale_bounds_of_rows(margins, torch.tensor([t]), torch.tensor([n]), eps, slacks)
    assert float(high[0]) == math.inf
    x = eps * t**2 / (1 - eps * t)
    lower = -math.log(x) / (margin + slack) if 0 < x < 1 and not math.isnan(margin) else 0.0
    assert float(low[0]) == pytest.approx(lower, rel=1e-12)


def test_log_error_bound_of_a_rounded_softmax() -> None:
    """u·(gap + 8) + 2·tiny/p̂ + 10⁻¹⁵(|log p̂| + 1) at hand-picked weights, and ∞ without a
    warning where a weight is 0."""
    u, tiny = 2.0**-24, 1e-45
    p, gap = np.array([0.5, 1e-40, 0.0]), np.array([0.0, 90.0, 200.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = bounds.softmax_log_error(p, gap, u, tiny)
    expected = [8 * u + 4e-45 + 1e-15 * (math.log(2) + 1), 98 * u + 2e-5 + 1e-15 * (40 * math.log(10) + 1)]
    assert found[:2] == pytest.approx(expected, rel=1e-12, abs=0) and found[2] == math.inf


def test_scale_to_saturate_defaults_and_tie_tolerance() -> None:
    """eps = 1e-3 by default; a given rtol decides the ties: with rtol = 1e-2, −1e-3 ties with 0
    and the row is (0, 0, −1)."""
    row = [0.0, -1e-3, -1.0]
    assert scale_to_saturate(row) == scale_to_saturate(row, 1e-3, rel_width=1e-3, rtol=None)
    assert scale_to_saturate(row, 1e-3, rtol=1e-2) == scale_to_saturate([0.0, 0.0, -1.0], 1e-3, rtol=0.0)
    assert scale_to_saturate(row, 1e-3, rtol=0.0)[0] > 1000  # untied, the margin is 1e-3


@pytest.mark.parametrize(("scores", "shape"), [([[0.0, -1.0]], r"\(1, 2\)"), ([], r"\(0,\)")])
def test_a_row_must_be_one_dimensional_and_non_empty(scores: list, shape: str) -> None:
    with pytest.raises(SaturationError, match=f"^expected a non-empty 1-d row of scores, got shape {shape}$"):
        scale_to_saturate(scores, 0.1)


def test_interval_enclosures_of_a_row_contain_the_exact_sums() -> None:
    """R = Σ e^(−c·a_k), the moment Σ a_k e^(−c·a_k), the top loser's e^(−cδ), the errors built
    from them and the log-slope −δ + M/(t + R) are enclosed, within 10⁻¹² relatively, at a small
    and a large c (terms e^(−30) below the top loser are enclosed in bulk)."""
    row = bounds._row([0.0, 0.0, -0.5, -1.0, -4.0] + [-50.0] * 20 + [-400.0] * 5)
    gaps = [mpmath.mpf(g) for g in row.exact_gaps()]
    for c in (0.1, 10.0):
        with bounds.interval_bits(80):
            box = bounds._Enclosure(row, mpmath.iv.mpf(c))
            with mpmath.workdps(60):
                terms = [mpmath.exp(-c * a) for a in gaps]
                r, m = mpmath.fsum(terms), mpmath.fsum(a * e for a, e in zip(gaps, terms))
                exact = {"total": r, "moment": m, "top": terms[0], "winners": r / (2 * (2 + r)),
                         "loser": terms[0] / (2 + r), "slope": -gaps[0] + m / (2 + r)}
            boxes = {"total": box.total, "moment": box.moment, "top": box.top, "winners": box.winners(),
                     "loser": box.loser(), "slope": box.slope()}
            for name, value in exact.items():
                enclosure = boxes[name]
                assert enclosure.a <= value <= enclosure.b, (c, name)
                assert enclosure.delta <= 1e-12 * abs(value), (c, name)


@pytest.mark.parametrize("scores", [[2, 0, 1], np.array([2, 0, 1], dtype=np.int32), torch.tensor([2, 0, 1])])
def test_integer_scores_are_read_as_numbers(scores: object) -> None:
    """Scores given as integers (a list, a numpy or a torch array) give what their float values
    give: x = (2, 0, 1) at c = 1 has R = e^(−1) + e^(−2) and error R/(1 + R)."""
    row = [2.0, 0.0, 1.0]
    with mpmath.workdps(60):
        r = mpmath.exp(-1) + mpmath.exp(-2)
        assert mpmath.almosteq(softmax_error(scores, 1), r / (1 + r), rel_eps=1e-45)
    assert softmax_bound(scores, 1) == softmax_bound(row, 1)
    assert scale_to_saturate(scores, 0.01) == scale_to_saturate(row, 0.01)


@pytest.mark.parametrize("start", [0.3, 1.5])
def test_rising_loser_peak_is_compared_with_eps(start: float) -> None:
    """From a scale where the top loser's error still rises, the certificate that it stays within
    eps holds for eps 10⁻³ above its peak (computed from the definition) and not 10⁻³ below it."""
    row, _, peak = _top_loser(_RISING)
    assert float(bounds._Enclosure(row, mpmath.iv.mpf(start)).slope().a) > 0  # still rising at start
    with bounds.interval_bits(80):
        assert bounds._peak_below(row, start, mpmath.iv.mpf(float(peak) * (1 + 1e-3)))
        assert not bounds._peak_below(row, start, mpmath.iv.mpf(float(peak) * (1 - 1e-3)))


@pytest.mark.parametrize(("c", "factor", "within"), [
    (1.5, 0.97, False),  # rising (slope ≈ 0.27), loser ≈ 0.284 ≤ eps, but its later peak is above eps
    (1.5, 1.03, True),  # rising, and the peak itself within eps
    (4.0, 0.97, True),  # past the peak: falling from c on, and within eps at c
])
def test_within_eps_from_a_scale_where_the_top_loser_still_rises(c: float, factor: float,
                                                                   within: bool) -> None:
    """Tied winners whose top loser's error first rises: "within eps from c on" needs the winners'
    error (≈ 0.19 at c = 1.5, falling) and the loser's error at c within eps, and, while the loser's
    error still rises at c, its peak (≈ 0.3045, from the definition) too."""
    row, loser, peak = _top_loser(_RISING)
    with mpmath.workdps(30):
        assert loser(mpmath.mpf(c)) <= peak * factor  # the loser's error at c itself is within eps
    with bounds.interval_bits(80):
        assert bounds._within_from(row, c, mpmath.iv.mpf(float(peak) * factor)) is within


def test_row_scales_read_float32_weights_as_their_values_without_warnings() -> None:
    """Weights given in float32 (as a model computes them) are certified from their exact values,
    the same as the same numbers given in float64; masked and underflowed weights (0) raise no
    warning."""
    weights = np.array([[0.7, 0.2, 0.1, 0.0], [0.45, 0.45, 0.1, 0.0]], dtype=np.float32)
    winners = np.array([[True, False, False, False], [True, True, False, False]])
    allowed = np.array([[True, True, True, False], [True, True, True, True]])
    unit = (2.0**-24, 1e-45)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = bounds.certified_row_scales(weights, winners, allowed, 1e-3, unit)
    expected = bounds.certified_row_scales(weights.astype(np.float64), winners, allowed, 1e-3, unit)
    assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])
    assert np.all(found[0] > 0) and np.all(found[0] <= found[1])


def test_row_scales_of_bfloat16_weights_contain_the_scale_of_the_scores() -> None:
    """bfloat16 weights (u = 2⁻⁸: each log-gap is known only to within about 0.1) from known
    scores: every (lo, hi) contains the scale of those scores, with one winner, tied winners whose
    top loser sets the scale, a masked key, and losers whose weight underflows to 0. A row whose only
    loser underflowed has lo = 0 (nothing certifies its error above eps) and hi the scale of the
    row with that loser at the smallest gap a zero weight allows, −log(tiny) − 2β_top, with β_top
    the log-error bound of the top weight (softmax_log_error at gap 0)."""
    scores = torch.tensor([[0.0, -0.75, -1.5, -3.0, -40.0],
                           [0.0, -0.125, -2.0, -2.0, -200.0],
                           [0.0, -150.0, -math.inf, -math.inf, -math.inf],
                           [0.0, 0.0, -1.0, -3.0, -3.0],
                           [0.0, 0.0, 0.0, -0.5, -150.0],
                           [0.0, 0.0, -2.0, -math.inf, -120.0]], dtype=torch.bfloat16)
    eps, u, tiny = 1e-2, 2.0**-8, 2.0**-133
    weights = torch.softmax(scores, -1)
    assert weights[1, 4].item() == weights[2, 1].item() == weights[4, 4].item() == weights[5, 4].item() == 0
    allowed = scores > -math.inf
    winners = scores == scores.max(-1, keepdim=True).values
    lo, hi = bounds.certified_row_scales(weights.double().numpy(), winners.numpy(), allowed.numpy(), eps,
                                         (u, tiny))
    for i, row in enumerate(scores.double()):
        low, high = scale_to_saturate(row, eps, rel_width=1e-9, rtol=0.0)
        assert 0 <= lo[i] <= low and high <= hi[i] < math.inf, i
    assert weights[2, 0].item() == 1.0
    top_error = float(bounds.softmax_log_error(np.array([1.0]), np.array([0.0]), u, tiny)[0])
    smallest = scale_to_saturate([0.0, math.log(tiny) + 2 * top_error], eps, rel_width=1e-9, rtol=0.0)
    assert lo[2] == 0.0 and smallest[0] <= hi[2] <= smallest[1] * (1 + 1e-3)
    # One winner, nothing underflowed: (lo, hi) are the scales of the rows with every gap
    # g = log p̂_top − log p̂_j moved by β_j = softmax_log_error at j plus twice at the top (up to the
    # certificate's 10⁻³), no wider.
    p = weights[0].double().numpy()
    gaps = math.log(p[0]) - np.log(p)
    beta = (bounds.softmax_log_error(p, gaps, u, tiny)
            + 2 * bounds.softmax_log_error(p[:1], np.zeros(1), u, tiny))[1:]
    assert np.all(beta > 0.01)  # bfloat16: wide enough to see
    far = scale_to_saturate([0.0, *(-(gaps[1:] + beta))], eps, rel_width=1e-9, rtol=0.0)
    near = scale_to_saturate([0.0, *(-(gaps[1:] - beta))], eps, rel_width=1e-9, rtol=0.0)
    assert far[0] * (1 - 1e-3) <= lo[0] <= far[1] and near[0] <= hi[0] <= near[1] * (1 + 1e-3)


@pytest.mark.parametrize("eps", [0.2, 0.05])
def test_row_scales_of_tied_bfloat16_weights_follow_their_bounding_rows(eps: float) -> None:
    """Tied winners, bfloat16 weights (each gap g known to within β ≈ 0.1): lo is where a lower bound
    of the error last exceeds eps, the winners' with every gap at g + β or the nearest loser's at
    g + β with the others at g − β (computed here from their definitions, lo 10⁻⁶ below it), and hi
    the scale of the worse of two rows, every gap at g − β, or the nearest loser at min(g − β) and
    the others at g + β (to the certificate's 10⁻³); (lo, hi) contains the scale of the scores. In
    the second row the nearest loser is the first position."""
    rows = [[0.0, 0.0, -1.0] + [-2.5] * 30, [-0.5, 0.0, 0.0] + [-3.0] * 30, [0.0] * 3 + [-1.0] + [-2.0] * 29]
    scores = torch.tensor(rows, dtype=torch.bfloat16)
    u, tiny = 2.0**-8, 2.0**-133
    weights = torch.softmax(scores, -1).double().numpy()
    winners = (scores == scores.max(-1, keepdim=True).values).numpy()
    lo, hi = bounds.certified_row_scales(weights, winners, np.ones_like(winners), eps, (u, tiny))
    for i, row in enumerate(scores.double()):
        p, w = weights[i], winners[i]
        t, top = int(w.sum()), float(np.log(p[w]).max())
        gaps = top - np.log(p[~w])
        beta = (bounds.softmax_log_error(p[~w], gaps, u, tiny)
                + 2 * bounds.softmax_log_error(np.exp([top]), np.zeros(1), u, tiny))
        up, down = gaps + beta, gaps - beta
        assert t > 1 and np.all(down > 0) and np.all(beta > 0.01)
        k = int(np.argmin(up))
        winners_low, loser_low = _lower_errors(t, sorted(up), list(np.delete(down, k)))
        expected_lo = max(_last_crossing(winners_low, eps, 1e3), _last_crossing(loser_low, eps, 1e3))
        assert expected_lo * (1 - 2e-6) <= lo[i] <= expected_lo, i
        bounding = [[0.0] * t + list(-down), [0.0] * t + [-down.min()] + list(-np.delete(up, k))]
        worse = max((scale_to_saturate(r, eps, rel_width=1e-9, rtol=0.0) for r in bounding),
                    key=lambda scale: scale[1])
        assert worse[0] <= hi[i] <= worse[1] * (1 + 1e-3), i
        exact = scale_to_saturate(row, eps, rel_width=1e-9, rtol=0.0)
        assert lo[i] <= exact[0] and exact[1] <= hi[i], i


def test_row_scales_contain_the_scale_of_the_scores_softmaxed() -> None:
    """Weights computed by torch in float32 from known scores: each (lo, hi) contains the
    certified scale of those scores (taken exactly, in float64, 10⁻⁹ wide) and is within 2·10⁻³
    of it relatively; one winner, tied winners, a masked key, a weight that underflows to 0, a
    far loser, and a loser 10⁻⁷ below the winner, its weight a few ulps from the winner's: rounding
    may hide a tie there, so no finite upper bound (hi = ∞) and lo still below the scale."""
    scores = torch.tensor([[2.0, 0.5, -1.0, -3.0, -1e4],
                           [1.0, 1.0, 0.2, -0.5, -math.inf],
                           [0.0, -0.3, -0.3, -0.3, -2.0],
                           [3.0, 3.0, 3.0, 1.0, -200.0],
                           [0.0, -1e-7, -1.0, -2.0, -3.0]], dtype=torch.float32)
    weights = torch.softmax(scores, -1)
    assert weights[0, 4].item() == 0 and weights[3, 4].item() == 0
    assert abs(weights[4, 0].item() - weights[4, 1].item()) <= 2.0**-22 * weights[4, 0].item()
    allowed = scores > -math.inf
    winners = scores == scores.max(-1, keepdim=True).values
    lo, hi = bounds.certified_row_scales(weights.numpy(), winners.numpy(), allowed.numpy(), 1e-3,
                                         (2.0**-24, 2.0**-149))
    for i, row in enumerate(scores.double()):
        low, high = scale_to_saturate(row, 1e-3, rel_width=1e-9, rtol=0.0)
        assert lo[i] <= low and high <= hi[i], i
        if i < 4:
            assert hi[i] <= lo[i] * (1 + 2e-3), i
    assert hi[4] == math.inf and lo[4] > 0

