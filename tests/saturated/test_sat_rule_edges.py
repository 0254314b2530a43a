"""Edges of the exact-limit rules, term arithmetic and tie handling that the model-level tests do
not reach: each case of a rule on a tiny hand-built input whose limit is worked out by hand.

Fast by design (no pretrained model): `mutmut` runs this file for every mutant of
`saturated/rules/`, `saturated/terms.py` and `saturated/ties.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.rounding import Rounding
from saturated.rules import RULES, TIE_AWARE, Settings, register_rule
from saturated.rules.common import part_sign
from saturated.rules.normalization import _composed_layer_norm, _maybe_constant_rows, _one_degree_affine
from saturated.rules.products import _einsum_length
from saturated.rules.registry import _rule
from saturated.rules.shape import _caster, _structural
from saturated.rules.softmax import _shared_weights
from saturated.saturate import saturate
from saturated.terms import NeedsOrders, Term, bilinear, exp_series, lift, power
from saturated.ties import TiedWeights, contract, einsum_contracts_rows

aten = torch.ops.aten
F64 = torch.float64


def test_einsum_contraction_check_reads_the_equation() -> None:
    # Weights 'ij' contracted over j against values 'jd', rows kept: the product decides ties.
    assert einsum_contracts_rows("ij,jd->id", 1)
    assert einsum_contracts_rows("i j , j d -> i d", 1)  # spaces are not letters
    assert not einsum_contracts_rows("ij,jd->d", 1)  # rows summed together
    assert not einsum_contracts_rows("ij,jd->ijd", 1)  # j kept: nothing contracted
    assert not einsum_contracts_rows("ij,kd->ikd", 1)  # j not in the values
    assert not einsum_contracts_rows("...ij,jd->...id", 1)  # ellipsis not analysed
    assert not einsum_contracts_rows("ij,jd", 1)  # implicit output not analysed
    assert not einsum_contracts_rows("ij,jd,de->ie", 1)  # three operands
    assert not einsum_contracts_rows("ij,jd->id", 2)  # dim beyond the weights


def test_register_rule_marks_an_op_tie_aware_only_when_asked() -> None:
    op = object()  # a fresh op, so the real table is left as it was

    def rule(s: Settings, x: Term) -> Term:
        return x

    try:
        register_rule(op, rule)
        assert RULES[op] is rule and op not in TIE_AWARE
        register_rule(op, rule, accepts_ties=True)
        assert op in TIE_AWARE
        register_rule(op, rule)  # re-registering without ties takes the mark away again
        assert op not in TIE_AWARE
    finally:
        RULES.pop(op, None)
        TIE_AWARE.discard(op)


def test_rule_decorator_registers_the_function_under_every_target() -> None:
    first, second = object(), object()

    def rule(s: Settings, x: Term) -> Term:
        return x

    try:
        assert _rule(first, second, accepts_ties=True)(rule) is rule
        assert RULES[first] is rule and RULES[second] is rule
        assert {first, second} <= TIE_AWARE
    finally:
        for op in (first, second):
            RULES.pop(op, None)
            TIE_AWARE.discard(op)


def _two_orders() -> Term:
    lead = torch.arange(8.0, dtype=F64).reshape(2, 4)
    return Term(((lead, 2.0), (-lead, 1.0)), floor=0.0)


def test_split_keeps_every_part_and_the_floor_in_each_piece() -> None:
    x = _two_orders()
    pieces = _structural(aten.split.Tensor)(Settings(), x, 2, dim=1)  # keyword arguments too
    assert len(pieces) == 2
    for i, piece in enumerate(pieces):
        assert piece.floor == 0.0
        assert [d for _, d in piece.parts] == [2.0, 1.0]
        assert torch.equal(piece.parts[0][0], x.lead[:, 2 * i:2 * i + 2])
        assert torch.equal(piece.parts[1][0], -x.lead[:, 2 * i:2 * i + 2])


def test_split_pieces_keep_their_elements_rounding_bounds() -> None:
    x = _two_orders()
    magnitude = torch.arange(1.0, 9.0, dtype=F64).reshape(2, 4)
    x = Term(x.parts, x.floor, (Rounding(2.0, lambda: magnitude, 3),))
    # The split built inside the test, so that what the factory builds is what is tested.
    for pieces in (_structural(aten.split.Tensor)(Settings(), x, 2, 1),
                   _structural(aten.chunk.default)(Settings(), x, 2, dim=1)):
        for i, piece in enumerate(pieces):
            bound = piece.rounding(2.0)
            assert bound is not None and bound.length == 3 and piece.rounding(1.0) is None
            assert torch.equal(bound.magnitude(), magnitude[:, 2 * i:2 * i + 2])


def test_shape_ops_pass_keyword_arguments_and_map_bounds() -> None:
    magnitude = torch.arange(1.0, 7.0, dtype=F64).reshape(2, 3)
    x = Term(((magnitude.neg(), 1.0),), roundings=(Rounding(1.0, lambda: magnitude, 2),))
    out = _structural(aten.transpose.int)(Settings(), x, dim0=0, dim1=1)
    assert torch.equal(out.lead, -magnitude.T)
    bound = out.rounding(1.0)
    assert bound is not None and torch.equal(bound.magnitude(), magnitude.T)


def test_a_cast_acts_on_every_part_and_has_no_limit_as_an_integer() -> None:
    cast = _caster(aten._to_copy.default)  # built inside the test, like the registered rule
    out = cast(Settings(), _two_orders(), dtype=torch.float32)
    assert [(a.dtype, d) for a, d in out.parts] == [(torch.float32, 2.0), (torch.float32, 1.0)]
    assert out.floor == 0.0 and torch.equal(out.lead, _two_orders().lead.float())
    with pytest.raises(SaturationError, match=r"cast of a c-dependent value to torch\.int64"):
        cast(Settings(), _two_orders(), dtype=torch.int64)


@pytest.mark.parametrize(("dim", "keepdim", "shape"), [(None, False, ()), (1, True, (2, 1)),
                                                        ([0, 1], False, ())])
def test_sum_and_mean_reduce_every_part_over_the_dimensions_given(
        dim: int | list[int] | None, keepdim: bool, shape: tuple[int, ...]) -> None:
    x = _two_orders()
    dims = [0, 1] if dim is None else [dim] if isinstance(dim, int) else dim
    total = RULES[aten.sum.dim_IntList](Settings(), x, dim, keepdim)
    mean = RULES[aten.mean.dim](Settings(), x, dim, keepdim)
    count = math.prod(x.shape[d] for d in dims)
    for (a, d), (s, ds), (m, dm) in zip(x.parts, total.parts, mean.parts):
        expected = a.sum(dim=dims, keepdim=keepdim)
        assert d == ds == dm and s.shape == m.shape == shape
        assert torch.equal(s, expected) and torch.allclose(m, expected / count, rtol=1e-15)


def _rows(lead: torch.Tensor, magnitude: float | None, degree: float = 1.0) -> Term:
    """A part whose rounding bound is γ₁·``magnitude`` (about 1.1·10⁻¹⁶ of it in float64)."""
    rounding = () if magnitude is None else (Rounding(degree, lambda: torch.full_like(lead, magnitude), 1),)
    return Term(((lead, degree),), roundings=rounding)


# Three rows of three per batch entry: exactly constant, unequal by 10⁻⁹ (within twice a bound
# of 1.1·10⁻⁸, so it may be constant), unequal by 1 (beyond it).
ROWS = torch.tensor([[[1.0, 1.0, 1.0], [1.0, 1.0 + 1e-9, 1.0], [1.0, 2.0, 1.0]]] * 2, dtype=F64)


def test_layer_norm_rows_that_may_be_constant_are_the_ones_unequal_within_their_bound() -> None:
    unsure = _maybe_constant_rows(_rows(ROWS, 1e8), [-1], Settings())
    assert unsure is not None and unsure.shape == (2, 3, 1)
    assert unsure[..., 0].tolist() == [[False, True, False]] * 2
    # Over the last two dimensions each batch entry is one row, unequal by 1: beyond a bound of
    # 1.1·10⁻⁸, within one of 11.
    assert _maybe_constant_rows(_rows(ROWS, 1e8), [-2, -1], Settings()) is None
    unsure = _maybe_constant_rows(_rows(ROWS, 1e17), [-2, -1], Settings())
    assert unsure is not None and unsure.tolist() == [[[True]], [[True]]]
    # A bound that overflowed (NaN) proves no row unequal: each row computed unequal may be constant.
    unsure = _maybe_constant_rows(_rows(ROWS, math.nan), [-1], Settings())
    assert unsure is not None and unsure[..., 0].tolist() == [[False, True, True]] * 2
    unsure = _maybe_constant_rows(_rows(ROWS, math.nan), [-2, -1], Settings())
    assert unsure is not None and unsure.tolist() == [[[True]], [[True]]]


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_a_product_bounds_the_largest_rounding_of_each_row_by_its_norms(dtype: torch.dtype) -> None:
    """The own radius of a matrix product's rounding, from its operands' norms, is at least the
    largest element of its bound in every row: what the LayerNorm row test reads instead."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(3, 7, 16, generator=gen, dtype=dtype) * torch.rand(3, 7, 1, generator=gen, dtype=dtype)
    w = torch.randn(12, 16, generator=gen, dtype=dtype)
    lead = nn.functional.linear(x, w)
    term = bilinear(nn.functional.linear, Term(((x, 1.0),), roundings=(Rounding.of_exact(x, 1.0),)),
                    Term(((w, 1.0),), roundings=(Rounding.of_exact(w, 1.0),)), 1)
    rounding = term.rounding(term.degree)
    assert rounding is not None and rounding.cheap_norm is not None
    largest = rounding.bound(dtype, 0.0, cheap=True).amax(-1, keepdim=True)
    radius = rounding.own_radius(dtype, 0.0, lead.shape, cheap=True)
    assert radius.shape == largest.shape and bool((radius >= largest).all())


