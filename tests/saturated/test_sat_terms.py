"""Expansion arithmetic against the numbers it stands for, at large c in float64."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from saturated.errors import SaturationError
from saturated.rounding import Rounding, exact_sign
from saturated.terms import (
    NeedsOrders,
    Term,
    add,
    computed_degrees,
    exp_series,
    lift,
    make,
    mul,
    power,
    reduce,
    scale,
)

C = 1e3


def value(t: Term, c: float = C) -> torch.Tensor:
    """Σ aᵢ·c^dᵢ of the known parts (finite degrees only)."""
    return sum(a * c ** d for a, d in t.parts if math.isfinite(d))  # type: ignore[return-value]


@st.composite
def terms(draw: st.DrawFn, n: int = 4) -> Term:
    """An exact expansion: up to three parts of integer degrees in [−2, 3], nonzero leading part."""
    degrees = sorted(draw(st.sets(st.integers(-2, 3), min_size=1, max_size=3)), reverse=True)
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    parts = [(torch.randn(n, generator=gen, dtype=torch.float64), float(d)) for d in degrees]
    lead = parts[0][0]
    parts[0] = (torch.where(lead.abs() < 0.1, 0.5, lead), parts[0][1])
    return Term(tuple(parts))


@given(terms(), terms())
def test_sum_and_product_are_exact_with_enough_orders(x: Term, y: Term) -> None:
    assert torch.allclose(value(add(x, y, 16)), value(x) + value(y), rtol=1e-12)
    assert torch.allclose(value(mul(x, y, 16)), value(x) * value(y), rtol=1e-12)


@given(terms(), st.sampled_from([-1.0, -0.5, 0.5, 3.0]))
def test_power_error_is_below_the_floor(x: Term, exponent: float) -> None:
    if exponent != int(exponent):
        x = Term(((x.lead.abs(), x.degree), *x.parts[1:]))
    out = power(x, exponent, 6)
    exact = value(x) ** exponent
    # What is left out is O(c^floor); at c = 1000 it must be far below the leading size.
    error = (value(out) - exact).abs().max()
    assert error <= 100 * C ** out.floor + 1e-9 * exact.abs().max()


def test_leading_order_only_keeps_the_floor() -> None:
    x = Term(((torch.tensor([2.0]), 3.0), (torch.tensor([7.0]), 1.0)))
    y = make(x.parts, -math.inf, 1)
    assert [d for _, d in y.parts] == [3.0] and y.floor == 1.0


def test_exp_series_matches_exp() -> None:
    x = Term(((torch.tensor([0.3, -2.0], dtype=torch.float64), -1.0),))
    out = exp_series(x, 8)
    assert torch.allclose(value(out, 10.0), torch.exp(value(x, 10.0)), rtol=1e-8)


def test_masking_constants_become_infinite_parts() -> None:
    t = lift(torch.tensor([0.0, torch.finfo(torch.float32).min, 2.0]), 1e9)
    assert [d for _, d in t.parts] == [math.inf, 0.0]
    assert t.parts[0][0].tolist() == [0.0, -1.0, 0.0]


def test_power_of_elements_leading_at_different_degrees() -> None:
    x = Term(((torch.tensor([4.0, 0.0], dtype=torch.float64), 2.0),
              (torch.tensor([0.0, 9.0], dtype=torch.float64), 0.0)))
    out = power(x, -0.5, 4)
    assert torch.allclose(value(out), value(x) ** -0.5, rtol=1e-12)


def test_power_of_a_value_unknown_at_every_order_needs_more_orders() -> None:
    x = Term(((torch.tensor([1.0, 0.0]), 2.0),), floor=0.0)
    with pytest.raises(NeedsOrders, match="zero at every tracked order"):
        power(x, -0.5, 1)


def test_two_masks_cannot_multiply() -> None:
    mask = lift(torch.tensor([-1e30, 0.0]), 1e9)
    with pytest.raises(SaturationError, match="masking constants"):
        mul(mask, mask, 4)


def test_reduce_sums_part_by_part() -> None:
    x = Term(((torch.tensor([[1.0, 3.0]]), 2.0), (torch.tensor([[1.0, 1.0]]), 0.0)))
    out = reduce(x, [1], False, mean=False)
    assert [(a.tolist(), d) for a, d in out.parts] == [([4.0], 2.0), ([2.0], 0.0)]


ZERO, ONE = torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)


@pytest.mark.parametrize(("orders", "computed", "degrees"), [
    (2, (), [1.0]),        # more orders: a zero lead is a known zero, the next part leads
    (2, (2.0,), [2.0, 1.0]),  # unless it is a computed zero, kept for the rules to judge
    (1, (), [2.0]),        # the leading order keeps its zeros either way
    (1, (math.inf,), [2.0]),  # a mask part that is all zero masks nothing: never kept
])
def test_make_drops_a_zero_lead_only_where_it_is_known(orders: int, computed: tuple[float, ...],
                                                        degrees: list[float]) -> None:
    term = make([(ZERO, math.inf), (ZERO, 2.0), (ONE, 1.0)], -math.inf, orders, computed)
    assert [d for _, d in term.parts] == degrees


def _rounded(degree: float, exact: bool | None) -> Term:
    """A part of ``degree`` with an exact bound, a computed one (False) or none (None)."""
    if exact is None:
        return Term(((ONE, degree),))
    bound = Rounding.of_exact(ONE, degree) if exact else Rounding(degree, lambda: ONE, 2)
    return Term(((ONE, degree),), roundings=(bound,))


@pytest.mark.parametrize(("left", "right", "summed", "expected"), [
    (True, True, True, set()),      # fl(a + b) = 0 only if a = −b: a sum of exact parts is exact
    (True, False, True, {1.0}),     # a computed summand: its zero may be rounding's
    (None, True, True, {1.0}),      # no bound to tell
    (None, None, False, set()),     # a selection of parts without bounds keeps what they were
    (False, None, False, {1.0}),    # a selection passing a computed part on
    (True, True, False, set()),
])
def test_computed_degrees_are_where_a_zero_may_be_rounding(left: bool | None, right: bool | None,
                                                         summed: bool, expected: set[float]) -> None:
    assert computed_degrees([_rounded(1.0, left), _rounded(1.0, right)], summed) == expected
    # A part on one side only is unsure exactly when it carries a computed bound.
    assert computed_degrees([_rounded(1.0, left), _rounded(0.0, True)], summed) == (
        {1.0} if left is False else set())


def test_a_sum_keeps_its_summands_exact_values_when_they_share_a_factor() -> None:
    x = torch.tensor([[0.1, 0.2], [1e16, 1.0]], dtype=torch.float64)
    y = torch.tensor([[-0.3], [-1e16]], dtype=torch.float64)
    first = Rounding.of_exact(x[:, :1], 1.0).plus(Rounding.of_exact(x[:, 1:], 1.0), torch.Size([2, 1]))
    total = first.plus(Rounding.of_exact(y, 1.0), torch.Size([2, 1]))
    assert total.index is not None and total.partials is not None
    rows = total.partials(total.index().flatten())
    exact = [sum(map(Fraction, row), Fraction(0)) for row in torch.cat([x, y], -1).tolist()]
    assert exact_sign(rows) == [(e > 0) - (e < 0) for e in exact] == [1, 1]
    # −2·y is known only up to its factor 2: its sum with x has no exact values.
    halved = Rounding.of_exact(y, 1.0).scaled(-2.0)
    assert halved.factor == 0.5 and halved.partials is not None
    assert exact_sign(halved.partials(torch.tensor([0]))) == [1]  # −2·(−0.3) > 0
    assert Rounding.of_exact(x[:, :1], 1.0).plus(halved, torch.Size([2, 1])).partials is None


def test_a_scaling_by_a_tensor_drops_the_rounding_bounds_and_by_a_number_scales_them() -> None:
    x = Term(((ONE, 1.0),), roundings=(Rounding(1.0, lambda: ONE, 2),))
    assert scale(x, torch.tensor([2.0, 3.0], dtype=torch.float64)).roundings == ()
    bound = scale(x, -2.0).rounding(1.0)
    assert bound is not None and bound.length == 3 and bound.magnitude().tolist() == [2.0, 2.0]


def test_a_zeroth_power_is_one_even_where_nothing_is_known() -> None:
    x = Term(((torch.tensor([0.0, -2.0], dtype=torch.float64), 1.0),), floor=0.0)
    out = power(x, 0.0, 2)
    assert out.parts[0][1] == 0.0 and out.lead.tolist() == [1.0, 1.0]


def test_a_power_of_a_masking_constant_is_refused() -> None:
    with pytest.raises(SaturationError, match=r"^a power of a masking constant \(±∞\)$"):
        power(lift(torch.tensor([-1e30, -1e30]), 1e9), -1.0, 2)


@pytest.mark.parametrize(("mean", "keepdim"), [(False, True), (True, False)])
def test_a_sum_or_mean_sums_the_rounding_bounds_over_the_same_dimensions(mean: bool, keepdim: bool) -> None:
    magnitude = torch.arange(1.0, 7.0, dtype=torch.float64).reshape(2, 3)
    x = Term(((magnitude, 1.0),), roundings=(Rounding(1.0, lambda: magnitude, 2),))
    out = reduce(x, [1], keepdim, mean)
    bound = out.rounding(1.0)
    expected = magnitude.sum(dim=1, keepdim=keepdim) / (3 if mean else 1)
    assert bound is not None and bound.length == 2 + 2 + (1 if mean else 0)
    assert bound.magnitude().shape == expected.shape
    assert torch.allclose(bound.magnitude(), expected, rtol=1e-15)


def test_a_sum_keeps_a_zero_part_where_parts_without_bounds_meet_and_each_sides_bounds() -> None:
    # Two orders, no bounds at all: the degree-1 parts cancel to 0, which no bound can vouch for.
    total = add(Term(((ONE, 1.0), (ONE, 0.0))), Term(((-ONE, 1.0), (ONE, 0.0))), 2)
    assert [d for _, d in total.parts] == [1.0, 0.0] and total.parts[0][0].tolist() == [0.0, 0.0]
    # One side with a bound, the other with none at another degree: each part keeps its own.
    first, second = Rounding(1.0, lambda: ONE, 2), Rounding(0.0, lambda: ONE, 3)
    total = add(Term(((ONE, 1.0),), roundings=(first,)), Term(((ONE, 0.0),), roundings=(second,)), 2)
    assert total.rounding(1.0) is first and total.rounding(0.0) is second
    alone = add(Term(((ONE, 1.0),), roundings=(first,)), Term(((ONE, 0.0),)), 2)
    assert alone.rounding(1.0) is first and alone.rounding(0.0) is None


def test_a_product_that_underflows_to_zero_is_kept_as_a_computed_zero() -> None:
    tiny = torch.tensor([1e-200, 0.0], dtype=torch.float64)
    product = mul(Term(((tiny, 1.0), (ONE, 0.0))), Term(((tiny, 1.0),)), 2)
    assert product.parts[0][0].tolist() == [0.0, 0.0]  # 10⁻⁴⁰⁰ underflows
    assert [d for _, d in product.parts] == [2.0, 1.0]
    # A factor that is all zero makes a known zero, dropped when more orders are tracked.
    known = mul(Term(((ZERO, 1.0), (ONE, 0.0))), Term(((tiny, 1.0),)), 2)
    assert [d for _, d in known.parts] == [1.0]
