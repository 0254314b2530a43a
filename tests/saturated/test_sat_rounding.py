"""Decisions that rounding reverses: the limit follows the exact values, not the computed ones.

Each case is built so that the computed value's error is far above 64 eps of the value itself
(the old tie tolerance), and the premise is checked on this machine's arithmetic first.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from torch import nn

from saturated.errors import SaturationError
from saturated.functional import tie_set
from saturated.rounding import Rounding, exact_sign, gamma, product_rounding, smallest_subnormal
from saturated.rules import Settings
from saturated.saturate import saturate

# Keys a and b of one query (found by search): q·k_a > q·k_b exactly, yet every order of
# evaluating either dot product (with or without a fused multiply-add) reverses them.
FLOAT32_CASE = ([1.8856338262557983, -1.2005536556243896],
                [[1.949885368347168, 3.0625617504119873], [1.6479601860046387, 2.5883469581604004]])
FLOAT64_CASE = ([1.9573762322680008, -1.4437003921197624],
                [[1.4724596924341677, 1.996368235871616], [1.90305327344635, 2.5801691725762823]])


class DotHead(nn.Module):
    """softmax(q · kⱼ) over tokens j, then their one-hot values: a fixed query, keys through an
    identity weight (degree 1, computed exactly), so only the score's own rounding is at stake."""

    def __init__(self, query: list[float], tokens: int) -> None:
        super().__init__()
        self.register_buffer("query", torch.tensor([query], dtype=torch.float64))
        self.key = nn.Linear(2, 2, bias=False)
        self.value = nn.Linear(tokens, tokens, bias=False)
        with torch.no_grad():
            self.key.weight.copy_(torch.eye(2))
            self.value.weight.copy_(torch.eye(tokens))

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return self.query.to(x.dtype) @ self.key(x[..., :2]).transpose(-2, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.scores(x), dim=-1) @ self.value(x[..., 2:])


class EinsumHead(DotHead):
    """The same head with its scores and its weighted sum written as einsums (as XLNet does)."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("qd,bkd->bqk", self.query.to(x.dtype), self.key(x[..., :2]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bqk,bkv->bqv", torch.softmax(self.scores(x), dim=-1), self.value(x[..., 2:]))


class SummedHead(DotHead):
    """The same scores computed twice and added: the sum's exact values are its summands'."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return super().scores(x) + super().scores(x)


class RescaledSumHead(DotHead):
    """s + 3·s: the scaled summand's exact values are known only up to the factor 3 (a product by
    3 rounds), so the sum keeps a bound but no exact values."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return super().scores(x) + 3.0 * super().scores(x)


class MaskedHead(DotHead):
    """The same scores through masked_fill(−∞) with a causal-style mask (here masking nothing)."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        scores = super().scores(x)
        return scores.masked_fill(torch.zeros(scores.shape[-2:], dtype=torch.bool), float("-inf"))


