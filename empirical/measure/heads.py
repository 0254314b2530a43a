"""The head atlas: which attention heads are local and which are global, read from the exact limit.

For every layer and head, on a corpus, each query row i is measured four ways:

* in the saturated network (the exact c → ∞ limit of :mod:`saturated`, hard attention with the
  project's tie rule), the set A_i of positions it attends to (nonzero limit weight): its size
  n_i, and n_i over the query's allowed positions;
* in the model at θ, the attention mass on A_i and the entropy of the row (nats);
* the margin of the row's scores at θ: the gap between the largest score and the next one outside
  its tie set (ties judged with the attention dtype's tolerance). Scores are read as
  log-probabilities (softmax's input up to a per-row constant). From the rows,
  :func:`saturated.bounds.scale_to_saturate_map` certifies the head's *score scale*: the smallest
  factor c such that softmax(c·s) stays within eps of hardmax(s) for every query, for the scores
  the model softmaxed (the rounding of the weights, underflow to 0 included, is enclosed; see
  :func:`_certified_rows`);
* the paper's approximation: at 1000·θ, the number of weights above 1e-5.

Per head the paper's three statistics follow exactly: the mean of n_i ("# positions attended"),
its standard deviation over queries ("std(n)"), and the fraction of queries with n_i > 1 ("split
attention probability"). Queries with fewer than two allowed positions (the first token of a
causal model) say nothing about a head and are left out. A head is classified by
:class:`Thresholds`: ``"global"`` if its queries attend on average to at least half of their
allowed positions, ``"local"`` if to at most two positions, ``"mixed"`` otherwise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from empirical import distributed
from empirical.errors import EmpiricalError
from empirical.measure.scaling import scaled_forward
from empirical.measure.similarity import _prepare
from empirical.models.corpus import Corpus
from empirical.models.provenance import model_record, versions
from empirical.outputs import atomic_path
from homogeneity.tracing import export_ready
from saturated.bounds import interval_bits, scale_to_saturate_map
from saturated.errors import SaturationError
from saturated.functional import default_rtol
from saturated.rounding import smallest_subnormal, unit_roundoff
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, SaturatedOutput

__all__ = ["CLASSES", "HeadAtlas", "HeadBatch", "HeadStats", "Thresholds", "head_atlas", "measure_heads",
           "plot_atlas"]

SCHEMA = "normsat.heads/1"
CLASSES = ("local", "mixed", "global")
PAPER_SCALE = 1000.0
PAPER_THRESHOLD = 1e-5
_CAUSAL_TYPES = ("gpt2", "gpt_neo", "gptj", "llama", "mistral", "opt")


@dataclass(frozen=True)
class Thresholds:
    """How a head is classified from its exact statistics.

    Attributes:
        global_fraction: ``"global"`` when the mean fraction of allowed positions attended is at
            least this (a uniform average over many positions: a mean, which allows counting).
        local_positions: otherwise ``"local"`` when the mean number of positions attended is at
            most this (an argmax over one or a few positions).
    """

    global_fraction: float = 0.5
    local_positions: float = 2.0

    def classify(self, positions: float, fraction: float) -> str:
        """``"global"``, ``"local"`` or ``"mixed"``.

        >>> Thresholds().classify(1.2, 0.1), Thresholds().classify(9.0, 0.8), Thresholds().classify(4.0, 0.3)
        ('local', 'global', 'mixed')
        """
        if fraction >= self.global_fraction:
            return "global"
        return "local" if positions <= self.local_positions else "mixed"


@dataclass(frozen=True)
class HeadStats:
    """One head's measurements (means over its queries unless said otherwise).

    Attributes:
        layer: the layer's index, from 0 (in JSON too); tables and plots show index + 1, the
            numbering of the similarity measure, where layer 1 is the first block.
        head: the head, from 0.
        kind: ``"local"``, ``"mixed"`` or ``"global"`` (``class`` in JSON).
        queries: the queries measured (those with at least two allowed positions).
        positions: # positions attended in the limit (mean n).
        positions_std: std(n) over queries.
        split: split attention probability, the fraction of queries with n > 1.
        fraction: mean of n over the number of allowed positions.
        mass: mean attention mass at θ on the positions the limit attends to.
        entropy: mean entropy of the attention rows at θ, in nats.
        margin: median over queries of the score margin at θ (∞ where every position ties).
        agreement: fraction of queries whose top-score set at θ (tie rule of the attention dtype)
            is the limit's attended set.
        scale: certified (lo, hi) of the score scale at which every query of the head is within
            eps of hard attention (0 if all rows are already exactly hard), for the scores the
            model softmaxed: it covers the rounding of the weights read at θ (so hi may be ∞,
            ``null`` in JSON, where that rounding could hide a tie).
        undetermined: queries left out because the limit leaves their row undetermined.
        paper_positions, paper_std, paper_split: the same three statistics as the paper computed
            them, counting weights above 1e-5 at 1000·θ (None when not measured).
    """

    layer: int
    head: int
    kind: str
    queries: int
    positions: float
    positions_std: float
    split: float
    fraction: float
    mass: float
    entropy: float
    margin: float
    agreement: float
    scale: tuple[float, float]
    undetermined: int = 0
    paper_positions: float | None = None
    paper_std: float | None = None
    paper_split: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["class"] = data.pop("kind")
        data["scale"] = [v if math.isfinite(v) else None for v in self.scale]  # strict JSON
        data["margin"] = self.margin if math.isfinite(self.margin) else None  # strict JSON
        return data


@dataclass(frozen=True)
class HeadBatch:
    """What one forward pass needs: keyword inputs and the mask of real query/key positions."""

    inputs: dict[str, Tensor]
    real: Tensor  # bool (batch, positions)


@dataclass
class _Totals:
    """Running sums per (layer, head) over queries, and the rows that may set the head's scale."""

    sums: dict[str, Tensor] = field(default_factory=dict)
    margins: list[list[Tensor]] = field(default_factory=list)  # per layer, (heads, rows) chunks
    candidates: list[list[_Candidates]] = field(default_factory=list)
    floor: list[Tensor] = field(default_factory=list)  # per layer and head, the largest lower bound on c*
    rtol: float = 0.0  # the tie tolerance of the attention's dtype
    unit: tuple[float, float] = (0.0, 0.0)  # its unit roundoff and smallest positive number

    def add(self, name: str, value: Tensor) -> None:
        self.sums[name] = self.sums.get(name, torch.zeros_like(value)) + value


