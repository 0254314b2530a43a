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
    bilinear,
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


def test_power_of_a_two_part_value_is_its_binomial_series() -> None:
    """(2c² + 3c)^p = 2^p c^(2p) (1 + 1.5/c)^p, expanded by hand to the orders kept."""
    two, three = (torch.tensor([v], dtype=torch.float64) for v in (2.0, 3.0))
    x = Term(((two, 2.0), (three, 1.0)))
    inverse = power(x, -1.0, 4)  # ½c⁻² (1 − 1.5/c + 2.25/c² − 3.375/c³ …)
    assert [(float(a), d) for a, d in inverse.parts] == [(0.5, -2.0), (-0.75, -3.0), (1.125, -4.0),
                                                         (-1.6875, -5.0)]
    assert inverse.floor == -6.0
    root = power(x, 0.5, 3)  # √2 c (1 + ¾/c − 9/32 c⁻² …)
    expected = [(math.sqrt(2), 1.0), (0.75 * math.sqrt(2), 0.0), (-9 / 32 * math.sqrt(2), -1.0)]
    assert [d for _, d in root.parts] == [d for _, d in expected] and root.floor == -2.0
    assert [float(a) for a, _ in root.parts] == pytest.approx([a for a, _ in expected], rel=1e-15)


def test_a_fractional_power_of_a_negative_leading_coefficient_is_refused() -> None:
    x = Term(((torch.tensor([4.0, -9.0], dtype=torch.float64), 1.0),))  # −9c: no real √ for large c
    with pytest.raises(SaturationError) as caught:
        power(x, 0.5, 4)
    assert str(caught.value) == "fractional power 0.5 of a value with negative leading coefficient"
    assert torch.equal(value(power(x, 2.0, 4)), value(x) ** 2)  # an integer power is fine


def test_terms_whose_shapes_do_not_broadcast_are_refused_naming_them() -> None:
    x = Term(((torch.ones(2, 3), 1.0),))
    y = Term(((torch.ones(4, 3), 0.0),))
    with pytest.raises(SaturationError) as caught:
        add(x, y, 4)
    assert str(caught.value) == "shapes [(2, 3), (4, 3)] do not broadcast"


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
    (1, (), [1.0]),        # the leading order too, where a lower part can lead instead
    (1, (2.0,), [2.0]),    # and keeps a computed zero as well
    (1, (math.inf,), [1.0]),  # a mask part that is all zero masks nothing: never kept
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


# --- make, lift and bilinear against hand-built expansions --------------------------------------

A = torch.tensor([1.0, -2.0], dtype=torch.float64)
B = torch.tensor([3.0, 0.5], dtype=torch.float64)


def _degrees(t: Term) -> list[float]:
    return [d for _, d in t.parts]


def test_make_merges_equal_degrees_sorts_them_and_drops_those_at_the_floor() -> None:
    term = make([(A, 0.0), (B, 2.0), (A, 2.0), (B, 1.0)], 1.0, 4)
    assert _degrees(term) == [2.0] and term.floor == 1.0  # the part at the floor is not known
    assert term.lead.tolist() == (A + B).tolist()
    both = make([(A, 0.0), (B, 2.0), (A, 2.0)], -math.inf, 4)
    assert _degrees(both) == [2.0, 0.0] and both.parts[1][0].tolist() == A.tolist()


@pytest.mark.parametrize(("orders", "degrees", "floor"), [
    (1, [math.inf, 3.0], 2.0),         # a mask part does not count among the orders
    (2, [math.inf, 3.0, 2.0], 1.0),    # the first part cut off raises the floor
    (3, [math.inf, 3.0, 2.0, 1.0], -math.inf),
])
def test_make_keeps_orders_finite_parts_and_the_first_one_cut_off_is_the_floor(
        orders: int, degrees: list[float], floor: float) -> None:
    term = make([(B, 1.0), (A, 3.0), (-A, math.inf), (B, 2.0)], -math.inf, orders)
    assert _degrees(term) == degrees and term.floor == floor


