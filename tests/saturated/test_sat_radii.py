"""Carried rounding bounds as ℓ2 radii (saturated.radii): the true error of float64 networks,
against exact rational arithmetic on the same float64 operands, lies within the radius the limit
carries; views move radii soundly; a two-part ReLU keeps its input's bounds."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from homogeneity.tracing import export_model
from saturated.interpreter import run_terms
from saturated.radii import VectorBound, elementwise, l2_radius, moved
from saturated.rounding import gamma
from saturated.rules import Settings
from saturated.terms import Term

F64 = torch.float64
HEADS = 2


class Block(nn.Module):
    """linear → ReLU → linear, scaled by an exact per-token factor and a weight (an RMSNorm whose
    inverse root is given), a value projection split into heads, attention-like weights times
    the values, the heads merged back, and a residual sum of two projections."""

    def __init__(self, n: int = 4, m: int = 6) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(n, m, bias=False), nn.Linear(m, n, bias=False)
        self.w = nn.Parameter(torch.ones(n))
        self.v, self.o, self.q = (nn.Linear(n, n, bias=False) for _ in range(3))

    def forward(self, x: torch.Tensor, scale: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        t, n = x.shape
        z = self.b(torch.relu(self.a(x))) * scale * self.w
        values = self.v(z)
        heads = values.view(t, HEADS, n // HEADS).transpose(0, 1)
        mixed = (p @ heads).transpose(0, 1).reshape(t, n)
        return self.o(mixed) + self.q(values)


def _exact(model: Block, x: np.ndarray, scale: np.ndarray, p: np.ndarray) -> list[list[Fraction]]:
    """The block's output in exact rationals from its float64 parameters and inputs: with every
    parameter grown by c, its leading coefficient (degree 5; the block has no bias)."""
    def fractions(a: np.ndarray) -> list:
        return [fractions(r) for r in a] if a.ndim else Fraction(float(a))

    def linear(rows: list, weight: nn.Linear) -> list:
        w = fractions(weight.weight.detach().numpy())
        return [[sum((r[k] * w[j][k] for k in range(len(r))), Fraction(0)) for j in range(len(w))]
                for r in rows]

    w = fractions(model.w.detach().numpy())
    s, weights = fractions(scale), fractions(p)
    hidden = [[max(v, Fraction(0)) for v in row] for row in linear(fractions(x), model.a)]
    z = [[v * s[i][0] * w[j] for j, v in enumerate(row)] for i, row in enumerate(linear(hidden, model.b))]
    values = linear(z, model.v)
    t, n, d = len(values), len(values[0]), len(values[0]) // HEADS
    mixed = [[sum((weights[j // d][i][k] * values[k][j] for k in range(t)), Fraction(0)) for j in range(n)]
             for i in range(t)]
    return [[a + b for a, b in zip(r, q)] for r, q in zip(linear(mixed, model.o), linear(values, model.q))]


@pytest.fixture(scope="module")
def block() -> tuple[Block, torch.export.ExportedProgram]:
    torch.manual_seed(0)
    model = Block().double()
    inputs = (torch.randn(3, 4, dtype=F64), torch.rand(3, 1, dtype=F64), torch.rand(HEADS, 3, 3, dtype=F64))
    return model, export_model(model, inputs)


def _draw(rng: np.random.Generator, shape: tuple[int, ...], spread: int) -> np.ndarray:
    return rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 30), cancel=st.booleans())
def test_the_true_error_of_a_float64_block_is_within_its_radius(block, seed, spread, cancel):
    model, program = block
    rng = np.random.default_rng(seed)
    state = {name: torch.from_numpy(_draw(rng, tuple(t.shape), spread))
             for name, t in model.state_dict().items()}
    if cancel:  # two hidden units nearly equal, then subtracted: the sum cancels to a few bits
        state["a.weight"][1] = state["a.weight"][0] * (1 + 2.0**-40)
        state["b.weight"][:, :2] = torch.tensor([1e12, -1e12], dtype=F64)
    x, scale = _draw(rng, (3, 4), spread), rng.random((3, 1)) + 0.5
    p = rng.random((HEADS, 3, 3))
    model.load_state_dict(state)
    (out,) = run_terms(program, state, [torch.from_numpy(a) for a in (x, scale, p)], Settings(orders=1))
    assert isinstance(out, Term) and out.degree == 5.0
    rounding = out.rounding(5.0)
    assert rounding is not None and rounding.carried is not None
    assert isinstance(rounding.carried(F64, 0.0), VectorBound)  # the radii path, not elementwise
    radius = rounding.radius(F64, 0.0, out.shape)
    exact = _exact(model, x, scale, p)
    for row, computed, rho in zip(exact, out.lead.tolist(), radius.flatten().tolist()):
        error = sum(((Fraction(c) - e) ** 2 for c, e in zip(computed, row)), Fraction(0))
        assert error <= Fraction(rho) ** 2


def test_the_radius_is_far_below_the_elementwise_bound_after_a_chain_of_layers() -> None:
    """The point of radii: through 8 random linear layers of width 64, the elementwise bound
    e' = |W|·e + γ₆₄·|W|·|h| (the tightest elementwise recurrence) grows by about √64 per layer
    more than the values, the radius by ‖W‖₂ over their gain only."""
    torch.manual_seed(1)
    layers = nn.Sequential(*(nn.Linear(64, 64, bias=False) for _ in range(8))).double()
    x = torch.randn(2, 64, dtype=F64)
    (out,) = run_terms(export_model(layers, (x,)), dict(layers.state_dict()), [x], Settings(orders=1))
    radius = out.rounding(out.degree).radius(F64, 0.0, out.shape)
    values, bound = x, torch.zeros_like(x)
    for layer in layers:
        weight = layer.weight.detach().abs()
        bound = bound @ weight.T + gamma(64, F64) * (values.abs() @ weight.T)
        values = layer(values)
    assert bool((radius < 1e-2 * torch.linalg.vector_norm(bound, dim=-1, keepdim=True)).all())


# A view or transpose moves radii (saturated.radii.moved); each case is checked against errors
# that fill each vector's radius exactly, in random directions.
VIEWS = {
    "split heads": lambda a: a.reshape(2, 3, 2, 4).transpose(1, 2),
    "split and merge heads": lambda a: a.reshape(2, 3, 2, 4).transpose(1, 2).transpose(1, 2).reshape(2, 3, 8),
    "merge rows": lambda a: a.reshape(2, 24),
    "transpose the last dimension": lambda a: a.transpose(-1, -2),
    "repeat along the last dimension": lambda a: a[..., :1].expand(2, 3, 5),
    "select a row": lambda a: a[:, 1],
    "repeat rows": lambda a: a.unsqueeze(1).expand(2, 4, 3, 8),
    "flatten": lambda a: a.reshape(-1),
}


@pytest.mark.parametrize("view", VIEWS)
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_views_move_radii_soundly(view: str, seed: int) -> None:
    fn = VIEWS[view]
    generator = torch.Generator().manual_seed(seed)
    shape = torch.Size([2, 3, 8])
    radius = torch.rand(2, 3, 1, generator=generator, dtype=F64)
    direction = torch.randn(shape, generator=generator, dtype=F64)
    error = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True) * radius * (1 - 2.0**-40)
    out = moved(fn, VectorBound(radius, shape))
    moved_error = fn(error).double()
    if isinstance(out, VectorBound):
        assert out.shape == moved_error.shape
        assert bool((torch.linalg.vector_norm(moved_error, dim=-1, keepdim=True) <= out.radius).all())
    else:
        assert bool((moved_error.abs() <= elementwise(out).double()).all())


def test_views_keep_radii_where_vectors_stay_whole() -> None:
    shape = torch.Size([2, 3, 8])
    radius = torch.rand(2, 3, 1, dtype=F64)
    split = moved(VIEWS["split heads"], VectorBound(radius, shape))
    assert isinstance(split, VectorBound) and split.shape == (2, 2, 3, 4)
    assert torch.equal(split.radius, radius.unsqueeze(1).expand(2, 2, 3, 1))  # each half: the whole's
    same = moved(VIEWS["split and merge heads"], VectorBound(radius, shape))
    assert isinstance(same, VectorBound) and torch.equal(same.radius, radius)
    heads = torch.rand(2, 2, 3, 1, dtype=F64)  # per head, merged back: sqrt(ρ₁² + ρ₂²)
    merged = moved(lambda a: a.transpose(1, 2).reshape(2, 3, 8), VectorBound(heads, torch.Size([2, 2, 3, 4])))
    assert isinstance(merged, VectorBound) and merged.shape == shape
    expected = torch.linalg.vector_norm(heads.transpose(1, 2), dim=-2)
    assert bool((merged.radius >= expected).all()) and torch.allclose(merged.radius, expected, rtol=1e-14)
    for elementwise_view in ("transpose the last dimension", "repeat along the last dimension"):
        assert not isinstance(moved(VIEWS[elementwise_view], VectorBound(radius, shape)), VectorBound)
    cast = moved(lambda a: a.to(torch.float32), VectorBound(radius, shape))
    assert isinstance(cast, VectorBound) and cast.shape == shape


def test_an_l2_radius_is_an_upper_bound_of_the_norm() -> None:
    bound = torch.tensor([[3.0, 4.0], [1e-300, 1e-300]], dtype=F64)
    radius = l2_radius(bound, bound.shape)
    assert radius[0, 0] >= 5.0 and radius[1, 0] >= math.sqrt(2) * 1e-300
    assert l2_radius(torch.tensor([[2.0]], dtype=F64), torch.Size([1, 9]))[0, 0] >= 6.0  # constant: √n·b


class TwoPartRelu(nn.Module):
    """ReLU of a growing part plus a fixed one, then a layer whose output cancels: the first layer
    computes 2³⁰ + 2⁻³⁰ as 2³⁰, so the second computes 0 for an exact −2⁻³⁰."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(2, 2, bias=False), nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([[2.0**30, 0.0], [2.0**30, 2.0**-30]]))
            self.second.weight.copy_(torch.tensor([[1.0, -1.0]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.second(torch.relu(self.first(x) + x)))


def test_carried_errors_are_read_after_a_relu_of_two_parts() -> None:
    """With two orders the ReLU's input has two parts (c·W·x and x). Read as exact, its output
    would let the exact step take the computed 2³⁰ − 2³⁰ = 0 as an exact zero, and the tanh
    would follow the lower parts (also exactly 0); the ReLU keeps its input's bound, so with
    ``carried`` the sign is undetermined in float64, not decided wrongly."""
    model = TwoPartRelu().double()
    x = torch.tensor([[1.0, 1.0]], dtype=F64)
    w1, w2 = model.first.weight.detach().tolist(), model.second.weight.detach().tolist()
    hidden = [max(sum(Fraction(w) * Fraction(v) for w, v in zip(row, x[0].tolist())), Fraction(0))
              for row in w1]
    exact = sum(Fraction(w) * h for w, h in zip(w2[0], hidden))
    assert exact == -Fraction(2) ** -30  # the leading coefficient of the tanh's input: tanh → −1
    program = export_model(model, (x,))
    state = dict(model.state_dict())
    (out,) = run_terms(program, state, [x], Settings(orders=2, carried=True, ties="nan"))
    assert bool(torch.isnan(out.lead).all())  # undetermined in float64
    (plain,) = run_terms(program, state, [x], Settings(orders=2, ties="nan"))
    assert not bool(torch.isnan(plain.lead).any())  # the default decides for operands as computed


def test_a_radius_read_for_a_broadcast_last_dimension_grows_by_its_root() -> None:
    """A part of one element per vector, broadcast to n elements by a product or a sum (a norm's
    scale), repeats its error n times: the radius read for it is √n·ρ, in a sum as in a product."""
    from saturated.radii import total
    from saturated.rounding import Rounding
    narrow = VectorBound(torch.full((2, 1), 0.5, dtype=F64), torch.Size([2, 1]))
    wide = total([narrow, VectorBound(torch.zeros(2, 1, dtype=F64), torch.Size([2, 9]))], torch.Size([2, 9]))
    assert isinstance(wide, VectorBound) and bool((wide.radius >= 1.5).all())
    rounding = Rounding(1.0, lambda: torch.zeros(2, 1, dtype=F64), 0, carried=lambda t, e: narrow)
    assert bool((rounding.radius(F64, 0.0, torch.Size([2, 9])) >= 1.5).all())


@pytest.mark.parametrize(("dims", "keepdim"), [([0], False), ([1], True), ([-1], True), ([-1], False),
                                               ([0, 2], False), ([], False)])
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_sums_of_parts_with_radii_lie_within_their_bound(dims: list[int], keepdim: bool, seed: int) -> None:
    from saturated.radii import summed
    generator = torch.Generator().manual_seed(seed)
    shape = torch.Size([2, 3, 8])
    radius = torch.rand(2, 3, 1, generator=generator, dtype=F64)
    direction = torch.randn(shape, generator=generator, dtype=F64)
    error = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True) * radius * (1 - 2.0**-40)

    def reduce(m: torch.Tensor) -> torch.Tensor:
        return m.expand(shape).sum(dim=dims, keepdim=keepdim)

    out = summed(VectorBound(radius, shape), dims, keepdim, reduce)
    total_error = error.sum(dim=dims, keepdim=keepdim)
    if isinstance(out, VectorBound):
        assert out.shape == total_error.shape
        assert bool((torch.linalg.vector_norm(total_error, dim=-1, keepdim=True) <= out.radius).all())
    else:
        assert bool((total_error.abs() <= out).all())
