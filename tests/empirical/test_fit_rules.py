"""The numbers behind a growth-law choice, each from a hand derivation: AIC, R², standard errors
and intervals on data whose least-squares fit is known exactly, and the choice rules at the
boundaries of their tolerances on hand-made fits."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import OptimizeWarning
from scipy.stats import t as student

from empirical.errors import EmpiricalError
from empirical.training.fits import (
    CURVATURE_MARGIN,
    EXPONENT_MARGIN,
    LAWS,
    NESTED_TOLERANCE,
    Fit,
    Law,
    _by_extrapolation,
    _choose,
    _curve_fit,
    _equilibrium_starts,
    _fixed_power,
    _lag1_autocorrelation,
    _power_starts,
    choose_law,
    extrapolation_scores,
    fit_growth,
    fit_law,
    parameter_intervals,
)

# Residuals orthogonal to 1 and t, so the least-squares line through 2t + 1 + r is 2t + 1 exactly.
ALTERNATING = (np.arange(4.0), np.array([1.0, -1.0, -1.0, 1.0]))  # lag-1 autocorrelation −1/4 → 0
PERSISTENT = (np.arange(8.0), np.array([1.0, 1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 1.0]))  # ρ = 3/8


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_aic_r2_and_standard_errors_of_a_known_line(scale: float) -> None:
    """t = 0..3, r = s·(1, −1, −1, 1): RSS = 4s², AIC = n·ln(RSS/n) + 2(k + 1) = 4·ln(s²) + 6;
    R² = 1 − RSS/TSS; OLS variances σ²(XᵀX)⁻¹ with σ² = RSS/(n − k), XᵀX = [[14, 6], [6, 4]]."""
    t, r = ALTERNATING
    y = 2 * t + 1 + scale * r
    fit = fit_law(t, y, "linear")
    assert fit.params == pytest.approx({"a": 2.0, "b": 1.0})
    rss = 4 * scale**2
    assert fit.rss == pytest.approx(rss)
    assert fit.aic == pytest.approx(4 * math.log(rss / 4) + 2 * 3)
    assert fit.r2 == pytest.approx(1 - rss / float(np.sum((y - y.mean()) ** 2)))
    sigma2 = rss / 2
    assert fit.stderr["a"] == pytest.approx(math.sqrt(sigma2 * 4 / 20))
    assert fit.stderr["b"] == pytest.approx(math.sqrt(sigma2 * 14 / 20))
    assert (fit.n, fit.span) == (4, 3.0)


def test_standard_errors_grow_by_the_ar1_factor() -> None:
    """r with lag-1 autocorrelation ρ = 3/8: variances × (1 + ρ)/(1 − ρ) = 11/5 over OLS's
    σ²(XᵀX)⁻¹, σ² = 8/6, (XᵀX)⁻¹ₐₐ = 8/336."""
    t, r = PERSISTENT
    fit = fit_law(t, 2 * t + 1 + r, "linear")
    assert fit.stderr["a"] == pytest.approx(math.sqrt(8 / 6 * 8 / 336 * 11 / 5))


def test_intervals_use_students_t_on_the_effective_sample_size() -> None:
    """n_eff = n(1 − ρ)/(1 + ρ) = 8·(5/8)/(11/8) = 40/11, n_eff − k = 18/11 degrees of freedom."""
    t, r = PERSISTENT
    y = 2 * t + 1 + r
    fit = fit_law(t, y, "linear")
    for level in (0.95, 0.5):
        quantile = student.ppf(0.5 + level / 2, 40 / 11 - 2)
        intervals = parameter_intervals(fit, t, y, level=level)
        for name in ("a", "b"):
            value, se = fit.params[name], fit.stderr[name]
            assert intervals[name] == pytest.approx((value - quantile * se, value + quantile * se))


def test_intervals_keep_at_least_one_degree_of_freedom() -> None:
    """n = 4, ρ clipped to 0: n_eff − k = 2; with 3 points n − k = 1: Student's t with 1 degree."""
    t = np.array([0.0, 1.0, 2.0])
    y = np.array([1.0, 3.5, 5.0])
    fit = fit_law(t, y, "linear")
    low, high = parameter_intervals(fit, t, y)["a"]
    assert (high - low) / 2 == pytest.approx(student.ppf(0.975, 1) * fit.stderr["a"])