def test_layer_norm_rows_are_judged_by_their_bounds_norm_without_a_bound_of_their_size() -> None:
    """Over the last dimension, rows are judged against twice the ℓ2 norm of their bound, which
    the rounding's norms give (here γ₁·10⁸, about 1.1·10⁻⁸, in every row): no bound of the rows'
    size is made."""

    def made() -> torch.Tensor:
        raise AssertionError("a bound of the rows' size was made")

    norms = 1e8 * torch.ones(2, 3, 1, dtype=F64)
    rounding = Rounding(1.0, made, 1, cheap=made, cheap_norm=lambda n: norms)
    unsure = _maybe_constant_rows(Term(((ROWS, 1.0),), roundings=(rounding,)), [-1], Settings())
    assert unsure is not None and unsure[..., 0].tolist() == [[False, True, False]] * 2


@pytest.mark.parametrize(("magnitude", "degree"), [(None, 1.0), (1e8, 0.0), (1e8, math.inf)])
def test_layer_norm_rows_need_a_bound_and_a_growing_part_to_be_unsure(magnitude: float | None,
                                                                       degree: float) -> None:
    assert _maybe_constant_rows(_rows(ROWS, magnitude, degree), [-1], Settings()) is None


def test_composed_layer_norm_expands_epsilon_below_the_normalized_lead() -> None:
    # LN(A·c) = n_A·(1 + ε/(σ²c²))^(−1/2) = n_A − n_A·ε/(2σ²)·c⁻² + …, per row of A.
    a = torch.tensor([[1.0, 2.0, 4.0], [0.0, 3.0, -3.0]], dtype=F64)
    variance = a.var(dim=-1, unbiased=False, keepdim=True)
    normalized = (a - a.mean(dim=-1, keepdim=True)) / variance.sqrt()
    out = _composed_layer_norm(Term(((a, 1.0),)), [-1], 0.1, 3)
    (lead, d0), (second, d1) = out.parts[:2]
    assert (d0, d1) == (0.0, -2.0)
    assert torch.allclose(lead, normalized, rtol=1e-14, atol=0)
    assert torch.allclose(second, -normalized * 0.1 / (2 * variance), rtol=1e-14, atol=1e-300)


def test_layer_norm_affine_is_fused_only_for_a_weight_and_bias_known_exactly_at_one_degree() -> None:
    s = Settings()
    gamma, beta = torch.tensor([2.0, 3.0], dtype=F64), torch.tensor([0.5, -1.0], dtype=F64)
    weight, bias = Term(((gamma, 1.0),)), Term(((beta, 1.0),))
    fused = _one_degree_affine(weight, bias, s)
    assert fused is not None and fused[2] == 1.0
    assert torch.equal(fused[0], gamma) and fused[1] is not None and torch.equal(fused[1], beta)
    alone = _one_degree_affine(weight, None, s)
    assert alone is not None and torch.equal(alone[0], gamma) and alone[1] is None and alone[2] == 1.0
    not_fused = [
        (gamma, bias),                                         # an exact weight (degree 0)
        (Term(((gamma, 1.0), (gamma, 0.0))), bias),            # a weight with two parts
        (Term(((gamma, 1.0),), floor=0.0), bias),              # a weight known only to a floor
        (weight, beta),                                        # an exact bias: another degree
        (weight, Term(((beta, 1.0), (beta, 0.0)))),            # a bias with two parts
        (weight, Term(((beta, 1.0),), floor=0.0)),             # a bias known only to a floor
        (weight, Term(((beta, 2.0),))),                        # a bias of another degree
    ]
    for w, b in not_fused:
        assert _one_degree_affine(w, b, s) is None


def test_gelu_of_one_growing_part_is_its_relu_without_deciding_signs_and_of_a_fixed_one_its_value() -> None:
    # One part of degree 1 with no rounding bound: relu of it, continuous in the coefficient, so
    # no sign needs certifying; a part of degree 0 is a fixed value: GELU of it.
    lead = torch.tensor([-1.0, 1e-300, 2.0], dtype=F64)
    out = RULES[aten.gelu.default](Settings(), Term(((lead, 1.0),)))
    assert out.parts[0][1] == 1.0 and out.lead.tolist() == [0.0, 1e-300, 2.0]
    fixed = torch.tensor([-0.5, 0.5], dtype=F64)
    out = RULES[aten.gelu.default](Settings(), Term(((fixed, 0.0),)))
    assert out.parts[0][1] == 0.0 and torch.equal(out.lead, torch.nn.functional.gelu(fixed))


@pytest.mark.parametrize("op", [aten.gelu.default, aten.silu.default], ids=["gelu", "silu"])
def test_gelu_and_silu_mark_a_sign_rounding_hides_with_more_than_one_part(op: object) -> None:
    # Two parts, so which one leads each element is a decision: element 0's lead 10⁻²⁰ is within
    # its bound γ₁·1 ≈ 1.1·10⁻¹⁶ of zero, element 1's lead is not.
    lead = torch.tensor([1e-20, 1.0], dtype=F64)
    x = Term(((lead, 1.0), (torch.tensor([0.3, 0.3], dtype=F64), 0.0)),
             roundings=(Rounding(1.0, lambda: torch.ones(2, dtype=F64), 1),))
    name = str(op).split(".")[-2]
    with pytest.raises(NeedsOrders, match=rf"input of {name} is within rounding of zero"):
        RULES[op](Settings(exact_ties=False), x)
    out = RULES[op](Settings(exact_ties=False, ties="nan"), x)
    assert [bool(torch.isnan(a[0])) for a, _ in out.parts] == [True] * len(out.parts)
    assert out.lead[1].item() == 1.0 and not any(bool(torch.isnan(a[1])) for a, _ in out.parts)


def test_a_power_names_how_many_elements_are_zero_at_every_tracked_order() -> None:
    lead, lower = torch.tensor([1.0, 0.0, 0.0], dtype=F64), torch.tensor([0.0, 0.0, 3.0], dtype=F64)
    x = Term(((lead, 2.0), (lower, 1.0)), floor=0.0)
    with pytest.raises(NeedsOrders, match=r"at 1 elements"):
        power(x, -0.5, 2)
    x = Term(((torch.tensor([1.0, 0.0, 0.0], dtype=F64), 2.0),), floor=0.0)
    with pytest.raises(NeedsOrders, match=r"at 2 elements"):
        power(x, -0.5, 2)


