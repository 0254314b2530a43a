"""The one table of limit rules: ATen op → function from the inputs' expansions in c to the output's.

A rule receives the :class:`Settings` and the op's arguments, where every c-dependent tensor is a
:class:`~saturated.terms.Term` and everything else (ids, masks, shapes, constants) is exact. Ops
whose tensor arguments are all exact never reach a rule: the interpreter runs them as they are.
:func:`register_rule` adds or replaces a rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from homogeneity.validation import check_integer, check_number, describe
from saturated.errors import SaturationError
from saturated.validation import check_rtol

__all__ = ["RULES", "TIE_AWARE", "UNKNOWN_DEGREE_AWARE", "Rule", "Settings", "register_rule"]


@dataclass(frozen=True)
class Settings:
    """Choices of the limit computation.

    Attributes:
        mask_threshold: exact constants at least this large in magnitude are masking constants
            (±∞ in the limit). Hugging Face uses the dtype minimum (−3.4·10³⁸ in float32), XLNet
            10³⁰; 10⁹ separates them from any real input or bias.
        rtol: tie tolerance of hard attention (None: :func:`saturated.functional.default_rtol`).
        ties: what to do when the maximal score of a growing softmax row stays tied through every
            tracked order (the untracked ones would decide) and the tie matters, i.e. the tied
            positions carry different values (see :mod:`saturated.ties`). ``"raise"`` (default):
            :class:`~saturated.terms.NeedsOrders`; ``"nan"``: the outputs it leaves undetermined
            become NaN and the pass goes on (NaN spreads to everything they reach);
            ``"uniform"`` assumes such scores are equal at every order, and averages.
        orders: how many parts of each expansion are tracked where the leading order alone does
            not decide the limit (it is always tried first).
        exact_ties: whether scores that rounding cannot tell apart are settled exactly: in
            float64, by exact arithmetic on their operands (:mod:`saturated.rounding`), so that
            exact ties go on to lower orders and near-ties are broken. False treats every such
            tie as unresolved where it matters (as ``ties`` says), and a sign that rounding cannot
            tell likewise: :class:`~saturated.saturate.SaturatedModel` recomputes those inputs in
            float64.
        operand_rtol: a relative error assumed for each operand of a decision, on top of the
            rounding of the op that decides (0: operands taken as computed). Widens every bound
            by 2η + η² of the operands' product magnitude.
        carried: count in every decision the rounding error its operands carried in from the ops
            before (back to parameters, inputs, LayerNorm and softmax outputs), not only the
            rounding of the op that decides; an exact step then settles only decisions whose
            operands carry none, and the rest are undetermined. Certifies chains of cancellation
            (a linear layer feeding another), at the cost of far more float64 recomputation.
        max_precision: the highest precision, in bits, at which batch entries that float64 leaves
            undetermined are run again in ball arithmetic (:mod:`saturated.precision`: 128, 256,
            … bits up to this cap); below 128, no such refinement.
    """

    mask_threshold: float = 1e9
    rtol: float | None = None
    ties: str = "raise"
    orders: int = 16
    exact_ties: bool = True
    operand_rtol: float = 0.0
    carried: bool = False
    max_precision: int = 1024

    def __post_init__(self) -> None:
        # Every field checked here, once: a bad value would otherwise give a wrong limit silently.
        if self.ties not in ("raise", "nan", "uniform"):
            raise SaturationError(f"ties must be 'raise', 'nan' or 'uniform', got {self.ties!r}")
        # Frozen: the checked values (a one-element tensor as a number) go in with object.__setattr__.
        object.__setattr__(self, "orders", check_integer(self.orders, "orders", low=1,
                                                         error=SaturationError))
        object.__setattr__(self, "mask_threshold", check_number(
            self.mask_threshold, "mask_threshold", low=0, low_open=True, error=SaturationError))
        object.__setattr__(self, "rtol", check_rtol(self.rtol))
        object.__setattr__(self, "max_precision", check_integer(
            self.max_precision, "max_precision", low=0, high=1 << 20, error=SaturationError))
        object.__setattr__(self, "operand_rtol", check_number(
            self.operand_rtol, "operand_rtol", low=0, high=1, high_open=True, error=SaturationError))
        for flag in ("exact_ties", "carried"):
            if not isinstance(getattr(self, flag), bool):
                raise SaturationError(f"expected {flag} to be True or False, got "
                                      f"{describe(getattr(self, flag))}")


Rule = Callable[..., Any]
RULES: dict[Any, Rule] = {}
"""The rule table: ATen op overload (or Python callable) → rule."""

TIE_AWARE: set[Any] = set()
"""Ops whose rules accept :class:`~saturated.ties.TiedWeights` (the interpreter keeps them from
every other rule)."""

UNKNOWN_DEGREE_AWARE: set[Any] = set()
"""Ops whose rules accept :class:`~saturated.terms.UnknownDegree` (every other rule would read its
NaN as of a known degree, and could drop it under a higher part)."""


def register_rule(target: Any, rule: Rule, accepts_ties: bool = False,
                  accepts_unknown_degree: bool = False) -> None:
    """Add (or replace) the limit rule of ``target``.

    A rule is called as ``rule(settings, *args, **kwargs)`` with the node's arguments, c-dependent
    tensors given as :class:`~saturated.terms.Term`; it returns a Term, an exact value, or a list
    of them. With ``accepts_ties`` it may also receive :class:`~saturated.ties.TiedWeights`, and
    with ``accepts_unknown_degree`` a :class:`~saturated.terms.UnknownDegree`.

    >>> import torch
    >>> register_rule(torch.ops.aten.abs.default, RULES[torch.ops.aten.abs.default])
    """
    RULES[target] = rule
    for accepts, aware in ((accepts_ties, TIE_AWARE), (accepts_unknown_degree, UNKNOWN_DEGREE_AWARE)):
        if accepts:
            aware.add(target)
        else:
            aware.discard(target)


def _rule(*targets: Any, accepts_ties: bool = False, accepts_unknown_degree: bool = False
          ) -> Callable[[Rule], Rule]:
    """Decorator registering one function as the limit rule of each of ``targets``."""
    def decorate(fn: Rule) -> Rule:
        for target in targets:
            register_rule(target, fn, accepts_ties, accepts_unknown_degree)
        return fn
    return decorate
