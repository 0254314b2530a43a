"""Rules for selections (where, masked_fill, cat): each element keeps its own expansion and bound."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from saturated.errors import SaturationError
from saturated.radii import elementwise
from saturated.rounding import Rounding
from saturated.rules.common import _term
from saturated.rules.registry import Settings, _rule
from saturated.terms import Term, computed_degrees, make

__all__: list[str] = []  # the rules register themselves in RULES

aten = torch.ops.aten


def _by_degree(x: Term) -> dict[float, Tensor]:
    return {d: a for a, d in x.parts}


def _select(cond: Any, x: Term, y: Term, s: Settings) -> Term:
    if isinstance(cond, Term):
        raise SaturationError("a condition that depends on the parameters; expected an exact mask")
    xs, ys = _by_degree(x), _by_degree(y)
    # Tensors set the dtype, not numbers lifted to 0-d tensors (a masked_fill value of -inf).
    dtypes = [a.dtype for a, _ in (*x.parts, *y.parts) if a.dim()]
    dtype = functools.reduce(torch.promote_types, dtypes) if dtypes else None
    parts = [(torch.where(cond, xs.get(d, 0.0), ys.get(d, 0.0)).to(dtype), d) for d in {*xs, *ys}]
    selected = make(parts, max(x.floor, y.floor), s.orders, computed_degrees([x, y], summed=False))
    return selected.with_roundings(_joined_roundings(
        [x, y], lambda pieces: torch.where(cond, pieces[0], pieces[1])))


@_rule(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def _where(s: Settings, cond: Any, x: Any, y: Any) -> Term:
    """where(cond, x, y) with an exact condition: elements keep their own expansions."""
    return _select(cond, _term(x, s), _term(y, s), s)


@_rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(s: Settings, x: Any, mask: Any, value: Any) -> Term:
    """masked_fill(x, mask, v) = where(mask, v, x)."""
    return _select(mask, _term(value, s), _term(x, s), s)


@_rule(aten.cat.default)
def _cat(s: Settings, tensors: Sequence[Any], dim: int = 0) -> Term:
    """Concatenation: elements keep their own expansions (missing degrees are zero)."""
    return _joined_parts([_term(t, s) for t in tensors], lambda pieces: torch.cat(pieces, dim), s)


def _joined_parts(terms: Sequence[Term], join: Callable[[list[Tensor]], Tensor], s: Settings) -> Term:
    """A value whose elements are taken from ``terms`` (``join`` puts their tensors together, one
    per term): each element keeps its own expansion (a term without a part of some degree gives
    zeros there) and its own rounding bound."""
    tables = [_by_degree(t) for t in terms]
    degrees = {d for table in tables for d in table}
    parts = [(join([table.get(d, torch.zeros_like(t.lead)) for t, table in zip(terms, tables)]), d)
             for d in degrees]
    joined = make(parts, max(t.floor for t in terms), s.orders, computed_degrees(terms, summed=False))
    return joined.with_roundings(_joined_roundings(terms, join))


def _joined_roundings(terms: Sequence[Term], join: Callable[[list[Tensor]], Tensor]) -> list[Rounding | None]:
    """The bounds of a value whose elements are taken from ``terms`` (``join`` puts their
    per-element tensors together, as the op did the coefficients): per degree, each element keeps
    its own bound, and a term without that part contributes exact zeros. Unknown if any term has
    the part without a bound."""
    out: list[Rounding | None] = []
    for degree in {d for t in terms for _, d in t.parts if math.isfinite(d)}:
        own = [(t, t.rounding(degree)) for t in terms]
        if any(bound is None and any(d == degree for _, d in t.parts) for t, bound in own):
            out.append(None)
        else:
            out.append(_joined(own, join, degree))
    return out


def _joined(own: list[tuple[Term, Rounding | None]], join: Callable[[list[Tensor]], Tensor],
            degree: float) -> Rounding:
    """One degree's bound for :func:`_joined_roundings`."""
    def joined(pick: Callable[[Rounding], Tensor | None]) -> Tensor:
        pieces = [None if bound is None else pick(bound) for _, bound in own]
        return join([torch.zeros(t.shape, dtype=t.lead.dtype, device=t.lead.device)
                     if piece is None else piece.expand(t.shape) for (t, _), piece in zip(own, pieces)])

    def carried(dtype: torch.dtype, rtol: float) -> Tensor:
        return joined(lambda bound: None if bound.carried is None
                      else elementwise(bound.carried(dtype, rtol)))

    length = max(bound.length for _, bound in own if bound is not None)
    index, partials = _joined_exact_values(own, join)
    factor = next((bound.factor for _, bound in own if bound is not None), 1.0)
    return Rounding(degree, lambda: joined(lambda bound: bound.magnitude()), length, index, partials,
                    cheap=lambda: joined(lambda bound: (bound.cheap or bound.magnitude)()), carried=carried,
                    factor=factor)


def _joined_exact_values(own: list[tuple[Term, Rounding | None]], join: Callable[[list[Tensor]], Tensor]
                         ) -> tuple[Callable[[], Tensor] | None, Any]:
    """The exact values of a selection or concatenation whose computed elements all come from one
    op's output (pieces of the same scores, or scores beside a ``masked_fill`` with −∞): that op's
    exact values, read at each element's place in its output. Filled elements must be masking
    constants, which are never candidates. None otherwise."""
    sources = [bound for _, bound in own if bound is not None]
    fills = [t for t, bound in own if bound is None]
    partials = sources[0].partials if sources else None
    if partials is None or any(b.partials is not partials or b.index is None or b.factor != sources[0].factor
                               for b in sources) or not all(
            any(d == math.inf and bool((a != 0).all()) for a, d in t.parts) for t in fills):
        return None, None

    def index() -> Tensor:
        pieces = [torch.zeros(t.shape, dtype=torch.long, device=t.lead.device) if bound is None
                  else bound.index().expand(t.shape)  # type: ignore[misc]
                  for t, bound in own]
        return join(pieces)

    return index, partials
