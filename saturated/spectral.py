"""A rigorous upper bound on a matrix's spectral norm ‖A‖₂ (its largest singular value).

A linear map x ↦ W·x sends an error of ℓ2 norm ρ to one of norm at most ‖W‖₂·ρ, which is how
rounding bounds carried as ℓ2 radii (:class:`saturated.rounding.VectorBound`) pass a weight.

‖A‖₂² = λ_max(AᵀA). B̂ = fl(AᵀA) is computed in float64 on the smaller side, and made symmetric
(S: its lower triangle mirrored, each entry one that was computed), so that
‖AᵀA − S‖_F ≤ γ_p·‖|A|ᵀ|A|‖_F ≤ γ_p·‖A‖_F² (Higham §3.5, any summation order, fused or not).

**Certified by a Cholesky factorization** (the bound used whenever it succeeds). An estimate θ of
λ_max(S) (Lanczos, :func:`scipy.sparse.linalg.eigsh`; never trusted) gives a shift σ a little
above it, and L = chol(M̂), M̂ = fl(σ·I − S), in floating point. Whatever L is,

    σ·I − S = L·Lᵀ + E,   ‖E‖₂ ≤ ‖P̂ − M̂‖_F + γ_n·‖L‖_F² + δ,

with P̂ = fl(L·Lᵀ) (its rounding bounded as B̂'s) and δ the rounding of M̂'s diagonal. L·Lᵀ is
positive semidefinite, so λ_max(S) ≤ σ + ‖E‖₂, and the bound reads only computed residuals: it
holds however the factorization was computed. On random weights it is within about 10⁻⁹ of
‖A‖₂ (the fallback below: 5–12% above it), at about the fallback's cost: the Gram product, a
factorization and one product of the smaller side's square, where the fallback takes three.

**The fallback**, where the factorization fails (a shift too close to λ_max(S), or values that
are not finite): nested Gram products, ‖B̂‖₂ ≤ s(B̂) bounded the same way at each level and
s(B) = ‖B‖_F at the last; with k levels within rank^(1/2^(k+1)) of ‖A‖₂ (1.24× at rank 1024
for k = 4), plus rounding terms of relative size about p·u·(‖A‖_F/‖A‖₂)².

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

import functools
import math

import numpy as np
import torch
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh
from threadpoolctl import ThreadpoolController
from torch import Tensor

__all__ = ["largest_magnitude", "spectral_norm_bound"]

_U = 2.0**-53  # float64's unit roundoff
_ETA = 2.0**-1074  # float64's smallest subnormal: what a product or square may lose to underflow


def largest_magnitude(values: Tensor) -> float:
    """max |values| in one pass, with no copy (``aminmax``): 0 if all zero or empty, ∞ on
    overflow, NaN if any entry is NaN.

    >>> largest_magnitude(torch.tensor([-3.0, 2.0])), largest_magnitude(torch.tensor([1.0, math.nan]))
    (3.0, nan)
    """
    return max(abs(float(bound)) for bound in torch.aminmax(values)) if values.numel() else 0.0


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
    flat = (a.T if a.dim() == 2 and not a.is_contiguous() else a).reshape(-1)  # a view where it can be
    computed = float(torch.dot(flat, flat))  # any order, fused or not: the same γ_N
    return _up(_up(computed * _up(1 + 2 * _gamma_bound(count))) + count * _ETA)


def _scaled_down(a: Tensor, largest: float) -> tuple[Tensor, int, float]:
    """(a·2⁻ᵉ, e, slack): a copy whose largest |entry| (``largest``, positive) is in [1/2, 1), and
    a bound of the Frobenius norm of what rounding took from a in scaling it (0 unless entries
    went subnormal)."""
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


def _bound(a: Tensor, depth: int, certify: bool = False) -> float:
    """An upper bound of ‖a‖₂ for a float64 matrix ``a`` with at least as many rows as columns:
    with ``certify``, from a Cholesky factorization where one succeeds (:func:`_certified_top`),
    otherwise from ``depth`` nested Gram products."""
    largest = largest_magnitude(a)
    if largest == 0.0:
        return 0.0
    if not math.isfinite(largest):
        return math.inf
    scaled, exponent, slack = _scaled_down(a, largest)
    frobenius_squared = _frobenius_squared(scaled)
    if depth == 0:
        inner = _up(math.sqrt(frobenius_squared))
    else:
        rows, columns = scaled.shape
        gram = scaled.T @ scaled  # columns × columns, sums of ``rows`` products
        error = _up(_up(_gamma_bound(rows) * frobenius_squared) + columns * rows * _ETA)
        top = _certified_top(gram) if certify else None
        if top is None:
            top = _bound(gram, depth - 1)
        inner = _up(math.sqrt(_up(top + error)))
    return _up(_times_power_of_two(inner, exponent) + slack)


# Shifts tried above the estimate of λ_max, relative to it. A factorization succeeds once the
# shift clears the estimate's error and about n·u (the factorization's own rounding): the first
# does on every weight measured.
_MARGINS = (2.0**-30, 2.0**-17, 2.0**-4)


def _certified_top(gram: Tensor) -> float | None:
    """An upper bound of λ_max(S), S the symmetric matrix of ``gram``'s lower triangle, from a
    Cholesky factorization of σ·I − S (see the module's docstring); None where none succeeds."""
    symmetric = torch.tril(gram) + torch.tril(gram, -1).T  # adding zeros: every entry is a computed one
    estimate = _top_eigenvalue_estimate(symmetric)
    if estimate is None or not estimate > 0:
        return None
    for margin in _MARGINS:
        top = _certificate(symmetric, _up(estimate * (1 + margin)))
        if top is not None:
            return top
    return None


def _certificate(symmetric: Tensor, shift: float) -> float | None:
    """An upper bound of λ_max of the symmetric float64 matrix ``symmetric`` from a Cholesky
    factor L of M̂ = fl(σ·I − S), σ = ``shift`` (None where the factorization fails or is not
    finite): σ + ‖σ·I − S − L·Lᵀ‖₂, bounded by :func:`_residual_bound`, since L·Lᵀ ⪰ 0."""
    shifted = -symmetric
    shifted.diagonal().add_(shift)  # fl(σ − Sᵢᵢ); the rest is −S exactly
    factor, info = torch.linalg.cholesky_ex(shifted)
    if int(info) != 0 or not bool(torch.isfinite(factor).all()):
        return None
    return _up(shift + _residual_bound(shifted, factor))


def _residual_bound(shifted: Tensor, factor: Tensor) -> float:
    """An upper bound of ‖M − L·Lᵀ‖₂ for any square ``factor`` L, where ``shifted`` is M̂ =
    fl(M) for a matrix M that differs from it only by the rounding of its diagonal (within u of
    each entry): the computed residual fl(fl(L·Lᵀ) − M̂) in Frobenius norm, the product's rounding
    (γₙ·‖L‖_F², plus n·η per entry for underflow) and the diagonal's (2u·max|M̂ᵢᵢ| ≥ u/(1 − u)·
    max|M̂ᵢᵢ|)."""
    n = int(factor.shape[0])
    residual = factor @ factor.T - shifted
    difference = _up(_up(math.sqrt(_frobenius_squared(residual))) * _up(1 + 2 * _U))
    product = _up(_up(_gamma_bound(n) * _frobenius_squared(factor)) + n**3 * _ETA)
    diagonal = _up(2 * _U * float(shifted.diagonal().abs().max())) if n else 0.0
    return _up(_up(difference + product) + diagonal)


def _top_eigenvalue_estimate(symmetric: Tensor) -> float | None:
    """An estimate of the largest eigenvalue of a symmetric float64 matrix: Lanczos iterations
    (ARPACK) on larger ones, the full spectrum on small ones. Only a shift is made of it."""
    n = int(symmetric.shape[0])
    if n <= 64:
        return float(torch.linalg.eigvalsh(symmetric)[-1])
    values = symmetric.cpu().numpy()
    # A fixed start vector, so that the same matrix gets the same bound, and a generic one: a
    # structured one (all ones) lies in the null space of a weight whose rows sum to zero.
    start = np.random.default_rng(0).standard_normal(n)
    try:
        with _blas_threads().limit(limits=1, user_api="blas"):
            return float(eigsh(values, k=1, which="LA", v0=start, tol=1e-10, return_eigenvectors=False)[0])
    except (ArpackNoConvergence, ArpackError):
        return None


@functools.cache
def _blas_threads() -> ThreadpoolController:
    """The BLAS thread pools loaded (scipy's and numpy's OpenBLAS). Lanczos runs with one thread:
    its matrix–vector products are too small to share, and the pools' threads, spinning after
    them, slowed the torch products that follow (median of a weight's bound, 2 cores: 3072 × 768
    194 → 123 ms, 1024 × 1024 184 → 109 ms, 2048 × 2048 969 → 880 ms)."""
    return ThreadpoolController()


def spectral_norm_bound(matrix: Tensor, depth: int = 4) -> float:
    """An upper bound of ‖matrix‖₂ (2-D, any float dtype; its values are read exactly in float64)
    certified by a Cholesky factorization of a shifted Gram matrix, or where none succeeds from
    ``depth`` nested Gram products (see the module's docstring); ∞ if an entry is not finite.

    >>> w = torch.tensor([[1.0, 1.0], [1.0, 1.0]])  # rank 1, ‖w‖₂ = 2
    >>> 2.0 <= spectral_norm_bound(w) <= 2.0 * (1 + 1e-8)
    True
    """
    if matrix.dim() != 2:
        raise ValueError(f"a spectral norm bound needs a 2-D matrix; got shape {tuple(matrix.shape)}")
    a = matrix.detach().double()
    return _bound(a if a.shape[0] >= a.shape[1] else a.T, depth, certify=True)
