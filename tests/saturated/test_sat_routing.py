"""The limit rules of mixture-of-experts routers (top-k, sort, argsort, argmax, argmin): each on a
tiny input whose limit is worked out by hand, compared with the ordinary op at growing c in float64
(DESIGN.md convention 4), and the router ties: one a lower order decides, one rounding hides in
float32 that float64 decides, and one that nothing decides, with the node, batch entry and token
it is reported at."""

from __future__ import annotations

import math
import signal

import pytest
import torch
from torch import Tensor, nn

from saturated.errors import SaturationError
from saturated.rounding import Rounding
from saturated.rules import RULES, Settings
from saturated.rules.routing import name_router_rows
from saturated.saturate import SaturatedModel, saturate
from saturated.terms import NeedsOrders, Term

aten = torch.ops.aten
F64 = torch.float64
SCALES = (1e1, 1e2, 1e3, 1e4)


def term(*parts: tuple[list[list[float]], float]) -> Term:
    """A term with exact parts (a bound of 0 that the decisions read), highest degree first."""
    coefs = [(torch.tensor(a, dtype=F64), d) for a, d in parts]
    return Term(tuple(coefs), roundings=tuple(Rounding.of_exact(a, d) for a, d in coefs))


def at(x: Term, c: float) -> Tensor:
    """The value the expansion stands for at scale c."""
    return sum((a * c**d for a, d in x.parts), torch.zeros(()))  # type: ignore[return-value]


def softmax_of(scores: Term, dim: int = -1) -> Term:
    return RULES[aten.softmax.int](Settings(), scores, dim)


# Scores c²·(3, 1, 1, 0) + (0, 0, ½, 0) and c²·(0, 2, 2, 1) + (1, 0, −1, 5): the first row's
# second place is a tie at c² that the constant part gives to position 2; in the second row it
# gives the first place to position 1.
LEXICOGRAPHIC = (([[3.0, 1.0, 1.0, 0.0], [0.0, 2.0, 2.0, 1.0]], 2.0),
                 ([[0.0, 0.0, 0.5, 0.0], [1.0, 0.0, -1.0, 5.0]], 0.0))


def test_topk_ranks_by_the_highest_part_then_the_lower_ones() -> None:
    x = term(*LEXICOGRAPHIC)
    values, indices = RULES[aten.topk.default](Settings(), x, 2)
    assert indices.tolist() == [[0, 2], [1, 2]]
    assert values.parts[0][0].tolist() == [[3.0, 1.0], [2.0, 2.0]]
    assert values.parts[1][0].tolist() == [[0.0, 0.5], [0.0, -1.0]]
    for c in SCALES[1:]:  # the ordinary op agrees once c² outweighs the constant parts
        plain = torch.topk(at(x, c), 2)
        assert plain.indices.tolist() == indices.tolist()
        assert torch.equal(plain.values, at(values, c))


def test_topk_smallest_and_along_another_dimension() -> None:
    x = term(*LEXICOGRAPHIC)
    values, indices = RULES[aten.topk.default](Settings(), x, 1, 0, False)
    # Column by column, the smaller of the two rows: c² decides every column.
    assert indices.tolist() == [[1, 0, 0, 0]]
    for c in SCALES:
        assert torch.topk(at(x, c), 1, 0, False).indices.tolist() == indices.tolist()
    assert values.lead.tolist() == [[0.0, 1.0, 1.0, 0.0]]


def test_softmax_router_ranks_by_the_scores_the_weights_lost() -> None:
    # Weights of a growing row: 1 at the maximum, e^(−Θ(c)) (zero at every order) elsewhere. Their
    # order off the maximum is that of the scores: experts 0, then 2, then 1, then 3.
    scores = term(([[2.0, -1.0, 1.5, -3.0]], 2.0))
    weights = softmax_of(scores)
    assert weights.lead.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    values, indices = RULES[aten.topk.default](Settings(), weights, 3)
    assert indices.tolist() == [[0, 2, 1]] and values.lead.tolist() == [[1.0, 0.0, 0.0]]
    scales = (1.0, 2.0, 4.0, 8.0)  # beyond, float64 weights underflow to 0 and tie
    for c in scales:
        assert torch.topk(torch.softmax(at(scores, c), -1), 3).indices.tolist() == [[0, 2, 1]]
    errors = [float((torch.topk(torch.softmax(at(scores, c), -1), 3).values - values.lead).abs().max())
              for c in scales]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-13  # about e^(−c²/2)