def test_make_skips_a_known_zero_lead_and_keeps_every_part_after_it() -> None:
    term = make([(ZERO, 3.0), (A, 2.0), (B, 1.0)], -math.inf, 2)
    assert _degrees(term) == [2.0, 1.0] and term.floor == -math.inf
    # An all-zero part below a nonzero lead is a value (zero at that degree), not dropped.
    inner = make([(A, 3.0), (ZERO, 2.0), (B, 1.0)], -math.inf, 3)
    assert _degrees(inner) == [3.0, 2.0, 1.0]


def test_make_without_parts_above_the_floor_is_a_zero_of_the_broadcast_shape_and_dtype() -> None:
    term = make([(torch.ones(1, 3, dtype=torch.float64), 0.0), (torch.ones(2, 1), -1.0)], 0.5, 2)
    assert term.floor == 0.5 and _degrees(term) == [0.5]
    assert term.lead.shape == (2, 3) and term.lead.dtype == torch.float64 and not term.lead.any()


def test_make_expands_every_part_to_the_broadcast_shape() -> None:
    term = make([(torch.tensor([2.0]), 1.0), (torch.tensor([1.0, 4.0, 5.0]), 0.0)], -math.inf, 2)
    assert [tuple(a.shape) for a, _ in term.parts] == [(3,), (3,)]
    assert term.lead.tolist() == [2.0, 2.0, 2.0]


def test_lift_keeps_exact_values_at_degree_zero_with_an_exact_bound() -> None:
    term = lift(torch.tensor([1.5, -2.0]), 1e9)
    assert _degrees(term) == [0.0] and term.floor == -math.inf and term.lead.tolist() == [1.5, -2.0]
    bound = term.rounding(0.0)
    assert bound is not None and bound.exact and bound.length == 0
    assert bound.magnitude().tolist() == [1.5, 2.0]


def test_lift_of_a_python_number_and_of_integers_gives_the_default_float() -> None:
    number = lift(-3, 1e9)
    assert number.lead.dtype == torch.get_default_dtype() and number.lead.item() == -3.0
    ints = lift(torch.tensor([1, 2]), 1e9)
    assert ints.lead.dtype == torch.get_default_dtype() and ints.lead.tolist() == [1.0, 2.0]
    masked = lift(-math.inf, 1e9)
    assert _degrees(masked) == [math.inf, 0.0] and masked.lead.item() == -1.0


def test_lift_counts_an_entry_at_the_threshold_as_a_mask_and_keeps_the_rest_bounded() -> None:
    term = lift(torch.tensor([1e9, -5.0, -2e9], dtype=torch.float64), 1e9)
    assert _degrees(term) == [math.inf, 0.0]
    assert all(a.dtype == torch.float64 for a, _ in term.parts)  # float64 values stay float64
    assert term.parts[0][0].tolist() == [1.0, 0.0, -1.0]
    assert term.parts[1][0].tolist() == [0.0, -5.0, 0.0]
    bound = term.rounding(0.0)
    assert bound is not None and bound.exact and bound.magnitude().tolist() == [0.0, 5.0, 0.0]


X2 = Term(((A, 2.0), (B, 0.0)))   # exact: a·c² + b
Y2 = Term(((B, 1.0), (A, -1.0)))  # exact: b·c + a/c


@pytest.mark.parametrize(("orders", "degrees", "floor"), [
    (1, [3.0], 1.0),
    (2, [3.0, 1.0], -1.0),
    (3, [3.0, 1.0, -1.0], -math.inf),
])
def test_a_product_keeps_the_pairs_reaching_the_highest_degrees(orders: int, degrees: list[float],
                                                                floor: float) -> None:
    # (a c² + b)(b c + a/c) = ab c³ + (a² + b²) c + ab/c, by hand.
    out = mul(X2, Y2, orders)
    assert _degrees(out) == degrees and out.floor == floor
    expected = {3.0: A * B, 1.0: A * A + B * B, -1.0: B * A}
    for coef, degree in out.parts:
        assert torch.equal(coef, expected[degree])


