"""Rules for shapes, indexing and casts: the op acts on every part of an expansion alike."""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch
from torch import Tensor

from saturated.errors import SaturationError
from saturated.rules.common import _term
from saturated.rules.registry import Rule, Settings, _rule, register_rule
from saturated.terms import Term

__all__: list[str] = []  # the rules register themselves in RULES

aten = torch.ops.aten


_SPLITS = {aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int}


def _structural(target: Any) -> Rule:
    def rule(s: Settings, x: Any, *args: Any, **kwargs: Any) -> Any:
        """Shape and indexing ops move elements without changing their values or degrees."""
        t = _term(x, s)
        key = _op_key(target, args, kwargs)
        if target not in _SPLITS:
            return t.map(lambda v: target(v, *args, **kwargs), key)
        pieces = [target(a, *args, **kwargs) for a, _ in t.parts]
        shape = t.shape

        def piece_of(i: int) -> Callable[[Tensor], Tensor]:
            return lambda v: target(v.expand(shape), *args, **kwargs)[i]

        return [Term(tuple((piece[i], d) for piece, (_, d) in zip(pieces, t.parts)), t.floor,
                     tuple(r.map(piece_of(i), None if key is None else (key, i, tuple(shape)))
                           for r in t.roundings))
                for i in range(len(pieces[0]))]
    return rule


def _op_key(target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Hashable | None:
    """A hashable name of ``target`` applied to ``args`` and ``kwargs`` (lists as tuples), or None
    where an argument is a tensor or not hashable: the key under which what the op does to
    vectors is kept (:func:`saturated.radii.moved`)."""

    def frozen(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return tuple(frozen(v) for v in value)
        if isinstance(value, torch.Tensor) or not isinstance(value, Hashable):
            raise TypeError
        return value

    try:
        return target, frozen(args), frozen(sorted(kwargs.items()))
    except TypeError:
        return None


for _op in (aten.reshape.default, aten._unsafe_view.default, aten.transpose.int,
            aten.permute.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
            aten.expand.default, aten.contiguous.default, aten.clone.default, aten.slice.Tensor,
            aten.select.int, aten.index.Tensor, aten.gather.default, aten.index_select.default,
            aten.t.default, aten.mT.default, aten.numpy_T.default, aten.flatten.using_ints,
            aten.alias.default, aten.detach.default, aten.repeat.default,
            aten.repeat_interleave.self_int, *_SPLITS):
    register_rule(_op, _structural(_op))


@_rule(aten.view.default)
def _view(s: Settings, x: Term, shape: Sequence[int]) -> Term:
    """View as reshape: coefficients may be non-contiguous where the model's tensors were not."""
    return x.map(lambda t: t.reshape(shape), _op_key(aten.reshape.default, (shape,), {}))


@_rule(aten.embedding.default)
def _embedding(s: Settings, weight: Term, indices: Any, *args: Any) -> Term:
    """Embedding lookup: rows of the weight, with their degrees."""
    if isinstance(indices, Term):
        raise SaturationError("embedding indices depend on the parameters; expected exact ids")
    return weight.map(lambda t: aten.embedding.default(t, indices, *args))


@_rule(operator.getitem)
def _getitem(s: Settings, items: Sequence[Any], index: int) -> Any:
    """Pick one output of a multi-output op (split, chunk)."""
    return items[index]


def _checked_cast(x: Term, cast: Callable[[Tensor], Tensor]) -> Term:
    if all(cast(a) is a for a, _ in x.parts):  # a cast to the dtype and device it has: the identity
        return x
    out = x.map(cast)
    if not out.lead.is_floating_point():
        raise SaturationError(f"cast of a c-dependent value to {out.lead.dtype} (its limit is not a value)")
    return out


def _caster(target: Any) -> Rule:
    def rule(s: Settings, x: Term, *args: Any, **kwargs: Any) -> Term:
        """Casts and moves act on the coefficients; a cast to an integer or bool type has no limit."""
        return _checked_cast(x, lambda a: target(a, *args, **kwargs))
    return rule


for _op in (aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten._to_copy.default):
    register_rule(_op, _caster(_op), accepts_ties=True)


@_rule(aten.type_as.default, accepts_ties=True)
def _type_as(s: Settings, x: Term, other: Any) -> Term:
    """Cast to another tensor's dtype."""
    dtype = (other.lead if isinstance(other, Term) else other).dtype
    return _checked_cast(x, lambda a: a.to(dtype))


@_rule(aten.dropout.default, accepts_ties=True)
def _dropout(s: Settings, x: Term, p: float, train: bool | None) -> Term:
    """Dropout in eval mode is the identity."""
    if train:
        raise SaturationError("dropout in training mode is random; put the model in eval() mode")
    return x


@_rule(aten._assert_tensor_metadata.default, accepts_ties=True)
def _assert_metadata(s: Settings, *args: Any, **kwargs: Any) -> None:
    """A tracing-time check with no value."""
    return None


@_rule(aten.sym_size.int)
def _sym_size(s: Settings, x: Term, dim: int) -> int:
    """Sizes of a term are those of its coefficients."""
    return int(x.shape[dim])
