"""Numerical checks: f(x; cθ) against cᵏ f(x; θ) in float64, and the decay of the difference."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch import nn

from homogeneity.analysis import analyze, leaf_name, select_parameters
from homogeneity.degree import Grade
from homogeneity.errors import HomogeneityError
from homogeneity.report import HomogeneityReport
from homogeneity.tracing import export_ready

__all__ = ["DEFAULT_SCALES", "OFF_DEGREE", "SHIFT_SCALE", "UNDECIDED", "WIDEST_SCALE", "ScalingCheck",
           "check_scaling", "classify_decay", "degree_shift", "off_degree", "scaled_outputs"]

DEFAULT_SCALES: tuple[float, ...] = tuple(2.0**i for i in range(11))
"""c = 1, 2, 4, …, 1024."""

WIDEST_SCALE = 2.0**40
"""How far the scales are widened for an approximate or asymptotic output that has not settled."""

UNDECIDED = "undecided: margin too small"
"""The measurement of an output still changing at :data:`WIDEST_SCALE` (e.g. a tanh input ~0)."""

OFF_DEGREE = "not homogeneous of the claimed degree"
"""The start of the measurement of an output whose f(cθ)/cᵏ grows or shrinks by a steady 2ᵐ per
doubling: homogeneous of degree k + m, which the measurement names (:func:`off_degree`)."""

SHIFT_SCALE = 2.0**20
"""How far a steady shift of an approximate or asymptotic output must hold to count: beyond the
c ≤ 10⁶ that claims draw (an input within ~10⁻⁶ of a tie can look one degree off up to there)."""

SHIFT_DOUBLINGS = (5, 10)
"""Doublings over which a shift must be steady: for an exact grade, for the others."""

_SHIFT_MIN = 0.25  # |m| below this is a slowly settling output, not another degree
_SHIFT_TOLERANCE = 1e-3  # ‖g(2c) − 2ᵐ g(c)‖ / ‖g(2c)‖ of a steady shift

EXPECTED_DECAY = {
    Grade.EXACT: "exact",
    Grade.APPROXIMATE: "exponential",
    Grade.ASYMPTOTIC: "polynomial",
    Grade.NONE: "not homogeneous",
}
"""The decay of f(cθ)/cᵏ that each grade predicts."""

_FLOOR = 1e-13  # relative changes at or below this are float64 rounding


@dataclass(frozen=True)
class ScalingCheck:
    """One output: its derived degree and grade, and what scaling measured.

    ``changes[i]`` is the relative change of g(c) = f(cθ)/cᵏ from ``scales[i]`` to ``scales[i+1]``.
    """

    output: str
    degree: sympy.Expr
    grade: Grade
    scales: tuple[float, ...]
    changes: tuple[float, ...]
    measured: str

    @property
    def expected(self) -> str:
        return EXPECTED_DECAY[self.grade]

    @property
    def matches(self) -> bool:
        """Whether the measured decay is the one the grade predicts."""
        return self.measured == self.expected


def classify_decay(changes: Sequence[float]) -> str:
    """Classify how g(c) = f(cθ)/cᵏ settles over doubling c from its successive relative changes.

    ``exact``: no change beyond rounding. ``polynomial``: each doubling divides the change by a
    steady factor 2ᵃ (a power law c^(−a)). ``exponential``: the factor keeps growing (e^(−a·cᵖ)),
    or the change collapses to rounding within one doubling. ``not homogeneous``: g does not settle.

    >>> classify_decay([1e-16, 2e-16])
    'exact'
    >>> classify_decay([0.1 / 2**i for i in range(10)])
    'polynomial'
    >>> classify_decay([math.exp(-(2**i)) for i in range(6)])
    'exponential'
    >>> classify_decay([0.5] * 8)
    'not homogeneous'
    """
    if max(changes) <= _FLOOR:
        return "exact"
    start = next(i for i, ch in enumerate(changes) if ch > _FLOOR)
    resolved: list[float] = []
    for ch in changes[start:]:
        resolved.append(max(ch, _FLOOR))
        if ch <= _FLOOR:
            break
    collapsed = resolved[-1] <= _FLOOR
    slopes = [math.log2(b / a) for a, b in itertools.pairwise(resolved)]
    if not slopes or (not collapsed and slopes[-1] > -0.5):
        return "not homogeneous"
    if collapsed and min(slopes) < -10:
        # Falling to rounding by 1000x per doubling: a power law would need an exponent above 10.
        return "exponential"
    if len(slopes) == 1:
        return "polynomial"
    # A power law keeps a steady slope in log-log; an exponential keeps steepening.
    earlier = statistics.median(slopes[:-1])
    return "exponential" if slopes[-1] < 1.5 * min(earlier, -1.0) else "polynomial"


class _Scaler:
    """A model's parameters and buffers in float64, converted once, and the scaled state at any c.

    The scaled parameters are written into buffers reused from one c to the next, so that a run
    over many scales neither converts nor allocates a copy of the model per scale (for a
    transformer, its embedding table dominates both).
    """

    def __init__(self, model: nn.Module, scaled: set[str]) -> None:
        self.base = {name: tensor.detach().to(torch.float64) if tensor.is_floating_point() else tensor
                     for name, tensor in [*model.named_parameters(), *model.named_buffers()]}
        self.scaled = [name for name in self.base if name in scaled and self.base[name].is_floating_point()]
        self._out: dict[str, torch.Tensor] = {}

    def state(self, c: float | torch.Tensor) -> dict[str, torch.Tensor]:
        state = dict(self.base)
        for name in self.scaled:
            if isinstance(c, torch.Tensor):  # a tensor c may need grad or broadcast: a new tensor
                state[name] = self.base[name] * c
                continue
            out = self._out.get(name)
            if out is None:
                out = self._out[name] = torch.empty_like(self.base[name])
            state[name] = torch.mul(self.base[name], c, out=out)
        return state


def scaled_outputs(model: nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any],
                   scaled: set[str], c: float | torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's float tensor outputs in float64 with the ``scaled`` parameters times ``c``.

    The model is not modified: scaled float64 copies go through ``functional_call``.
    """
    return _outputs(model, args, kwargs, _Scaler(model, scaled), c)


