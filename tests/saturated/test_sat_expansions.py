"""Elementwise ball arithmetic on splits against exact rational arithmetic: every result contains
the exact result for every value of its operands' balls, signs are only claimed where true, and
exact operands stay exact where the precision holds them."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from saturated.precision import expansions as ex

_BITS = st.sampled_from([64, 128, 256, 512])


@st.composite
def _splits(draw: st.DrawFn, size: int = 6) -> np.ndarray:
    """A split of ``size`` elements: 1–4 terms spread over exponents ±60 (with cancellation
    allowed), radius 0 or some fraction of the value; exact zeros among them."""
    count = draw(st.integers(1, 4))
    terms = []
    for index in range(count):
        mantissas = draw(st.lists(st.floats(-1, 1, allow_nan=False), min_size=size, max_size=size))
        shift = draw(st.integers(-60, 60)) - 55 * index
        terms.append(np.ldexp(np.array(mantissas), shift))
    kind = draw(st.sampled_from(["exact", "small", "wide"]))
    scale = np.abs(terms[0]) + 2.0 ** -80
    radius = {"exact": np.zeros(size), "small": scale * 2.0 ** -100, "wide": scale * 0.25}[kind]
    return np.stack([*terms, radius])


def _exact(column: np.ndarray) -> tuple[Fraction, Fraction]:
    return sum((Fraction(float(t)) for t in column[:-1]), Fraction(0)), Fraction(float(column[-1]))


def _contains(out: np.ndarray, index: int, value: Fraction) -> bool:
    mid, radius = _exact(out[:, index])
    return abs(value - mid) <= radius


def _corners(a: np.ndarray, index: int) -> list[Fraction]:
    mid, radius = _exact(a[:, index])
    return [mid - radius, mid + radius]


@settings(max_examples=150, deadline=None)
@given(_splits(), _splits(), _BITS)
def test_sums_and_products_contain_every_exact_result(a: np.ndarray, b: np.ndarray, bits: int) -> None:
    total, product = ex.add(a, b, bits), ex.multiply(a, b, bits)
    for i in range(a.shape[1]):
        for x in _corners(a, i):
            for y in _corners(b, i):
                assert _contains(total, i, x + y)
                assert _contains(product, i, x * y)


@settings(max_examples=150, deadline=None)
@given(_splits(), _BITS)
def test_signs_and_relu_are_sound(a: np.ndarray, bits: int) -> None:
    sign, cut = ex.signs(a), ex.relu(a)
    for i in range(a.shape[1]):
        corners = _corners(a, i)
        if sign[i] == 1:
            assert min(corners) > 0
        elif sign[i] == -1:
            assert max(corners) < 0
        elif sign[i] == 0:
            assert corners == [0, 0]
        for x in corners:
            assert _contains(cut, i, max(x, Fraction(0)))


@settings(max_examples=150, deadline=None)
@given(_splits(), st.sampled_from([0.0, 2.0 ** -200, 2.0 ** -120, 2.0 ** -40, 1.0]))
def test_terms_folded_into_the_radius_leave_a_ball_holding_the_old_one(a: np.ndarray, widen: float) -> None:
    """Trailing terms below the radius's share go into it: the new ball holds both ends of the
    old one, and what is kept is only what the radius does not swamp."""
    radius = a[-1] + np.abs(a[0]) * widen
    terms, folded = ex.trimmed(list(a[:-1]), radius)
    out = np.stack([*terms, folded])
    assert 1 <= len(terms) <= a.shape[0] - 1
    for i in range(a.shape[1]):
        mid = sum((Fraction(float(t)) for t in a[:-1, i]), Fraction(0))
        for x in (mid - Fraction(float(radius[i])), mid + Fraction(float(radius[i]))):
            assert _contains(out, i, x)
    if len(terms) < a.shape[0] - 1:  # a term is kept where it is not below 2^-10 of the radius
        assert not (np.abs(terms[-1]) <= radius * 2.0 ** -10).all() or len(terms) == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=40))
def test_up_is_the_next_float_above_every_positive_number(patterns: list[int]) -> None:
    """``up`` steps the bit pattern; ``np.nextafter`` is the definition it must equal: every
    float64 (any bit pattern: subnormals, the largest float, ∞, NaN, −0.0) goes up by one unit
    where it is positive and stays where it is otherwise."""
    special = [0.0, -0.0, 5e-324, -5e-324, float(np.finfo(np.float64).tiny), 1.0,
               float(np.finfo(np.float64).max), math.inf, -math.inf, math.nan]
    x = np.concatenate([np.array(patterns, dtype=np.int64).view(np.float64), special])
    with np.errstate(over="ignore", invalid="ignore"):
        expected = np.where(x > 0, np.nextafter(x, np.inf), x)
    assert np.array_equal(ex.up(x).view(np.int64), expected.view(np.int64))
    strided, expected_strided = np.stack([x, x])[:, ::2], np.stack([expected, expected])[:, ::2]
    assert np.array_equal(ex.up(strided).view(np.int64), expected_strided.view(np.int64))  # not contiguous


def test_terms_fall_as_the_radius_grows() -> None:
    """A value that is exact keeps the terms of its precision; once its radius has grown past
    them, a sum or product keeps only the terms above the radius."""
    exact = ex.multiply(np.array([[1.0 / 3], [0.0]]), np.array([[1.0 / 3], [0.0]]), 256)
    assert exact.shape[0] - 1 == 2 and exact[-1, 0] == 0  # 1/9 of two floats: two terms, exact
    wide = ex.add(exact, np.array([[0.0], [2.0 ** -40]]), 256)
    assert wide.shape[0] - 1 == 1 and _contains(wide, 0, Fraction(1.0 / 3) ** 2)


def test_exact_operands_give_exact_results_to_the_precision() -> None:
    a = np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    b = np.array([[2.0 ** -70, 1.0 / 3, 5.0], [0.0, 0.0, 0.0]])
    total, product = ex.add(a, b, 128), ex.multiply(a, b, 128)
    assert not total[-1].any() and not product[-1].any()
    assert _exact(total[:, 0])[0] == 1 + Fraction(2) ** -70
    assert _exact(product[:, 1])[0] == 3 * Fraction(1.0 / 3)
    assert ex.signs(ex.add(total, ex.negated(total), 128)).tolist() == [0.0, 0.0, 0.0]


def test_a_cancellation_is_decided_from_the_terms_below() -> None:
    """(1 + 2⁻⁹⁰) − 1: the leading terms cancel and the sign comes from 2⁻⁹⁰."""
    one_plus = np.array([[1.0], [2.0 ** -90], [0.0]])
    difference = ex.add(one_plus, np.array([[-1.0], [0.0]]), 128)
    assert ex.signs(difference).tolist() == [1.0]
    assert ex.midpoints(difference).tolist() == [2.0 ** -90]


def test_undetermined_elements_stay_undetermined() -> None:
    a = np.array([[1.0, 0.0], [0.0, math.nan]])
    b = np.array([[1.0, 0.0], [0.0, 0.0]])
    for out in (ex.add(a, b, 128), ex.multiply(a, b, 128), ex.relu(a)):
        assert ex.undetermined(out).tolist() == [False, True]
    assert np.isnan(ex.signs(a)[1]) and np.isnan(ex.midpoints(a)[1])


def test_products_beyond_the_float_range_are_bounded_not_wrong() -> None:
    """Terms whose products would underflow or overflow are moved into the radius."""
    tiny = np.array([[2.0 ** -600], [0.0]])
    product = ex.multiply(tiny, tiny, 128)
    assert _contains(product, 0, Fraction(2) ** -1200)
    huge = np.array([[2.0 ** 600], [0.0]])
    assert ex.undetermined(ex.multiply(huge, huge, 128)).tolist() == [True]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([128, 256]))
def test_hard_attention_on_whole_rows_decides_what_the_row_by_row_rule_does(seed: int, bits: int) -> None:
    """Rows of scores with exact ties (one class), near-ties, masked positions and undetermined
    scores. Where :func:`_hard_row` on a row's ``arb`` balls decides, the whole-array rule decides
    the same; it may decide more (its radii are not rounded to 30 bits as ``arb``'s are), and every
    such decision is checked in exact rationals: each position left out lies wholly below the
    chosen ones."""
    from saturated.precision import rules
    from saturated.precision.balls import working_precision
    from saturated.precision.products import balls_of_split

    rng = np.random.default_rng(seed)
    rows, width = 12, 5
    values = np.round(rng.standard_normal((rows, width)), 1)  # repeats make exact ties
    radius = np.where(rng.random((rows, width)) < 0.3, 0.05, 0.0)
    radius[rng.random((rows, width)) < 0.05] = math.nan
    own = np.arange(rows * width).reshape(rows, width) + 1000
    ids = np.where(rng.random((rows, width)) < 0.5, values * 10, own)
    allowed = rng.random((rows, width)) < 0.85
    scores = rules._Scores(np.stack([values, radius]), ids.astype(np.int64), None, None, None)
    with working_precision(bits):
        weights, undecided, tied, reasons = rules._hard_rows(scores, allowed, bits)
        balls = balls_of_split(weights)
        for r in range(rows):
            expected, reason, row_tied = rules._hard_row(scores.row(r), allowed[r])
            if undecided[r]:
                assert reason is not None and bool(reasons[reason][r])
                assert not any(ball.is_finite() for ball in balls[r])
                continue
            assert not tied[r] and not row_tied
            if reason is None:
                assert all(got.mid() == want.mid() for got, want in zip(balls[r], expected))
            chosen = [j for j in range(width) if not balls[r][j].is_zero()]
            assert len({ids[r, j] for j in chosen}) == 1
            lowest = min(Fraction(float(values[r, j])) - Fraction(float(radius[r, j])) for j in chosen)
            for j in np.nonzero(allowed[r])[0]:
                if j not in chosen:
                    assert Fraction(float(values[r, j])) + Fraction(float(radius[r, j])) < lowest


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
                min_size=2, max_size=40), st.booleans())
def test_two_sum_is_exact(values: list[float], broadcast: bool) -> None:
    """s + e equals a + b exactly (in rationals) and s is the rounded sum, for arrays (a row
    broadcast against a column too) and for numbers."""
    half = len(values) // 2
    a, b = np.array(values[:half]), np.array(values[half:2 * half])
    if broadcast:
        a = a[:, None]
    s, e = ex.two_sum(a, b)
    a_full, b_full = np.broadcast_arrays(a, b)
    assert np.array_equal(s, a_full + b_full)
    for x, y, total, error in zip(a_full.ravel(), b_full.ravel(), np.ravel(s), np.ravel(e)):
        assert Fraction(float(total)) + Fraction(float(error)) == Fraction(float(x)) + Fraction(float(y))
    total, error = ex.two_sum(np.float64(values[0]), np.float64(values[1]))
    assert Fraction(float(total)) + Fraction(float(error)) == Fraction(values[0]) + Fraction(values[1])
