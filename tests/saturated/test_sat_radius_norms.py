"""ℓ2 radii of a product's own rounding from norms (saturated.rounding): ‖γ·m + t‖₂ ≤ γ·‖m‖₂ + t·√n,
and for a matrix product's Cauchy–Schwarz bound ‖m_i‖₂ ≤ ‖x_i‖·‖W‖_F, each rounded up; checked
against exact rationals on the same float operands. Also: the float steps those bounds round up
with, a narrowing cast of a radius, and views' plans kept per op."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import saturated.radii as radii
from saturated.radii import VectorBound, moved, rounded_up
from saturated.rounding import Rounding, gamma, product_rounding, smallest_subnormal, tensor_norms

DTYPES = [torch.float32, torch.float64]


def _random(shape: tuple[int, ...], seed: int, spread: int, dtype: torch.dtype) -> torch.Tensor:
    """Values of both signs whose magnitudes span 2^±spread (with a few exact zeros)."""
    generator = torch.Generator().manual_seed(seed)
    signs = torch.randn(shape, generator=generator, dtype=torch.float64)
    powers = torch.randint(-spread, spread + 1, shape, generator=generator).double()
    values = signs * 2.0**powers
    values[torch.rand(shape, generator=generator) < 0.1] = 0.0
    return values.to(dtype)


def _exact_rows(x: torch.Tensor, w: torch.Tensor) -> list[list[Fraction]]:
    """Σ_k |x_ik|·|w_jk| in exact rationals."""
    xs = [[Fraction(float(v)) for v in row] for row in x.abs().double()]
    ws = [[Fraction(float(v)) for v in row] for row in w.abs().double()]
    return [[sum((a * b for a, b in zip(row, wr)), Fraction(0)) for wr in ws] for row in xs]


def _at_least_norm(bound: float, vector: list[Fraction]) -> bool:
    """bound ≥ ‖vector‖₂, exactly (compared squared, in rationals)."""
    return Fraction(bound) >= 0 and Fraction(bound) ** 2 >= sum(v * v for v in vector)


def _linear(x: torch.Tensor, w: torch.Tensor) -> Rounding:
    """The bound of F.linear(x, w) for x and w known exactly, w with its norms kept."""
    weight = Rounding.of_exact(w, 1.0, norms=tensor_norms(w, w.dtype))
    return product_rounding(F.linear, [((x, Rounding.of_exact(x, 1.0)), (w, weight))], 2.0, int(x.shape[-1]),
                            torch.Size([*x.shape[:-1], w.shape[0]]))


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 60), rows=st.integers(1, 4),
       k=st.integers(1, 9), n=st.integers(1, 7))
def test_a_linear_layers_cheap_norm_bounds_the_exact_magnitudes_norm(dtype, seed, spread, rows, k, n) -> None:
    x, w = _random((rows, k), seed, spread, dtype), _random((n, k), seed + 1, spread, dtype)
    norms = _linear(x, w).cheap_norm
    assert norms is not None
    bound = norms(n)
    assert bound is not None and bound.shape == (rows, 1) and bound.dtype == dtype
    for row, exact in zip(bound[:, 0].tolist(), _exact_rows(x, w)):
        assert _at_least_norm(row, exact)
    assert norms(n + 1) is None  # read for a dimension it broadcasts to: no norm of its own


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 60), rows=st.integers(1, 4),
       k=st.integers(1, 9), n=st.integers(1, 7), shift=st.sampled_from([0, -70, -140]))
def test_a_linear_layers_cheap_magnitude_bounds_the_exact_one_element_by_element(dtype, seed, spread, rows, k,
                                                                                n, shift) -> None:
    """Cauchy–Schwarz as computed stands for Σ|x||w| (the outputs' zero test reads it first): each
    element at least the exact sum, also for operands so small that their squares underflow
    (shift -70: below float32's smallest normal square; -140: its subnormals)."""
    x = (_random((rows, k), seed, spread, torch.float64) * 2.0**shift).to(dtype)
    w = _random((n, k), seed + 1, spread, dtype)
    cheap = _linear(x, w).cheap
    assert cheap is not None
    for row, exact in zip(cheap().tolist(), _exact_rows(x, w)):
        assert all(Fraction(bound) >= value for bound, value in zip(row, exact))


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 60), k=st.integers(1, 6), n=st.integers(1, 5))
def test_a_matmuls_cheap_norm_bounds_the_exact_magnitudes_norm_per_matrix(dtype, seed, spread, k, n) -> None:
    x, y = _random((2, 3, k), seed, spread, dtype), _random((2, k, n), seed + 1, spread, dtype)
    rounding = product_rounding(torch.matmul, [((x, None), (y, None))], 2.0, k, torch.Size([2, 3, n]))
    assert rounding.cheap_norm is not None
    bound = rounding.cheap_norm(n)
    assert bound is not None and bound.shape == (2, 3, 1)
    for b in range(2):
        for row, exact in zip(bound[b, :, 0].tolist(), _exact_rows(x[b], y[b].T)):
            assert _at_least_norm(row, exact)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 40), k=st.integers(1, 12), n=st.integers(1, 6),
       factor=st.floats(-1e3, 1e3, allow_nan=False))