def _outputs(model: nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any], scaler: _Scaler,
             c: float | torch.Tensor) -> dict[str, torch.Tensor]:
    cast = pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(torch.float64) if t.is_floating_point() else t,
        (tuple(args), dict(kwargs)))
    with torch.no_grad(), export_ready(model):
        out = torch.func.functional_call(model, scaler.state(c), cast[0], cast[1])
    # A copy: an output may be a view of a parameter, whose buffer the next scale overwrites.
    return {leaf_name(path): leaf.clone() for path, leaf in pytree.tree_leaves_with_path(out)
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()}


def check_scaling(model: nn.Module, *args: Any, params: str | Sequence[str] | None = None,
                  report: HomogeneityReport | None = None,
                  scales: Sequence[float] = DEFAULT_SCALES, **kwargs: Any) -> list[ScalingCheck]:
    """Measure every output with a defined degree at each scale c and classify the decay.

    Args:
        model: the model; its parameters are left untouched.
        *args: example positional inputs.
        params: the parameters that scale (as in :func:`homogeneity.analyze`).
        report: a report of this model and inputs (default: analysed here).
        scales: increasing factors c, each twice the previous. An approximate or asymptotic
            output that has not settled by the last one is measured again at larger c, up to
            :data:`WIDEST_SCALE`; if it still has not settled, it is :data:`UNDECIDED` (an input
            too close to a tie to decide), which does not match its grade. The widening stops
            early, at :data:`SHIFT_SCALE`, when f(cθ)/cᵏ has grown or shrunk by a steady 2ᵐ per
            doubling: the output has degree k + m, measured as :func:`off_degree` (an exact
            output is measured so at the given scales).
        **kwargs: example keyword inputs.

    >>> mlp = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False))
    >>> [(c.degree, c.measured, c.matches) for c in check_scaling(mlp, torch.randn(5, 3))]
    [(2, 'exact', True)]
    """
    if report is None:
        report = analyze(model, *args, params=params, **kwargs)
    if any(b != 2 * a for a, b in itertools.pairwise(scales)):
        raise HomogeneityError(f"expected scales that double at each step, got {list(scales)}")
    scaled = select_parameters((n for n, _ in model.named_parameters()), params)
    scaler = _Scaler(model, scaled)
    used = list(scales)
    runs = [_outputs(model, args, kwargs, scaler, c) for c in used]
    checks = {}
    for name, degree in report.outputs.items():
        k = degree.value
        if not degree.single or name not in runs[0] or not k.is_number or k is sympy.nan:
            continue
        checks[name] = _check(name, degree.value, degree.grade, runs, used)
    # An approximate grade can look "not homogeneous" at small c when an input sits near a tie (a
    # tanh of ~0): its saturation starts late. Widen the scales for those outputs alone, until
    # they settle or their degree is established to be another one.
    unsettled = [name for name, check in checks.items() if _unsettled(check)]
    while unsettled and used[-1] < WIDEST_SCALE:
        more = [used[-1] * 2.0**i for i in range(1, 11) if used[-1] * 2.0**i <= WIDEST_SCALE]
        runs += [_outputs(model, args, kwargs, scaler, c) for c in more]
        used += more
        for name in unsettled:
            checks[name] = _check(name, checks[name].degree, checks[name].grade, runs, used)
        unsettled = [name for name in unsettled if _unsettled(checks[name])]
    for name in unsettled:
        check = checks[name]
        checks[name] = ScalingCheck(name, check.degree, check.grade, check.scales, check.changes,
                                    UNDECIDED)
    return list(checks.values())