def test_router_tie_at_the_top_decided_by_a_lower_order() -> None:
    # Experts 0 and 1 tie at c²; the constant part prefers 1, so softmax gives them
    # (e⁰, e^½)/(e⁰ + e^½) for every c and top-1 is expert 1 with that weight.
    scores = term(([[1.0, 1.0, 0.0]], 2.0), ([[0.0, 0.5, 0.0]], 0.0))
    values, indices = RULES[aten.topk.default](Settings(), softmax_of(scores), 1)
    share = math.exp(0.5) / (1 + math.exp(0.5))
    assert indices.tolist() == [[1]] and float(values.lead) == pytest.approx(share, rel=1e-15)
    for c in SCALES:
        plain = torch.topk(torch.softmax(at(scores, c), -1), 1)
        assert plain.indices.tolist() == [[1]] and float(plain.values) == pytest.approx(share, rel=1e-12)


def test_tie_at_the_kth_place_without_weight_does_not_matter() -> None:
    # Experts 1 and 2 tie exactly for the second place, but their softmax weight is e^(−Θ(c)):
    # whichever a router takes, it adds nothing. The lower position is reported.
    scores = term(([[2.0, 1.0, 1.0, 0.0]], 1.0))
    values, indices = RULES[aten.topk.default](Settings(), softmax_of(scores), 2)
    assert indices.tolist() == [[0, 1]] and values.lead.tolist() == [[1.0, 0.0]]


def test_softmax_zeros_stay_exact_below_a_truncated_series() -> None:
    # Experts 0 and 1 tie at c² and share the weight by a series truncated at c⁻¹; experts 2 and
    # 3 tie for the third place with weight e^(−Θ(c)): still nothing to decide.
    scores = Term(term(([[1.0, 1.0, 0.0, 0.0]], 2.0), ([[0.0, 0.5, 0.0, 0.0]], 0.0)).parts, floor=-1.0)
    weights = softmax_of(scores)
    assert weights.floor == -1.0
    values, indices = RULES[aten.topk.default](Settings(), weights, 3)
    assert indices.tolist() == [[1, 0, 2]] and values.lead[0, 2] == 0