@dataclass(frozen=True)
class HeadAtlas:
    """Every head of a model, measured and classified.

    Attributes:
        heads: one :class:`HeadStats` per (layer, head), layer-major.
        layers: the number of layers; ``n_heads`` the heads per layer.
        eps: the tolerance of the certified scales.
        thresholds: the classification thresholds.
        record: model, corpus, dtype, limit settings and versions, for the JSON file.
    """

    heads: tuple[HeadStats, ...]
    layers: int
    n_heads: int
    eps: float
    thresholds: Thresholds
    record: dict[str, Any] = field(default_factory=dict)

    def grid(self) -> list[list[str]]:
        """The classes as a layer × head grid."""
        return [[h.kind for h in self.heads[layer * self.n_heads:(layer + 1) * self.n_heads]]
                for layer in range(self.layers)]

    def counts(self) -> dict[str, int]:
        """How many heads of each class."""
        return {kind: sum(h.kind == kind for h in self.heads) for kind in CLASSES}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.heads/1``)."""
        return {
            "schema": SCHEMA, "eps": self.eps, "layers": self.layers, "n_heads": self.n_heads,
            "thresholds": {**asdict(self.thresholds),
                           "rule": "global if mean fraction of allowed positions attended >= "
                                   "global_fraction; else local if mean positions attended <= "
                                   "local_positions; else mixed"},
            "paper_approximation": {"scale": PAPER_SCALE, "threshold": PAPER_THRESHOLD},
            "counts": self.counts(),
            "heads": [h.to_dict() for h in self.heads],
            **self.record,
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """The atlas as strict JSON, also written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False, default=str)
        if path is not None:
            with atomic_path(Path(path)) as temporary:
                temporary.write_text(text + "\n", encoding="utf-8")
        return text

    def table(self) -> str:
        """One line per head: class, the exact statistics, the paper's approximation, the scale
        (layer 1 is the first block, as in the similarity measure; heads from 0)."""
        rows = [f"{'layer':>5} {'head':>4}  {'class':<6} {'#pos':>6} {'std(n)':>6} {'split':>5} "
                f"{'frac':>5} {'mass':>5} {'H':>5}  {'paper #pos/std/split':>20}  scale(eps={self.eps:g})"]
        for h in self.heads:
            paper = ("-" if h.paper_positions is None else
                     f"{h.paper_positions:.2f}/{h.paper_std:.2f}/{h.paper_split:.2f}")
            rows.append(f"{h.layer + 1:>5} {h.head:>4}  {h.kind:<6} {h.positions:>6.2f} "
                        f"{h.positions_std:>6.2f} "
                        f"{h.split:>5.2f} {h.fraction:>5.2f} {h.mass:>5.2f} {h.entropy:>5.2f}  "
                        f"{paper:>20}  {h.scale[1]:.4g}")
        return "\n".join(rows)


