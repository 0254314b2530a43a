"""How fast sigmoid, tanh and softmax reach their saturated limits: exact errors and certified bounds.

Pure mathematics, no models. Three kinds of results:

* **High-precision errors** of the scaled functions against their limits (:func:`sigmoid_error`,
  :func:`tanh_error`, :func:`softmax_error`), evaluated with mpmath at any number of digits up to
  :data:`MAX_DPS`, always in a local precision context (``mpmath.workdps``), never by setting the
  global ``mp.dps``.
* **The paper's bounds** (Lemmas 6–8 of its appendix) with their hidden constants computed, and an
  interval-arithmetic certificate (``mpmath.iv``) that each bound holds (:func:`certify_bound`).
* **Certified saturation scales** (:func:`scale_to_saturate`, :func:`scale_to_saturate_map`) and
  the input magnitudes from which each floating-point format rounds the functions to their limits
  exactly (:func:`format_thresholds`).

The errors, with u the scaled distance to the decision boundary (u = c·|x| for sigmoid and tanh,
u = c·δ for softmax with margin δ between the maximal scores and the next one):

* |σ(cx) − step(x)| = 1/(1 + eᵘ) ≤ e^(−u)  (Lemma 6, eq. 32–33: the Θ hides the constant 1);
* |tanh(cx) − sign(x)| = 2/(e^(2u) + 1) ≤ 2·e^(−2u)  (Lemma 8, eq. 54: constant 2, rate 2);
* max_i |softmax(cx)_i − hardmax(x)_i| ≤ K·e^(−u), K = max(1/t, (n − t)/t²) with t tied maximal
  positions among n allowed ones (Lemma 7: the ``d`` of eq. 43 is log((n − t)/t)).

Lemma 7's step (41) bounds the denominator with min(x); the bound only holds with the
*second-largest* score (the margin δ): for x = (0, −ε, −10) the maximal weight is far below the
one (41) claims. :func:`softmax_bound` uses the margin.

>>> math.isclose(sigmoid_error(2.0, c=3.0), 1 / (1 + math.exp(6.0)), rel_tol=1e-15)
True
>>> lo, hi = scale_to_saturate([0.0, -1.0], eps=0.01)
>>> lo <= math.log(99) <= hi and hi / lo - 1 <= 1e-3
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import mpmath
import numpy as np
import scipy.stats
import torch
from mpmath import iv

from saturated.errors import SaturationError
from saturated.functional import tie_set
from saturated.validation import check_score_array

__all__ = [
    "MAX_DPS",
    "Certificate",
    "FormatThreshold",
    "MapScales",
    "RateFit",
    "certified_row_scales",
    "certify_bound",
    "format_thresholds",
    "interval_bits",
    "scale_bounds_of_rows",
    "scale_to_saturate",
    "scale_to_saturate_map",
    "scaling_rate",
    "sigmoid_bound",
    "sigmoid_error",
    "softmax_bound",
    "softmax_constant",
    "softmax_error",
    "softmax_log_error",
    "tanh_bound",
    "tanh_error",
]

MAX_DPS = 10_000
"""The most decimal digits any function here evaluates with (mpmath slows down quadratically)."""

Number: TypeAlias = Any  # a float, an int or an mpmath.mpf (mpmath has no type hints)
Interval: TypeAlias = Any  # an mpmath.iv.mpf


def _digits(dps: int) -> int:
    if not isinstance(dps, int) or isinstance(dps, bool) or not 1 <= dps <= MAX_DPS:
        raise SaturationError(f"expected a precision of 1 to {MAX_DPS} decimal digits, got {dps!r}")
    return dps


@contextmanager
def interval_bits(bits: int) -> Iterator[None]:
    """A local working precision for ``mpmath.iv`` (it has no ``workprec``): restored on exit."""
    old = iv.prec
    iv.prec = bits
    try:
        yield
    finally:
        iv.prec = old


def _scale(c: Number) -> mpmath.mpf:
    value = mpmath.mpf(c)
    if not (mpmath.isfinite(value) and value >= 0):
        raise SaturationError(f"expected a finite scale c ≥ 0, got {c!r}")
    return value


def _nonzero(x: Number, name: str) -> mpmath.mpf:
    value = mpmath.mpf(x)
    if not mpmath.isfinite(value):
        raise SaturationError(f"expected a finite input to {name}, got {x!r}")
    if value == 0:
        raise SaturationError(f"{name} is not determined at 0 (its limit is undefined there)")
    return value


# --- high-precision errors -------------------------------------------------------------------


def sigmoid_error(x: Number, c: Number = 1, dps: int = 50) -> mpmath.mpf:
    """|σ(c·x) − step(x)| to ``dps`` significant digits.

    Evaluated as σ(−c·|x|) = 1/(1 + e^(c|x|)), the same number without the cancellation of
    1 − σ(c|x|), so it is exact to ``dps`` digits at any magnitude.

    >>> mpmath.nstr(sigmoid_error(1.0, c=1000, dps=20), 5)
    '5.076e-435'
    """
    with mpmath.workdps(_digits(dps)):
        u = _scale(c) * abs(_nonzero(x, "step"))
        return 1 / (1 + mpmath.exp(u))


def tanh_error(x: Number, c: Number = 1, dps: int = 50) -> mpmath.mpf:
    """|tanh(c·x) − sign(x)| = 2/(e^(2c|x|) + 1) to ``dps`` significant digits.

    >>> mpmath.nstr(tanh_error(-0.5, c=2, dps=20), 8)
    '0.23840584'
    """
    with mpmath.workdps(_digits(dps)):
        u = _scale(c) * abs(_nonzero(x, "sign"))
        return 2 / (mpmath.exp(2 * u) + 1)


@dataclass(frozen=True)
class _Row:
    """One softmax row as the limit sees it: t tied maximal positions at score ``top``, and the
    other allowed scores in descending order (so their gaps m − x_k ascend)."""

    t: int
    top: float
    losers: np.ndarray  # float64, descending

    @property
    def gaps(self) -> np.ndarray:
        """The gaps m − x_k in float64 (each within a factor 1 ± u of the true gap)."""
        return self.top - self.losers

    def exact_gaps(self) -> list[mpmath.mpf]:
        """The gaps at the working precision (exact differences of the two doubles, rounded once)."""
        return [mpmath.mpf(self.top) - mpmath.mpf(float(x)) for x in self.losers]

    def gap_interval(self, k: int) -> Interval:
        """An ``mpmath.iv`` enclosure of the k-th gap."""
        return iv.mpf(self.top) - iv.mpf(float(self.losers[k]))

    @property
    def n(self) -> int:
        return self.t + len(self.losers)

    @property
    def margin(self) -> float:
        return float(self.gaps[0]) if len(self.losers) else math.inf


def _row(scores: Sequence[float] | np.ndarray | torch.Tensor, rtol: float | None = None) -> _Row:
    """Validate one row of scores (−∞ masks a position) and split it by the project's tie rule."""
    row = check_score_array(scores)
    if row.dim() != 1 or row.numel() == 0:
        raise SaturationError(f"expected a non-empty 1-d row of scores, got shape {tuple(row.shape)}")
    return _rows(row[None], rtol)[0]


