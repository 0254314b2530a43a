"""Carried rounding bounds as ℓ2 radii per vector along the last dimension.

An elementwise bound b (|ŝᵢ − sᵢ| ≤ bᵢ) passed through a linear map W becomes |W|·b, which grows
by about √n per layer of width n more than the values do: random signs cancel in W·x, not in
|W|·b. A :class:`VectorBound` ρ instead bounds ‖ŝ − s‖₂ over the last dimension, for every index
of the leading ones, and passes W as ‖W‖₂·ρ (:mod:`saturated.spectral`), about as the values grow.

Either form converts to the other soundly: |eᵢ| ≤ ‖e‖₂ (:func:`elementwise`: ρ itself, which
broadcasts along the last dimension), and ‖e‖₂ ≤ ‖b‖₂ (:func:`l2_radius`, rounded up). A carried
bound (:attr:`saturated.rounding.Rounding.carried`) is one or the other (:data:`Brought`); every
op that has no rule of its own for radii reads it elementwise.

>>> bound = VectorBound(torch.tensor([[5.0]]), torch.Size([1, 3]))
>>> elementwise(bound).expand(1, 3)
tensor([[5., 5., 5.]])
>>> float(l2_radius(torch.tensor([[3.0, 4.0]]), torch.Size([1, 2]))) >= 5.0
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Brought", "VectorBound", "along", "elementwise", "l2_radius", "moved", "norm_above", "norm_below",
           "rounded_up", "scaled", "summed", "total"]


@dataclass(frozen=True)
class VectorBound:
    """‖ŝ − s‖₂ ≤ ``radius`` along the last dimension of a part of ``shape``, per index of its
    leading dimensions: ``radius`` has that shape with a last dimension of 1 (or broadcasts to it)."""

    radius: Tensor
    shape: torch.Size


Brought = Tensor | VectorBound


def elementwise(brought: Brought) -> Tensor:
    """An elementwise bound (broadcasting to the part) from either form: |eᵢ| ≤ ‖e‖₂."""
    return brought.radius if isinstance(brought, VectorBound) else brought


def _inflation(n: int, dtype: torch.dtype) -> float:
    """1 + 2·(n + 2)·u: a computed sqrt(Σᵢ xᵢ²) of n terms is within (1 + γₙ)^(1/2)·(1 + u) of the
    exact one (one rounding per square, n − 1 per sum, one for the root), and multiplying by this
    factor (itself rounded, and its product rounded) still leaves it above: (1 + γₙ/2 + 2u) ≤
    (1 + 2(n + 2)u)(1 − u)² while n·u ≤ 1/4."""
    return 1 + 2 * (n + 2) * torch.finfo(dtype).eps / 2


def _underflow(n: int, dtype: torch.dtype) -> float:
    """√(n·η): what n squares that underflow (each by at most η, the smallest subnormal) can take
    from a computed norm."""
    info = torch.finfo(dtype)
    return math.sqrt(n * info.tiny * info.eps)


def l2_radius(bound: Tensor, shape: torch.Size) -> Tensor:
    """ρ ≥ ‖b‖₂ along the last dimension of an elementwise bound ``bound`` broadcast to ``shape``
    (shape[:-1] + (1,) or less), rounded up (see :func:`_inflation`), plus √(n·η) for squares that
    underflow (η: the dtype's smallest subnormal). A bound constant along the last dimension is
    that constant times √n."""
    if not len(shape):
        return bound
    n = int(shape[-1])
    if bound.dim() == 0 or bound.shape[-1] == 1:
        return bound * (math.sqrt(n) * _inflation(1, bound.dtype)) + _underflow(n, bound.dtype)
    return norm_above(torch.linalg.vector_norm(
        bound.expand(*shape[:-1], n) if bound.dim() < len(shape) else bound, dim=-1, keepdim=True), n)


def norm_above(norms: Tensor, n: int) -> Tensor:
    """An upper bound of the exact ℓ2 norms of vectors of n elements from their computed norms
    ``norms`` (as ``torch.linalg.vector_norm`` computes them, in their dtype): inflated as
    :func:`_inflation` says, plus √(n·η) for squares that underflow.

    >>> float(norm_above(torch.tensor([5.0]), 2)) > 5.0
    True
    """
    return norms * _inflation(n, norms.dtype) + _underflow(n, norms.dtype)


def rounded_up(values: Tensor) -> Tensor:
    """``values`` ≥ 0, the result of one rounded op (a sum or product of upper bounds, one of whose
    operands may be a Python float rounded to the dtype first), made an upper bound of the op's
    exact result: times 1 + 8u, plus the smallest normal number τ, in place. Each of the four
    roundings gives at least r·(1 − u), and (1 − u)⁴·(1 + 8u) ≥ 1 while u ≤ 1/16; one that
    underflows loses at most half the smallest subnormal, far below τ·(1 − u).

    >>> third = torch.tensor([1.0]) / 3
    >>> float(rounded_up(third)) * 3 >= 1.0
    True
    """
    info = torch.finfo(values.dtype)
    return values.mul_(1 + 4 * info.eps).add_(info.tiny)


def norm_below(values: Tensor) -> Tensor:
    """A lower bound of the exact ‖values‖₂ along the last dimension (keepdim): the computed norm
    shrunk by the factor :func:`l2_radius` inflates it by (squares that underflow only make it
    lower)."""
    n = int(values.shape[-1])
    return torch.linalg.vector_norm(values, dim=-1, keepdim=True) / _inflation(n, values.dtype) ** 2


def along(bound: VectorBound, shape: torch.Size) -> Tensor:
    """The radius of ``bound`` for its part broadcast to ``shape``: the same, save where the part's
    last dimension is 1 and broadcasts to n (each vector is one element repeated n times: √n·ρ).

    >>> float(along(VectorBound(torch.tensor([[1.0]]), torch.Size([1, 1])), torch.Size([1, 4]))) >= 2.0
    True
    """
    own, wanted = (int(bound.shape[-1]) if len(bound.shape) else 1), (int(shape[-1]) if len(shape) else 1)
    if own == wanted:
        return bound.radius
    if own != 1:
        raise ValueError(f"a radius along a last dimension of {own} read for one of {wanted}; "
                         "expected the same size or a broadcast from 1")
    return bound.radius * (math.sqrt(wanted) * _inflation(1, bound.radius.dtype))


def total(bounds: Sequence[Brought], shape: torch.Size) -> Brought:
    """The bound of a sum of errors with the given bounds, of a part of ``shape``: elementwise
    bounds add, radii add, and with both the elementwise sum joins the radii as its ℓ2 radius."""
    tensors = [b for b in bounds if not isinstance(b, VectorBound)]
    radii = [along(b, shape) for b in bounds if isinstance(b, VectorBound)]
    added = None if not tensors else sum(tensors[1:], tensors[0])
    if not radii:
        assert added is not None, "a total of no bounds"
        return added
    radius = sum(radii[1:], radii[0])
    return VectorBound(radius if added is None else radius + l2_radius(added, shape), shape)


def scaled(brought: Brought, size: float) -> Brought:
    """The bound times ``size`` ≥ 0 (a constant factor's magnitude)."""
    if isinstance(brought, VectorBound):
        return VectorBound(size * brought.radius, brought.shape)
    return size * brought


def summed(brought: Brought, dims: Sequence[int], keepdim: bool,
           reduce: Callable[[Tensor], Tensor]) -> Brought:
    """The bound after a sum over ``dims`` (all of them if empty, as torch sums), ``reduce``
    summing an elementwise bound the same way. For radii: a sum over other dimensions adds the
    radii of the vectors it adds (still radii); one along the last dimension is elementwise, each
    vector's |Σᵢ eᵢ| ≤ √n·‖e‖₂ ≤ √n·ρ (Cauchy–Schwarz), summed over the other dimensions.

    >>> bound = VectorBound(torch.tensor([[1.0], [2.0]]), torch.Size([2, 4]))
    >>> summed(bound, [0], False, lambda m: m.sum(0)).radius
    tensor([3.])
    >>> float(summed(bound, [1], False, lambda m: m.sum(1))[1]) >= 4.0
    True
    """
    if not isinstance(brought, VectorBound):
        return reduce(brought)
    shape = brought.shape
    rank = len(shape)
    if rank == 0:
        return reduce(brought.radius)
    summed_dims = sorted({int(d) % rank for d in dims}) if dims else list(range(rank))
    radius = brought.radius.expand(*shape[:-1], 1)
    if rank - 1 in summed_dims:
        root = math.sqrt(int(shape[-1])) * _inflation(1, radius.dtype)
        return (radius * root).sum(dim=summed_dims, keepdim=keepdim)
    out_shape = torch.Size([1 if d in summed_dims else size for d, size in enumerate(shape)
                            if keepdim or d not in summed_dims])
    return VectorBound(radius.sum(dim=summed_dims, keepdim=keepdim), out_shape)


def moved(fn: Callable[[Tensor], Tensor], brought: Brought, key: Hashable | None = None) -> Brought:
    """The bound after a shape, indexing or cast op ``fn``.

    For a radius: ``fn`` is applied to each element's flat position, which tells where each output
    vector (along its last dimension) takes its elements from. A vector made of elements of one
    input vector keeps that vector's radius; one that merges several (heads put back side by
    side), each element at most once, gets sqrt(Σ ρ²) over those vectors. Elementwise otherwise:
    where an element appears twice in a vector, or the last dimension moved (a vector made mostly
    of single elements of others, as after a transpose). A cast moves nothing; one to a narrower
    dtype rounds the bound up. ``key``, when given, names the op and its arguments (hashable, the
    same key for the same op): what the positions tell is derived once per key and shape, since
    the same views recur at every call."""
    if not isinstance(brought, VectorBound):
        return _cast_up(fn(brought), brought)
    radius, shape = brought.radius, brought.shape
    if not len(shape):
        return _cast_up(fn(radius), radius)
    plan = _plan(fn, shape, radius.device, key)
    if plan.kind == "cast":
        return VectorBound(_cast_up(fn(radius), radius), shape)
    if plan.kind == "elementwise":
        return fn(radius.expand(shape))
    assert plan.source is not None and plan.shape is not None
    rows = radius.expand(*shape[:-1], 1).reshape(-1)
    leading = (*plan.shape[:-1], 1)
    if plan.kind == "rows":
        return VectorBound(rows[plan.source].reshape(leading), plan.shape)
    squares = (torch.cat([rows, rows.new_zeros(1)])[plan.source] ** 2).sum(-1, keepdim=True)
    merged = squares.sqrt() * _inflation(plan.count, radius.dtype) + _underflow(plan.count, radius.dtype)
    return VectorBound(merged.reshape(leading), plan.shape)


def _cast_up(cast: Tensor, bound: Tensor) -> Tensor:
    """``cast``, ``bound`` after an op that may have cast it, rounded up where a narrowing cast
    rounded it down (to the next float of the narrower dtype): still a bound."""
    if cast.dtype == bound.dtype or not cast.is_floating_point() or not bound.is_floating_point():
        return cast
    below = cast.to(bound.dtype) < bound
    return torch.where(below, torch.nextafter(cast, cast.new_full((), math.inf)), cast)


@dataclass(frozen=True)
class _Plan:
    """What a shape op does to vectors along the last dimension (see :func:`moved`): ``kind``
    "cast" (nothing moves), "elementwise" (no radius survives), "rows" (output vector i is input
    vector ``source[i]``'s elements) or "merged" (output vector i gathers the distinct input
    vectors ``source[i]``, at most ``count`` of them, padded with the index one past the last
    vector, whose radius reads as 0); ``shape``: the output's."""

    kind: str
    source: Tensor | None = None
    count: int = 0
    shape: torch.Size | None = None


# Plans by (op key, input shape, device), oldest dropped first past _PLANS_KEPT.
_PLANS: dict[Hashable, _Plan] = {}
_PLANS_KEPT = 512


def _plan(fn: Callable[[Tensor], Tensor], shape: torch.Size, device: torch.device,
          key: Hashable | None) -> _Plan:
    """The plan of ``fn`` on a part of ``shape``: kept under ``key`` (see :func:`moved`)."""
    if key is None:
        return _derived_plan(fn, shape, device)
    full = (key, tuple(shape), str(device))
    plan = _PLANS.get(full)
    if plan is None:
        plan = _PLANS[full] = _derived_plan(fn, shape, device)
        if len(_PLANS) > _PLANS_KEPT:
            del _PLANS[next(iter(_PLANS))]
    return plan


def _derived_plan(fn: Callable[[Tensor], Tensor], shape: torch.Size, device: torch.device) -> _Plan:
    """The plan of ``fn``, from where it moves each element's flat position."""
    n = int(shape[-1])
    ids = torch.arange(math.prod(shape), device=device).reshape(shape)
    out = fn(ids)
    if out.dtype != ids.dtype:  # a cast moves nothing (its positions would turn into values)
        return _Plan("cast")
    if out.dim() == 0 or out.shape[-1] == 0 or out.numel() == 0:
        return _Plan("elementwise")
    flat = out.reshape(-1, out.shape[-1])
    if bool((flat[:, 1:] > flat[:, :-1]).all()) and bool((flat[:, -1] // n == flat[:, 0] // n).all()):
        # the common case (a view or slice that keeps vectors whole): increasing positions, within
        # one vector, so no element twice; no sort needed
        return _Plan("rows", flat[:, 0] // n, shape=out.shape)
    ordered = flat.sort(-1).values
    if bool((ordered[:, 1:] == ordered[:, :-1]).any()):  # an element twice in a vector
        return _Plan("elementwise")
    source = ordered // n
    if bool((source == source[:, :1]).all()):
        return _Plan("rows", source[:, 0], shape=out.shape)
    distinct = torch.ones_like(ordered, dtype=torch.bool)
    distinct[:, 1:] = source[:, 1:] != source[:, :-1]
    per_row = distinct.sum(-1)
    count = int(per_row.max())
    if 2 * count > ordered.shape[-1]:
        return _Plan("elementwise")
    padded = torch.full((len(source), count), math.prod(shape[:-1]), dtype=source.dtype, device=device)
    row, _ = torch.nonzero(distinct, as_tuple=True)
    padded[row, distinct.cumsum(-1)[distinct] - 1] = source[distinct]
    return _Plan("merged", padded, count, out.shape)