def test_tie_at_the_kth_place_with_weight_matters() -> None:
    # Experts 0 and 1 share the maximum exactly (weight ½ each); top-1 must drop one of them, and
    # torch.topk promises no order among equal values: undetermined.
    scores = term(([[1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], 1.0))
    weights = softmax_of(scores)
    with pytest.raises(NeedsOrders, match=r"router tie at router row 0 of 2: tied experts at the "
                                          r"k-th place carry weight \(slot 0, position 0\), exactly"):
        RULES[aten.topk.default](Settings(), weights, 1)
    values, indices = RULES[aten.topk.default](Settings(ties="nan"), weights, 1)
    assert math.isnan(values.lead[0, 0]) and values.lead[1].tolist() == [1.0] and indices[1].tolist() == [0]
    # Top-2 takes both: determined, with their weights.
    values, indices = RULES[aten.topk.default](Settings(), weights, 2)
    assert indices.tolist() == [[0, 1], [0, 2]] and values.lead.tolist() == [[0.5, 0.5], [1.0, 0.0]]


def test_tie_that_the_tracked_orders_leave_open_is_named_with_its_reason() -> None:
    # One part tracked, more untracked below (floor c⁰): the tie at c² may break either way.
    scores = Term(term(([[1.0, 1.0, 0.0]], 2.0)).parts, floor=0.0)
    with pytest.raises(NeedsOrders, match="untracked part of order c\\^0 decides"):
        RULES[aten.topk.default](Settings(), scores, 1)
    # Exact within the top-k set, the order of the slots is left to position; a router sums them.
    assert RULES[aten.topk.default](Settings(), scores, 2)[1].tolist() == [[0, 1]]


def test_softmax_weights_whose_split_is_unknown_matter_inside_the_set() -> None:
    # The scores tie at c² with an untracked part below: softmax returns tied weights whose split
    # only the untracked part knows; top-2 takes both tied experts, so their values are unknown.
    scores = Term(term(([[1.0, 1.0, 0.0]], 2.0)).parts, floor=0.0)
    weights = softmax_of(scores)
    with pytest.raises(NeedsOrders, match="split of the softmax weight over tied experts is unknown"):
        RULES[aten.topk.default](Settings(), weights, 2)
    values, _ = RULES[aten.topk.default](Settings(ties="nan"), weights, 2)
    assert torch.isnan(values.lead).all()


def test_sort_argsort_argmax_argmin_by_hand() -> None:
    x = term(*LEXICOGRAPHIC)
    values, indices = RULES[aten.sort.default](Settings(), x, -1, True)
    assert indices.tolist() == [[0, 2, 1, 3], [1, 2, 3, 0]]
    assert values.lead.tolist() == [[3.0, 1.0, 1.0, 0.0], [2.0, 2.0, 1.0, 0.0]]
    assert RULES[aten.sort.stable](Settings(), x, stable=True, dim=-1, descending=False)[1].tolist() \
        == [[3, 1, 2, 0], [0, 3, 2, 1]]
    assert RULES[aten.argsort.default](Settings(), x, 1, True).tolist() == indices.tolist()
    ascending = RULES[aten.argsort.stable](Settings(), x, stable=True, dim=1)
    assert ascending.tolist() == [[3, 1, 2, 0], [0, 3, 2, 1]]
    assert RULES[aten.argmax.default](Settings(), x, 1).tolist() == [0, 1]
    assert RULES[aten.argmax.default](Settings(), x, 1, True).tolist() == [[0], [1]]
    assert RULES[aten.argmin.default](Settings(), x, 1).tolist() == [3, 0]
    assert int(RULES[aten.argmax.default](Settings(), x)) == 0  # flattened: 3c² leads
    for c in SCALES[1:]:
        v = at(x, c)
        assert torch.sort(v, -1, True).indices.tolist() == indices.tolist()
        assert torch.argmax(v, 1).tolist() == [0, 1] and torch.argmin(v, 1).tolist() == [3, 0]


def test_positions_of_exact_ties_come_first_to_last_and_open_ties_raise() -> None:
    exact = term(([[1.0, 2.0, 2.0]], 1.0))
    assert RULES[aten.argmax.default](Settings(), exact, 1).tolist() == [1]  # as torch.argmax
    assert torch.argmax(at(exact, 10.0), 1).tolist() == [1]
    assert RULES[aten.argmin.default](Settings(), term(([[2.0, 1.0, 1.0]], 1.0)), 1).tolist() == [1]
    opened = Term(exact.parts, floor=0.0)
    with pytest.raises(NeedsOrders, match="router tie at router row 0 of 1: tied positions"):
        RULES[aten.argmax.default](Settings(), opened, 1)
    with pytest.raises(NeedsOrders, match="tied positions"):
        RULES[aten.argsort.default](Settings(ties="nan"), opened)  # positions hold no NaN


def test_router_rows_are_named_by_batch_entry_and_token() -> None:
    ids = torch.zeros(3, 4, dtype=torch.long)
    assert name_router_rows("router row 9 of 12, router row 0 of 12", [ids]) == \
        "batch entry 2, token 1, batch entry 0, token 0"
    assert name_router_rows("router row 9 of 10", [ids]) == "router row 9 of 10"  # not the tokens
    assert name_router_rows("router row 9 of 12", [torch.zeros(12)]) == "router row 9 of 12"


class Router(nn.Module):
    """A one-layer mixture of three experts: x (batch, tokens, 2) → gate → softmax → top-k, each
    chosen expert's linear map weighted by its softmax weight and summed (as Mixtral does).

    Expert e's gate row is (1, 0), (0, 1), (−1, −1) (plus ``bias``, degree 1 like every parameter;
    the gate's input is x·c, degree 1, so the logits are c²·Wx + c·b): a token (a, a) ties experts
    0 and 1 at c², and the bias decides it one order below.
    """

    def __init__(self, k: int = 1, bias: tuple[float, float, float] | None = None) -> None:
        super().__init__()
        self.k = k
        self.inner = nn.Linear(2, 2, bias=False)
        self.gate = nn.Linear(2, 3, bias=bias is not None)
        self.experts = nn.Parameter(torch.arange(12.0).reshape(3, 2, 2) - 5)
        with torch.no_grad():
            self.inner.weight.copy_(torch.eye(2))
            self.gate.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]))
            if bias is not None:
                self.gate.bias.copy_(torch.tensor(bias))

    def forward(self, x: Tensor) -> Tensor:
        h = self.inner(x).reshape(-1, 2)
        weights, chosen = torch.topk(torch.softmax(self.gate(h), -1), self.k)
        mapped = (self.experts[chosen.reshape(-1)] @ h.repeat_interleave(self.k, 0).unsqueeze(-1)).squeeze(-1)
        return (mapped * weights.reshape(-1, 1)).reshape(-1, self.k, 2).sum(1).reshape(*x.shape)


