"""Building blocks shared by the rule families: lifting values to terms, the error bound a
decision reads, and signs certified against rounding."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from saturated.functional import tie_set
from saturated.rounding import Rounding, exact_maximal, exact_sign
from saturated.rules.registry import Settings
from saturated.terms import NeedsOrders, Term, lift, may_hold_nan, scale

__all__ = ["maximal", "part_sign", "settles_exactly", "within_bound"]


def _term(value: Any, s: Settings) -> Term:
    """``value`` as a term: an exact value is lifted (masking constants get degree +∞)."""
    return value if isinstance(value, Term) else lift(value, s.mask_threshold)


def _scaled(x: Any, factor: float, s: Settings) -> Term:
    """``factor``·x as a term (x itself for a factor of 1)."""
    t = _term(x, s)
    return t if factor == 1 else scale(t, factor)


def _decision_bound(rounding: Rounding, dtype: torch.dtype, s: Settings, cheap: bool = False) -> Tensor:
    """The error bound a decision reads: the deciding op's rounding, with ``s.carried`` also what
    its operands carried in."""
    return rounding.bound(dtype, s.operand_rtol, carried=s.carried, cheap=cheap)


def settles_exactly(rounding: Rounding, s: Settings) -> bool:
    """Whether the exact step may settle what ``rounding`` leaves unsure: exact values of the
    operands are known, and (with ``s.carried``) those operands carry no error of their own."""
    return (s.exact_ties and rounding.partials is not None and rounding.index is not None
            and not (s.carried and rounding.carried is not None))


def within_bound(a: Tensor, bound: Tensor) -> Tensor:
    """Where |a| ≤ ``bound``: rounding may hide a's sign, or a zero. A NaN bound (0·∞ in a
    magnitude) reaches every number; a NaN coefficient is within none (it is undetermined, which
    its own NaN says).

    >>> within_bound(torch.tensor([1.0, 5.0, math.nan]), torch.tensor([2.0, math.nan, 1.0])).tolist()
    [True, True, False]
    """
    within = a.abs() <= bound
    if may_hold_nan(bound):
        within |= torch.isnan(bound) & ~torch.isnan(a)
    return within


def part_sign(x: Term, index: int, s: Settings) -> Tensor:
    """The sign of each element of part ``index`` of ``x``, certified against rounding.

    Where |coefficient| exceeds the part's rounding bound (:mod:`saturated.rounding`) the computed
    sign is the exact one. Elsewhere it is decided exactly from the operands (float64 with
    ``exact_ties``: an exact zero leaves the decision to lower parts), or it is NaN, undetermined
    in this precision. A growing part without a known bound has no certified sign: NaN (a value
    known exactly carries a bound of 0, so this is only the output of an op that keeps no bound).
    """
    a, d = x.parts[index]
    sign = torch.sign(a)
    if may_hold_nan(a):  # torch.sign(NaN) is 0: keep undetermined entries undetermined
        sign = torch.where(torch.isnan(a), math.nan, sign)
    if not 0 < d < math.inf:
        return sign
    rounding = x.rounding(d)
    if rounding is None:
        return torch.full_like(sign, math.nan)
    bound = _decision_bound(rounding, a.dtype, s)
    unsure = within_bound(a, bound) & (bound != 0)  # a bound of 0: the computed sign is exact
    if not bool(unsure.any()):
        return sign
    if settles_exactly(rounding, s):
        assert rounding.index is not None and rounding.partials is not None
        at = rounding.index().expand(a.shape)[unsure]
        exact = torch.tensor(exact_sign(rounding.partials(at)), dtype=a.dtype, device=a.device)
        return sign.masked_scatter(unsure, exact)
    return torch.where(unsure, math.nan, sign)


def _undetermined_signs(sign: Tensor, s: Settings, what: str) -> Tensor | None:
    """Where ``sign`` is NaN (rounding hides it): those elements with ``ties="nan"``, otherwise
    :class:`~saturated.terms.NeedsOrders`; None if every sign is known."""
    unknown = torch.isnan(sign)
    if not bool(unknown.any()):
        return None
    if s.ties != "nan":
        raise NeedsOrders(f"the sign of {int(unknown.sum())} elements of the input of {what} is within "
                          "rounding of zero (undetermined in this precision)")
    return unknown


def maximal(x: Term, dim: int, candidates: Tensor, s: Settings, compared: Callable[[float], bool]
            ) -> tuple[Tensor, bool]:
    """``candidates`` narrowed, part by part of ``x`` from the highest degree (those whose degree
    ``compared`` accepts), to the positions along ``dim`` whose coefficient may be maximal:
    lexicographic order, which is the order of the values at every large enough c.

    Each comparison reads the part's rounding bound (:func:`~saturated.functional.tie_set`), and
    in float64 with ``s.exact_ties`` settles what rounding leaves open from exact values
    (:func:`~saturated.rounding.exact_maximal`). Rows with a NaN coefficient among the candidates
    are emptied with ``s.ties == "nan"`` (they raise otherwise).

    Returns:
        The narrowed candidates (broadcasting to ``x``), and whether the candidates left in a row
        are known to be equal at every compared part (False once a part had a bound with no
        exact step behind it: they may be near-ties).
    """
    settled = s.exact_ties
    parts = [(a, d) for a, d in x.parts if compared(d)]
    frozen: Tensor | None = None  # rows whose candidates may differ at a part already compared
    for index, (a, d) in enumerate(parts):
        rounding = x.rounding(d)
        exact_step = rounding is not None and settles_exactly(rounding, s)
        # The exact step keeps exactly the maximal positions of any superset it is given, so
        # before it the cheap bound (a larger one) serves as well as the full one.
        bound = None if rounding is None else _decision_bound(rounding, a.dtype, s, cheap=exact_step)
        narrowed = tie_set(a, dim, candidates, s.rtol, nan_rows_empty=s.ties == "nan", bound=bound)
        if exact_step:
            assert rounding is not None
            narrowed = exact_maximal(narrowed, dim, rounding)
        elif rounding is not None:
            settled = False  # a bound with no exact step behind it: maybe near-ties
        candidates = narrowed if frozen is None else torch.where(frozen, candidates, narrowed)
        if not exact_step and bound is not None and index + 1 < len(parts):
            # Candidates within the bound of each other may differ at this part, which then
            # decides whatever the parts below say: those cannot narrow such a row.
            open_rows = ((bound != 0) & candidates).any(dim, keepdim=True)
            frozen = open_rows if frozen is None else frozen | open_rows
    return candidates, settled
