"""Rules for elementwise nonlinearities: the saturating ones become their limits (paper Lemmas 6
and 8), the ReLU-like ones ReLU."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from saturated.rounding import Rounding
from saturated.rules.common import _undetermined_signs, part_sign
from saturated.rules.registry import Settings, _rule
from saturated.terms import NeedsOrders, Term, make
from saturated.ties import with_nan

__all__: list[str] = []  # the rules register themselves in RULES

aten = torch.ops.aten


def _regimes(x: Term, s: Settings) -> tuple[Tensor, Tensor | None, Tensor | None, bool, float]:
    """Per element: the sign of its leading nonzero part (NaN where rounding hides it), and whether
    that part grows (degree > 0; None: nowhere); the part of degree 0 (None: none), the limit of
    an element that does not grow; whether every element grows; and the order of the error of
    that limit.

    Each part after the first is read only while some element has no nonzero part yet, and the
    elementwise work is kept to what the answer needs: these rules run on an MLP's widest
    activations, where every pass over them counts.

    Raises NeedsOrders where an element that does not grow (or has no known nonzero part) still
    carries an unknown part that does not vanish.
    """
    sign: Tensor | None = None
    growing: Tensor | None = None
    value: Tensor | None = None
    decided = False
    for index, (a, d) in enumerate(x.parts):
        if d == 0:
            value = a
        if decided:
            continue
        # A computed 0 is a decision too (rounding or underflow may have produced it): only the
        # certified sign says whether the element has this part.
        found = part_sign(x, index, s)  # 0 where the coefficient is rounding of an exact 0
        if sign is None:  # the first part: its sign wherever it is not 0 (NaN, undetermined, counts)
            sign, new = found, (found != 0 if d > 0 else None)
        else:
            new = (sign == 0) & (found != 0)
            sign = torch.where(new, found, sign)
        if d > 0 and new is not None:
            growing = new if growing is None else growing | new
        decided = index == len(x.parts) - 1 or not bool((sign == 0).any())
    assert sign is not None, "a term without parts"
    everywhere = growing is not None and bool(growing.all())
    error = max([d for _, d in x.parts if d < 0] + [x.floor])
    if x.floor >= 0 and not everywhere:
        still = math.prod(x.shape) if growing is None else int((~torch.broadcast_to(growing, x.shape)).sum())
        raise NeedsOrders(
            f"{still} elements have no known growing part and an unknown part of order c^{x.floor:g}"
        )
    return sign, growing, value, everywhere, (-math.inf if everywhere else error)


def _fixed_limits(x: Term, growing: Tensor | None, value: Tensor | None, grown: Tensor | float,
                  at: Callable[[Tensor], Tensor]) -> Tensor:
    """``grown`` where an element grows, ``at`` of its part of degree 0 (or of 0) elsewhere, of
    ``x``'s shape."""
    fixed = at(torch.zeros_like(x.lead) if value is None else value)
    return torch.where(growing, grown, fixed) if growing is not None else \
        torch.broadcast_to(fixed, x.shape).clone()


def _leading_sign(x: Term, s: Settings) -> Tensor:
    """Per element, the sign of its first nonzero part (0 if every known part is zero). With one
    part the computed sign serves (ReLU and |·| are continuous there); with more, which part
    leads is a decision, certified by :func:`part_sign`."""
    if len(x.parts) == 1:
        return torch.sign(x.lead)
    sign = part_sign(x, 0, s)
    for index in range(1, len(x.parts)):
        sign = torch.where(sign == 0, part_sign(x, index, s), sign)
    return sign


@_rule(aten.relu.default)
def _relu(s: Settings, x: Term) -> Term:
    """ReLU is positively 1-homogeneous: relu(v) = v where v's leading part is positive, else 0."""
    sign = _leading_sign(x, s)
    keep = sign > 0
    out = Term(tuple((torch.where(keep, a, 0), d) for a, d in x.parts), x.floor,
               _kept_roundings(x, None if len(x.parts) == 1 else keep))
    unknown = _undetermined_signs(sign, s, "relu")
    return out if unknown is None else with_nan(out, unknown)


@_rule(aten.abs.default)
def _abs(s: Settings, x: Term) -> Term:
    """|v| = v·sign(v), the sign being that of v's first nonzero part."""
    sign = _leading_sign(x, s)
    _undetermined_signs(sign, s, "abs")
    return Term(tuple((a * sign, d) for a, d in x.parts), x.floor)


