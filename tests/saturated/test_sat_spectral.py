"""The spectral norm bound is an upper bound of the largest singular value (checked against an
SVD at 50 digits on the exact float64 entries), and a tight one on random weights. Its Cholesky
certificate bounds the residual of any factor it is given (checked against the exact residual at
50 digits), and the nested Gram bound takes over wherever no factorization succeeds."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

import saturated.spectral as spectral
from saturated.spectral import spectral_norm_bound


def _largest_singular_value(a: np.ndarray) -> mpmath.mpf:
    with mpmath.workdps(50):
        matrix = mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in a])
        return max(mpmath.svd_r(matrix, compute_uv=False))


def _check(a: np.ndarray, depth: int) -> None:
    bound = spectral_norm_bound(torch.from_numpy(a), depth)
    exact = _largest_singular_value(a)
    with mpmath.workdps(50):
        assert mpmath.mpf(bound) >= exact, (bound, exact)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([0, -1060, -600, -30, 30, 600, 1000]), spread=st.integers(0, 40),
       rank_one=st.booleans(), depth=st.integers(0, 5))
def test_the_bound_is_above_the_largest_singular_value(m, n, seed, scale, spread, rank_one, depth):
    rng = np.random.default_rng(seed)
    if rank_one:  # σ_max = ‖u‖·‖v‖ (rounded entries: nearly rank one), every level's worst case
        a = np.outer(rng.standard_normal(m), rng.standard_normal(n))
    else:
        a = rng.standard_normal((m, n)) * 2.0 ** rng.integers(-spread, spread + 1, (m, n))
    a = np.ldexp(a, scale)
    if not np.isfinite(a).all():
        pytest.skip("scaled past float64")
    _check(a, depth)


def test_exact_cases():
    assert spectral_norm_bound(torch.zeros(3, 4)) == 0.0
    assert spectral_norm_bound(torch.tensor([[math.inf]])) == math.inf
    _check(np.full((5, 3), 2.0**-1074), 4)  # subnormal entries, whose squares underflow to 0
    _check(np.full((4, 4), np.finfo(np.float64).max / 8), 4)  # near overflow
    _check(np.eye(6) * 3.0, 3)
    with pytest.raises(ValueError, match="2-D"):
        spectral_norm_bound(torch.ones(3))


def test_the_bound_is_tight_on_random_weights():
    generator = torch.Generator().manual_seed(0)
    for shape in [(256, 1024), (1024, 256)]:
        a = torch.randn(*shape, generator=generator, dtype=torch.float64)
        exact = float(torch.linalg.matrix_norm(a, 2))
        bound = spectral_norm_bound(a)
        assert exact <= bound <= 1.5 * exact


def test_the_certified_bound_is_within_parts_per_billion():
    generator = torch.Generator().manual_seed(1)
    centred = torch.randn(200, 120, generator=generator, dtype=torch.float64)
    centred -= centred.mean(1, keepdim=True)  # rows summing to 0: the all-ones vector in its null space
    shapes = [(300, 200), (64, 90), (5, 3)]  # Lanczos on the first two, the full spectrum on the last
    for a in [torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes] + [centred]:
        exact = float(torch.linalg.matrix_norm(a, 2))
        assert exact * (1 - 1e-12) <= spectral_norm_bound(a) <= exact * (1 + 1e-8)


def test_the_lanczos_step_leaves_the_blas_thread_pools_as_they_were(monkeypatch):
    """One BLAS thread inside the estimate, and the caller's own setting again after it."""

    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas_threads()
    seen: list[list[int]] = []
    original = spectral.eigsh

    def watched(*args, **kwargs):
        seen.append(blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(spectral, "eigsh", watched)
    a = torch.randn(200, 100, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    exact = float(torch.linalg.matrix_norm(a, 2))
    assert exact <= spectral_norm_bound(a) <= exact * (1 + 1e-8)
    assert seen and all(count == 1 for count in seen[0])
    assert blas_threads() == before


def _exact_residual_norm(shifted_exact: list[list[mpmath.mpf]], factor: np.ndarray) -> mpmath.mpf:
    """‖M − L·Lᵀ‖₂ at 50 digits (products of float64 entries and their short sums are exact)."""
    n = len(factor)
    with mpmath.workdps(50):
        difference = mpmath.matrix([[shifted_exact[r][c] - mpmath.fsum(
            mpmath.mpf(float(factor[r, k])) * mpmath.mpf(float(factor[c, k])) for k in range(n))
            for c in range(n)] for r in range(n)])
        return max(abs(x) for x in mpmath.eigsy(difference, eigvals_only=True))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_the_residual_bound_holds_for_any_factor(n, seed):
    """The certificate reads only computed residuals: any L, not only a Cholesky factor of
    M̂ = fl(σ·I − S), leaves ‖σ·I − S − L·Lᵀ‖₂ within the bound (σ·I − S exact at 50 digits)."""
    rng = np.random.default_rng(seed)
    upper = rng.standard_normal((n, n))
    symmetric = np.tril(upper) + np.tril(upper, -1).T
    shift = float(rng.standard_normal() * 4)
    shifted = -symmetric
    shifted[np.diag_indices(n)] = shift - np.diag(symmetric)  # rounded: the bound counts it
    factor = np.tril(rng.standard_normal((n, n)))
    with mpmath.workdps(50):
        exact_shifted = [[(mpmath.mpf(shift) if r == c else 0) - mpmath.mpf(float(symmetric[r, c]))
                          for c in range(n)] for r in range(n)]
    bound = spectral._residual_bound(torch.from_numpy(shifted), torch.from_numpy(factor))
    with mpmath.workdps(50):
        assert mpmath.mpf(bound) >= _exact_residual_norm(exact_shifted, factor)


def test_the_residual_bound_counts_the_products_rounding():
    """M̂ = fl(L·Lᵀ) for a singular L of order 40: the computed residual is 0, and what is left,
    M̂ − L·Lᵀ, is the product's rounding alone (beyond the diagonal term at this size)."""
    rng = np.random.default_rng(5)
    factor = np.tril(rng.standard_normal((40, 40)))
    factor[:, -1] = 0
    product = factor @ factor.T
    shifted = np.tril(product) + np.tril(product, -1).T
    bound = spectral._residual_bound(torch.from_numpy(shifted), torch.from_numpy(factor))
    with mpmath.workdps(50):
        exact_shifted = [[mpmath.mpf(float(x)) for x in row] for row in shifted]
        assert mpmath.mpf(bound) >= _exact_residual_norm(exact_shifted, factor)


def test_the_nested_bound_serves_where_no_factorization_succeeds(monkeypatch):
    a = torch.randn(40, 30, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    nested = spectral._bound(a, 4)
    # a shift at half the top eigenvalue: σ·I − S is indefinite and every factorization fails
    monkeypatch.setattr(spectral, "_top_eigenvalue_estimate",
                        lambda s: float(torch.linalg.eigvalsh(s)[-1]) / 2)
    assert spectral._certified_top(a.T @ a) is None
    assert spectral_norm_bound(a) == nested

    def no_convergence(*args, **kwargs):
        raise spectral.ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((0, 0)))
    monkeypatch.undo()
    monkeypatch.setattr(spectral, "eigsh", no_convergence)
    wide = torch.randn(100, 80, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert spectral._top_eigenvalue_estimate(wide.T @ wide) is None
    assert spectral_norm_bound(wide) == spectral._bound(wide, 4)