def test_shape_op_on_an_exact_value_lifts_it_to_degree_zero() -> None:
    value = torch.arange(6.0, dtype=F64).reshape(2, 3)
    out = _structural(aten.transpose.int)(Settings(), value, 0, 1)
    assert [d for _, d in out.parts] == [0.0]
    assert torch.equal(out.lead, value.T)


def test_undetermined_tied_weights_are_nan_in_every_row_with_two_or_more_candidates() -> None:
    candidates = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    count = candidates.sum(-1, keepdim=True)
    lead = candidates.to(F64) / count
    tied = TiedWeights(((lead, 0.0),), -1.0, candidates=candidates, count=count, dim=1)
    out = tied.undetermined()
    assert type(out) is Term and out.floor == -1.0
    assert out.lead[0].tolist() == [1.0, 0.0, 0.0]  # a single winner is known
    assert bool(out.lead[1:].isnan().all())  # a tie of two is as undetermined as one of three


def test_casting_tied_weights_keeps_the_tie_sets() -> None:
    candidates = torch.tensor([[True, True]])
    tied = TiedWeights(((torch.tensor([[0.5, 0.5]]), 0.0),), candidates=candidates,
                       count=torch.tensor([[2]]), dim=1, reason="r")
    cast = tied.map(lambda a: a.to(F64))
    assert isinstance(cast, TiedWeights) and cast.lead.dtype == F64
    assert cast.lead.tolist() == [[0.5, 0.5]]
    assert cast.candidates is candidates and cast.dim == 1 and cast.reason == "r"


def test_fractional_power_of_a_negative_lead_is_refused() -> None:
    x = Term(((torch.tensor([4.0, -4.0], dtype=F64), 2.0),))
    with pytest.raises(SaturationError, match=r"fractional power 0\.5 of a value with negative"):
        power(x, 0.5, 2)
    assert power(x, -1.0, 2).lead.tolist() == [0.25, -0.25]  # an integer power is fine


def test_power_of_elements_leading_at_different_degrees_keeps_the_floor() -> None:
    # Element 0 leads at c², element 1 at c¹; both known up to O(c⁻¹).
    x = Term(((torch.tensor([1.0, 0.0], dtype=F64), 2.0), (torch.tensor([0.0, 2.0], dtype=F64), 1.0)),
             floor=-1.0)
    out = power(x, -1.0, 4)
    # 1/(c² + O(c⁻¹)) = c⁻² + O(c⁻⁵); 1/(2c + O(c⁻¹)) = c⁻¹/2 + O(c⁻³): together O(c⁻³).
    assert {d: a.tolist() for a, d in out.parts} == {-1.0: [0.0, 0.5], -2.0: [1.0, 0.0]}
    assert out.floor == -3.0


def test_where_takes_each_degree_from_the_chosen_side() -> None:
    cond = torch.tensor([True, False, True])
    x = Term(((torch.tensor([1.0, 2.0, 3.0], dtype=F64), 1.0),), floor=-1.0)
    y = Term(((torch.tensor([4.0, 5.0, 6.0], dtype=F64), 0.0),), floor=-2.0)
    out = RULES[aten.where.self](Settings(orders=2), cond, x, y)
    assert {d: a.tolist() for a, d in out.parts} == {1.0: [1.0, 0.0, 3.0], 0.0: [0.0, 5.0, 0.0]}
    assert out.floor == -1.0
    one = RULES[aten.where.self](Settings(orders=1), cond, x, y)  # orders cut the lower part
    assert [d for _, d in one.parts] == [1.0] and one.floor == 0.0


class Activation(nn.Module):
    """fn(w·x₀ + x₁): grows like c where x₀ ≠ 0, stays at fn(x₁) where x₀ = 0."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.w, self.fn = nn.Parameter(torch.tensor(1.0, dtype=F64)), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.w * x[..., 0] + x[..., 1])


MIXED = torch.tensor([[2.0, 0.3], [-1.0, 0.3], [0.0, 0.7]], dtype=F64)  # grows up, grows down, fixed


@pytest.mark.parametrize(("fn", "growing"), [(torch.sigmoid, [1.0, 0.0]), (torch.tanh, [1.0, -1.0])],
                         ids=["sigmoid", "tanh"])
def test_squashing_limit_by_sign_where_the_input_grows_and_the_function_value_where_it_does_not(
        fn: Callable[[torch.Tensor], torch.Tensor], growing: list[float]) -> None:
    out = saturate(Activation(fn), MIXED)(MIXED)
    assert out.degrees == 0.0
    assert out.value[:2].tolist() == growing
    assert out.value[2].item() == fn(torch.tensor(0.7, dtype=F64)).item()


@pytest.mark.parametrize("fn", [nn.functional.gelu, nn.functional.silu], ids=["gelu", "silu"])
def test_gelu_and_silu_of_a_growing_input_become_relu_of_its_lead(
        fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    out = saturate(Activation(fn), MIXED)(MIXED)
    # Degree 1: relu of the growing coefficient; the fixed element is O(1), below the lead.
    assert out.degrees == 1.0
    assert out.value.tolist() == [2.0, 0.0, 0.0]


class Attention(nn.Module):
    """softmax over tokens of the scores w·x₀ + x₁ (degree 1 and degree 0 parts)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.0, dtype=F64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.w * x[..., 0] + x[..., 1], -1)


def test_tokens_tied_at_the_leading_order_share_the_weight_by_their_bounded_scores() -> None:
    # (batch 1, 2 query rows, 3 tokens, 2 features). Row 0: tokens 0 and 1 tie at degree 1, and
    # their degree-0 scores 0 and ln 2 split the weight 1 : 2; row 1: token 2 alone leads.
    x = torch.zeros(1, 2, 3, 2, dtype=F64)
    x[0, 0, :, 0] = torch.tensor([1.0, 1.0, 0.0])
    x[0, 0, :, 1] = torch.tensor([0.0, math.log(2.0), 5.0], dtype=F64)
    x[0, 1, :, 0] = torch.tensor([0.0, 0.0, 1.0])
    out = saturate(Attention(), x)(x)
    assert out.degrees == 0.0
    expected = torch.tensor([[[1 / 3, 2 / 3, 0.0], [0.0, 0.0, 1.0]]], dtype=F64)
    assert torch.allclose(out.value, expected, rtol=4 * torch.finfo(F64).eps, atol=0.0)  # e^(ln 2) rounds
    assert out.value[0, 1].tolist() == [0.0, 0.0, 1.0]


def _tied_weights(candidates: torch.Tensor) -> TiedWeights:
    count = candidates.sum(-1, keepdim=True)
    return TiedWeights(((candidates.to(F64) / count, 0.0),), candidates=candidates, count=count,
                       dim=candidates.dim() - 1, reason="a tie")


