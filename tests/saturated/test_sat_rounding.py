"""Decisions that rounding reverses: the limit follows the exact values, not the computed ones.

Each case is built so that the computed value's error is far above 64 eps of the value itself
(the old tie tolerance), and the premise is checked on this machine's arithmetic first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from saturated.errors import SaturationError
from saturated.functional import tie_set
from saturated.rounding import (
    Einsum,
    Rounding,
    ZeroTested,
    exact_sign,
    gamma,
    known_zeros,
    product_rounding,
    smallest_subnormal,
    tensor_norms,
)
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


def test_positions_for_the_exact_step_are_built_on_the_values_device() -> None:
    """The exact step indexes positions with masks on the values' device, so positions must live
    there too (a CPU index read with a CUDA mask fails). The meta device shows where they are
    built without computing anything."""
    coef = torch.zeros(2, 3, dtype=torch.float64, device="meta")
    exact = Rounding.of_exact(coef, 1.0)
    summed = exact.plus(Rounding.of_exact(coef, 1.0), coef.shape)
    product = product_rounding(torch.mul, [((coef, exact), (coef, exact))], 2.0, 1, coef.shape)
    for rounding in (exact, summed, product):
        assert rounding.index is not None
        assert rounding.index().device.type == "meta" and rounding.index().shape == coef.shape


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_exact_step_settles_scores_on_cuda() -> None:
    query, keys = FLOAT64_CASE
    x = tokens(keys, torch.float64).cuda()
    head = DotHead(query, 2).to(torch.float64).cuda()
    assert saturate(head, x)(x).value.tolist() == [[[1.0, 0.0]]]


def test_a_near_tie_no_exact_step_can_settle_is_undetermined_in_float64_not_averaged() -> None:
    # Without exact values behind the bound, float64 cannot tell this near-tie from a tie: the
    # limit must not treat it as an exact tie and average the two keys. Ball arithmetic at 128
    # bits (saturated.precision) separates the scores: key 0's is exactly the larger.
    query, keys = FLOAT64_CASE
    x = tokens(keys, torch.float64)
    float64_only = Settings(max_precision=0)
    with pytest.raises(SaturationError, match=r"within the rounding bound of torch\.float64"):
        saturate(RescaledSumHead(query, 2).double(), x, settings=float64_only)
    nan = saturate(RescaledSumHead(query, 2).double(), x, settings=replace(float64_only, ties="nan"))(x)
    assert torch.isnan(nan.value).all()
    exact = [sum(Fraction(a) * Fraction(b) for a, b in zip(query, key)) for key in keys]
    assert exact[0] > exact[1]
    refined = saturate(RescaledSumHead(query, 2).double(), x)(x)
    assert refined.value.tolist() == [[[1.0, 0.0]]] and [b for b, _, _ in refined.precisions] == [128]


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


# The bounds themselves, each against its hand derivation or an independent computation: the
# constants of every precision, the exact values a product's partials stand for (in Fraction
# arithmetic), and the true error of float32 products (against the exact value) within the bound.

F32, F64 = torch.float32, torch.float64
Product = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@pytest.mark.parametrize(("dtype", "u", "tiny"), [(F32, 2.0**-24, 2.0**-149), (F64, 2.0**-53, 2.0**-1074),
                                                  (torch.float16, 2.0**-11, 2.0**-24),
                                                  (torch.bfloat16, 2.0**-8, 2.0**-133)])
def test_unit_roundoff_and_smallest_subnormal_of_each_precision(dtype: torch.dtype, u: float,
                                                                tiny: float) -> None:
    from saturated.rounding import unit_roundoff
    assert unit_roundoff(dtype) == u
    assert smallest_subnormal(dtype) == tiny
    assert torch.tensor(tiny, dtype=dtype) > 0 and torch.tensor(tiny / 2, dtype=dtype) == 0  # spacing at 0
    assert torch.tensor(1.0 + 2 * u, dtype=dtype) > 1
    assert torch.tensor(1.0 + u, dtype=dtype) == 1  # half the spacing: rounded to even


def test_gamma_is_n_u_over_one_minus_n_u_until_n_u_reaches_one() -> None:
    from saturated.rounding import relative_bound
    for n in (1, 2, 7, 1000):
        u = Fraction(2) ** -24
        assert Fraction(gamma(n, F32)) == pytest.approx(n * u / (1 - n * u), rel=1e-15)
    assert gamma(0, F32) == 0.0
    assert gamma(2**24 - 1, F32) == 2.0**24 - 1  # n·u = 1 − u: (1 − u)/u
    assert gamma(2**24, F32) == math.inf and gamma(2**25, F32) == math.inf
    # An operand error η adds 2η + η² (|q̂ₖk̂ₖ − qₖkₖ| ≤ (2η + η²)|qₖ||kₖ|).
    assert relative_bound(3, F32, 0.0) == gamma(3, F32)
    assert relative_bound(3, F32, 0.5) == gamma(3, F32) + 1.0 + 0.25
    assert relative_bound(0, F64, 2.0**-10) == 2.0**-9 + 2.0**-20


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same values in the same dtype (a bound asked for in float64 is computed in float64)."""
    return a.dtype == b.dtype and torch.equal(a, b)


