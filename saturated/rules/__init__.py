"""Limit rules: one function per ATen op, from the inputs' expansions in c to the output's.

A rule receives the :class:`Settings` and the op's arguments, where every c-dependent tensor is a
:class:`~saturated.terms.Term` and everything else (ids, masks, shapes, constants) is exact. Ops
whose tensor arguments are all exact never reach a rule: the interpreter runs them as they are.
:func:`register_rule` adds or replaces a rule.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from saturated.errors import SaturationError
from saturated.functional import tie_set
from saturated.rounding import Einsum, Rounding, exact_maximal, exact_sign
from saturated.terms import (
    NeedsOrders,
    Term,
    add,
    bilinear,
    computed_degrees,
    exp_series,
    lift,
    make,
    may_hold_nan,
    mul,
    power,
    reduce,
    scale,
)
from saturated.ties import TiedWeights, contract, einsum_contracts_rows, untie, with_nan

__all__ = ["RULES", "TIE_AWARE", "Rule", "Settings", "register_rule"]

aten = torch.ops.aten


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
    """

    mask_threshold: float = 1e9
    rtol: float | None = None
    ties: str = "raise"
    orders: int = 16
    exact_ties: bool = True
    operand_rtol: float = 0.0
    carried: bool = False

    def __post_init__(self) -> None:
        if self.ties not in ("raise", "nan", "uniform"):
            raise SaturationError(f"ties must be 'raise', 'nan' or 'uniform', got {self.ties!r}")
        if self.orders < 1:
            raise SaturationError(f"orders must be at least 1, got {self.orders!r}")
        if not self.mask_threshold > 0:
            raise SaturationError(f"mask_threshold must be positive, got {self.mask_threshold!r}")
        if not 0 <= self.operand_rtol < 1:
            raise SaturationError(f"operand_rtol must be in [0, 1), got {self.operand_rtol!r}")


Rule = Callable[..., Any]
RULES: dict[Any, Rule] = {}
"""The rule table: ATen op overload (or Python callable) → rule."""

TIE_AWARE: set[Any] = set()
"""Ops whose rules accept :class:`~saturated.ties.TiedWeights` (the interpreter keeps them from
every other rule)."""


def register_rule(target: Any, rule: Rule, accepts_ties: bool = False) -> None:
    """Add (or replace) the limit rule of ``target``.

    A rule is called as ``rule(settings, *args, **kwargs)`` with the node's arguments, c-dependent
    tensors given as :class:`~saturated.terms.Term`; it returns a Term, an exact value, or a list
    of them. With ``accepts_ties`` it may also receive :class:`~saturated.ties.TiedWeights`.

    >>> register_rule(torch.ops.aten.abs.default, RULES[torch.ops.aten.abs.default])
    """
    RULES[target] = rule
    if accepts_ties:
        TIE_AWARE.add(target)
    else:
        TIE_AWARE.discard(target)


def _term(value: Any, s: Settings) -> Term:
    return value if isinstance(value, Term) else lift(value, s.mask_threshold)


def _rule(*targets: Any, accepts_ties: bool = False) -> Callable[[Rule], Rule]:
    def decorate(fn: Rule) -> Rule:
        for target in targets:
            register_rule(target, fn, accepts_ties)
        return fn
    return decorate


# --- Shapes, indexing and casts: the op acts on every part alike. -------------------------------

_SPLITS = {aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int}


def _structural(target: Any) -> Rule:
    def rule(s: Settings, x: Any, *args: Any, **kwargs: Any) -> Any:
        """Shape and indexing ops move elements without changing their values or degrees."""
        t = _term(x, s)
        if target not in _SPLITS:
            return t.map(lambda v: target(v, *args, **kwargs))
        pieces = [target(a, *args, **kwargs) for a, _ in t.parts]
        shape = t.shape

        def piece_of(i: int) -> Callable[[Tensor], Tensor]:
            return lambda v: target(v.expand(shape), *args, **kwargs)[i]

        return [Term(tuple((piece[i], d) for piece, (_, d) in zip(pieces, t.parts)), t.floor,
                     tuple(r.map(piece_of(i)) for r in t.roundings))
                for i in range(len(pieces[0]))]
    return rule


for _op in (aten.reshape.default, aten._unsafe_view.default, aten.transpose.int,
            aten.permute.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
            aten.expand.default, aten.contiguous.default, aten.clone.default, aten.slice.Tensor,
            aten.select.int, aten.index.Tensor, aten.gather.default, aten.index_select.default,
            aten.t.default, aten.mT.default, aten.numpy_T.default, aten.flatten.using_ints,
            aten.alias.default, aten.detach.default, aten.repeat.default, *_SPLITS):
    register_rule(_op, _structural(_op))