def _kept_roundings(x: Term, keep: Tensor | None = None, replaced: float | None = None
                    ) -> tuple[Rounding, ...]:
    """The parts' rounding bounds (with what they carried in), kept by an op that keeps or zeroes
    each element. With one part (``keep`` None), ReLU is 1-Lipschitz (|relu(ŝ) − relu(s)| ≤
    |ŝ − s|), and exact values are not kept. With more, each element is kept (``keep``) or zeroed
    on its certified sign, so a kept element's error and exact value are its input's, and a zeroed
    one has neither (:meth:`Rounding.kept`). ``replaced``: the degree of a part the op replaces at
    some elements by another function's value (GELU's for fixed inputs), whose bound does not hold
    there."""
    return tuple(r.inexact() if keep is None else r.kept(keep) for r in x.roundings if r.degree != replaced)


def _relu_like(x: Term, at: Callable[[Tensor], Tensor], s: Settings, what: str) -> Term:
    """GELU and SiLU: relu(v) for growing v (they differ by e^(−Θ(c))), the function's value for
    fixed ones."""
    if len(x.parts) == 1 and 0 < x.degree < math.inf:
        # One growing part: relu of it. Where its coefficient is 0 the element is O(c^floor), and
        # so is its image, since |GELU(y)| and |SiLU(y)| are at most |y|. Continuous in the
        # coefficient, so a sign that rounding hides changes the result by no more than rounding.
        return Term(((torch.relu(x.lead), x.degree),), x.floor, _kept_roundings(x))
    sign, growing, value, everywhere, error = _regimes(x, s)
    keep = torch.zeros(x.shape, dtype=torch.bool, device=x.lead.device) if growing is None \
        else growing & (sign > 0)
    parts = [(torch.where(keep, a, 0), d) for a, d in x.parts]
    parts.append((torch.zeros(x.shape, dtype=x.lead.dtype, device=x.lead.device) if everywhere
                  else _fixed_limits(x, growing, value, 0.0, at), 0.0))
    out = make(parts, max(error, x.floor if bool(keep.any()) else -math.inf), s.orders)
    out = out.with_roundings(_kept_roundings(x, keep, None if everywhere else 0.0))
    unknown = _undetermined_signs(sign, s, what)
    return out if unknown is None else with_nan(out, unknown)


@_rule(aten.gelu.default)
def _gelu(s: Settings, x: Term, approximate: str = "none") -> Term:
    """GELU → ReLU for growing inputs; GELU(lim x) otherwise."""
    return _relu_like(x, lambda a: F.gelu(a, approximate=approximate), s, "gelu")


@_rule(aten.silu.default)
def _silu(s: Settings, x: Term) -> Term:
    """SiLU → ReLU for growing inputs; SiLU(lim x) otherwise."""
    return _relu_like(x, F.silu, s, "silu")


def _squashing(x: Term, grown: Callable[[Tensor], Tensor], at: Callable[[Tensor], Tensor],
               s: Settings, what: str) -> Term:
    """sigmoid and tanh: a constant set by the sign for growing inputs, f(lim x) otherwise."""
    sign, growing, value, everywhere, error = _regimes(x, s)
    limit = grown(sign)
    if everywhere:  # no fixed element: the constants alone, of the input's shape
        limit = limit if limit.shape == x.shape else torch.broadcast_to(limit, x.shape).clone()
    else:
        limit = _fixed_limits(x, growing, value, limit, at)
    out = Term(((limit, 0.0),), error)
    unknown = _undetermined_signs(sign, s, what)
    return out if unknown is None else with_nan(out, unknown)


@_rule(aten.sigmoid.default)
def _sigmoid(s: Settings, x: Term) -> Term:
    """sigmoid → step for growing inputs (Lemma 6): the error e^(−Θ(c)) is below every order."""
    return _squashing(x, lambda sign: (sign > 0).to(sign.dtype), torch.sigmoid, s, "sigmoid")


@_rule(aten.tanh.default)
def _tanh(s: Settings, x: Term) -> Term:
    """tanh → sign for growing inputs (Lemma 8)."""
    return _squashing(x, lambda sign: sign, torch.tanh, s, "tanh")