def full_mantissas(*shape: int, seed: int) -> torch.Tensor:
    """float64 values with all 53 bits used and exponents spread over 2⁻²⁰..2²⁰, so that a product
    is exact only through Dekker's splitting."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=F64) + 0.5) * 2.0 ** torch.randint(
        -20, 21, shape, generator=g).double() * torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)


def fractions(t: torch.Tensor) -> np.ndarray:
    return np.array([Fraction(v) for v in t.flatten().tolist()], dtype=object).reshape(tuple(t.shape))


def row_sums(rows: torch.Tensor) -> list[Fraction]:
    return [sum(map(Fraction, row), Fraction(0)) for row in rows.tolist()]


# (op, shapes of x and y, the same contraction as a numpy einsum for the exact reference, n)
PRODUCTS = {
    "matmul": (torch.matmul, (2, 3), (3, 4), "ik,kj->ij", 3),
    "matmul batch broadcast": (torch.matmul, (2, 5), (3, 5, 4), "ik,bkj->bij", 5),
    "matmul both batched": (torch.matmul, (2, 1, 2, 3), (1, 3, 3, 2), "abik,cbkj->acij", 3),
    "linear": (torch.nn.functional.linear, (2, 3, 5), (4, 5), "abk,nk->abn", 5),
    "mul broadcast": (torch.mul, (2, 1), (1, 3), "ia,aj->ij", 1),
    "einsum attention": (Einsum("bnid,bnjd->bnij"), (2, 1, 3, 4), (2, 2, 3, 4), "bmid,bnjd->bnij", 4),
    "einsum summed order": (Einsum("ijk,ikj->i"), (2, 3, 4), (2, 4, 3), "ijk,ikj->i", 12),
    "einsum output order": (Einsum("i j, kj -> ki"), (3, 2), (4, 2), "ij,kj->ki", 2),
}


def reference(case: str, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    equation = PRODUCTS[case][3]
    a, b = fractions(x), fractions(y)
    if case == "einsum attention":  # n broadcasts from 1: numpy's einsum wants the sizes equal
        a = np.broadcast_to(a, (2, 2, 3, 4))
        equation = "bnid,bnjd->bnij"
    if case == "matmul both batched":
        a, b = np.broadcast_to(a, (2, 3, 2, 3)), np.broadcast_to(b, (2, 3, 3, 2))
        equation = "abik,abkj->abij"
    return np.einsum(equation, a, b)


@pytest.mark.parametrize("case", list(PRODUCTS))
def test_product_partials_sum_exactly_to_the_exact_products(case: str) -> None:
    fn, x_shape, y_shape, _, n = PRODUCTS[case]
    x, y = full_mantissas(*x_shape, seed=1), full_mantissas(*y_shape, seed=2)
    out = fn(x, y)
    exact = reference(case, x, y)
    assert exact.shape == out.shape
    rounding = product_rounding(fn, [((x, None), (y, None))], 1.0, n, out.shape)
    assert rounding.length == n and rounding.carried is None and rounding.factor == 1.0
    assert rounding.index is not None and rounding.partials is not None
    assert torch.equal(rounding.index(), torch.arange(out.numel()).reshape(out.shape))
    at = torch.randperm(out.numel(), generator=torch.Generator().manual_seed(0))[: max(out.numel() - 2, 1)]
    rows = rounding.partials(at)
    assert rows.dtype == F64 and rows.shape == (len(at), 4 * n)
    assert row_sums(rows) == [exact.flatten()[i] for i in at.tolist()]
    # The magnitude Σ|xᵢ||yᵢ| (computed in float64) against the exact one.
    magnitude = np.vectorize(float)(reference(case, x.abs(), y.abs()))
    assert np.allclose(rounding.magnitude().numpy(), magnitude, rtol=1e-14, atol=0)


def test_product_partials_of_several_pairs_and_their_n() -> None:
    # Σ over two pairs of a matmul of length 3: one sum of 2·3 products and one addition, n = 7.
    xs = [full_mantissas(2, 3, seed=s) for s in (3, 4)]
    ys = [full_mantissas(3, 2, seed=s) for s in (5, 6)]
    rounding = product_rounding(torch.matmul, [((x, None), (y, None)) for x, y in zip(xs, ys)], 2.0, 3,
                                torch.Size([2, 2]))
    assert rounding.length == 2 * 3 + 1 and rounding.degree == 2.0
    exact = sum(np.einsum("ik,kj->ij", fractions(x), fractions(y)) for x, y in zip(xs, ys))
    assert rounding.partials is not None
    assert row_sums(rounding.partials(torch.arange(4))) == list(exact.flatten())
    magnitude = sum(np.einsum("ik,kj->ij", fractions(x.abs()), fractions(y.abs())) for x, y in zip(xs, ys))
    assert np.allclose(rounding.magnitude().numpy(), np.vectorize(float)(magnitude), rtol=1e-14, atol=0)
    # Cauchy–Schwarz per pair: ‖row i of x‖·‖column j of y‖, summed over the pairs.
    assert rounding.cheap is not None
    # (each rounded up: above the computed norms' products by at most 1 + (4(k + 2) + 12)u, k = 3)
    norms = sum(x.norm(dim=1)[:, None] * y.norm(dim=0)[None, :] for x, y in zip(xs, ys))
    assert (rounding.cheap() >= norms).all()
    assert torch.allclose(rounding.cheap(), norms, rtol=(4 * 5 + 12) * 2.0**-53, atol=0)
    assert (rounding.cheap() >= rounding.magnitude()).all()


@pytest.mark.parametrize(("fn", "x_shape", "y_shape"), [
    (torch.nn.functional.linear, (2, 3, 4), (5, 4)),
    (torch.matmul, (3, 4), (2, 4, 5)),
    (torch.matmul, (2, 3, 4), (4, 5)),
    (torch.mul, (3, 1), (1, 2)),
    (Einsum("ij,kj->ik"), (3, 4), (2, 4)),
])
def test_cheap_magnitude_is_a_product_of_norms_for_matrix_products(fn: Product, x_shape: tuple[int, ...],
                                                                   y_shape: tuple[int, ...]) -> None:
    x, y = full_mantissas(*x_shape, seed=7), full_mantissas(*y_shape, seed=8)
    rounding = product_rounding(fn, [((x, None), (y, None))], 1.0, 1, fn(x, y).shape)
    assert rounding.cheap is not None
    cheap, magnitude = rounding.cheap(), rounding.magnitude()
    if fn is torch.nn.functional.linear:  # rows of x against rows of the weight
        expected = x.norm(dim=-1)[..., None] * y.norm(dim=-1)
    elif fn is torch.matmul:  # rows of x against columns of y
        expected = x.norm(dim=-1)[..., None] * y.norm(dim=-2)[..., None, :]
    else:  # no cheaper bound: the magnitude itself
        expected = fn(x.abs(), y.abs())
        assert torch.allclose(cheap, expected, rtol=1e-15, atol=0)
    # the norms' product rounded up: above it, by at most the two norms' inflation 1 + 2(k + 2)u
    # each, x's extra 1 + 8u and the roundings of the products (k the contracted length)
    u, k = torch.finfo(cheap.dtype).eps / 2, x_shape[-1]
    assert cheap.shape == magnitude.shape and (cheap >= expected).all()
    assert torch.allclose(cheap, expected, rtol=(4 * (k + 2) + 12) * u, atol=0)
    assert (cheap >= magnitude * (1 - 1e-15)).all()


@pytest.mark.parametrize(("fn", "x", "y"), [
    (torch.matmul, torch.ones(2, 3, dtype=F32), torch.ones(3, 2, dtype=F32)),  # not float64
    (torch.mul, torch.ones(2, 3, dtype=F32), torch.ones(2, 3, dtype=F64)),  # one side not float64
    (torch.mul, torch.ones(2, 3, dtype=F64), torch.ones(2, 3, dtype=F32)),
    (torch.matmul, torch.ones(2, 3, dtype=F64), torch.ones(3, dtype=F64)),  # matrix times vector
    (torch.nn.functional.linear, torch.ones(2, 3, dtype=F64), torch.ones(3, dtype=F64)),  # vector weight
    (Einsum("...i,...i->..."), torch.ones(2, 3, dtype=F64), torch.ones(2, 3, dtype=F64)),
    (torch.add, torch.ones(2, dtype=F64), torch.ones(2, dtype=F64)),
])
def test_products_whose_dot_products_are_not_read_have_no_exact_values(fn: Product, x: torch.Tensor,
                                                                       y: torch.Tensor) -> None:
    rounding = product_rounding(fn, [((x, None), (y, None))], 1.0, 1, fn(x, y).shape)
    assert rounding.index is None and rounding.partials is None
    # Some other pair of the sum being unreadable is enough.
    a = torch.ones(2, 3, dtype=F64)
    both = product_rounding(torch.mul, [((a, None), (a, None)), ((a.float(), None), (a.float(), None))],
                            1.0, 1, a.shape)
    assert both.index is None and both.partials is None


def test_float32_products_lie_within_their_bound_and_the_bound_is_its_formula() -> None:
    # Rows of x against columns of y built to cancel (the exact sums are about 10⁻⁶ of Σ|x||y|):
    # the float32 result's true error, against the exact value of its float32 operands, stays
    # within γ₁₆·Σ|xᵢ||yᵢ| + 16·2⁻¹⁴⁹, which is the bound read back.
    g = torch.Generator().manual_seed(11)
    x = torch.randn(4, 16, generator=g)
    y = torch.randn(16, 3, generator=g)
    y[-1] = -(x[:, :-1] @ y[:-1]).mean(0) / x[:, -1].mean()  # near cancellation in every row
    computed = x @ y
    exact = np.einsum("ik,kj->ij", fractions(x), fractions(y))
    error = np.vectorize(float)(np.abs(fractions(computed) - exact))
    rounding = product_rounding(torch.matmul, [((x, None), (y, None))], 2.0, 16, computed.shape)
    bound = rounding.bound(F32, 0.0)
    magnitude = np.vectorize(float)(np.einsum("ik,kj->ij", fractions(x.abs()), fractions(y.abs())))
    assert np.allclose(bound.numpy(), gamma(16, F32) * magnitude + 16 * 2.0**-149, rtol=1e-6, atol=0)
    assert (error <= bound.numpy()).all() and error.max() > 0
    # With an operand error η the bound grows by (2η + η²)·Σ|xᵢ||yᵢ|.
    assert np.allclose(rounding.bound(F32, 0.25).numpy(),
                       (gamma(16, F32) + 0.5625) * magnitude + 16 * 2.0**-149, rtol=1e-6, atol=0)


def test_one_product_rounds_by_nearly_its_whole_bound() -> None:
    # (1 + 2⁻¹²)² = 1 + 2⁻¹¹ + 2⁻²⁴: the last term is half a float32 spacing at 1, rounded off (to
    # even), so the error 2⁻²⁴ is γ₁·|x||y| + 2⁻¹⁴⁹ up to a factor 1 + 2⁻¹¹: no smaller n would do.
    x = torch.tensor([1.0 + 2.0**-12])
    computed = x * x
    assert computed.item() == 1.0 + 2.0**-11
    error = Fraction(x.item()) ** 2 - Fraction(computed.item())
    assert error == Fraction(2) ** -24
    bound = product_rounding(torch.mul, [((x, None), (x, None))], 2.0, 1, x.shape).bound(F32, 0.0)
    assert error <= Fraction(bound.item()) < error * (1 + Fraction(2) ** -10)


def test_bound_is_the_relative_bound_times_the_magnitude_plus_underflow_and_what_is_carried() -> None:
    magnitude, cheap = torch.tensor([1.0, 2.0, 0.0]), torch.tensor([4.0, 4.0, 4.0])
    calls = []

    def carried(dtype: torch.dtype, rtol: float) -> torch.Tensor:
        calls.append((dtype, rtol))
        return torch.tensor([0.5, 0.25, 0.125])

    rounding = Rounding(1.0, lambda: magnitude, 3, cheap=lambda: cheap, carried=carried)
    own = gamma(3, F32) * magnitude + 3 * 2.0**-149
    assert torch.equal(rounding.bound(F32, 0.0), own)
    assert torch.equal(rounding.bound(F32, 0.0, cheap=True), gamma(3, F32) * cheap + 3 * 2.0**-149)
    assert torch.equal(rounding.bound(F32, 0.0, carried=True), own + torch.tensor([0.5, 0.25, 0.125]))
    assert torch.equal(rounding.bound(F64, 0.5, carried=True, cheap=True),
                       (gamma(3, F64) + 1.25) * cheap + 3 * 2.0**-1074 + torch.tensor([0.5, 0.25, 0.125]))
    assert calls == [(F32, 0.0), (F64, 0.5)]
    # Without a cheaper bound the magnitude serves; an exact value (n = 0) has no underflow term.
    plain = Rounding(1.0, lambda: magnitude, 0)
    assert torch.equal(plain.bound(F32, 0.0, carried=True, cheap=True), torch.zeros(3))
    assert torch.equal(plain.bound(F32, 0.5), 1.25 * magnitude)


def test_carried_error_of_a_product_from_its_operands_bounds() -> None:
    """x·y with bounds b_x, b_y on the operands carries |x|·b_y + b_x·(|y| + b_y) (each bound with
    its own carried part, from its cheap magnitude); an exact operand or none brings nothing in."""
    x, y = torch.tensor([[1.0, -2.0]], dtype=F64), torch.tensor([[3.0], [-0.5]], dtype=F64)

    def operand(cheap: float, carried: float, shape: tuple[int, ...]) -> Rounding:
        return Rounding(1.0, lambda: torch.full(shape, 1e3, dtype=F64), 2,
                        cheap=lambda: torch.full(shape, cheap, dtype=F64),
                        carried=lambda t, e: torch.full(shape, carried, dtype=t))

    rx, ry = operand(1.0, 2.0**-20, (1, 2)), operand(4.0, 2.0**-18, (2, 1))
    b_x = (gamma(2, F64) + 2 * 0.125 + 0.125**2) * 1.0 + 2 * 2.0**-1074 + 2.0**-20
    b_y = (gamma(2, F64) + 2 * 0.125 + 0.125**2) * 4.0 + 2 * 2.0**-1074 + 2.0**-18
    both = product_rounding(torch.matmul, [((x, rx), (y, ry))], 2.0, 2, torch.Size([1, 1]))
    assert both.carried is not None
    expected = (1 + 2) * b_y + b_x * (3 + b_y + 0.5 + b_y)
    assert both.carried(F64, 0.125).item() == pytest.approx(expected, rel=1e-15)
    one = torch.Size([1, 1])
    only_x = product_rounding(torch.matmul, [((x, rx), (y, Rounding.of_exact(y, 0.0)))], 2.0, 2, one)
    assert only_x.carried is not None
    assert only_x.carried(F64, 0.125).item() == pytest.approx(b_x * 3.5, rel=1e-15)
    only_y = product_rounding(torch.matmul, [((x, None), (y, ry))], 2.0, 2, one)
    assert only_y.carried is not None
    assert only_y.carried(F64, 0.125).item() == pytest.approx(3 * b_y, rel=1e-15)
    assert product_rounding(torch.matmul, [((x, Rounding.of_exact(x, 1.0)), (y, None))], 2.0, 2,
                            one).carried is None
    # A sum of two pairs carries the sum of their errors.
    two = product_rounding(torch.matmul, [((x, rx), (y, None)), ((x, None), (y, ry))], 2.0, 2, one)
    assert two.carried is not None
    assert two.carried(F64, 0.125).item() == pytest.approx(b_x * 3.5 + 3 * b_y, rel=1e-15)


def test_carried_errors_of_scalars_add_up_in_the_precision_asked_for() -> None:
    # Two scalar products 1·y, the second operand's bound 1 in one and 2⁻³⁰ in the other (float32
    # values): their sum 1 + 2⁻³⁰ would round down to 1 in float32, a bound smaller than the error.
    one = torch.tensor(1.0)

    def bounded(size: float) -> Rounding:
        return Rounding(1.0, lambda: one, 0, carried=lambda t, e: torch.tensor(size))

    pairs = [((one, None), (one, bounded(1.0))), ((one, None), (one, bounded(2.0**-30)))]
    rounding = product_rounding(torch.mul, pairs, 2.0, 1, torch.Size([]))
    assert rounding.carried is not None
    assert identical(rounding.carried(F64, 0.0), torch.tensor(1.0 + 2.0**-30, dtype=F64))


def exact_values(rounding: Rounding, shape: tuple[int, ...]) -> list[Fraction]:
    """The exact sums of a bound's partials, element by element of ``shape``: the exact values
    times the bound's positive factor."""
    assert rounding.index is not None and rounding.partials is not None
    return row_sums(rounding.partials(rounding.index().expand(shape).flatten()))


