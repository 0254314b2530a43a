"""The numbers behind a growth-law choice, each from a hand derivation: AIC, R², standard errors
and intervals on data whose least-squares fit is known exactly, and the choice rules at the
boundaries of their tolerances on hand-made fits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student

from empirical.training.fits import (
    CURVATURE_MARGIN,
    EXPONENT_MARGIN,
    NESTED_TOLERANCE,
    Fit,
    _choose,
    choose_law,
    extrapolation_scores,
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


def test_a_law_with_too_few_fitted_points_is_not_scored() -> None:
    """head = ½ of 6 points fits 3 and holds out 3: enough for a line (2 parameters), not for the
    power law (3 parameters need 4 points)."""
    t = np.arange(6.0)
    scores = extrapolation_scores(t, 1.0 + 2.0 * t, ["linear", "power"], head=0.5)
    assert scores["linear"] == pytest.approx(0.0, abs=1e-9)
    assert scores["power"] is None