def _fit(law: str, aic: float, span: float = 100.0, **params: tuple[float, float | None]) -> Fit:
    return Fit(law, {k: v[0] for k, v in params.items()}, {k: v[1] for k, v in params.items()},
               r2=0.9, aic=aic, rss=1.0, n=10, span=span)


def _power_family(p: float, se: float | None) -> dict[str, Fit]:
    """Power wins on AIC; among the named laws quarter has the lowest AIC, then sqrt, then linear."""
    return {"linear": _fit("linear", 12.0, a=(1, 0.1), b=(0, 0.1)),
            "sqrt": _fit("sqrt", 11.0, a=(1, 0.1), b=(0, 0.1)),
            "quarter": _fit("quarter", 10.0, a=(1, 0.1), b=(0, 0.1)),
            "power": _fit("power", 5.0, a=(1, 0.1), p=(p, se), b=(0, 0.1))}


@pytest.mark.parametrize(("p", "se", "best"), [
    (0.625, 0.0625, "sqrt"),      # |p − ½| = 2·se exactly: within the Wald bound
    (0.625, 0.0624, "power"),     # just outside: every named law rejected
    (0.5 + EXPONENT_MARGIN * 0.99, 1e-6, "sqrt"),   # within the practical margin
    (0.5 + EXPONENT_MARGIN * 1.01, 1e-6, "power"),
    (0.375, 0.0625, "quarter"),   # ¼ and ½ both within 2·se: the lower AIC of the two
    (0.7, None, "quarter"),       # no standard error: not significant, lowest AIC of the named
    (2.0, 0.5, "linear"),         # only p = 1 within 2·se
])
def test_a_winning_power_law_yields_to_a_named_law_within_its_tolerance(p, se, best) -> None:
    assert NESTED_TOLERANCE == 2.0
    assert _choose(_power_family(p, se)) == best


def _equilibrium_family(tau: float, se: float | None, span: float,
                        with_linear: bool = True) -> dict[str, Fit]:
    fits = {"equilibrium": _fit("equilibrium", 1.0, span, rho_inf=(9, 0.1), rho_0=(5, 0.1), tau=(tau, se)),
            "sqrt": _fit("sqrt", 3.0, span, a=(1, 0.1), b=(0, 0.1))}
    if with_linear:
        fits["linear"] = _fit("linear", 4.0, span, a=(1, 0.1), b=(0, 0.1))
    return fits


@pytest.mark.parametrize(("tau", "se", "span", "best"), [
    (4.0, 2.0, 100.0, "linear"),          # τ = 2·se(τ): the curvature 1/τ is not significant
    (4.0, 1.99, 100.0, "equilibrium"),
    (4.0, None, 100.0, "linear"),         # undefined standard error: not significant
    (1000.0, 1.0, 100.0, "linear"),       # span/τ = CURVATURE_MARGIN: bends less than ~5%
    (1000.0, 1.0, 101.0, "equilibrium"),
])
def test_a_winning_equilibrium_yields_to_a_line_without_significant_curvature(tau, se, span, best) -> None:
    assert CURVATURE_MARGIN == 0.1
    assert _choose(_equilibrium_family(tau, se, span)) == best


def test_an_equilibrium_without_a_line_to_yield_to_stands() -> None:
    assert _choose(_equilibrium_family(4.0, None, 100.0, with_linear=False)) == "equilibrium"


def test_other_winners_stand_on_aic() -> None:
    fits = _power_family(0.5, 0.01)
    fits["power"] = _fit("power", 20.0, a=(1, 0.1), p=(0.5, 0.01), b=(0, 0.1))
    assert _choose(fits) == "quarter"


def test_the_extrapolation_decides_between_families_within_its_tolerance() -> None:
    """The AIC rule picks sqrt (unbounded); the equilibrium (bounded) extrapolates best. sqrt
    stands while its error is within 1.1 × the best, and yields beyond."""
    fits = {"sqrt": _fit("sqrt", 1.0, a=(1, 0.1), b=(0, 0.1)),
            "equilibrium": _fit("equilibrium", 2.0, rho_inf=(9, 0.1), rho_0=(5, 0.1), tau=(50, 1.0))}
    assert choose_law(fits, {"sqrt": 1.1, "equilibrium": 1.0}) == "sqrt"
    assert choose_law(fits, {"sqrt": 1.2, "equilibrium": 1.0}) == "equilibrium"
    assert choose_law(fits, {"sqrt": None, "equilibrium": 1.0}) == "equilibrium"
    assert choose_law(fits, {"sqrt": None, "equilibrium": None}) == "sqrt"