def _unsettled(check: ScalingCheck) -> bool:
    return check.measured == "not homogeneous" and check.grade in (Grade.APPROXIMATE, Grade.ASYMPTOTIC)


def degree_shift(normalized: Sequence[torch.Tensor], *, doublings: int) -> float | None:
    """The steady m with g(2c) ≈ 2ᵐ g(c) over the last ``doublings`` doublings of c, if there is
    one and it is not 0 (None otherwise).

    g(c) = f(cθ)/cᵏ of an output homogeneous of degree k + m instead of k grows by 2ᵐ per
    doubling, in norm and as a tensor, so its relative change stays at |1 − 2⁻ᵐ| and never decays.

    >>> g = [torch.tensor([3.0, -1.0]) / 2.0**i for i in range(8)]
    >>> degree_shift(g, doublings=5)
    -1.0
    >>> degree_shift([torch.tensor([1.0, 2.0])] * 8, doublings=5) is None  # settled: m = 0
    True
    """
    if len(normalized) < doublings + 1:
        return None
    tail = normalized[-(doublings + 1):]
    norms = [float(t.norm()) for t in tail]
    if not all(math.isfinite(n) and n > 0 for n in norms):
        return None
    m = statistics.median(math.log2(b / a) for a, b in itertools.pairwise(norms))
    if abs(m) < _SHIFT_MIN:
        return None
    steady = all(float((b - 2.0**m * a).norm()) <= _SHIFT_TOLERANCE * n
                 for (a, b), n in zip(itertools.pairwise(tail), norms[1:]))
    return float(m) if steady else None


def _check(name: str, k: sympy.Expr, grade: Grade, runs: Sequence[dict[str, torch.Tensor]],
           scales: Sequence[float]) -> ScalingCheck:
    """Classify one output's relative changes of f(cθ)/cᵏ over ``scales``."""
    normalized = [run[name] / c ** float(k) for run, c in zip(runs, scales)]
    changes = tuple(_relative_change(a, b) for a, b in itertools.pairwise(normalized))
    if not all(math.isfinite(change) for change in changes):  # overflow at large c: stop there
        last = next(i for i, change in enumerate(changes) if not math.isfinite(change))
        scales, changes = scales[:last + 1], changes[:last]
    measured = classify_decay(changes) if changes else "not homogeneous"
    if measured == "not homogeneous" and grade is not Grade.NONE:
        # An exact output has no late-starting regime: a steady shift at the given scales is its
        # degree. An approximate or asymptotic one may sit near a tie up to c ~ 1/margin, so its
        # shift must hold out to SHIFT_SCALE before it counts.
        needed = SHIFT_DOUBLINGS[0] if grade is Grade.EXACT else SHIFT_DOUBLINGS[1]
        shift = degree_shift(normalized[:len(scales)], doublings=needed) \
            if grade is Grade.EXACT or scales[-1] >= SHIFT_SCALE else None
        if shift is not None:
            measured = off_degree(float(k) + shift)
    return ScalingCheck(name, k, grade, tuple(scales), changes, measured)


def _relative_change(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖b − a‖ / ‖b‖, infinite where a nonzero output has become exactly zero.

    An output does not vanish under scaling; it drops to zero when a float32 step inside the model
    overflows (Hugging Face's RMSNorm squares its input in float32: inf, then rsqrt gives 0).
    Read as a change, that zero would look like an output that settled, and a wrong degree would
    pass; as an infinite change it ends the measurement there, as any overflow does.
    """
    scale = b.norm()
    if scale == 0:
        return 0.0 if a.norm() == 0 else math.inf
    return float((b - a).norm() / scale)


def off_degree(measured_degree: float) -> str:
    """The measurement of an output homogeneous of another degree than the claimed one.

    >>> off_degree(1.0000001)
    'not homogeneous of the claimed degree (measured degree ≈ 1)'
    >>> off_degree(-0.5)
    'not homogeneous of the claimed degree (measured degree ≈ -0.5)'
    """
    return f"{OFF_DEGREE} (measured degree ≈ {round(measured_degree, 2):g})"
