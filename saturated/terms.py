"""Asymptotic expansions in c: the values a graph's tensors take as the parameters grow like c·θ.

A :class:`Term` stands for v(c) = Σᵢ aᵢ·c^dᵢ + O(c^floor) as c → ∞, per element: a few known
parts (coefficient tensors aᵢ with one degree dᵢ each, strictly decreasing) and a bound on what
is not tracked. A zero coefficient in a known part means the element has no term of that degree.

At ``orders=1`` only the leading part is kept (the fast path: one tensor op per graph op); more
orders keep lower parts, which is what decides ties of hard attention. A part of degree +∞ holds
the masking constants models add to attention scores: ±∞ in the limit, whatever c is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from saturated.errors import SaturationError
from saturated.rounding import Rounding, product_rounding

__all__ = [
    "NeedsOrders", "Term", "UnknownDegree", "add", "bilinear", "computed_degrees", "exp_series", "lift",
    "make", "may_hold_nan", "mul", "nonzero", "power", "reduce", "scale", "unexpanded",
]

Part = tuple[Tensor, float]


class NeedsOrders(SaturationError):
    """The limit is decided by parts below those tracked; more orders may determine it."""


@dataclass(frozen=True)
class Term:
    """v(c) = Σᵢ parts[i][0]·c^parts[i][1] + O(c^floor), per element.

    ``roundings`` holds, for some parts, a bound on their rounding error (see
    :mod:`saturated.rounding`); ops that keep a part's values (shapes, scalings, sums) keep it.
    ``order``, where set, is a term and a dimension along which the values are ordered as that
    term is (softmax weights and their scores: the weights are e^(−Θ(c)), zero at every order,
    off the maximum, so they keep no order of their own there); only ops that rank entries read it.

    >>> t = Term(((torch.tensor([2.0, -1.0]), 3.0),), floor=1.0)
    >>> t.degree, t.lead
    (3.0, tensor([ 2., -1.]))
    """

    parts: tuple[Part, ...]
    floor: float = -math.inf
    roundings: tuple[Rounding, ...] = field(default=(), repr=False, compare=False)
    order: tuple[Term, int] | None = field(default=None, repr=False, compare=False)

    @property
    def lead(self) -> Tensor:
        """Coefficients of the highest part."""
        return self.parts[0][0]

    @property
    def degree(self) -> float:
        """Degree of the highest part."""
        return self.parts[0][1]

    @property
    def shape(self) -> torch.Size:
        return self.lead.shape

    def map(self, fn: Callable[[Tensor], Tensor], key: Hashable | None = None) -> Term:
        """Apply a shape, indexing or cast op to every part's coefficients (and rounding bounds;
        ``key``, when given, names the op and its arguments, see :func:`saturated.radii.moved`).

        A part known exactly (a parameter, an input, a constant) stays known exactly: its bound
        is made again from the moved coefficients, not moved along with them, so that an
        embedding lookup reads neither the magnitudes nor the positions of its whole table.
        """
        parts = tuple((fn(a), d) for a, d in self.parts)
        before, after = {d: a for a, d in self.parts}, {d: a for a, d in parts}

        def moved(r: Rounding) -> Rounding:
            # a cast to float64 keeps the values; a narrowing one would not
            if r.of_exact_values and r.degree in after \
                    and after[r.degree].dtype in (before[r.degree].dtype, torch.float64):
                values, shape = r.values, before[r.degree].shape  # a part may be broadcast
                return Rounding.of_exact(after[r.degree], r.degree,
                                         None if values is None else lambda: fn(values().expand(shape)))
            return r.map(fn, key)

        return Term(parts, self.floor, tuple(moved(r) for r in self.roundings))

    def rounding(self, degree: float) -> Rounding | None:
        """The rounding bound of the part of ``degree``, if one is known."""
        return next((r for r in self.roundings if r.degree == degree), None)

    def with_roundings(self, roundings: Iterable[Rounding | None]) -> Term:
        """This term with the given bounds attached, for the parts it has."""
        degrees = {d for _, d in self.parts}
        kept = tuple(r for r in roundings if r is not None and r.degree in degrees)
        return self if not kept else Term(self.parts, self.floor, kept)


@dataclass(frozen=True)
class UnknownDegree(Term):
    """A negative or fractional power whose base vanishes at every tracked order at some elements
    (above a floor, so a lower part may lead there): NaN at those elements, whose degree is not
    known either. A NaN of a known degree is dropped, soundly, by a sum with a higher part; this
    one may outgrow every part (x^(−1/2) of a base of degree d has degree −d/2), so no op may drop
    it. Only an elementwise product reads it (:func:`saturated.exact_zeros.product`: a factor
    exactly zero for every c makes it 0 there); every other op raises :class:`NeedsOrders` with
    ``reason``, and a model's output holds it as NaN where undetermined values may be marked.
    """

    reason: str = ""


def may_hold_nan(a: Tensor) -> bool:
    """False only if ``a`` holds no NaN: one reduction, where ``isnan`` would need three passes.

    A sum is NaN when an entry is, or when +∞ and −∞ meet (a false alarm that costs callers a
    closer look, never a missed NaN).

    >>> may_hold_nan(torch.tensor([1.0, 2.0])), may_hold_nan(torch.tensor([1.0, math.nan]))
    (False, True)
    """
    return a.is_floating_point() and bool(torch.isnan(a.sum()))


def unexpanded(a: Tensor) -> Tensor:
    """``a`` without the dimensions it was broadcast along (stride 0, as ``make`` leaves parts):
    the same values, each stored element once; it still broadcasts back to ``a``'s shape.

    >>> unexpanded(torch.tensor([1.0, 2.0]).expand(4, 2)).shape
    torch.Size([1, 2])
    """
    for index, (size, stride) in enumerate(zip(a.shape, a.stride())):
        if stride == 0 and size > 1:
            a = a.narrow(index, 0, 1)
    return a


def nonzero(a: Tensor) -> bool:
    """Whether ``a`` has a nonzero entry, read once per stored element (:func:`unexpanded`).

    >>> nonzero(torch.zeros(3).expand(4, 3)), nonzero(torch.tensor([0.0, 2.0]).expand(5, 2))
    (False, True)
    """
    return bool(unexpanded(a).any())


def _broadcast(shapes: list[torch.Size]) -> torch.Size:
    """The broadcast of ``shapes`` (a plain loop: ``torch.broadcast_shapes`` costs more than most
    of the tensor ops it serves here).

    >>> _broadcast([torch.Size([2, 1, 3]), torch.Size([4, 1])])
    torch.Size([2, 4, 3])
    """
    first = shapes[0]
    if all(shape == first for shape in shapes):
        return first
    out = [1] * max(len(shape) for shape in shapes)
    for shape in shapes:
        for index, size in enumerate(shape, len(out) - len(shape)):
            if size != 1 and out[index] not in (1, size):
                raise SaturationError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
            if size != 1:
                out[index] = size
    return torch.Size(out)


def make(parts: Iterable[Part], floor: float, orders: int,
         computed: Collection[float] = ()) -> Term:
    """A term from parts in any order: equal degrees merged, parts at or below ``floor`` dropped.

    With ``orders > 1`` all-zero leading parts are dropped as known zeros, except at the degrees
    in ``computed``: there a zero is what rounding left of a sum or product and may hide a nonzero
    exact value, so it stays for the rules to decide against its rounding bound. At most
    ``orders`` finite-degree parts are kept, and the first one cut off raises the floor. A value
    with no part left is a zero part of degree ``floor`` (−∞: exactly zero).

    >>> make([(torch.tensor([1.0]), 1.0), (torch.tensor([2.0]), 3.0)], -math.inf, 1)
    Term(parts=((tensor([2.]), 3.0),), floor=1.0)
    """
    parts = list(parts)
    shape = _broadcast([coef.shape for coef, _ in parts])
    merged: dict[float, Tensor] = {}
    for coef, deg in parts:
        if deg > floor:
            merged[deg] = merged[deg] + coef if deg in merged else coef
    kept: list[Part] = []
    finite = 0
    degrees = sorted(merged, reverse=True)
    for deg in degrees:
        coef = merged[deg]
        # Leading parts known to be zero are dropped (only the lead's zeros change any rule).
        if not kept and _known_zero(coef, deg, orders, computed, deg == degrees[-1]):
            continue
        if math.isfinite(deg):
            if finite == orders:
                floor = max(floor, deg)
                break
            finite += 1
        kept.append((coef, deg))
    if not kept:
        like = parts[0][0]
        return Term(((torch.zeros(shape, dtype=like.dtype, device=like.device), floor),), floor)
    return Term(tuple((c if c.shape == shape else c.expand(shape), d) for c, d in kept), floor)


class _Deferred(Collection[float]):
    """Degrees found on first use: :func:`make` reads them only for an all-zero leading part,
    which it tests first, so that the usual nonzero lead costs one test of the result instead of
    one per operand part (:func:`bilinear`)."""

    def __init__(self, find: Callable[[], set[float]]) -> None:
        self._find = find
        self._found: set[float] | None = None

    def _degrees(self) -> set[float]:
        if self._found is None:
            self._found = self._find()
        return self._found

    def __contains__(self, degree: object) -> bool:
        return degree in self._degrees()

    def __iter__(self) -> Iterator[float]:
        return iter(self._degrees())

    def __len__(self) -> int:
        return len(self._degrees())


def _known_zero(coef: Tensor, deg: float, orders: int, computed: Collection[float], last: bool) -> bool:
    """Whether a leading part is a known zero that :func:`make` drops: all zero, and either a
    masking part or of a degree not in ``computed``; with one order, only if a lower part is there
    to lead instead (``last`` false: Gemma's 1 + γ with γ initialized to 0 is 1, not 0·c), so
    that a single part is never tested. The cheaper test runs first (a :class:`_Deferred` set
    costs more than the zero test)."""
    if math.isfinite(deg) and orders == 1 and last:
        return False
    if isinstance(computed, _Deferred):
        return not nonzero(coef) and (not math.isfinite(deg) or deg not in computed)
    return (not math.isfinite(deg) or deg not in computed) and not nonzero(coef)


def lift(value: Tensor | float | int | bool, mask_threshold: float) -> Term:
    """An exact (c-independent) value as a term of degree 0.

    Entries of magnitude at least ``mask_threshold`` are the masking constants models add (the
    dtype's minimum in Hugging Face models, 10³⁰ in XLNet): fixed while scores grow like c⁴, they
    would be swamped, yet they mean "never attend". They become a part of degree +∞.

    >>> [d for _, d in lift(torch.tensor([0.0, -3e38]), 1e9).parts]
    [inf, 0.0]
    """
    if not isinstance(value, Tensor):  # a Python number (e.g. masked_fill's -inf) is checked alike
        value = torch.tensor(float(value))
    coef = value if value.is_floating_point() else value.to(torch.get_default_dtype())
    huge = coef.abs() >= mask_threshold
    if not bool(huge.any()):
        return Term(((coef, 0.0),), roundings=(Rounding.of_exact(coef, 0.0),))
    bounded = torch.where(huge, 0, coef)
    return Term(((torch.where(huge, torch.sign(coef), 0), math.inf), (bounded, 0.0)),
                roundings=(Rounding.of_exact(bounded, 0.0),))


def scale(x: Term, factor: float | Tensor) -> Term:
    """x·factor for an exact factor without masking constants (a scalar or a tensor); rounding
    bounds follow a scalar factor, and an :class:`UnknownDegree` stays one."""
    roundings = tuple(r.scaled(float(factor)) for r in x.roundings) \
        if isinstance(factor, (int, float)) else ()
    parts = tuple((a * factor, d) for a, d in x.parts)
    if isinstance(x, UnknownDegree):  # a constant multiple of a NaN of unknown degree is one too
        return UnknownDegree(parts, x.floor, roundings, reason=x.reason)
    return Term(parts, x.floor, roundings)


def _summed_roundings(x: Term, y: Term, shape: torch.Size) -> list[Rounding | None]:
    """The bounds of x + y (of ``shape``), part by part: a part from one side keeps its bound;
    parts of equal degree on both sides combine theirs (unknown if either is)."""
    out: list[Rounding | None] = []
    ys = {d for _, d in y.parts}
    xs = {d for _, d in x.parts}
    for degree in xs | ys:
        first, second = x.rounding(degree), y.rounding(degree)
        if degree in xs and degree in ys:
            out.append(first.plus(second, shape) if first is not None and second is not None else None)
        else:
            out.append(first if degree in xs else second)
    return out


def computed_degrees(terms: Sequence[Term], summed: bool) -> set[float]:
    """The degrees at which an all-zero part of a value made from ``terms`` may be rounding's
    zero, not a known one (see :func:`make`): where a part carries a bound of computed values (a
    zero computed earlier stays unsure), and, for a sum (``summed``), where parts of several terms
    meet unless all are exact (then fl(a + b) = 0 only if a = −b exactly)."""
    held: dict[float, list[Rounding | None]] = {}
    for term in terms:
        for _, degree in term.parts:
            held.setdefault(degree, []).append(term.rounding(degree))
    return {degree for degree, bounds in held.items()
            if any(r is not None and not r.exact for r in bounds)
            or (summed and len(bounds) > 1 and any(r is None for r in bounds))}


def add(x: Term, y: Term, orders: int) -> Term:
    """Sum rule: parts of equal degree add; the highest degrees lead (paper Table 1, Sum).

    >>> add(Term(((torch.tensor([1.0]), 2.0),)), Term(((torch.tensor([5.0]), 1.0),)), 1)
    Term(parts=((tensor([1.]), 2.0),), floor=1.0)
    """
    total = make((*x.parts, *y.parts), max(x.floor, y.floor), orders, computed_degrees([x, y], summed=True))
    if not (x.roundings or y.roundings):
        return total
    return total.with_roundings(_summed_roundings(x, y, total.shape))


def _product_floor(x: Term, y: Term) -> float:
    """What a product cannot know: the larger of (x's size × y's unknown) and (y's × x's)."""
    bounds = [a + b for a, b in ((x.degree, y.floor), (y.degree, x.floor)) if b != -math.inf]
    if any(not b < math.inf for b in bounds):
        raise SaturationError("a masking constant (±∞) multiplies a value known only approximately")
    return max(bounds, default=-math.inf)


def _computed_products(x: Term, y: Term, chosen: list[tuple[int, int, float]]) -> set[float]:
    """The degrees at which a zero product may be rounding's (products can cancel or underflow
    to 0): those with a pair of parts neither of which is all zero (each part tested once)."""
    left = {i: nonzero(x.parts[i][0]) for i in {i for i, _, _ in chosen}}
    right = {j: nonzero(y.parts[j][0]) for j in {j for _, j, _ in chosen}}
    return {deg for i, j, deg in chosen if left[i] and right[j]}


def bilinear(fn: Callable[[Tensor, Tensor], Tensor], x: Term, y: Term, orders: int,
             stack_left: bool = False, length: int | None = None) -> Term:
    """A bilinear op (product, matmul, einsum) on expansions: every pair of parts, degrees adding.

    Only the pairs that can land among the ``orders`` highest degrees are computed. With
    ``stack_left``, ``fn`` must broadcast over a new leading dimension of its first argument.
    Each part of the result carries the bound on its rounding (:mod:`saturated.rounding`), from
    ``length``, the number of products summed per output element (inferred for matmul, linear and
    the elementwise product; no bound for other ops without it).

    >>> x = Term(((torch.eye(2), 1.0),))
    >>> bilinear(torch.matmul, x, Term(((torch.ones(2, 2), 2.0),)), 1).degree
    3.0
    """
    floor = _product_floor(x, y)
    pairs = [(i, j, dx + dy) for i, (_, dx) in enumerate(x.parts) for j, (_, dy) in enumerate(y.parts)]
    degrees = sorted({d for *_, d in pairs if d > floor and math.isfinite(d)}, reverse=True)
    if len(degrees) > orders:
        floor = max(floor, degrees[orders])
    chosen = [(i, j, deg) for i, j, deg in pairs if deg > floor]
    if not chosen:  # nothing known above the floor: a zero of the product's shape, O(c^floor)
        return make([(fn(x.lead, y.lead) * 0, floor)], floor, orders)
    if any(not (math.isfinite(x.parts[i][1]) or math.isfinite(y.parts[j][1])) for i, j, _ in chosen):
        raise SaturationError("two masking constants (±∞) multiply each other")
    n = length if length is not None else _contraction(fn, x.lead)
    computed: Collection[float] = _Deferred(lambda: _computed_products(x, y, chosen)) \
        if n is not None and orders > 1 else set()
    if stack_left and len(y.parts) == 1 and len(chosen) > 1:
        # One call on the stacked parts of x: the same arithmetic, far fewer kernel launches.
        products = fn(torch.stack([x.parts[i][0] for i, _, _ in chosen]), y.lead).unbind(0)
        result = make(zip(products, (deg for *_, deg in chosen)), floor, orders, computed)
    elif fn is torch.matmul and len(chosen) > 1:
        # Σ_{i,j: dᵢ+eⱼ=n} xᵢ yⱼ is one matmul of the parts concatenated along the contraction.
        groups: dict[float, list[tuple[int, int]]] = {}
        for i, j, deg in chosen:
            groups.setdefault(deg, []).append((i, j))
        result = make([(torch.cat([x.parts[i][0] for i, _ in pairs], -1)
                        @ torch.cat([y.parts[j][0] for _, j in pairs], -2), deg)
                       for deg, pairs in groups.items()], floor, orders, computed)
    else:
        result = make([(fn(x.parts[i][0], y.parts[j][0]), deg) for i, j, deg in chosen], floor, orders,
                      computed)
    if n is None:
        return result
    # A part with no pair behind it (the zero make leaves at the floor when every tracked product
    # is a known zero) stands for what is not known: it gets no bound.
    kept = {degree for _, degree in result.parts if math.isfinite(degree)} & {deg for *_, deg in chosen}
    return result.with_roundings(
        product_rounding(fn, [((x.parts[i][0], x.rounding(x.parts[i][1])),
                               (y.parts[j][0], y.rounding(y.parts[j][1])))
                              for i, j, d in chosen if d == degree], degree, n, result.shape)
        for degree in kept)


def _contraction(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor) -> int | None:
    """How many products ``fn`` sums per output element, for the ops whose answer is known."""
    if fn is torch.mul:
        return 1
    if fn is torch.matmul or fn is torch.nn.functional.linear:
        return int(x.shape[-1])
    return None


def mul(x: Term, y: Term, orders: int) -> Term:
    """Elementwise product: coefficients multiply, degrees add (paper Table 1, Product).

    >>> mul(Term(((torch.tensor([2.0]), 1.0),)), Term(((torch.tensor([3.0]), 2.0),)), 1)
    Term(parts=((tensor([6.]), 3.0),), floor=-inf)
    """
    return bilinear(torch.mul, x, y, orders, stack_left=True)


def power(x: Term, exponent: float, orders: int, unknown_degree: bool = False) -> Term:
    """xᵖ = a₀ᵖ·c^(d₀p)·(1 + u)ᵖ with u = Σᵢ (aᵢ/a₀)·c^(dᵢ−d₀), expanded as a binomial series.

    Needs a nonzero leading coefficient (and a positive one for a fractional power); a
    non-negative integer power is a repeated product instead. Elements led by lower parts are
    expanded from their own lead; those zero at every tracked order raise :class:`NeedsOrders`,
    or with ``unknown_degree`` (for a caller that hands the power on as it is) make an
    :class:`UnknownDegree` if a floor above −∞ leaves room for a lower part.

    >>> power(Term(((torch.tensor([4.0]), 2.0), (torch.tensor([1.0]), 0.0))), -0.5, 2).parts
    ((tensor([0.5000]), -1.0), (tensor([-0.0625]), -3.0))
    """
    if exponent >= 0 and exponent == int(exponent):
        result = Term(((torch.ones_like(x.lead), 0.0),))
        for _ in range(int(exponent)):
            result = mul(result, x, orders)
        return result
    a0, d0 = x.parts[0]
    if bool((a0 == 0).any()):
        return _power_by_lead(x, exponent, orders, unknown_degree)
    if not math.isfinite(d0):
        raise SaturationError("a power of a masking constant (±∞)")
    if exponent != int(exponent) and bool((a0 < 0).any()):
        raise SaturationError(f"fractional power {exponent:g} of a value with negative leading coefficient")
    u = Term(tuple((a / a0, d - d0) for a, d in x.parts[1:]) or ((torch.zeros_like(a0), -math.inf),),
             x.floor - d0)
    series = _series(u, lambda n: math.prod((exponent - k) / (k + 1) for k in range(n)), orders)
    return mul(Term(((a0 ** exponent, d0 * exponent),)), series, orders)


def _power_by_lead(x: Term, exponent: float, orders: int, unknown_degree: bool) -> Term:
    """xᵖ where elements lead with different parts: each group is expanded from its own lead, and
    elements zero at every tracked order are NaN in an :class:`UnknownDegree` (see :func:`power`)."""
    first = torch.full(x.shape, len(x.parts), dtype=torch.long, device=x.lead.device)
    for k in reversed(range(len(x.parts))):
        first = torch.where(x.parts[k][0] != 0, k, first)
    vanishing = first == len(x.parts)
    count = int(vanishing.sum())
    reason = f"power {exponent:g} of a value that is zero at every tracked order at {count} elements " \
             "(lower orders decide)"
    if count and (x.floor == -math.inf or not unknown_degree):
        raise NeedsOrders(reason)
    result: Term | None = None
    for k in torch.unique(first[~vanishing]).tolist():
        members = first == k
        # Other elements get lead 1 and no lower parts, so the expansion stays finite; dropped below.
        shifted = Term(tuple((torch.where(members, a, 1.0 if i == 0 else 0.0), d)
                             for i, (a, d) in enumerate(x.parts[k:])), x.floor)
        piece = power(shifted, exponent, orders)
        piece = Term(tuple((torch.where(members, a, 0.0), d) for a, d in piece.parts), piece.floor)
        result = piece if result is None else add(result, piece, orders)
    if not count:
        assert result is not None
        return result
    known = result if result is not None else Term(((torch.zeros_like(x.lead), x.degree * exponent),))
    return UnknownDegree(tuple((torch.where(vanishing, math.nan, a), d) for a, d in known.parts), known.floor,
                         known.roundings, reason=reason)


def _series(x: Term, coefficient: Callable[[int], float], orders: int) -> Term:
    """Σₙ coefficient(n)·xⁿ for an x of negative degree, truncated where xⁿ sinks below what
    the sum can know (its floor, or the ``orders`` parts it keeps)."""
    one = torch.ones_like(x.lead)
    total = make([(one * coefficient(0), 0.0)], x.floor, orders)
    term, n = Term(((one, 0.0),)), 0
    while math.isfinite(x.degree) and coefficient(n + 1) != 0:
        n += 1
        term = mul(term, x, orders)
        if term.degree <= max(total.floor, term.floor):
            break
        total = add(total, scale(term, coefficient(n)), orders)
    return total


def exp_series(x: Term, orders: int) -> Term:
    """exp(x) = Σ xⁿ/n! for an x whose parts all have negative degree (it tends to 0).

    >>> exp_series(Term(((torch.tensor([2.0]), -1.0),)), 3).parts
    ((tensor([1.]), 0.0), (tensor([2.]), -1.0), (tensor([2.]), -2.0))
    """
    if x.degree >= 0:
        raise SaturationError(f"exp series of a value of degree {x.degree:g}; expected a vanishing one")
    return _series(x, lambda n: 1 / math.factorial(n), orders)


def reduce(x: Term, dims: list[int], keepdim: bool, mean: bool) -> Term:
    """Sum (or mean) over ``dims``, part by part.

    >>> reduce(Term(((torch.tensor([1.0, 3.0]), 2.0),)), [0], False, True)
    Term(parts=((tensor(2.), 2.0),), floor=-inf)
    """
    count = math.prod(x.shape[d] for d in dims)
    parts = []
    for a, d in x.parts:
        total = a.sum(dim=dims, keepdim=keepdim)
        parts.append((total / count if mean else total, d))
    shape = x.shape

    def summed(m: Tensor) -> Tensor:
        return m.expand(shape).sum(dim=dims, keepdim=keepdim)

    roundings = tuple(r.summed(summed, count, dims, keepdim) for r in x.roundings)
    if mean:
        roundings = tuple(r.scaled(1 / count) for r in roundings)
    return Term(tuple(parts), x.floor, roundings)
