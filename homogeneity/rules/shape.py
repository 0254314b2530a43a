"""Rules for ops that move, select or copy entries, and for constants (factories, assertions)."""

from __future__ import annotations

import operator
from typing import Any

import torch

from homogeneity.degree import Degree, Grade, lift
from homogeneity.rules.common import first_undefined, is_zero, sum_of
from homogeneity.rules.registry import rule

__all__: list[str] = []

aten = torch.ops.aten


@rule(
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
    aten.transpose.int, aten.t.default, aten.mT.default, aten.expand.default, aten.contiguous.default,
    aten.clone.default, aten.slice.Tensor, aten.select.int, aten.unsqueeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.flatten.using_ints,
    aten.unflatten.int, aten.alias.default, aten.detach.default, aten.detach_.default,
    aten.to.dtype, aten.to.device, aten.to.dtype_layout, aten.to.other, aten._to_copy.default,
    aten.type_as.default,
    aten.lift_fresh_copy.default, aten.repeat.default, aten.repeat_interleave.self_int,
    aten.roll.default, aten.flip.default,
    aten.narrow.default, aten.movedim.int, aten.split.Tensor, aten.split_with_sizes.default,
    aten.chunk.default, aten.unbind.int, aten.tril.default, aten.triu.default,
    aten.diagonal.default, aten.dropout.default, aten.feature_dropout.default,
    aten.alpha_dropout.default, aten.native_dropout.default, operator.getitem,
)
def rearrangement(x: Degree, *args: Any, **kwargs: Any) -> Degree:
    """Views, copies, casts, slices, splits, triangles and eval-mode dropout only move, select,
    zero or copy entries: f(cθ) entries are the same entries of cᵏ f(θ), so degree and grade stay.

    Dropout in training multiplies by a random mask independent of θ, so each draw keeps the
    degree too. An item of a tuple (``getitem``) has the tuple's degree.
    """
    return x


@rule(aten.index.Tensor, aten.index_select.default, aten.gather.default,
      aten.take_along_dim.default)
def indexing(x: Degree, *args: Any, **kwargs: Any) -> Degree:
    """x[idx] with fixed indices selects entries: degree and grade stay (like a view).

    Indices of degree 0 that are exact do not change with c; approximate or asymptotic ones
    converge, and integers that converge are constant from some c on (a router's experts once its
    top-k has settled): degree stays, the grade is the weaker of the two. Indices of another
    degree select different entries at every scale: no degree.
    """
    indices = [a for a in _flatten(args) + _flatten(list(kwargs.values())) if isinstance(a, Degree)]
    undefined = first_undefined(indices)
    if undefined is not None:
        return undefined
    grade = Grade.EXACT
    for index in indices:
        if not (index.single and index.value == 0 and index.grade is not Grade.NONE):
            return Degree.none("indices depend on the scaled parameters")
        grade = grade.weaker(index.grade)
    if grade is Grade.EXACT:
        return x
    return lift(lambda d: d if d.grade is Grade.NONE else Degree.of(
        d.value, d.grade.weaker(grade), f"entries selected by {grade} indices"), x)


@rule(aten.nonzero.default, aten.argmax.default, aten.argmin.default, aten.argsort.default)
def positions(x: Degree, *args: Any, **kwargs: Any) -> Degree:
    """Positions of nonzeros, maxima or the sort order: unchanged by a positive scale, so
    nonzero(cᵏz) = nonzero(z) and argmax(cᵏz) = argmax(z): degree 0, the input's grade."""
    return lift(lambda d: Degree.of(0, d.grade, "positions are invariant under positive scaling")
                if d.grade is not Grade.NONE else d, x)


def _flatten(items: list[Any] | tuple[Any, ...]) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        flat += _flatten(item) if isinstance(item, list | tuple) else [item]
    return flat


@rule(aten.cat.default, aten.stack.default, aten.hstack.default, aten.vstack.default)
def concatenation(tensors: list[Degree], dim: Any = 0) -> Degree:
    """Concatenation is a sum of zero-padded pieces: the Sum rule over the pieces (Lemma 3)."""
    return sum_of(*tensors, what="concatenation")


@rule(aten.constant_pad_nd.default, aten.pad.default)
def pad(x: Degree, padding: Any, *fill: Any) -> Degree:
    """Zero padding keeps the degree; a nonzero fill value is a constant term (Sum rule)."""
    value = next((v for v in fill if not isinstance(v, str)), 0)
    return x if value is None or is_zero(value) else sum_of(x, value, what="padding")


@rule(
    aten.arange.default, aten.arange.start, aten.arange.start_step, aten.zeros.default,
    aten.ones.default, aten.full.default, aten.empty.memory_format, aten.eye.default,
    aten.scalar_tensor.default, aten.zeros_like.default, aten.ones_like.default,
    aten.full_like.default, aten.empty_like.default, aten.new_ones.default,
    aten.new_zeros.default, aten.new_full.default, aten.new_empty.default,
    aten.sym_size.int, aten._assert_tensor_metadata.default, aten._assert_scalar.default,
    aten.sym_constrain_range_for_size.default, operator.add, operator.sub, operator.mul,
    operator.floordiv, operator.mod, operator.truediv, operator.neg, operator.ge, operator.gt,
    operator.le, operator.lt, operator.eq, operator.ne,
)
def constant(*args: Any, **kwargs: Any) -> Degree:
    """Factories (arange, zeros, full, eye, *_like, new_*), shape queries and Python arithmetic
    on sizes read no parameter values: constants, exactly 0-homogeneous. Assertions return
    nothing and get the same."""
    return Degree.constant("factory or shape query: independent of parameter values")