class WhereHead(DotHead):
    """The same scores through where(mask, scores, −∞)."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        scores = super().scores(x)
        return torch.where(torch.ones(scores.shape[-2:], dtype=torch.bool), scores, float("-inf"))


class CatHead(DotHead):
    """The same scores split per key and concatenated again."""

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        scores = super().scores(x)
        return torch.cat([scores[..., :1], scores[..., 1:]], -1)


def tokens(keys: list[list[float]], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([[[*k, *(1.0 if i == j else 0.0 for j in range(len(keys)))]
                          for i, k in enumerate(keys)]], dtype=dtype)


def exact_scores(query: list[float], keys: list[list[float]]) -> list[Fraction]:
    return [sum((Fraction(q) * Fraction(k) for q, k in zip(query, key)), Fraction(0)) for key in keys]


@pytest.mark.parametrize("head_class", [DotHead, EinsumHead, MaskedHead, WhereHead, CatHead, SummedHead],
                         ids=["matmul", "einsum", "masked_fill", "where", "cat", "sum"])
@pytest.mark.parametrize(("case", "dtype"), [(FLOAT32_CASE, torch.float32), (FLOAT64_CASE, torch.float64)],
                         ids=["float32", "float64"])
def test_scores_that_cancel_pick_the_exact_maximum(case: tuple[list[float], list[list[float]]],
                                                    dtype: torch.dtype, head_class: type[DotHead]) -> None:
    query, keys = case
    x = tokens(keys, dtype)
    exact = exact_scores(query, keys)
    assert exact[0] > exact[1] and (exact[0] - exact[1]) / exact[0] > 0.3  # a wins by 30%
    head = head_class(query, 2).to(dtype)
    with torch.no_grad():  # the scores as the head computes them
        computed = head.scores(x)[0, 0]
    assert computed[1] >= computed[0], "premise: rounding hides a's win here"
    assert tie_set(computed)[1]  # b counts as a maximum, far beyond a 64-eps tolerance
    out = saturate(head, x)(x)
    assert out.value.tolist() == [[[1.0, 0.0]]]  # the query attends to a alone
    # float32 cannot separate them within its bound and recomputes; float64 settles them exactly.
    assert out.refined == ((0,) if dtype == torch.float32 else ())


def test_a_near_tie_no_exact_step_can_settle_is_undetermined_not_averaged() -> None:
    # Without exact values behind the bound, float64 cannot tell this near-tie from a tie: the
    # limit must not treat it as an exact tie and average the two keys.
    query, keys = FLOAT64_CASE
    x = tokens(keys, torch.float64)
    with pytest.raises(SaturationError, match=r"within the rounding bound of torch\.float64"):
        saturate(RescaledSumHead(query, 2).double(), x)
    nan = saturate(RescaledSumHead(query, 2).double(), x, settings=Settings(ties="nan"))(x)
    assert torch.isnan(nan.value).all()


def test_scores_the_bound_separates_are_decided_in_float32() -> None:
    # The same scores with a margin far above the bound γ₂·Σ|qᵢ||kᵢ| are decided without float64.
    query, keys = [1.0, 0.0], [[1.0, 0.0], [1.0 + 2.0**-12, 0.0]]
    x = tokens(keys, torch.float32)
    out = saturate(DotHead(query, 2), x)(x)
    assert out.refined == () and out.value.tolist() == [[[0.0, 1.0]]]
    assert 2 * gamma(2, torch.float32) * (1 + 2.0**-12) < 2.0**-12


class CancelledSum(nn.Module):
    """An activation of Σᵢ wᵢxᵢ (summed left to right by elementwise ops) and a second layer with a
    bias: if the activation's input is negative the output's degree-2 part is zero and the bias
    (degree 1) is the limit; if positive, the degree-2 part is."""

    def __init__(self, activation: nn.Module, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.activation = activation
        self.out = nn.Linear(1, 1)
        with torch.no_grad():
            self.out.weight.fill_(1.0)
            self.out.bias.fill_(-3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = x[..., 0] * self.weight[0]
        for i in range(1, x.shape[-1]):
            total = total + x[..., i] * self.weight[i]
        return self.out(self.activation(total).unsqueeze(-1))


@pytest.mark.parametrize("activation", [nn.ReLU(), nn.GELU()], ids=["relu", "gelu"])
def test_activation_input_that_cancels_takes_the_exact_sign(activation: nn.Module) -> None:
    # −2²⁴ + 0.9 rounds to −(2²⁴ − 1) in float32, so the computed sum is +0.05 where the exact
    # one is 0.9 − 1 + 0.05 < 0: the activation is off, and the limit is the bias, of degree 1.
    x = torch.tensor([[-(2.0**24), 0.9, 2.0**24 - 1, 0.05]])
    exact = sum((Fraction(float(v)) for v in x[0]), Fraction(0))
    assert exact < 0 < float(((x[0, 0] + x[0, 1]) + x[0, 2]) + x[0, 3]), "premise"
    net = CancelledSum(activation, 4)
    out = saturate(net, x)(x)
    assert out.degrees == 1.0 and out.value.tolist() == [[-3.0]]
    wide = saturate(net.double(), x.double())(x.double())
    assert wide.degrees == 1.0 and wide.value.tolist() == [[-3.0]]


class CancelledNorm(nn.Module):
    """LayerNorm(W·x + y): the product grows (degree 1), y is fixed (degree 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(3, 2, bias=False)
        self.norm = nn.LayerNorm(2)
        with torch.no_grad():
            self.mix.weight.copy_(torch.tensor([[1e8, 1.0, -1e8], [0.0, 1.0, 0.0]]))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.norm(self.mix(x) + y)


def test_layer_norm_of_a_row_that_is_constant_up_to_rounding_lets_the_lower_order_lead() -> None:
    # W·x is (1e8 + 1 − 1e8, 1) = (1, 1) exactly, a constant row, so the fixed part y decides the
    # direction: LayerNorm(y) = (1, −1). float32 computes 1e8 + 1 = 1e8, hence (0, 1), whose
    # normalization (−1, 1) is pure rounding; float64 computes the row exactly.
    x, y = torch.ones(1, 3), torch.tensor([[2.0, 0.0]])
    net = CancelledNorm()
    with torch.no_grad():
        assert net.mix(x).tolist() == [[0.0, 1.0]], "premise: float32 rounding breaks the tie"
    out = saturate(net, x, y)(x, y)
    assert out.refined == (0,) and out.orders == 2
    assert out.degrees == 1.0 and torch.allclose(out.value, torch.tensor([[1.0, -1.0]]))


def test_exact_sign_is_exact() -> None:
    rows = torch.tensor([[2.0**60, 1.0, -(2.0**60)], [2.0**60, -1.0, -(2.0**60)], [1e-300, -1e-300, 0.0]],
                        dtype=torch.float64)
    assert exact_sign(rows) == [1, -1, 0]


class EmbeddedScores(nn.Module):
    """Scores read from an embedding table (exact values, cast to float64 when the limit is
    recomputed there), a softmax over positions, and the values it weights."""

    def __init__(self) -> None:
        super().__init__()
        self.scores = nn.Embedding(3, 1)
        with torch.no_grad():
            self.scores.weight.copy_(torch.tensor([[2.0], [2.0], [1.0]]))

    def forward(self, ids: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.scores(ids).squeeze(-1), dim=-1)
        return (weights.unsqueeze(-1) * values).sum(-2)


def test_exact_scores_cast_to_float64_keep_integer_positions_for_the_exact_step() -> None:
    """Issue 24: a float32 tie of exact scores (two tokens with the same embedding, different
    values) is recomputed in float64, where the cast of the scores used to cast their positions
    too, and the exact step indexed with floats (IndexError)."""
    ids = torch.tensor([[0, 1, 2], [2, 0, 2]])
    values = torch.tensor([[1.0], [3.0], [5.0]]).expand(2, 3, 1)
    out = saturate(EmbeddedScores(), ids, values)(ids, values)
    assert out.refined == (0,)
    assert out.value.tolist() == [[2.0], [3.0]]  # tied tokens 0 and 1 share the weight; token 1


def test_positions_survive_a_cast_and_move_with_a_shape_op() -> None:
    from saturated.rounding import Rounding, exact_maximal
    coef = torch.tensor([[2.0, 2.0, 1.0], [1.0, 3.0, 3.0]])
    cast = Rounding.of_exact(coef, 1.0).map(lambda a: a.to(torch.float64))
    assert cast.index is not None and cast.index().dtype == torch.int64
    candidates = torch.tensor([[True, True, False], [False, True, True]])
    assert torch.equal(exact_maximal(candidates, -1, cast), candidates)  # exact ties stay
    flipped = Rounding.of_exact(coef, 1.0).map(lambda a: a.flip(-1))
    assert flipped.index is not None and flipped.index()[0].tolist() == [2, 1, 0]


def test_a_carried_bound_read_by_several_ops_is_computed_once() -> None:
    """Issue 24: T5's RMSNorm (composed of ops) reads its input twice, so a deep stack reaches each
    earlier bound by exponentially many paths. Here each step is x·x with one bound on both sides:
    the base's carried error is asked for once, and the bound follows the hand recurrence
    c' = |x|·b + b·(|x| + b) = 2b + b² with b = γ₁·|x|² + u_min + c and |x| = 1."""
    f64 = torch.float64
    x = torch.ones(3, dtype=f64)
    calls = []

    def base(dtype: torch.dtype, rtol: float) -> torch.Tensor:
        calls.append(dtype)
        return torch.full((3,), 1e-12, dtype=dtype)

    rounding = Rounding(1.0, lambda: x.abs(), 1, carried=base)
    for _ in range(12):  # without the cache: 2¹² reads of the base
        rounding = product_rounding(torch.mul, [((x, rounding), (x, rounding))], 2.0, 1, x.shape)
    assert rounding.carried is not None
    carried = rounding.carried(f64, 0.0)
    assert calls == [f64]
    expected, own = 1e-12, gamma(1, f64) + smallest_subnormal(f64)
    for _ in range(12):
        b = own + expected
        expected = 2 * b + b * b
    assert carried.tolist() == pytest.approx([expected] * 3, rel=1e-12)
    rounding.carried(f64, 0.0)
    assert calls == [f64]  # asked again: the same tensor