def _einsum(equation: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return lambda w, v: torch.einsum(equation, w, v)


def test_tie_over_equal_or_zero_values_leaves_the_product_determined() -> None:
    # Row 0 ties tokens 0 and 1, whose values are equal; row 1 ties tokens 2 and 3, whose values
    # are both zero; row 2 has a single winner. Every split gives the same product.
    weights = _tied_weights(torch.tensor([[True, True, False, False], [False, False, True, True],
                                          [True, False, False, False]]))
    values = Term(((torch.tensor([[0.0, 2.0], [0.0, 2.0], [0.0, 0.0], [0.0, 0.0]], dtype=F64), 1.0),))
    out = contract(_einsum("ij,jd->id"), weights, values, orders=2, rtol=None, mark=False)
    assert out.lead.tolist() == [[0.0, 2.0], [0.0, 0.0], [0.0, 2.0]]


def test_tie_over_different_values_names_batch_entry_and_query_position() -> None:
    candidates = torch.tensor([[[True, False], [True, True]]])  # batch 0, query 1 is tied
    values = Term(((torch.tensor([[[1.0, 5.0], [1.0, 7.0]]], dtype=F64), 1.0),))
    with pytest.raises(NeedsOrders, match=r"batch entry 0, query position 1 \(output element \[0, 1, 1\]\)"):
        contract(_einsum("bij,bjd->bid"), _tied_weights(candidates), values, orders=2, rtol=None,
                 mark=False)
    out = contract(_einsum("bij,bjd->bid"), _tied_weights(candidates), values, orders=2, rtol=None,
                   mark=True)
    assert out.lead[0, 0].tolist() == [1.0, 5.0] and out.lead[0, 1, 0].item() == 1.0
    assert math.isnan(out.lead[0, 1, 1].item())


def test_fractional_power_of_a_single_part_is_its_exact_power_with_the_floor_shifted() -> None:
    x = Term(((torch.tensor([4.0, 9.0], dtype=F64), 2.0),), floor=0.0)
    out = power(x, -0.5, 3)
    # (a·c²(1 + O(c⁻²)))^(−1/2) = a^(−1/2)·c⁻¹ + O(c⁻³)
    assert [(a.tolist(), d) for a, d in out.parts] == [([0.5, 1 / 3], -1.0)]
    assert out.floor == -3.0
    exact = power(Term(((torch.tensor([4.0], dtype=F64), 2.0),)), -0.5, 3)  # nothing unknown
    assert [(a.tolist(), d) for a, d in exact.parts] == [([0.5], -1.0)] and exact.floor == -math.inf


class AbsOffset(nn.Module):
    """|w·x₀ + x₁| − w·|x₀|: the growing parts cancel, leaving the fixed offset ±x₁."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.0, dtype=F64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(self.w * x[..., 0] + x[..., 1]) - self.w * torch.abs(x[..., 0])


def test_abs_takes_the_sign_of_the_first_nonzero_part_of_each_element() -> None:
    # Element 0 leads at c (sign +, offset +0.3), element 1 at c (sign −, offset −0.3), element 2
    # has no growing part: its sign is that of x₁ = −0.7, so |x₁| = 0.7.
    x = torch.tensor([[1.0, 0.3], [-1.0, 0.3], [0.0, -0.7]], dtype=F64)
    out = saturate(AbsOffset(), x)(x)
    assert out.degrees == 0.0
    assert out.value.tolist() == [0.3, -0.3, 0.7]


class Cancelling(nn.Module):
    """fn(w·x₀ + w·x₁ + w·x₂ + x₃): the growing part w·(x₀ + x₁ + x₂) may cancel to rounding."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.w, self.fn = nn.Parameter(torch.tensor(1.0, dtype=F64)), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.w * x[..., 0] + self.w * x[..., 1] + self.w * x[..., 2] + x[..., 3])


# Row 0: 0.1 + 0.2 − 0.3 is within float64 rounding of zero, so its computed sign is not
# certified; row 1 grows like +c.
NEAR_ZERO = torch.tensor([[0.1, 0.2, -0.3, 0.5], [1.0, 0.0, 0.0, 0.5]], dtype=F64)


@pytest.mark.parametrize("fn", [torch.sigmoid, torch.tanh], ids=["sigmoid", "tanh"])
def test_a_sign_within_rounding_raises_by_default_and_is_nan_with_ties_nan(
        fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    name = fn.__name__
    with pytest.raises(SaturationError, match=rf"the sign of 1 elements of the input of {name} is within "
                                          r"rounding of zero \(undetermined in this precision\)"):
        saturate(Cancelling(fn), NEAR_ZERO, settings=Settings(exact_ties=False, max_precision=0))
    out = saturate(Cancelling(fn), NEAR_ZERO, settings=Settings(exact_ties=False, ties="nan",
                                                                max_precision=0))(NEAR_ZERO)
    assert math.isnan(out.value[0].item())
    assert out.value[1].item() == 1.0


@pytest.mark.parametrize("fn", [torch.sigmoid, torch.tanh], ids=["sigmoid", "tanh"])
def test_a_sign_within_rounding_of_a_sum_of_products_is_settled_by_the_exact_sum(
        fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    # The float64 numbers 0.1, 0.2 and −0.3 sum exactly to 2⁻⁵⁵ > 0: the input grows like +c.
    exact = sum((Fraction(v) for v in NEAR_ZERO[0, :3].tolist()), Fraction(0))
    assert exact == Fraction(1, 2**55), "premise"
    out = saturate(Cancelling(fn), NEAR_ZERO)(NEAR_ZERO)
    assert out.value.tolist() == [1.0, 1.0] and out.degrees == 0.0


class Offset(nn.Module):
    """fn(w·x₀ + x₁) − w·relu(x₀): for GELU and SiLU the growing parts cancel, leaving what the
    function does to the fixed part."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.w, self.fn = nn.Parameter(torch.tensor(1.0, dtype=F64)), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.w * x[..., 0] + x[..., 1]) - self.w * torch.relu(x[..., 0])


@pytest.mark.parametrize("fn", [nn.functional.gelu, nn.functional.silu], ids=["gelu", "silu"])
def test_gelu_and_silu_keep_the_lower_part_of_a_positive_growing_input_and_apply_to_a_fixed_one(
        fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    out = saturate(Offset(fn), MIXED)(MIXED)
    # +2c + 0.3 → 0.3 after the subtraction; −c + 0.3 → 0 (e^(−Θ(c))); fixed 0.7 → fn(0.7).
    assert out.degrees == 0.0
    assert out.value.tolist() == [0.3, 0.0, fn(torch.tensor(0.7, dtype=F64)).item()]


class SplitThenActivation(nn.Module):
    """sigmoid(a − b + x₂) with a, b the two halves (torch.chunk) of w·x₀₁: an activation after a
    split reads the halves' rounding bounds."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.0, dtype=F64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = (self.w * x[..., :2]).chunk(2, dim=-1)
        return torch.sigmoid(a - b + x[..., 2:])


def test_an_activation_after_a_split_decides_each_sign() -> None:
    x = torch.tensor([[2.0, 1.0, 0.5], [1.0, 2.0, 0.5], [1.0, 1.0, 0.5]], dtype=F64)
    out = saturate(SplitThenActivation(), x)(x)
    # σ(0.5) to rounding: a 0-d tensor and an element of a larger one may take different paths.
    expected = [[1.0], [0.0], [pytest.approx(1 / (1 + math.exp(-0.5)), rel=4 * 2.0**-52, abs=0)]]
    assert out.degrees == 0.0 and out.value.tolist() == expected


def test_shared_weights_of_a_row_far_below_another_do_not_underflow() -> None:
    # Both rows tie tokens 0 and 1 at degree 1; row 1's bounded scores sit 1000 below row 0's,
    # which exp() of the difference from a shared maximum would flush to 0.
    x = torch.zeros(1, 2, 3, 2, dtype=F64)
    x[0, :, :, 0] = torch.tensor([1.0, 1.0, 0.0], dtype=F64)
    x[0, 0, :, 1] = torch.tensor([0.0, 0.0, 0.0], dtype=F64)
    x[0, 1, :, 1] = torch.tensor([-1000.0, -1000.0, 0.0], dtype=F64)
    out = saturate(Attention(), x)(x)
    assert out.value.tolist() == [[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]]


def test_einsum_length_is_unknown_for_an_ellipsis_or_an_implicit_output() -> None:
    a, b = torch.Size([2, 3, 4]), torch.Size([2, 4, 5])
    assert _einsum_length("bij,bjk->bik", a, b) == 4
    assert _einsum_length("...ij,...jk->...ik", a, b) is None
    assert _einsum_length("bij,bjk", a, b) is None


def test_a_tie_left_by_the_dropped_orders_names_the_order_that_decides() -> None:
    # Scores c·x₀ + x₁ with one order tracked: tokens 0 and 1 tie at c¹, and the dropped c⁰ part
    # decides between them; the output reads the weights themselves.
    x = torch.zeros(1, 1, 3, 2, dtype=F64)
    x[0, 0, :, 0] = torch.tensor([1.0, 1.0, 0.0], dtype=F64)
    x[0, 0, :, 1] = torch.tensor([0.0, 1.0, 0.0], dtype=F64)
    with pytest.raises(SaturationError, match=r"the untracked part of order c\^0 decides between them"):
        saturate(Attention(), x, settings=Settings(orders=1, max_precision=0))


def test_tied_values_that_differ_only_in_a_lower_part_raise_the_floor_to_it() -> None:
    # Tokens 0 and 1 are tied and agree at c², but not at c¹: the product is known at c² only.
    weights = _tied_weights(torch.tensor([[True, True, False], [False, False, True]]))
    lead = torch.tensor([[1.0, 2.0], [1.0, 2.0], [3.0, 4.0]], dtype=F64)
    lower = torch.tensor([[0.0, 0.0], [5.0, 0.0], [0.0, 0.0]], dtype=F64)
    values = Term(((lead, 2.0), (lower, 1.0)), floor=-1.0)
    out = contract(_einsum("ij,jd->id"), weights, values, orders=2, rtol=None, mark=False)
    assert out.floor == 1.0
    assert [(a.tolist(), d) for a, d in out.parts] == [([[1.0, 2.0], [3.0, 4.0]], 2.0)]


def test_a_nan_input_element_stays_undetermined_and_the_others_are_decided() -> None:
    x = torch.tensor([[2.0, 0.3], [math.nan, 0.3], [0.0, 0.7]], dtype=F64)
    with pytest.raises(SaturationError, match=r"the sign of 1 elements of the input of sigmoid"):
        saturate(Activation(torch.sigmoid), x)
    out = saturate(Activation(torch.sigmoid), x, settings=Settings(ties="nan"))(x)
    assert out.value[0].item() == 1.0 and math.isnan(out.value[1].item())
    assert out.value[2].item() == pytest.approx(1 / (1 + math.exp(-0.7)), rel=4 * 2.0**-52, abs=0)


@pytest.mark.parametrize("degree", [0.0, 0.5])
def test_exp_series_refuses_a_value_that_does_not_vanish(degree: float) -> None:
    x = Term(((torch.tensor([2.0], dtype=F64), degree),))
    message = rf"exp series of a value of degree {degree:g}; expected a vanishing one"
    with pytest.raises(SaturationError, match=message):
        exp_series(x, 3)


def test_an_exact_integer_value_is_lifted_to_the_default_float_dtype() -> None:
    out = lift(torch.tensor([1, -2, 3]), 1e9)
    assert [d for _, d in out.parts] == [0.0]
    assert out.lead.dtype == torch.get_default_dtype() and out.lead.tolist() == [1.0, -2.0, 3.0]


def test_matmul_of_two_expansions_collects_every_pair_of_parts_by_degree() -> None:
    # (A·c² + B·c) @ (C·c + D) = AC·c³ + (AD + BC)·c² + BD·c, each degree exactly.
    a = torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=F64)
    b = torch.tensor([[3.0, 0.0], [1.0, 1.0]], dtype=F64)
    c = torch.tensor([[1.0, 1.0], [2.0, 0.0]], dtype=F64)
    d = torch.tensor([[0.0, 1.0], [1.0, 3.0]], dtype=F64)
    out = bilinear(torch.matmul, Term(((a, 2.0), (b, 1.0))), Term(((c, 1.0), (d, 0.0))), orders=3)
    assert [degree for _, degree in out.parts] == [3.0, 2.0, 1.0]
    expected = [a @ c, a @ d + b @ c, b @ d]
    assert all(torch.equal(part, e) for (part, _), e in zip(out.parts, expected))


# --- contract and einsum_contracts_rows at their edges ----------------------------------------------


def test_einsum_contraction_check_keeps_every_weights_index_but_the_tied_one() -> None:
    # Weights laid out keys first (b, n, key j, query i): contracting j keeps the queries apart only
    # if i reaches the output.
    assert einsum_contracts_rows("bnji,bnjd->bnid", 2)
    assert not einsum_contracts_rows("bnji,bnjd->bnd", 2)  # the queries summed together
    # With an ellipsis the letters are not the dimensions, even where dim points at a letter.
    assert not einsum_contracts_rows("...ij,...jd->...id", 4)


def test_tied_values_that_agree_within_rounding_leave_the_einsum_product_determined() -> None:
    # Tokens 0 and 1 tie; their values differ by 1000·2⁻⁵⁰ ≈ 8.9e-13, far below the tolerance
    # 64·eps·(|v₀| + |v₁|) ≈ 2.8e-11 of float64: the same value up to rounding.
    weights = _tied_weights(torch.tensor([[True, True, False]]))
    near = 1000.0 * (1 + 2.0**-50)
    values = Term(((torch.tensor([[1000.0], [near], [5.0]], dtype=F64), 1.0),))
    out = contract(_einsum("ij,jd->id"), weights, values, orders=2, rtol=None, mark=False)
    assert out.lead.tolist() == [[(1000.0 + near) / 2]]
    assert out.floor == -math.inf


def test_a_values_part_below_the_tracked_orders_is_not_read() -> None:
    # One order tracked: the product is known at c¹ with floor c⁻⁵ (the values' lower part), so
    # that part's disagreement between the tied tokens 0 and 1 does not matter.
    weights = _tied_weights(torch.tensor([[True, True, False]]))
    lead = torch.tensor([[2.0], [2.0], [7.0]], dtype=F64)
    low = torch.tensor([[1.0], [-3.0], [0.0]], dtype=F64)
    values = Term(((lead, 1.0), (low, -5.0)))
    out = contract(_einsum("ij,jd->id"), weights, values, orders=1, rtol=None, mark=False)
    assert [d for _, d in out.parts] == [1.0] and out.floor == -5.0
    assert out.lead.tolist() == [[2.0]]


def test_an_empty_batch_contracts_to_an_empty_product() -> None:
    weights = _tied_weights(torch.zeros(0, 3, dtype=torch.bool))
    values = Term(((torch.ones(3, 2, dtype=F64), 1.0),))
    out = contract(_einsum("ij,jd->id"), weights, values, orders=2, rtol=None, mark=False)
    assert out.lead.shape == (0, 2)


def _values(lead: list[list[float]], *lower: tuple[list[list[float]], float]) -> Term:
    """Values known at c¹ (``lead``, one row per key) and optionally at lower degrees."""
    return Term(((torch.tensor(lead, dtype=F64), 1.0),
                 *((torch.tensor(v, dtype=F64), d) for v, d in lower)))


# Keys 0…4. Row 0 ties keys 2, 3, 4 (values [0, 5], [0, 7], [0, 5]: the middle one differs in
# column 1, all are 0 in column 0); row 1 ties keys 0 and 1 (equal values [1, 3]); row 2 has one
# winner.
TIED_ROWS = torch.tensor([[False, False, True, True, True], [True, True, False, False, False],
                          [True, False, False, False, False]])
KEY_VALUES = [[1.0, 3.0], [1.0, 3.0], [0.0, 5.0], [0.0, 7.0], [0.0, 5.0]]


@pytest.mark.parametrize("fn", [torch.matmul, _einsum("ij,jd->id")], ids=["matmul", "einsum"])
def test_a_tied_row_is_undetermined_exactly_where_some_member_carries_another_value(
        fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    out = contract(fn, _tied_weights(TIED_ROWS), _values(KEY_VALUES), orders=2, rtol=None, mark=True)
    # Row 0, column 0: three zeros, determined; column 1: 5, 7, 5, not. Rows 1 and 2: [1, 3].
    assert out.lead[0, 0].item() == 0.0 and math.isnan(out.lead[0, 1].item())
    assert out.lead[1:].tolist() == [[1.0, 3.0], [1.0, 3.0]]
    with pytest.raises(NeedsOrders, match=r"different values at output element \[0, 1\]\. "):
        contract(fn, _tied_weights(TIED_ROWS), _values(KEY_VALUES), orders=2, rtol=None, mark=False)


@pytest.mark.parametrize("fn", [torch.matmul, _einsum("bhij,bhjd->bhid")], ids=["matmul", "einsum"])
def test_tied_rows_are_judged_in_each_batch_entry_and_head(
        fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    # Batch 1 × 2 heads: head 0 has the rows above, head 1 ties every row over keys 0 and 1.
    candidates = torch.stack([TIED_ROWS, TIED_ROWS[[1, 1, 1]]])[None]
    values = _values([[KEY_VALUES, KEY_VALUES[::-1]]])  # head 1's keys 0 and 1: [0, 5], [0, 7]
    out = contract(fn, _tied_weights(candidates), values, orders=2, rtol=None, mark=True)
    nan = out.lead.isnan()
    assert nan[0, 0].tolist() == [[False, True], [False, False], [False, False]]
    assert nan[0, 1].tolist() == [[False, True]] * 3
    with pytest.raises(NeedsOrders, match=r"at batch entry 0, query position 0 \(output element "
                                          r"\[0, 0, 0, 1\]\)"):
        contract(fn, _tied_weights(candidates), values, orders=2, rtol=None, mark=False)


def test_the_place_named_is_the_query_row_not_the_output_column() -> None:
    candidates = torch.tensor([[[True, False], [True, True]]])  # batch 0, query 1 is tied
    values = _values([[[5.0, 1.0], [7.0, 1.0]]])  # differing in column 0 only
    with pytest.raises(NeedsOrders, match=r"batch entry 0, query position 1 \(output element \[0, 1, 0\]\)"):
        contract(torch.matmul, _tied_weights(candidates), values, orders=2, rtol=None, mark=False)


@pytest.mark.parametrize("fn", [torch.matmul, _einsum("ij,jd->id")], ids=["matmul", "einsum"])
def test_a_lower_part_differing_only_where_the_lead_differs_keeps_the_floor(
        fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    # The c⁰ part differs between tied keys 2 and 3 in column 1 only, where the lead already does:
    # those outputs are NaN anyway, and every other output is known to both orders.
    lower = [[0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 2.0], [0.0, 1.0]]
    out = contract(fn, _tied_weights(TIED_ROWS), _values(KEY_VALUES, (lower, 0.0)), orders=2, rtol=None,
                   mark=True)
    assert out.floor == -math.inf and [d for _, d in out.parts] == [1.0, 0.0]
    assert math.isnan(out.lead[0, 1].item()) and out.parts[1][0][1:].tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("fn", [torch.matmul, _einsum("ij,jd->id")], ids=["matmul", "einsum"])
def test_tied_values_within_rounding_or_within_a_given_rtol_count_as_equal(
        fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    # Keys 0 and 1 tie. 1000 and 1000·(1 + 2⁻⁵⁰) differ by ≈ 8.9e-13, far below 64·eps·2000 ≈
    # 2.8e-11; 100 and 101 differ by 1, within rtol = 0.01 of 201 (2.01) but not by default.
    weights = _tied_weights(torch.tensor([[True, True, False]]))
    near = 1000.0 * (1 + 2.0**-50)
    values = _values([[1000.0, 100.0], [near, 101.0], [5.0, 5.0]])
    default = contract(fn, weights, values, orders=2, rtol=None, mark=True)
    assert default.lead[0, 0].item() == (1000.0 + near) / 2 and math.isnan(default.lead[0, 1].item())
    wide = contract(fn, weights, values, orders=2, rtol=0.01, mark=True)
    assert wide.lead.tolist() == [[(1000.0 + near) / 2, 100.5]]


def test_weights_known_to_two_orders_contract_part_by_part_with_their_floor() -> None:
    # Weights w₀ + w₁/c + O(c⁻²) against values v·c: the product is w₀v·c + w₁v + O(c⁻¹).
    candidates = torch.tensor([[True, True, False]])
    w0 = torch.tensor([[0.5, 0.5, 0.0]], dtype=F64)
    w1 = torch.tensor([[0.25, -0.25, 0.0]], dtype=F64)
    weights = TiedWeights(((w0, 0.0), (w1, -1.0)), floor=-2.0, candidates=candidates,
                          count=candidates.sum(-1, keepdim=True), dim=1, reason="a tie")
    values = _values([[2.0], [2.0], [9.0]])
    out = contract(_einsum("ij,jd->id"), weights, values, orders=3, rtol=None, mark=False)
    assert [(p.tolist(), d) for p, d in out.parts] == [([[2.0]], 1.0), ([[0.0]], 0.0)]
    assert out.floor == -1.0


def test_an_einsum_with_the_values_laid_out_features_first_compares_their_columns() -> None:
    # Values (features d, keys j): keys 0 and 1 carry the columns [1, 4] and [1, 4] (equal), while
    # the rows (features) differ; the product is determined.
    weights = _tied_weights(torch.tensor([[True, True, False], [False, False, True]]))
    values = _values([[1.0, 1.0, 2.0], [4.0, 4.0, 3.0]])
    out = contract(_einsum("ij,dj->id"), weights, values, orders=2, rtol=None, mark=False)
    assert out.lead.tolist() == [[1.0, 4.0], [2.0, 3.0]]


def test_tied_weights_against_a_batch_of_values_compare_each_batch_entry() -> None:
    # Weights (rows, keys) shared by a batch of two value matrices: keys 0 and 1 tie; they carry
    # equal values in batch entry 0 and different ones in entry 1.
    weights = _tied_weights(torch.tensor([[True, True, False]]))
    values = _values([[[1.0], [1.0], [3.0]], [[1.0], [2.0], [3.0]]])
    out = contract(torch.matmul, weights, values, orders=2, rtol=None, mark=True)
    assert out.lead[0].tolist() == [[1.0]] and math.isnan(out.lead[1, 0, 0].item())


def test_a_tied_product_computed_as_zero_keeps_its_lead_when_a_lower_part_lowers_the_floor() -> None:
    # Tied keys 0 and 1 carry 0 at c¹ (key 2, with weight 0, carries 5): the product's lead is
    # a computed zero, which rounding may have left, so it stays (with its bound) for the rules
    # to judge; the keys' c⁰ parts 1 and 2 differ, so the product is known down to c⁰ only.
    weights = _tied_weights(torch.tensor([[True, True, False]]))
    values = _values([[0.0], [0.0], [5.0]], ([[1.0], [2.0], [0.0]], 0.0))
    out = contract(torch.matmul, weights, values, orders=2, rtol=None, mark=False)
    assert [(p.tolist(), d) for p, d in out.parts] == [([[0.0]], 1.0)] and out.floor == 0.0
    assert [r.degree for r in out.roundings] == [1.0]


def test_einsum_length_reads_spaces_broadcasts_and_letters_of_one_operand() -> None:
    a, b = torch.Size([2, 3, 4]), torch.Size([2, 4, 5])
    assert _einsum_length("b i j, b j k -> b i k", a, b) == 4
    assert _einsum_length("bij,bjk->bik", a, torch.Size([2, 1, 5])) == 4  # j broadcast from 1
    assert _einsum_length("bij,bjk->bik", torch.Size([2, 3, 1]), torch.Size([2, 1, 5])) == 1
    assert _einsum_length("bi,bjk->bik", torch.Size([2, 3]), b) == 4  # j summed, in b alone


def test_where_needs_an_exact_condition_and_keeps_the_tensors_dtype() -> None:
    x = Term(((torch.ones(3), 1.0),))
    cond = torch.tensor([True, False, True])
    with pytest.raises(SaturationError, match=r"^a condition that depends on the parameters; expected an "
                                              r"exact mask$"):
        RULES[aten.where.self](Settings(), x, x, x)
    # A float32 term beside a number lifted to a 0-d float64 tensor stays float32; beside a
    # float64 tensor it is promoted; two numbers keep their own dtype.
    beside_number = RULES[aten.where.self](Settings(), cond, x, torch.tensor(0.5, dtype=F64))
    assert beside_number.lead.dtype == torch.float32
    promoted = RULES[aten.where.self](Settings(), cond, x, torch.zeros(3, dtype=F64))
    assert all(a.dtype == F64 for a, _ in promoted.parts)
    scalar = Term(((torch.tensor(2.0), 1.0),))
    assert RULES[aten.where.self](Settings(), torch.tensor(True), scalar, torch.tensor(0.5)).lead.dtype == \
        torch.float32


def test_where_drops_a_zero_part_only_where_it_is_known() -> None:
    # Two orders: an all-zero leading part without a bound is a known zero (the next part leads);
    # with a bound of computed values it stays, for the decisions to judge.
    zero, one, cond = torch.zeros(2, dtype=F64), torch.ones(2, dtype=F64), torch.tensor([True, False])
    known = Term(((zero, 1.0), (one, 0.0)))
    assert [d for _, d in RULES[aten.where.self](Settings(orders=2), cond, known, known).parts] == [0.0]
    computed = Term(known.parts, roundings=(Rounding(1.0, lambda: one, 2),))
    kept = RULES[aten.where.self](Settings(orders=2), cond, computed, known)
    assert [d for _, d in kept.parts] == [1.0, 0.0]


def test_relu_of_two_parts_reads_the_second_where_the_first_is_an_exact_zero() -> None:
    lead, lower = torch.tensor([0.0, -1.0, 2.0], dtype=F64), torch.tensor([0.5, 0.5, -0.5], dtype=F64)
    x = Term(((lead, 2.0), (lower, 1.0)),
             roundings=(Rounding.of_exact(lead, 2.0), Rounding(1.0, lambda: torch.ones(3, dtype=F64), 1)))
    out = RULES[aten.relu.default](Settings(), x)
    assert [a.tolist() for a, _ in out.parts] == [[0.0, 0.0, 2.0], [0.5, 0.0, -0.5]]
    # One part without a bound: relu needs no sign decision and has no bound to keep.
    single = RULES[aten.relu.default](Settings(), Term(((lower, 1.0),)))
    assert single.lead.tolist() == [0.5, 0.5, 0.0] and single.roundings == ()


def _source(magnitude: list[float], index: list[int], partials: object, **kwargs: object) -> Term:
    """A degree-1 part whose bound has the given magnitude and positions in one op's output."""
    m, i = torch.tensor(magnitude, dtype=F64), torch.tensor(index)
    bound = Rounding(1.0, lambda: m, 2, lambda: i, partials, **kwargs)  # type: ignore[arg-type]
    return Term(((torch.ones(3, dtype=F64), 1.0),), roundings=(bound,))


def test_a_selection_keeps_each_elements_bound_carried_error_and_exact_values() -> None:
    def partials(at: torch.Tensor) -> torch.Tensor:
        return at.to(F64).unsqueeze(-1)

    x = _source([1.0, 2.0, 3.0], [0, 1, 2], partials, factor=0.5,
                cheap=lambda: torch.full((3,), 10.0, dtype=F64),
                carried=lambda dtype, rtol: torch.full((3,), 1.0 + rtol, dtype=dtype))
    y = _source([4.0, 5.0, 6.0], [3, 4, 5], partials, factor=0.5)
    cond = torch.tensor([[True, False, True], [False, True, False]])
    out = RULES[aten.where.self](Settings(), cond, x, y)
    bound = out.rounding(1.0)
    assert bound is not None and bound.length == 2 and bound.factor == 0.5 and bound.partials is partials
    assert bound.magnitude().tolist() == [[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]]
    assert bound.cheap is not None and bound.cheap().tolist() == [[10.0, 5.0, 10.0], [4.0, 10.0, 6.0]]
    assert bound.carried is not None
    assert bound.carried(F64, 0.25).tolist() == [[1.25, 0.0, 1.25], [0.0, 1.25, 0.0]]
    assert bound.index is not None and bound.index().tolist() == [[0, 4, 2], [3, 1, 5]]
    # With ties decided per element against it, the bound needs the selected shape everywhere.
    assert bound.magnitude().shape == bound.carried(F64, 0.0).shape == out.shape


def test_a_selection_has_exact_values_only_from_one_ops_output_with_one_factor_beside_masks() -> None:
    def partials(at: torch.Tensor) -> torch.Tensor:
        return at.to(F64).unsqueeze(-1)

    cond = torch.tensor([True, False, True])
    same = _source([1.0] * 3, [0, 1, 2], partials)
    rescaled = _source([1.0] * 3, [0, 1, 2], partials, factor=2.0)
    other = _source([1.0] * 3, [0, 1, 2], lambda at: at.to(F64).unsqueeze(-1))
    unplaced = Term(same.parts,
                    roundings=(Rounding(1.0, lambda: torch.ones(3, dtype=F64), 2, None, partials),))
    mask = lift(torch.full((3,), -1e30, dtype=F64), 1e9)
    masked = RULES[aten.where.self](Settings(), cond, same, mask).rounding(1.0)
    assert masked is not None and masked.partials is partials and masked.index is not None
    assert masked.index().tolist() == [0, 0, 2]
    for y in (rescaled, other, unplaced, lift(torch.full((3,), 7.0, dtype=F64), 1e9)):
        bound = RULES[aten.where.self](Settings(), cond, same, y).rounding(1.0)
        assert bound is not None and bound.partials is None and bound.index is None


def _exact(*parts: tuple[list[float], float], floor: float = -math.inf) -> Term:
    """A term of exactly known parts (each with a zero rounding bound)."""
    tensors = [(torch.tensor(a, dtype=F64), d) for a, d in parts]
    return Term(tuple(tensors), floor, tuple(Rounding.of_exact(a, d) for a, d in tensors if math.isfinite(d)))


def test_tanh_takes_each_elements_first_nonzero_growing_part_and_the_fixed_value_otherwise() -> None:
    # Element 0 grows at c², element 1 at c¹ (with sign −), element 2 does not grow: tanh(0.3).
    x = _exact(([1.0, 0.0, 0.0], 2.0), ([5.0, -1.0, 0.0], 1.0), ([0.1, 0.2, 0.3], 0.0), floor=-1.0)
    out = RULES[aten.tanh.default](Settings(), x)
    # The fixed element's limit is tanh(0.3) as the rule computes it (torch.tanh): libms differ
    # in the last place, so math.tanh is a reference to rounding only.
    assert out.lead.tolist()[:2] == [1.0, -1.0]
    assert out.lead[2].item() == pytest.approx(math.tanh(0.3), rel=4 * 2.0**-52, abs=0)
    assert out.floor == -1.0  # the fixed element's limit is known up to the unknown c⁻¹ part
    grown = RULES[aten.tanh.default](Settings(), _exact(([1.0, -2.0], 1.0), ([0.5, 0.5], 0.0), floor=0.0))
    assert grown.lead.tolist() == [1.0, -1.0] and grown.floor == -math.inf  # e^(−Θ(c)) below all
    with pytest.raises(NeedsOrders, match=r"^2 elements have no known growing part and an unknown part "
                                          r"of order c\^0$"):
        RULES[aten.tanh.default](Settings(), _exact(([1.0, 0.0, 0.0], 1.0), ([0.5] * 3, 0.0), floor=0.0))


def test_signs_of_fixed_parts_and_masks_need_no_bound_and_growing_parts_do() -> None:
    fixed = Term(((torch.tensor([0.0, 0.0], dtype=F64), 1.0), (torch.tensor([-0.5, 0.5], dtype=F64), 0.0)),
                 roundings=(Rounding.of_exact(torch.zeros(2, dtype=F64), 1.0),))
    # The fixed part's tanh, by the implementation the rule uses (libm's may differ in the last bit).
    assert torch.equal(RULES[aten.tanh.default](Settings(), fixed).lead, torch.tanh(fixed.parts[1][0]))
    masked = lift(torch.tensor([-1e30, 2.0], dtype=F64), 1e9)
    assert RULES[aten.relu.default](Settings(), masked).parts[1][0].tolist() == [0.0, 2.0]
    unbounded = Term(((torch.tensor([1.0, -1.0], dtype=F64), 1.0),))
    assert torch.isnan(part_sign(unbounded, 0, Settings())).all()


def test_a_coefficient_equal_to_its_bound_is_unsure_and_an_exact_zero_is_zero() -> None:
    rounding = Rounding(1.0, lambda: torch.ones(2, dtype=F64), 3)
    bound = rounding.bound(F64, 0.0)
    at_bound = Term(((bound * torch.tensor([1.0, -1.0], dtype=F64), 1.0),), roundings=(rounding,))
    assert torch.isnan(part_sign(at_bound, 0, Settings(exact_ties=False))).all()
    zero = torch.tensor([0.0, 2.0], dtype=F64)
    exact_zero = Term(((zero, 1.0),), roundings=(Rounding(1.0, lambda: zero.abs(), 0),))
    assert part_sign(exact_zero, 0, Settings(exact_ties=False)).tolist() == [0.0, 1.0]
    # A NaN bound (a magnitude |x|·|y| with 0·∞ in it) certifies no sign.
    nan_bound = Rounding(1.0, lambda: torch.tensor([math.nan, 1.0], dtype=F64), 3)
    unknown = Term(((torch.tensor([5.0, 5.0], dtype=F64), 1.0),), roundings=(nan_bound,))
    sign = part_sign(unknown, 0, Settings(exact_ties=False))
    assert math.isnan(sign[0]) and sign[1] == 1.0


def test_tied_candidates_share_the_weight_by_the_softmax_of_their_bounded_parts_as_a_series() -> None:
    # Rows of scores s₀ + s₁/c (two rows, three positions, a leading batch dimension so that the
    # row dimension is not dimension 1): softmax over each row's candidates, expanded in 1/c.
    s0 = torch.tensor([[[0.5, 0.5, 9.0], [0.0, 1.0, 2.0]]], dtype=F64)
    s1 = torch.tensor([[[1.0, -1.0, 4.0], [2.0, 0.0, -2.0]]], dtype=F64)
    candidates = torch.tensor([[[True, True, False], [True, True, True]]])
    out = _shared_weights(Term(((s0, 0.0), (s1, -1.0)), floor=-4.0), candidates, 4)
    assert out.parts[0][1] == 0.0 and out.floor >= -5.0
    c = 1e3
    expected = torch.softmax(torch.where(candidates, s0 + s1 / c, -math.inf), dim=-1)
    total = sum(a * c**d for a, d in out.parts)
    assert torch.allclose(total, expected, rtol=0, atol=1e-11)
    # What the scores leave unknown (c⁻²) bounds what the weights can know, whatever the orders.
    assert _shared_weights(Term(((s0, 0.0), (s1, -1.0)), floor=-2.0), candidates, 8).floor == -2.0
    # Without a fixed part, the vanishing one alone splits the weight.
    only = _shared_weights(Term(((s1, -1.0),), floor=-4.0), candidates, 4)
    total = sum(a * c**d for a, d in only.parts)
    expected = torch.softmax(torch.where(candidates, s1 / c, -math.inf), dim=-1)
    assert torch.allclose(total, expected, rtol=0, atol=1e-11)


@pytest.mark.parametrize("factor", [3.0, torch.tensor(3.0, dtype=F64)], ids=["number", "0-d tensor"])
def test_a_product_by_a_constant_scales_the_bound_and_alpha_scales_the_summand(factor: object) -> None:
    magnitude = torch.tensor([5.0, 7.0], dtype=F64)
    x = Term(((torch.tensor([1.0, -1.0], dtype=F64), 1.0),), roundings=(Rounding(1.0, lambda: magnitude, 2),))
    for out in (RULES[aten.mul.Tensor](Settings(), x, factor), RULES[aten.mul.Tensor](Settings(), factor, x)):
        bound = out.rounding(1.0)
        assert out.lead.tolist() == [3.0, -3.0]
        assert bound is not None and bound.length == 3 and bound.magnitude().tolist() == [15.0, 21.0]
    y = Term(((torch.tensor([2.0, 2.0], dtype=F64), 1.0),), roundings=(Rounding(1.0, lambda: magnitude, 2),))
    assert RULES[aten.add.Tensor](Settings(), x, y, alpha=2).lead.tolist() == [5.0, 3.0]
    plain = RULES[aten.add.Tensor](Settings(), x, y).rounding(1.0)
    assert plain is not None and plain.length == 3  # alpha = 1 adds no rounding of its own


def test_a_tie_the_leading_order_cannot_break_names_itself_and_keeps_degree_zero_weights() -> None:
    scores = Term(((torch.tensor([[1.0, 1.0, 0.0]], dtype=F64), 1.0),), floor=0.0,
                  roundings=(Rounding.of_exact(torch.tensor([[1.0, 1.0, 0.0]], dtype=F64), 1.0),))
    tied = RULES[aten._softmax.default](Settings(), scores, -1, False)
    assert isinstance(tied, TiedWeights) and tied.parts[0][1] == 0.0
    assert tied.reason.startswith("hard attention tie: positions share the maximal score")
    assert tied.lead.tolist() == [[0.5, 0.5, 0.0]]


def _first_nonzero_reference(columns: list[list[tuple[float, float]]]) -> list[tuple[bool, float, float]]:
    """Per element (its (coefficient, degree) pairs, highest degree first): whether its first
    nonzero part grows, that part's sign (0 if it does not grow), and its part of degree 0 (0 if
    none), one element at a time."""
    out = []
    for pairs in columns:
        first = next(((a, d) for a, d in pairs if a != 0), None)
        fixed = next((a for a, d in pairs if d == 0), 0.0)
        grows = first is not None and first[1] > 0
        out.append((grows, math.copysign(1.0, first[0]) if grows else 0.0, fixed))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_squashing_and_relu_like_limits_match_an_element_by_element_reading_of_the_parts(seed: int) -> None:
    """tanh, sigmoid and GELU on terms of one to three exactly known parts, zero at random places
    (so that elements lead at different parts, or at none that grows), against the definitions
    read one element at a time: the sign of the first nonzero part where it grows, the function of
    the part of degree 0 elsewhere. The functions' values come from the implementation the rules
    use, on a tensor of the same shape (libms and vector lengths differ in the last place)."""
    generator = torch.Generator().manual_seed(seed)
    count = 1 + seed % 3
    degrees = sorted(torch.randperm(4, generator=generator)[:count].tolist(), reverse=True)
    degrees = [float(d) - (1.0 if seed % 2 else 0.0) for d in degrees]  # some sets have a part of degree 0
    shape = (5, 7)
    coefs = [torch.randn(shape, dtype=F64, generator=generator)
             * (torch.rand(shape, generator=generator) < 0.5) for _ in degrees]
    x = _exact(*[(c.tolist(), d) for c, d in zip(coefs, degrees)], floor=-2.0)
    columns = [[(float(c.flatten()[i]), d) for c, d in zip(coefs, degrees)] for i in range(math.prod(shape))]
    reference = _first_nonzero_reference(columns)
    everywhere = all(grows for grows, _, _ in reference)
    lowest = max([d for d in degrees if d < 0] + [-2.0])
    fixed_values = torch.tensor([fixed for _, _, fixed in reference], dtype=F64).reshape(shape)

    def values_of(at: Callable[[torch.Tensor], torch.Tensor]) -> list[float]:
        return at(fixed_values).flatten().tolist()
    for op, grown, at in ((aten.tanh.default, lambda sign: sign, torch.tanh),
                          (aten.sigmoid.default, lambda sign: float(sign > 0), torch.sigmoid)):
        out = RULES[op](Settings(), x)
        expected = [grown(sign) if grows else value
                    for (grows, sign, _), value in zip(reference, values_of(at))]
        assert out.lead.flatten().tolist() == expected
        assert out.lead.shape == shape and out.floor == (-math.inf if everywhere else lowest)
    gelu = RULES[aten.gelu.default](Settings(), x)
    kept = {d: [a if grows and sign > 0 else 0.0 for (grows, sign, _), a in
                zip(reference, coef.flatten().tolist())] for coef, d in zip(coefs, degrees)}
    kept[0.0] = [a + (0.0 if grows else value) for a, (grows, _, _), value
                 in zip(kept.get(0.0, [0.0] * len(reference)), reference, values_of(nn.functional.gelu))]
    for coef, d in gelu.parts:
        assert coef.flatten().tolist() == kept[d]
    assert {d for _, d in gelu.parts} <= set(kept)
