"""``SaturatedModel(..., undetermined="nan")``: an output the most orders do not decide is NaN for
exactly the batch entries (and vectors) it is undetermined in; every other value is the limit."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.rounding import Rounding
from saturated.rules import Settings
from saturated.saturate import (
    SaturatedModel,
    _batch_axes,
    _final,
    _in_batch,
    _normalize_all,
    _normalized,
)
from saturated.spectral import largest_magnitude
from saturated.terms import NeedsOrders, Term


class Cancelling(nn.Module):
    """h = W₁x (degree 1, with a rounding bound), out = W₂h = h₀ − h₁ = −x₁ (degree 2): for x₁ = 0
    it is computed as an exact 0 from rounded operands, so no precision can tell it from a tiny
    nonzero value, which would lead (the issue-24 message: "within rounding of zero at its leading
    degree")."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(2, 2, bias=False)
        self.second = nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
            self.second.weight.copy_(torch.tensor([[1.0, -1.0]]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.first(x)
        return self.second(h), h


X = torch.tensor([[3.0, 1.0], [3.0, 0.0], [2.0, 5.0]])


def test_raise_is_the_default_and_names_the_output() -> None:
    with pytest.raises(SaturationError, match="output 0 is within rounding of zero at its leading "
                                              r"degree 2 \(tracking 16 orders\)"):
        SaturatedModel(Cancelling(), Settings())(X[1:2])


def test_an_undetermined_entry_is_nan_in_that_output_only() -> None:
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X)
    first, hidden = out.value
    assert first[:, 0].tolist()[0] == -1.0 and math.isnan(first[1, 0]) and first[2, 0] == -5.0
    assert hidden.tolist() == [[3.0, 4.0], [3.0, 3.0], [2.0, 7.0]]  # determined everywhere
    assert out.degrees == (2.0, 1.0) and out.refined == (1,)
    assert out.orders == 2  # see test_a_zero_test_no_order_can_settle_stops_at_two_orders


def test_raise_keeps_a_vector_within_rounding_of_zero_at_the_batch_degree() -> None:
    """In a batch, the output's degree is set by the entries that lead (2: −x₁ ≠ 0 for the first
    and last), and the middle entry's value at that degree is its limit, −x₁ = 0, up to rounding;
    only its direction is undetermined, which ``"nan"`` marks and ``"raise"`` does not test (alone,
    the entry's degree itself is undetermined: see the test above)."""
    kept = SaturatedModel(Cancelling(), Settings())(X)
    marked = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X)
    assert kept.degrees[0] == marked.degrees[0] == 2.0
    assert kept.value[0][:, 0].tolist() == [-1.0, 0.0, -5.0]
    assert math.isnan(marked.value[0][1, 0])


def test_a_zero_test_no_order_can_settle_stops_at_two_orders() -> None:
    """Issue 24: W₂h's operand h carries rounding error in, so the exact step cannot tell its
    computed 0 from a tiny value, and from two orders on more orders change neither the part nor
    its bound: the entry is final there (a 4-layer T5 spent most of its time on 4, 8 and 16
    orders that could not help). With ``"raise"`` the message still names 16 orders."""
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2])
    assert out.orders == 2 and out.refined == (0,)
    assert math.isnan(out.value[0].item()) and out.value[1].tolist() == [[3.0, 3.0]]


def test_an_output_undetermined_in_every_entry_has_no_degree() -> None:
    out = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2])
    assert math.isnan(out.value[0].item()) and math.isnan(out.degrees[0])
    assert out.value[1].tolist() == [[3.0, 3.0]] and out.degrees[1] == 1.0
    both = SaturatedModel(Cancelling(), Settings(), undetermined="nan")(X[1:2].expand(2, 2))
    assert torch.isnan(both.value[0]).all() and math.isnan(both.degrees[0])


def test_the_policy_is_checked() -> None:
    with pytest.raises(SaturationError, match="undetermined must be 'raise' or 'nan'"):
        SaturatedModel(Cancelling(), Settings(), undetermined="zero")


