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


def _regimes(x: Term, s: Settings) -> tuple[Tensor, Tensor, Tensor, float]:
    """Per element: the sign of its leading nonzero part (NaN where rounding hides it), whether
    that part grows (degree > 0), and its limit if it does not grow; plus the order of the error
    of that limit.

    Raises NeedsOrders where an element that does not grow (or has no known nonzero part) still
    carries an unknown part that does not vanish.
    """
    sign = torch.zeros_like(x.lead)
    growing = torch.zeros(x.shape, dtype=torch.bool, device=x.lead.device)
    value = torch.zeros_like(x.lead)
    undecided = True
    for index, (a, d) in enumerate(x.parts):
        if d == 0:
            value = a
        if undecided:
            # A computed 0 is a decision too (rounding or underflow may have produced it): only
            # the certified sign says whether the element has this part.
            found = part_sign(x, index, s)  # 0 where the coefficient is rounding of an exact 0
            new = (sign == 0) & (found != 0)  # NaN (undetermined) counts as found
            sign = torch.where(new, found, sign)
            if d > 0:
                growing |= new & (found != 0)
            undecided = bool((sign == 0).any())
    error = max([d for _, d in x.parts if d < 0] + [x.floor])
    if x.floor >= 0 and not bool(growing.all()):
        raise NeedsOrders(
            f"{int((~growing).sum())} elements have no known growing part and an unknown part of "
            f"order c^{x.floor:g}"
        )
    return sign, growing, value, (-math.inf if bool(growing.all()) else error)


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
    sign, growing, value, error = _regimes(x, s)
    keep = growing & (sign > 0)
    parts = [(torch.where(keep, a, 0), d) for a, d in x.parts]
    parts.append((torch.where(growing, 0, at(value)), 0.0))
    out = make(parts, max(error, x.floor if bool(keep.any()) else -math.inf), s.orders)
    out = out.with_roundings(_kept_roundings(x, keep, None if bool(growing.all()) else 0.0))
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
    sign, growing, value, error = _regimes(x, s)
    out = Term(((torch.where(growing, grown(sign), at(value)), 0.0),), error)
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