def _attentions(output: Any, where: str, model: nn.Module) -> tuple[Tensor, ...]:
    attentions = getattr(output, "attentions", None)
    if attentions is None and isinstance(output, Mapping):
        attentions = output.get("attentions")
    if not attentions or any(a is None for a in attentions):
        implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
        raise EmpiricalError(
            f"expected attention weights from {type(model).__name__} called with "
            f"output_attentions=True ({where}), got none; a fused attention kernel "
            f"({implementation or 'unknown'}) does not expose them: load the model with "
            "attn_implementation='eager'")
    return tuple(attentions)


def _is_causal(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    return bool(getattr(config, "is_decoder", False)) or getattr(config, "model_type", "") in _CAUSAL_TYPES


def _rounding(dtype: torch.dtype) -> tuple[float, float]:
    """Unit roundoff and smallest positive (subnormal) number of the attention's dtype."""
    return unit_roundoff(dtype), smallest_subnormal(dtype)


def _log_error(p: np.ndarray, gap: np.ndarray, u: float, tiny: float) -> np.ndarray:
    """A bound on |log p̂_j − (s_j − logsumexp(s))| up to one constant per row, for a softmax
    computed in a format with unit roundoff u from the scores s: rounding x_j = s_j − max(s)
    moves the exponent by ≤ u·|x_j| (|x_j| is the gap, up to rounding), exp adds ≤ 2 ulp (4u) and
    the division by the row's sum ≤ u (the sum's own error is one factor for the whole row and
    cancels in every gap): u·(gap + 8) leaves room for log(1 + r) ≥ r. A subnormal result is off
    by ≤ ``tiny`` absolutely (2·tiny/p̂ in the log); the float64 log adds ~1e-16 relatively."""
    with np.errstate(divide="ignore"):
        return u * (gap + 8.0) + 2 * tiny / p + 1e-15 * (np.abs(np.log(p)) + 1.0)


def _scale_bounds(margin: Tensor, tied: Tensor, allowed: Tensor, eps: float,
                  slack: Tensor) -> tuple[Tensor, Tensor]:
    """Per row, cheap lower and upper bounds on the certified scale (to pick the rows that may set
    a head's maximum): with t winners, n allowed, margin δ known to within ``slack``,
    K = max(1/t, (n − t)/t²), c* ≤ log(K/eps)/(δ − slack), and c* ≥ −log(x)/(δ + slack) where
    the winners' error with one loser at the margin meets eps, x = eps·t²/(1 − eps·t)."""
    t, n = tied.double(), allowed.double()
    k = torch.maximum(1 / t, (n - t) / t**2)
    upper = torch.log(k / eps).clamp_min(0) / (margin - slack).clamp_min(0)
    x = eps * t**2 / (1 - eps * t)
    lower = torch.where((x > 0) & (x < 1), -torch.log(x.clamp(1e-300, 1)) / (margin + slack), 0.0)
    return lower.nan_to_num(0.0), upper.nan_to_num(math.inf, posinf=math.inf)


def _check_finite(plain: Tensor, sums: Tensor, counted: Tensor, layer: int) -> None:
    """Refuse NaN or infinite attention weights in a measured row, naming layer and heads."""
    bad = counted & ~torch.isfinite(sums)
    if bool(bad.any()):
        heads = sorted(set(torch.nonzero(bad)[:, 1].tolist()))
        rows = plain.transpose(0, 1)[heads]
        raise EmpiricalError(
            f"expected finite attention weights at θ, got {int(torch.isnan(rows).sum())} NaN and "
            f"{int(torch.isinf(rows).sum())} infinite ones in layer {layer}, head(s) {heads} "
            f"({int(bad.sum())} query rows)")


def _measure_layer(totals: _Totals, layer: int, plain: Tensor, limit: Tensor, allowed: Tensor,
                   n_allowed: Tensor, queries: Tensor, paper: Tensor | None, eps: float) -> None:
    """Add one layer's rows of one batch to the running sums.

    Full-size (batch, heads, queries, keys) work stays in the attention's dtype and in few passes;
    only per-row results are summed in float64, and only the rows that may set a head's scale are
    kept (all heads at once, no loop over heads or rows).
    """
    f32 = torch.float32
    counted = queries & (n_allowed >= 2)
    attended = limit > 0  # the limit gives masked positions no weight
    n = attended.sum(-1, dtype=f32).double()  # (batch, heads, queries)
    # Rows the limit leaves undetermined (a tie no tracked order breaks, ties="nan") are NaN.
    undetermined = torch.isnan(limit.sum(-1))
    mask = counted & ~undetermined  # (batch, heads, queries)
    weight = mask.double()
    totals.add(f"undetermined{layer}", (counted & undetermined).double().sum((0, 2)))
    totals.add(f"count{layer}", weight.sum((0, 2)))
    totals.add(f"n{layer}", (n * weight).sum((0, 2)))
    totals.add(f"n2{layer}", (n**2 * weight).sum((0, 2)))
    totals.add(f"split{layer}", ((n > 1).double() * weight).sum((0, 2)))
    totals.add(f"fraction{layer}", (n / n_allowed.clamp_min(1) * weight).sum((0, 2)))
    totals.add(f"mass{layer}", ((plain * attended).sum(-1).double() * weight).sum((0, 2)))
    totals.add(f"entropy{layer}", (torch.special.entr(plain).sum(-1).double() * weight).sum((0, 2)))
    # Scores at θ up to a per-row constant (masked and underflowed positions have weight 0);
    # ties judged once, as the attention's dtype allows, and that judgement is what the
    # certified scale uses.
    # The tie rule of tie_set on log p (j ties when log p_j ≥ max log p − rtol·max|log p|, over
    # the visible positions), written on the weights so that no full-size log is taken:
    # p_j ≥ p_max·exp(−rtol·s) with s = −log(p_min), the smallest visible weight.
    visible = plain > 0
    top = plain.amax(-1, keepdim=True)
    smallest = plain.masked_fill(~visible, math.inf).amin(-1, keepdim=True)
    top_set = plain >= top * torch.exp(totals.rtol * smallest.log())
    totals.add(f"agree{layer}", ((top_set == attended).all(-1).double() * weight).sum((0, 2)))
    second = plain.masked_fill(top_set, 0.0).amax(-1)
    margin = (top[..., 0].double().log() - second.double().log())  # ∞: all visible positions tie
    if paper is not None:
        over = (paper > PAPER_THRESHOLD).sum(-1, dtype=f32).double()
        totals.add(f"pn{layer}", (over * weight).sum((0, 2)))
        totals.add(f"pn2{layer}", (over**2 * weight).sum((0, 2)))
        totals.add(f"psplit{layer}", ((over > 1).double() * weight).sum((0, 2)))
    heads = n.shape[1]
    if len(totals.margins) <= layer:
        totals.margins.append([])
        totals.candidates.append([])
        totals.floor.append(torch.zeros(heads, dtype=torch.float64))
    totals.margins[layer].append(margin.masked_fill(~mask, math.nan).transpose(0, 1).reshape(heads, -1))
    # The margin's rounding, with the loser's weight at least e^(−δ)/n (it is read from a
    # log-probability; see _log_error).
    u, tiny = totals.unit
    n_keys = n_allowed.expand_as(margin)
    slack = 3 * (u * (margin + 8) + 2 * tiny * n_keys * torch.exp(margin.clamp_max(700))
                 + 1e-15 * (margin + n_keys.log() + 1))
    lower, upper = _scale_bounds(margin, top_set.sum(-1), n_keys, eps, slack)
    floor = torch.maximum(totals.floor[layer], torch.where(mask, lower, 0.0).amax((0, 2)))
    totals.floor[layer] = floor
    chosen = mask & (upper >= floor[None, :, None]) & torch.isfinite(margin)
    if bool(chosen.any()):
        heads_of = torch.nonzero(chosen)[:, 1]
        keys = allowed.expand_as(plain)
        totals.candidates[layer].append(_Candidates(
            heads_of, upper[chosen], plain[chosen], top_set[chosen], keys[chosen]))
        if sum(len(c.head) for c in totals.candidates[layer]) > 4096:
            totals.candidates[layer] = [c.above(floor) for c in totals.candidates[layer]]


@dataclass(frozen=True)
class _Candidates:
    """Rows that may set a head's scale: head index, upper bound on the scale, weights at θ (the
    attention's dtype), the tie set judged at θ, and the allowed keys."""

    head: Tensor
    upper: Tensor
    weights: Tensor
    winners: Tensor
    allowed: Tensor

    def above(self, floor: Tensor) -> _Candidates:
        keep = self.upper >= floor[self.head]
        return _Candidates(self.head[keep], self.upper[keep], self.weights[keep], self.winners[keep],
                           self.allowed[keep])


def _merge(chunks: list[_Candidates], floor: Tensor) -> _Candidates | None:
    """The chunks of one layer side by side (padded with masked keys), pruned against the floor."""
    chunks = [c.above(floor) for c in chunks]
    chunks = [c for c in chunks if len(c.head)]
    if not chunks:
        return None
    width = max(c.weights.shape[1] for c in chunks)

    def pad(x: Tensor) -> Tensor:
        return torch.nn.functional.pad(x, (0, width - x.shape[1]))

    return _Candidates(torch.cat([c.head for c in chunks]), torch.cat([c.upper for c in chunks]),
                       torch.cat([pad(c.weights) for c in chunks]),
                       torch.cat([pad(c.winners) for c in chunks]),
                       torch.cat([pad(c.allowed) for c in chunks]))


def _exceeds(t: int, near: np.ndarray, far: np.ndarray, eps: float) -> float:
    """A certified scale at which a lower bound on the error of t tied winners exceeds eps (0 if
    none is found): the winners' R/(t(t + R)) with R = Σ e^(−c·near), and the top loser's
    x/(t + x + S) with x = e^(−c·near[0]) and S = Σ e^(−c·far) (both grow with x and R, fall with
    S). Each is log-concave in c, so the last crossing of eps is bracketed on a grid, bisected in
    float64 and checked in ``mpmath.iv`` slightly below it."""
    if not len(near):
        return 0.0
    log_eps, log_t = math.log(eps), math.log(t)

    def log_errors(c: float) -> tuple[float, float]:
        r = float(np.logaddexp.reduce(-c * near))
        x = -c * float(near[0])
        s = float(np.logaddexp.reduce(-c * far)) if len(far) else -math.inf
        return (r - log_t - float(np.logaddexp(log_t, r)),
                x - float(np.logaddexp.reduce([log_t, x, s])))

    best = 0.0
    end = math.log(max(len(near), 2) / (t * eps)) / float(near[0])  # both below eps beyond it
    grid = np.linspace(0.0, end, 201)[1:]
    for which in range(2):
        above = [log_errors(c)[which] > log_eps for c in grid]
        if not any(above):
            continue
        last = max(i for i, a in enumerate(above) if a)
        lo, hi = float(grid[last]), float(grid[min(last + 1, len(grid) - 1)]) * 1.01
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if log_errors(mid)[which] > log_eps else (lo, mid)
        c = lo * (1 - 1e-6)
        if c > best and _certify_exceeds(t, near, far, c, eps, which):
            best = c
    return best


def _certify_exceeds(t: int, near: np.ndarray, far: np.ndarray, c: float, eps: float, which: int) -> bool:
    from mpmath import iv  # heavy, and needed only to certify a scale

    with interval_bits(80):
        scale = iv.mpf(c)
        terms = [iv.exp(-scale * iv.mpf(float(g))) for g in near]
        if which == 0:
            total = sum(terms, iv.mpf(0))
            error = total / (t * (t + total))
        else:
            rest = sum((iv.exp(-scale * iv.mpf(float(g))) for g in far), iv.mpf(0))
            error = 1 / ((t + rest) / terms[0] + 1)
        return bool(error.a > iv.mpf(eps).b)


def _certified_rows(rows: _Candidates, eps: float,
                    unit: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate row, (lo, hi) containing the scale c* of the scores the model actually
    softmaxed, not of their rounded log-probabilities.

    Each gap g_j = log p̂_top − log p̂_j is known to within β_j (:func:`_log_error` at j and, twice,
    at the top). The winners' error R/(t(t + R)) grows with R, which falls as any gap grows; with
    one winner it is the whole error. So lo comes from the row with every gap at g + β (the error
    there is a lower bound, and weights that underflowed to 0 are left out), hi from the row with
    every gap at g − β and every underflowed weight at its smallest possible gap. With tied
    winners the top loser's error x/(t + x + S) grows with its own term x and falls with the
    others' sum S: hi also covers the row with one loser at min(g − β) and the others at g + β
    (the largest of those left out), and lo is where the winners' error with every gap at g + β,
    or the nearest loser's at g + β with the others at g − β, exceeds eps (:func:`_exceeds`).
    """
    u, tiny = unit
    p = rows.weights.double().numpy()
    winners, allowed = rows.winners.numpy(), rows.allowed.numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(p)
        top = np.max(np.where(winners, logs, -np.inf), axis=1, keepdims=True)
        gap = top - logs
        p_top = np.exp(top)
        beta = (_log_error(p, gap, u, tiny) + 2 * _log_error(p_top, np.zeros_like(top), u, tiny)) * (1 + 1e-9)
    beta = np.where(p > 0, beta, 0.0)  # zero weights (masked or underflowed) are handled apart
    losers = allowed & ~winners & (p > 0)
    under = allowed & (p == 0)
    t = winners.sum(1)
    hopeless = (losers & (gap - beta <= 0)).any(1)  # rounding may hide a tie: no finite bound
    low_gap = np.where(losers, gap - beta, np.inf)
    high_gap = np.where(losers, gap + beta, np.inf)
    # An underflowed weight is below the format's smallest number: its gap is at least this.
    under_gap = (top - math.log(tiny) - 2 * _log_error(p_top, np.zeros_like(top), u, tiny)) * (1 - 1e-9)
    low_gap = np.where(under, under_gap, low_gap)
    low_gap = np.where(hopeless[:, None], 1.0, np.maximum(low_gap, 0.0))

    def scores(gaps: np.ndarray) -> np.ndarray:
        return np.where(winners, 0.0, -gaps)

    up, down = scores(high_gap), scores(low_gap)
    # Tied winners: the top loser at its smallest gap, the others at their largest but one.
    tied = np.nonzero(t > 1)[0]
    mixed = np.where(winners[tied], 0.0, -high_gap[tied])
    if len(tied):
        nearest = np.argmin(high_gap[tied], axis=1)
        found = np.isfinite(high_gap[tied, nearest])
        mixed[np.arange(len(tied))[found], nearest[found]] = -np.inf
        first = np.min(np.where(losers[tied], gap[tied] - beta[tied], np.inf), axis=1)
        mixed = np.concatenate([mixed, -first[:, None]], axis=1)
    width = max(up.shape[1], mixed.shape[1] if len(tied) else 0)

    def widen(a: np.ndarray) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=-np.inf)

    grid = np.concatenate([widen(up), widen(down), widen(mixed)]) if len(tied) else np.concatenate([up, down])
    # The winners are already split from the losers (by the tie rule of the attention's dtype):
    # the certificate must not judge ties again.
    scales = np.array(scale_to_saturate_map(grid, eps, rtol=0.0).rows)
    m = len(p)
    lo, hi = scales[:m, 0].copy(), scales[m:2 * m, 1].copy()
    if len(tied):
        hi[tied] = np.maximum(hi[tied], scales[2 * m:, 1])
        for i in tied:
            near = np.sort(high_gap[i][np.isfinite(high_gap[i])])
            order = np.argsort(high_gap[i])
            first = order[0] if np.isfinite(high_gap[i][order[0]]) else -1
            far = low_gap[i][losers[i] | under[i]]
            if first >= 0 and losers[i, first]:  # the others' sum, at their smallest gaps
                far = np.delete(low_gap[i], first)[np.delete(losers[i] | under[i], first)]
            lo[i] = _exceeds(int(t[i]), near, far, eps)
    hi[hopeless] = math.inf
    return lo, hi


def _across_ranks(totals: _Totals) -> _Totals:
    """What one process measuring every rank's batches would hold: the sums added up, the margins
    and candidate rows gathered, the floors' maximum (:mod:`empirical.distributed`; the totals
    themselves without a process group)."""
    if distributed.current().size == 1:
        return totals
    ranks = distributed.gather((totals.margins, totals.candidates, totals.floor))
    layers = range(len(totals.floor))
    return _Totals(
        sums=distributed.reduce_sums(totals.sums),
        margins=[[chunk for rank in ranks for chunk in rank[0][layer]] for layer in layers],
        candidates=[[chunk for rank in ranks for chunk in rank[1][layer]] for layer in layers],
        floor=[torch.stack([rank[2][layer] for rank in ranks]).amax(0) for layer in layers],
        rtol=totals.rtol, unit=totals.unit)


def _finish(totals: _Totals, layers: int, heads: int, eps: float, thresholds: Thresholds,
            with_paper: bool) -> tuple[HeadStats, ...]:
    out = []
    for layer in range(layers):
        sums = {key: totals.sums[f"{key}{layer}"] for key in
                ("count", "n", "n2", "split", "fraction", "mass", "entropy", "agree")}
        count = sums["count"].clamp_min(1)
        mean = sums["n"] / count
        std = (sums["n2"] / count - mean**2).clamp_min(0).sqrt()
        paper = None
        if with_paper:
            pmean = totals.sums[f"pn{layer}"] / count
            paper = (pmean, (totals.sums[f"pn2{layer}"] / count - pmean**2).clamp_min(0).sqrt(),
                     totals.sums[f"psplit{layer}"] / count)
        margins = torch.cat(totals.margins[layer], dim=1).nanmedian(dim=1).values
        scales = [(0.0, 0.0)] * heads
        rows = _merge(totals.candidates[layer], totals.floor[layer])
        if rows is not None:
            lo, hi = _certified_rows(rows, eps, totals.unit)
            head_of = rows.head.numpy()
            scales = [(float(lo[head_of == h].max()), float(hi[head_of == h].max()))
                      if (head_of == h).any() else (0.0, 0.0) for h in range(heads)]
        for h in range(heads):
            fraction = float(sums["fraction"][h] / count[h])
            out.append(HeadStats(
                layer=layer, head=h, kind=thresholds.classify(float(mean[h]), fraction),
                queries=int(sums["count"][h]), positions=float(mean[h]), positions_std=float(std[h]),
                split=float(sums["split"][h] / count[h]), fraction=fraction,
                mass=float(sums["mass"][h] / count[h]), entropy=float(sums["entropy"][h] / count[h]),
                margin=math.inf if math.isnan(float(margins[h])) else float(margins[h]),
                agreement=float(sums["agree"][h] / count[h]), scale=scales[h],
                undetermined=int(totals.sums[f"undetermined{layer}"][h]),
                paper_positions=None if paper is None else float(paper[0][h]),
                paper_std=None if paper is None else float(paper[1][h]),
                paper_split=None if paper is None else float(paper[2][h]),
            ))
    return tuple(out)


def measure_heads(
    model: nn.Module, batches: Iterable[HeadBatch], *, causal: bool, eps: float = 1e-3,
    settings: Settings | None = None, paper: bool = True, thresholds: Thresholds | None = None,
    progress: bool = False, limit: Callable[..., SaturatedOutput] | None = None,
    sharded: bool = False,
) -> HeadAtlas:
    """The atlas of any model that returns ``attentions`` when called with ``output_attentions=True``.

    Args:
        model: the model (eval mode; never modified). Its attention outputs must be
            (batch, heads, queries, keys) per layer, like Hugging Face's.
        batches: inputs and real-position masks.
        causal: whether query i may attend only to keys j ≤ i.
        eps: tolerance of the certified scales, in (0, 1).
        settings: limit settings. The default, ``ties="nan"``, decides every tie the model's lower
            orders decide (recomputing in float64 with up to 16 orders where float32 cannot tell
            a near-tie from a tie) and leaves the rest undetermined, reported per head;
            ``ties="uniform"`` is much faster but takes every leading-order tie, float32 near-ties
            included, as exact.
        paper: also compute the paper's approximation at 1000·θ (one more forward pass).
        thresholds: classification thresholds.
        progress: show a progress bar.
        limit: the model's :class:`~saturated.saturate.SaturatedModel` to reuse (its exported
            graphs are cached), or anything called like it; ``settings`` then go unused.
        sharded: ``batches`` are this rank's share under ``torchrun``: every rank's measurements
            are combined, and every rank returns the atlas of all of them.

    Raises:
        EmpiricalError: eps outside (0, 1), attention that cannot be read, non-finite attention
            weights in a measured row, or a limit that is not determined.
    """
    if not (isinstance(eps, (int, float)) and 0 < eps < 1):
        raise EmpiricalError(f"expected eps in (0, 1), got {eps!r}")
    thresholds = thresholds or Thresholds()
    settings = settings or Settings(ties="nan")
    limit = limit or SaturatedModel(model, settings)
    grown = scaled_forward(model, PAPER_SCALE) if paper else None
    totals = _Totals()
    layers = heads = 0
    options = {"output_attentions": True, "return_dict": True}
    for batch in tqdm(list(batches), desc="head atlas", unit="batch", disable=not progress):
        with export_ready(model), torch.inference_mode():
            plain = _attentions(model(**batch.inputs, **options), "at θ", model)
            at_paper = _attentions(grown(**batch.inputs, **options), "at 1000·θ", model) if grown else None
        real = batch.real.bool()
        # Allowed keys per query: the real ones, and with causal masking only those up to it.
        n_allowed = (real.cumsum(-1) if causal else real.sum(-1, keepdim=True).expand_as(real)).double()
        for layer, weights in enumerate(plain):  # before the limit, which would fail less clearly
            _check_finite(weights, weights.sum(-1), real[:, None, :] & (n_allowed[:, None, :] >= 2), layer)
        try:
            exact = _attentions(limit(**batch.inputs, **options).value, "in the limit", model)
        except SaturationError as err:
            raise EmpiricalError(f"the exact limit is not available: {err}") from err
        allowed = real[:, None, None, :]
        if causal:
            width = real.shape[-1]
            allowed = allowed & torch.ones(width, width, dtype=torch.bool).tril()
        queries = real[:, None, :]
        n_allowed = n_allowed[:, None, :]
        layers, heads = len(plain), plain[0].shape[1]
        totals.rtol, totals.unit = default_rtol(plain[0].dtype), _rounding(plain[0].dtype)
        with torch.inference_mode():
            for layer in range(layers):
                _measure_layer(totals, layer, plain[layer], exact[layer], allowed, n_allowed, queries,
                               None if at_paper is None else at_paper[layer], eps)
    if not layers:
        raise EmpiricalError("expected at least one batch of inputs, got none")
    if sharded:
        totals = _across_ranks(totals)
    return HeadAtlas(_finish(totals, layers, heads, eps, thresholds, paper), layers, heads, eps,
                     thresholds, {"model": model_record(model), "causal": causal,
                                  "limit_settings": asdict(getattr(limit, "settings", settings)),
                                  "versions": versions()})


def head_atlas(
    model: nn.Module, tokenizer: Any, sentences: Sequence[str] | Corpus, *, eps: float = 1e-3,
    batch_size: int = 16, max_length: int = 512, paper: bool = True,
    thresholds: Thresholds | None = None, settings: Settings | None = None, progress: bool = False,
) -> HeadAtlas:
    """The head atlas of a Hugging Face model on a corpus (see :func:`measure_heads`).

    Sentences are tokenized and batched by :mod:`empirical.models.batching`. Encoder–decoder models are
    not supported (their cross-attention has no single stack of heads).

    >>> from empirical.models.loading import load_model
    >>> model, tokenizer = load_model("minilm", num_layers=1)
    >>> atlas = head_atlas(model, tokenizer, ["The cat sat on the mat."], paper=False)
    >>> atlas.layers, atlas.n_heads, sorted(atlas.counts())
    (1, 12, ['global', 'local', 'mixed'])
    """
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        raise EmpiricalError("the head atlas reads one stack of self-attention; encoder–decoder "
                             "models are not supported")
    texts = list(sentences)
    # Under torchrun each rank measures its share of the batches (empirical.distributed).
    _, batches = _prepare(model, tokenizer, texts, max_length=max_length, batch_size=batch_size,
                          sharded=True)
    prepared = [HeadBatch(b.inputs, b.stacks[0][1]) for b in batches]
    atlas = measure_heads(model, prepared, causal=_is_causal(model), eps=eps, settings=settings,
                          paper=paper, thresholds=thresholds,
                          progress=progress and distributed.is_writer(), sharded=True)
    corpus = sentences.to_dict() if isinstance(sentences, Corpus) else {
        "source": "in-memory list", "n_sentences": len(texts), "sha256": Corpus(tuple(texts), "").sha256}
    tokens = sum(int(b.stacks[0][1].sum()) for b in batches)
    record = {**atlas.record, "corpus": corpus, "batch_size": batch_size, "max_length": max_length,
              "distributed": distributed.provenance(tokens)}
    return HeadAtlas(atlas.heads, atlas.layers, atlas.n_heads, eps, atlas.thresholds, record)


_COLORS = {"local": "#1f77b4", "mixed": "#bbbbbb", "global": "#d62728"}


def plot_atlas(atlases: Mapping[str, HeadAtlas], path: str | Path, *, title: str = "") -> Path:
    """Per atlas a layer × head grid coloured by class, and histograms over heads of the three
    statistics, one colour per atlas (e.g. pretrained beside random init)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    if not atlases:
        raise EmpiricalError("expected at least one atlas to plot")
    fig = Figure(figsize=(4.0 * max(len(atlases), 3), 7.0), dpi=110)
    grid = fig.add_gridspec(2, max(len(atlases), 3))
    cmap = ListedColormap([_COLORS[k] for k in CLASSES])
    for column, (label, atlas) in enumerate(atlases.items()):
        ax = fig.add_subplot(grid[0, column])
        codes = [[CLASSES.index(kind) for kind in row] for row in atlas.grid()]
        ax.imshow(codes, cmap=cmap, vmin=0, vmax=len(CLASSES) - 1, aspect="auto")
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(0, atlas.n_heads, max(1, atlas.n_heads // 12)))
        ax.set_yticks(range(0, atlas.layers, max(1, atlas.layers // 12)))
        counts = atlas.counts()
        ax.set_title(f"{label}: " + ", ".join(f"{counts[k]} {k}" for k in CLASSES), fontsize=9)
        # rows are indices from 0; labelled as the similarity measure numbers layers (1 = first block)
        ax.set_yticklabels([str(int(tick) + 1) for tick in ax.get_yticks()])
        ax.legend(handles=[Patch(color=_COLORS[k], label=k) for k in CLASSES], fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    statistics = (("positions", "# positions attended"), ("positions_std", "std(n)"),
                  ("split", "split attention probability"))
    for column, (name, label) in enumerate(statistics):
        ax = fig.add_subplot(grid[1, column])
        series = {atlas_label: [float(getattr(h, name)) for h in atlas.heads]
                  for atlas_label, atlas in atlases.items()}
        # Every statistic is ≥ 0; a common range (at least [0, 1]) keeps a constant series
        # at its value instead of centring an axis of width 1 on it.
        top = max((max(values) for values in series.values() if values), default=1.0)
        edges = [top * i / 20 if top > 1.0 else i / 20 for i in range(21)]
        for index, (atlas_label, values) in enumerate(series.items()):
            ax.hist(values, bins=edges, alpha=0.55, color=f"C{index % 10}", label=atlas_label)
        ax.set_xlim(edges[0], edges[-1])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of heads
        ax.set_xlabel(label)
        ax.set_ylabel("heads")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    with atomic_path(out) as temporary:
        fig.savefig(temporary, format=out.suffix.lstrip(".") or "png")
    return out