def test_an_exact_value_has_no_error_and_itself_as_exact_values() -> None:
    coef = torch.tensor([[2.5, -1.0, 0.0], [3.0, -2.0**-30, 1e20]])
    rounding = Rounding.of_exact(coef, 2.0)
    assert rounding.degree == 2.0 and rounding.length == 0 and rounding.exact and rounding.factor == 1.0
    assert torch.equal(rounding.magnitude(), coef.abs())
    assert torch.equal(rounding.index(), torch.arange(6).reshape(2, 3))
    assert exact_values(rounding, (2, 3)) == [Fraction(v) for v in coef.flatten().tolist()]
    assert rounding.partials(torch.tensor([4, 0])).dtype == F64
    assert torch.equal(rounding.bound(F32, 0.0, carried=True), torch.zeros(2, 3))


@pytest.mark.parametrize("factor", [3.0, -4.0, 0.5, -0.1])
def test_a_scaling_keeps_exact_values_up_to_a_positive_factor(factor: float) -> None:
    coef = full_mantissas(2, 3, seed=9)
    base = Rounding(1.0, lambda: coef.abs(), 2, lambda: torch.arange(6).reshape(2, 3),
                    lambda at: coef.flatten()[at].unsqueeze(-1),
                    cheap=lambda: torch.full((2, 3), 1e3, dtype=F64),
                    carried=lambda t, e: torch.full((2, 3), 2.0 + e, dtype=t))
    scaled = base.scaled(factor)
    # |fl(f·ŝ) − f·s| ≤ |f|·γ₂·m + u·|f|·|ŝ| ≤ γ₃·|f|·m: n one larger, magnitude times |f|.
    assert scaled.length == 3 and scaled.degree == 1.0
    assert torch.equal(scaled.magnitude(), abs(factor) * coef.abs())
    assert scaled.cheap is not None and scaled.carried is not None
    assert torch.equal(scaled.cheap(), torch.full((2, 3), abs(factor) * 1e3, dtype=F64))
    assert identical(scaled.carried(F64, 0.5), torch.full((2, 3), abs(factor) * 2.5, dtype=F64))
    # The partials of f·s sum to s·sign(f), that is f·s times the factor 1/|f|.
    sign = 1 if factor > 0 else -1
    assert scaled.factor == 1 / abs(factor)
    assert exact_values(scaled, (2, 3)) == [sign * Fraction(v) for v in coef.flatten().tolist()]
    # Twice: the factors compose (by −2: the sign flips back).
    twice = scaled.scaled(-2.0)
    assert twice.length == 4 and twice.factor == 1 / abs(factor) / 2
    assert exact_values(twice, (2, 3)) == [-sign * Fraction(v) for v in coef.flatten().tolist()]