@_rule(aten.view.default)
def _view(s: Settings, x: Term, shape: Sequence[int]) -> Term:
    """View as reshape: coefficients may be non-contiguous where the model's tensors were not."""
    return x.map(lambda t: t.reshape(shape))


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


# --- Sums and products. ------------------------------------------------------------------------

def _scaled(x: Any, factor: float, s: Settings) -> Term:
    t = _term(x, s)
    return t if factor == 1 else scale(t, factor)


@_rule(aten.add.Tensor, aten.add.Scalar, aten.add_.Tensor)
def _add(s: Settings, x: Any, y: Any, alpha: float = 1) -> Term:
    """x + α·y: parts of equal degree add, the highest lead (paper Table 1, Sum)."""
    return add(_term(x, s), _scaled(y, alpha, s), s.orders)


@_rule(aten.sub.Tensor, aten.sub.Scalar)
def _sub(s: Settings, x: Any, y: Any, alpha: float = 1) -> Term:
    """x − α·y."""
    return add(_term(x, s), _scaled(y, -alpha, s), s.orders)


@_rule(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(s: Settings, x: Any, other: Any, alpha: float = 1) -> Term:
    """other − α·x."""
    return add(_term(other, s), _scaled(x, -alpha, s), s.orders)


@_rule(aten.neg.default)
def _neg(s: Settings, x: Term) -> Term:
    """−x."""
    return scale(x, -1.0)


@_rule(aten.mul.Tensor, aten.mul.Scalar)
def _mul(s: Settings, x: Any, y: Any) -> Term:
    """x·y: degrees add (paper Table 1, Product). A constant factor keeps rounding bounds."""
    if isinstance(x, Term) and _is_constant(y):
        return scale(x, float(y))
    if isinstance(y, Term) and _is_constant(x):
        return scale(y, float(x))
    return mul(_term(x, s), _term(y, s), s.orders)


def _is_constant(value: Any) -> bool:
    """A number, or an exact one-element tensor (a scale factor such as GPT-2's √d)."""
    return isinstance(value, (int, float)) or (
        isinstance(value, Tensor) and value.numel() == 1 and value.dim() == 0)


@_rule(aten.div.Tensor, aten.div.Scalar)
def _div(s: Settings, x: Any, y: Any) -> Term:
    """x / y = x · y⁻¹."""
    if isinstance(x, Term) and _is_constant(y) and float(y) != 0:
        return scale(x, 1 / float(y))  # one more rounding than x / y: the bound covers both
    inverse = power(y, -1.0, s.orders) if isinstance(y, Term) else _term(1 / y, s)
    return mul(_term(x, s), inverse, s.orders)


@_rule(aten.pow.Tensor_Scalar)
def _pow(s: Settings, x: Term, exponent: float) -> Term:
    """xᵖ: the degree multiplies by p (binomial series below the leading part)."""
    return power(x, float(exponent), s.orders)


@_rule(aten.rsqrt.default)
def _rsqrt(s: Settings, x: Term) -> Term:
    """x^(−1/2), as in RMSNorm."""
    return power(x, -0.5, s.orders)


@_rule(aten.sqrt.default)
def _sqrt(s: Settings, x: Term) -> Term:
    """x^(1/2)."""
    return power(x, 0.5, s.orders)


@_rule(aten.reciprocal.default)
def _reciprocal(s: Settings, x: Term) -> Term:
    """1 / x."""
    return power(x, -1.0, s.orders)


def _dims(x: Term, dim: Any) -> list[int]:
    if dim is None:
        return list(range(x.lead.dim()))
    return [int(d) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]


@_rule(aten.mean.dim)
def _mean(s: Settings, x: Term, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Term:
    """Mean over dimensions, part by part."""
    return reduce(x, _dims(x, dim), keepdim, mean=True)


@_rule(aten.sum.dim_IntList)
def _sum(s: Settings, x: Term, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Term:
    """Sum over dimensions, part by part."""
    return reduce(x, _dims(x, dim), keepdim, mean=False)


@_rule(aten.matmul.default, aten.mm.default, aten.bmm.default, accepts_ties=True)
def _matmul(s: Settings, x: Any, y: Any) -> Term:
    """Matrix product: bilinear, degrees add (paper Table 1, Linear). Tied attention weights on the
    left, contracted over their softmax dimension, are checked by :func:`saturated.ties.contract`."""
    mark = s.ties == "nan"
    if isinstance(x, TiedWeights) and x.dim == x.lead.dim() - 1 and not isinstance(y, TiedWeights):
        return contract(torch.matmul, x, _term(y, s), s.orders, s.rtol, mark, stack_left=True)
    x, y = (untie(v, mark, "a matrix product not over the softmax dimension") for v in (x, y))
    return bilinear(torch.matmul, _term(x, s), _term(y, s), s.orders, stack_left=True)


@_rule(aten.linear.default)
def _linear(s: Settings, x: Any, weight: Any, bias: Any = None) -> Term:
    """x Wᵀ + b: the product has degree deg(x) + 1, then the sum rule decides whether b counts."""
    out = bilinear(F.linear, _term(x, s), _term(weight, s), s.orders, stack_left=True)
    return out if bias is None else add(out, _term(bias, s), s.orders)


@_rule(aten.addmm.default)
def _addmm(s: Settings, bias: Any, x: Any, y: Any, beta: float = 1, alpha: float = 1) -> Term:
    """β·b + α·x y (GPT-2's Conv1D)."""
    product = bilinear(torch.matmul, _term(x, s), _term(y, s), s.orders, stack_left=True)
    return add(_scaled(bias, beta, s), _scaled(product, alpha, s), s.orders)


@_rule(aten.einsum.default, accepts_ties=True)
def _einsum(s: Settings, equation: str, operands: Sequence[Any], path: Any = None) -> Term:
    """Einsum of two operands is bilinear; of one, a relabelling. Tied attention weights as the
    first of two operands, summed over their softmax dimension, are checked as for matmul."""
    first = operands[0]
    if (len(operands) == 2 and isinstance(first, TiedWeights) and not isinstance(operands[1], TiedWeights)
            and einsum_contracts_rows(equation, first.dim)):
        return contract(lambda a, b: torch.einsum(equation, a, b), first, _term(operands[1], s),
                        s.orders, s.rtol, s.ties == "nan")
    operands = [untie(v, s.ties == "nan", f"einsum '{equation}'") for v in operands]
    if len(operands) == 1:
        return _term(operands[0], s).map(lambda t: torch.einsum(equation, t))
    if len(operands) != 2:
        raise SaturationError(f"einsum with {len(operands)} operands; expected 1 or 2")
    x, y = _term(operands[0], s), _term(operands[1], s)
    return bilinear(Einsum(equation), x, y, s.orders, length=_einsum_length(equation, x.shape, y.shape))


def _einsum_length(equation: str, *shapes: torch.Size) -> int | None:
    """How many products an einsum of two operands sums per output element: the product of the
    sizes of the indices it sums out (None for equations with an ellipsis or no output).

    >>> _einsum_length("bnid,bnjd->bnij", torch.Size([2, 3, 4, 5]), torch.Size([2, 3, 6, 5]))
    5
    """
    equation = equation.replace(" ", "")
    if "..." in equation or "->" not in equation:
        return None
    inputs, output = equation.split("->")
    sizes: dict[str, int] = {}
    for letters, shape in zip(inputs.split(","), shapes):
        sizes.update({letter: max(sizes.get(letter, 1), int(size)) for letter, size in zip(letters, shape)})
    return math.prod(size for letter, size in sizes.items() if letter not in output)


# --- Selections. ---------------------------------------------------------------------------------

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
    terms = [_term(t, s) for t in tensors]
    tables = [_by_degree(t) for t in terms]
    degrees = {d for table in tables for d in table}
    parts = [(torch.cat([table.get(d, torch.zeros_like(t.lead)) for t, table in zip(terms, tables)],
                        dim), d) for d in degrees]
    joined = make(parts, max(t.floor for t in terms), s.orders, computed_degrees(terms, summed=False))
    return joined.with_roundings(_joined_roundings(terms, lambda pieces: torch.cat(pieces, dim)))


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
        return joined(lambda bound: None if bound.carried is None else bound.carried(dtype, rtol))

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


# --- Activations: the saturating ones become their limits (paper Lemmas 6–8). ------------------

def _decision_bound(rounding: Rounding, dtype: torch.dtype, s: Settings, cheap: bool = False) -> Tensor:
    """The error bound a decision reads: the deciding op's rounding, with ``s.carried`` also what
    its operands carried in."""
    return rounding.bound(dtype, s.operand_rtol, carried=s.carried, cheap=cheap)


def settles_exactly(rounding: Rounding, s: Settings) -> bool:
    """Whether the exact step may settle what ``rounding`` leaves unsure: exact values of the
    operands are known, and (with ``s.carried``) those operands carry no error of their own."""
    return (s.exact_ties and rounding.partials is not None and rounding.index is not None
            and not (s.carried and rounding.carried is not None))


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
    unsure = (a.abs() <= bound) & (bound > 0)
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
    out = Term(tuple((torch.where(sign > 0, a, 0), d) for a, d in x.parts), x.floor,
               _continuous_rounding(x) if len(x.parts) == 1 else ())
    unknown = _undetermined_signs(sign, s, "relu")
    return out if unknown is None else with_nan(out, unknown)


@_rule(aten.abs.default)
def _abs(s: Settings, x: Term) -> Term:
    """|v| = v·sign(v), the sign being that of v's first nonzero part."""
    sign = _leading_sign(x, s)
    _undetermined_signs(sign, s, "abs")
    return Term(tuple((a * sign, d) for a, d in x.parts), x.floor)


def _continuous_rounding(x: Term) -> tuple[Rounding, ...]:
    """The lead's rounding bound, kept by a 1-Lipschitz op such as ReLU (|relu(ŝ) − relu(s)| ≤
    |ŝ − s|); exact values are not."""
    rounding = x.rounding(x.degree)
    return () if rounding is None else (rounding.inexact(),)


def _relu_like(x: Term, at: Callable[[Tensor], Tensor], s: Settings, what: str) -> Term:
    """GELU and SiLU: relu(v) for growing v (they differ by e^(−Θ(c))), the function's value for
    fixed ones."""
    if len(x.parts) == 1 and 0 < x.degree < math.inf:
        # One growing part: relu of it. Where its coefficient is 0 the element is O(c^floor), and
        # so is its image, since |GELU(y)| and |SiLU(y)| are at most |y|. Continuous in the
        # coefficient, so a sign that rounding hides changes the result by no more than rounding.
        return Term(((torch.relu(x.lead), x.degree),), x.floor, _continuous_rounding(x))
    sign, growing, value, error = _regimes(x, s)
    keep = growing & (sign > 0)
    parts = [(torch.where(keep, a, 0), d) for a, d in x.parts]
    parts.append((torch.where(growing, 0, at(value)), 0.0))
    out = make(parts, max(error, x.floor if bool(keep.any()) else -math.inf), s.orders)
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


@_rule(aten.softmax.int, aten._softmax.default)
def _softmax(s: Settings, x: Term, dim: int, dtype_or_half: Any = None) -> Term:
    """Softmax → hard attention, comparing positions part by part (Lemma 7, lexicographically).

    Masking constants (the part of degree +∞, negative) exclude positions. Among the rest, each
    growing part in turn keeps only the positions with maximal coefficient (within the tie
    tolerance); the others get weight e^(−Θ(c)), zero at every order. The survivors share the
    weight by the softmax of their bounded parts, expanded as a series. Rows still tied while an
    unknown part of order ≥ 1 remains give :class:`~saturated.ties.TiedWeights`, which only a
    product with values that agree on the tie can use (``ties="uniform"`` averages them instead).
    A fully masked row is all zeros; with ``ties="nan"``, a row with NaN scores is all NaN.
    """
    dim = dim % x.lead.dim()
    # Broadcasts to the scores, so that a mask shared by heads or rows is compared only once.
    candidates = torch.ones((1,) * x.lead.dim(), dtype=torch.bool, device=x.lead.device)
    for a, d in x.parts:
        if d == math.inf:
            a = _unexpanded(a)
            if bool((a > 0).any()):
                raise SaturationError("softmax input contains +∞ (a huge positive constant)")
            candidates = candidates & (a == 0)
    allowed = candidates.any(dim, keepdim=True)
    marking = s.ties == "nan"
    settled = s.exact_ties  # whether the candidates left are exact ties
    for a, d in x.parts:
        if 0 < d < math.inf:
            rounding = x.rounding(d)
            bound = None if rounding is None else _decision_bound(rounding, a.dtype, s)
            candidates = tie_set(a, dim, candidates, s.rtol, nan_rows_empty=marking, bound=bound)
            if rounding is not None and settles_exactly(rounding, s):
                candidates = exact_maximal(candidates, dim, rounding)
            elif rounding is not None:
                settled = False  # a bound with no exact step behind it: maybe near-ties
    candidates = candidates.expand(x.shape)
    count = candidates.sum(dim=dim, keepdim=True)
    weights = _hard_attention(x, dim, candidates, count, s, settled)
    if not marking:
        return weights
    poisoned = allowed & (count == 0)  # emptied by a NaN score
    if not bool(poisoned.any()):
        return weights
    return with_nan(weights, poisoned)


def _unexpanded(a: Tensor) -> Tensor:
    """``a`` without the dimensions it was broadcast along (stride 0): the same values, fewer of
    them; it still broadcasts back to the full shape."""
    for index, (size, stride) in enumerate(zip(a.shape, a.stride())):
        if stride == 0 and size > 1:
            a = a.narrow(index, 0, 1)
    return a


def _hard_attention(x: Term, dim: int, candidates: Tensor, count: Tensor, s: Settings,
                    settled: bool) -> Term:
    """The softmax's weights once the growing parts have picked each row's ``candidates`` (their
    ``count`` per row); ``settled``: the candidates of a row are known to tie exactly."""
    weights = torch.where(candidates, 1 / count.clamp_min(1).to(x.lead.dtype), 0.0)  # one pass
    tied_rows = bool((count > 1).any())
    if not tied_rows or x.floor >= 0 or not settled:
        # One winner per row, or ties the tracked orders cannot break (or that may not be exact):
        # hard attention, exact up to e^(−Θ(c)) where it is decided.
        if s.ties == "uniform" or not tied_rows:
            return Term(((weights, 0.0),))
        reason = ("hard attention tie: positions share the maximal score "
                  + (f"at every tracked order; the untracked part of order c^{x.floor:g} decides "
                     "between them" if x.floor >= 0 else
                     f"within the rounding bound of {x.lead.dtype}, which cannot tell a near-tie "
                     "from a tie"))
        return TiedWeights(((weights, 0.0),), candidates=candidates, count=count, dim=dim, reason=reason)
    # Only the tied rows need the series; every other row is hard attention.
    def rows_of(a: Tensor) -> Tensor:
        return a.movedim(dim, -1).reshape(-1, a.shape[dim])

    tied = torch.nonzero(rows_of(count.expand_as(x.lead))[:, 0] > 1).squeeze(-1)
    bounded = [(a, d) for a, d in x.parts if d <= 0]
    shared = _shared_weights(Term(tuple((rows_of(a)[tied], d) for a, d in bounded)
                                  or ((torch.zeros_like(rows_of(x.lead)[tied]), -math.inf),), x.floor),
                             rows_of(candidates)[tied], s.orders)
    hard = rows_of(weights)  # weights is not used again: zeroing its tied rows in place is safe
    hard[tied] = 0
    parts = [(hard, 0.0)]
    for w, d in shared.parts:
        full = torch.zeros_like(hard)
        full[tied] = w.to(hard.dtype)
        parts.append((full, d))
    moved = x.lead.movedim(dim, -1).shape
    term = make(parts, shared.floor, s.orders)
    return term.map(lambda a: a.reshape(moved).movedim(-1, dim))


def _shared_weights(bounded: Term, candidates: Tensor, orders: int) -> Term:
    """softmax over each row's candidates of its bounded parts (degree ≤ 0), as a series in c.

    With s = s₀ + δ (δ → 0): exp(s₀ − max s₀)·exp(δ), expanded, divided by its row sum.
    """
    fixed = next((a for a, d in bounded.parts if d == 0), torch.zeros_like(bounded.lead))
    fixed = torch.where(candidates, fixed, -math.inf)
    scores = torch.exp(fixed - fixed.amax(dim=-1, keepdim=True))
    vanishing = Term(tuple((torch.where(candidates, a, 0), d) for a, d in bounded.parts if d < 0)
                     or ((torch.zeros_like(scores), -math.inf),), bounded.floor)
    numerators = mul(Term(((scores, 0.0),)), exp_series(vanishing, orders), orders)
    return mul(numerators, power(reduce(numerators, [-1], True, mean=False), -1.0, orders), orders)


@_rule(aten.layer_norm.default)
def _layer_norm(s: Settings, x: Any, shape: Sequence[int], weight: Any = None, bias: Any = None,
                eps: float = 1e-5, cudnn: bool = True) -> Term:
    """LayerNorm (x − μ)·(σ² + ε)^(−1/2), then the affine map (paper Table 1, LayerNorm k → 0).

    Expanded with the sum, product and power rules: for an input of degree d > 0, ε is a part of
    degree 0 against σ²'s 2d, so it only enters c^(−2d) below the leading order.
    """
    t = _term(x, s)
    dims = list(range(-len(shape), 0))
    unsure = _maybe_constant_rows(t, dims, s)
    if unsure is not None and s.ties != "nan":
        raise NeedsOrders("layer_norm of a row whose leading coefficients are equal within their "
                          "rounding bound (it may be constant, and then a lower order leads)")
    if s.orders == 1 and len(t.parts) == 1 and 0 < t.degree < math.inf:
        # Leading order of one growing part: normalize without ε (ε/σ² ~ c^(−2d)); an affine map
        # whose weight and bias share one degree is applied in the same call.
        affine = _one_degree_affine(weight, bias, s)
        gain, shift = (affine[0], affine[1]) if affine else (None, None)
        normalized = F.layer_norm(t.lead, shape, gain, shift, eps=0.0)
        if may_hold_nan(normalized):
            undefined = torch.isnan(normalized.sum(dims))
            if s.ties == "nan":  # rows that held NaN already are undetermined, not constant
                undefined &= ~torch.isnan(t.lead.sum(dims))
            if bool(undefined.any()):
                raise NeedsOrders("layer_norm of a row whose leading coefficients are all equal")
        error = max(t.floor - t.degree, -2 * t.degree)
        if affine:
            out = Term(((normalized, affine[2]),), error + affine[2])
            return out if unsure is None else with_nan(out, unsure)
        out = Term(((normalized, 0.0),), error)
    else:
        out = _composed_layer_norm(t, dims, eps, s.orders)
    if weight is not None:
        out = mul(out, _term(weight, s), s.orders)
    if bias is not None:
        out = add(out, _term(bias, s), s.orders)
    return out if unsure is None else with_nan(out, unsure)


def _maybe_constant_rows(t: Term, dims: list[int], s: Settings) -> Tensor | None:
    """The rows (normalized dimensions kept, of size 1) whose leading coefficients were computed
    unequal but may all be equal: a constant row has no direction to normalize, and a lower order
    leads. None if there is no such row.

    Each coefficient is known within its bound bᵢ (the rounding of the op that produced it, for
    its operands as computed, like every decision), so two coefficients surely differ once
    |x̂ᵢ − x̂ⱼ| > bᵢ + bⱼ: a row is surely not constant once its range exceeds 2·max b.
    """
    rounding = t.rounding(t.degree)
    if rounding is None or not 0 < t.degree < math.inf:
        return None
    lead = t.lead
    rows = lead.flatten(lead.dim() - len(dims))  # the normalized dimensions as one
    low, high = torch.aminmax(rows, dim=-1, keepdim=True)
    bound = _decision_bound(rounding, lead.dtype, s, cheap=True).expand_as(lead)
    unsure = (high > low) & (high - low <= 2 * bound.flatten(lead.dim() - len(dims)).amax(-1, keepdim=True))
    if not bool(unsure.any()):
        return None
    return unsure.reshape(*lead.shape[:lead.dim() - len(dims)], *(1,) * len(dims))


def _one_degree_affine(weight: Any, bias: Any, s: Settings) -> tuple[Tensor, Tensor | None, float] | None:
    """LayerNorm's weight and bias coefficients if both are known exactly with one common degree."""
    if not (isinstance(weight, Term) and len(weight.parts) == 1 and weight.floor == -math.inf):
        return None
    if bias is None:
        return weight.lead, None, weight.degree
    b = _term(bias, s)
    if len(b.parts) == 1 and b.floor == -math.inf and b.degree == weight.degree:
        return weight.lead, b.lead, weight.degree
    return None


def _composed_layer_norm(t: Term, dims: list[int], eps: float, orders: int) -> Term:
    """(x − μ)·(σ² + ε)^(−1/2) from the sum, product and power rules, part by part."""
    centered = add(t, scale(reduce(t, dims, True, mean=True), -1.0), orders)
    # Which rows are constant was decided above (_maybe_constant_rows): a part they cancel is a
    # known zero, and the next part leads.
    centered = make(centered.parts, centered.floor, orders).with_roundings(centered.roundings)
    variance = reduce(mul(centered, centered, orders), dims, True, mean=True)
    epsilon = Term(((torch.tensor(eps, dtype=t.lead.dtype), 0.0),))
    return mul(centered, power(add(variance, epsilon, orders), -0.5, orders), orders)