def test_within_one_family_the_aic_rule_decides() -> None:
    fits = {"sqrt": _fit("sqrt", 1.0, a=(1, 0.1), b=(0, 0.1)),
            "linear": _fit("linear", 2.0, a=(1, 0.1), b=(0, 0.1))}
    assert choose_law(fits, {"sqrt": 5.0, "linear": 1.0}) == "sqrt"


def test_among_equally_good_extrapolations_the_fewest_parameters_win() -> None:
    """power (3 parameters) extrapolates best, linear (2) within 1.1×: linear is the extrapolation's
    choice, and it replaces a bounded AIC choice that extrapolates worse."""
    fits = {"linear": _fit("linear", 3.0, a=(1, 0.1), b=(0, 0.1)),
            "power": _fit("power", 2.0, a=(1, 0.1), p=(3.0, 0.01), b=(0, 0.1)),
            "equilibrium": _fit("equilibrium", 1.0, rho_inf=(9, 0.1), rho_0=(5, 0.1), tau=(50, 1.0))}
    assert choose_law(fits, {"linear": 1.05, "power": 1.0, "equilibrium": 2.0}) == "linear"
    assert choose_law(fits, {"linear": 1.2, "power": 1.0, "equilibrium": 2.0}) == "power"


@pytest.mark.parametrize(("n", "scored"), [(10, True), (7, True), (6, False), (5, False)])
def test_extrapolation_needs_three_held_out_points(n: int, scored: bool) -> None:
    """The first ⌊0.7·n⌋ points are fitted and the rest scored: n = 7 fits 4 and holds out 3,
    n = 6 fits 4 and holds out only 2."""
    t = np.arange(float(n))
    scores = extrapolation_scores(t, 1.0 + 2.0 * t, ["linear"])
    assert (scores["linear"] is not None) == scored
    if scored:
        assert scores["linear"] == pytest.approx(0.0, abs=1e-9)


def test_extrapolation_score_is_the_rms_error_on_the_held_out_points() -> None:
    """Linear data 1 + 2t on t = 0..9: sqrt is fitted on t = 0..6 and scored on t = 7, 8, 9."""
    t = np.arange(10.0)
    y = 1.0 + 2.0 * t
    head = fit_law(t[:7], y[:7], "sqrt")
    errors = head.predict(t[7:]) - y[7:]
    expected = math.sqrt(sum(float(e) ** 2 for e in errors) / 3)
    assert extrapolation_scores(t, y, ["sqrt"])["sqrt"] == pytest.approx(expected)
    assert expected > 1.0


@pytest.mark.parametrize("n", [90, 170, 180, 330, 10])
def test_the_head_is_seven_tenths_of_the_points_counted_in_integers(n: int) -> None:
    """At n = 90 the head is 63 points (0.7·90 is 62.999… in floats): data on the line y = t for
    the first 7n/10 points and one above it after are fitted exactly by the line, which then
    misses every held-out point by exactly 1. A head one point shorter would hold out a point on
    the line and score √((k − 1)/k) instead."""
    assert math.floor(0.7 * 90) == 62  # the float cut this replaces
    cut = 7 * n // 10
    t = np.arange(float(n))
    y = np.where(t < cut, t, t + 1.0)
    assert extrapolation_scores(t, y, ["linear"])["linear"] == pytest.approx(1.0, rel=1e-9)
    assert extrapolation_scores(t, y, ["linear"], head=0.7)["linear"] == pytest.approx(1.0, rel=1e-9)


def test_a_law_with_too_few_fitted_points_is_not_scored() -> None:
    """head = ½ of 6 points fits 3 and holds out 3: enough for a line (2 parameters), not for the
    power law (3 parameters need 4 points)."""
    t = np.arange(6.0)
    scores = extrapolation_scores(t, 1.0 + 2.0 * t, ["linear", "power"], head=0.5)
    assert scores["linear"] == pytest.approx(0.0, abs=1e-9)
    assert scores["power"] is None