def test_a_scaling_by_zero_leaves_nothing_to_round_exactly() -> None:
    coef = torch.tensor([1.0, -2.0], dtype=F64)
    zero = Rounding.of_exact(coef, 1.0).scaled(0.0)
    assert zero.partials is None and zero.factor == 1.0
    assert torch.equal(zero.magnitude(), torch.zeros(2, dtype=F64))
    assert torch.equal(zero.bound(F64, 0.0), torch.full((2,), 2.0**-1074, dtype=F64))
    # Its sum with an exact value has a bound but no exact values; nor has a flipped bound that
    # had none.
    total = zero.plus(Rounding.of_exact(coef, 1.0), torch.Size([2]))
    assert total.index is None and total.partials is None
    assert Rounding(1.0, lambda: coef.abs(), 1, lambda: torch.arange(2)).scaled(-2.0).partials is None


def test_a_sum_of_two_parts_adds_their_bounds_and_keeps_both_exact_values() -> None:
    a, b = full_mantissas(1, 3, seed=12), full_mantissas(2, 3, seed=13)
    first, second = Rounding.of_exact(a, 1.0), Rounding.of_exact(b, 1.0).scaled(1.0)
    total = first.plus(second, torch.Size([2, 3]))
    # |fl(ŝ₁ + ŝ₂) − (s₁ + s₂)| ≤ γ_{n₁}m₁ + γ_{n₂}m₂ + u(m₁ + m₂)(1 + γ) ≤ γ_{max n + 1}·(m₁ + m₂)
    assert total.length == 2 and total.degree == 1.0 and total.factor == 1.0
    assert torch.equal(total.magnitude(), a.abs() + b.abs())
    assert total.cheap is not None and torch.equal(total.cheap(), a.abs() + b.abs())
    assert total.carried is None
    assert torch.equal(total.index(), torch.arange(6).reshape(2, 3))
    assert exact_values(total, (2, 3)) == [Fraction(x) + Fraction(y) for x, y in
                                           zip(a.expand(2, 3).flatten().tolist(), b.flatten().tolist())]
    assert total.partials(torch.tensor([5, 1])).shape == (2, 2)  # each summand's partials, side by side
    # The same factor on both sides keeps them: 2a − 2b, its partials summing to a − b.
    halves = Rounding.of_exact(a, 1.0).scaled(2.0).plus(Rounding.of_exact(b, 1.0).scaled(-2.0),
                                                        torch.Size([2, 3]))
    assert halves.factor == 0.5 and halves.length == 2
    assert exact_values(halves, (2, 3)) == [Fraction(x) - Fraction(y) for x, y in
                                            zip(a.expand(2, 3).flatten().tolist(), b.flatten().tolist())]
    # Scaled differently (s + 3·s), or a side without exact values: a bound but no exact values.
    for other in (Rounding.of_exact(b, 1.0).scaled(3.0), Rounding.of_exact(b, 1.0).inexact(),
                  Rounding(1.0, lambda: b.abs(), 1, partials=lambda at: b.flatten()[at].unsqueeze(-1))):
        for left, right in ((first, other), (other, first)):
            mixed = left.plus(right, torch.Size([2, 3]))
            assert mixed.index is None and mixed.partials is None


