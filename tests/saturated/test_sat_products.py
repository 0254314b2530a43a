"""Ball matrix products in float64 BLAS: they enclose the exact product of any matrices in their
operands' balls (checked in exact rationals), about as tightly as FLINT's own ``arb_mat`` product."""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from saturated.precision.balls import balls_of, matmul, working_precision
from saturated.precision.products import product


def _fraction(ball: flint.arb) -> Fraction:
    """The exact midpoint of a ball as a rational."""
    mantissa, exponent = ball.mid().man_exp()
    return Fraction(int(mantissa)) * Fraction(2) ** int(exponent)


def _exact(a: np.ndarray, b: np.ndarray) -> list[list[Fraction]]:
    """The product of the midpoints in exact rationals."""
    left = [[_fraction(x) if isinstance(x, flint.arb) else Fraction(float(x)) for x in row] for row in a]
    right = [[_fraction(x) if isinstance(x, flint.arb) else Fraction(float(x)) for x in row] for row in b]
    return [[sum((left[i][k] * right[k][j] for k in range(a.shape[1])), Fraction(0))
             for j in range(b.shape[1])] for i in range(a.shape[0])]


def _balls(values: np.ndarray, radius: float) -> np.ndarray:
    """Balls with irrational-looking midpoints (x/3 at the working precision) and a radius."""
    def ball(x: float) -> flint.arb:
        return flint.arb(x) / 3 + flint.arb(0, radius) if radius else flint.arb(x) / 3
    return np.asarray(np.frompyfunc(ball, 1, 1)(values), dtype=object)


floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-30)


@settings(max_examples=30, deadline=None)
@given(bits=st.sampled_from([64, 128, 256, 512]), m=st.integers(1, 3), k=st.integers(1, 600),
       n=st.integers(1, 3), seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 60),
       radius=st.sampled_from([0.0, 2.0**-140, 1e-3]))
def test_products_enclose_the_exact_product_of_their_midpoints(bits, m, k, n, seed, spread, radius):
    rng = np.random.default_rng(seed)
    left = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-spread, spread + 1, (m, k))
    right = rng.standard_normal((k, n)) * 2.0 ** rng.integers(-spread, spread + 1, (k, n))
    right = right.astype(np.float32)
    with working_precision(bits):
        a = _balls(left, radius)
        out = product(a, right.astype(np.float64), bits)
        exact = _exact(a, right)
        reference = flint.arb_mat(a.tolist()) * flint.arb_mat(right.astype(np.float64).tolist())
    with working_precision(4096):  # the exact value as a ball of radius 0
        for i in range(m):
            for j in range(n):
                value = exact[i][j]
                assert out[i, j].contains(flint.arb(flint.fmpq(value.numerator, value.denominator)))
                # what the operands' radii propagate (as FLINT's own product does, within a few
                # bits), and what the slices cut: 2^-bits of k times the row's and column's largest
                cut = 2.0 ** -(bits - 6) * k * np.abs(left[i]).max() * np.abs(right[:, j]).max()
                assert float(out[i, j].rad()) <= 16 * float(reference[i, j].rad()) + cut


def test_products_of_exact_floats_are_exact_where_the_precision_holds_them():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[0.5, -1.0], [0.25, 2.0**-40]])
    with working_precision(128):
        out = product(a, b, 128)
    assert [[float(x.mid()) for x in row] for row in out] == [[1.0, -1.0 + 2.0**-39], [2.5, -3.0 + 2.0**-38]]
    assert all(x.is_exact() for x in out.flat)


def test_a_row_with_an_undetermined_ball_makes_its_row_of_the_product_undetermined():
    with working_precision(128):
        a = np.array([[flint.arb(1), flint.arb.nan()], [flint.arb(2), flint.arb(3)]], dtype=object)
        out = product(a, np.array([[1.0], [1.0]]), 128)
    assert out[0, 0].is_nan() and out[1, 0] == 5


