"""The spectral norm bound is an upper bound of the largest singular value (checked against an
SVD at 50 digits on the exact float64 entries), and a tight one on random weights."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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