def test_the_true_rounding_error_of_a_linear_layer_lies_within_its_radius(dtype, seed, spread, k, n,
                                                                        factor) -> None:
    """The radius (its own rounding only: x is taken as exact) of x·Wᵀ, of that times a constant,
    and of a sum of two such products, against the error of the products computed in ``dtype``."""
    x, w, v = (_random(shape, seed + i, spread, dtype) for i, shape in enumerate([(3, k), (n, k), (n, k)]))
    exact_x = Rounding.of_exact(x, 1.0)
    first = product_rounding(F.linear, [((x, exact_x), (w, Rounding.of_exact(w, 1.0)))], 2.0, k,
                             torch.Size([3, n]))
    second = product_rounding(F.linear, [((x, exact_x), (v, Rounding.of_exact(v, 1.0)))], 2.0, k,
                              torch.Size([3, n]))
    computed = {"linear": (F.linear(x, w), first, lambda a, b: a),
                "scaled": (F.linear(x, w) * factor, first.scaled(factor), lambda a, b: a * Fraction(factor)),
                "sum": (F.linear(x, w) + F.linear(x, v), first.plus(second, torch.Size([3, n])),
                        lambda a, b: a + b)}
    exact_w = [[sum((Fraction(float(p)) * Fraction(float(q)) for p, q in zip(row, wr)), Fraction(0))
                for wr in weight.double()] for weight in (w, v) for row in x.double()]
    for name, (values, rounding, combine) in computed.items():
        for cheap in (False, True):
            radius = rounding.radius(dtype, 0.0, torch.Size([3, n]), cheap=cheap)
            for i in range(3):
                exact = [combine(a, b) for a, b in zip(exact_w[i], exact_w[3 + i])]
                errors = [Fraction(float(c)) - e for c, e in zip(values[i].double(), exact)]
                assert _at_least_norm(float(radius[i, 0]), errors), (name, cheap)


def test_the_radius_is_the_relative_bound_times_the_norm_not_a_pass_per_element() -> None:
    """A linear layer's radius from its weight's norms is γₙ·‖x‖·‖W‖_F, up to the rounding up."""
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # ‖W‖_F = 2
    radius = float(_linear(x, w).radius(torch.float64, 0.0, torch.Size([1, 3]), cheap=True)[0, 0])
    assert 10 * gamma(2, torch.float64) <= radius <= 10 * gamma(2, torch.float64) * (1 + 1e-13)


def test_the_underflow_term_of_a_radius_covers_a_product_that_underflows() -> None:
    """Products of subnormal size computed as 0: the radius is still at least t·√n."""
    tiny = smallest_subnormal(torch.float64)
    x = torch.full((1, 4), 2.0**-540, dtype=torch.float64)
    w = torch.full((3, 4), 2.0**-540, dtype=torch.float64)
    assert bool((F.linear(x, w) == 0).all())
    radius = _linear(x, w).radius(torch.float64, 0.0, torch.Size([1, 3]), cheap=True)
    assert float(radius[0, 0]) >= 4 * tiny * math.sqrt(3) > 0


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=50, deadline=None)
@given(a=st.floats(0, 1e30), b=st.floats(0, 1e30), op=st.sampled_from(["mul", "add"]))
def test_rounded_up_results_lie_above_the_exact_ones(dtype, a, b, op) -> None:
    x, y = torch.tensor([a], dtype=dtype), torch.tensor([b], dtype=dtype)
    result = rounded_up(x * y if op == "mul" else x + y)
    p, q = Fraction(float(x)), Fraction(float(y))
    exact = p * q if op == "mul" else p + q
    assert math.isinf(float(result)) or Fraction(float(result)) >= exact


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 100))
def test_a_radius_cast_to_a_narrower_dtype_is_rounded_up(seed: int, spread: int) -> None:
    radius = _random((5, 1), seed, spread, torch.float64).abs()
    cast = moved(lambda a: a.to(torch.float32), VectorBound(radius, torch.Size([5, 4])))
    assert isinstance(cast, VectorBound) and cast.radius.dtype == torch.float32
    assert bool((cast.radius.double() >= radius).all())
    elementwise = moved(lambda a: a.to(torch.float32), radius)
    assert isinstance(elementwise, torch.Tensor) and bool((elementwise.double() >= radius).all())


def test_a_views_plan_is_derived_once_per_key_and_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    derived = []
    original = radii._derived_plan

    def counted(fn, shape, device):  # type: ignore[no-untyped-def]
        derived.append(tuple(shape))
        return original(fn, shape, device)

    monkeypatch.setattr(radii, "_derived_plan", counted)
    monkeypatch.setattr(radii, "_PLANS", {})
    shape = torch.Size([2, 3, 8])
    heads = lambda a: a.reshape(*a.shape[:-1], 2, 4).transpose(1, 2)  # noqa: E731
    radius = torch.rand(2, 3, 1, dtype=torch.float64)
    unkeyed = moved(heads, VectorBound(radius, shape))
    first = moved(heads, VectorBound(radius, shape), key="heads")
    again = moved(heads, VectorBound(radius * 2, shape), key="heads")
    assert all(isinstance(out, VectorBound) for out in (unkeyed, first, again))
    assert isinstance(unkeyed, VectorBound) and isinstance(first, VectorBound)
    assert isinstance(again, VectorBound)
    assert torch.equal(first.radius, unkeyed.radius) and first.shape == unkeyed.shape
    assert torch.equal(again.radius, 2 * unkeyed.radius)
    assert derived == [tuple(shape)] * 2  # the unkeyed call and the first keyed one
    moved(heads, VectorBound(torch.rand(4, 3, 1, dtype=torch.float64), torch.Size([4, 3, 8])), key="heads")
    assert len(derived) == 3  # another shape: derived again