def test_a_sum_of_parts_with_carried_errors_carries_both_and_uses_cheap_magnitudes() -> None:
    def part(length: int, size: float, cheap: float | None, carried: float | None) -> Rounding:
        return Rounding(1.0, lambda: torch.full((2,), size), length,
                        cheap=None if cheap is None else (lambda: torch.full((2,), cheap)),
                        carried=None if carried is None else (
                            lambda t, e: torch.full((2,), carried + e, dtype=t)))

    total = part(3, 1.0, 5.0, 0.25).plus(part(7, 2.0, None, 2.0**-30), torch.Size([2]))
    assert total.length == 8
    assert torch.equal(total.magnitude(), torch.full((2,), 3.0))
    assert torch.equal(total.cheap(), torch.full((2,), 7.0))  # 5 + 2: its own magnitude where none is cheaper
    assert identical(total.carried(F64, 1.0), torch.full((2,), 2.25 + 2.0**-30, dtype=F64))  # not in float32
    one_side = part(7, 2.0, None, None).plus(part(3, 1.0, 5.0, 0.25), torch.Size([2]))
    assert identical(one_side.carried(F64, 0.0), torch.full((2,), 0.25, dtype=F64))
    assert part(1, 1.0, None, None).plus(part(1, 1.0, None, None), torch.Size([2])).carried is None
    three = part(1, 1.0, None, 0.125).plus(part(1, 1.0, None, 0.25), torch.Size([2])).plus(
        part(1, 1.0, None, 0.5), torch.Size([2]))
    assert three.length == 3 and identical(three.carried(F64, 0.0), torch.full((2,), 0.875, dtype=F64))


@pytest.mark.parametrize(("count", "length"), [(4, 5), (1, 2), (0, 2)])
def test_a_reduction_over_k_elements_makes_n_larger_by_k_minus_one(count: int, length: int) -> None:
    magnitude = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    base = Rounding(1.0, lambda: magnitude, 2, lambda: torch.arange(4).reshape(2, 2),
                    lambda at: magnitude.flatten()[at].double().unsqueeze(-1),
                    carried=lambda t, e: torch.full((2, 2), 0.5 + e, dtype=t), exact=True, factor=0.5)
    summed = base.summed(lambda m: m.sum(-1), count)
    assert summed.length == length and summed.degree == 1.0
    assert torch.equal(summed.magnitude(), torch.tensor([3.0, 7.0]))
    assert torch.equal(summed.cheap(), torch.tensor([3.0, 7.0]))  # no cheaper bound: the magnitude
    assert identical(summed.carried(F64, 0.25), torch.tensor([1.5, 1.5], dtype=F64))
    assert summed.index is None and summed.partials is None and not summed.exact and summed.factor == 1.0
    cheaper = Rounding(1.0, lambda: magnitude, 2, cheap=lambda: 2 * magnitude).summed(lambda m: m.sum(0), 2)
    assert torch.equal(cheaper.cheap(), torch.tensor([8.0, 12.0])) and cheaper.carried is None