# --- the laws' building blocks, on data whose least-squares answer is exact --------------------


@pytest.mark.parametrize("exponent", [1.0, 0.5, 0.25, 0.75])
def test_a_named_power_law_evaluates_starts_and_rescales_at_its_exponent(exponent: float) -> None:
    """a·t^e + b; its start is the exact line through (t^e, y); fitted on t/T and y/Y, its
    parameters in the original units are (a·Y/T^e, b·Y), since Y·(a(t/T)^e + b) = (aY/T^e)t^e + bY."""
    law = _fixed_power("law", exponent, "a·t^e + b")  # built here: LAWS builds its laws at import
    assert (law.name, law.formula, law.parameters) == ("law", "a·t^e + b", ("a", "b"))
    assert law.exponent == exponent and law.bounds is None
    t = np.array([0.0, 0.25, 1.0, 4.0, 9.0])
    assert law.fn(t, 3.0, 2.0) == pytest.approx(3.0 * t**exponent + 2.0)
    (start,) = law.starts(t, 3.0 * t**exponent + 2.0)
    assert start == pytest.approx((3.0, 2.0))
    T, Y = 9.0, 5.0
    a, b = law.unscale([3.0, 2.0], T, Y)
    assert (a, b) == pytest.approx((3.0 * Y / T**exponent, 2.0 * Y))
    assert law.fn(t, a, b) == pytest.approx(Y * law.fn(t / T, 3.0, 2.0))


def test_the_power_law_starts_from_each_named_exponent() -> None:
    """Every nested law's own least-squares line is a start, so the free power law fits at least
    as well as linear, sqrt and quarter (the premise of the nested-law rule)."""
    u = np.linspace(0.0, 1.0, 11)
    for p in (0.25, 0.5, 1.0):
        assert (3.0, p, 1.0) in [pytest.approx(s) for s in _power_starts(u, 3.0 * u**p + 1.0)]
    assert [p for _, p, _ in _power_starts(u, u)] == [0.25, 0.5, 1.0, 2.0]  # and a faster growth
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 200.0, 10.0)
    y = 1.0 + np.sqrt(t) + 0.3 * rng.standard_normal(t.size)
    power = fit_law(t, y, "power").rss
    for law in ("linear", "sqrt", "quarter"):
        assert power <= fit_law(t, y, law).rss * (1 + 1e-9)


def test_the_equilibrium_starts_at_the_curves_ends_over_two_decades_of_tau() -> None:
    """ρ∞ from the last norm, ρ0 from the first, and τ from 3% of the (rescaled) run to three runs,
    half a decade apart: a fast and a slow approach each have a start near them."""
    u = np.linspace(0.0, 1.0, 6)
    v = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert _equilibrium_starts(u, v) == [(1.0, 0.5, tau) for tau in (0.03, 0.1, 0.3, 1.0, 3.0)]


@pytest.mark.parametrize(("residuals", "rho"), [
    (np.arange(10.0), 1 - 3 / 10),           # a ramp: Σcᵢcᵢ₊₁/Σcᵢ² = 1 − 3/n
    (np.arange(100.0), 1 - 3 / 100),
    (np.arange(400.0), 0.99),                # 1 − 3/400 = 0.9925, clipped to 0.99
    (np.array([2.0, 2.0, 0.0, 0.0]), 0.25),  # centred ±1: (1 − 1 + 1)/4
    (np.array([0.5, 0.5, -0.5, -0.5]), 0.25),  # Σcᵢ² = 1 exactly
    (np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]), 0.0),  # negative, clipped to 0
    (np.full(5, 3.0), 0.0),                  # no variation: no correlation
])
def test_lag1_autocorrelation_from_its_definition(residuals: np.ndarray, rho: float) -> None:
    assert _lag1_autocorrelation(residuals) == pytest.approx(rho, abs=1e-12)