TOKENS = torch.tensor([[[1.0, -3.0], [0.5, 3.0], [2.0, 1.0]], [[-1.0, 1.0], [3.0, -1.0], [2.0, 2.0]]],
                      dtype=F64)


def scaled(model: nn.Module, x: Tensor, c: float) -> Tensor:
    with torch.no_grad():
        return torch.func.functional_call(model, {n: c * p for n, p in model.named_parameters()}, (x,))


def test_router_limit_agrees_with_growing_c_and_a_lower_order_decides_a_tie() -> None:
    # Token (2, 2) of batch entry 1 ties experts 0 and 1 at c²; the bias (0, 1, 0) picks expert 1.
    model = Router(bias=(0.0, 1.0, 0.0)).double()
    out = saturate(model, TOKENS)(TOKENS)
    assert out.degrees == 2.0 and out.orders == 2 and out.refined == (1,)
    assert torch.equal(out.value[1, 2], model.experts.detach()[1] @ TOKENS[1, 2])
    # The tie costs e^(−Θ(c)) at c: about e^(−c)·|E₁x − E₀x| for that token.
    errors = [float((scaled(model, TOKENS, c) / c**2 - out.value).abs().max())
              for c in (1.0, 3.0, 10.0, 30.0)]
    assert errors == sorted(errors, reverse=True) and errors[0] > 0.1 and errors[-1] < 1e-11


def test_router_tie_nothing_decides_names_node_batch_entry_and_token() -> None:
    model = Router(k=1).double()
    with pytest.raises(SaturationError, match=r"router tie at batch entry 1, token 2: tied experts at the "
                                              r"k-th place carry weight .*node 'topk'"):
        saturate(model, TOKENS)
    out = SaturatedModel(model, Settings(), undetermined="nan")(TOKENS)
    unknown = torch.isnan(out.value).any(-1)
    assert unknown.tolist() == [[False] * 3, [False, False, True]]
    # Every other token follows the ordinary router at growing c.
    assert float((scaled(model, TOKENS, 1e2) / 1e4 - out.value)[~unknown].abs().max()) < 1e-12
    # Top-2 takes both tied experts with weight ½ each: determined.
    both = saturate(Router(k=2).double(), TOKENS)(TOKENS)
    assert torch.equal(both.value[1, 2], model.experts.detach()[:2].sum(0) @ TOKENS[1, 2] / 2)


def test_router_near_tie_in_float32_is_decided_in_float64() -> None:
    # Token (1, 1 + 2⁻²³) reaches the gate as (1, 1 + 2⁻²³)·c: float32 holds it, but the logits'
    # difference 2⁻²³ is within the float32 rounding bound of the gate's dot products, so the
    # entry is recomputed in float64, where expert 1 wins exactly.
    model = Router(k=1)
    x = torch.tensor([[[3.0, -1.0], [1.0, 1.0 + 2.0**-23]]])
    out = saturate(model, x)(x)
    assert out.refined == (0,)
    assert torch.equal(out.value[0, 1], (model.experts.detach()[1] @ x[0, 1]).float())


def by_degree(x: Term) -> dict[float, list[list[float]]]:
    return {d: a.tolist() for a, d in x.parts}


