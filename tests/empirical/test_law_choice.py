"""Choosing a growth law by AIC and by extrapolation, with autocorrelation-aware intervals."""

from __future__ import annotations

import numpy as np

from empirical.training.fits import extrapolation_scores, fit_growth, fit_law, parameter_intervals


def _ar1(n: int, phi: float, sigma: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = np.zeros(n)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + sigma * rng.standard_normal()
    return noise


def _fit(result, law):
    return next(f for f in result["fits"] if f["law"] == law)


def test_sqrt_growth_with_ar1_noise_picks_the_square_root_law_and_covers_p():
    steps = np.arange(1, 2001, 10.0)
    for seed in range(3):
        norms = 5.0 + 0.2 * np.sqrt(steps) + _ar1(steps.size, 0.9, 0.02, seed)
        result = fit_growth(steps, norms)
        assert result["best"] in {"sqrt", "power"}, (seed, result["best"])
        power = _fit(result, "power")
        low, high = power["interval"]["p"]
        assert low <= 0.5 <= high, (seed, power["params"]["p"], low, high)
        assert abs(power["params"]["p"] - 0.5) < 0.1
        assert result["best_by_extrapolation"] in {"sqrt", "power", "quarter"}


def test_equilibrium_growth_picks_the_equilibrium():
    steps = np.arange(0, 2001, 10.0)
    for seed in range(3):
        norms = 9.0 - 4.0 * np.exp(-steps / 500.0) + _ar1(steps.size, 0.9, 0.01, seed)
        result = fit_growth(steps, norms)
        assert result["best"] == "equilibrium", (seed, result)
        scores = {f["law"]: f["extrapolation"] for f in result["fits"]}
        assert scores["equilibrium"] < scores["power"] and scores["equilibrium"] < scores["sqrt"]
        low, high = _fit(result, "equilibrium")["interval"]["rho_inf"]
        assert low <= 9.0 <= high


def test_intervals_widen_with_autocorrelation():
    steps = np.arange(1, 1001, 5.0)
    rng = np.random.default_rng(0)
    white = 1.0 + 0.3 * np.sqrt(steps) + 0.02 * rng.standard_normal(steps.size)
    correlated = 1.0 + 0.3 * np.sqrt(steps) + _ar1(steps.size, 0.95, 0.02 * np.sqrt(1 - 0.95**2), 0)

    def width(norms):
        low, high = parameter_intervals(fit_law(steps, norms, "sqrt"), steps, norms)["a"]
        return high - low

    assert width(correlated) > 2 * width(white)


def test_too_short_a_tail_is_not_scored():
    scores = extrapolation_scores([0, 1, 2, 3, 4, 5], [1.0, 2, 3, 4, 5, 6.5], ["linear"])
    assert scores == {"linear": None}