def _rows(scores: torch.Tensor, rtol: float | None) -> list[_Row]:
    """:func:`_row` for every row of a 2-d float64 tensor (one tie-set pass for all of them)."""
    if bool(torch.isnan(scores).any()) or bool((scores == math.inf).any()):
        bad = torch.nonzero(torch.isnan(scores) | (scores == math.inf))[0].tolist()
        raise SaturationError(f"expected finite scores or −∞ (masked), got {scores[tuple(bad)].item()} "
                              f"at {bad}")
    allowed = scores > -math.inf
    empty = ~allowed.any(-1)
    if bool(empty.any()):
        raise SaturationError(f"row {int(torch.nonzero(empty)[0])} masks every position; expected at "
                              "least one allowed score per row")
    tied = tie_set(scores, -1, allowed, rtol)
    top = torch.where(allowed, scores, -math.inf).amax(-1)
    # Scores tied within the tolerance are taken as equal to the maximum (the project's tie rule).
    rows = []
    for i in range(scores.shape[0]):
        losers = allowed[i] & ~tied[i]
        row = _Row(int(tied[i].sum()), float(top[i]), -np.sort(-scores[i][losers].numpy()))
        if len(row.losers) and not math.isfinite(row.top - float(row.losers[-1])):
            # A gap past float64's range would read as no loser at all, and the scale as 0.
            raise SaturationError(f"row {i} holds scores {row.top} and {float(row.losers[-1])}, whose "
                                  "gap exceeds the float64 range; rescale the scores")
        rows.append(row)
    return rows


def softmax_error(scores: Sequence[float] | np.ndarray | torch.Tensor, c: Number = 1, dps: int = 50,
                  rtol: float | None = None) -> mpmath.mpf:
    """max_i |softmax(c·x)_i − hardmax(x)_i| to ``dps`` significant digits.

    hardmax follows the project's tie rule (:func:`saturated.functional.tie_set`, tolerance
    ``rtol``): scores within the tolerance of the maximum are taken as equal to it. −∞ masks a
    position. With t tied positions and R = Σ_k e^(−c·a_k) over the others (gaps a_k), the winners'
    error is R/(t(t + R)) and loser k's is e^(−c·a_k)/(t + R), written so that nothing cancels.

    >>> mpmath.nstr(softmax_error([1.0, 1.0, 0.0], c=2, dps=15), 10)
    '0.06337893833'
    """
    row = _row(scores, rtol)
    with mpmath.workdps(_digits(dps)):
        c_ = _scale(c)
        if not len(row.losers):
            return mpmath.mpf(0)
        terms = [mpmath.exp(-c_ * a) for a in row.exact_gaps()]
        total = mpmath.fsum(terms)
        return max(total / (row.t * (row.t + total)), terms[0] / (row.t + total))


# --- the paper's bounds and their certificates -----------------------------------------------


def sigmoid_bound(x: Number, c: Number = 1, dps: int = 50) -> mpmath.mpf:
    """Lemma 6 with its constant: |σ(c·x) − step(x)| ≤ e^(−c|x|).

    >>> sigmoid_bound(2.0, c=3.0) >= sigmoid_error(2.0, c=3.0)
    True
    """
    with mpmath.workdps(_digits(dps)):
        return mpmath.exp(-_scale(c) * abs(_nonzero(x, "step")))


def tanh_bound(x: Number, c: Number = 1, dps: int = 50) -> mpmath.mpf:
    """Lemma 8 with its constants: |tanh(c·x) − sign(x)| ≤ 2·e^(−2c|x|)."""
    with mpmath.workdps(_digits(dps)):
        return 2 * mpmath.exp(-2 * _scale(c) * abs(_nonzero(x, "sign")))


def softmax_constant(n: int, t: int = 1) -> mpmath.mpf:
    """The constant K of Lemma 7's bound for n allowed positions, t of them tied maximal.

    K = max(1/t, (n − t)/t²): the winners' error R/(t(t + R)) ≤ (n − t)e^(−cδ)/t² and each
    loser's e^(−c·a_k)/(t + R) ≤ e^(−cδ)/t.

    >>> softmax_constant(5), softmax_constant(5, t=2)
    (mpf('4.0'), mpf('0.75'))
    """
    if not (isinstance(n, int) and isinstance(t, int) and 1 <= t <= n):
        raise SaturationError(f"expected 1 ≤ t ≤ n tied and allowed positions, got n={n!r}, t={t!r}")
    return max(mpmath.mpf(1) / t, mpmath.mpf(n - t) / t**2)


def softmax_bound(scores: Sequence[float] | np.ndarray | torch.Tensor, c: Number = 1, dps: int = 50,
                  rtol: float | None = None) -> mpmath.mpf:
    """Lemma 7 with its constant: max_i |softmax(c·x)_i − hardmax(x)_i| ≤ K·e^(−c·δ).

    δ is the margin between the maximal scores and the next allowed one (the tie rule as in
    :func:`softmax_error`); K is :func:`softmax_constant`. A row whose allowed positions all tie
    has error 0, and so has its bound.

    >>> softmax_bound([0.0, -1.0, -1.0], c=1) >= softmax_error([0.0, -1.0, -1.0], c=1)
    True
    """
    row = _row(scores, rtol)
    with mpmath.workdps(_digits(dps)):
        if not len(row.losers):
            return mpmath.mpf(0)
        return softmax_constant(row.n, row.t) * mpmath.exp(-_scale(c) * row.exact_gaps()[0])


@dataclass(frozen=True)
class Certificate:
    """An interval-arithmetic check that a bound holds for every u = c·|x| (or c·δ) ≥ 0.

    Attributes:
        function: ``"sigmoid"``, ``"tanh"`` or ``"softmax"``.
        n, t: positions and tied maximal positions (softmax only; 2 and 1 otherwise).
        grid: the grid points u_k checked, from 0 up.
        holds: whether ρ(u_k) = worst error/bound ≤ 1 at every grid point, and its limit ρ(∞) ≤ 1.
        increasing: whether the enclosures of ρ(u_k) never decrease along the grid (the
            monotonicity that carries the check between grid points, tested on the same grid).
        worst: the largest upper end of ρ's enclosures (the bound's tightness: 1 is tight).
    """

    function: str
    n: int
    t: int
    grid: tuple[float, ...]
    holds: bool
    increasing: bool
    worst: float