def test_scatter_rules_keep_each_elements_expansion_and_agree_with_growing_c() -> None:
    x = term(([[1.0, 2.0], [3.0, 4.0]], 1.0))
    source = term(([[10.0, 20.0]], 2.0), ([[1.0, 1.0]], 0.0))
    index = torch.tensor([[1, 0]])  # source[0, j] goes to row index[0, j] of column j
    rules = {
        "scatter": (lambda s, x, src: RULES[aten.scatter.src](s, x, 0, index, src),
                    lambda x, src: x.scatter(0, index, src),
                    {2.0: [[0, 20], [10, 0]], 1.0: [[1, 0], [0, 4]], 0.0: [[0, 1], [1, 0]]}),
        "scatter_add": (lambda s, x, src: RULES[aten.scatter_add.default](s, x, 0, index, src),
                        lambda x, src: x.scatter_add(0, index, src),
                        {2.0: [[0, 20], [10, 0]], 1.0: [[1, 2], [3, 4]], 0.0: [[0, 1], [1, 0]]}),
        "index_add": (lambda s, x, src: RULES[aten.index_add.default](s, x, 0, torch.tensor([1]), src,
                                                                      alpha=2.0),
                      lambda x, src: x.index_add(0, torch.tensor([1]), src, alpha=2.0),
                      {2.0: [[0, 0], [20, 40]], 1.0: [[1, 2], [3, 4]], 0.0: [[0, 0], [2, 2]]}),
        "scatter value": (lambda s, x, src: RULES[aten.scatter.value](s, x, 1, torch.tensor([[0], [1]]), 7.0),
                          lambda x, src: x.scatter(1, torch.tensor([[0], [1]]), 7.0),
                          {1.0: [[0, 2], [3, 0]], 0.0: [[7, 0], [0, 7]]}),
    }
    for name, (rule, op, expected) in rules.items():
        out = rule(Settings(), x, source)
        assert by_degree(out) == expected, name
        for c in SCALES:
            assert torch.allclose(at(out, c), op(at(x, c), at(source, c)), rtol=1e-15, atol=0), (name, c)
    # A selection keeps each element's rounding bound: x's (0) where x is kept.
    kept = RULES[aten.scatter.src](Settings(), x, 0, index, source).rounding(1.0)
    assert kept is not None and kept.magnitude().tolist() == [[1, 0], [0, 4]]


# Ties in routers of more than two dimensions, ties only rounding leaves open, ties among zeros,
# and the expansions the chosen values keep.


def tied_topk_message(shape: tuple[int, ...], tied_row: int) -> str:
    """The refusal of top-1 over the last dimension of raw scores (values that are not zero) of
    ``shape``, every row distinct but row ``tied_row`` (flat), whose experts 0 and 1 tie exactly."""
    rows = math.prod(shape[:-1])
    scores = torch.arange(rows * shape[-1], dtype=F64).reshape(rows, shape[-1]) % 5 + 1
    scores[:, 0] = 10.0 + torch.arange(rows)
    scores[tied_row, :2] = 20.0
    with pytest.raises(NeedsOrders) as refused:
        RULES[aten.topk.default](Settings(), term((scores.reshape(shape).tolist(), 1.0)), 1)
    return str(refused.value)


@pytest.mark.parametrize(("shape", "tied_row", "place"), [
    ((4, 3), 2, "router row 2 of 4"),
    ((2, 3, 3), 4, "batch entry 1, token 1"),
    ((2, 2, 2, 3), 5, "batch entry 1, token 0 (row [1, 0, 1])"),
])
def test_a_router_tie_names_its_row_by_batch_entry_and_token(shape: tuple[int, ...], tied_row: int,
                                                             place: str) -> None:
    assert tied_topk_message(shape, tied_row) == (
        f"router tie at {place}: tied experts at the k-th place carry weight (slot 0, position 0), "
        "exactly, at every order")


def test_a_tie_only_rounding_leaves_open_is_undetermined_and_a_clear_maximum_is_not() -> None:
    # Scores with a float64 bound (γ₂·100 ≈ 2·10⁻¹⁴) but no exact values behind it: 1 and 1 + 10⁻¹⁵
    # may be either way round.
    near = torch.tensor([[1.0, 1.0 + 1e-15, 0.0]], dtype=F64)
    magnitude = torch.full((1, 3), 100.0, dtype=F64)
    bounded = Term(((near, 1.0),), roundings=(Rounding(1.0, lambda: magnitude, 2),))
    reason = "within the rounding bound of torch.float64, which cannot tell a near-tie from a tie"
    with pytest.raises(NeedsOrders) as refused:
        RULES[aten.topk.default](Settings(), bounded, 1)
    assert str(refused.value) == ("router tie at router row 0 of 1: tied experts at the k-th place carry "
                                  f"weight (slot 0, position 0), {reason}")
    with pytest.raises(NeedsOrders, match=r"tied positions \(slot 0, position 0\), " + reason):
        RULES[aten.argmax.default](Settings(), bounded, 1)
    # Top-2 takes both; the bound separates 2 from them, so its argmax is decided.
    assert RULES[aten.topk.default](Settings(), bounded, 2)[1].tolist() == [[0, 1]]
    clear = Term(((near + torch.tensor([0.0, 0.0, 2.0], dtype=F64), 1.0),), roundings=bounded.roundings)
    assert RULES[aten.argmax.default](Settings(), clear, 1).tolist() == [2]