def test_an_undetermined_value_met_only_by_exact_zeros_leaves_the_product_determined():
    """Hard attention's weight 0 on a padded position whose value is undetermined: the term is 0."""
    with working_precision(128):
        weights = np.array([[flint.arb(1), flint.arb(0)], [flint.arb(0.5), flint.arb(0.5)]], dtype=object)
        values = np.array([[flint.arb(2), flint.arb(-1)], [flint.arb.nan(), flint.arb.nan()]], dtype=object)
        out = product(weights, values, 128)
    assert out[0, 0] == 2 and out[0, 1] == -1
    assert out[1, 0].is_nan() and out[1, 1].is_nan()


def test_long_products_of_full_mantissas_of_one_sign_stay_exact():
    """The worst case for the slices' sums: every element near its row's largest, one sign, all
    53 bits used, a long inner dimension."""
    rng = np.random.default_rng(7)
    k = 2000
    left = 1 - rng.random((2, k)) * 2.0**-30
    right = 1 - rng.random((k, 2)) * 2.0**-30
    with working_precision(128):
        a = _balls(left, 0.0)
        out = product(a, right, 128)
        exact = _exact(a, right)
    with working_precision(4096):
        for i in range(2):
            for j in range(2):
                value = exact[i][j]
                assert out[i, j].contains(flint.arb(flint.fmpq(value.numerator, value.denominator)))
                assert float(out[i, j].rad()) <= 2.0**-110 * float(value)


def test_batched_ball_products_broadcast_as_torch_matmul():
    generator = torch.Generator().manual_seed(1)
    for left, right in [((3,), (2, 3, 4)), ((2, 1, 1, 3), (5, 3, 2)), ((4, 3), (3,)), ((2, 2, 3), (3, 4))]:
        a = torch.randn(left, dtype=torch.float64, generator=generator)
        b = torch.randn(right, dtype=torch.float64, generator=generator)
        with working_precision(128):
            out = matmul(balls_of(a), b.numpy())
        expected = torch.matmul(a, b)
        assert out.shape == tuple(expected.shape)
        mids = torch.tensor([float(x.mid()) for x in np.asarray(out, dtype=object).flat], dtype=torch.float64)
        mids = mids.reshape(out.shape)
        assert torch.allclose(mids, expected, rtol=1e-12, atol=1e-12)


def test_a_weight_whose_few_small_elements_reach_further_down_is_multiplied_exactly():
    """A float32 weight matrix with three elements 2⁻⁴⁰ of the others: its finest slices hold
    those three alone (kept sparse), and the product is still the exact one."""
    rng = np.random.default_rng(3)
    right = rng.standard_normal((64, 40)).astype(np.float32)
    right[[3, 17, 50], [0, 21, 39]] *= np.float32(2.0**-40)
    left = rng.standard_normal((2, 64))
    with working_precision(256):
        out = product(left, right.astype(np.float64), 256)
    exact = _exact(left, right)
    for i in range(2):
        for j in range(40):
            assert out[i, j].rad() == 0 and _fraction(out[i, j]) == exact[i][j]


@settings(max_examples=15, deadline=None)
@given(bits=st.sampled_from([128, 256]), seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 40),
       radius=st.sampled_from([0.0, 2.0**-140, 1e-3]))
def test_batched_products_of_balls_enclose_each_exact_product(bits, seed, spread, radius):
    """Attention's products, one per head, run as one batched product: each contains the exact
    product of its own matrices' midpoints, as a product run alone does."""
    rng = np.random.default_rng(seed)
    left = rng.standard_normal((2, 3, 4, 6)) * 2.0 ** rng.integers(-spread, spread + 1, (2, 3, 4, 6))
    right = rng.standard_normal((2, 3, 6, 5))
    with working_precision(bits):
        a = _balls(left, radius)
        b = _balls(right, 0.0)
        out = matmul(a, b)
        alone = [[product(a[i, h], b[i, h], bits) for h in range(3)] for i in range(2)]
    assert out.shape == (2, 3, 4, 5)
    with working_precision(4096):
        for i in range(2):
            for h in range(3):
                exact = _exact(a[i, h], b[i, h])
                for r in range(4):
                    for c in range(5):
                        value = flint.arb(flint.fmpq(exact[r][c].numerator, exact[r][c].denominator))
                        assert out[i, h, r, c].contains(value) and alone[i][h][r, c].contains(value)
                        wide = float(out[i, h, r, c].rad())
                        assert wide <= 2 * float(alone[i][h][r, c].rad()) + 2.0 ** -(bits - 8)
