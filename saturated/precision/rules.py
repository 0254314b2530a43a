"""The limit rules on leading coefficients in ball arithmetic: ATen op → rule, one table.

Each rule is the leading-order case of the matching rule in :mod:`saturated.rules`, with every
decision taken on balls: a decision is made only where the balls prove it (a score's ball lies
wholly below the maximum's, a sign's ball excludes 0), and otherwise the elements it governs are
marked undecided (NaN balls) with the reason recorded in :class:`Context`, for a higher precision
to try again. Continuous maps (sums, products, ReLU, normalization of a row whose size is proved
positive) need no decision: their balls enclose the exact results. Values flow between rules as
float64 terms and a radius (:mod:`~saturated.precision.expansions`), whole arrays at a time.

A rule is called as ``rule(context, *args, **kwargs)`` with c-dependent arguments given as
:class:`~saturated.precision.lead.Lead`; everything else is exact, as in the fast path.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from saturated.errors import SaturationError
from saturated.precision import expansions as ex
from saturated.precision import identity
from saturated.precision.balls import ONE, ZERO, nan_like, split_matmul, split_sum
from saturated.precision.lead import Lead, lift_exact
from saturated.precision.loss import Loss
from saturated.precision.products import balls_of_split, split
from saturated.rules.products import GatheredRows, expert_rows

__all__ = ["BALL_RULES", "PRODUCTS", "Context", "Escalate"]

aten = torch.ops.aten


@dataclass
class Context:
    """What the ball rules share during one pass.

    Attributes:
        mask_threshold: exact constants at least this large are masking constants (±∞).
        bits: the working precision.
        entries: the number of batch entries in the pass (dimension 0 of batched values).
        where: names the node being run (for reasons).
        target: the op being run.
        reasons: (batch entries or None for all, reason, entries a higher precision may still
            decide) of every decision left undecided.
        escalate: a higher precision follows: give the pass up once every entry needs it.
        rising: the entries some reason so far leaves to a higher precision (the union of the
            reasons' last fields, kept as they are recorded).
        ran: the ops run so far.
        ops: the ops of the whole graph.
        depth: how far into the graph the op being run lies, as a share: the most matrix products
            on a path from the inputs to it, over the most on any path (a radius grows by about
            the same bits per product, whatever else runs between).
        loss: the pass's loss so far, where it is given up once that says the end is out of
            reach (:mod:`~saturated.precision.loss`); None where it runs on regardless.
        needed: once given up on its loss, the bits that loss says the whole graph needs.
    """

    mask_threshold: float
    bits: int
    entries: int
    where: Callable[[], str] = lambda: "<unknown node>"
    target: Any = None
    reasons: list[tuple[frozenset[int] | None, str, frozenset[int] | None]] = field(default_factory=list)
    escalate: bool = False
    rising: set[int] = field(default_factory=set)
    ran: int = 0
    ops: int = 1
    depth: float = 0.0
    loss: Loss | None = None
    needed: float | None = None

    def observe(self, values: np.ndarray) -> None:
        """Note a matrix product's loss of precision (a split).

        Raises:
            Escalate: with ``loss`` kept, once it says the pass loses its bits before the end.
        """
        if self.loss is None:
            return
        self.loss.observe(values, self.depth)
        if self.loss.hopeless():
            self.needed = self.loss.projected()
            raise Escalate(f"{self.loss.lost:.0f} of {self.bits} bits lost {self.depth:.0%} of the way in, "
                           f"about {self.needed:.0f} by the end, at {self.where()}")

    def undecided(self, mask: np.ndarray, what: str, final: np.ndarray | bool = False) -> None:
        """Record that the decision ``what`` is not made where ``mask`` is True; ``final`` marks
        the elements no precision can decide (an exact zero, an exact tie that untracked orders
        split), whose entries are not run again at a higher one.

        Raises:
            Escalate: with ``escalate`` set, once every entry has a decision a higher precision
                may make: the rest of the pass would be run again there.
        """
        if not mask.any():
            return
        open_mask = mask & ~np.broadcast_to(final, mask.shape)
        rising = self._entries(open_mask) if open_mask.any() else frozenset()
        self.reasons.append((self._entries(mask), f"{what} at {self.bits} bits at {self.where()}", rising))
        self.rising.update(range(self.entries) if rising is None else rising)
        if self.escalate and len(self.rising) >= self.entries:
            raise Escalate(self.reasons[-1][1])

    def _entries(self, mask: np.ndarray) -> frozenset[int] | None:
        """The batch entries (dimension 0) where ``mask`` holds, None where it has no such axis."""
        if mask.ndim >= 1 and mask.shape[0] == self.entries:
            return frozenset(np.nonzero(mask.reshape(mask.shape[0], -1).any(axis=1))[0].tolist())
        return None


class Escalate(Exception):
    """A pass given up: every entry needs a higher precision (:meth:`Context.undecided`)."""


Rule = Callable[..., Any]
BALL_RULES: dict[Any, Rule] = {}
PRODUCTS = frozenset({aten.matmul.default, aten.mm.default, aten.bmm.default, aten.linear.default,
                      aten.addmm.default})
"""The matrix products: where a radius grows (:attr:`Context.depth`)."""


def _rule(*targets: Any) -> Callable[[Rule], Rule]:
    def decorate(fn: Rule) -> Rule:
        for target in targets:
            BALL_RULES[target] = fn
        return fn
    return decorate


def _lead(value: Any, ctx: Context) -> Lead:
    return value if isinstance(value, Lead) else lift_exact(value, ctx.mask_threshold)


def _finite(x: Lead, op: str) -> Lead:
    if x.infinite is not None and bool(x.infinite.any()):
        raise SaturationError(f"{op} of a masking constant (±∞) has no ball rule")
    return x


def _aligned(leads: Sequence[Lead], bits: int, shape: tuple[int, ...] | None = None
             ) -> tuple[list[np.ndarray], float]:
    """The coefficients of each lead (as splits) at the highest degree among them: a lead of
    lower degree is o(c^d) there, a zero coefficient."""
    degree = max(x.degree for x in leads)
    arrays = []
    for x in leads:
        value = x.operand(bits) if x.degree == degree else ex.zeros(x.shape)
        arrays.append(value if shape is None else ex.broadcast(value, shape))
    return arrays, degree


def _filled(value: flint.arb, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out.fill(value)
    return out


def _zeros(shape: tuple[int, ...]) -> np.ndarray:
    return _filled(ZERO, shape)


def _fresh(x: Lead, shape: tuple[int, ...], bits: int) -> np.ndarray:
    """Where ``x``'s coefficients are not already undetermined: a decision an op cannot make on
    an undetermined input is the earlier decision's, recorded (and raised in precision, or not)
    there."""
    if x.exact is not None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(~ex.undetermined(x.operand(bits)), shape)


def _infinite(leads: Sequence[Lead], shape: tuple[int, ...]) -> Tensor | None:
    parts = [x.infinite for x in leads if x.infinite is not None]
    if not parts:
        return None
    total = torch.zeros(shape, dtype=torch.int8)
    for part in parts:
        if bool(((total * part.expand(shape)) < 0).any()):
            raise SaturationError("masking constants of both signs meet in a sum")
        total = torch.where(part.expand(shape) != 0, part.expand(shape), total)
    return total


def _shape(*leads: Lead) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(x.shape for x in leads)))


def _combined(*leads: Lead, lead: bool = False) -> np.ndarray | None:
    """Classes of an elementwise op's outputs (None unless every operand has classes); with
    ``lead``, of their leading coefficients (None where they are the full classes)."""
    if lead and all(x.lead_ids is None for x in leads):
        return None
    classes = [x.lead_classes if lead else x.classes for x in leads]
    if any(c is None for c in classes):
        return None
    return identity.combine(*classes)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Moving elements: shapes, indexing, casts


_CASTS = (aten.to.dtype, aten._to_copy.default, aten.to.dtype_layout, aten.to.device, aten.clone.default,
          aten.contiguous.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
          aten.type_as.default)


@_rule(*_CASTS)
def _same(ctx: Context, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Casts and copies: the exact coefficients are what they are in any precision."""
    return x


@_rule(aten.dropout.default)
def _dropout(ctx: Context, x: Any, p: float, train: bool | None) -> Any:
    """Dropout in eval mode is the identity."""
    if train:
        raise SaturationError("dropout in training mode has no limit")
    return x


def _moved(target: Any, x: Lead, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``target`` (an op that moves elements) applied to a lead: to its exact floats where it has
    them, else to the flat positions of its balls."""
    def on(tensor: Tensor) -> Any:
        return target(tensor, *args, **kwargs)

    infinite = None if x.infinite is None else on(x.infinite.expand(x.shape))
    lower = None if x.lower is None else _moved(target, _expanded(x.lower, x.shape), args, kwargs)
    if x.exact is not None and x.lead_ids is None and x.ties is None and x.zeros is None:
        moved = on(x.exact)
        return _wrap(moved, infinite, lower, lambda t: Lead(x.degree, exact=t))
    positions = on(torch.arange(math.prod(x.shape)).reshape(x.shape))
    # A product's result moves as it is, terms and radius, without being made balls.
    terms = x.split.reshape(x.split.shape[0], -1) if x.array is None and x.split is not None else None
    flat = x.balls.reshape(-1) if terms is None else None
    ids = None if x.classes is None else x.classes.reshape(-1)
    leads = None if x.lead_ids is None else x.lead_ids.reshape(-1)
    above = None if x.above is None else np.broadcast_to(x.above, x.shape).reshape(-1)
    # hard-attention weights keep what they say of themselves as their elements move
    ties = None if x.ties is None else np.broadcast_to(x.ties, x.shape).reshape(-1)
    zeros = None if x.zeros is None else np.broadcast_to(x.zeros, x.shape).reshape(-1)

    def make(t: Tensor) -> Lead:
        at = t.numpy()
        return Lead(x.degree, array=None if flat is None else flat[at],
                    split=None if terms is None else terms[:, at], ids=None if ids is None else ids[at],
                    lead_ids=None if leads is None else leads[at], above=None if above is None else above[at],
                    zeros=None if zeros is None else zeros[at], ties=None if ties is None else ties[at])
    return _wrap(positions, infinite, lower, make)


def _expanded(x: Lead, shape: tuple[int, ...]) -> Lead:
    """``x`` broadcast to ``shape`` (a lower part may be smaller than its lead)."""
    if x.shape == shape:
        return x
    return Lead(x.degree, **_broadcast_value(x, shape),
                ids=None if x.classes is None else np.broadcast_to(x.classes, shape),
                infinite=None if x.infinite is None else x.infinite.expand(shape))


def _broadcast_value(x: Lead, shape: tuple[int, ...]) -> dict[str, Any]:
    """``x``'s coefficients broadcast to ``shape``, in the form it holds them (as :class:`Lead`'s
    keyword arguments)."""
    if x.exact is not None:
        return {"exact": x.exact.expand(shape)}
    if x.array is None and x.split is not None:
        return {"split": ex.broadcast(x.split, shape)}
    return {"array": np.broadcast_to(x.balls, shape)}


def _wrap(moved: Any, infinite: Any, lower: Any, make: Callable[[Tensor], Lead]) -> Any:
    if isinstance(moved, Tensor):
        lead = make(moved)
        lead.infinite, lead.lower = infinite, lower
        return lead
    parts = [make(t) for t in moved]
    for index, lead in enumerate(parts):
        lead.infinite = None if infinite is None else infinite[index]
        lead.lower = None if lower is None else lower[index]
    return parts


def untied(ctx: Context, x: Lead) -> Lead:
    """``x`` with the weights of tied hard-attention rows undetermined (see
    :attr:`~saturated.precision.lead.Lead.ties`): their even split stands for a split no tracked
    order decides, which only a product with values equal at the tied positions may read. No
    precision decides it (final)."""
    if x.ties is None:
        return x
    tied = np.broadcast_to(x.ties, x.shape)
    if tied.any():
        ctx.undecided(tied, f"{_UNTRACKED}, read other than as a product's weights", final=True)
    return Lead(x.degree, split=_undetermined_where(x.operand(ctx.bits), tied), infinite=x.infinite)


_MOVES = (aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.transpose.int,
          aten.t.default, aten.permute.default, aten.unsqueeze.default, aten.squeeze.dim,
          aten.squeeze.dims, aten.squeeze.default, aten.expand.default, aten.slice.Tensor,
          aten.select.int, aten.index.Tensor, aten.flatten.using_ints, aten.narrow.default,
          aten.movedim.int, aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default,
          aten.unbind.int, aten.repeat.default, aten.unflatten.int, aten.view_as.default,
          aten.expand_as.default, aten.repeat_interleave.self_int)


def _move_rule(target: Any) -> Rule:
    def rule(ctx: Context, x: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(x, Lead):
            raise SaturationError(f"{target} of an exact value with a c-dependent argument has no ball rule")
        if any(isinstance(a, Lead) for a in (*args, *kwargs.values())):
            args = tuple(a.exact if isinstance(a, Lead) and a.exact is not None else a for a in args)
        if x.ties is not None:
            positions = target(torch.arange(math.prod(x.shape)).reshape(x.shape), *args, **kwargs)
            if not _keeps_rows(positions, x.shape[-1] if x.shape else 1):
                x = untied(ctx, x)  # a tie is a statement about whole rows, which this move breaks
        return _moved(target, x, args, kwargs)
    return rule


def _keeps_rows(moved: Any, length: int) -> bool:
    """Whether flat positions ``moved`` (a tensor, or the parts of a split) hold whole rows of
    ``length`` elements along their last dimension, each in its order: tied hard-attention weights
    that moved so are still rows of weights (a reshape of the leading dimensions, an expand)."""
    parts = [moved] if isinstance(moved, Tensor) else list(moved)
    for part in parts:
        if part.dim() == 0 or part.shape[-1] != length:
            return False
        row, place = part // length, part % length
        if not (bool((place == torch.arange(length)).all()) and bool((row == row[..., :1]).all())):
            return False
    return True


for _target in _MOVES:
    BALL_RULES[_target] = _move_rule(_target)
TIES_KEPT = frozenset({aten.dropout.default, *_MOVES, *_CASTS})
"""Ops whose rules keep tied weights' marks (and products, whose first operand may be tied
weights): any other op reads such weights :func:`untied`."""


@_rule(aten.sym_size.int)
def _sym_size(ctx: Context, x: Lead, dim: int) -> int:
    return x.shape[dim]


@_rule(aten._assert_tensor_metadata.default)
def _assert_metadata(ctx: Context, x: Any, *args: Any, **kwargs: Any) -> None:
    return None


@_rule(aten.zeros_like.default, aten.ones_like.default, aten.full_like.default, aten.empty_like.default,
       aten.new_ones.default, aten.new_zeros.default, aten.new_full.default, aten.new_empty.default)
def _shaped_like(ctx: Context, x: Lead, *args: Any, **kwargs: Any) -> Tensor:
    """Ops that read only the shape of their c-dependent argument."""
    return ctx.target(torch.zeros(x.shape), *args, **kwargs)


@_rule(aten.embedding.default)
def _embedding(ctx: Context, weight: Any, indices: Tensor, *args: Any) -> Lead:
    """Rows of a c-dependent table at exact indices."""
    if isinstance(indices, Lead):
        raise SaturationError("embedding indices that depend on c have no ball rule")
    table = _lead(weight, ctx)
    return _moved(lambda t: F.embedding(indices, t), table, (), {})


@_rule(operator.getitem)
def _getitem(ctx: Context, values: Sequence[Any], index: int) -> Any:
    """One output of an op that returns several (a split)."""
    return values[index]


# ---------------------------------------------------------------------------------------------
# Sums and products


def _sum_of(ctx: Context, x: Any, y: Any, factor: Any = 1) -> Lead:
    first, second = _lead(x, ctx), _lead(y, ctx)
    if factor != 1:
        second = _scaled(second, factor, ctx.bits)
    shape = _shape(first, second)
    infinite = _infinite([first, second], shape)
    ids = _combined(first, second)  # the whole value depends on both, whichever part leads
    if first.degree != second.degree:
        top, below = (first, second) if first.degree > second.degree else (second, first)
        # One part below the lead is tracked, the sum's lower operand, with the classes of the
        # higher one: where those agree, two elements differ by their lower parts alone.
        lower = above = None
        if math.isfinite(below.degree) and top.lower is None and top.classes is not None:
            below = Lead(below.degree, exact=below.exact, array=below.array, split=below.split)
            lower = _expanded(below, shape)
            above = np.broadcast_to(top.classes, shape)
        leads = None if top.lead_classes is None else np.broadcast_to(top.lead_classes, shape)
        return Lead(top.degree, **_broadcast_value(top, shape), infinite=infinite, ids=ids,
                    lead_ids=leads, lower=lower, above=above)
    total = ex.add(first.operand(ctx.bits), second.operand(ctx.bits), ctx.bits)
    return Lead(first.degree, split=total, infinite=infinite, ids=ids,
                lead_ids=_combined(first, second, lead=True))


def _scaled(x: Lead, factor: Any, bits: int) -> Lead:
    if isinstance(factor, Lead) or (isinstance(factor, Tensor) and factor.numel() != 1):
        raise SaturationError("a scaling factor that is not one number has no ball rule")
    value = float(factor)
    infinite = None if x.infinite is None else (x.infinite * int(np.sign(value))).to(torch.int8)
    if value == 0 and infinite is not None and bool(infinite.any()):
        raise SaturationError("0 times a masking constant")
    lower = None if x.lower is None else _scaled(x.lower, factor, bits)
    if x.exact is not None and _is_power_of_two(value) and _exactly_scaled(x.exact, value):
        coefficients: dict[str, Any] = {"exact": x.exact * value}
    elif value == -1:
        coefficients = {"split": ex.negated(x.operand(bits))}
    else:
        coefficients = {"split": ex.multiply(x.operand(bits), np.array([value, 0.0]), bits)}
    return Lead(x.degree, **coefficients, infinite=infinite, ids=x.classes, lead_ids=x.lead_ids, lower=lower,
                above=x.above)


def _is_power_of_two(value: float) -> bool:
    """±2^k (or 0): multiplying a float by it is exact (away from the float range's ends)."""
    return value == 0 or (math.isfinite(value) and math.frexp(abs(value))[0] == 0.5)


def _exactly_scaled(values: Tensor, factor: float) -> bool:
    """Whether ``values`` times the power of two ``factor`` neither overflows nor underflows."""
    if factor == 0:
        return True
    scaled = values * factor
    return bool(torch.isfinite(scaled).all()) and torch.equal(scaled / factor, values)


@_rule(aten.add.Tensor, aten.add.Scalar, aten.add_.Tensor)
def _add(ctx: Context, x: Any, y: Any, alpha: Any = 1) -> Lead:
    """Parts of equal degree add; a higher degree leads (Table 1, Sum)."""
    return _sum_of(ctx, x, y, alpha)


@_rule(aten.sub.Tensor, aten.sub.Scalar)
def _sub(ctx: Context, x: Any, y: Any, alpha: Any = 1) -> Lead:
    return _sum_of(ctx, x, y, -float(alpha))


@_rule(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(ctx: Context, x: Any, y: Any, alpha: Any = 1) -> Lead:
    return _sum_of(ctx, y, x, -float(alpha))


@_rule(aten.neg.default)
def _neg(ctx: Context, x: Lead) -> Lead:
    return _scaled(x, -1.0, ctx.bits)


@_rule(aten.mul.Tensor, aten.mul.Scalar)
def _mul(ctx: Context, x: Any, y: Any) -> Lead:
    """Degrees add (Table 1, Product); a masking constant only scales by an exact number."""
    for lead, other in ((x, y), (y, x)):
        if isinstance(lead, Lead) and lead.infinite is not None and bool(lead.infinite.any()):
            return _scaled(lead, other, ctx.bits)
    first, second = _finite(_lead(x, ctx), "mul"), _finite(_lead(y, ctx), "mul")
    product = ex.multiply(first.operand(ctx.bits), second.operand(ctx.bits), ctx.bits)
    return Lead(first.degree + second.degree, split=product,
                ids=_combined(first, second), lead_ids=_combined(first, second, lead=True))


@_rule(aten.div.Tensor, aten.div.Scalar, aten.div_.Tensor)
def _div(ctx: Context, x: Any, y: Any) -> Lead:
    """x / y: degrees subtract; y's coefficients must be proved nonzero."""
    first, second = _finite(_lead(x, ctx), "div"), _finite(_lead(y, ctx), "div")
    shape = _shape(first, second)
    sign = ex.signs(second.operand(ctx.bits))
    proved = (sign != 0) & ~np.isnan(sign)
    unknown = np.broadcast_to(~proved, shape)
    ctx.undecided(unknown & _fresh(second, shape, ctx.bits), "a divisor whose coefficient may be zero",
                  np.broadcast_to(sign == 0, shape))
    out = ex.multiply(first.operand(ctx.bits), _reciprocal(second, proved, ctx.bits), ctx.bits)
    return Lead(first.degree - second.degree, split=_undetermined_where(out, unknown),
                ids=_combined(first, second), lead_ids=_combined(first, second, lead=True))


def _reciprocal(x: Lead, proved: np.ndarray, bits: int) -> np.ndarray:
    """1/x as a split where x is proved nonzero (1 elsewhere): exact for powers of two, else
    from balls (a divisor is a scalar or a row's norm: few elements)."""
    if x.exact is not None:
        values = x.exact.numpy()
        if all(_is_power_of_two(float(v)) for v in np.unique(values[proved])):
            inverse = np.where(proved, 1 / np.where(proved, values, 1.0), 1.0)
            return np.stack([inverse, np.zeros(values.shape)])
    safe = np.where(proved, x.balls, _filled(ONE, x.shape))
    return split(np.asarray(ONE / safe, dtype=object), bits)


def _undetermined_where(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A split with the elements under ``mask`` undetermined."""
    if not mask.any():
        return values
    out = np.where(mask, 0.0, np.broadcast_to(values, values.shape[:1] + mask.shape))
    out[-1] = np.where(mask, math.nan, out[-1])
    return out


def _power_of(ctx: Context, x: Lead, exponent: float, what: str) -> Lead:
    """x^p elementwise: degree p·d; a power that is not a non-negative integer needs a proved
    positive base."""
    x = _finite(x, what)
    if float(exponent).is_integer() and exponent >= 0:
        p = int(exponent)
        base = x.operand(ctx.bits)
        power = base if p else np.stack([np.ones(x.shape), np.zeros(x.shape)])
        for _ in range(p - 1):
            power = ex.multiply(power, base, ctx.bits)
        return Lead(x.degree * p, split=power, ids=x.classes, lead_ids=x.lead_ids)
    sign = ex.signs(x.operand(ctx.bits))
    proved = sign > 0
    ctx.undecided(~proved & _fresh(x, x.shape, ctx.bits), f"{what}: a coefficient not proved positive",
                  sign <= 0)
    safe = np.where(proved, x.balls, _filled(ONE, x.shape))
    if exponent == 0.5:
        balls = np.frompyfunc(lambda b: b.sqrt(), 1, 1)(safe)
    elif exponent == -0.5:
        balls = np.frompyfunc(lambda b: b.rsqrt(), 1, 1)(safe)
    else:
        exact_exponent = flint.arb(exponent)
        balls = np.frompyfunc(lambda b: b ** exact_exponent, 1, 1)(safe)
    values = split(np.asarray(balls, dtype=object), ctx.bits)
    return Lead(x.degree * exponent, split=_undetermined_where(values, ~proved), ids=x.classes,
                lead_ids=x.lead_ids)


@_rule(aten.pow.Tensor_Scalar)
def _pow(ctx: Context, x: Lead, exponent: Any) -> Lead:
    """Table 1's Product, repeated: the leading part to the power."""
    if isinstance(exponent, Lead):
        raise SaturationError("a c-dependent exponent has no ball rule")
    return _power_of(ctx, x, float(exponent), "pow")


@_rule(aten.rsqrt.default)
def _rsqrt(ctx: Context, x: Lead) -> Lead:
    return _power_of(ctx, x, -0.5, "rsqrt")


@_rule(aten.sqrt.default)
def _sqrt(ctx: Context, x: Lead) -> Lead:
    return _power_of(ctx, x, 0.5, "sqrt")


def _dims(x: Lead, dim: Any) -> tuple[int, ...]:
    n = len(x.shape)
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return tuple(range(n))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return tuple(sorted(d % n for d in dims))


@_rule(aten.sum.dim_IntList, aten.sum.default)
def _sum(ctx: Context, x: Lead, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Lead:
    x = _finite(x, "sum")
    dims = _dims(x, dim)
    ids = None if x.classes is None else identity.rows(x.classes, dims, keepdim)
    total = split_sum(x.operand(ctx.bits), dims, keepdim)
    leads = None if x.lead_ids is None else identity.rows(x.lead_ids, dims, keepdim)
    return Lead(x.degree, split=total, ids=ids, lead_ids=leads)


@_rule(aten.mean.dim, aten.mean.default)
def _mean(ctx: Context, x: Lead, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Lead:
    dims = _dims(x, dim)
    count = math.prod(x.shape[d] for d in dims)
    total = _sum(ctx, x, list(dims), keepdim)
    return Lead(x.degree, split=_divided(total.operand(ctx.bits), count, ctx.bits), ids=total.classes,
                lead_ids=total.lead_ids)


def _divided(values: np.ndarray, count: float, bits: int) -> np.ndarray:
    """A split divided by an exact number (by its reciprocal's split where that is not a float)."""
    if _is_power_of_two(1 / count):
        return ex.multiply(values, np.array([1 / count, 0.0]), bits)
    return ex.multiply(values, split(np.array(ONE / flint.arb(count), dtype=object), bits), bits)


TIED_PRODUCTS = frozenset({aten.matmul.default, aten.mm.default, aten.bmm.default})
"""The products whose rule reads tied hard-attention weights as its first operand."""


@_rule(*TIED_PRODUCTS)
def _matmul(ctx: Context, x: Any, y: Any) -> Lead:
    """Degrees add (Table 1, Linear / Product). The product stays split into float64 terms
    until an op needs it as balls (a weight matrix is never made balls at all)."""
    if isinstance(x, GatheredRows):
        return _per_expert(ctx, x, y)
    first, second = _finite(_lead(x, ctx), "matmul"), _finite(_lead(y, ctx), "matmul")
    product = split_matmul(first.operand(ctx.bits), second.operand(ctx.bits))
    ctx.observe(product)
    if first.ties is not None:
        tied = _tied_product(ctx, first.ties, second, product)
        return Lead(first.degree + second.degree, split=tied, lead_ids=_representative_classes(first, second))
    return Lead(first.degree + second.degree, split=product,
                ids=_product_classes(first, second), lead_ids=_product_classes(first, second, lead=True))


def _representative_classes(weights: Lead, values: Lead) -> np.ndarray | None:
    """Classes of the leading coefficients of weights @ values where a tied row's lead is that of
    any one tied position (:func:`_tied_product`): each tied row counted at its first member."""
    if weights.ties is None or weights.zeros is None or values.lead_classes is None \
            or values.lead_classes.ndim < 2:
        return None
    tied_rows = weights.ties.any(axis=-1, keepdims=True)
    first = np.cumsum(weights.ties, axis=-1) == 1
    zeros = np.where(tied_rows, ~(weights.ties & first), weights.zeros)
    classes = weights.classes if weights.classes is not None else np.zeros(weights.shape, dtype=np.int64)
    classes = np.where(tied_rows, np.where(zeros, 0, 1), classes)
    return identity.sparse_products(classes, zeros, values.lead_classes)


def _tied_product(ctx: Context, ties: np.ndarray, values: Lead, product: np.ndarray) -> np.ndarray:
    """weights @ values where some rows split their weight over a tie no tracked order decides:
    the lead is the evenly split product where the values' leading coefficients are proved equal
    at every tied position (any split gives it), undetermined elsewhere."""
    classes = values.lead_classes
    matters: np.ndarray = np.asarray(ties.any(axis=-1))
    if classes is not None and classes.ndim >= 2:
        per_row = identity.rows(classes, (classes.ndim - 1,))[..., None, :]  # a class per value row
        big = np.iinfo(np.int64).max
        low = np.where(ties, per_row, big).min(axis=-1)
        high = np.where(ties, per_row, -big).max(axis=-1)
        matters = matters & (low != high)
    unknown = np.broadcast_to(matters[..., None], product.shape[1:])
    ctx.undecided(unknown, "a tie of hard attention at the leading order whose positions carry "
                           "different values", final=True)
    return _undetermined_where(product, unknown)


def _product_classes(first: Lead, second: Lead, lead: bool = False) -> np.ndarray | None:
    """Element (i, j) of a matrix product reads row i of the first and column j of the second
    (with ``lead``: their leading coefficients; None where those are the full classes)."""
    if lead and first.lead_ids is None and second.lead_ids is None:
        return None
    if len(first.shape) < 2 or len(second.shape) < 2:
        return None
    if first.zeros is not None:
        a, b = (first.lead_classes, second.lead_classes) if lead else (first.classes, second.classes)
        return None if a is None or b is None else identity.sparse_products(a, first.zeros, b)
    return _with_columns(_line_classes(first, -1, lead), second, lead)


def _with_columns(rows: np.ndarray | None, second: Lead, lead: bool) -> np.ndarray | None:
    """Classes of a product's elements from its first operand's row classes and the second's
    columns (with ``lead``: their leading coefficients)."""
    columns = _line_classes(second, -2, lead)
    if rows is None or columns is None:
        return None
    return identity.combine(rows[..., :, None], columns[..., None, :])


def _per_expert(ctx: Context, gathered: GatheredRows, y: Any) -> Lead:
    """weight[index] @ y, a mixture of experts' batched product, as one product per expert over
    the rows routed to it (as the fast path takes it): the gathered copy of one matrix per token,
    and its slices, are never made. Each expert's product is taken as (yᵀ·Wₑᵀ)ᵀ, all its rows'
    columns against one matrix."""
    weight = gathered.weight
    values = _finite(_lead(y, ctx), "matmul")
    operand = values.operand(ctx.bits)
    groups = [(expert, rows.numpy()) for expert, rows in expert_rows(gathered.index)]
    parts = []
    for expert, rows in groups:
        columns = np.swapaxes(operand[:, rows], -1, -2)
        matrix = split(weight.exact[expert].T.numpy(), ctx.bits)
        parts.append(np.swapaxes(split_matmul(columns, matrix), -1, -2))
    order = np.concatenate([rows for _, rows in groups]) if groups else np.zeros(0, dtype=np.int64)
    product = ex.concatenated(parts, 0)[:, np.argsort(order)] if parts else \
        ex.zeros((0, weight.shape[1], values.shape[-1]))
    ctx.observe(product)
    lines = identity.value_rows(weight.exact, (2,))[gathered.index.numpy()]  # its matrix's row classes
    return Lead(weight.degree + values.degree, split=product, ids=_with_columns(lines, values, False),
                lead_ids=None if values.lead_ids is None else _with_columns(lines, values, True))


def _line_classes(x: Lead, axis: int, lead: bool) -> np.ndarray | None:
    """Classes of the lines of ``x`` along ``axis`` (or of their leading coefficients): from the
    floats themselves for an exact operand (a weight matrix), else from its elements' classes."""
    axes = (len(x.shape) + axis,)
    if x.exact is not None and x.ids is None and not (lead and x.lead_ids is not None):
        return identity.value_rows(x.exact, axes)
    classes = x.lead_classes if lead else x.classes
    return None if classes is None else identity.rows(classes, axes)


@_rule(aten.linear.default)
def _linear(ctx: Context, x: Any, weight: Any, bias: Any = None) -> Lead:
    """x·Wᵀ (+ b): degrees add, then the Sum rule with the bias."""
    w = _finite(_lead(weight, ctx), "linear")
    transposed = Lead(w.degree, exact=w.exact.T) if w.exact is not None else \
        Lead(w.degree, split=np.swapaxes(w.operand(ctx.bits), -1, -2))
    product = _matmul(ctx, x, transposed)
    return product if bias is None else _sum_of(ctx, product, bias)


@_rule(aten.addmm.default)
def _addmm(ctx: Context, bias: Any, x: Any, y: Any, beta: Any = 1, alpha: Any = 1) -> Lead:
    product = _matmul(ctx, x, y)
    if alpha != 1:
        product = _scaled(product, alpha, ctx.bits)
    return _sum_of(ctx, product, bias if beta == 1 else _scaled(_lead(bias, ctx), beta, ctx.bits))


# ---------------------------------------------------------------------------------------------
# Selections


def _selected(ctx: Context, condition: Any, x: Any, y: Any) -> Lead:
    if isinstance(condition, Lead):
        raise SaturationError("a c-dependent condition has no ball rule")
    first, second = _lead(x, ctx), _lead(y, ctx)
    cond = torch.as_tensor(condition, dtype=torch.bool)
    shape = tuple(np.broadcast_shapes(tuple(cond.shape), first.shape, second.shape))
    (a, b), degree = _aligned([first, second], ctx.bits, shape)
    values = ex.where(cond.expand(shape).numpy(), a, b)
    ids = None
    if first.classes is not None and second.classes is not None:
        left, right = identity.joined([first.classes, second.classes])
        ids = np.where(cond.expand(shape).numpy(), left, right)
    infinite = None
    if first.infinite is not None or second.infinite is not None:
        zero = torch.zeros(shape, dtype=torch.int8)
        infinite = torch.where(cond.expand(shape),
                               zero if first.infinite is None else first.infinite.expand(shape),
                               zero if second.infinite is None else second.infinite.expand(shape))
    return Lead(degree, split=values, infinite=infinite, ids=ids)


@_rule(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def _where(ctx: Context, condition: Any, x: Any, y: Any) -> Lead:
    """Each element keeps its own expansion; the lower-degree side is o(c^d) at the higher."""
    return _selected(ctx, condition, x, y)


@_rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx: Context, x: Any, mask: Any, value: Any) -> Lead:
    return _selected(ctx, mask, value, x)


@_rule(aten.cat.default, aten.stack.default)
def _cat(ctx: Context, tensors: Sequence[Any], dim: int = 0) -> Lead:
    """Pieces side by side, at the highest degree among them."""
    leads = [_lead(t, ctx) for t in tensors]
    stacked = ctx.target is aten.stack.default
    ctx_op = np.stack if stacked else np.concatenate
    torch_op = torch.stack if stacked else torch.cat
    arrays, degree = _aligned(leads, ctx.bits)
    infinite = None
    if any(x.infinite is not None for x in leads):
        infinite = torch_op([x.infinite.expand(x.shape) if x.infinite is not None
                             else torch.zeros(x.shape, dtype=torch.int8) for x in leads], dim)
    if all(x.exact is not None and x.degree == degree for x in leads):
        return Lead(degree, exact=torch_op([x.exact for x in leads if x.exact is not None], dim),
                    infinite=infinite)
    classes = [x.classes for x in leads]
    ids = None if any(c is None for c in classes) else ctx_op(identity.joined(classes), axis=dim)  # type: ignore[arg-type]
    return Lead(degree, split=ex.concatenated(arrays, dim, stack=stacked), infinite=infinite, ids=ids)


# ---------------------------------------------------------------------------------------------
# Nonlinearities and hard attention


@_rule(aten.relu.default)
def _relu(ctx: Context, x: Lead) -> Lead:
    """ReLU is positively 1-homogeneous and continuous: relu of the leading coefficient, an
    enclosure where its ball holds 0 (no decision is needed)."""
    x = _finite(x, "relu")
    return Lead(x.degree, split=ex.relu(x.operand(ctx.bits)), ids=x.classes, lead_ids=x.lead_ids)


@_rule(aten.abs.default)
def _abs(ctx: Context, x: Lead) -> Lead:
    x = _finite(x, "abs")
    return Lead(x.degree, array=np.asarray(np.abs(x.balls), dtype=object), ids=x.classes, lead_ids=x.lead_ids)


def _gelu_at(approximate: str) -> Callable[[flint.arb], flint.arb]:
    if approximate == "tanh":
        k = (2 / flint.arb.pi()).sqrt()
        return lambda a: a * (1 + (k * (a + flint.arb("0.044715") * a ** 3)).tanh()) / 2
    return lambda a: a * (1 + (a / flint.arb(2).sqrt()).erf()) / 2


def _relu_like(ctx: Context, x: Lead, at: Callable[[flint.arb], flint.arb], what: str) -> Lead:
    """GELU, SiLU: ReLU for growing inputs (they differ by e^(−Θ(c))), f(a) for a fixed one,
    a/2 for a vanishing one (f(v) = v/2 + O(v²))."""
    x = _finite(x, what)
    if x.degree > 0:
        return _relu(ctx, x)
    if x.degree == 0:
        return Lead(0.0, array=np.asarray(np.frompyfunc(at, 1, 1)(x.balls), dtype=object), ids=x.classes,
                    lead_ids=x.lead_ids)
    alone = Lead(x.degree, exact=x.exact, array=x.array, split=x.split, ids=x.classes, lead_ids=x.lead_ids)
    return _scaled(alone, 0.5, ctx.bits)


@_rule(aten.gelu.default)
def _gelu(ctx: Context, x: Lead, approximate: str = "none") -> Lead:
    return _relu_like(ctx, x, _gelu_at(approximate), "gelu")


@_rule(aten.silu.default)
def _silu(ctx: Context, x: Lead) -> Lead:
    return _relu_like(ctx, x, lambda a: a / (1 + (-a).exp()), "silu")


def _squashing(ctx: Context, x: Lead, grown: Callable[[np.ndarray], np.ndarray],
               at: Callable[[flint.arb], flint.arb], small: Callable[[Lead], Lead], what: str) -> Lead:
    """sigmoid, tanh: a constant set by the proved sign for growing inputs (Lemmas 6, 8), f(a) for
    fixed ones, ``small`` for vanishing ones."""
    x = _finite(x, what)
    if x.degree > 0:
        sign = ex.signs(x.operand(ctx.bits))
        unknown = np.isnan(sign) | (sign == 0)
        ctx.undecided(unknown & _fresh(x, x.shape, ctx.bits), f"the sign of a growing input of {what}",
                      sign == 0)
        values = np.stack([grown(np.nan_to_num(sign)), np.zeros(sign.shape)])
        return Lead(0.0, split=_undetermined_where(values, unknown), ids=x.classes, lead_ids=x.lead_ids)
    if x.degree == 0:
        return Lead(0.0, array=np.asarray(np.frompyfunc(at, 1, 1)(x.balls), dtype=object), ids=x.classes,
                    lead_ids=x.lead_ids)
    return small(x)


@_rule(aten.tanh.default)
def _tanh(ctx: Context, x: Lead) -> Lead:
    return _squashing(ctx, x, lambda sign: sign, lambda a: a.tanh(), lambda v: v, "tanh")


@_rule(aten.sigmoid.default)
def _sigmoid(ctx: Context, x: Lead) -> Lead:
    half = Lead(0.0, exact=torch.full(x.shape, 0.5, dtype=torch.float64))
    return _squashing(ctx, x, lambda sign: (sign > 0).astype(np.float64), lambda a: 1 / (1 + (-a).exp()),
                      lambda v: half, "sigmoid")


@_rule(aten.layer_norm.default)
def _layer_norm(ctx: Context, x: Any, shape: Sequence[int], weight: Any = None, bias: Any = None,
                eps: float = 1e-5, *rest: Any) -> Lead:
    """(x − mean)/√(var + ε): for a growing row ε is below the lead, and the row's variance must be
    proved positive (a constant row has no direction); then the affine map."""
    lead = _finite(_lead(x, ctx), "layer_norm")
    axes = tuple(range(len(lead.shape) - len(shape), len(lead.shape)))
    count = math.prod(lead.shape[a] for a in axes)
    bits = ctx.bits
    values = lead.operand(bits)
    mean = _divided(split_sum(values, axes, True), count, bits)
    centered = ex.add(values, ex.negated(mean), bits)
    if lead.degree < 0:  # ε leads
        inverse_root = split(np.array(flint.arb(eps).rsqrt(), dtype=object), bits)
        normalized = Lead(lead.degree, split=ex.multiply(centered, inverse_root, bits),
                          ids=_row_relative(lead, axes))
    else:
        variance = _divided(split_sum(ex.multiply(centered, centered, bits), axes, True), count, bits)
        if lead.degree == 0:
            variance = ex.add(variance, np.array([eps, 0.0]), bits)
        scale = _power_of(ctx, Lead(2 * lead.degree, split=variance), -0.5,
                          "layer_norm (the variance of a row)")
        normalized = Lead(0.0, split=ex.multiply(centered, scale.operand(bits), bits),
                          ids=_row_relative(lead, axes), lead_ids=_row_relative(lead, axes, leading=True))
    out = normalized if weight is None else _mul(ctx, normalized, weight)
    return out if bias is None else _sum_of(ctx, out, bias)


def _row_relative(x: Lead, axes: tuple[int, ...], leading: bool = False) -> np.ndarray | None:
    """Classes of elements computed from themselves and their whole row along ``axes`` (with
    ``leading``: of their leading coefficients; None where those are the full classes)."""
    classes = x.classes if not leading else (x.lead_ids if x.lead_ids is not None else None)
    if classes is None:
        return None
    return identity.combine(classes, identity.rows(classes, axes, keepdims=True))


_UNTRACKED = "a tie of hard attention at the leading order that untracked orders split"
_INHERITED = "hard attention over scores a decision before left undecided"  # that one rises, not this


@dataclass(frozen=True)
class _Row:
    """One row of scores: leading balls, their classes (full and leading) and the part below."""

    balls: np.ndarray
    ids: np.ndarray | None
    lead_ids: np.ndarray | None
    lower: np.ndarray | None
    above: np.ndarray | None


def _hard_row(row: _Row, allowed: np.ndarray) -> tuple[np.ndarray, str | None, bool]:
    """Hard attention over one row of scores (Lemma 7): weight 1 at the position whose ball lies
    above every other allowed position's, or shared evenly by positions proved equal to it at
    every order (one class, :mod:`saturated.precision.identity`: their weights are equal at every
    c). Positions whose leading coefficients are proved equal go on to the part below, where it is
    tracked; where that does not decide either, the weight is split evenly and the row marked tied
    (see :attr:`~saturated.precision.lead.Lead.ties`). NaN weights and the reason where none of
    this is proved. Returns the weights, the reason, and whether the row is tied."""
    places = [int(j) for j in np.nonzero(allowed)[0]]
    if not places:
        return _zeros(row.balls.shape), None, False
    chosen, reason = _maximal(row.balls, places, row.ids)
    tied = False
    if reason is not None and row.lead_ids is not None and len({row.lead_ids[j] for j in chosen}) == 1:
        if row.lower is not None and row.above is not None and len({row.above[j] for j in chosen}) == 1:
            below, why = _maximal(row.lower, chosen, row.ids)
            if why is None:
                chosen, reason = below, None
        tied, reason = reason is not None, None
    if reason is not None:
        return nan_like(row.balls.shape), reason, False
    weights = _zeros(row.balls.shape)
    share = ONE / len(chosen)
    for j in chosen:
        weights[j] = share
    return weights, None, tied


def _maximal(values: np.ndarray, places: list[int], ids: np.ndarray | None) -> tuple[list[int], str | None]:
    """The positions among ``places`` that may hold the maximum; a reason unless that is one
    position, or several proved equal at every order."""
    mids = [float(values[j].mid()) if values[j].is_finite() else math.nan for j in places]
    if any(math.isnan(m) for m in mids):
        return places, _INHERITED
    best = places[int(np.argmax(mids))]
    top = values[best]
    chosen = [best, *(j for j in places if j != best and not values[j] < top)]
    if len(chosen) == 1 or (ids is not None and len({ids[j] for j in chosen}) == 1):
        return chosen, None
    if all(values[j].is_exact() and values[j] == top for j in chosen):
        return chosen, _UNTRACKED
    return chosen, "a near-tie of hard attention not separated"


@_rule(aten.softmax.int, aten._softmax.default)
def _softmax(ctx: Context, x: Lead, dim: int, dtype_or_half: Any = None) -> Lead:
    """Softmax → hard attention for growing scores (Lemma 7); the softmax itself for fixed ones;
    uniform weights for vanishing ones. Masking constants of degree +∞ exclude positions."""
    dim = dim % len(x.shape)
    moved = np.moveaxis(np.zeros(x.shape, dtype=bool), dim, -1).shape

    def by_row(values: np.ndarray | None, split_axis: bool = False) -> np.ndarray | None:
        """Values per element (or a split of them, ``split_axis``) as rows of scores."""
        if values is None:
            return None
        if split_axis:
            values = ex.broadcast(values, x.shape)
            return np.moveaxis(values, dim + 1, -1).reshape(values.shape[0], -1, moved[-1])
        return np.moveaxis(np.broadcast_to(values, x.shape), dim, -1).reshape(-1, moved[-1])

    infinite = torch.zeros(x.shape, dtype=torch.int8) if x.infinite is None else x.infinite.expand(x.shape)
    if bool((infinite > 0).any()):
        raise SaturationError("softmax input contains +∞ (a huge positive constant)")
    allowed = by_row((infinite == 0).numpy())
    scored = None if x.classes is None else identity.combine(x.classes, infinite.numpy().astype(np.int64))
    rows = by_row(x.operand(ctx.bits), split_axis=True)
    assert rows is not None and allowed is not None
    count = rows.shape[1]
    undecided, tied = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
    if x.degree > 0:
        lower = None if x.lower is None or x.lower.degree <= 0 else \
            by_row(x.lower.operand(ctx.bits), split_axis=True)
        scores = _Scores(rows, by_row(scored), by_row(x.lead_classes), lower,
                         None if lower is None else by_row(x.above))
        weights, undecided, tied, reasons = _hard_rows(scores, allowed, ctx.bits)
    else:
        balls = balls_of_split(rows)
        weights = split(np.stack([_soft_row(balls[r], allowed[r], x.degree == 0) for r in range(count)])
                        if count else np.zeros(rows.shape[1:], dtype=object), ctx.bits)
        reasons = {}
    def back(values: np.ndarray) -> np.ndarray:
        """Per-row-element values back in the input's layout."""
        return np.moveaxis(values.reshape(moved), -1, dim)

    for reason, where in sorted(reasons.items()):
        mask = back(np.broadcast_to(where[:, None], rows.shape[1:]))
        ctx.undecided(mask, reason, final=reason in (_UNTRACKED, _INHERITED))
    values = np.moveaxis(weights.reshape(weights.shape[0], *moved), -1, dim + 1)
    zeros = ties = None
    if x.degree > 0:  # weights 0 and 1/k at every order: classes from the values themselves
        zero = ex.is_zero(weights)
        weight_ids = back(_hard_classes(zero, undecided | tied))
        members = ~zero & tied[:, None]
        zeros = back(_hard_classes(zero, undecided) == 0)
        ties = back(members) if members.any() else None
    elif scored is not None:
        weight_ids = identity.combine(scored, identity.rows(scored, (dim,), keepdims=True))
    else:
        weight_ids = None
    return Lead(0.0, split=values, ids=weight_ids, zeros=zeros, ties=ties)


@dataclass(frozen=True)
class _Scores:
    """Rows of scores: leading coefficients (a split, positions last), their classes (full and
    leading), and the part below with the classes of what lies above it, where tracked."""

    values: np.ndarray
    ids: np.ndarray | None
    lead_ids: np.ndarray | None
    lower: np.ndarray | None
    above: np.ndarray | None

    def row(self, index: int) -> _Row:
        """One row, as balls, for :func:`_hard_row`."""
        pick = (lambda a: None if a is None else a[index])  # noqa: E731
        lower = None if self.lower is None else balls_of_split(self.lower[:, index])
        return _Row(balls_of_split(self.values[:, index]), pick(self.ids), pick(self.lead_ids), lower,
                    pick(self.above))


def _hard_rows(scores: _Scores, allowed: np.ndarray, bits: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Hard attention over rows of scores, on whole arrays where the maximum is proved: one
    position above every other, or positions of one class (equal at every order). Rows with an
    undetermined score are the earlier decision's; the rest go through :func:`_hard_row`.
    Returns the weights (a split), the rows undecided, the rows tied, and per reason its rows."""
    rows = scores.values
    count = rows.shape[1]
    open_ = ex.undetermined(rows) & allowed
    inherited = open_.any(axis=-1)
    empty = ~allowed.any(axis=-1)
    approx = np.where(allowed & ~open_, rows[0], -np.inf)
    best = approx.argmax(axis=-1) if count else np.zeros(0, dtype=np.int64)
    top = np.take_along_axis(rows, best[None, :, None], axis=2)
    below = ex.signs(ex.add(top, ex.negated(rows), bits)) > 0
    candidates = allowed & ~below
    single = candidates.sum(axis=-1) == 1
    if scores.ids is not None:
        big = np.iinfo(np.int64).max
        single |= np.where(candidates, scores.ids, big).min(axis=-1) == \
            np.where(candidates, scores.ids, -big).max(axis=-1)
    proved = ~empty & ~inherited & single
    shares = np.where(proved[:, None] & candidates, 1.0, 0.0)
    weights = ex.multiply(np.stack([shares, np.zeros(shares.shape)]),
                          _reciprocals(np.maximum(shares.sum(axis=-1), 1), bits)[:, :, None], bits)
    undecided, tied = inherited & ~empty, np.zeros(count, dtype=bool)
    reasons: dict[str, np.ndarray] = {_INHERITED: undecided.copy()} if undecided.any() else {}
    rest = np.nonzero(~empty & ~inherited & ~proved)[0]
    if rest.size:
        found = []
        for index in rest:
            weight, reason, tied[index] = _hard_row(scores.row(int(index)), allowed[index])
            found.append(weight)
            if reason is not None:
                undecided[index] = True
                reasons.setdefault(reason, np.zeros(count, dtype=bool))[index] = True
        chosen = _placed(split(np.stack(found), bits), rest, count)
        weights = ex.where(np.isin(np.arange(count), rest)[:, None], chosen, weights)
    weights = _undetermined_where(weights, np.broadcast_to(undecided[:, None], allowed.shape))
    return weights, undecided, tied, reasons


def _reciprocals(counts: np.ndarray, bits: int) -> np.ndarray:
    """1/k for each whole number k ≥ 1 of ``counts``, as a split (exact where a float)."""
    distinct, inverse = np.unique(counts, return_inverse=True)
    table = split(np.array([ONE / int(k) for k in distinct], dtype=object), bits)
    return table[:, inverse.reshape(counts.shape)]


def _placed(rows: np.ndarray, at: np.ndarray, count: int) -> np.ndarray:
    """A split of some rows placed at row indices ``at`` of ``count`` rows (zeros elsewhere)."""
    out = np.zeros((rows.shape[0], count, *rows.shape[2:]))
    out[:, at] = rows
    return out


def _hard_classes(zero: np.ndarray, undecided: np.ndarray) -> np.ndarray:
    """Classes of hard-attention weights: k for a weight 1/k, 0 for a weight 0, and a class of
    its own for each weight of an undecided row."""
    counts = (~zero).sum(axis=1, keepdims=True)
    ids = np.where(~zero, counts, 0)
    own = -1 - np.arange(zero.size, dtype=np.int64).reshape(zero.shape)
    return np.where(undecided[:, None], own, ids)


def _soft_row(row: np.ndarray, allowed: np.ndarray, fixed: bool) -> np.ndarray:
    """The softmax of fixed scores (the limit of a continuous map), or uniform weights over the
    allowed positions when the scores vanish."""
    weights = _zeros(row.shape)
    places = np.nonzero(allowed)[0]
    if not len(places):
        return weights
    if not fixed:
        share = ONE / len(places)
        for j in places:
            weights[j] = share
        return weights
    top = max(float(row[j].mid()) for j in places)
    exps = [(row[j] - top).exp() for j in places]
    total = sum(exps[1:], exps[0])
    for j, e in zip(places, exps):
        weights[j] = e / total
    return weights


# ---------------------------------------------------------------------------------------------
# Routers

_ROUTER_TIE = "a router tie at the k-th place whose experts carry weight"


@_rule(aten.topk.default)
def _topk(ctx: Context, x: Any, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> tuple[Lead, Tensor]:
    """Top-k of a router's softmax weights, the case of every router in transformers (the leading
    order of :func:`saturated.rules.routing._topk`). In the limit a row's weight is 1/m at its m
    maximal positions and zero at every order elsewhere (:attr:`Lead.zeros`), and a router sums
    each chosen expert times its weight: the positions with weight come first, then positions of
    weight zero, whichever, as they add nothing. Undetermined: a row with more than k positions of
    weight (a tie at the k-th place that carries weight, which no precision splits), a tied row
    whose split no tracked order decides, and a row the softmax left undecided (its reason is
    recorded there). Other values (scores ranked directly) have no ball rule here."""
    if not isinstance(x, Lead) or x.zeros is None or not largest or x.degree != 0:
        raise SaturationError("top-k has a ball rule for the largest softmax weights of a router only")
    dim = dim % len(x.shape)
    zero = torch.from_numpy(np.broadcast_to(x.zeros, x.shape).copy())
    # the weighted positions first, then the others, each in position order
    indices = torch.argsort(zero.to(torch.int8), dim=dim, stable=True).narrow(dim, 0, int(k))
    chosen = _moved(aten.gather.default, x, (dim, indices), {})
    shape = tuple(indices.shape)
    values = chosen.operand(ctx.bits)
    inherited = ex.undetermined(values)
    crowded = np.broadcast_to(((~zero).sum(dim, keepdim=True) > k).numpy(), shape) & ~inherited
    ctx.undecided(crowded, _ROUTER_TIE, final=True)
    tied = np.zeros(shape, dtype=bool) if chosen.ties is None else \
        np.broadcast_to(chosen.ties, shape) & ~inherited & ~crowded
    ctx.undecided(tied, f"{_UNTRACKED}, read by a router", final=True)
    unknown = inherited | crowded | tied
    assert chosen.zeros is not None  # moved with x, which has them
    zeros = np.broadcast_to(chosen.zeros, shape) & ~unknown
    return Lead(0.0, split=_undetermined_where(values, unknown), zeros=zeros), indices