def test_a_perfect_fit_floors_its_aic_at_the_rounding_of_the_data() -> None:
    """RSS below n·(ε·max|y|)² counts as that floor: AIC = n·ln((ε·max|y|)²) + 2(k + 1), finite.
    All-zero data has no scale: ε·1."""
    eps = np.finfo(float).eps
    t = np.arange(10.0)
    for law in ("linear", "sqrt", "quarter", "power", "equilibrium"):
        k = len(LAWS[law].parameters)
        fit = fit_law(t, np.zeros(10), law)
        assert (fit.rss, fit.r2) == (0.0, None)
        assert all(v == 0.0 for name, v in fit.params.items() if name not in ("p", "tau"))
        assert fit.aic == pytest.approx(10 * math.log(eps**2) + 2 * (k + 1), rel=1e-12)
        assert all(se == 0.0 for se in fit.stderr.values())  # a zero covariance is defined
        fit = fit_law(t, np.full(10, 3.0), law)
        assert fit.rss <= 10 * (eps * 3.0) ** 2
        assert fit.aic == pytest.approx(10 * math.log((eps * 3.0) ** 2) + 2 * (k + 1), rel=1e-12)


@pytest.mark.parametrize("law", ["linear", "sqrt", "quarter"])
def test_an_undetermined_covariance_is_no_standard_error_and_no_warning(law: str) -> None:
    """Constant data: curve_fit cannot estimate the covariance (it warns); the fit says so with
    stderr None, and the warning is not passed on."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_law(np.arange(10.0), np.full(10, 3.0), law)
    assert fit.params["b"] == pytest.approx(3.0) and fit.r2 is None
    assert fit.stderr == {"a": None, "b": None}


def test_the_power_exponent_stays_within_its_bounds() -> None:
    """p is searched in [10⁻³, 10]: 2·t¹² is fitted at the upper bound, not at p = 12."""
    t = np.arange(10.0)
    assert fit_law(t, 2.0 * t**12, "power").params["p"] == pytest.approx(10.0)


@pytest.mark.parametrize(("law", "params"), [
    ("equilibrium", {"rho_inf": 9.0, "rho_0": 5.0, "tau": 2000.0}),
    ("power", {"a": 0.5, "p": 2.5, "b": 2.0}),
])
def test_a_law_over_ten_thousand_steps_is_recovered_exactly(law: str, params: dict[str, float]) -> None:
    """The search runs on steps and norms rescaled to order one (the starts, e.g. τ/T = 0.03…3, are
    in those units); the refit in the original units gives τ in steps and a in norm per step^p."""
    t = np.linspace(0.0, 10000.0, 41)
    fit = fit_law(t, LAWS[law].fn(t, *params.values()), law)
    assert fit.params == pytest.approx(params, rel=1e-6)
    assert fit.span == 10000.0


def test_the_span_is_the_last_step_minus_the_first() -> None:
    t = np.array([100.0, 150.0, 250.0, 400.0])
    fit = fit_law(t, 1.0 + 0.5 * t, "linear")
    assert (fit.span, fit.n) == (300.0, 4)


def test_a_fit_document_holds_every_statistic_under_its_name() -> None:
    t, r = ALTERNATING
    fit = fit_law(t, 2 * t + 1 + r, "linear")
    assert fit.to_dict() == {"law": "linear", "formula": "a·t + b", "params": fit.params,
                             "stderr": fit.stderr, "r2": fit.r2, "aic": fit.aic, "rss": fit.rss,
                             "n": 4}
    assert fit.predict([0, 2, 10]) == pytest.approx([1.0, 5.0, 21.0])


FINITE = "expected finite steps and values, got NaN or infinity"


@pytest.mark.parametrize(("steps", "values", "message"), [
    ([0, 1, 2, 3], [1.0, 2.0, 3.0], "expected as many steps as values, got (4,) steps and (3,) values"),
    ([[0, 1], [2, 3]], [[1.0, 1.0], [1.0, 1.0]],
     "expected as many steps as values, got (2, 2) steps and (2, 2) values"),
    ([0, 1, 2, 3], [1.0, None, 3.0, 4.0], FINITE),   # a missing value is not a number
    ([0, None, 2, 3], [1.0, 2.0, 3.0, 4.0], FINITE),
    ([0, 1, math.inf, 3], [1.0, 2.0, 3.0, 4.0], FINITE),
    ([0, 1, 2, 3], [1.0, 2.0, -math.inf, 4.0], FINITE),
    ([-1, 0, 1, 2, 3], [1.0] * 5, "expected non-negative, strictly increasing steps, got "
                                  "[-1.0, 0.0, 1.0, 2.0, 3.0]"),
    ([-1, 0, 1, 2, 3, 4], [1.0] * 6, "expected non-negative, strictly increasing steps, got "
                                     "[-1.0, 0.0, 1.0, 2.0, 3.0]…"),
    ([0, 1, 2, 3, 4, 5, 5], [1.0] * 7, "expected non-negative, strictly increasing steps, got "
                                       "[0.0, 1.0, 2.0, 3.0, 4.0]…"),
    ([], [], "the linear law (a·t + b) has 2 parameters and needs at least 3 points (one degree "
             "of freedom for the noise), got 0"),
])
def test_bad_data_is_refused_with_the_data_in_the_message(steps, values, message) -> None:
    with pytest.raises(EmpiricalError) as caught:
        fit_law(steps, values, "linear")
    assert str(caught.value) == message


def test_an_unknown_law_is_named_among_the_known_ones() -> None:
    with pytest.raises(EmpiricalError) as caught:
        fit_law([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0], "cubic")
    assert str(caught.value) == ("expected a law among linear, sqrt, quarter, power, equilibrium, "
                                 "got 'cubic'")


def test_intervals_are_none_where_the_standard_error_is() -> None:
    t, r = ALTERNATING
    y = 2 * t + 1 + r
    fit = Fit("linear", {"a": 2.0, "b": 1.0}, {"a": None, "b": 0.5}, r2=0.9, aic=0.0, rss=4.0,
              n=4, span=3.0)
    intervals = parameter_intervals(fit, t, y)
    quantile = student.ppf(0.975, 2)  # ρ = 0 (clipped from −¼): n − k = 2 degrees of freedom
    assert intervals["a"] is None
    assert intervals["b"] == pytest.approx((1.0 - 0.5 * quantile, 1.0 + 0.5 * quantile))


def test_every_law_after_one_without_a_score_is_still_scored() -> None:
    """power (3 parameters) cannot be fitted on 3 head points; linear, listed after it, can."""
    t = np.arange(6.0)
    scores = extrapolation_scores(t, 1.0 + 2.0 * t, ["power", "linear"], head=0.5)
    assert scores["power"] is None
    assert scores["linear"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(("linear", "power", "best"), [
    (2.2, 2.0, "linear"),      # exactly 1.1 × the best, away from 1: the tolerance is relative
    (2.3, 2.0, "power"),
    (1e-12, 0.0, "linear"),    # a perfect extrapolation: 10⁻¹² of absolute slack
    (0.0, 0.0, "linear"),
])
def test_the_extrapolation_tolerance_is_relative_with_a_tiny_absolute_slack(linear, power, best) -> None:
    """The AIC rule picks the equilibrium (bounded); the extrapolation's choice, the fewest
    parameters within 1.1 × the best error + 10⁻¹², is unbounded and extrapolates better: it wins."""
    fits = {"linear": _fit("linear", 3.0, a=(1, 0.1), b=(0, 0.1)),
            "power": _fit("power", 2.0, a=(1, 0.1), p=(3.0, 0.01), b=(0, 0.1)),
            "equilibrium": _fit("equilibrium", 1.0, rho_inf=(9, 0.1), rho_0=(5, 0.1), tau=(50, 1.0))}
    assert choose_law(fits, {"linear": linear, "power": power, "equilibrium": 5.0}) == best


@pytest.mark.parametrize(("power", "best"), [(2.2, "power"), (2.3, "equilibrium"), (1e-12, "power")])
def test_the_information_choice_stands_within_the_extrapolation_tolerance(power, best) -> None:
    """The AIC rule keeps the power law (p = 3 is no named law); the equilibrium, with as many
    parameters, extrapolates best. The power law stands while its error is within 1.1 × the best
    + 10⁻¹², the equilibrium replaces it beyond."""
    fits = {"power": _fit("power", 1.0, a=(1, 0.1), p=(3.0, 0.01), b=(0, 0.1)),
            "equilibrium": _fit("equilibrium", 2.0, rho_inf=(9, 0.1), rho_0=(5, 0.1), tau=(50, 1.0))}
    floor = 2.0 if power > 1 else 0.0
    assert choose_law(fits, {"power": power, "equilibrium": floor}) == best


@pytest.mark.parametrize("units", [1.0, 1e-3])
def test_r2_does_not_depend_on_the_norms_units(units: float) -> None:
    """R² = 1 − RSS/TSS is a ratio: norms in other units (a total sum of squares below 1 here)
    give the same R²."""
    t, r = PERSISTENT
    y = units * (2 * t + 1 + r)
    fit = fit_law(t, y, "linear")
    total = float(np.sum((y - y.mean()) ** 2))
    assert (total < 1) == (units < 1)
    assert fit.r2 == pytest.approx(1 - 8 / float(np.sum((2 * t + r - (2 * t + r).mean()) ** 2)))
    assert fit.r2 == pytest.approx(1 - fit.rss / total)


def test_a_flat_run_keeps_the_first_start_among_equally_good_ones() -> None:
    """All-zero norms fit the power law for every exponent and the equilibrium for every τ (RSS 0
    at every start): the search keeps its first start, p = ¼, and τ = 3% of the last step (the
    starts are in units of the last step, here 190, not of the span, 90)."""
    t = 100.0 + 10.0 * np.arange(10)
    assert fit_law(t, np.zeros(10), "power").params == {"a": 0.0, "p": 0.25, "b": 0.0}
    assert _power_starts(t / 190.0, np.zeros(10))[0][1] == 0.25
    fit = fit_law(t, np.zeros(10), "equilibrium")
    assert fit.params == pytest.approx({"rho_inf": 0.0, "rho_0": 0.0, "tau": 0.03 * 190.0}, abs=1e-12)


def test_a_refit_that_cannot_start_keeps_the_searchs_optimum_without_standard_errors() -> None:
    """τ's lower bound, 10⁻⁶, holds in the search's units (a fraction of the run) and again in the
    refit's (steps): over a span of 10⁻⁶ steps, τ = 10⁻⁸ steps is 1% of the run, found by the
    search, but outside the refit's bounds. The fit keeps the search's parameters, rescaled to
    steps, with the covariance unknown (no standard errors); RSS, R² and AIC are those of that
    curve."""
    t = np.linspace(0.0, 1e-6, 21)
    y = LAWS["equilibrium"].fn(t, 9.0, 5.0, 1e-8)
    fit = fit_law(t, y, "equilibrium")
    assert fit.params == pytest.approx({"rho_inf": 9.0, "rho_0": 5.0, "tau": 1e-8}, rel=1e-6)
    assert fit.stderr == {"rho_inf": None, "rho_0": None, "tau": None}
    rss = float(np.sum((fit.predict(t) - y) ** 2))
    assert fit.rss == pytest.approx(rss, rel=1e-9, abs=1e-30) and fit.r2 == pytest.approx(1.0)
    floor = 21 * (np.finfo(float).eps * 9.0) ** 2
    assert fit.aic == pytest.approx(21 * math.log(max(rss, floor) / 21) + 2 * 4, rel=1e-6)


def _warning_line(warns: type[Warning]):
    """A line a·t + b whose evaluation warns with ``warns``, as a law to fit."""
    def fn(t, a, b):
        warnings.warn("evaluated", warns, stacklevel=2)
        return a * t + b

    return Law("line", "a·t + b", ("a", "b"), fn, lambda t, y: [(1.0, 0.0)],
               lambda p, T, Y: tuple(p))


@pytest.mark.parametrize(("warns", "silenced"), [
    (OptimizeWarning, True), (RuntimeWarning, True), (UserWarning, False), (DeprecationWarning, False)])
def test_fitting_silences_only_the_covariance_and_overflow_warnings(warns, silenced) -> None:
    """curve_fit's OptimizeWarning (an undefined covariance, reported as stderr None) and the
    RuntimeWarning of an overflowing trial curve are silenced; any other warning raised while
    fitting reaches the caller."""
    t = np.arange(5.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params, _cov = _curve_fit(_warning_line(warns), t, 2.0 * t + 1.0, (1.0, 0.0))
    assert params == pytest.approx([2.0, 1.0])
    passed = [w.category for w in caught if str(w.message) == "evaluated"]
    if silenced:
        assert passed == []
    else:
        assert passed and set(passed) == {warns}


def _all_laws() -> dict[str, Fit]:
    return {"linear": _fit("linear", 1.0, a=(1, 0.1), b=(0, 0.1)),
            "sqrt": _fit("sqrt", 1.0, a=(1, 0.1), b=(0, 0.1)),
            "quarter": _fit("quarter", 1.0, a=(1, 0.1), b=(0, 0.1)),
            "power": _fit("power", 1.0, a=(1, 0.1), p=(0.7, 0.01), b=(0, 0.1)),
            "equilibrium": _fit("equilibrium", 1.0, rho_inf=(9, 0.1), rho_0=(5, 0.1), tau=(50, 1.0))}


@pytest.mark.parametrize(("scores", "best"), [
    ({"sqrt": 1.05, "power": 1.0}, "sqrt"),              # 2 parameters before 3, whatever the names
    ({"equilibrium": 1.0, "quarter": 1.08}, "quarter"),
    ({"linear": 1.05, "sqrt": 1.0}, "sqrt"),             # as many parameters: the smaller error
    ({"power": 1.0, "equilibrium": 1.02}, "power"),
    ({"linear": 1.0, "sqrt": 1.2, "power": None}, "linear"),  # beyond 1.1 × the best: not near
    ({"linear": None, "sqrt": None}, None),              # nothing scored: no choice
])
def test_the_extrapolations_choice_is_the_fewest_parameters_then_the_smaller_error(scores, best) -> None:
    assert _by_extrapolation(scores, _all_laws()) == best


def test_the_equilibrium_law_runs_from_rho_0_to_rho_inf_with_time_constant_tau() -> None:
    """ρ(0) = ρ0, ρ(τ) = ρ∞ − (ρ∞ − ρ0)/e, ρ(t) → ρ∞; fitted to 9 − 4·exp(−t/500) (written out
    here, not by the law), it recovers ρ∞ = 9, ρ0 = 5, τ = 500."""
    fn = LAWS["equilibrium"].fn
    t = np.array([0.0, 500.0, 1e6])
    assert fn(t, 9.0, 5.0, 500.0) == pytest.approx([5.0, 9.0 - 4.0 / math.e, 9.0])
    steps = np.arange(0.0, 2001.0, 50.0)
    fit = fit_law(steps, 9.0 - 4.0 * np.exp(-steps / 500.0), "equilibrium")
    assert fit.params == pytest.approx({"rho_inf": 9.0, "rho_0": 5.0, "tau": 500.0}, rel=1e-6)


def test_an_extrapolation_error_beyond_float_range_is_no_score() -> None:
    """A line fitted on t = 0..6 (1 + 2t exactly) predicts 2·10²⁰⁰ at t = 10²⁰⁰, where the norm
    levelled off at 1: the squared error overflows, so the law gets no score (None), not inf; at
    t = 10¹⁰⁰ the same error is scored."""
    t = np.array([0.0, 1, 2, 3, 4, 5, 6, 1e200, 2e200, 3e200])
    y = np.concatenate([1.0 + 2.0 * t[:7], np.ones(3)])
    with np.errstate(over="ignore"):
        assert extrapolation_scores(t, y, ["linear"]) == {"linear": None}
    t[7:] = [1e100, 2e100, 3e100]  # errors 2·10¹⁰⁰·(1, 2, 3): their squares are in range
    assert extrapolation_scores(t, y, ["linear"])["linear"] == pytest.approx(2e100 * math.sqrt(14 / 3))


@pytest.mark.parametrize("law", ["linear", "sqrt", "quarter"])
def test_a_growth_document_has_no_interval_where_the_standard_error_is_undefined(law: str) -> None:
    """Constant norms: the covariance, so the standard errors, are undefined; the document's
    intervals are null, and it stays strict JSON."""
    t = np.arange(10.0)
    result = fit_growth(t, np.full(10, 3.0), (law,))
    (document,) = result["fits"]
    assert document["stderr"] == {"a": None, "b": None}
    assert document["interval"] == {"a": None, "b": None}
    json.dumps(result, allow_nan=False)


def test_a_fit_predicts_at_steps_given_as_any_real_numbers() -> None:
    """Steps are read as floats: Python integers beyond 64 bits and exact fractions included."""
    from fractions import Fraction

    fit = Fit("equilibrium", {"rho_inf": 9.0, "rho_0": 5.0, "tau": 500.0}, {}, r2=1.0, aic=0.0,
              rss=0.0, n=4, span=1.0)
    assert fit.predict([0, 10**20, Fraction(1000, 2)]) == pytest.approx([5.0, 9.0, 9.0 - 4.0 / math.e])