def test_a_moved_bound_keeps_its_exact_values_and_positions_follow_the_move() -> None:
    coef = torch.tensor([[2.0, -3.0, 5.0], [7.0, 11.0, -13.0]], dtype=F64)
    base = Rounding(1.0, lambda: coef.abs(), 4, lambda: torch.arange(6).reshape(2, 3),
                    lambda at: coef.flatten()[at].unsqueeze(-1), cheap=lambda: 2 * coef.abs(),
                    carried=lambda t, e: torch.full((2, 3), 1.0 + e, dtype=t).cumsum(-1), exact=True,
                    factor=0.25)
    moved = base.map(lambda a: a.transpose(0, 1))
    assert moved.length == 4 and moved.degree == 1.0 and moved.exact and moved.factor == 0.25
    assert torch.equal(moved.magnitude(), coef.abs().T)
    assert torch.equal(moved.cheap(), 2 * coef.abs().T)
    assert identical(moved.carried(F64, 1.0), torch.tensor([[2.0, 2.0], [4.0, 4.0], [6.0, 6.0]], dtype=F64))
    assert torch.equal(moved.index(), torch.tensor([[0, 3], [1, 4], [2, 5]]))
    assert moved.partials is base.partials
    assert exact_values(moved, (3, 2)) == [Fraction(v) for v in coef.T.flatten().tolist()]
    bare = Rounding(1.0, lambda: coef.abs(), 1).map(lambda a: a[:, 0])
    assert bare.index is None and bare.cheap is None and bare.carried is None and not bare.exact
    assert torch.equal(bare.magnitude(), torch.tensor([2.0, 7.0], dtype=F64))


def test_an_inexact_bound_keeps_the_bound_and_drops_the_exact_values() -> None:
    coef = torch.tensor([1.0, -2.0], dtype=F64)
    base = Rounding(3.0, lambda: coef.abs(), 5, lambda: torch.arange(2), lambda at: coef[at].unsqueeze(-1),
                    cheap=lambda: torch.full((2,), 9.0, dtype=F64),
                    carried=lambda t, e: torch.ones(2, dtype=t), exact=True, factor=0.5)
    inexact = base.inexact()
    assert inexact.index is None and inexact.partials is None and inexact.factor == 1.0
    assert inexact.degree == 3.0 and inexact.length == 5 and inexact.exact
    assert torch.equal(inexact.bound(F64, 0.0, carried=True, cheap=True),
                       base.bound(F64, 0.0, carried=True, cheap=True))
    assert torch.equal(inexact.bound(F64, 0.0), base.bound(F64, 0.0))


@pytest.mark.parametrize(("equation", "letters"), [
    ("bnid,bnjd->bnij", ("bnid", "bnjd", "bnij", "d")),
    ("ibnd,jbnd->bnij", ("ibnd", "jbnd", "bnij", "d")),
    (" ij , jk -> ik ", ("ij", "jk", "ik", "j")),
    ("ijk,ikj->i", ("ijk", "ikj", "i", "jk")),
    ("kij,jik->", ("kij", "jik", "", "kij")),
    ("i,j->ij", ("i", "j", "ij", "")),
    ("...i,...i->...", None),  # an ellipsis
    ("ij,jk", None),  # no output
    ("ij,jk->ik->i", None),
    ("ij->ji", None),  # one operand
    ("ij,jk,kl->il", None),  # three
    ("ii,i->i", None),  # a repeated letter: a diagonal
    ("i,ii->i", None),
    ("ij,jk->ii", None),
    ("ij,jk->iz", None),  # an output letter of neither operand
    ("ij,k->i", None),  # j summed but only in the first operand
    ("i,jk->k", None),  # j summed but only in the second
    ("ij,ij->ii", None),  # a repeated output letter, every summed letter in both
    ("ij,j->iz", None),  # an output letter of neither, every summed letter in both
])
def test_einsum_equations_whose_outputs_are_single_dot_products(equation: str, letters: tuple | None) -> None:
    from saturated.rounding import _einsum_letters
    assert _einsum_letters(equation) == letters


