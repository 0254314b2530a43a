"""``saturate(model, *args, **kwargs)``: the exact saturated network s-f(x; θ) = lim f(x; c·θ).

The model is exported once per input signature (shapes, dtypes and non-tensor arguments) and the
graph is interpreted on leading-order terms (:mod:`saturated.interpreter`). Every output is
returned normalized by its degree: for an output of degree d the value is lim f(x; c·θ)/cᵈ, the
direction the output takes as the parameters grow (d = 0: the limit itself).
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch.export.graph_signature import ConstantArgument, InputKind
from torch.utils import _pytree as pytree

from homogeneity.errors import HomogeneityError
from homogeneity.validation import check_sequence, check_weights, describe
from saturated.errors import SaturationError
from saturated.export_cache import cached_export, stored_key
from saturated.failed_levels import call_digest, read_failed_levels, store_failed_level
from saturated.interpreter import run_terms
from saturated.precision import FIRST_PRECISION, next_precision, precisions, run_balls
from saturated.radii import norm_below
from saturated.rounding import Rounding, exact_sign, known_zeros
from saturated.rules import Settings
from saturated.rules.common import settles_exactly, within_bound
from saturated.sources import WeightSource
from saturated.spectral import largest_magnitude
from saturated.terms import NeedsOrders, Term

__all__ = ["SaturatedModel", "SaturatedOutput", "saturate"]


@dataclass(frozen=True)
class SaturatedOutput:
    """The saturated outputs and their degrees in c.

    Attributes:
        value: the model's output structure (e.g. a Hugging Face ``ModelOutput``) holding
            lim f(x; c·θ)/cᵈ for each tensor.
        degrees: the same structure holding each tensor's degree d (0.0 for exact outputs).
        orders: the most orders of the expansion any input needed to decide its limit.
        refined: the batch entries (index along dimension 0 of the inputs) that the leading order
            in the model's dtype left undetermined, recomputed in float64 with more orders as
            needed; every entry when the batch had to be recomputed as a whole.
        precisions: for each ball-arithmetic level that ran (:mod:`saturated.precision`), its
            precision in bits, the batch entries it ran and the seconds it took.
        reasons: per batch entry still holding an undetermined value (NaN), why: the decisions
            left undecided, each with its node and the precision it was last tried at.
    """

    value: Any
    degrees: Any
    orders: int
    refined: tuple[int, ...] = ()
    precisions: tuple[tuple[int, tuple[int, ...], float], ...] = ()
    reasons: dict[int, tuple[str, ...]] = field(default_factory=dict)


Normalized = tuple[Any, "float | None"]


class _WithinRounding(NeedsOrders):
    """An output's leading part is within rounding of zero; ``final`` marks where no number of
    orders can settle that in this precision (see :func:`_final`)."""

    def __init__(self, message: str, final: torch.Tensor | None) -> None:
        super().__init__(message)
        self.final = final


def _final(coef: torch.Tensor, bound: torch.Tensor, rounding: Rounding, settings: Settings
           ) -> torch.Tensor | None:
    """Where a zero test of ``coef`` against ``bound`` is final (None: nowhere): the exact step
    cannot settle it, and the element's vector along the last dimension has a positive bound
    somewhere (a vector known to be zero, with bound 0, lets a lower part lead once its batch
    entry is computed alone). See :func:`_normalized`."""
    if settles_exactly(rounding, replace(settings, carried=True)):
        return None
    # A NaN bound (0·∞ once a bound overflowed) bounds nothing: as final as a positive one.
    positive = torch.broadcast_to((bound > 0) | torch.isnan(bound), coef.shape)
    return positive.any(-1, keepdim=True).expand(coef.shape) if coef.dim() else positive


def _normalized(term: Term, index: int, settings: Settings, vectors: bool = False
                ) -> tuple[torch.Tensor, float, bool, torch.Tensor | None, torch.Tensor | None]:
    """lim v/cᴰ for the highest degree D with a nonzero coefficient: that part's coefficients, its
    degree, whether they hold NaN (outputs a tie left undetermined), where that NaN is final
    (None: nowhere), and where it is a vector proved zero for every c (None: nowhere; see
    :func:`_zero_vectors`), which no precision decides either.

    A part whose every coefficient is within its rounding bound of zero (with the error carried
    in by its operands), a computed all-zero part included, may be exactly zero or not, which
    decides whether a lower part leads: that is undetermined in this precision (NeedsOrders).
    With ``vectors``, the same holds for each vector along the last dimension (a token's hidden
    state): one whose every coefficient is within its bound of zero is NaN, as its own direction
    (a cosine's) may be set by a lower part.

    Such a zero test is *final* where the exact step cannot settle it (the operands carry error
    in, or their exact values are unknown): the coefficients it reads hold no NaN, so no decision
    before it was left open, and from two orders on more orders change neither the leading parts
    nor their bounds (every kept part is exact, and decided decisions stay decided); only another
    precision could. A batch entry whose every undetermined value is final is not recomputed with
    more orders, and one whose every undetermined value is a zero vector not with more precision.
    """
    for coef, degree in term.parts:
        size = largest_magnitude(coef)
        has_nan = math.isnan(size)
        if has_nan:  # look past the NaN (undetermined elements) for the others' size, or an overflow
            size = largest_magnitude(coef.nan_to_num(0.0, math.inf, -math.inf))
        rounding = term.rounding(degree)
        # NaN in some elements leaves the others' zero test to do: their bound is still read.
        bound = within = None
        if rounding is not None and math.isfinite(size):
            bound, within = _zero_test(coef, rounding, settings)
        if within is not None and bool(within.all()):
            assert rounding is not None and bound is not None
            if (size == 0 and not bool(bound.any())) or _exactly_zero(coef, rounding, settings):
                continue  # zero with no error, or exactly zero
            raise _WithinRounding(f"output {index} is within rounding of zero at its leading degree "
                                  f"{degree:g}", _final(coef, bound, rounding, settings))
        if size == 0 and not has_nan:
            continue  # a known zero (or one with no bound to judge it by)
        if not math.isfinite(degree):
            raise SaturationError(f"output {index} holds a masking constant (±∞ in the limit)")
        if math.isinf(size):
            raise SaturationError(f"output {index} has non-finite leading coefficients (overflow or 0·∞)")
        final = zero = None
        if vectors and rounding is not None and bound is not None and within is not None and coef.dim() > 0:
            hidden = within.all(-1, keepdim=True)
            if bool(hidden.any()):
                final = _final(coef, bound, rounding, settings)
                final = None if final is None else final & hidden
                zero = _zero_vectors(term, coef.shape, degree, hidden, rounding, settings)
                final = zero if final is None else final if zero is None else final | zero
                coef, has_nan = coef.masked_fill(hidden, math.nan), True
        return coef, degree, has_nan, final, zero
    if term.floor == -math.inf:
        return term.lead, -math.inf, False, None, None
    raise NeedsOrders(f"output {index} is zero at every tracked order")


def _zero_test(coef: torch.Tensor, rounding: Rounding, settings: Settings
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each element's error bound, with what its operands carried in, and where ``coef`` may be
    exactly zero (:func:`_within`).

    The cheap bound is read first (:attr:`Rounding.cheap`: Cauchy–Schwarz for a matrix product,
    where the full bound costs a second product of the layer's size). It is above the full one
    up to the rounding of the two, which a factor of 2 covers (as wherever the cheap bound stands
    for the full one, squares that underflow in its norms are not covered). So where every vector
    along the last dimension has an element beyond twice it, no vector is within the full bound
    either, and the test's answer (no vector within rounding of zero) is the full one's: that
    bound and those elements are returned. Only otherwise is the full bound computed. A NaN bound
    counts as reaching every element but a NaN one, which no bound makes zero.
    """
    if coef.dim():
        cheap = rounding.bound(coef.dtype, settings.operand_rtol, carried=True, cheap=True)
        maybe = within_bound(coef, 2 * cheap)
        if not bool(maybe.all(-1).any()):
            return cheap, maybe
    bound = rounding.bound(coef.dtype, settings.operand_rtol, carried=True)
    return bound, _within(coef, bound, rounding, settings)


def _within(coef: torch.Tensor, bound: torch.Tensor, rounding: Rounding, settings: Settings) -> torch.Tensor:
    """Where ``coef`` may be exactly zero: each element within its ``bound`` of zero, save the
    vectors along the last dimension whose norm exceeds their error's ℓ2 radius, which are
    nonzero whatever their elements' bounds say (:meth:`Rounding.radius`; a carried error that
    grew along a chain of linear layers is far tighter as a radius than element by element)."""
    within = within_bound(coef, bound)
    if coef.dim() == 0 or not bool(within.all(-1).any()):
        return within
    radius = rounding.radius(coef.dtype, settings.operand_rtol, coef.shape)
    return within & ~(norm_below(coef) > radius)


def _zero_vectors(term: Term, shape: torch.Size, degree: float, hidden: torch.Tensor, rounding: Rounding,
                  settings: Settings) -> torch.Tensor | None:
    """Where (None: nowhere) the ``hidden`` vectors are exactly zero for every c: every partial of
    their exact values is 0 at ``degree``, they are zero in every lower part, and nothing below the
    parts is unknown (a padding token's zero embedding). No order or precision gives them a
    direction, so their batch entries are recomputed neither with more orders nor in ball
    arithmetic for them."""
    if term.floor != -math.inf or not settles_exactly(rounding, replace(settings, carried=True)):
        return None
    zero = hidden.clone()
    for coef, lower in term.parts:
        if lower < degree:
            zero &= (coef == 0).all(-1, keepdim=True)
    if not bool(zero.any()):
        return None
    assert rounding.index is not None and rounding.partials is not None
    at = rounding.index().expand(shape)[zero.expand(shape)]
    exact = known_zeros(rounding.partials, at).reshape(-1, shape[-1]).all(-1)
    zero = zero.masked_scatter(zero, exact)
    return zero.expand(shape) if bool(zero.any()) else None


# The most elements of an output part the exact step sums one by one to tell a zero part.
_EXACT_OUTPUT_LIMIT = 4096


def _exactly_zero(coef: torch.Tensor, rounding: Rounding, settings: Settings) -> bool:
    """Whether an output part within rounding of zero is exactly zero, from the exact values of
    its operands (float64 with ``exact_ties``, for parts of a few thousand elements at most),
    when those operands carry no error in from earlier ops (outputs count it, see above)."""
    if coef.numel() > _EXACT_OUTPUT_LIMIT or not settles_exactly(rounding, replace(settings, carried=True)):
        return False
    assert rounding.index is not None and rounding.partials is not None
    at = rounding.index().expand(coef.shape).flatten()
    return not any(exact_sign(rounding.partials(at)))


def _normalize_all(outputs: list[Any], settings: Settings, lenient: bool = False
                   ) -> tuple[list[Normalized], list[int], dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """Each output normalized by its degree (exact outputs as they are), the indices of the
    outputs that hold NaN, and by output index where that NaN is final and where it is a vector
    proved zero for every c (see :func:`_normalized`).
    ``lenient``: an output whose limit is undetermined (more orders would be needed) is all NaN
    with degree NaN instead of raising :class:`NeedsOrders`, and so is each vector along the last
    dimension whose direction is undetermined (see :func:`_normalized`)."""
    pairs: list[Normalized] = []
    with_nan: list[int] = []
    finals: dict[int, torch.Tensor] = {}
    zeros: dict[int, torch.Tensor] = {}
    for index, out in enumerate(outputs):
        zero = None
        if isinstance(out, Term):
            try:
                coef, degree, nan, final, zero = _normalized(out, index, settings, vectors=lenient)
            except NeedsOrders as err:
                if not lenient:
                    raise
                coef, degree, nan = torch.full(out.shape, math.nan, dtype=out.lead.dtype,
                                               device=out.lead.device), math.nan, True
                final = err.final if isinstance(err, _WithinRounding) else None
            pairs.append((coef, degree))
            if nan:
                with_nan.append(index)
            if final is not None:
                finals[index] = final
            if zero is not None:
                zeros[index] = zero
        else:
            pairs.append((out, 0.0 if isinstance(out, torch.Tensor) else None))
    return pairs, with_nan, finals, zeros


def _schedule(most: int) -> list[int]:
    """Orders to try: 1, 2, 4, … up to ``most`` (each failure costs less than the next attempt).

    >>> _schedule(12)
    [1, 2, 4, 8, 12]
    """
    steps = [1]
    while steps[-1] < most:
        steps.append(min(2 * steps[-1], most))
    return steps


def _signature(spec: pytree.TreeSpec, leaves: list[Any]) -> tuple[Any, ...]:
    shapes = tuple(
        (tuple(leaf.shape), leaf.dtype, str(leaf.device)) if isinstance(leaf, torch.Tensor) else repr(leaf)
        for leaf in leaves
    )
    return (str(spec), shapes)


def _check_masks(kwargs: dict[str, Any]) -> None:
    """Reject attention masks with a row that allows no position at all (the limit has no weights)."""
    for name, value in kwargs.items():
        if "attention_mask" in name and isinstance(value, torch.Tensor) and value.dim() == 2:
            empty = ~(value.bool().any(dim=-1))
            if bool(empty.any()):
                raise SaturationError(
                    f"{name} masks every position of row {int(torch.nonzero(empty)[0])}; expected "
                    "at least one real token per sequence"
                )


def _batch_size(leaves: list[Any]) -> int | None:
    """The common size of dimension 0 of every tensor input, if there is one above 1."""
    sizes = {leaf.shape[0] if leaf.dim() else None for leaf in leaves if isinstance(leaf, torch.Tensor)}
    size = sizes.pop() if len(sizes) == 1 else None
    return size if size is not None and size > 1 else None


def _undetermined_entries(values: list[tuple[torch.Tensor, tuple[int, ...]]], count: int,
                          total: int | None) -> list[int] | None:
    """Entries where these outputs (each with its candidate batch dimensions, see
    :func:`_batch_axes`) hold NaN (left undetermined) in a run on ``count`` of a batch's ``total``
    entries; None if one of them has no batch dimension to attribute it to."""
    entries: set[int] = set()
    for value, candidates in values:
        axis = None if total is None else _batch_axis(candidates, value.shape, count, total)
        if axis is None:
            return None
        nan = torch.isnan(value.movedim(axis, 0).reshape(count, -1).sum(dim=1))  # NaN where an entry is
        entries.update(torch.nonzero(nan).flatten().tolist())
    return sorted(entries)


def _user_inputs(program: torch.export.ExportedProgram) -> list[Any]:
    """The example values (fake tensors) of the program's tensor user inputs, in order."""
    by_name = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    return [by_name[spec.arg.name].meta.get("val") for spec in program.graph_signature.input_specs
            if spec.kind == InputKind.USER_INPUT and not isinstance(spec.arg, ConstantArgument)]


def _size_key(size: Any) -> Any:
    """A dimension's size as the graph knows it: its symbol (expression) if dynamic, else the int."""
    return size.node.expr if isinstance(size, torch.SymInt) else int(size)


def _batch_axes(program: torch.export.ExportedProgram) -> list[tuple[int, ...]]:
    """Per flattened output of ``program``, the dimensions that may index its batch entries: those
    whose size in the graph is the inputs' batch size (their common dimension 0). In a graph
    exported with a dynamic batch that size is a symbol, so only the batch dimension carries it;
    in a per-shape graph it is a number another dimension may equal (a time-major output as long
    as the batch), which :func:`_batch_axis` tells apart with the shape of a sub-batch's output.
    Outputs the graph says nothing about (constants, non-tensors) have none."""
    sizes = {_size_key(fake.shape[0]) for fake in _user_inputs(program)
             if isinstance(fake, torch.Tensor) and fake.dim()}
    if len(sizes) != 1:
        return [() for _ in _output_values(program)]
    batch = sizes.pop()
    return [tuple(d for d, size in enumerate(fake.shape) if _size_key(size) == batch)
            if isinstance(fake, torch.Tensor) else () for fake in _output_values(program)]


def _output_values(program: torch.export.ExportedProgram) -> list[Any]:
    """The example values of the program's flattened outputs (None where the graph holds none)."""
    output = next(node for node in program.graph.nodes if node.op == "output")
    return [out.meta.get("val") if isinstance(out, torch.fx.Node) else None for out in output.args[0]]


def _batch_axis(candidates: tuple[int, ...], shape: torch.Size, count: int, total: int) -> int | None:
    """The dimension of an output of ``shape``, computed for ``count`` of a batch's ``total``
    entries, that indexes those entries: the one candidate (see :func:`_batch_axes`) of size
    ``count`` where ``count < total`` (another candidate keeps the size ``total``), the only
    candidate otherwise. None where that does not single one out."""
    if count != total:
        candidates = tuple(d for d in candidates if d < len(shape) and shape[d] == count)
    return candidates[0] if len(candidates) == 1 else None


def _fits(program: torch.export.ExportedProgram, tensors: list[torch.Tensor]) -> bool:
    """Whether the tensor inputs have shapes the program was exported for: fixed sizes equal,
    symbolic ones in their range and equal wherever the program says they are."""
    expected = _user_inputs(program)
    if len(expected) != len(tensors):
        return False
    bound: dict[Any, int] = {}
    for fake, tensor in zip(expected, tensors):
        if not isinstance(fake, torch.Tensor) or fake.dim() != tensor.dim() or fake.dtype != tensor.dtype:
            return False
        for size, actual in zip(fake.shape, tensor.shape):
            if isinstance(size, int):
                if size != actual:
                    return False
                continue
            symbol = size.node.expr
            if symbol not in program.range_constraints:
                return False  # an expression of symbols: not checked, export this shape
            limits = program.range_constraints[symbol]
            if not (bool(limits.lower <= actual) and bool(actual <= limits.upper)):  # sympy bounds
                return False
            if bound.setdefault(symbol, int(actual)) != actual:
                return False
    return True


_PLAIN = (int, float, bool, str, type(None))


def _module_fingerprint(model: nn.Module) -> tuple[Any, ...]:
    """What an export bakes in besides the parameters: each submodule's class, its plain
    attributes (numbers, strings, flags, tuples of them) and the identity and version of tensors
    held as plain attributes (constants the graph lifts)."""
    entries = []
    for name, module in model.named_modules():
        attributes: list[tuple[Any, ...]] = []
        for key, value in vars(module).items():
            if key.startswith("_") or key == "training":
                continue
            plain = isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value)
            if plain or isinstance(value, _PLAIN):
                attributes.append((key, value))
            elif isinstance(value, torch.Tensor):
                attributes.append((key, id(value), value._version))
        entries.append((name, type(module), tuple(attributes)))
    return tuple(entries)


@dataclass
class _Graphs:
    """A model's exported programs, for one parameter layout: by input structure (dynamic batch
    and lengths; None where the model cannot be exported so) and by exact signature (the
    per-shape fallback); the levels (dtype and orders) of calls (graph, outputs, settings)
    that left every batch entry undetermined (see :meth:`SaturatedModel._note_whole_failure`),
    and the calls whose levels stored on disk were read (:mod:`saturated.failed_levels`)."""

    layout: tuple[Any, ...] = ()
    dynamic: dict[tuple[Any, ...], torch.export.ExportedProgram | None] = field(default_factory=dict)
    static: dict[tuple[Any, ...], torch.export.ExportedProgram] = field(default_factory=dict)
    whole_failures: set[tuple[Any, ...]] = field(default_factory=set)
    read_failures: set[tuple[Any, ...]] = field(default_factory=set)


# Shared by every SaturatedModel of one model (the similarity, convergence and head measurements
# of a report export it once), and dropped with the model.
_GRAPHS: weakref.WeakKeyDictionary[nn.Module, _Graphs] = weakref.WeakKeyDictionary()


def _graphs_of(model: nn.Module) -> _Graphs:
    if model not in _GRAPHS:
        _GRAPHS[model] = _Graphs()
    return _GRAPHS[model]


_WHOLESALE = 4
"""The fewest batch entries whose joint failure at a level says it fails for the graph."""


class SaturatedModel:
    """A model's saturated version, called like the model itself.

    Build it with :func:`saturate`. The model is exported once per input structure, with dynamic
    batch and sequence dimensions (per input shape where that fails), and the graph is cached
    with the model, for every ``SaturatedModel`` of it; the model's current parameters are read at
    every call (never modified), and a change in their shapes or dtypes drops the cached graphs.

    ``outputs`` names the fields of the model's output to compute (e.g. ``{"hidden_states"}``;
    None: all of them): only the graph they depend on runs, the other fields are None, and only
    their undetermined entries are recomputed.

    ``undetermined`` says what happens to an output whose limit the most orders in float64 do not
    decide: ``"raise"`` (default) raises :class:`~saturated.errors.SaturationError`; ``"nan"``
    computes the batch entries still undetermined one at a time and returns NaN exactly where the
    limit is not determined: a whole output of an entry (its leading part is within rounding of
    zero, or the entry's pass needs more orders than tracked), a vector along an output's last
    dimension (a token's hidden state) whose coefficients are all within rounding of zero at the
    output's degree (its own direction may come from a lower part), or the elements a tie that
    matters leaves unknown (as with ``Settings(ties="nan")``). Every other value is the exact
    limit, as with ``"raise"``. A measurement over a corpus uses it to go on and report what is
    undetermined. With ``"raise"`` the per-vector test is not made: every value is the limit at
    the output's degree within its rounding bound, and a vector within rounding of zero there
    (a token whose ReLU units are all off, say) keeps its computed value, close to 0 as its limit
    is, but its direction is not a limit's; read per-token directions from a ``"nan"`` run. An
    entry whose only undetermined values are zero tests no order can settle in float64 stops at
    two orders (see :func:`_normalized`). An integer output (an index, a count) has no NaN: where
    an entry's pass itself needs more orders and such an output is asked for, ``"nan"`` raises too.

    ``read_padding=False`` says the caller reads no padded position (a token whose every
    ``*attention_mask`` input fitting an output's first two dimensions is 0), as a measurement over
    real tokens does: NaN left there (a padded query's hard-attention tie, say) sends an entry to
    neither more orders nor the refinement. Those positions keep whatever the levels run decided,
    NaN included; every read position is decided exactly as with the default ``True``.

    ``one_shape=True`` says the caller runs inputs of one shape (a single batch, or batches that
    all share one shape): while it has run only one, each shape the limit runs (that one, and the
    sub-batches whose undetermined entries are recomputed) is exported for its own shape, which
    costs a third to a quarter of a dynamic export; a second input shape from the caller exports
    the dynamic graph, which then serves every shape. False (default): the dynamic graph from the
    first call, as a caller of many shapes needs.

    ``weights``: where the model's tensors are read from when they are not all in the model (its
    layers streamed from disk, :class:`~saturated.sources.WeightSource`); each is read as the graph
    first needs it and dropped after its last use. None: the model's own tensors.

    A call first tracks the leading order in the model's dtype. Where a hard-attention tie is left
    that the leading order cannot break and that matters (the tied positions carry different
    values), or where a decision is within its rounding bound (:mod:`saturated.rounding`), the
    batch entries it touches are recomputed together in float64 by the same graph, parameters cast
    as it reads them (no float64 copy of the model is kept), tracking more orders (up to
    ``settings.orders``) for those still undetermined. This assumes batch entries do not interact,
    as in every transformer in eval mode; inputs without a common batch dimension are recomputed
    whole. Recomputed entries are merged along each output's batch dimension, the one the graph
    sizes by the batch (see :func:`_batch_axes`); an output without one raises.
    """

    def __init__(self, model: nn.Module, settings: Settings,
                 outputs: Collection[str] | None = None, undetermined: str = "raise",
                 weights: WeightSource | None = None, read_padding: bool = True,
                 one_shape: bool = False) -> None:
        if not isinstance(model, nn.Module):
            raise SaturationError(f"expected an nn.Module to saturate, got {type(model).__name__}")
        if undetermined not in ("raise", "nan"):
            raise SaturationError(f"undetermined must be 'raise' or 'nan', got {undetermined!r}")
        if not isinstance(settings, Settings):
            raise SaturationError(f"expected settings to be a saturated.Settings, got {describe(settings)}")
        if weights is None:
            check_weights(model, "a saturated limit", error=SaturationError)
        self.weights = weights
        if outputs is not None:
            outputs = check_sequence(outputs, "outputs", what="output field names", error=SaturationError)
        self.undetermined = undetermined
        self.read_padding = read_padding
        self.one_shape = one_shape
        self._shapes: set[tuple[Any, ...]] = set()  # the input shapes the caller called with
        self.model = model
        self.settings = settings
        self.outputs = None if outputs is None else frozenset(outputs)
        self._graphs = _graphs_of(model)
        self._checked: set[tuple[str, int, int]] = set()
        dtypes = [p.dtype for p in model.parameters() if p.is_floating_point()]
        self._dtype = dtypes[0] if dtypes else torch.get_default_dtype()
        # Ties are judged up to rounding; float64 tells near-ties from ties where float32 cannot.
        self._wide = torch.float64 if torch.finfo(self._dtype).eps > torch.finfo(torch.float64).eps \
            else self._dtype

    @property
    def exports(self) -> int:
        """How many graphs are held (one per input structure where dynamic export works)."""
        return sum(p is not None for p in self._graphs.dynamic.values()) + len(self._graphs.static)

    @property
    def exports_dynamic(self) -> bool:
        """Whether every input structure seen so far exported with dynamic shapes."""
        dynamic = self._graphs.dynamic
        return bool(dynamic) and all(p is not None for p in dynamic.values())

    def _check_parameters(self) -> None:
        """Non-finite parameters have no direction to grow in; checked once per parameter version.
        A parameter or buffer replaced by one of another shape or dtype (or added, or removed), a
        submodule replaced, or a plain attribute the graph may have baked in changed: every
        export is dropped and made again on demand."""
        layout = (tuple((name, tuple(t.shape), t.dtype) for name, t in
                        [*self.model.named_parameters(), *self.model.named_buffers()]),
                  _module_fingerprint(self.model))
        if layout != self._graphs.layout:
            self._graphs.dynamic.clear()
            self._graphs.static.clear()
            self._graphs.whole_failures.clear()
            self._graphs.read_failures.clear()
            self._graphs.layout = layout
            dtypes = [p.dtype for p in self.model.parameters() if p.is_floating_point()]
            self._dtype = dtypes[0] if dtypes else self._dtype
        if self.weights is not None:
            return  # the source checks each tensor as it reads it
        for name, p in self.model.named_parameters():
            key = (name, p.data_ptr(), p._version)
            if key not in self._checked:
                # one reduction, no mask the size of the weight (a fifteenth of isfinite's cost)
                if p.is_floating_point() and not math.isfinite(largest_magnitude(p.detach())):
                    raise SaturationError(f"parameter '{name}' has non-finite entries; expected finite θ")
                self._checked.add(key)

    def program(self, *args: Any, **kwargs: Any) -> torch.export.ExportedProgram:
        """The exported graph for these inputs (exported on first use): one graph for every batch
        size and sequence length where the model exports with dynamic shapes, one per input
        shape otherwise. It serves every precision (see :func:`~saturated.interpreter.run_terms`)."""
        self._check_parameters()
        self._called_with(args, kwargs)
        return self._program(args, kwargs)

    def _called_with(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Note an input shape the caller runs (its sub-batches the limit recomputes are not one)."""
        leaves, spec = pytree.tree_flatten((args, kwargs))
        self._shapes.add(_signature(spec, leaves))

    def _program(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.export.ExportedProgram:
        """The graph for these inputs: the dynamic graph of their structure where it fits them,
        else the one exported for their shape. With ``one_shape``, and while the caller has run one
        input shape, no dynamic graph is exported: that shape and the sub-batches recomputed from
        it are exported per shape (a static export costs a third to a quarter of a dynamic one)."""
        leaves, spec = pytree.tree_flatten((args, kwargs))
        structure = (str(spec), tuple((leaf.dtype, leaf.dim(), str(leaf.device))
                                      if isinstance(leaf, torch.Tensor) else repr(leaf) for leaf in leaves))
        graphs = self._graphs
        if structure not in graphs.dynamic and not (self.one_shape and len(self._shapes) <= 1):
            try:
                with self._exporting():
                    graphs.dynamic[structure] = cached_export(self.model, args, kwargs, dynamic=True)
            except HomogeneityError:
                graphs.dynamic[structure] = None  # exported per shape below
        dynamic = graphs.dynamic.get(structure)
        tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
        if dynamic is not None and _fits(dynamic, tensors):
            return dynamic
        key = _signature(spec, leaves)
        if key not in graphs.static:
            try:
                with self._exporting():
                    graphs.static[key] = cached_export(self.model, args, kwargs)
            except HomogeneityError as err:
                raise SaturationError(f"cannot saturate: {err}") from err
        return graphs.static[key]

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any], settings: Settings,
             dtype: torch.dtype) -> list[Any]:
        if self._failed_before(args, kwargs, dtype, settings.orders):
            raise NeedsOrders(f"{dtype} with {settings.orders} orders left every entry undetermined before "
                              "(see _note_whole_failure)")
        program = self._program(args, kwargs)
        tensors = self._tensors()
        inputs = _cast_inputs((args, kwargs), dtype)
        leaves = [leaf for leaf in pytree.tree_leaves(inputs) if isinstance(leaf, torch.Tensor)]
        with torch.no_grad():
            return run_terms(program, tensors, leaves, settings, (self._dtype, dtype), self._keep(program))

    def _exporting(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self.weights is None else self.weights.exporting()

    def _tensors(self) -> Mapping[str, torch.Tensor]:
        """The model's tensors under every name of a tied one: a graph from the cache holds no
        weights of its own."""
        if self.weights is not None:
            return self.weights.tensors()
        return {**dict(self.model.named_buffers(remove_duplicate=False)),
                **dict(self.model.named_parameters(remove_duplicate=False))}

    def _keep(self, program: torch.export.ExportedProgram) -> list[bool] | None:
        """Per flattened output, whether it is asked for (None: all)."""
        spec = program.call_spec.out_spec
        return None if self.outputs is None or spec is None else _kept_leaves(spec, self.outputs)

    def _refine(self, args: tuple[Any, ...], kwargs: dict[str, Any], pairs: list[Normalized],
                entries: list[int], batch: int | None, axes: list[tuple[int, ...]]) -> _Refined:
        """Run the batch ``entries`` that float64 left undetermined again in ball arithmetic
        (:mod:`saturated.precision`), at rising precision up to ``settings.max_precision``, each
        level only on the entries the one before left undetermined. An entry's outputs in
        ``pairs`` are replaced once a level determines it; an entry that stops undetermined keeps
        what either float64 or its last level determined (:func:`_keep_determined`)."""
        total = batch or 1
        levels: list[tuple[int, tuple[int, ...], float]] = []
        reasons: dict[int, tuple[str, ...]] = {}
        left = list(entries)
        cap = self.settings.max_precision
        bits: int | None = FIRST_PRECISION if cap >= FIRST_PRECISION else None
        early = True  # the level after one given up on its loss runs on: a wrong guess costs one level
        while bits is not None:
            these, those = (args, kwargs) if batch is None else _select((args, kwargs), left)
            program = self._program(these, those)
            tensors = self._tensors()
            leaves = [leaf for leaf in pytree.tree_leaves((these, those)) if isinstance(leaf, torch.Tensor)]
            start = time.perf_counter()
            try:
                result = run_balls(program, tensors, leaves, mask_threshold=self.settings.mask_threshold,
                                   bits=bits, entries=len(left), keep=self._keep(program),
                                   escalate=bits < self.settings.max_precision, early=early)
            except SaturationError as err:
                reasons.update({entry: (f"not refined in ball arithmetic: {err}",) for entry in left})
                break
            finally:
                levels.append((bits, tuple(left), time.perf_counter() - start))
            if result.escalated:  # every entry goes on, at what the pass's loss says they need
                bits = next_precision(bits, cap, result.reached, result.needed)
                early = result.needed is None
                continue
            found: list[Normalized] = [(None, None) if out is None else out for out in result.outputs]
            if not pairs:  # every entry is here: this level's outputs are the batch's
                pairs.extend(found)
            open_nan = [(value, axes[i]) for i, (value, _) in enumerate(found)
                        if isinstance(value, torch.Tensor) and value.is_floating_point()
                        and bool(torch.isnan(value).any())]
            still = _undetermined_entries(open_nan, len(left), batch) if open_nan else []
            if still is None:  # no batch dimension to tell entries apart
                still = list(range(len(left)))
            done = [i for i in range(len(left)) if i not in still]
            if done:
                _merge(pairs, _subset(found, done, axes, len(left)), [left[i] for i in done], axes, total)
            reasons = {left[i]: tuple(why for scope, why, _ in result.reasons if scope is None or i in scope)
                       or ("undetermined",) for i in still}
            # entries whose every undecided decision is final (exact zeros, exact ties) stop here,
            # as do all at the cap: each keeps these values where they leave fewer undetermined
            rising = [i for i in still if any(open_ is None or i in open_ for _, _, open_ in result.reasons)]
            if bits == self.settings.max_precision:
                rising = []
            stopping = [i for i in still if i not in rising]
            if stopping:
                _keep_determined(pairs, found, stopping, left, axes, total)
            if not rising:
                break
            left = [left[i] for i in rising]
            bits = next_precision(bits, cap)
        return _Refined(tuple(levels), reasons)

    def _call_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        return (id(self._program(args, kwargs)), self.outputs, self.settings, self.undetermined,
                self.read_padding)

    def _stored_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str] | None:
        """The keys of this call's failed levels on disk: its graph's cache key and a digest of what
        else decides whether a level fails (None: the graph is not kept on disk)."""
        graph = stored_key(self._program(args, kwargs))
        if graph is None:
            return None
        return graph, call_digest(outputs=None if self.outputs is None else sorted(self.outputs),
                                  settings=repr(self.settings), undetermined=self.undetermined,
                                  read_padding=self.read_padding, dtype=str(self._dtype))

    def _failed_before(self, args: tuple[Any, ...], kwargs: dict[str, Any], dtype: torch.dtype,
                       orders: int) -> bool:
        """Whether level (``dtype``, ``orders``) failed wholesale for this call's graph, outputs and
        settings, in this process or (read once per call key) in an earlier one. Only levels
        before the last are read from disk: a hand-edited file skips at most those."""
        key = self._call_key(args, kwargs)
        if key not in self._graphs.read_failures:
            self._graphs.read_failures.add(key)
            stored = self._stored_call(args, kwargs)
            if stored is not None:
                found = read_failed_levels(*stored)
                self._graphs.whole_failures.update((key, *level) for level in self._levels()[:-1]
                                                   if (str(level[0]), level[1]) in found)
        return (key, dtype, orders) in self._graphs.whole_failures

    def _note_whole_failure(self, last: bool, dtype: torch.dtype, orders: int, count: int,
                            args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Remember that a level before the last left every one of at least :data:`_WHOLESALE`
        batch entries undetermined: for this graph, outputs and settings it fails wholesale (the
        error bounds of a deep decoder's normalized output exceed its values in float32; T5's, at
        one order in float64), and later calls skip it (:meth:`_run` refuses it at once). The next
        level decides whatever it would have; only the last bits of the values (computed in
        float64, or with more orders, and rounded back) may differ."""
        if last or count < _WHOLESALE:
            return
        failure = (self._call_key(args, kwargs), dtype, orders)
        if failure not in self._graphs.whole_failures:  # else refused as known: not stored again
            self._graphs.whole_failures.add(failure)
            stored = self._stored_call(args, kwargs)
            if stored is not None:
                store_failed_level(*stored, str(dtype), orders)

    def _levels(self) -> list[tuple[torch.dtype, int]]:
        """(dtype, orders) of each attempt: the leading order in the model's dtype, then float64 with
        1, 2, 4, … orders."""
        levels = [(self._dtype, 1)]
        for orders in _schedule(self.settings.orders):
            if (self._wide, orders) != levels[-1]:
                levels.append((self._wide, orders))
        return levels

    def _one_at_a_time(self, args: tuple[Any, ...], kwargs: dict[str, Any], settings: Settings,
                       dtype: torch.dtype, count: int | None, message: str,
                       axes: list[tuple[int, ...]]) -> list[Normalized]:
        """The outputs of ``count`` batch entries computed one entry at a time, each output of each
        entry NaN where its limit is undetermined (``undetermined="nan"``); an entry whose pass
        itself needs more orders is NaN in every output. Without a batch dimension the inputs are
        one entry. ``axes``: each output's candidate batch dimensions (:func:`_batch_axes`).

        Raises:
            SaturationError: (with ``message``) no entry's pass went through, so the outputs'
                shapes are not known.
        """
        entries: list[list[Normalized] | None] = []
        for entry in range(count or 1):
            these, those = (args, kwargs) if count is None else _select((args, kwargs), [entry])
            try:
                entries.append(_normalize_all(self._run(these, those, settings, dtype), settings,
                                              lenient=True)[0])
            except NeedsOrders:
                entries.append(None)
        known = [found for found in entries if found is not None]
        if not known:
            raise SaturationError(message)
        if count is None:
            return known[0]
        integers = [index for index, (value, degree) in enumerate(known[0])
                    if _per_entry(value, degree) and not value.is_floating_point()]
        if integers and len(known) < len(entries):
            raise SaturationError(
                f"output {integers[0]} holds integers, which cannot be NaN where a batch entry's pass "
                f"needs more orders: {message}; expected floating outputs, or only those asked for "
                "with outputs=")
        pairs: list[Normalized] = [
            (torch.full(_batch_shape(index, value.shape, axes[index], count),
                        math.nan if value.is_floating_point() else 0, dtype=value.dtype,
                        device=value.device), math.nan)
            if _per_entry(value, degree) else (value, degree)
            for index, (value, degree) in enumerate(known[0])]
        for entry, found in enumerate(entries):
            if found is None:  # undetermined in every output
                found = [(torch.full_like(value, math.nan), math.nan) if _batched(value, degree)
                         else (value, degree) for value, degree in known[0]]
            _merge(pairs, found, [entry], axes, count)
        return pairs

    def __call__(self, *args: Any, **kwargs: Any) -> SaturatedOutput:
        """The saturated outputs for these inputs (see :class:`SaturatedOutput`)."""
        _check_masks(kwargs)
        self._check_parameters()
        self._called_with(args, kwargs)
        batch = _batch_size(pytree.tree_leaves((args, kwargs)))
        axes = _batch_axes(self._program(args, kwargs))  # the same dimensions in every sub-batch
        marking = "uniform" if self.settings.ties == "uniform" else "nan"
        levels = self._levels()
        pairs: list[Normalized] = []
        failure: str | None = None
        pending: list[int] | None = None  # the batch entries still undetermined; None: all of them
        refined: tuple[int, ...] = ()
        # the batch entries whose every undetermined value is a vector proved zero, and why
        settled: dict[int, tuple[str, ...]] = {}
        for step, (dtype, orders) in enumerate(levels):
            last = step == len(levels) - 1
            ties = "raise" if last and self.settings.ties == "raise" and self.undetermined == "raise" \
                else marking
            # Below float64, a tie within the tolerance may be a near-tie that float64 resolves.
            exact = self.settings.exact_ties and (dtype == self._wide or self._wide == self._dtype)
            these, those = (args, kwargs) if pending is None else _select((args, kwargs), pending)
            computed = list(range(batch or 1)) if pending is None else pending
            for entry in computed:  # what this level finds replaces what an earlier one did
                settled.pop(entry, None)
            if step == 1:
                refined = tuple(range(batch or 1)) if pending is None else tuple(pending)
            try:
                settings = replace(self.settings, orders=orders, ties=ties, exact_ties=exact)
                # No name holds the terms: their bounds' operands go before the refinement runs.
                found, with_nan, finals, zeros = _normalize_all(self._run(these, those, settings, dtype),
                                                                settings, lenient=self.undetermined == "nan")
            except NeedsOrders as err:
                if not last:
                    self._note_whole_failure(last, dtype, orders, len(computed), args, kwargs)
                    continue  # the same entries, at the next level
                message = f"{_in_batch(str(err), pending)} (tracking {orders} orders)"
                if self.undetermined == "raise":
                    if not precisions(self.settings.max_precision):
                        raise SaturationError(message) from err
                    failure = message  # raised after the refinement, if it does not decide
                count = batch if pending is None else len(pending)
                try:
                    found = self._one_at_a_time(these, those, settings, dtype, count, message, axes)
                except SaturationError:
                    if failure is None or pending is not None:
                        raise
                    break  # no entry's pass went through in float64: the balls start from nothing
                if pending is None:
                    pairs = found
                else:
                    _merge(pairs, found, pending, axes, batch or 1)
                break
            if pending is None:
                pairs = found
            else:
                _merge(pairs, found, pending, axes, batch or 1)
            settled.update({computed[entry]: why for entry, why in
                            _only_zero_vectors(found, with_nan, zeros, axes, len(computed), batch).items()})
            if not (dtype == self._wide and orders > 1 and self.settings.ties != "uniform"):
                finals = {}  # the leading parts may still change with more orders or precision
            open_nan = [(self._read(found[i][0].masked_fill(finals[i], 0.0) if i in finals else found[i][0],
                                    those), axes[i]) for i in with_nan]
            left = _undetermined_entries([(value, candidates) for value, candidates in open_nan
                                          if bool(torch.isnan(value).any())],
                                         batch or 1 if pending is None else len(pending), batch)
            if left == []:
                break
            if left is None or len(left) == len(computed):
                self._note_whole_failure(last, dtype, orders, len(computed), args, kwargs)
            if left is not None:
                pending = left if pending is None else [pending[i] for i in left]
        else:
            if self.settings.ties != "nan" and self.undetermined == "raise":
                # ties raise at the last level: this NaN came in
                raise SaturationError(f"outputs hold NaN (batch entries {pending or 'all'}); expected "
                                      "finite inputs")
        refinement = self._still_undetermined(args, kwargs, pairs, batch, axes, settled)
        if failure is not None and refinement.reasons:
            entry, why = next(iter(sorted(refinement.reasons.items())))
            raise SaturationError(f"{failure}; and for batch entry {entry}: {why[0]}")
        out_spec = self._program(args, kwargs).call_spec.out_spec
        assert out_spec is not None
        values = [v.to(self._dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                  for v, _ in pairs]  # entries recomputed in float64 are rounded back
        return SaturatedOutput(pytree.tree_unflatten(values, out_spec),
                               pytree.tree_unflatten([d for _, d in pairs], out_spec), orders, refined,
                               refinement.levels, refinement.reasons)

    def _read(self, value: torch.Tensor, kwargs: dict[str, Any]) -> torch.Tensor:
        """``value`` with its padded positions zeroed where the caller reads none (``read_padding``
        False), so that NaN there does not count as undetermined."""
        if self.read_padding or value.dim() != 3 or not value.is_floating_point():
            return value
        unread = _padding(kwargs, value.shape[:2])
        return value if unread is None else value.masked_fill(unread.unsqueeze(-1), 0.0)

    def _still_undetermined(self, args: tuple[Any, ...], kwargs: dict[str, Any], pairs: list[Normalized],
                            batch: int | None, axes: list[tuple[int, ...]],
                            settled: dict[int, tuple[str, ...]]) -> _Refined:
        """The entries whose outputs hold NaN after the float levels, refined in ball arithmetic
        where ``settings.max_precision`` allows it (see :meth:`_refine`), except the ``settled``
        ones, whose NaN no precision decides: they keep the reasons given."""
        read = [(self._read(value, kwargs), axes[i]) for i, (value, degree) in enumerate(pairs)
                if _batched(value, degree)]
        open_nan = [(value, candidates) for value, candidates in read if bool(torch.isnan(value).any())]
        if pairs and not open_nan:
            return _Refined((), {})
        entries = _undetermined_entries(open_nan, batch or 1, batch) if pairs else None
        entries = [entry for entry in (range(batch or 1) if entries is None else entries)
                   if entry not in settled]
        if not entries:
            return _Refined((), dict(settled))
        if not precisions(self.settings.max_precision):
            return _Refined((), {**settled, **{
                entry: ("undetermined in float64, and the ball-arithmetic refinement is off "
                        f"(max_precision={self.settings.max_precision} < 128 bits)",) for entry in entries}})
        refined = self._refine(args, kwargs, pairs, entries, batch, axes)
        return _Refined(refined.levels, {**settled, **refined.reasons})


@dataclass(frozen=True)
class _Refined:
    """What the ball-arithmetic levels did: (bits, entries, seconds) per level, and why each entry
    still undetermined is."""

    levels: tuple[tuple[int, tuple[int, ...], float], ...]
    reasons: dict[int, tuple[str, ...]]


def _only_zero_vectors(found: list[Normalized], with_nan: list[int], zeros: dict[int, torch.Tensor],
                       axes: list[tuple[int, ...]], count: int, total: int | None
                       ) -> dict[int, tuple[str, ...]]:
    """Of ``count`` entries of a batch of ``total`` computed together (``found``, with NaN in the
    outputs ``with_nan``), those whose every NaN lies in a vector proved zero for every c
    (``zeros``, by output), each with the outputs that hold one; none where an output's batch
    dimension cannot be told (see :func:`_undetermined_entries`)."""
    if not zeros:
        return {}

    def with_nan_in(values: list[tuple[torch.Tensor, tuple[int, ...]]]) -> list[int] | None:
        if total is None:  # one entry, with no batch dimension
            return [0] if any(bool(torch.isnan(value).any()) for value, _ in values) else []
        return _undetermined_entries(values, count, total)

    still = with_nan_in([(found[i][0].masked_fill(zeros[i], 0.0) if i in zeros else found[i][0], axes[i])
                         for i in with_nan])
    held = {index: with_nan_in([(found[index][0], axes[index])]) for index in zeros}
    if still is None or any(entries is None for entries in held.values()):
        return {}
    holding = {entry for entries in held.values() if entries for entry in entries} - set(still)
    return {entry: tuple(f"a vector exactly zero for every c at output {index} (as a padded position's zero "
                         "embedding): no order or precision gives it a direction"
                         for index, entries in sorted(held.items()) if entries and entry in entries)
            for entry in sorted(holding)}


def _padding(kwargs: dict[str, Any], positions: torch.Size) -> torch.Tensor | None:
    """Where every ``*attention_mask`` input of shape ``positions`` (batch, sequence) is 0: the
    padded positions of an output shaped so (None without such a mask). Masks of another shape
    belong to another sequence (an encoder's, beside a decoder's output)."""
    masks = [mask for name, mask in kwargs.items() if name.endswith("attention_mask")
             and isinstance(mask, torch.Tensor) and mask.shape == positions]
    return torch.stack([mask == 0 for mask in masks]).all(0) if masks else None


def _entry_axis(shape: torch.Size, candidates: tuple[int, ...], count: int) -> int | None:
    """The one candidate batch dimension of an output of ``shape`` computed for ``count`` entries."""
    fitting = [d for d in candidates if d < len(shape) and shape[d] == count]
    return fitting[0] if len(fitting) == 1 else None


def _subset(found: list[Normalized], chosen: list[int], axes: list[tuple[int, ...]], count: int
            ) -> list[Normalized]:
    """The outputs of the ``chosen`` entries among ``count`` computed together."""
    if len(chosen) == count:
        return found
    index = torch.tensor(chosen)
    out: list[Normalized] = []
    for (value, degree), candidates in zip(found, axes):
        if not _per_entry(value, degree):
            out.append((value, degree))
            continue
        axis = _entry_axis(value.shape, candidates, count)
        if axis is None:
            raise _unplaced(len(out), None, count, value.shape, len(chosen))
        out.append((value.index_select(axis, index.to(value.device)), degree))
    return out


def _keep_determined(pairs: list[Normalized], found: list[Normalized], stopping: list[int], left: list[int],
                     axes: list[tuple[int, ...]], total: int) -> None:
    """For batch entries a level of the refinement leaves undetermined for good (``stopping``,
    indices into ``left``, the entries it ran on; ``found``, its outputs): keep, output by output,
    every vector along the last dimension that either float64 (in ``pairs``, of ``total``
    entries) or that level determined. Both are the same limit normalized by the same degree, so
    where an output's two degrees agree its vectors are joined one by one: the level's where
    float64's holds a NaN and its own none. Where they differ, the side with fewer NaN in the
    entry's output is kept whole."""
    count = len(left)
    for i in stopping:
        try:
            part = _subset(found, [i], axes, count)
        except SaturationError:  # no batch dimension to take the entry along: only a whole merge tells
            if _nan_count(found, i, axes, count) < _nan_count(pairs, left[i], axes, total):
                raise
            continue
        merged: list[Normalized] = [(value, None) for value, _ in part]  # a degree of None: not merged
        for index, (whole, one) in enumerate(zip(pairs, part)):
            if _joinable(whole, one, axes[index], total):
                _join_vectors(pairs, index, one, left[i], axes[index], total)
            elif _nan_count([one], 0, [axes[index]], 1) < _nan_count([whole], left[i], [axes[index]], total):
                merged[index] = one
        _merge(pairs, merged, [left[i]], axes, total)


def _joinable(whole: Normalized, part: Normalized, candidates: tuple[int, ...], total: int) -> bool:
    """Whether one entry's output ``part`` can be joined vector by vector into the batch's
    ``whole``: both batched floating tensors of the same degree, the batch dimension not the last
    (the vectors joined lie along it)."""
    (value, degree), (one, one_degree) = whole, part
    if not (_batched(value, degree) and _batched(one, one_degree)) or degree != one_degree:
        return False
    axis = _entry_axis(value.shape, candidates, total)
    return axis is None or axis < value.dim() - 1


def _join_vectors(pairs: list[Normalized], index: int, part: Normalized, entry: int,
                  candidates: tuple[int, ...], total: int) -> None:
    """Write into output ``index`` of ``pairs`` the vectors of one ``entry``'s output ``part`` that
    are determined where the batch's hold a NaN (see :func:`_keep_determined`)."""
    (value, degree), one = pairs[index], part[0]
    axis = _entry_axis(value.shape, candidates, total)
    rows = torch.tensor([entry], device=value.device)
    current = value if axis is None else value.index_select(axis, rows)
    if current.shape != one.shape:
        return
    take = torch.isnan(current).any(-1, keepdim=True) & ~torch.isnan(one).any(-1, keepdim=True)
    if bool(take.any()):
        pairs[index] = (_put(value, torch.where(take, one.to(value.dtype), current), axis, rows), degree)


def _nan_count(pairs: list[Normalized], entry: int, axes: list[tuple[int, ...]], count: int) -> int:
    """How many values of one batch entry (of ``count`` computed together) are NaN."""
    total = 0
    for (value, degree), candidates in zip(pairs, axes):
        if not (_batched(value, degree) and bool(torch.isnan(value).any())):
            continue
        axis = _entry_axis(value.shape, candidates, count)
        row = value if axis is None else value.select(axis, entry)
        total += int(torch.isnan(row).sum())
    return total


def _kept_leaves(spec: pytree.TreeSpec, names: frozenset[str]) -> list[bool]:
    """Per flattened output, whether it lies under one of the top-level fields ``names``.

    Raises:
        SaturationError: the output has no named fields, or a name is not one of them.
    """
    fields = spec.context if isinstance(spec.context, (list, tuple)) else None
    if not fields or not all(isinstance(field, str) for field in fields):
        raise SaturationError(f"outputs {sorted(names)} were asked for, but the model returns "
                              f"{spec.type.__name__ if spec.type else 'a value'} without named fields")
    unknown = names - set(fields)
    if unknown:
        raise SaturationError(f"the model's output has no field {sorted(unknown)}; expected some of "
                              f"{list(fields)}")
    return [field in names for field, child in zip(fields, spec.children())
            for _ in range(child.num_leaves)]


def _in_batch(message: str, entries: list[int] | None) -> str:
    """An error message about a recomputed sub-batch, with its entries numbered as in the input."""
    if entries is None:
        return message
    return re.sub(r"batch entry (\d+)", lambda m: f"batch entry {entries[int(m.group(1))]}", message)


def _select(inputs: Any, entries: list[int]) -> Any:
    """The inputs of some batch entries (rows of dimension 0 of every tensor)."""
    index = torch.tensor(entries)
    return pytree.tree_map(
        lambda v: v.index_select(0, index.to(v.device)) if isinstance(v, torch.Tensor) else v, inputs)


def _cast_inputs(inputs: Any, dtype: torch.dtype) -> Any:
    """Floating tensor inputs in ``dtype`` (ids and masks stay as they are)."""
    return pytree.tree_map(
        lambda v: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v, inputs)


def _per_entry(value: Any, degree: float | None) -> bool:
    """Whether an output is a tensor with a degree (one row per batch entry)."""
    return isinstance(value, torch.Tensor) and value.dim() > 0 and degree is not None


def _batched(value: Any, degree: float | None) -> bool:
    """Whether an output is a floating tensor with one row per batch entry."""
    return _per_entry(value, degree) and value.is_floating_point()


def _merge(pairs: list[Normalized], found: list[Normalized], entries: list[int],
           axes: list[tuple[int, ...]], total: int) -> None:
    """Write some batch entries' recomputed outputs into the batch's (``total`` entries), along
    each output's batch dimension (``axes``: its candidates, see :func:`_batch_axes`).

    Both are normalized by the highest degree with a nonzero coefficient; the merged output takes
    the higher of the two, and the rows of the side with the lower one are zero at it. A degree
    NaN marks an output undetermined in those rows (all NaN): its rows stay NaN whatever degree
    the merged output takes, and it sets no degree.

    Raises:
        SaturationError: an output's batch dimension cannot be told (see :func:`_batch_axis`).
    """
    rows = torch.tensor(entries)
    for index, ((value, degree), (part, part_degree)) in enumerate(zip(pairs, found)):
        if not isinstance(value, torch.Tensor) or degree is None or part_degree is None:
            continue
        axis = _placement(index, value.shape, part.shape, axes[index], len(entries), total)
        if math.isnan(part_degree):
            unknown = torch.full_like(part, math.nan, dtype=value.dtype)
            pairs[index] = (_put(value, unknown, axis, rows), degree)
            continue
        if math.isnan(degree):  # no row determined so far: this entry's degree leads
            degree = part_degree
        if part_degree > degree:  # rows undetermined at a lower degree stay undetermined
            value, degree = torch.where(torch.isnan(value), math.nan, 0.0).to(value.dtype), part_degree
        update = part.to(value.dtype) if part_degree == degree else torch.zeros_like(part, dtype=value.dtype)
        pairs[index] = (_put(value, update, axis, rows), degree)


def _put(value: torch.Tensor, update: torch.Tensor, axis: int | None, rows: torch.Tensor) -> torch.Tensor:
    """``value`` with ``update`` in its ``rows`` along ``axis`` (None: ``update`` is all of it)."""
    if axis is None:
        return update.clone()
    return value.clone().index_copy_(axis, rows.to(value.device), update)


def _placement(index: int, whole: torch.Size, part: torch.Size, candidates: tuple[int, ...],
               count: int, total: int) -> int | None:
    """The dimension along which output ``index`` of ``count`` entries (``part``) goes into the
    batch's (``whole``, ``total`` entries); None where the part is every entry and replaces it.

    Raises:
        SaturationError: no single batch dimension, or the part's other sizes differ from the whole's.
    """
    if count == total and part == whole:
        return None
    axis = _batch_axis(candidates, part, count, total)
    others = (*part[:axis], *part[axis + 1:]) if axis is not None else None
    if axis is None or whole[axis] != total or others != (*whole[:axis], *whole[axis + 1:]):
        raise _unplaced(index, whole, total, part, count)
    return axis


def _batch_shape(index: int, shape: torch.Size, candidates: tuple[int, ...], total: int) -> list[int]:
    """The shape of output ``index`` for ``total`` entries, from its ``shape`` for one entry.

    Raises:
        SaturationError: its batch dimension cannot be told (see :func:`_batch_axis`).
    """
    if total == 1:
        return list(shape)
    axis = _batch_axis(candidates, shape, 1, total)
    if axis is None:
        raise _unplaced(index, None, total, shape, 1)
    return [*shape[:axis], total, *shape[axis + 1:]]


def _unplaced(index: int, whole: torch.Size | None, total: int, part: torch.Size, count: int
              ) -> SaturationError:
    batch = "" if whole is None else f"shape {tuple(whole)} for {total} entries, "
    return SaturationError(
        f"output {index} has no batch dimension to merge recomputed entries along ({batch}shape "
        f"{tuple(part)} for {count} of {total}); expected one dimension the exported graph sizes by "
        "the batch")


def saturate(model: nn.Module, *args: Any, settings: Settings | None = None,
             **kwargs: Any) -> SaturatedModel:
    """The exact saturated network of ``model``, checked on example inputs.

    Args:
        model: any ``nn.Module`` that :func:`homogeneity.tracing.export_model` can trace
            (Hugging Face models are exported in eval mode, without cache, with eager attention).
        *args: example positional inputs.
        settings: mask threshold, tie tolerance and tie policy (:class:`~saturated.rules.Settings`).
        **kwargs: example keyword inputs.

    Returns:
        A :class:`SaturatedModel`; call it like the model to get a :class:`SaturatedOutput`.

    Raises:
        SaturationError: the model cannot be traced, an op has no limit rule, or the limit is not
            determined on the example inputs; messages name the node, op and module.

    >>> _ = torch.manual_seed(0)
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> x = torch.randn(4, 2)
    >>> sat = saturate(net, x)
    >>> out = sat(x)
    >>> out.degrees                        # two weight layers: f(x; cθ) ≈ c² · out.value
    2.0
    >>> big = torch.func.functional_call(net, {k: 1e4 * p for k, p in net.named_parameters()}, (x,))
    >>> bool((big / 1e8 - out.value).abs().max() < 1e-3)   # what is left is O(1/c)
    True
    """
    saturated = SaturatedModel(model, Settings() if settings is None else settings)
    saturated(*args, **kwargs)
    return saturated
