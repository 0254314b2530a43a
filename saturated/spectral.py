"""A rigorous upper bound on a matrix's spectral norm ‖A‖₂ (its largest singular value).

A linear map x ↦ W·x sends an error of ℓ2 norm ρ to one of norm at most ‖W‖₂·ρ, which is how
rounding bounds carried as ℓ2 radii (:class:`saturated.rounding.VectorBound`) pass a weight.

‖A‖₂² = ‖AᵀA‖₂, so with B̂ = fl(AᵀA) computed in float64 (on the smaller side) and
‖AᵀA − B̂‖_F ≤ γ_p·‖|A|ᵀ|A|‖_F ≤ γ_p·‖A‖_F² (Higham §3.5, any summation order, fused or not),

    ‖A‖₂ ≤ sqrt(s(B̂) + γ_p·‖A‖_F²),

where s(B̂) bounds ‖B̂‖₂ the same way (B̂ is a float matrix, known exactly), and at the last level
s(B) = ‖B‖_F. With k levels the bound is within rank^(1/2^(k+1)) of ‖A‖₂ (1.24× at rank 1024 for
k = 4), plus rounding terms of relative size about p·u·(‖A‖_F/‖A‖₂)², far below that.

Every matrix is first scaled by a power of two so that its largest entry is in [1/2, 1): nothing
overflows, and scaling up is exact (scaling down may round subnormal entries, which an absolute
term covers). Every scalar is computed in Python floats and rounded up after each operation
(:func:`_up`: the next float above a correctly rounded result is above the exact one).

>>> spectral_norm_bound(torch.tensor([[3.0, 0.0], [0.0, 4.0]])) >= 4.0
True
>>> spectral_norm_bound(torch.zeros(2, 3))
0.0
"""

from __future__ import annotations

import math

import torch  # noqa: F401  (the examples read it)
from torch import Tensor

__all__ = ["spectral_norm_bound"]

_U = 2.0**-53  # float64's unit roundoff
_ETA = 2.0**-1074  # float64's smallest subnormal: what a product or square may lose to underflow


def _up(x: float) -> float:
    """The next float above ``x``: above the exact value of the operation ``x`` was rounded from
    (round to nearest is within half a spacing)."""
    return math.nextafter(x, math.inf)


def _gamma_bound(n: int) -> float:
    """An upper bound of γₙ = n·u/(1 − n·u) in float64: 2·n·u while n·u ≤ 1/2 (n·u is exact), ∞
    beyond."""
    return 2 * n * _U if n * _U <= 0.5 else math.inf


def _frobenius_squared(a: Tensor) -> float:
    """An upper bound of ‖a‖_F²: the computed sum of N squares has relative error at most γ_N
    (one rounding per square, N − 1 per sum), so Σ ≤ f/(1 − γ_N) ≤ f·(1 + 2γ_N) for γ_N ≤ 1/2,
    plus N·η for squares that underflow."""
    count = a.numel()
    computed = float((a * a).sum())
    return _up(_up(computed * _up(1 + 2 * _gamma_bound(count))) + count * _ETA)


def _scaled_down(a: Tensor) -> tuple[Tensor, int, float]:
    """(a·2⁻ᵉ, e, slack): a copy whose largest |entry| is in [1/2, 1), and a bound of the
    Frobenius norm of what rounding took from a in scaling it (0 unless entries went subnormal)."""
    largest = float(a.abs().max())
    exponent = math.frexp(largest)[1]
    # two steps, so that 2^(−e) never overflows or underflows itself
    half = exponent // 2
    scaled = a * 2.0 ** -half * 2.0 ** -(exponent - half)
    slack = _up(_times_power_of_two(_up(math.sqrt(a.numel())) * _ETA, exponent)) if exponent > 0 else 0.0
    return scaled, exponent, slack


def _times_power_of_two(x: float, exponent: int) -> float:
    """x·2ᵉ rounded up (exact unless it goes subnormal; ∞ on overflow)."""
    try:
        return _up(math.ldexp(x, exponent))
    except OverflowError:
        return math.inf


def _bound(a: Tensor, depth: int) -> float:
    """An upper bound of ‖a‖₂ for a float64 matrix ``a`` with at least as many rows as columns."""
    largest = float(a.abs().max()) if a.numel() else 0.0
    if largest == 0.0:
        return 0.0
    if not math.isfinite(largest):
        return math.inf
    scaled, exponent, slack = _scaled_down(a)
    frobenius_squared = _frobenius_squared(scaled)
    if depth == 0:
        inner = _up(math.sqrt(frobenius_squared))
    else:
        rows, columns = scaled.shape
        gram = scaled.T @ scaled  # columns × columns, sums of ``rows`` products
        error = _up(_up(_gamma_bound(rows) * frobenius_squared) + columns * rows * _ETA)
        inner = _up(math.sqrt(_up(_bound(gram, depth - 1) + error)))
    return _up(_times_power_of_two(inner, exponent) + slack)


def spectral_norm_bound(matrix: Tensor, depth: int = 4) -> float:
    """An upper bound of ‖matrix‖₂ (2-D, any float dtype; its values are read exactly in float64)
    from ``depth`` Gram products on its smaller side (see the module's docstring); ∞ if an entry
    is not finite. Its cost is one product of the matrix with itself and ``depth`` − 1 products of
    the smaller side's square.

    >>> w = torch.tensor([[1.0, 1.0], [1.0, 1.0]])  # rank 1, ‖w‖₂ = 2
    >>> 2.0 <= spectral_norm_bound(w) <= 2.0 * (1 + 1e-12)
    True
    """
    if matrix.dim() != 2:
        raise ValueError(f"a spectral norm bound needs a 2-D matrix; got shape {tuple(matrix.shape)}")
    a = matrix.detach().double()
    return _bound(a if a.shape[0] >= a.shape[1] else a.T, depth)