def _worst_ratio(function: str, n: int, t: int, scale: float = 1.0) -> Callable[[Any], Any]:
    """ρ(u) = sup over inputs of the error at u, divided by the bound at u; works on iv and mp.

    Worst errors: sigmoid 1/(1 + eᵘ), tanh 2/(e^(2u) + 1), softmax the larger of the winners'
    r/(t(t + r)) with r = (n − t)e^(−u) (every loser at the margin) and the top loser's
    e^(−u)/(t + e^(−u)) (every other loser far away); both are attained, so they are the sup.
    ``scale`` multiplies the bound (below 1, a deliberately wrong bound the check must reject).
    """
    def exp(u: Interval) -> Interval:
        return iv.exp(u) if isinstance(u, iv.mpf) else mpmath.exp(u)

    # Each ratio is written as a product of factors ≤ 1 (1/(1 + positive), integer ratios), so
    # that rounding cannot push the enclosure of a tight bound above 1.
    def sigmoid(u: Interval) -> Interval:
        return 1 / (1 + exp(-u)) / scale    # (1/(1 + eᵘ)) / e^(−u)

    def tanh(u: Interval) -> Interval:
        return 1 / (1 + exp(-2 * u)) / scale    # (2/(e^(2u) + 1)) / (2e^(−2u))

    def softmax(u: Interval) -> Interval:
        e = exp(-u)
        one = iv.mpf(1) if isinstance(u, iv.mpf) else mpmath.mpf(1)
        big = max(t, n - t)  # K = big/t²
        winners = one * (n - t) / big / (1 + (n - t) * e / t) / scale  # r/(t(t + r)) / (K e^(−u))
        loser = one * t / big / (1 + e / t) / scale  # e^(−u)/(t + e^(−u)) / (K e^(−u))
        if isinstance(u, iv.mpf):  # the max of two intervals, as an interval
            return iv.mpf([min(winners.a, loser.a), max(winners.b, loser.b)])
        return max(winners, loser)

    return {"sigmoid": sigmoid, "tanh": tanh, "softmax": softmax}[function]


def certify_bound(function: str, *, n: int = 2, t: int = 1, upto: float = 60.0, points: int = 400,
                  bound_scale: float = 1.0) -> Certificate:
    """Certify with interval arithmetic that the paper's bound holds for every input.

    The argument. Write the worst error at u (the sup over inputs, see :func:`_worst_ratio`) as
    ρ(u)·B(u) with B the bound. For each function ρ is non-decreasing in u: sigmoid
    ρ = eᵘ/(1 + eᵘ); tanh ρ = e^(2u)/(e^(2u) + 1); softmax ρ = max((n − t)/(K t (t + (n − t)e^(−u))),
    1/(K(t + e^(−u)))), each increasing as e^(−u) falls. So ρ ≤ ρ(u_{k+1}) on every cell
    [u_k, u_{k+1}] of the grid and ρ ≤ ρ(∞) beyond its end: the bound holds everywhere if
    ρ(u_k) ≤ 1 at every grid point and ρ(∞) ≤ 1. Both are checked on interval enclosures
    (``mpmath.iv``, 64 bits); the monotonicity itself is checked on the same enclosures.

    Args:
        function: ``"sigmoid"``, ``"tanh"`` or ``"softmax"``.
        n: allowed positions (softmax).
        t: tied maximal positions (softmax).
        upto: the grid's last point (u from 0 to ``upto``).
        points: grid points.
        bound_scale: multiplies the bound; below 1 the certificate must fail (a test of the test).

    >>> certify_bound("softmax", n=8, t=2).holds, certify_bound("sigmoid", bound_scale=0.9).holds
    (True, False)
    """
    if function not in ("sigmoid", "tanh", "softmax"):
        raise SaturationError(f"expected 'sigmoid', 'tanh' or 'softmax', got {function!r}")
    softmax_constant(n, t)
    if n == t:
        raise SaturationError("with every position tied the error is 0; there is nothing to bound")
    if points < 2 or not upto > 0:
        raise SaturationError(f"expected at least 2 points up to a positive u, got {points}, {upto}")
    rho = _worst_ratio(function, n, t, bound_scale)
    grid = tuple(upto * k / (points - 1) for k in range(points))
    with interval_bits(64):
        enclosures = [rho(iv.mpf(u)) for u in grid]
        # ρ(∞): e^(−u) = 0
        limit = rho(iv.mpf(mpmath.inf)) if function == "softmax" else 1 / iv.mpf(bound_scale)
        holds = all(r.b <= 1 for r in enclosures) and limit.b <= 1
        increasing = all(b.b >= a.a for a, b in itertools.pairwise(enclosures))
        worst = float(max([r.b for r in enclosures] + [limit.b], key=float))
    return Certificate(function, n, t, grid, bool(holds), bool(increasing), worst)


# --- certified saturation scales --------------------------------------------------------------


@dataclass(frozen=True)
class MapScales:
    """Certified saturation scales of every row of an attention map.

    Attributes:
        rows: one (lo, hi) per row containing that row's scale (see :func:`scale_to_saturate`).
        maximum: (lo, hi) containing the largest of them: the scale from which the whole map is
            within eps of hard attention.
    """

    rows: tuple[tuple[float, float], ...]
    maximum: tuple[float, float]


def _check_eps(eps: float, rel_width: float) -> None:
    if not (isinstance(eps, (int, float)) and 0 < eps < 1):
        raise SaturationError(f"expected eps in (0, 1), got {eps!r}")
    if not (isinstance(rel_width, (int, float)) and 1e-12 <= rel_width <= 1):
        raise SaturationError(f"expected a relative width in [1e-12, 1], got {rel_width!r}")


def _half_width(rel_width: float) -> float:
    """h with (1 + h)/(1 − h) − 1 = 0.9·rel_width: the interval c·(1 ∓ h) around an estimate then
    has hi/lo − 1 within the contract for every allowed width, with room for float rounding."""
    target = 0.9 * rel_width
    return target / (2 + target)


_CUT = 30.0  # terms below e^(−30) of the top loser are enclosed in bulk, not one by one


class _Enclosure:
    """Interval enclosures of R(c) = Σ_k e^(−c·a_k), of Σ_k a_k e^(−c·a_k) and of the top loser's
    e^(−c·δ), for one row at one interval of c; terms more than e^(−30) below the top loser are
    enclosed together by [0, count·e^(−c·a_cut)]."""

    def __init__(self, row: _Row, c: Interval) -> None:
        gaps = row.gaps
        lo_c = float(iv.mpf(c).a)
        with np.errstate(over="ignore"):  # a cut past the float range keeps every term
            keep = int(np.searchsorted(gaps, gaps[0] + _CUT / lo_c, side="right")) if lo_c > 0 else len(gaps)
        total, moment = iv.mpf(0), iv.mpf(0)
        for k in range(keep):
            a = row.gap_interval(k)
            term = iv.exp(-c * a)
            total += term
            moment += a * term
        rest = len(gaps) - keep
        if rest:  # every later gap is at least this one (the scores are sorted)
            cut = row.gap_interval(keep)
            tail = iv.exp(-c * cut)
            total += iv.mpf([0, (rest * tail).b])
            # a·e^(−c·a) falls for a ≥ 1/c, which holds here (a ≥ δ + 30/c)
            moment += iv.mpf([0, (rest * cut * tail).b])
        self.total, self.moment = total, moment
        self.margin = row.gap_interval(0)
        self.top = iv.exp(-c * self.margin)
        self.t = row.t

    def winners(self) -> Interval:
        """R/(t(t + R)), increasing in R (written with R once so the enclosure stays tight)."""
        return 1 / (self.t * (self.t / self.total + 1))

    def loser(self) -> Interval:
        """e^(−cδ)/(t + R) (R includes the top loser itself)."""
        return self.top / (self.t + self.total)

    def slope(self) -> Interval:
        """d/dc log(top loser's error) = −δ + Σ a_k e^(−c·a_k)/(t + R): concave log, falling slope."""
        return -self.margin + self.moment / (self.t + self.total)


