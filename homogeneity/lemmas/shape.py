"""Lemmas for ops that move, select or copy entries, positions, concatenation, padding and
constants: they move values, they do not change them."""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any

import sympy
import torch

from homogeneity.degree import Grade
from homogeneity.lemmas.algebra import SUM_CASES, T, exact_identity, total
from homogeneity.lemmas.base import (
    CONST,
    Claim,
    Deg,
    Lemma,
    LemmaCase,
    Sample,
    fmt,
    is_literal_zero,
    no_degree,
)

__all__ = ["LEMMAS"]

aten = torch.ops.aten
A, B = sympy.symbols("a b", real=True)


def _moves_entries() -> str | None:
    """A fixed 0/1 matrix P (a permutation, selection, copy, triangle or zero mask) commutes
    with scaling: P·(cᵏz) = cᵏ·(P·z)."""
    z = sympy.Matrix([A, B])
    for p in (sympy.Matrix([[0, 1], [1, 0]]), sympy.Matrix([[1, 0], [1, 0]]),
              sympy.Matrix([[1, 0], [0, 0]])):
        residual = sympy.simplify(p * (T * z) - T * (p * z))
        if residual != sympy.zeros(2, 1):
            return f"P·(tz) − t·(P·z) = {residual}"
    return None


MOVES = LemmaCase("moves entries", "P·(cᵏz) = cᵏ·(P·z) for a fixed 0/1 matrix P", _moves_entries)
ONE = (Sample(1, lambda x: ((x,), {})),)


def _moved_law(x: Any, *args: Any, **kwargs: Any) -> Claim:
    if not isinstance(x, Deg) or x.value is None:
        return no_degree("an input without degree")
    return Claim("moves entries", x, ())


def _flatten(items: Any) -> list[Any]:
    if isinstance(items, list | tuple):
        return [leaf for item in items for leaf in _flatten(item)]
    return [items]


def _indexing_law(x: Deg, *args: Any, **kwargs: Any) -> Claim:
    grade = Grade.EXACT
    for index in _flatten([*args, *kwargs.values()]):
        if isinstance(index, Deg) and not (index.value == 0 and index.grade is not Grade.NONE):
            return no_degree(f"indices of degree {fmt(index.value)} ({index.grade})")
        if isinstance(index, Deg):
            grade = grade.weaker(index.grade)
    claim = _moved_law(x)
    if grade is Grade.EXACT or claim.out.value is None:
        return claim
    return Claim("moves entries", Deg(claim.out.value, claim.out.grade.weaker(grade)),
                 ("integer indices of degree 0 are constant from some c on",))


def _positions_law(x: Deg, *args: Any, **kwargs: Any) -> Claim:
    if x.value is None:
        return no_degree("an input without degree")
    return Claim("positions", Deg(Fraction(0), x.grade), ("positions are invariant under c > 0",))


def _positions() -> str | None:
    """argmax(cᵏa, cᵏb) = argmax(a, b): cᵏa − cᵏb has the sign of a − b."""
    residual = sympy.simplify(sympy.sign(T * (A - B)) - sympy.sign(A - B))
    return None if residual == 0 else f"sign residual {residual}"


def _concatenation_law(tensors: list[Any], dim: Any = 0) -> Claim:
    return total(*tensors, what="concatenation")


def _pad_law(x: Deg, padding: Any, *fill: Any) -> Claim:
    value = next((v for v in fill if not isinstance(v, str)), 0)
    if value is None or is_literal_zero(value):
        return _moved_law(x)
    return total(x, value, what="padding")


def _constant_law(*args: Any, **kwargs: Any) -> Claim:
    return Claim("reads no parameter", CONST, ())


def _reads_no_parameter() -> str | None:
    """A value computed from shapes and literals alone is the same at every c."""
    return exact_identity(sympy.Integer(3), 0, sympy.Integer(3))


LEMMAS = (
    Lemma("rearrangement", "views, copies, casts, slices, splits, triangles and eval-mode dropout "
          "only move, select, zero or copy entries: degree and grade stay",
          (aten.view.default, aten._unsafe_view.default, aten.reshape.default,
           aten.permute.default, aten.transpose.int, aten.t.default, aten.mT.default,
           aten.expand.default, aten.contiguous.default, aten.clone.default, aten.slice.Tensor,
           aten.select.int, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
           aten.squeeze.default, aten.flatten.using_ints, aten.unflatten.int, aten.alias.default,
           aten.detach.default, aten.detach_.default, aten.to.dtype, aten.to.device,
           aten.to.dtype_layout, aten.to.other, aten._to_copy.default, aten.type_as.default,
           aten.lift_fresh_copy.default, aten.repeat.default,
           aten.repeat_interleave.self_int, aten.roll.default,
           aten.flip.default, aten.narrow.default, aten.movedim.int, aten.split.Tensor,
           aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int, aten.tril.default,
           aten.triu.default, aten.diagonal.default, aten.dropout.default,
           aten.feature_dropout.default, aten.alpha_dropout.default, aten.native_dropout.default,
           operator.getitem),
          _moved_law, (MOVES,), ONE),
    Lemma("indexing", "x[i] with fixed indices selects entries: degree and grade stay",
          (aten.index.Tensor, aten.index_select.default, aten.gather.default,
           aten.take_along_dim.default), _indexing_law, (MOVES,),
          (Sample(2, lambda x, i: ((x, [i]), {})),)),
    Lemma("positions", "nonzero, argmax, argmin and argsort are unchanged by a positive scale: "
          "degree 0, the input's grade",
          (aten.nonzero.default, aten.argmax.default, aten.argmin.default, aten.argsort.default),
          _positions_law, (LemmaCase("positions", "argmax(cᵏz) = argmax(z)", _positions),), ONE),
    Lemma("concatenation", "concatenation is a sum of zero-padded pieces: the Sum rule",
          (aten.cat.default, aten.stack.default, aten.hstack.default, aten.vstack.default),
          _concatenation_law, SUM_CASES,
          (Sample(2, lambda a, b: (([a, b], 0), {})),)),
    Lemma("pad", "zero padding moves entries; a nonzero fill is a constant term (Sum rule)",
          (aten.constant_pad_nd.default, aten.pad.default), _pad_law, (MOVES, *SUM_CASES),
          (Sample(1, lambda x: ((x, [1, 1]), {})), Sample(1, lambda x: ((x, [1, 1], 2.0), {})))),
    Lemma("constant", "factories, shape queries, assertions and arithmetic on sizes read no "
          "parameter: exactly degree 0",
          (aten.arange.default, aten.arange.start, aten.arange.start_step, aten.zeros.default,
           aten.ones.default, aten.full.default, aten.empty.memory_format, aten.eye.default,
           aten.scalar_tensor.default, aten.zeros_like.default, aten.ones_like.default,
           aten.full_like.default, aten.empty_like.default, aten.new_ones.default,
           aten.new_zeros.default, aten.new_full.default, aten.new_empty.default,
           aten.sym_size.int, aten._assert_tensor_metadata.default, aten._assert_scalar.default,
           aten.sym_constrain_range_for_size.default, operator.add, operator.sub, operator.mul,
           operator.floordiv, operator.mod, operator.truediv, operator.neg, operator.ge,
           operator.gt, operator.le, operator.lt, operator.eq, operator.ne),
          _constant_law,
          (LemmaCase("reads no parameter", "f(cθ) = f(θ) when f reads no parameter value",
                     _reads_no_parameter),),
          (Sample(1, lambda x: ((x,), {})), Sample(0, lambda: ((4,), {})))),
)
