"""Growth laws of the parameter norm over training, fitted by least squares and compared by AIC.

Five laws for ‖θ_t‖ against the step t (the paper found ~√t for T5, Figure 2):

============ ================================ ==========================================
law          formula                          what produces it
============ ================================ ==========================================
linear       a·t + b                          steps along a constant direction
sqrt         a·√t + b                         a random walk, or θᵀ∇L ≈ 0 (paper §5)
quarter      a·t^¼ + b                        slower, decelerating growth
power        a·t^p + b                        any of the three above, p free
equilibrium  ρ∞ − (ρ∞ − ρ0)·exp(−t/τ)         weight decay balancing noisy steps
============ ================================ ==========================================

Each law is fitted with :func:`scipy.optimize.curve_fit` (step and norm rescaled to order one
for the search, then refitted in the original units so that the covariance, and so the standard
errors, are in those units). The comparison uses AIC = n·ln(RSS/n) + 2(k + 1) for Gaussian
residuals, k parameters plus the noise variance; lower is better.

How ``best`` treats nested laws. The free power law contains linear (p = 1), sqrt (p = ½) and
quarter (p = ¼), and the equilibrium law tends to a linear one as τ → ∞; a law with an extra
parameter always fits at least as well, and AIC's penalty of 2 for it still lets it win by chance
(about 16% of the time with independent noise, since twice the log-likelihood gain is χ²₁, and far
more often when the residuals are correlated, as along a training run). So ``best`` starts from
the lowest AIC and simplifies when the extra parameter is not significant:

- power wins: the named law with the lowest AIC among those whose exponent lies within two
  standard errors of the fitted p (a Wald test at ≈5%) or within 0.05 of it (closer exponents are
  not a different law for any practical purpose); "power" only if all three are rejected;
- equilibrium wins: "linear" if the curvature 1/τ lies within two standard errors of 0
  (equivalently τ ≤ 2·se(τ)), or if the data span less than τ/10 (the curve then bends by less
  than ~5% over the data).

An undefined standard error counts as "not significant". The margins matter in practice: a random
walk added to a trend (noise that accumulates over steps, as in SGD) fakes small but "significant"
curvature, which a Wald test alone would report as a new law. ``best_by_aic`` keeps the plain AIC
winner. Standard errors account for correlated residuals: curve_fit's covariance assumes
independent residuals, which a norm trajectory does not have, so it is scaled by (1 + ρ)/(1 − ρ)
with ρ the lag-1 autocorrelation of the residuals (the AR(1) effective-sample-size correction).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from empirical.errors import EmpiricalError
from empirical.validation import check_list

__all__ = ["LAWS", "Fit", "Law", "best_fit", "choose_law", "extrapolation_scores", "fit_growth",
           "fit_law", "fit_norm_growth", "growth_curve", "layer_growth", "parameter_intervals",
           "skipped_lines"]

#: Standard errors within which an extra parameter counts as not significant (Wald test, ≈5%).
NESTED_TOLERANCE = 2.0
#: Exponents closer than this to a named law's exponent count as that law (practical equivalence).
EXPONENT_MARGIN = 0.05
#: An equilibrium law with (t_last − t_first)/τ below this bends less than ~5% over the data:
#: practically a line.
CURVATURE_MARGIN = 0.1

Array = np.ndarray


@dataclass(frozen=True)
class Law:
    """A growth law: its formula, parameter names and starting points in rescaled units.

    ``fn(t, *params)`` evaluates the law; ``starts(t, y)`` yields initial guesses for data
    rescaled so that max t = 1 and max |y| = 1; ``unscale(params, T, Y)`` maps parameters fitted
    on rescaled data back to steps in units of T and norms in units of Y.
    """

    name: str
    formula: str
    parameters: tuple[str, ...]
    fn: Callable[..., Array]
    starts: Callable[[Array, Array], list[tuple[float, ...]]]
    unscale: Callable[[Sequence[float], float, float], tuple[float, ...]]
    exponent: float | None = None  # the fixed exponent of a named power law
    bounds: tuple[Sequence[float], Sequence[float]] | None = None


def _fixed_power(name: str, exponent: float, formula: str) -> Law:
    def fn(t: Array, a: float, b: float) -> Array:
        return a * np.power(t, exponent) + b

    def starts(t: Array, y: Array) -> list[tuple[float, ...]]:
        slope, intercept = np.polyfit(np.power(t, exponent), y, 1)
        return [(float(slope), float(intercept))]

    def unscale(p: Sequence[float], T: float, Y: float) -> tuple[float, ...]:
        return (p[0] * Y / T**exponent, p[1] * Y)

    return Law(name, formula, ("a", "b"), fn, starts, unscale, exponent=exponent)


def _power(t: Array, a: float, p: float, b: float) -> Array:
    return a * np.power(t, p) + b


def _power_starts(t: Array, y: Array) -> list[tuple[float, ...]]:
    guesses: list[tuple[float, ...]] = []
    for p in (0.25, 0.5, 1.0, 2.0):
        slope, intercept = np.polyfit(np.power(t, p), y, 1)
        guesses.append((float(slope), p, float(intercept)))
    return guesses


def _equilibrium(t: Array, rho_inf: float, rho_0: float, tau: float) -> Array:
    return rho_inf - (rho_inf - rho_0) * np.exp(-t / tau)


def _equilibrium_starts(t: Array, y: Array) -> list[tuple[float, ...]]:
    return [(float(y[-1]), float(y[0]), tau) for tau in (0.03, 0.1, 0.3, 1.0, 3.0)]


LAWS: dict[str, Law] = {
    "linear": _fixed_power("linear", 1.0, "a·t + b"),
    "sqrt": _fixed_power("sqrt", 0.5, "a·√t + b"),
    "quarter": _fixed_power("quarter", 0.25, "a·t^¼ + b"),
    "power": Law("power", "a·t^p + b", ("a", "p", "b"), _power, _power_starts,
                 lambda p, T, Y: (p[0] * Y / T ** p[1], p[1], p[2] * Y),
                 bounds=((-np.inf, 1e-3, -np.inf), (np.inf, 10.0, np.inf))),
    "equilibrium": Law("equilibrium", "ρ∞ − (ρ∞ − ρ0)·exp(−t/τ)", ("rho_inf", "rho_0", "tau"),
                       _equilibrium, _equilibrium_starts,
                       lambda p, T, Y: (p[0] * Y, p[1] * Y, p[2] * T),
                       bounds=((-np.inf, -np.inf, 1e-6), (np.inf, np.inf, np.inf))),
}


@dataclass(frozen=True)
class Fit:
    """One law fitted to (step, norm) data.

    Attributes:
        law: the law's name (a key of :data:`LAWS`).
        params: fitted parameters by name, in steps and norm units.
        stderr: their standard errors (``None`` where the covariance is undefined).
        r2: coefficient of determination (``None`` for constant data).
        aic: n·ln(RSS/n) + 2(k + 1).
        rss: residual sum of squares.
        n: number of points.
        span: last step minus first step.
    """

    law: str
    params: dict[str, float]
    stderr: dict[str, float | None]
    r2: float | None
    aic: float
    rss: float
    n: int
    span: float

    def predict(self, steps: Sequence[float] | Array) -> Array:
        """The fitted law at ``steps``."""
        return LAWS[self.law].fn(np.asarray(steps, dtype=float), *self.params.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: law, formula, params, stderr, r2, aic, rss, n."""
        return {"law": self.law, "formula": LAWS[self.law].formula, "params": self.params,
                "stderr": self.stderr, "r2": self.r2, "aic": self.aic, "rss": self.rss, "n": self.n}