def test_a_product_carries_each_degree_s_rounding_from_its_own_pairs() -> None:
    out = mul(X2, Y2, 3)
    top, middle = out.rounding(3.0), out.rounding(1.0)
    assert top is not None and middle is not None
    # One product per element: n = 1 for one pair, 1·2 + 2 − 1 = 3 for the two pairs at c¹.
    assert top.length == 1 and middle.length == 3
    assert torch.equal(top.magnitude(), (A * B).abs())
    assert torch.equal(middle.magnitude(), A.abs() * A.abs() + B.abs() * B.abs())


def test_a_matrix_product_sums_its_pairs_in_one_matmul_per_degree() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b, p, q = (torch.randn(2, 3, generator=gen, dtype=torch.float64) for _ in range(4))
    x = Term(((a, 1.0), (b, 0.0)))
    y = Term(((p.T, 1.0), (q.T, 0.0)))
    out = bilinear(torch.matmul, x, y, 3)
    assert _degrees(out) == [2.0, 1.0, 0.0]
    assert torch.allclose(out.parts[1][0], a @ q.T + b @ p.T, rtol=1e-14)
    middle = out.rounding(1.0)
    assert middle is not None and middle.length == 3 * 2 + 1  # three products per element, two pairs


def test_stacking_the_left_parts_gives_the_same_product_and_ops_that_cannot_stack_are_not_stacked() -> None:
    weight = torch.tensor([[1.0, 2.0], [0.5, -1.0]], dtype=torch.float64)
    x = Term(((A.reshape(1, 2), 1.0), (B.reshape(1, 2), 0.0)))
    y = Term(((weight, 1.0),))
    stacked = bilinear(torch.matmul, x, y, 2, stack_left=True)
    plain = bilinear(torch.matmul, x, y, 2)
    assert _degrees(stacked) == _degrees(plain) == [2.0, 1.0]
    for (s, _), (p, _) in zip(stacked.parts, plain.parts):
        assert torch.allclose(s, p, rtol=1e-15)

    def product(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ij,jk->ik", u, v)  # a fixed rank: no leading dimension to stack on

    out = bilinear(product, x, y, 2)
    assert torch.allclose(out.parts[1][0], B.reshape(1, 2) @ weight, rtol=1e-15)
    assert out.roundings == ()  # no known length for an arbitrary op: no rounding bound


def test_a_product_of_values_known_only_to_their_floors_is_an_unknown_of_higher_floor() -> None:
    # x = a·c² + O(c^0.5), y exact b·c: the product is ab·c³ + O(c^1.5).
    x = Term(((A, 2.0),), floor=0.5)
    out = mul(x, Term(((B, 1.0),)), 2)
    assert _degrees(out) == [3.0] and out.floor == 1.5
    # A value with nothing known above its floor times anything: a zero of the product's shape.
    unknown = Term(((torch.zeros(2, 3, dtype=torch.float64), 0.0),), floor=0.0)
    nothing = bilinear(torch.matmul, unknown, Term(((torch.ones(3, 4, dtype=torch.float64), 1.0),)), 2)
    assert nothing.floor == 1.0 and _degrees(nothing) == [1.0]
    assert nothing.lead.shape == (2, 4) and not nothing.lead.any()
    assert nothing.roundings == ()  # nothing computed, nothing to bound


def test_a_product_of_known_zeros_leaves_an_unknown_zero_without_a_rounding_bound() -> None:
    # Every tracked pair has an all-zero factor: the result is O(c^floor) and no product was
    # summed, so the zero part at the floor carries no bound (reading one used to fail).
    out = mul(Term(((ZERO, 1.0),), floor=0.0), Term(((B, 1.0),)), 2)
    assert _degrees(out) == [1.0] and out.floor == 1.0 and not out.lead.any()
    assert out.rounding(1.0) is None


def _einsum_product(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.einsum("i,i->i", u, v)


def test_an_op_of_unknown_length_keeps_no_computed_zero_unless_its_length_is_given() -> None:
    tiny = torch.tensor([1e-200, 0.0], dtype=torch.float64)
    x, y = Term(((tiny, 1.0), (ONE, 0.0))), Term(((tiny, 1.0),))
    # Without a length there is no bound to judge a zero by: the underflowed lead is dropped.
    unknown = bilinear(_einsum_product, x, y, 2)
    assert _degrees(unknown) == [1.0] and unknown.roundings == ()
    # Given one product per element, the zero stays for the rules, with its bound (n = 2·1 + 0).
    given_length = bilinear(_einsum_product, x, y, 2, length=2)
    assert _degrees(given_length) == [2.0, 1.0]
    top = given_length.rounding(2.0)
    assert top is not None and top.length == 2


def test_a_mask_times_an_exact_value_stays_a_mask_but_times_an_approximate_one_is_refused() -> None:
    mask = lift(torch.tensor([-1e30, 2.0], dtype=torch.float64), 1e9)
    out = mul(mask, lift(torch.tensor([3.0, 4.0], dtype=torch.float64), 1e9), 2)
    assert _degrees(out) == [math.inf, 0.0]
    assert out.parts[0][0].tolist() == [-3.0, 0.0] and out.parts[1][0].tolist() == [0.0, 8.0]
    # The mask's products do not count among the orders: at one order, the c¹ part is kept.
    masked = mul(mask, Term(((B, 1.0), (A, 0.0))), 1)
    assert _degrees(masked) == [math.inf, 1.0] and masked.floor == 0.0
    assert masked.parts[0][0].tolist() == [-(B[0] + A[0]).item(), 0.0]
    with pytest.raises(SaturationError, match=r"^a masking constant \(±∞\) multiplies a value known only"):
        mul(mask, Term(((A, 1.0),), floor=0.0), 2)
    with pytest.raises(SaturationError, match=r"^two masking constants \(±∞\) multiply each other$"):
        mul(mask, mask, 2)


def _batched(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("path", ["stacked", "matmul", "pairwise"])
def test_a_product_that_underflows_keeps_its_computed_zero_on_every_path(path: str) -> None:
    # Leads of 10⁻²⁰⁰ multiply to 0 at c²; the c¹ part is the sum of the cross products.
    tiny, one, two = 1e-200, 1.0, 2.0
    if path == "matmul":  # batched (2, 1, 2) @ (2, 2, 1): the parts concatenate along the contraction
        x = Term(((_batched([[[tiny, tiny]], [[tiny, 0.0]]]), 1.0),
                  (_batched([[[one, two]], [[two, one]]]), 0.0)))
        y = Term(((_batched([[[tiny], [tiny]], [[tiny], [tiny]]]), 1.0),
                  (_batched([[[one], [one]], [[two], [one]]]), 0.0)))
        out = bilinear(torch.matmul, x, y, 2)
        cross = x.parts[0][0] @ y.parts[1][0] + x.parts[1][0] @ y.parts[0][0]
    else:
        x = Term(((_batched([tiny, tiny]), 1.0), (_batched([one, two]), 0.0)))
        y_parts = ((_batched([tiny, tiny]), 1.0),) if path == "stacked" else \
            ((_batched([tiny, tiny]), 1.0), (_batched([two, one]), 0.0))
        y = Term(y_parts)
        out = bilinear(torch.mul, x, y, 2, stack_left=path == "stacked")
        cross = x.parts[1][0] * y.parts[0][0] + (x.parts[0][0] * y.parts[1][0] if len(y_parts) > 1 else 0)
    assert _degrees(out) == [2.0, 1.0]
    assert not out.lead.any()  # 10⁻⁴⁰⁰ underflows; kept for the rules to judge by its bound
    assert torch.equal(out.parts[1][0], cross)


@pytest.mark.parametrize("computed_side", ["left", "right"])
def test_a_product_carries_in_the_error_of_a_computed_operand(computed_side: str) -> None:
    # |x̂ŷ − xy| ≤ b_x·|y| when only x was computed (bound b_x) and y is exact, and symmetrically.
    computed = Rounding(1.0, lambda: ONE, 2)
    rounded, exact = Term(((A, 1.0),), roundings=(computed,)), Term(((B, 1.0),))
    x, y = (rounded, exact) if computed_side == "left" else (exact, rounded)
    bound = mul(x, y, 1).rounding(2.0)
    assert bound is not None and bound.carried is not None
    operand = computed.bound(torch.float32, 0.0, carried=True, cheap=True)
    assert torch.allclose(bound.carried(torch.float32, 0.0), operand * B.abs(), rtol=1e-12)