def test_exact_sign_of_each_row_sum() -> None:
    rows = torch.tensor([[2.0**60, 1.0, -(2.0**60), 0.0], [2.0**60, -1.0, -(2.0**60), 0.0],
                         [1e-300, -1e-300, 0.0, 0.0], [-(2.0**-1074), 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
                        dtype=F64)
    assert exact_sign(rows) == [1, -1, 0, -1, 0]
    assert exact_sign(torch.zeros(0, 3, dtype=F64)) == []
    # Sums beyond float64's range (math.fsum overflows) still have an exact sign.
    huge = torch.tensor([[1e308, 1e308, -1e300], [-1e308, -1e308, 5.0]], dtype=F64)
    assert exact_sign(huge) == [1, -1]
    # Partials that overflowed (inf, or NaN from inf − inf in a split) have none: refused.
    for bad in (math.inf, math.nan):
        with pytest.raises(SaturationError, match="overflow"):
            exact_sign(torch.tensor([[1.0, bad]], dtype=F64))


def test_a_carried_bound_is_cached_per_precision_and_operand_error() -> None:
    calls = []

    def carried(dtype: torch.dtype, rtol: float) -> torch.Tensor:
        calls.append((dtype, rtol))
        return torch.full((1,), rtol, dtype=dtype)

    rounding = Rounding(1.0, lambda: torch.ones(1), 1, carried=carried)
    assert rounding.carried is not None
    for dtype, rtol in ((F32, 0.0), (F64, 0.0), (F32, 0.5), (F32, 0.0), (F64, 0.0)):
        value = rounding.carried(dtype, rtol)
        assert value.dtype == dtype and value.item() == rtol
    assert calls == [(F32, 0.0), (F64, 0.0), (F32, 0.5)]
    # Wrapping an already cached bound again keeps its cache.
    again = Rounding(1.0, lambda: torch.ones(1), 1, carried=rounding.carried)
    assert again.carried is rounding.carried


def scores_of_keys(query: list[float], keys: torch.Tensor) -> tuple[torch.Tensor, Rounding]:
    """q·kⱼ for every key (keys (..., n, 2)), with its float64 bound."""
    q = torch.tensor([query], dtype=F64)
    keys_t = keys.transpose(-1, -2)
    scores = q @ keys_t
    return scores, product_rounding(torch.matmul, [((q, None), (keys_t, None))], 1.0, 2, scores.shape)


def test_exact_maximum_among_candidates_float64_cannot_tell_apart() -> None:
    from saturated.rounding import exact_maximal
    query, (a, b) = FLOAT64_CASE
    c = [a[0] * 2.0, a[1] * 2.0]  # 2·k_a: twice a's exact score, exactly
    exact = exact_scores(query, [a, b, c])
    assert exact[1] < exact[0] < exact[2]
    # Row 0 holds keys (a, b, a, b): a's two copies are its exact maximum, an exact tie. Row 1
    # holds (b, c, a, b): c alone. Row 2 has a single candidate, row 3 none.
    keys = torch.tensor([[a, b, a, b], [b, c, a, b], [a, b, a, b], [a, b, a, b]], dtype=F64)
    scores, rounding = scores_of_keys(query, keys)
    scores, rounding = scores.squeeze(1), rounding.map(lambda t: t.squeeze(1))
    candidates = torch.tensor([[True] * 4, [True] * 4, [False, True, False, False], [False] * 4])
    narrowed = exact_maximal(candidates, -1, rounding)
    assert narrowed.tolist() == [[True, False, True, False], [False, True, False, False],
                                 [False, True, False, False], [False] * 4]
    # The same rows laid along the first, the middle or the last of three dimensions.
    layouts = {0: lambda t: t.T.reshape(4, 2, 2), 1: lambda t: t.reshape(2, 2, 4).transpose(1, 2),
               2: lambda t: t.reshape(2, 2, 4)}
    for dim, layout in layouts.items():
        assert torch.equal(exact_maximal(layout(candidates).contiguous(), dim, rounding.map(layout)),
                           layout(narrowed)), dim
    # A candidate the exact step did not offer is not added back, and the first candidate is not
    # favoured: b first, then a and c.
    assert exact_maximal(torch.tensor([[False, True, True, True]] * 4), -1, rounding)[1].tolist() == \
        [False, True, False, False]
    assert exact_maximal(torch.tensor([[True, True, False, False]] * 4), -1, rounding)[1].tolist() == \
        [False, True, False, False]
    assert exact_maximal(torch.tensor([[True, False, True, True]] * 4), -1, rounding)[1].tolist() == \
        [False, False, True, False]


@pytest.mark.parametrize("op", ["matmul", "linear", "einsum", "mul"])
def test_a_product_knows_its_exact_zeros_without_its_partials(op: str) -> None:
    """An output of a product is known zero exactly where each of its terms has a zero factor
    (counted independently here), through a negation, a sum with an exact value and a ReLU-like
    zeroing; and there its partials do sum to 0 exactly."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 4, 5, dtype=F64, generator=gen) * (torch.rand(3, 4, 5, generator=gen) < 0.4)
    x[1, 2] = 0.0
    y = torch.randn(5, 6, dtype=F64, generator=gen) * (torch.rand(5, 6, generator=gen) < 0.4)
    y[:, 3] = 0.0
    fns = {"matmul": (torch.matmul, x, y), "linear": (torch.nn.functional.linear, x, y.T),
           "einsum": (Einsum("abl,lk->abk"), x, y), "mul": (torch.mul, x, y[:, :4].T.unsqueeze(0))}
    fn, a, b = fns[op]
    out = fn(a, b)
    rounding = product_rounding(fn, [((a, None), (b, None))], 1.0, 1 if op == "mul" else 5, out.shape)
    # every term with a zero factor: for a product of matrices, every l with x[i, j, l] = 0 or y[l, k] = 0
    expected = (a == 0) | (b == 0) if op == "mul" else ((x == 0).unsqueeze(-1) | (y == 0)).all(-2)
    at = torch.arange(out.numel())
    assert isinstance(rounding.partials, ZeroTested) and rounding.index is not None
    zeros = known_zeros(rounding.partials, at)
    assert torch.equal(zeros, expected.flatten())
    assert 0 < int(zeros.sum()) < out.numel()
    assert all(sign == 0 for sign in exact_sign(rounding.partials(at[zeros])))
    negated = rounding.scaled(-2.0)
    assert negated.partials is not None and torch.equal(known_zeros(negated.partials, at), zeros)
    other = torch.where(torch.arange(out.numel()).reshape(out.shape) % 2 == 0, 0.0, 1.5).to(F64)
    summed = rounding.plus(Rounding.of_exact(other, 1.0), out.shape)
    assert summed.index is not None and summed.partials is not None
    assert torch.equal(known_zeros(summed.partials, summed.index().flatten()), zeros & (other == 0).flatten())
    keep = torch.rand(out.shape, generator=gen) < 0.5
    kept = rounding.kept(keep)
    assert kept.index is not None and kept.partials is not None
    assert torch.equal(known_zeros(kept.partials, kept.index().flatten()), zeros | ~keep.flatten())
    # partials without the test: where every partial is 0, the same places here
    assert torch.equal(known_zeros(rounding.partials.rows, at), zeros)


class _CountedMatmuls(torch.overrides.TorchFunctionMode):
    """Counts the matrix products made inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.count += func is torch.matmul
        return func(*args, **(kwargs or {}))


def test_zero_rows_and_columns_tell_zeros_without_counting_terms() -> None:
    """Scores of a zero query row, or against a zero key, are known zero from the zero vectors
    alone: the count of nonzero terms (one more product) is made only where they leave positions,
    and then it finds the zeros they miss (supports that never meet)."""
    q = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 3.0]], dtype=F64)
    # key 0 is zero; q₁ and key 2 never meet
    keys_t = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 4.0]], dtype=F64)
    rounding = product_rounding(torch.matmul, [((q, None), (keys_t, None))], 1.0, 2, (q @ keys_t).shape)
    assert isinstance(rounding.partials, ZeroTested)
    with _CountedMatmuls() as counted:
        covered = rounding.partials.zeros(torch.tensor([0, 1, 2, 3, 6]))  # row 0, then key 0
    assert covered.tolist() == [True] * 5 and counted.count == 0
    with _CountedMatmuls() as counted:
        rest = rounding.partials.zeros(torch.tensor([4, 5, 7, 8]))
    assert rest.tolist() == [False, True, False, False] and counted.count == 1


def test_exact_ties_of_zero_query_rows_make_no_partials() -> None:
    """A query row of zeros scores every key exactly 0: one exact tie, kept whole without making
    a partial. A row beside it with a near-tie float64 cannot settle is still narrowed exactly."""
    from saturated.rounding import exact_maximal
    query, (a, b) = FLOAT64_CASE
    q = torch.tensor([[0.0, 0.0], query], dtype=F64)
    keys_t = torch.tensor([a, b, a, b], dtype=F64).T
    scores = q @ keys_t
    rounding = product_rounding(torch.matmul, [((q, None), (keys_t, None))], 1.0, 2, scores.shape)
    assert isinstance(rounding.partials, ZeroTested)
    asked: list[Tensor] = []
    made = rounding.partials.rows

    def counted(at: Tensor) -> Tensor:
        asked.append(at)
        return made(at)

    counting = replace(rounding, partials=ZeroTested(counted, rounding.partials.zeros))
    narrowed = exact_maximal(torch.ones(2, 4, dtype=torch.bool), -1, counting)
    assert narrowed.tolist() == [[True] * 4, [True, False, True, False]]
    assert len(asked) == 1 and sorted(asked[0].tolist()) == [4, 5, 6, 7]  # row 1's positions only