_LARGEST_VALUE = 1e150
"""The largest |value| fitted: squares, and the covariance of the fit, stay within float64."""


def _check_data(steps: Sequence[float], values: Sequence[float]) -> tuple[Array, Array]:
    t = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    if t.ndim != 1 or t.shape != y.shape:
        raise EmpiricalError(f"expected as many steps as values, got {t.shape} steps and "
                             f"{y.shape} values")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(y))):
        raise EmpiricalError("expected finite steps and values, got NaN or infinity")
    if y.size and float(np.max(np.abs(y))) > _LARGEST_VALUE:
        raise EmpiricalError(f"expected values of at most {_LARGEST_VALUE:g} in magnitude (a fit squares "
                             f"them in float64), got {float(np.max(np.abs(y))):g}; rescale them")
    if t.size and (t[0] < 0 or np.any(np.diff(t) <= 0)):
        raise EmpiricalError(f"expected non-negative, strictly increasing steps, got "
                             f"{t[:5].tolist()}{'…' if t.size > 5 else ''}")
    return t, y


def _curve_fit(law: Law, t: Array, y: Array, start: Sequence[float]) -> tuple[Array, Array]:
    from scipy.optimize import OptimizeWarning, curve_fit  # heavy, and needed only to fit

    kwargs: dict[str, Any] = {"p0": list(start), "maxfev": 20000}
    if law.bounds is not None:
        kwargs["bounds"] = law.bounds
    with warnings.catch_warnings():
        # An undefined covariance (singular Jacobian) is reported as stderr None, not as a warning.
        warnings.simplefilter("ignore", OptimizeWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        params, cov = curve_fit(law.fn, t, y, **kwargs)
    return params, cov


def _lag1_autocorrelation(residuals: Array) -> float:
    """Lag-1 autocorrelation of the residuals, clipped to [0, 0.99].

    Norms along one training run are not independent draws: a deviation from the trend persists
    over the following steps, so curve_fit's standard errors (which assume independent residuals)
    are too small. Treating the residuals as AR(1) with this coefficient, the variance of the
    estimates grows by (1 + ρ)/(1 − ρ), the usual effective-sample-size correction.
    """
    centered = residuals - residuals.mean()
    denominator = float(np.sum(centered**2))
    if residuals.size < 3 or denominator == 0.0:
        return 0.0
    rho = float(np.sum(centered[1:] * centered[:-1])) / denominator
    return min(max(rho, 0.0), 0.99)


def fit_law(steps: Sequence[float], values: Sequence[float], law: str) -> Fit:
    """Fit one law of :data:`LAWS` to ``values`` (norms) at ``steps``.

    Raises:
        EmpiricalError: unknown law, bad data, fewer than k + 1 points for k parameters (one
            degree of freedom is needed for the noise), or no convergence.

    >>> fit = fit_law([0, 1, 4, 9, 16], [1.0, 3.0, 5.0, 7.0, 9.0], "sqrt")
    >>> {name: round(value, 6) for name, value in fit.params.items()}, fit.r2
    ({'a': 2.0, 'b': 1.0}, 1.0)
    """
    if law not in LAWS:
        raise EmpiricalError(f"expected a law among {', '.join(LAWS)}, got {law!r}")
    spec = LAWS[law]
    t, y = _check_data(steps, values)
    k = len(spec.parameters)
    if t.size < k + 1:
        raise EmpiricalError(f"the {law} law ({spec.formula}) has {k} parameters and needs at least "
                             f"{k + 1} points (one degree of freedom for the noise), got {t.size}")
    scale_t = float(t[-1]) if t[-1] > 0 else 1.0
    scale_y = float(np.max(np.abs(y))) or 1.0
    u, v = t / scale_t, y / scale_y
    best: tuple[float, Array] | None = None
    for start in spec.starts(u, v):  # several starts: nonlinear laws have local minima
        try:
            params, _cov = _curve_fit(spec, u, v, start)
        except (RuntimeError, ValueError):
            continue
        rss = float(np.sum((spec.fn(u, *params) - v) ** 2))
        if math.isfinite(rss) and (best is None or rss < best[0]):
            best = (rss, params)
    if best is None:
        raise EmpiricalError(f"the {law} law did not converge on these {t.size} points")
    # Refit in the original units from the rescaled optimum: the covariance comes out in those units.
    start = spec.unscale(list(best[1]), scale_t, scale_y)
    try:
        params, cov = _curve_fit(spec, t, y, start)
    except (RuntimeError, ValueError):
        params, cov = np.asarray(start), np.full((k, k), np.inf)
    # Sums of squares in units of the largest value: norms near 1e-300 square to below the
    # smallest float, and ln(RSS) must not become ln(0) (the data's scale enters as 2n·ln(scale)).
    residuals = (spec.fn(t, *params) - y) / scale_y
    rss_scaled = float(np.sum(residuals**2))
    rss = rss_scaled * scale_y**2
    # A perfect fit would make ln(RSS) = −∞; floor RSS at float rounding of the data instead.
    floor = t.size * np.finfo(float).eps ** 2
    aic = t.size * (math.log(max(rss_scaled, floor) / t.size) + 2 * math.log(scale_y)) + 2 * (k + 1)
    total = float(np.sum(((y - y.mean()) / scale_y) ** 2))
    rho = _lag1_autocorrelation(residuals)
    variances = np.diag(cov) * (1.0 + rho) / (1.0 - rho)
    return Fit(
        law=law,
        params={name: float(p) for name, p in zip(spec.parameters, params)},
        stderr={name: float(math.sqrt(s)) if math.isfinite(s) and s >= 0 else None
                for name, s in zip(spec.parameters, variances)},
        r2=1.0 - rss_scaled / total if total > 0 else None,
        aic=aic,
        rss=rss,
        n=int(t.size),
        span=float(t[-1] - t[0]),
    )


def _choose(fits: Mapping[str, Fit]) -> str:
    """The best law: lowest AIC, unless that law's extra parameter is not significant (module doc)."""
    by_aic = min(fits, key=lambda name: fits[name].aic)
    winner = fits[by_aic]
    if by_aic == "power":
        p, se = winner.params["p"], winner.stderr["p"]
        consistent = [name for name in fits if (exponent := LAWS[name].exponent) is not None
                      and (se is None or abs(p - exponent) <= max(NESTED_TOLERANCE * se,
                                                                    EXPONENT_MARGIN))]
        return min(consistent, key=lambda name: fits[name].aic) if consistent else by_aic
    if by_aic == "equilibrium" and "linear" in fits:
        # κ = 1/τ is the curvature; by the delta method se(κ) = se(τ)/τ², so κ is within
        # NESTED_TOLERANCE standard errors of 0 exactly when τ ≤ NESTED_TOLERANCE·se(τ).
        tau, se = winner.params["tau"], winner.stderr["tau"]
        negligible = winner.span / tau <= CURVATURE_MARGIN
        return "linear" if se is None or tau <= NESTED_TOLERANCE * se or negligible else by_aic
    return by_aic


#: The first fraction of a run's points the laws are fitted on to score their extrapolation: a
#: fraction, so that the cut is ⌊7n/10⌋ in integers (0.7·n in floats is just below a whole number
#: for n = 90, 170, 180, …, and would fit one point fewer).
HEAD_FRACTION = Fraction(7, 10)
#: Laws whose extrapolation error is within this factor of the smallest one extrapolate equally
#: well (the held-out tail is short and autocorrelated: closer scores are not a difference).
EXTRAPOLATION_TOLERANCE = 1.1
#: Fewest held-out points for an extrapolation score.
MIN_HELD_OUT = 3


def extrapolation_scores(
    steps: Sequence[float], values: Sequence[float], laws: Sequence[str] = tuple(LAWS),
    head: Fraction | float = HEAD_FRACTION,
) -> dict[str, float | None]:
    """Each law fitted on the first ``head`` of the points, scored by the RMS error of its
    prediction of the rest (in norm units); ``None`` where the law cannot be fitted on the head or
    the tail has fewer than :data:`MIN_HELD_OUT` points. The head is the first ⌊head·n⌋ points,
    counted exactly (a float ``head`` is read as the decimal it prints as: 0.7 is 7/10).

    >>> t = np.arange(0, 400, 10.0)
    >>> scores = extrapolation_scores(t, 1.0 + 0.5 * np.sqrt(t), ["sqrt", "linear"])
    >>> scores["sqrt"] < 1e-9 < scores["linear"]
    True
    """
    t, y = _check_data(steps, values)
    laws = check_list(laws, "laws", "law names")
    share = Fraction(repr(head)) if isinstance(head, float) else Fraction(head)
    cut = share.numerator * t.size // share.denominator
    scores: dict[str, float | None] = {}
    for law in laws:
        if t.size - cut < MIN_HELD_OUT or cut < len(LAWS[law].parameters) + 1:
            scores[law] = None
            continue
        try:
            fit = fit_law(t[:cut].tolist(), y[:cut].tolist(), law)
        except EmpiricalError:
            scores[law] = None
            continue
        error = fit.predict(t[cut:]) - y[cut:]
        rms = float(np.sqrt(np.mean(error**2)))
        scores[law] = rms if math.isfinite(rms) else None
    return scores


def parameter_intervals(
    fit: Fit, steps: Sequence[float], values: Sequence[float], level: float = 0.95
) -> dict[str, tuple[float, float] | None]:
    """A ``level`` interval per parameter that accounts for autocorrelated residuals.

    The standard errors of :func:`fit_law` are already scaled by (1 + ρ)/(1 − ρ) (ρ: the lag-1
    autocorrelation of the residuals); the quantile is Student's t with n_eff − k degrees of
    freedom, n_eff = n·(1 − ρ)/(1 + ρ) the effective sample size (at least 1 degree of freedom).
    ``None`` where the standard error is undefined.
    """
    from scipy.stats import t as student  # heavy, and needed only here

    t, y = _check_data(steps, values)
    rho = _lag1_autocorrelation(fit.predict(t) - y)
    n_eff = t.size * (1.0 - rho) / (1.0 + rho)
    dof = max(n_eff - len(fit.params), 1.0)
    quantile = float(student.ppf(0.5 + level / 2.0, dof))
    return {name: None if fit.stderr[name] is None else
            (value - quantile * fit.stderr[name], value + quantile * fit.stderr[name])  # type: ignore[operator]
            for name, value in fit.params.items()}


def _by_extrapolation(scores: Mapping[str, float | None], fits: Mapping[str, Fit]) -> str | None:
    """Among the laws that extrapolate within the tolerance of the best, the one with fewest
    parameters (then the smaller error)."""
    scored = {law: s for law, s in scores.items() if s is not None}
    if not scored:
        return None
    floor = min(scored.values())
    near = [law for law, s in scored.items() if s <= EXTRAPOLATION_TOLERANCE * floor + 1e-12]
    return min(near, key=lambda law: (len(fits[law].params), scored[law]))


#: Laws that grow without bound (the power family) against the one that levels off.
FAMILIES = {"linear": "unbounded", "sqrt": "unbounded", "quarter": "unbounded", "power": "unbounded",
            "equilibrium": "bounded"}


def choose_law(fits: Mapping[str, Fit], scores: Mapping[str, float | None]) -> str:
    """The law-choice rule of docs/norms.md.

    Within a family (the unbounded power laws), the AIC rule (:func:`_choose`: lowest AIC,
    simplified while the extra parameter is not significant) decides: their extrapolations differ
    only as their exponents do, which the exponent's interval already judges. Between the
    families (growth that goes on against growth that levels off, the question √t asks) the
    extrapolation decides: the AIC rule's law stands if it extrapolates within the tolerance of the
    best law, else the law that extrapolates best (fewest parameters among those within the
    tolerance) replaces it. Without scores (a short run), the AIC rule's law.
    """
    by_information = _choose(fits)
    by_extrapolation = _by_extrapolation(scores, fits)
    if by_extrapolation is None or FAMILIES.get(by_extrapolation) == FAMILIES.get(by_information):
        return by_information
    floor = min(s for s in scores.values() if s is not None)
    score = scores.get(by_information)
    if score is not None and score <= EXTRAPOLATION_TOLERANCE * floor + 1e-12:
        return by_information
    return by_extrapolation


def fit_growth(
    steps: Sequence[float], values: Sequence[float], laws: Sequence[str] = tuple(LAWS)
) -> dict[str, Any]:
    """Fit every law in ``laws`` and choose the best (see the module docstring for the rule).

    Returns:
        ``{"fits": [Fit.to_dict(), ...], "best": law, "best_by_aic": law, "best_by_information":
        law, "best_by_extrapolation": law | None, "n": points}``; each fit also has
        ``extrapolation`` (:func:`extrapolation_scores`) and ``interval``
        (:func:`parameter_intervals`, 95%). ``best`` follows :func:`choose_law`.

    >>> import numpy as np
    >>> t = np.arange(0, 200, 10)
    >>> result = fit_growth(t, 5.0 + 0.3 * np.sqrt(t) + 0.01 * np.cos(t))
    >>> result["best"]
    'sqrt'
    """
    laws = check_list(laws, "laws", "law names")  # a bare 'linear' would be six one-letter laws
    if not laws:
        raise EmpiricalError("fit_growth expected at least one law, got none")
    fits = {law: fit_law(steps, values, law) for law in laws}
    scores = extrapolation_scores(steps, values, laws)
    documents = []
    for law, fit in fits.items():
        intervals = parameter_intervals(fit, steps, values)
        documents.append(fit.to_dict() | {
            "extrapolation": scores[law],
            "interval": {name: None if i is None else list(i) for name, i in intervals.items()}})
    return {
        "fits": documents,
        "best": choose_law(fits, scores),
        "best_by_aic": min(fits, key=lambda name: fits[name].aic),
        "best_by_information": _choose(fits),
        "best_by_extrapolation": _by_extrapolation(scores, fits),
        "n": len(steps),
    }


def layer_growth(
    steps: Sequence[float], layer_norms: Mapping[str, Sequence[float]], law: str
) -> list[dict[str, Any]]:
    """Which layers grow fastest: each layer's relative growth, and its norm fitted with ``law``.

    ``relative_growth`` is the measured norm at the last step over the one at the first, minus one
    (measured, not fitted: a law that fits a layer badly must not distort the ranking). The fit
    (the law chosen for the total norm, so shapes are comparable across layers) says how well the
    total's law describes each layer (paper Figure 2: layers grow at about the same rate, up to
    a factor).

    Returns:
        One dict per layer: ``layer``, ``start``, ``end``, ``relative_growth`` (``None`` for a zero
        start), ``law``, ``params``, ``stderr``, ``r2``; largest relative growth first.
    """
    rows = []
    for layer, norms in layer_norms.items():
        fit = fit_law(steps, norms, law)
        start, end = float(norms[0]), float(norms[-1])
        rows.append({"layer": layer, "start": start, "end": end,
                     "relative_growth": end / start - 1.0 if start > 0 else None,
                     "law": law, "params": fit.params, "stderr": fit.stderr, "r2": fit.r2})
    return sorted(rows, key=lambda row: -math.inf if row["relative_growth"] is None
                  else row["relative_growth"], reverse=True)


def fit_norm_growth(
    steps: Sequence[float], norms: Sequence[float],
    layer_norms: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Fit every law that the number of points allows, choose the best, and rank the layers.

    The one growth document of ``normsat norms``, ``normsat train`` and :meth:`NormTracker.plot
    <empirical.training.norms.NormTracker.plot>`. A law with k parameters needs k + 1 points (one degree of
    freedom for the noise); laws with fewer are listed under ``skipped`` with the reason, never
    dropped silently.

    Returns:
        ``{"fits": [Fit.to_dict(), ...], "best": law | None, "best_by_aic": law | None,
        "n": points, "skipped": [{"law", "reason"}, ...], "layer_growth": [...]}``
        (``layer_growth``: :func:`layer_growth` under the best law; empty without ``layer_norms``
        or without a fit).

    >>> growth = fit_norm_growth([0, 1, 4], [1.0, 3.0, 5.0])
    >>> growth["best"], [s["law"] for s in growth["skipped"]]
    ('sqrt', ['power', 'equilibrium'])
    >>> growth["skipped"][0]["reason"]
    '3 parameters need at least 4 points, got 3'
    """
    fitted, skipped = [], []
    for law, spec in LAWS.items():
        k = len(spec.parameters)
        if len(steps) > k:
            fitted.append(law)
        else:
            skipped.append({"law": law,
                            "reason": f"{k} parameters need at least {k + 1} points, got {len(steps)}"})
    growth: dict[str, Any] = (fit_growth(steps, norms, fitted) if fitted else
                              {"fits": [], "best": None, "best_by_aic": None, "n": len(steps)})
    growth["skipped"] = skipped
    growth["layer_growth"] = (layer_growth(steps, layer_norms, growth["best"])
                              if layer_norms and growth["best"] else [])
    return growth


def best_fit(growth: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fit of a growth document's ``best`` law (from :func:`fit_growth`); ``None`` without one.

    >>> best_fit({"best": "sqrt", "fits": [{"law": "linear"}, {"law": "sqrt", "r2": 0.99}]})
    {'law': 'sqrt', 'r2': 0.99}
    >>> best_fit({"best": None, "fits": []}) is None
    True
    """
    return next((dict(fit) for fit in growth["fits"] if fit["law"] == growth["best"]), None)



def growth_curve(growth: Mapping[str, Any], first: float, last: float, points: int = 200
                 ) -> tuple[str, list[float], list[float]] | None:
    """``(label, steps, norms)`` of the best law of a growth document from ``first`` to ``last``
    (the ``fitted`` curve of :func:`empirical.training.norms.plot_records`; pass the first and last
    fitted steps, so that the curve covers the fitted range and no more); ``None`` without a fit.
    The label names the law, its R² and what it was fitted to.

    >>> label, steps, norms = growth_curve(
    ...     {"best": "sqrt", "n": 3, "fits": [{"law": "sqrt", "formula": "a·√t + b",
    ...                                       "params": {"a": 2.0, "b": 1.0}, "r2": 0.98}]}, 1, 9, 3)
    >>> label, steps, [round(norm, 6) for norm in norms]
    ('sqrt fit, a·√t + b\\nto all 3 records, steps 1–9 (R² 0.9800)', [1.0, 5.0, 9.0], [3.0, 5.472136, 7.0])
    """
    best = best_fit(growth)
    if best is None:
        return None
    steps = np.linspace(first, last, points)
    values = LAWS[best["law"]].fn(steps, *best["params"].values())
    r2 = "" if best["r2"] is None else f" (R² {best['r2']:.4f})"
    fitted_to = f"all {growth['n']} records" if "n" in growth else "the records"
    # two lines of about equal length: a legend as wide as the panel would cover the curve
    return (f"{best['law']} fit, {best['formula']}\nto {fitted_to}, steps {first:g}–{last:g}{r2}",
            steps.tolist(), values.tolist())


def skipped_lines(growth: Mapping[str, Any]) -> list[str]:
    """One line per law a growth document (:func:`fit_norm_growth`) did not fit, with the reason."""
    return [f"{row['law']} law not fitted: {row['reason']}" for row in growth.get("skipped", [])]