def test_only_a_zero_test_the_exact_step_cannot_settle_is_final() -> None:
    """Final: vectors whose bound is positive somewhere; not final where the exact step decides
    (exact values with no carried error), nor a vector known to be zero (bound 0), whose batch
    entry computed alone lets a lower part lead."""
    coef = torch.zeros(2, 3, dtype=torch.float64)
    bound = torch.tensor([[0.0, 1e-9, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    carried = Rounding(1.0, lambda: coef.abs(), 1,
                       carried=lambda dtype, rtol: torch.zeros(3, dtype=dtype))
    final = _final(coef, bound, carried, Settings())
    assert final is not None and final.tolist() == [[True] * 3, [False] * 3]
    assert _final(coef, bound, Rounding.of_exact(coef, 1.0), Settings()) is None
    # A bound that overflowed (0·∞ is NaN) bounds nothing, as a positive one: more orders change
    # neither it nor the coefficients, so such vectors are final too (a 16-layer Mixtral's float64
    # bounds overflow from layer 12 on, and its entries tried up to 16 orders for them).
    overflowed = torch.tensor([[0.0, 0.0, 0.0], [math.nan, 0.0, 0.0]], dtype=torch.float64)
    final = _final(coef, overflowed, carried, Settings())
    assert final is not None and final.tolist() == [[False] * 3, [True] * 3]


def test_nan_in_one_entry_leaves_the_zero_test_of_the_others() -> None:
    """Issue 24: a tie left NaN in one entry of a 4-sentence T5 batch switched off the zero test of
    the whole output, so another entry's hidden states, within rounding of zero, passed as
    determined (the same sentence alone was undetermined). Each vector is tested on its own."""
    coef = torch.tensor([[math.nan, 1.0], [1e-20, 0.0], [1.0, 2.0]], dtype=torch.float64)
    term = Term(((coef, 1.0),), roundings=(Rounding(1.0, lambda: torch.ones_like(coef), 1),))
    value, degree, has_nan, _, _ = _normalized(term, 0, Settings(), vectors=True)
    assert degree == 1.0 and has_nan
    assert math.isnan(value[0, 0]) and value[0, 1] == 1.0  # the tie's element stays as it is
    assert torch.isnan(value[1]).all() and value[2].tolist() == [1.0, 2.0]


class Normed(nn.Module):
    """LayerNorm of h = x (an identity map, degree 1), h itself, h time-major, Σx (exact) and None:
    the limit of LayerNorm([a, b]) is [sign(a − b), sign(b − a)] (degree 0); an entry with a = b
    has a constant row, whose limit no order of this pass decides."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2, bias=False)
        self.norm = nn.LayerNorm(2, elementwise_affine=False)
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        h = self.lin(x)
        return self.norm(h), h, h.transpose(0, 1), x.sum(-1), None


FLOAT64_ONE_ORDER = Settings(orders=1, max_precision=0)  # the float path alone, no ball refinement
NORMED = torch.tensor([[1.0, 2.0], [3.0, 3.0], [2.0, 1.0]])
EQUAL_ROW = ("layer_norm of a row whose leading coefficients are all equal [at node 'layer_norm' (op "
             "aten.layer_norm.default, module norm)] (tracking 1 orders)")


def test_an_entry_whose_pass_needs_more_orders_is_nan_in_every_output() -> None:
    """With one order the batch's pass fails on entry 1 (its constant row): each entry is then
    computed alone, entries 0 and 2 to their limits, entry 1 NaN in every output."""
    out = SaturatedModel(Normed(), Settings(orders=1, max_precision=0), undetermined="nan")(NORMED)
    nan = math.nan
    expected = ([[-1.0, 1.0], [nan, nan], [1.0, -1.0]], [[1.0, 2.0], [nan, nan], [2.0, 1.0]],
                [[1.0, nan, 2.0], [2.0, nan, 1.0]], [3.0, nan, 3.0])
    for value, rows in zip(out.value[:4], expected, strict=True):
        torch.testing.assert_close(value, torch.tensor(rows), equal_nan=True, rtol=0, atol=0)
    assert out.value[4] is None and out.degrees == (0.0, 1.0, 1.0, 0.0, None)
    assert out.orders == 1 and out.refined == (0, 1, 2)
    pair = SaturatedModel(Normed(), FLOAT64_ONE_ORDER, undetermined="nan")(x=NORMED[[1, 0]])  # by keyword
    assert torch.isnan(pair.value[0][0]).all() and pair.value[0][1].tolist() == [-1.0, 1.0]
    assert torch.isnan(pair.value[2][:, 0]).all() and pair.value[2][:, 1].tolist() == [1.0, 2.0]
    with pytest.raises(SaturationError) as caught:
        SaturatedModel(Normed(), FLOAT64_ONE_ORDER)(NORMED)
    assert str(caught.value) == EQUAL_ROW
    with pytest.raises(SaturationError) as caught:  # ball arithmetic cannot normalize it either
        SaturatedModel(Normed(), Settings(orders=1))(NORMED)
    # the row's variance is exactly 0, which no precision changes: 128 bits are the last tried
    assert str(caught.value).startswith(EQUAL_ROW + "; and for batch entry 1: layer_norm (the variance of "
                                        "a row): a coefficient not proved positive at 128 bits")


class NormedPair(Normed):
    """:class:`Normed`'s first output, and a second input of another size: no batch dimension."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return super().forward(x)[0], 2 * y


def test_when_no_entry_passes_the_error_names_what_needs_orders() -> None:
    limit = SaturatedModel(Normed(), Settings(orders=1, max_precision=0), undetermined="nan")
    for x in (NORMED[1:2], NORMED[[1, 1]]):  # one entry (no batch), two alike
        with pytest.raises(SaturationError) as caught:
            limit(x)
        assert str(caught.value) == EQUAL_ROW
    # Inputs without a common batch dimension are one entry, recomputed whole: row 0 of each
    # input alone ([1, 2] and [1, 1]) would pass, the whole fails on its row [3, 3].
    with pytest.raises(SaturationError) as caught:
        SaturatedModel(NormedPair(), FLOAT64_ONE_ORDER, undetermined="nan")(NORMED[[0, 1]], torch.ones(3, 2))
    assert str(caught.value) == EQUAL_ROW


class NormedAndSummed(Normed):
    """:class:`Normed`'s LayerNorm beside Σ over the batch of h: an output with no batch dimension."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return super().forward(x)[0], self.lin(x).sum(0)


def test_entries_computed_alone_need_a_batch_dimension_in_every_output() -> None:
    """Entry 1's pass fails, so the entries are computed one at a time; output 1 (a sum over the
    batch, shape (2,)) has no dimension to put each entry's value along."""
    with pytest.raises(SaturationError) as caught:
        SaturatedModel(NormedAndSummed(), Settings(orders=1, max_precision=0), undetermined="nan")(NORMED)
    assert str(caught.value) == ("output 1 has no batch dimension to merge recomputed entries along "
                                 "(shape (2,) for 1 of 3); expected one dimension the exported graph "
                                 "sizes by the batch")


class NormedAndIndexed(Normed):
    """:class:`Normed`'s LayerNorm beside argmax h: an integer output, one index per entry."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return super().forward(x)[0], self.lin(x).argmax(-1)


def test_entries_computed_alone_merge_an_integer_output_along_the_batch() -> None:
    """Entries [1, 2] and [2, 1] computed one at a time: the LayerNorm limits [−1, 1] and [1, −1]
    (degree 0), the argmax 1 and 0 (exact), each in its entry's row and the integers kept."""
    limit = SaturatedModel(NormedAndIndexed(), Settings(orders=1, max_precision=0), undetermined="nan")
    x = NORMED[[0, 2]]
    axes = _batch_axes(limit.program(x))
    settings = Settings(orders=1, ties="nan")
    (normed, normed_degree), (index, index_degree) = limit._one_at_a_time(
        (x,), {}, settings, torch.float64, 2, "unused: every entry passes", axes)
    assert normed.tolist() == [[-1.0, 1.0], [1.0, -1.0]] and normed_degree == 0.0
    assert index.tolist() == [1, 0] and index.dtype == torch.int64 and index_degree == 0.0


def test_an_integer_output_cannot_mark_an_entry_whose_pass_fails() -> None:
    """Entry 1 ([3, 3]) of :data:`NORMED` needs more orders: its argmax has no NaN to hold."""
    with pytest.raises(SaturationError) as caught:
        SaturatedModel(NormedAndIndexed(), Settings(orders=1, max_precision=0), undetermined="nan")(NORMED)
    assert str(caught.value) == (f"output 1 holds integers, which cannot be NaN where a batch entry's "
                                 f"pass needs more orders: {EQUAL_ROW}; expected floating outputs, or "
                                 "only those asked for with outputs=")


class NormedAndArgmax(Normed):
    """:class:`Normed`'s LayerNorm beside the argmax over the whole batch of h: a 0-dim integer."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return super().forward(x)[0], self.lin(x).argmax()


def test_a_0_dim_integer_output_has_no_batch_dimension_to_merge_along() -> None:
    """Entries computed one at a time (entry 1's pass fails): the argmax over the batch has no row
    per entry, so it is refused for its shape, before any entry could be marked."""
    with pytest.raises(SaturationError) as caught:
        SaturatedModel(NormedAndArgmax(), Settings(orders=1, max_precision=0), undetermined="nan")(NORMED)
    assert str(caught.value) == ("output 1 has no batch dimension to merge recomputed entries along "
                                 "(shape () for 3 entries, shape () for 1 of 3); expected one dimension "
                                 "the exported graph sizes by the batch")


# _normalized on hand-made terms: the highest part not known to be zero leads, a part within its
# rounding bound of zero is undetermined, and where no order can settle that it is final.

F64 = torch.float64


def _t(rows: list[Any]) -> torch.Tensor:
    return torch.tensor(rows, dtype=F64)


def _bounded(coef: torch.Tensor, degree: float, *, exact: list[list[float]] | None = None,
             carried: float | None = None, length: int = 1) -> Rounding:
    """A bound γ₁·1 per element (about 1.1e-16 in float64; 0 with ``length`` 0); ``exact``: each
    element's partials, whose exact sum is its exact value; ``carried``: error carried in."""
    index = None if exact is None else (lambda: torch.arange(coef.numel()).reshape(coef.shape))
    partials = None if exact is None else (lambda at: _t(exact)[at])
    carry = None if carried is None else (lambda dtype, rtol: torch.full(coef.shape, carried, dtype=dtype))
    magnitude = torch.ones_like(coef) if length else torch.zeros_like(coef)
    return Rounding(degree, lambda: magnitude, length, index, partials, carried=carry)


def test_the_largest_coefficient_in_magnitude() -> None:
    assert largest_magnitude(_t([[-3.0, 2.0]])) == 3.0 and largest_magnitude(_t([0.5, 1.0])) == 1.0
    assert largest_magnitude(torch.empty(0, 2)) == 0.0 and largest_magnitude(torch.zeros(2)) == 0.0
    assert math.isnan(largest_magnitude(_t([math.nan, 1.0])))
    assert largest_magnitude(_t([-math.inf, 1.0])) == math.inf


LEAD, NEXT = _t([[3.0, -4.0], [1.0, 0.0]]), _t([[1.0, 2.0], [5.0, 6.0]])


@pytest.mark.parametrize(("parts", "floor", "degree"), [
    (((LEAD, 2.0), (NEXT, 1.0)), -math.inf, 2.0),          # the highest part leads
    (((torch.zeros(2, 2, dtype=F64), 2.0), (NEXT, 1.0)), -math.inf, 1.0),  # a known zero does not
    (((torch.zeros(2, 2, dtype=F64), 2.0),), -math.inf, -math.inf),  # zero all the way down
    (((torch.empty(0, 2, dtype=F64), 1.0),), -math.inf, -math.inf),  # no elements
])
def test_the_highest_part_not_known_to_be_zero_leads(parts: Any, floor: float, degree: float) -> None:
    term = Term(parts, floor)
    for vectors in (False, True):
        value, found, has_nan, final, _ = _normalized(term, 0, Settings(), vectors=vectors)
        assert found == degree and value is (parts[0][0] if degree != 1.0 else parts[1][0])
        assert has_nan is False and final is None


def test_a_nan_bound_proves_no_vector_nonzero() -> None:
    """A magnitude with 0·∞ in it gives a NaN bound: the element may be anything within it, so a
    vector whose other elements are within their bounds of zero is undetermined, not read as 5."""
    coef = torch.tensor([[1e-20, 5.0], [1.0, 2.0]], dtype=torch.float64)
    magnitude = torch.tensor([[1e15, math.nan], [1.0, 1.0]], dtype=torch.float64)
    term = Term(((coef, 1.0),), roundings=(Rounding(1.0, lambda: magnitude, 1),))
    value, degree, has_nan, _, _ = _normalized(term, 0, Settings(), vectors=True)
    assert degree == 1.0 and has_nan
    assert torch.isnan(value[0]).all() and value[1].tolist() == [1.0, 2.0]


def test_a_part_zero_at_every_tracked_order_needs_more_orders() -> None:
    term = Term(((torch.zeros(2, 2, dtype=F64), 2.0),), floor=0.0)
    with pytest.raises(NeedsOrders) as caught:
        _normalized(term, 3, Settings())
    assert str(caught.value) == "output 3 is zero at every tracked order"


def test_nan_elements_are_kept_and_marked() -> None:
    coef = _t([[math.nan, 0.0], [0.0, 0.0]])  # the other elements zero: not a known-zero part
    value, degree, has_nan, final, _ = _normalized(Term(((coef, 2.0), (NEXT, 1.0))), 0, Settings())
    assert value is coef and degree == 2.0 and has_nan is True and final is None


@pytest.mark.parametrize(("coef", "degree", "message"), [
    ([[math.inf, 1.0]], 1.0, "output 2 has non-finite leading coefficients (overflow or 0·∞)"),
    ([[math.nan, math.inf]], 1.0, "output 2 has non-finite leading coefficients (overflow or 0·∞)"),
    ([[math.nan, -math.inf]], 1.0, "output 2 has non-finite leading coefficients (overflow or 0·∞)"),
    ([[1.0, 1.0]], math.inf, "output 2 holds a masking constant (±∞ in the limit)"),
    ([[1.0, 1.0]], -math.inf, "output 2 holds a masking constant (±∞ in the limit)"),
])
@pytest.mark.parametrize("bounded", [False, True])
def test_non_finite_leading_parts_are_refused(coef: list[list[float]], degree: float, message: str,
                                              bounded: bool) -> None:
    value = _t(coef)
    roundings = (_bounded(value, degree),) if bounded else ()
    with pytest.raises(SaturationError) as caught:
        _normalized(Term(((value, degree),), roundings=roundings), 2, Settings())
    assert type(caught.value) is SaturationError and str(caught.value) == message


@pytest.mark.parametrize("coef", [[[1e-20, 0.0], [0.0, -1e-18]], [[0.0, 0.0], [0.0, 0.0]]])
def test_a_part_within_rounding_of_zero_is_undetermined_and_final_without_exact_values(
        coef: list[list[float]]) -> None:
    value = _t(coef)
    term = Term(((value, 1.5), (NEXT, 1.0)), roundings=(_bounded(value, 1.5),))
    with pytest.raises(NeedsOrders) as caught:
        _normalized(term, 5, Settings())
    assert str(caught.value) == "output 5 is within rounding of zero at its leading degree 1.5"
    assert caught.value.final.tolist() == [[True, True], [True, True]]  # type: ignore[attr-defined]


def test_a_coefficient_equal_to_its_bound_is_within_rounding() -> None:
    rounding = _bounded(torch.zeros(1, 2, dtype=F64), 1.0)
    value = rounding.bound(F64, 0.0, carried=True).expand(1, 2).clone()
    with pytest.raises(NeedsOrders, match="within rounding of zero"):
        _normalized(Term(((value, 1.0), (NEXT[:1], 0.0)), roundings=(rounding,)), 0, Settings())


def test_carried_error_widens_the_bound() -> None:
    value = _t([[0.5, -0.25]])  # far above γ₁, within an error of 1 carried in
    term = Term(((value, 1.0), (NEXT[:1], 0.0)), roundings=(_bounded(value, 1.0, carried=1.0),))
    with pytest.raises(NeedsOrders, match="within rounding of zero"):
        _normalized(term, 0, Settings())
    plain = Term(((value, 1.0), (NEXT[:1], 0.0)), roundings=(_bounded(value, 1.0),))
    assert _normalized(plain, 0, Settings())[:3] == (value, 1.0, False)


@pytest.mark.parametrize(("length", "exact"), [(0, None), (0, [[1.0, -1.0]] * 4), (1, [[1.0, -1.0]] * 4)])
def test_a_zero_part_the_exact_step_proves_zero_gives_way_to_the_next(
        length: int, exact: list[list[float]] | None) -> None:
    """A zero part with no error (bound 0, with or without exact values), or one whose operands'
    exact values sum to 0: the next part leads."""
    zero = torch.zeros(2, 2, dtype=F64)
    rounding = _bounded(zero, 2.0, exact=exact, length=length)
    value, degree, has_nan, final, _ = _normalized(Term(((zero, 2.0), (NEXT, 1.0)), roundings=(rounding,)),
                                                0, Settings())
    assert value is NEXT and degree == 1.0 and not has_nan and final is None


@pytest.mark.parametrize(("settings", "carried", "final"), [
    (Settings(), None, False),                  # the exact step decides: not final
    (Settings(exact_ties=False), None, True),   # no exact step
    (Settings(), 0.0, True),                    # operands that carry error in: none can settle it
])
def test_a_computed_zero_with_nonzero_exact_value_is_undetermined(settings: Settings,
                                                                  carried: float | None, final: bool) -> None:
    zero = torch.zeros(1, 2, dtype=F64)
    rounding = _bounded(zero, 2.0, exact=[[1e-30, 0.0], [0.0, 0.0]], carried=carried)
    with pytest.raises(NeedsOrders) as caught:
        _normalized(Term(((zero, 2.0), (NEXT[:1], 1.0)), roundings=(rounding,)), 0, settings)
    found = caught.value.final  # type: ignore[attr-defined]
    assert (found is None) if not final else found.tolist() == [[True, True]]


@pytest.mark.parametrize(("count", "exact_zero"), [(4096, True), (4097, False)])
def test_the_exact_step_sums_at_most_4096_elements(count: int, exact_zero: bool) -> None:
    zero = torch.zeros(1, count, dtype=F64)
    rounding = _bounded(zero, 2.0, exact=[[0.5, -0.5]] * count)
    term = Term(((zero, 2.0), (torch.ones(1, count, dtype=F64), 1.0)), roundings=(rounding,))
    if exact_zero:
        assert _normalized(term, 0, Settings())[1] == 1.0
    else:
        with pytest.raises(NeedsOrders, match="within rounding of zero"):
            _normalized(term, 0, Settings())


def test_a_zero_part_whose_operands_carry_error_is_not_settled_exactly() -> None:
    zero = torch.zeros(1, 2, dtype=F64)
    rounding = _bounded(zero, 2.0, exact=[[1.0, -1.0]] * 2, carried=0.0)
    with pytest.raises(NeedsOrders, match="within rounding of zero"):
        _normalized(Term(((zero, 2.0), (NEXT[:1], 1.0)), roundings=(rounding,)), 0, Settings())


VECTORS = _t([[[1e-20, 0.0], [1.0, 2.0]], [[3.0, 4.0], [0.0, -1e-20]]])  # two hidden vectors


@pytest.mark.parametrize(("exact", "final"), [
    (None, [[True, False], [False, True]]),   # no exact values: final where hidden
    ([[0.0, 1.0]] * 8, None),                 # exact values could settle it: nowhere final
])
def test_each_vector_within_rounding_of_zero_is_nan_with_vectors(exact: list[list[float]] | None,
                                                                 final: list[list[bool]] | None) -> None:
    term = Term(((VECTORS, 1.0),), roundings=(_bounded(VECTORS, 1.0, exact=exact),))
    value, degree, has_nan, found, _ = _normalized(term, 0, Settings(), vectors=True)
    expected = VECTORS.clone()
    expected[0, 0] = expected[1, 1] = math.nan
    torch.testing.assert_close(value, expected, equal_nan=True, rtol=0, atol=0)
    assert degree == 1.0 and has_nan is True
    if final is None:
        assert found is None
    else:
        assert found is not None and found.all(-1).tolist() == final and found.any(-1).tolist() == final
    for plain in (_normalized(term, 0, Settings()), _normalized(term, 0, Settings(), vectors=False)):
        assert plain[0] is VECTORS and plain[2] is False and plain[3] is None


def test_final_holds_for_a_whole_vector_with_a_positive_bound() -> None:
    coef = torch.zeros(2, 2, 3, dtype=F64)
    bound = torch.zeros(2, 2, 3, dtype=F64)
    bound[0, 1, 2] = bound[1, 0, 0] = 1e-9
    final = _final(coef, bound, _bounded(coef, 1.0, carried=0.0), Settings())
    assert final is not None and final.all(-1).tolist() == [[False, True], [True, False]]
    assert final.any(-1).tolist() == final.all(-1).tolist()
    exact = _bounded(coef, 1.0, exact=[[0.0]] * 12, carried=0.0)  # error carried in: final
    assert _final(coef, bound, exact, Settings()) is not None
    assert _final(coef, bound, _bounded(coef, 1.0, exact=[[0.0]] * 12), Settings()) is None


def test_normalize_all_marks_undetermined_outputs_only_when_lenient() -> None:
    """Outputs in order: a tensor computed exactly (degree 0), a non-tensor, a term whose part is
    within rounding of zero, a term zero at every tracked order, one with a hidden vector, and one
    that leads plainly."""
    within = _t([[1e-20, 0.0], [0.0, 0.0]]).float()
    hidden = _t([[1e-20, 0.0], [1.0, 2.0]])
    outputs = [
        torch.tensor([1, 2]), "label",
        Term(((within, 1.0), (NEXT.float(), 0.0)), roundings=(_bounded(within, 1.0),)),
        Term(((torch.zeros(2, 2, dtype=F64), 1.0),), floor=0.0),
        Term(((hidden, 1.0),), roundings=(_bounded(hidden, 1.0),)),
        Term(((LEAD, 2.0),)),
    ]
    with pytest.raises(NeedsOrders, match="output 2 is within rounding of zero"):
        _normalize_all(outputs, Settings())
    with pytest.raises(NeedsOrders, match="output 2 is within rounding of zero"):
        _normalize_all(outputs, Settings(), lenient=False)
    pairs, with_nan, finals, _ = _normalize_all(outputs, Settings(), lenient=True)
    assert pairs[0][0] is outputs[0] and pairs[0][1] == 0.0 and pairs[1] == ("label", None)
    for index, dtype in ((2, torch.float32), (3, F64)):  # undetermined: NaN of the output's shape
        value, degree = pairs[index]
        assert value.shape == (2, 2) and value.dtype == dtype and torch.isnan(value).all()
        assert math.isnan(degree)
    assert torch.isnan(pairs[4][0][0]).all() and pairs[4][0][1].tolist() == [1.0, 2.0]
    assert pairs[4][1] == 1.0 and pairs[5] == (LEAD, 2.0)
    assert with_nan == [2, 3, 4]
    assert sorted(finals) == [2, 4]  # no final for a part zero at every order: more orders may help
    assert finals[2].all() and finals[4].tolist() == [[True, True], [False, False]]


def test_messages_about_a_sub_batch_number_its_entries_as_in_the_input() -> None:
    message = "tie in batch entry 1 and batch entry 0 at row 1"
    assert _in_batch(message, [4, 7]) == "tie in batch entry 7 and batch entry 4 at row 1"
    assert _in_batch(message, None) == message


class CancellingAndNormed(nn.Module):
    """:class:`Cancelling`'s −x₁ (undetermined where x₁ = 0) beside :class:`Normed`'s LayerNorm
    (a pass that fails where x₀ = x₁)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelling, self.normed = Cancelling(), Normed()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cancelling(x)[0], self.normed(x)[0]


def test_entries_computed_alone_keep_their_own_undetermined_outputs() -> None:
    x = torch.tensor([[3.0, 0.0], [2.0, 2.0], [1.0, 2.0]])  # −x₁ undetermined; pass fails; both known
    out = SaturatedModel(CancellingAndNormed(), Settings(orders=1, max_precision=0), undetermined="nan")(x)
    first, normed = out.value
    assert math.isnan(first[0, 0]) and math.isnan(first[1, 0]) and first[2, 0] == -2.0
    assert normed[0].tolist() == [1.0, -1.0] and torch.isnan(normed[1]).all()
    assert normed[2].tolist() == [-1.0, 1.0] and out.degrees == (2.0, 0.0)


def _weighted() -> nn.Module:
    net = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[1.0, -2.0]]))
    return net


WITH_NAN = torch.tensor([[1.0, 2.0], [math.nan, 1.0], [3.0, 1.0]])


@pytest.mark.parametrize("ties", ["raise", "uniform"])
def test_nan_from_the_inputs_is_refused_naming_the_entries(ties: str) -> None:
    limit = SaturatedModel(_weighted(), Settings(ties=ties))
    for x, entries in ((WITH_NAN, "[1]"), (WITH_NAN[1:2], "all")):  # one entry: no batch to name
        with pytest.raises(SaturationError) as caught:
            limit(x)
        assert str(caught.value) == f"outputs hold NaN (batch entries {entries}); expected finite inputs"


@pytest.mark.parametrize(("ties", "undetermined"), [("nan", "raise"), ("raise", "nan")])
def test_nan_from_the_inputs_is_kept_where_nan_is_asked_for(ties: str, undetermined: str) -> None:
    out = SaturatedModel(_weighted(), Settings(ties=ties), undetermined=undetermined)(WITH_NAN)
    assert out.value[0, 0] == -3.0 and math.isnan(out.value[1, 0]) and out.value[2, 0] == 1.0
    assert out.degrees == 1.0 and out.refined == (1,) and out.orders == 16


def test_with_uniform_ties_no_zero_test_is_final() -> None:
    """Uniform ties average the tied values, which more orders may change: the entry is
    recomputed up to the most orders (16), as with no exact step at all."""
    out = SaturatedModel(Cancelling(), Settings(ties="uniform"), undetermined="nan")(X[1:2])
    assert out.orders == 16 and out.refined == (0,) and math.isnan(out.value[0].item())


def test_entries_computed_alone_keep_a_float64_models_precision() -> None:
    x = NORMED.double() / 10  # 0.1, 0.2, …: not float32 numbers
    out = SaturatedModel(Normed().double(), Settings(orders=1, max_precision=0), undetermined="nan")(x)
    hidden = out.value[1]
    assert hidden.dtype == F64 and torch.equal(hidden[[0, 2]], x[[0, 2]]) and torch.isnan(hidden[1]).all()


class NormedAndFlagged(Normed):
    """:class:`Normed`'s LayerNorm beside tanh(w·x) with w = (20000.001953125, −10000): for
    x = (1, 2), w·x = 0.001953125 exactly, within float32's rounding bound (≈ 5e-3) of zero but
    far outside float64's, so only float64 certifies its sign."""

    def __init__(self) -> None:
        super().__init__()
        self.flag = nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.flag.weight.copy_(torch.tensor([[20000.001953125, -10000.0]]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return super().forward(x)[0], torch.tanh(self.flag(x))


def test_entries_computed_alone_are_computed_in_float64() -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, 3.0]])  # entry 1's pass fails
    out = SaturatedModel(NormedAndFlagged(), Settings(orders=1, max_precision=0), undetermined="nan")(x)
    normed, flag = out.value
    assert normed[0].tolist() == [-1.0, 1.0] and flag[0, 0] == 1.0  # the sign float64 certifies
    assert normed.dtype == flag.dtype == torch.float32  # rounded back to the model's dtype
    assert torch.isnan(normed[1]).all() and torch.isnan(flag[1]).all()
    assert out.degrees == (0.0, 0.0) and out.refined == (0, 1)


def test_a_vector_equal_to_its_bound_is_within_rounding() -> None:
    rounding = _bounded(torch.zeros(2, 2, dtype=F64), 1.0)
    coef = torch.cat([rounding.bound(F64, 0.0, carried=True)[:1], _t([[1.0, 2.0]])])
    value = _normalized(Term(((coef, 1.0),), roundings=(rounding,)), 0, Settings(), vectors=True)[0]
    assert torch.isnan(value[0]).all() and value[1].tolist() == [1.0, 2.0]


def test_a_vector_exactly_zero_at_every_order_is_final() -> None:
    """A padding token's zero embedding: exact values all 0, no lower part, nothing unknown below.
    No order gives it a direction, so its entry is not recomputed for it; a vector whose exact
    values are not zero, or a term with an unknown rest, stays open."""
    coef = _t([[[0.0, 0.0], [1.0, 2.0]]])
    exact = [[0.0]] * 2 + [[1.0]] * 2
    term = Term(((coef, 1.0),), roundings=(_bounded(coef, 1.0, exact=exact),))
    value, degree, has_nan, found, zero = _normalized(term, 0, Settings(), vectors=True)
    assert has_nan and degree == 1.0 and bool(value[0, 0].isnan().all()) and found is not None
    assert found.all(-1).tolist() == [[True, False]] and found.any(-1).tolist() == [[True, False]]
    assert zero is not None and torch.equal(zero, found)  # nor does any precision
    nonzero = Term(((coef, 1.0),), roundings=(_bounded(coef, 1.0, exact=[[0.5, -0.25]] * 4),))
    assert _normalized(nonzero, 0, Settings(), vectors=True)[3:] == (None, None)
    open_below = Term(((coef, 1.0),), floor=0.0, roundings=(_bounded(coef, 1.0, exact=exact),))
    assert _normalized(open_below, 0, Settings(), vectors=True)[3:] == (None, None)
    lower = Term(((coef, 1.0), (_t([[[0.0, 1.0], [0.0, 0.0]]]), 0.0)),
                 roundings=(_bounded(coef, 1.0, exact=exact),))
    assert _normalized(lower, 0, Settings(), vectors=True)[3:] == (None, None)


def test_a_vector_proved_zero_at_every_order_is_zero_only_where_its_exact_values_are() -> None:
    """Final for the orders is not final for the precision: a vector within rounding of zero whose
    operands carry error in may be nonzero, which balls could show; only a proved zero is kept
    from them."""
    coef = _t([[[0.0, 0.0], [1.0, 2.0]]])
    carried = Term(((coef, 1.0),), roundings=(_bounded(coef, 1.0, carried=0.0),))
    _, _, has_nan, final, zero = _normalized(carried, 0, Settings(), vectors=True)
    assert has_nan and final is not None and final.any(-1).tolist() == [[True, False]] and zero is None


class PaddedEmbedding(nn.Module):
    """A projected embedding whose padding row is zero (index 0): a padded position's vector is
    exactly zero for every c, and its direction is undetermined at any precision."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(4, 3, padding_idx=0).double()
        self.proj = nn.Linear(3, 3, bias=False).double()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(ids))


@pytest.mark.parametrize("ids", [[[1, 0, 2], [2, 3, 1]], [[1, 0, 2]]])  # a batch; one entry alone
def test_an_entry_undetermined_only_in_zero_vectors_is_not_refined(monkeypatch: pytest.MonkeyPatch,
                                                                   ids: list[list[int]]) -> None:
    """A narrowed 2-layer Gemma spent 5.8 s in ball arithmetic on its padded sentences, against
    float64's 1.1 s, for vectors no precision gives a direction. Such an entry keeps the fast
    path's reason and values, and the balls run for no entry; without the plumbing (the zero
    vectors not passed on), the same values came out of a ball pass on that entry."""
    module = sys.modules["saturated.saturate"]
    calls: list[int] = []
    run_balls = module.run_balls

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["entries"])
        return run_balls(*args, **kwargs)

    monkeypatch.setattr(module, "run_balls", counted)
    batch = torch.tensor(ids)  # entry 0 has a padded position
    out = SaturatedModel(PaddedEmbedding(), Settings(), undetermined="nan")(batch)
    assert calls == [] and out.precisions == ()
    padded = [[False, True, False], [False, False, False]][:len(ids)]
    assert torch.isnan(out.value).all(-1).tolist() == padded
    assert torch.isnan(out.value).any(-1).tolist() == padded
    assert list(out.reasons) == [0] and "exactly zero for every c at output 0" in out.reasons[0][0]
    monkeypatch.setattr(module, "_only_zero_vectors", lambda *args: {})
    before = SaturatedModel(PaddedEmbedding(), Settings(), undetermined="nan")(batch)
    assert calls == [1] and [entries for _, entries, _ in before.precisions] == [(0,)]
    torch.testing.assert_close(before.value, out.value, equal_nan=True, rtol=0, atol=0)
    assert before.degrees == out.degrees == 2.0


def _counted(coef: torch.Tensor, magnitude: float, cheap: float | None) -> tuple[Rounding, list[int]]:
    """A bound γ₄·``magnitude`` per element whose magnitude counts its reads, with a cheap
    magnitude ``cheap`` (NaN in the rows whose coefficients are NaN, as a norm of them is)."""
    reads: list[int] = []

    def full() -> torch.Tensor:
        reads.append(1)
        return torch.full_like(coef, magnitude)

    rough = None if cheap is None else (
        lambda: torch.full_like(coef, cheap).masked_fill(coef.isnan(), math.nan))
    return Rounding(1.0, full, 4, cheap=rough), reads


@pytest.mark.parametrize(("rows", "cheap", "read", "hidden"), [
    ([[3.0, 1e-20], [0.0, -2.0]], 1.0, False, [False, False]),  # each vector has an element beyond 2·cheap
    ([[3.0, 1e-20], [math.nan, math.nan]], 1.0, False, [False, False]),  # and a NaN vector no bound reaches
    ([[3.0, 1e-20], [1e-17, 0.0]], 1.0, True, [False, True]),  # a vector within: the full bound decides
    ([[3.0, 1e-20], [1e-15, 0.0]], 10.0, True, [False, False]),  # beyond the full bound, not 2·cheap
    ([[3.0, 1e-20], [1e-17, 0.0]], math.nan, True, [False, True]),  # a NaN cheap bound decides nothing
])
def test_the_output_zero_test_reads_the_full_bound_only_where_the_cheap_one_leaves_a_vector_within(
        rows: list[list[float]], cheap: float, read: bool, hidden: list[bool]) -> None:
    """The zero test of an output tries its cheap bound first (Cauchy–Schwarz for a matrix
    product): the full one, γ₄·1 ≈ 4.4e-16 here, is computed only where some vector has every
    element within twice the cheap one, and the answer is the full bound's either way."""
    coef = _t(rows)
    answers = []
    for rough in (cheap, None):
        rounding, reads = _counted(coef, 1.0, rough)
        term = Term(((coef, 1.0),), roundings=(rounding,))
        value, degree, has_nan, final, _ = _normalized(term, 0, Settings(), vectors=True)
        assert bool(reads) == (read or rough is None) and degree == 1.0
        newly = value.isnan() & ~coef.isnan()
        assert newly.all(-1).tolist() == hidden and (newly.any(-1) == newly.all(-1)).all()
        answers.append((value, has_nan, None if final is None else final.tolist()))
    (first, first_nan, first_final), (second, second_nan, second_final) = answers
    assert torch.equal(first.isnan(), second.isnan()) and torch.equal(first.nan_to_num(), second.nan_to_num())
    assert first_nan == second_nan and first_final == second_final