@dataclass(frozen=True)
class _Padded:
    """Rows side by side: gaps (rows × widest, +∞ padding), tie counts and margins, float64."""

    gaps: np.ndarray
    t: np.ndarray
    margin: np.ndarray

    @classmethod
    def of(cls, rows: list[_Row]) -> _Padded:
        gaps = np.full((len(rows), max(max(len(r.losers) for r in rows), 1)), np.inf)
        for i, r in enumerate(rows):
            gaps[i, : len(r.losers)] = r.gaps
        return cls(gaps, np.array([float(r.t) for r in rows]), gaps[:, 0].copy())


def _float_scales(rows: _Padded, eps: float) -> np.ndarray:
    """Each row's scale in float64, by bisection (vectorized over rows); the certificate follows.

    The scale is c* = max(c_w, b): c_w where the winners' (decreasing) error meets eps, b the right
    end of the set where the top loser's log-concave error exceeds eps (0 if it never does; always
    0 with one winner, whose error is then the largest). With S = Σ_k e^(−c(a_k − δ)) ≥ 1 and
    R = e^(−cδ)·S nothing overflows.
    """
    t, margin = rows.t, rows.margin
    n = np.isfinite(rows.gaps).sum(-1)
    k = np.maximum(1 / t, n / t**2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        above = rows.gaps - margin[:, None]  # NaN in rows without losers, whose scale is 0
        upper = np.nan_to_num(np.maximum(np.log(k / eps), 0) / margin + 1.0, nan=0.0, posinf=0.0)
    log_eps, log_t = math.log(eps), np.log(t)

    def log_r(c: np.ndarray) -> np.ndarray:
        return -c * margin + np.log(np.exp(-c[:, None] * above).sum(-1))

    def log_winners(c: np.ndarray) -> np.ndarray:
        lr = log_r(c)
        return lr - log_t - np.logaddexp(log_t, lr)

    def bisect(above: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The point in [lo, hi] where ``above`` turns False (True before it, False after)."""
        for _ in range(56):
            mid = (lo + hi) / 2
            go = above(mid)
            lo, hi = np.where(go, mid, lo), np.where(go, hi, mid)
        return hi

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        scales = bisect(lambda c: log_winners(c) > log_eps, np.zeros_like(upper), upper)
        tied = np.nonzero((t > 1) & (n > 0))[0]  # n counts the losers
        if len(tied):
            sub = _Padded(rows.gaps[tied], t[tied], margin[tied])
            found = _float_scales_of_loser(sub, upper[tied], eps)
            scales[tied] = np.maximum(scales[tied], found)
    return np.where(np.isfinite(margin), scales, 0.0)


def _float_scales_of_loser(rows: _Padded, upper: np.ndarray, eps: float) -> np.ndarray:
    """b for rows with tied winners: the right end of {c: top loser's error > eps}, or 0."""
    margin, log_t = rows.margin, np.log(rows.t)
    gaps = np.where(np.isfinite(rows.gaps), rows.gaps, 0.0)
    above = rows.gaps - margin[:, None]

    def log_denominator(c: np.ndarray) -> np.ndarray:
        return np.logaddexp(log_t, -c * margin + np.log(np.exp(-c[:, None] * above).sum(-1)))

    def rising(c: np.ndarray) -> np.ndarray:
        weights = np.exp(-c[:, None] * rows.gaps - log_denominator(c)[:, None])
        return -margin + (weights * gaps).sum(-1) > 0

    def log_loser(c: np.ndarray) -> np.ndarray:
        return -c * margin - log_denominator(c)

    lo, hi = np.zeros_like(upper), upper.copy()
    for _ in range(56):  # the peak: where the slope of the concave log-error turns negative
        mid = (lo + hi) / 2
        go = rising(mid)
        lo, hi = np.where(go, mid, lo), np.where(go, hi, mid)
    peak = hi
    exceeds = log_loser(peak) > math.log(eps)
    lo, hi = peak.copy(), upper.copy()
    for _ in range(56):
        mid = (lo + hi) / 2
        go = log_loser(mid) > math.log(eps)
        lo, hi = np.where(go, mid, lo), np.where(go, hi, mid)
    return np.where(exceeds, hi, 0.0)


_U = 2.0**-53  # unit roundoff of float64: every +, −, ×, / is exact to a factor 1 ± u (IEEE 754)
_LN2 = math.log(2)
_INVERSE_FACTORIALS = [1 / math.factorial(j) for j in range(18)]


def _gamma(m: int | np.ndarray) -> np.ndarray:
    """γ_m = m·u/(1 − m·u), the relative error of m rounded operations (Higham, Lemma 3.1)."""
    return np.asarray(m * _U / (1 - m * _U))


def _exp_neg(c: np.ndarray, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Certified enclosures [low, high] of e^(−c·a) for float64 c ≥ 0 and gaps a (a the float64
    rounding of the true gap, within a factor 1 ± u), using only IEEE-754 arithmetic.

    e^(−y) = 2^(−k)/P(r) with y = c·a, k = ⌊y/ln 2⌋, r = y − k·ln 2 ∈ [0, ln 2] and P the degree-17
    Taylor polynomial of e^r. Error budget, relative: y carries ≤ 2.01u·y (the gap's rounding and
    the product); the reduction ≤ 2.01u·y + 1.01u (ln 2's rounding, k·ln 2, the difference); P's
    truncation ≤ 0.7^18/18! < 10⁻¹⁸; Horner with positive terms ≤ γ₃₆; the division u. A change
    Δ in the exponent changes e^(−y) by a factor within 1 ± 1.01Δ for Δ < 10⁻³. Where 2^(−k)
    would fall below the normal range (k > 1000) the enclosure is [0, 2^(−999)].
    """
    with np.errstate(invalid="ignore", over="ignore"):
        y = c[:, None] * gaps
        k = np.floor(y / _LN2)
        r = np.clip(y - k * _LN2, 0.0, None)  # a rounding slightly below 0 is within the budget
        poly = np.full_like(r, _INVERSE_FACTORIALS[-1])
        for coefficient in reversed(_INVERSE_FACTORIALS[:-1]):
            poly = poly * r + coefficient
        value = np.ldexp(1 / poly, -np.minimum(k, 1100).astype(np.int64))
        error = 1.01 * (4.02 * _U * y + 1.01 * _U) + _gamma(36) + _U + 1e-18
        tiny = ~(k <= 1000) | (error > 1e-3)  # also catches y = ∞ (padding) and NaN
        low = np.where(tiny, 0.0, value * (1 - 2 * error))
        high = np.where(tiny, np.where(np.isinf(y), 0.0, 2.0**-999), value * (1 + 2 * error))
    return low, high


@dataclass(frozen=True)
class _Box:
    """Certified float64 enclosures, per row at one scale each: R, the moment Σ a_k e^(−c·a_k), the
    top loser's e^(−c·δ), and the error terms built from them (outward by a few units u)."""

    r: tuple[np.ndarray, np.ndarray]
    moment: tuple[np.ndarray, np.ndarray]
    top: tuple[np.ndarray, np.ndarray]
    t: np.ndarray
    margin: np.ndarray

    @classmethod
    def at(cls, rows: _Padded, c: np.ndarray) -> _Box:
        low, high = _exp_neg(c, rows.gaps)
        finite = np.where(np.isfinite(rows.gaps), rows.gaps, 0.0)
        grow = 1 + _gamma(rows.gaps.shape[1] + 4)  # the sums and the products before them
        r = (low.sum(-1) / grow, high.sum(-1) * grow)
        moment = ((low * finite).sum(-1) * (1 - 2 * _U) / grow, (high * finite).sum(-1) * (1 + 2 * _U) * grow)
        return cls(r, moment, (low[:, 0], high[:, 0]), rows.t, rows.margin)

    def winners(self) -> tuple[np.ndarray, np.ndarray]:
        """R/(t(t + R)), increasing in R."""
        lo, hi = self.r
        return (lo / (self.t * (self.t + lo)) * (1 - 4 * _U), hi / (self.t * (self.t + hi)) * (1 + 4 * _U))

    def loser(self) -> tuple[np.ndarray, np.ndarray]:
        """e^(−cδ)/(t + R)."""
        return (self.top[0] / (self.t + self.r[1]) * (1 - 3 * _U),
                self.top[1] / (self.t + self.r[0]) * (1 + 3 * _U))

    def slope_high(self) -> np.ndarray:
        """An upper bound of −δ + M/(t + R) (δ itself within a factor 1 ± u)."""
        share = self.moment[1] / (self.t + self.r[0]) * (1 + 3 * _U)
        return -self.margin + share + 4 * _U * (self.margin + share)


def _certify_rows(rows: _Padded, estimates: np.ndarray, eps: float,
                  rel_width: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, certified) per row from float64 enclosures: error > eps at lo, ≤ eps from hi on."""
    half = _half_width(rel_width)
    lo, hi = estimates * (1 - half), estimates * (1 + half)
    with np.errstate(invalid="ignore"):  # rows without losers give NaN here and are set apart
        at_lo, at_hi = _Box.at(rows, lo), _Box.at(rows, hi)
        above = (at_lo.winners()[0] > eps) | (at_lo.loser()[0] > eps)
        falling = (rows.t == 1) | ((at_hi.slope_high() <= 0) & (at_hi.loser()[1] <= eps))
        within = (at_hi.winners()[1] <= eps) & falling
    done = ~np.isfinite(rows.margin)  # nothing to lose: the error is 0
    certified = done | ((lo > 0) & above & within)
    return np.where(done, 0.0, lo), np.where(done, 0.0, hi), certified


def _above_eps(row: _Row, c: float, eps: Interval) -> bool:
    """Certified: the error at c exceeds eps."""
    box = _Enclosure(row, iv.mpf(c))
    return bool(box.winners().a > eps.b or box.loser().a > eps.b)


def _within_from(row: _Row, c: float, eps: Interval) -> bool:
    """Certified: the error is at most eps at c and at every larger scale."""
    box = _Enclosure(row, iv.mpf(c))
    if box.winners().b > eps.a:
        return False  # the winners' error falls with c: below eps at c means below from c on
    if row.t == 1:  # R ≥ e^(−cδ) makes the winner's error R/(1 + R) the largest
        return True
    if box.slope().b <= 0:  # the loser's log-error is concave: falling at c means falling after it
        return bool(box.loser().b <= eps.a)
    return _peak_below(row, c, eps)


def _peak_below(row: _Row, c: float, eps: Interval) -> bool:
    """Certified: the top loser's error stays ≤ eps beyond c, where it still rises: its peak,
    bracketed in float64 and enclosed over the bracket, is below eps."""
    lo, hi = c, 2 * c + 1
    while _Enclosure(row, iv.mpf(hi)).slope().b >= 0 and hi < 1e300:
        lo, hi = hi, 2 * hi
    for _ in range(60):  # bisect to a short bracket [lo, hi] with slope ≥ 0 at lo, < 0 at hi
        mid = (lo + hi) / 2
        if _Enclosure(row, iv.mpf(mid)).slope().a > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * hi:
            break
    if _Enclosure(row, iv.mpf(hi)).slope().b >= 0:
        return False
    return bool(_Enclosure(row, iv.mpf([lo, hi])).loser().b <= eps.a)


def _certify(row: _Row, estimate: float, eps: float, rel_width: float) -> tuple[float, float]:
    """A certified (lo, hi) around the float estimate, widened or searched when it fails."""
    if not len(row.losers):
        return 0.0, 0.0
    with interval_bits(80):
        e = iv.mpf(eps)
        half = _half_width(rel_width)
        lo, hi = estimate * (1 - half), estimate * (1 + half)
        if lo > 0 and _above_eps(row, lo, e) and _within_from(row, hi, e):
            return lo, hi
        if _within_from(row, 0.0, e):
            return 0.0, 0.0
        # The float estimate was off (extreme inputs): bisect on the certified "within eps from c
        # on", which is monotone in c. The error itself is not: with tied winners it may dip below
        # eps before the top loser's peak. So lo moves to every point not certified within, until
        # the bracket is narrow enough and lo certified above eps (the error exceeds eps just
        # below c*, so narrowing further gets there unless the two meet to 80 bits).
        lo, hi = 0.0, max(estimate, 1.0)
        while not _within_from(row, hi, e):
            lo, hi = hi, 2 * hi
            if hi > 1e300:
                raise SaturationError("no certified scale below 1e300; the scores are too close")
        # hi/lo − 1 ≤ 0.9·rel_width (and lo > 0)
        while not (hi - lo <= 0.9 * rel_width * lo and _above_eps(row, lo, e)):
            mid = (lo + hi) / 2
            if not lo < mid < hi:
                raise SaturationError(f"cannot certify the scale: the error meets eps at c = {lo} to 80 bits")
            if _within_from(row, mid, e):
                hi = mid
            else:
                lo = mid
        return lo, hi


def scale_to_saturate(scores: Sequence[float] | np.ndarray | torch.Tensor, eps: float = 1e-3, *,
                      rel_width: float = 1e-3, rtol: float | None = None) -> tuple[float, float]:
    """The scale c* from which softmax(c·scores) stays within eps of its hard limit, certified.

    c* = inf{c ≥ 0: max_i |softmax(c'·x)_i − hardmax(x)_i| ≤ eps for every c' ≥ c}. The error is
    the larger of the winners' error, which falls with c, and the top loser's, which is
    log-concave in c (it may first rise, when losers far below hand their weight to it), so c*
    is found by bisection in float64 and then certified in interval arithmetic: the error
    exceeds eps at ``lo`` and stays within eps from ``hi`` on.

    Args:
        scores: one row of attention scores; −∞ marks a masked position.
        eps: the tolerance, in (0, 1).
        rel_width: the largest relative width hi/lo − 1 of the returned interval.
        rtol: tie tolerance (default :func:`saturated.functional.default_rtol` of float64).

    Returns:
        (lo, hi) floats with lo ≤ c* ≤ hi; (0.0, 0.0) when the error never exceeds eps.

    Raises:
        SaturationError: eps outside (0, 1), NaN or +∞ scores, or every position masked.

    >>> lo, hi = scale_to_saturate([2.0, 0.0, -math.inf], eps=1e-6)
    >>> lo < math.log(1e6 - 1) / 2 < hi
    True
    """
    _check_eps(eps, rel_width)
    return _scales([_row(scores, rtol)], eps, rel_width)[0]


def scale_to_saturate_map(scores: Sequence[Sequence[float]] | np.ndarray | torch.Tensor, eps: float = 1e-3, *,
                          rel_width: float = 1e-3, rtol: float | None = None) -> MapScales:
    """:func:`scale_to_saturate` for every row of a 2-d attention map, and the map's maximum.

    The bisection runs once for all rows in float64, and so do the certificates: enclosures built
    from IEEE-754 arithmetic with an a-priori error budget (:func:`_exp_neg`). Rows they cannot
    decide are certified again in ``mpmath.iv`` one by one.

    >>> scale_to_saturate_map([[0.0, -1.0], [0.0, -2.0]], eps=0.01).maximum[1] < 4.6
    True
    """
    _check_eps(eps, rel_width)
    grid = check_score_array(scores)
    if grid.dim() != 2 or grid.numel() == 0:
        raise SaturationError(f"expected a non-empty 2-d map of scores, got shape {tuple(grid.shape)}")
    certified = _scales(_rows(grid, rtol), eps, rel_width)
    return MapScales(certified, (max(lo for lo, _ in certified), max(hi for _, hi in certified)))


def _scales(rows: list[_Row], eps: float, rel_width: float) -> tuple[tuple[float, float], ...]:
    """Certified (lo, hi) per row: float64 enclosures for all rows at once, mpmath intervals for the
    rows they cannot decide (extreme magnitudes, a rising top loser, a wrong float estimate)."""
    padded = _Padded.of(rows)
    estimates = _float_scales(padded, eps)
    lo, hi, certified = _certify_rows(padded, estimates, eps, rel_width)
    return tuple((float(a), float(b)) if ok else _certify(row, float(c), eps, rel_width)
                 for row, c, a, b, ok in zip(rows, estimates, lo, hi, certified))


# --- floating-point formats -------------------------------------------------------------------


@dataclass(frozen=True)
class FormatThreshold:
    """From which input magnitude a format's correctly rounded function equals its limit exactly.

    Attributes:
        format: ``"float16"``, ``"bfloat16"``, ``"float32"`` or ``"float64"``.
        function: ``"sigmoid"``, ``"tanh"`` or ``"softmax2"`` (softmax of (x, 0)).
        upper: the smallest representable x from which f(x) rounds to the upper limit (1).
        lower: the smallest representable m from which f(−m) rounds to the lower limit (0 or −1;
            for softmax2 both entries must be exact, so this equals ``upper``).
        torch_upper, torch_lower: the same, measured on what torch computes on this machine.
    """

    format: str
    function: str
    upper: float
    lower: float
    torch_upper: float
    torch_lower: float

    @property
    def magnitude(self) -> float:
        """The input magnitude beyond which the function is exactly saturated on both sides."""
        return max(self.upper, self.lower)


_FORMATS = {  # precision p (bits, implicit bit included), minimum normal exponent
    "float16": (11, -14, torch.float16),
    "bfloat16": (8, -126, torch.bfloat16),
    "float32": (24, -126, torch.float32),
    "float64": (53, -1022, torch.float64),
}


def _round_up(value: Interval, p: int, emin: int) -> float:
    """The smallest number of the format ≥ every point of the positive interval ``value``, in exact
    integer arithmetic on the endpoints (mantissa·2^exponent)."""
    ups = set()
    for _, man, exp, bits in value._mpi_:
        ulp = max(exp + bits - 1, emin) - p + 1  # the spacing of the format around the endpoint
        shift = exp - ulp
        ups.add((man << shift if shift >= 0 else -((-man) >> -shift), ulp))
    if len(ups) != 1:
        raise SaturationError("the threshold lies too close to a representable number to decide")
    count, ulp = ups.pop()
    return math.ldexp(count, ulp)


def _exact_thresholds(function: str, p: int, emin: int) -> tuple[float, float]:
    """Round-to-nearest-even thresholds, from the midpoint below 1 (1 − 2^(−p−1), which rounds up
    to 1) and half the smallest subnormal (2^(emin−p), which rounds down to 0):
    σ(x) ≥ 1 − 2^(−p−1) ⇔ x ≥ log(2^(p+1) − 1); σ(−m) ≤ 2^(emin−p) ⇔ m ≥ log(2^(p−emin) − 1);
    1 − tanh(x) ≤ 2^(−p−1) ⇔ x ≥ log(2^(p+2) − 1)/2 (the same for −1 by symmetry)."""
    two = iv.mpf(2)
    with interval_bits(200):
        to_one = iv.log(two ** (p + 1) - 1)
        to_zero = iv.log(two ** (p - emin) - 1)
        half_tanh = iv.log(two ** (p + 2) - 1) / 2
        if function == "sigmoid":
            return _round_up(to_one, p, emin), _round_up(to_zero, p, emin)
        if function == "tanh":
            x = _round_up(half_tanh, p, emin)
            return x, x
        both = _round_up(to_zero, p, emin)  # (σ(x), σ(−x)) = (1, 0) needs the underflow side
        return both, both


def _torch_function(function: str) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """f(x) == upper limit and f(−x) == lower limit, elementwise, as torch computes them."""
    def sigmoid(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.sigmoid(x) == 1, torch.sigmoid(-x) == 0

    def tanh(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tanh(x) == 1, torch.tanh(-x) == -1

    def softmax2(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pair = torch.softmax(torch.stack([x, torch.zeros_like(x)], -1), -1)
        exact = (pair[..., 0] == 1) & (pair[..., 1] == 0)
        return exact, exact

    return {"sigmoid": sigmoid, "tanh": tanh, "softmax2": softmax2}[function]


def _codes(dtype: torch.dtype) -> tuple[torch.dtype, int]:
    """The integer type sharing ``dtype``'s bits, and the code of its largest finite number (the
    codes of positive numbers are ordered like the numbers)."""
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float32: torch.int32, torch.float64: torch.int64}[dtype]
    return bits, int(torch.tensor(torch.finfo(dtype).max, dtype=dtype).view(bits))


def _measured(function: str, dtype: torch.dtype) -> tuple[float, float]:
    """Per side, the number after the last positive one that torch does not saturate exactly.

    Positive numbers are searched by their codes: while more than 2²⁰ codes remain, 2¹⁶ evenly
    spaced ones are evaluated and the search narrows to the gap after the last failure; the
    final window is evaluated whole (for 16-bit formats that is every positive number).
    """
    bits, top = _codes(dtype)
    check = _torch_function(function)
    found = []
    for side in range(2):
        lo, hi = 1, top
        while True:
            if hi - lo <= 1 << 20:
                codes = torch.arange(lo, hi + 1, dtype=torch.int64)
            else:
                codes = torch.linspace(lo, hi, 1 << 16, dtype=torch.float64).round().to(torch.int64)
                codes = codes.clamp(lo, hi)  # float64 cannot hold every 64-bit code exactly
                codes = torch.unique(torch.cat([codes, torch.tensor([lo, hi])]))
            values = codes.to(bits).view(dtype)
            failing = torch.nonzero(~check(values)[side])
            if not len(failing):
                found.append(float(values[0]))
                break
            last = int(failing[-1])
            if last + 1 == len(codes):
                found.append(math.inf)
                break
            if hi - lo <= 1 << 20:
                found.append(float(values[last + 1]))
                break
            lo, hi = int(codes[last]), int(codes[last + 1])
    return found[0], found[1]


def format_thresholds(functions: Sequence[str] = ("sigmoid", "tanh", "softmax2"),
                      formats: Sequence[str] = tuple(_FORMATS)) -> list[FormatThreshold]:
    """Exact saturation thresholds per format and function, beside what torch computes here.

    The exact ones are derived in interval arithmetic (see :func:`_exact_thresholds`). torch's are
    searched among the positive numbers of the format (see :func:`_measured`): every one of them
    for the 16-bit formats, a narrowing search down to the last 2²⁰ for float32 and float64.

    >>> row = format_thresholds(["sigmoid"], ["float32"])[0]
    >>> row.upper, row.lower
    (17.32868003845215, 103.97208404541016)
    """
    rows = []
    for name in formats:
        if name not in _FORMATS:
            raise SaturationError(f"expected a format among {sorted(_FORMATS)}, got {name!r}")
        p, emin, dtype = _FORMATS[name]
        for function in functions:
            if function not in ("sigmoid", "tanh", "softmax2"):
                raise SaturationError(f"expected 'sigmoid', 'tanh' or 'softmax2', got {function!r}")
            upper, lower = _exact_thresholds(function, p, emin)
            torch_upper, torch_lower = _measured(function, dtype)
            rows.append(FormatThreshold(name, function, upper, lower, torch_upper, torch_lower))
    return rows


# --- approximate and asymptotic homogeneity, quantified ---------------------------------------


@dataclass(frozen=True)
class RateFit:
    """A fitted decay of the scaling error e(c) = ‖f(c·θ)/cᵏ − s-f‖.

    Attributes:
        kind: ``"exponential"`` (log e ≈ log C − rate·c) or ``"polynomial"`` (log e ≈ log C −
            rate·log c).
        rate: the fitted rate (the exponent's slope, or the polynomial order).
        constant: C (∞ beyond the float range).
        scales: the scales measured.
        errors: the errors, as floats (0 where they underflow a float, ∞ where they overflow it;
            the fit uses their logs in high precision).
        r_squared: the coefficient of determination of the fit in log space.
    """

    kind: str
    rate: float
    constant: float
    scales: tuple[float, ...]
    errors: tuple[float, ...]
    r_squared: float


def scaling_rate(error: Callable[[mpmath.mpf], mpmath.mpf], scales: Sequence[float], *,
                 kind: str = "exponential", dps: int = 50) -> RateFit:
    """Fit how fast a scaling error vanishes, evaluating it with ``dps`` digits.

    Args:
        error: c ↦ ‖f(c·θ)/cᵏ − s-f‖ written with mpmath (it runs inside ``mpmath.workdps(dps)``).
        scales: at least three scales c > 0.
        kind: ``"exponential"`` for an approximately homogeneous network (e^(−Θ(c))),
            ``"polynomial"`` for an asymptotic one (c^(−order)).
        dps: decimal digits.

    Raises:
        SaturationError: fewer than three scales, a non-positive scale, or an error that is zero or
            not finite (no decay to fit).

    >>> fit = scaling_rate(lambda c: 1 / (1 + mpmath.exp(c * mpmath.mpf(0.5))), [10, 20, 40, 80])
    >>> round(fit.rate, 3), fit.r_squared > 0.999999
    (0.5, True)
    """
    if kind not in ("exponential", "polynomial"):
        raise SaturationError(f"expected kind 'exponential' or 'polynomial', got {kind!r}")
    if len(scales) < 3 or any(not (math.isfinite(c) and c > 0) for c in scales):
        raise SaturationError(f"expected at least three finite scales c > 0, got {list(scales)}")
    logs = []
    with mpmath.workdps(_digits(dps)):
        for c in scales:
            value = error(mpmath.mpf(c))
            if not (mpmath.isfinite(value) and value > 0):
                raise SaturationError(f"the scaling error at c = {c} is {value}; expected a positive "
                                      "finite number to fit (raise dps if it underflowed)")
            logs.append(float(mpmath.log(value)))
    xs = np.array([c if kind == "exponential" else math.log(c) for c in scales], dtype=np.float64)
    line = scipy.stats.linregress(xs, np.array(logs))
    slope, intercept = float(line.slope), float(line.intercept)
    r_squared = float(line.rvalue) ** 2
    errors = tuple(_float_exp(v) for v in logs)
    return RateFit(kind, -slope, _float_exp(intercept), tuple(float(c) for c in scales), errors, r_squared)


def _float_exp(v: float) -> float:
    """e^v as a float: 0 below the float range (math.exp underflows quietly), ∞ above it."""
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


# --- Certified scales of attention rows read from a model (the head atlas, empirical.measure.heads).
# The weights come from a real softmax in floating point: every bound covers their rounding.


def softmax_log_error(p: np.ndarray, gap: np.ndarray, u: float, tiny: float) -> np.ndarray:
    """A bound on |log p̂_j − (s_j − logsumexp(s))| up to one constant per row, for a softmax
    computed in a format with unit roundoff u from the scores s: rounding x_j = s_j − max(s)
    moves the exponent by ≤ u·|x_j| (|x_j| is the gap, up to rounding), exp adds ≤ 2 ulp (4u) and
    the division by the row's sum ≤ u (the sum's own error is one factor for the whole row and
    cancels in every gap): u·(gap + 8) leaves room for log(1 + r) ≥ r. A subnormal result is off
    by ≤ ``tiny`` absolutely (2·tiny/p̂ in the log); the float64 log adds ~1e-16 relatively."""
    with np.errstate(divide="ignore"):
        return u * (gap + 8.0) + 2 * tiny / p + 1e-15 * (np.abs(np.log(p)) + 1.0)


def scale_bounds_of_rows(margin: torch.Tensor, tied: torch.Tensor, allowed: torch.Tensor, eps: float,
                         slack: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, cheap lower and upper bounds on the certified scale, to pick the rows that may set
    a head's maximum (:func:`certified_row_scales` then certifies them): with t winners, n allowed,
    margin δ known to within ``slack``, K = max(1/t, (n − t)/t²), c* ≤ log(K/eps)/(δ − slack),
    and c* ≥ −log(x)/(δ + slack) where the winners' error with one loser at the margin meets eps,
    x = eps·t²/(1 − eps·t)."""
    t, n = tied.double(), allowed.double()
    k = torch.maximum(1 / t, (n - t) / t**2)
    upper = torch.log(k / eps).clamp_min(0) / (margin - slack).clamp_min(0)
    x = eps * t**2 / (1 - eps * t)
    lower = torch.where((x > 0) & (x < 1), -torch.log(x.clamp(1e-300, 1)) / (margin + slack), 0.0)
    return lower.nan_to_num(0.0), upper.nan_to_num(math.inf, posinf=math.inf)


def _exceeds(t: int, near: np.ndarray, far: np.ndarray, eps: float) -> float:
    """A certified scale at which a lower bound on the error of t tied winners exceeds eps (0 if
    none is found): the winners' R/(t(t + R)) with R = Σ e^(−c·near), and the top loser's
    x/(t + x + S) with x = e^(−c·near[0]) and S = Σ e^(−c·far) (both grow with x and R, fall with
    S). Each is log-concave in c, so the last crossing of eps is bracketed on a grid, bisected in
    float64 and checked in ``mpmath.iv`` slightly below it."""
    if not len(near):
        return 0.0
    log_eps, log_t = math.log(eps), math.log(t)

    def log_errors(c: float) -> tuple[float, float]:
        r = float(np.logaddexp.reduce(-c * near))
        x = -c * float(near[0])
        s = float(np.logaddexp.reduce(-c * far)) if len(far) else -math.inf
        return (r - log_t - float(np.logaddexp(log_t, r)),
                x - float(np.logaddexp.reduce([log_t, x, s])))

    best = 0.0
    end = math.log(max(len(near), 2) / (t * eps)) / float(near[0])  # both below eps beyond it
    grid = np.linspace(0.0, end, 201)[1:]
    for which in range(2):
        above = [log_errors(c)[which] > log_eps for c in grid]
        if not any(above):
            continue
        last = max(i for i, a in enumerate(above) if a)
        lo, hi = float(grid[last]), float(grid[min(last + 1, len(grid) - 1)]) * 1.01
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if log_errors(mid)[which] > log_eps else (lo, mid)
        c = lo * (1 - 1e-6)
        if c > best and _certify_exceeds(t, near, far, c, eps, which):
            best = c
    return best


def _certify_exceeds(t: int, near: np.ndarray, far: np.ndarray, c: float, eps: float, which: int) -> bool:
    with interval_bits(80):
        scale = iv.mpf(c)
        terms = [iv.exp(-scale * iv.mpf(float(g))) for g in near]
        if which == 0:
            total = sum(terms, iv.mpf(0))
            error = total / (t * (t + total))
        else:
            rest = sum((iv.exp(-scale * iv.mpf(float(g))) for g in far), iv.mpf(0))
            error = 1 / ((t + rest) / terms[0] + 1)
        return bool(error.a > iv.mpf(eps).b)


def certified_row_scales(weights: np.ndarray, winners: np.ndarray, allowed: np.ndarray, eps: float,
                         unit: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per row of softmax weights, (lo, hi) containing the scale c* of the scores the model
    actually softmaxed, not of their rounded log-probabilities.

    ``weights`` are the rows as computed (in a format with unit roundoff and smallest positive
    number ``unit``), ``winners`` the tie set already judged at θ, ``allowed`` the positions the
    row may attend to (all boolean arrays of the same shape); c* is the smallest c at which the
    softmax of c·s is within ``eps`` of hard attention on the winners.

    Each gap g_j = log p̂_top − log p̂_j is known to within β_j (:func:`_log_error` at j and, twice,
    at the top). The winners' error R/(t(t + R)) grows with R, which falls as any gap grows; with
    one winner it is the whole error. So lo comes from the row with every gap at g + β (the error
    there is a lower bound, and weights that underflowed to 0 are left out), hi from the row with
    every gap at g − β and every underflowed weight at its smallest possible gap. With tied
    winners the top loser's error x/(t + x + S) grows with its own term x and falls with the
    others' sum S: hi also covers the row with one loser at min(g − β) and the others at g + β
    (the largest of those left out), and lo is where the winners' error with every gap at g + β,
    or the nearest loser's at g + β with the others at g − β, exceeds eps (:func:`_exceeds`).
    """
    u, tiny = unit
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(p)
        top = np.max(np.where(winners, logs, -np.inf), axis=1, keepdims=True)
        gap = top - logs
        p_top = np.exp(top)
        top_error = softmax_log_error(p_top, np.zeros_like(top), u, tiny)
        beta = (softmax_log_error(p, gap, u, tiny) + 2 * top_error) * (1 + 1e-9)
    beta = np.where(p > 0, beta, 0.0)  # zero weights (masked or underflowed) are handled apart
    losers = allowed & ~winners & (p > 0)
    under = allowed & (p == 0)
    t = winners.sum(1)
    hopeless = (losers & (gap - beta <= 0)).any(1)  # rounding may hide a tie: no finite bound
    low_gap = np.where(losers, gap - beta, np.inf)
    high_gap = np.where(losers, gap + beta, np.inf)
    # An underflowed weight is below the format's smallest number: its gap is at least this.
    under_gap = (top - math.log(tiny) - 2 * top_error) * (1 - 1e-9)
    low_gap = np.where(under, under_gap, low_gap)
    low_gap = np.where(hopeless[:, None], 1.0, np.maximum(low_gap, 0.0))

    def scores(gaps: np.ndarray) -> np.ndarray:
        return np.where(winners, 0.0, -gaps)

    up, down = scores(high_gap), scores(low_gap)
    # Tied winners: the top loser at its smallest gap, the others at their largest but one.
    tied = np.nonzero(t > 1)[0]
    mixed = np.where(winners[tied], 0.0, -high_gap[tied])
    if len(tied):
        nearest = np.argmin(high_gap[tied], axis=1)
        found = np.isfinite(high_gap[tied, nearest])
        mixed[np.arange(len(tied))[found], nearest[found]] = -np.inf
        first = np.min(np.where(losers[tied], gap[tied] - beta[tied], np.inf), axis=1)
        mixed = np.concatenate([mixed, -first[:, None]], axis=1)
    width = max(up.shape[1], mixed.shape[1] if len(tied) else 0)

    def widen(a: np.ndarray) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=-np.inf)

    grid = np.concatenate([widen(up), widen(down), widen(mixed)]) if len(tied) else np.concatenate([up, down])
    # The winners are already split from the losers (by the tie rule of the attention's dtype):
    # the certificate must not judge ties again.
    scales = np.array(scale_to_saturate_map(grid, eps, rtol=0.0).rows)
    m = len(p)
    lo, hi = scales[:m, 0].copy(), scales[m:2 * m, 1].copy()
    if len(tied):
        hi[tied] = np.maximum(hi[tied], scales[2 * m:, 1])
        for i in tied:
            near = np.sort(high_gap[i][np.isfinite(high_gap[i])])
            order = np.argsort(high_gap[i])
            first = order[0] if np.isfinite(high_gap[i][order[0]]) else -1
            far = low_gap[i][losers[i] | under[i]]
            if first >= 0 and losers[i, first]:  # the others' sum, at their smallest gaps
                far = np.delete(low_gap[i], first)[np.delete(losers[i] | under[i], first)]
            lo[i] = _exceeds(int(t[i]), near, far, eps)
    hi[hopeless] = math.inf
    return lo, hi