@pytest.mark.parametrize("rows", [[[5.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, -1.0]],
                                  [[0.0, 0.0, 0.0, -1.0], [5.0, 0.0, 0.0, 0.0]]])
def test_a_tie_among_exact_zeros_at_the_kth_place_is_judged_in_its_own_row(rows: list[list[float]]) -> None:
    # In each row three experts tie at 0 for the last slot(s): exact zeros at every order, so
    # whichever a router takes adds nothing, whatever the other row holds in the same pass.
    x = term((rows, 1.0))
    values, indices = RULES[aten.topk.default](Settings(), x, 2)
    assert indices.tolist() == [[0, 1], [0, 1]]
    assert values.lead.tolist() == [[r[0], 0.0] for r in rows]
    for c in SCALES:
        assert torch.equal(torch.topk(at(x, c), 2).values, at(values, c))


def test_unknown_softmax_splits_are_nan_only_at_the_tied_experts_of_tied_rows() -> None:
    # Row 0 ties experts 0 and 1 beyond the tracked order; row 1 has one winner. Top-3 takes every
    # expert: only row 0's two tied weights are unknown.
    scores = Term(term(([[1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], 2.0)).parts, floor=0.0)
    values, indices = RULES[aten.topk.default](Settings(ties="nan"), softmax_of(scores), 3)
    assert indices.tolist() == [[0, 1, 2], [0, 2, 1]]
    assert torch.isnan(values.lead).tolist() == [[True, True, False], [False, False, False]]
    assert values.lead[0, 2] == 0.0 and values.lead[1].tolist() == [1.0, 0.0, 0.0]


def test_a_row_emptied_by_a_nan_score_takes_what_is_left_undetermined() -> None:
    # Each pass takes at least one position from every unfinished row, so the ranking ends; the
    # alarm turns a pass that takes nothing (an endless loop) into a failure.
    x = term(([[math.nan, 1.0, 0.0], [3.0, 1.0, 2.0]], 1.0))
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the ranking did not end"))
    signal.alarm(30)
    try:
        values, indices = RULES[aten.topk.default](Settings(ties="nan"), x, 2)
        with pytest.raises(NeedsOrders, match="router tie at router row 0 of 2: tied positions"):
            RULES[aten.argmax.default](Settings(ties="nan"), x, 1)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert indices[1].tolist() == [0, 2] and values.lead[1].tolist() == [3.0, 2.0]
    assert torch.isnan(values.lead[0]).all()


def test_an_open_tie_in_a_sort_names_the_slot_and_position_it_fills() -> None:
    opened = Term(term(([[1.0, 2.0, 2.0]], 1.0)).parts, floor=0.0)
    with pytest.raises(NeedsOrders) as refused:
        RULES[aten.sort.default](Settings(), opened, -1, True)
    assert str(refused.value) == ("router tie at router row 0 of 1: tied positions (slot 0, position 1), at "
                                  "every tracked order; the untracked part of order c^0 decides between them")


def test_extrema_of_a_vector_along_its_last_dimension() -> None:
    x = term(([2.0, 5.0, -1.0, 3.0], 1.0))
    assert RULES[aten.argmax.default](Settings(), x, -1).tolist() == 1
    assert RULES[aten.argmax.default](Settings(), x, -1, True).tolist() == [1]
    assert RULES[aten.argmin.default](Settings(), x, -1).tolist() == 2
    assert RULES[aten.sort.default](Settings(), x, -1)[1].tolist() == [2, 0, 3, 1]
    assert torch.argmax(at(x, 10.0), -1).tolist() == 1


def test_chosen_values_keep_their_floor_and_rounding_bounds() -> None:
    x = Term(term(([[3.0, 1.0, 2.0]], 2.0), ([[0.5, 0.25, 0.125]], 1.0)).parts, floor=0.0,
             roundings=(Rounding(2.0, lambda: torch.tensor([[30.0, 10.0, 20.0]], dtype=F64), 4),))
    values, indices = RULES[aten.topk.default](Settings(), x, 2)
    assert indices.tolist() == [[0, 2]] and values.floor == 0.0
    assert values.parts[1][0].tolist() == [[0.5, 0.125]]
    bound = values.rounding(2.0)
    assert bound is not None and bound.length == 4 and bound.magnitude().tolist() == [[30.0, 20.0]]
    assert values.rounding(1.0) is None
    assert RULES[aten.sort.default](Settings(), x, -1)[0].floor == 0.0


@pytest.mark.parametrize("op", ["scatter_add", "index_add"])
def test_a_scattered_sum_of_computed_values_that_cancels_keeps_its_zero_part(op: str) -> None:
    # x + source at degree 2 cancels to 0 where both come without a bound (computed values a rule
    # kept no bound for): that 0 may be rounding's, so it stays, for a decision to read, rather
    # than letting the degree-0 part lead. Exact summands added as they are cancel to a known
    # zero, dropped (index_add scales its source by alpha first: no longer exact).
    def added(x: Term, source: Term) -> Term:
        if op == "scatter_add":
            return RULES[aten.scatter_add.default](Settings(orders=2), x, 1, torch.tensor([[0, 1]]), source)
        return RULES[aten.index_add.default](Settings(orders=2), x, 0, torch.tensor([0]), source)

    lead, rest = torch.tensor([[1.0, 2.0]], dtype=F64), torch.tensor([[3.0, 4.0]], dtype=F64)
    computed = added(Term(((lead, 2.0), (rest, 0.0))), Term(((-lead, 2.0),)))
    assert [d for _, d in computed.parts] == [2.0, 0.0] and computed.lead.tolist() == [[0.0, 0.0]]
    exact = added(term((lead.tolist(), 2.0), (rest.tolist(), 0.0)), term(((-lead).tolist(), 2.0)))
    if op == "scatter_add":
        assert [d for _, d in exact.parts] == [0.0] and exact.lead.tolist() == [[3.0, 4.0]]
    else:
        assert [d for _, d in exact.parts] == [2.0, 0.0] and exact.lead.tolist() == [[0.0, 0.0]]


def test_a_near_tie_within_rounding_is_not_split_by_a_lower_part() -> None:
    """Two scores within their rounding bound of each other (no exact step behind it) may differ
    at that part, and then that part decides, whatever the part below says: neither hard
    attention nor a router may take the lower part's winner. The first row below is such a
    near-tie (1 and 1 − 10⁻¹⁴, bound γ₁₀₀ ≈ 1.1·10⁻¹⁴); in the second the leading part decides."""
    from saturated.rules.common import maximal
    from saturated.ties import TiedWeights

    lead = torch.tensor([[1.0, 1.0 - 1e-14, 0.5], [2.0, 1.0, 0.0]], dtype=F64)
    lower = torch.tensor([[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]], dtype=F64)
    rounded = Rounding(degree=2.0, magnitude=lambda: torch.ones_like(lead), length=100)
    scores = Term(((lead, 2.0), (lower, 1.0)), roundings=(rounded, Rounding.of_exact(lower, 1.0)))
    settings = Settings(orders=2, ties="nan", exact_ties=True)
    everywhere = torch.ones(lead.shape, dtype=torch.bool)
    candidates, settled = maximal(scores, -1, everywhere, settings, lambda d: 0 < d < math.inf)
    assert candidates.tolist() == [[True, True, False], [True, False, False]] and not settled
    weights = RULES[aten.softmax.int](settings, scores, -1)
    assert isinstance(weights, TiedWeights) and "within the rounding bound" in weights.reason
    assert weights.lead.tolist() == [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]
    values, indices = RULES[aten.topk.default](settings, scores, 1)
    assert torch.isnan(values.lead[0]).all() and indices[1].tolist() == [0]
    assert values.lead[1].tolist() == [2.0]
    # A leading part known exactly, with a true tie in the first row: the lower part splits it.
    tied = lead.clone()
    tied[0, 1] = 1.0
    exact = Term(((tied, 2.0), (lower, 1.0)), roundings=(Rounding.of_exact(tied, 2.0),
                                                         Rounding.of_exact(lower, 1.0)))
    assert RULES[aten.topk.default](settings, exact, 1)[1].tolist() == [[1], [0]]