@given(st.lists(st.lists(st.sampled_from([0.0, 0.0, 1.0, -1.0, 0.5, 3.0, 2.0**-30]), min_size=3, max_size=3),
                min_size=2, max_size=4),
       st.lists(st.lists(st.sampled_from([0.0, 1.0, -2.0, 0.25, 1.0 + 2.0**-40]), min_size=3, max_size=3),
                min_size=2, max_size=5))
@settings(max_examples=60, deadline=None)
def test_exact_maximal_keeps_the_exact_maxima_of_every_row(queries: list[list[float]],
                                                         keys: list[list[float]]) -> None:
    """With queries that are often all zero and keys that often tie, the exact step keeps each
    row's exact maxima (Fractions), whether or not it can tell zero scores without partials."""
    from saturated.rounding import exact_maximal
    q = torch.tensor(queries, dtype=F64)
    keys_t = torch.tensor(keys, dtype=F64).T
    rounding = product_rounding(torch.matmul, [((q, None), (keys_t, None))], 1.0, 3, (q @ keys_t).shape)
    assert isinstance(rounding.partials, ZeroTested)
    every = torch.ones(len(queries), len(keys), dtype=torch.bool)
    expected = []
    for query in queries:
        exact = exact_scores(query, keys)
        expected.append([score == max(exact) for score in exact])
    assert exact_maximal(every, -1, rounding).tolist() == expected
    untested = replace(rounding, partials=rounding.partials.rows)
    assert exact_maximal(every, -1, untested).tolist() == expected


def test_a_bound_remade_from_its_source_keeps_no_cast_copy_alive() -> None:
    """A float64 copy of a parameter is freed once the graph has used it: its bound, and the bound
    of the product it enters, cast the model's tensor again where they read the values, and give
    the same bounds as when they held the copy."""
    import weakref
    source = torch.tensor([[0.5, -1.25, 3.0], [2.0, 0.75, -0.125]])
    x = torch.tensor([[1.0, -2.0], [0.5, 4.0]], dtype=F64)
    rx = Rounding(1.0, lambda: x.abs(), 3, carried=lambda t, e: torch.full((2, 2), 2.0**-30, dtype=t))
    copy = source.to(F64)
    held = product_rounding(torch.matmul, [((x, rx), (copy, Rounding.of_exact(copy, 1.0)))], 2.0, 2,
                            torch.Size([2, 3]))
    want = [held.bound(F64, 0.0), held.bound(F64, 0.0, carried=True), held.bound(F64, 0.0, cheap=True)]
    del held
    again = Rounding.of_exact(copy, 1.0, lambda: source.to(F64))
    remade = product_rounding(torch.matmul, [((x, rx), (copy, again))], 2.0, 2, torch.Size([2, 3]))
    gone = weakref.ref(copy)
    del copy
    assert gone() is None
    got = [remade.bound(F64, 0.0), remade.bound(F64, 0.0, carried=True), remade.bound(F64, 0.0, cheap=True)]
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_a_lookup_of_an_exact_table_is_bounded_from_the_rows_it_read() -> None:
    """An embedding lookup of a value known exactly keeps it known exactly, with positions in the
    lookup's output (not in the whole table) and the looked-up rows as exact values."""
    from saturated.terms import Term
    table = torch.tensor([[1.0, -2.0], [0.0, 0.0], [3.0, 0.5]])
    ids = torch.tensor([[2, 1, 2]])
    rows = Term(((table, 1.0),), roundings=(Rounding.of_exact(table, 1.0),)).map(
        lambda a: torch.nn.functional.embedding(ids, a))
    rounding = rows.rounding(1.0)
    assert rounding is not None and rounding.index is not None and rounding.partials is not None
    assert rounding.index().shape == (1, 3, 2) and rounding.index().flatten().tolist() == list(range(6))
    assert rounding.partials(torch.arange(6)).flatten().tolist() == rows.lead.flatten().tolist()
    assert torch.equal(rounding.bound(torch.float32, 0.0), torch.zeros(1, 3, 2))
    # A narrowing cast moves the bound as before: its exact values are those the cast read.
    wide = torch.tensor([0.1, 0.2], dtype=F64)
    narrowed = Term(((wide, 1.0),), roundings=(Rounding.of_exact(wide, 1.0),)).map(
        lambda a: a.to(torch.float32))
    moved = narrowed.rounding(1.0)
    assert moved is not None and moved.partials is not None
    assert torch.equal(moved.partials(torch.arange(2)).flatten(), wide)


@pytest.mark.parametrize("fn", [torch.matmul, torch.nn.functional.linear], ids=["matmul", "linear"])
def test_a_weight_s_norms_are_kept_across_calls_and_give_the_same_cheap_bound(fn: Callable) -> None:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(5, 6, 8, generator=generator, dtype=F64)
    weight = torch.randn(8, 8, generator=generator)
    rx = Rounding(1.0, lambda: x.abs(), 8)

    def cheap(norms: Callable[[int, bool], torch.Tensor] | None) -> torch.Tensor:
        exact = Rounding.of_exact(weight.double(), 1.0, lambda: weight.double(), norms)
        product = product_rounding(fn, [((x, rx), (weight.double(), exact))], 2.0, 8, torch.Size([5, 6, 8]))
        assert product.cheap is not None
        return product.cheap()

    norms = tensor_norms(weight, F64)
    assert torch.equal(cheap(norms), cheap(None))
    kept = norms(-1, False)
    assert norms(-1, False) is kept  # computed once
    with torch.no_grad():
        weight.mul_(3.0)  # a new version of the weight: its norms are computed again
    assert torch.equal(cheap(norms), cheap(None)) and norms(-1, False) is not kept


def test_an_inference_tensor_s_norms_are_computed_at_each_read() -> None:
    with torch.inference_mode():
        weight = torch.tensor([[3.0, 4.0]])
    norms = tensor_norms(weight, F64)
    first = norms(-1, False)
    assert first.tolist() == [5.0] and norms(-1, False) is not first
    with torch.inference_mode():
        weight.mul_(2.0)
    assert norms(-1, False).tolist() == [10.0]
