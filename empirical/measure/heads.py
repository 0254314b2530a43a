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
  :func:`saturated.bounds.certified_row_scales`);
* the paper's approximation: at 1000·θ, the number of weights above 1e-5.

Per head the paper's three statistics follow exactly: the mean of n_i ("# positions attended"),
its standard deviation over queries ("std(n)"), and the fraction of queries with n_i > 1 ("split
attention probability"). Queries with fewer than two allowed positions (the first token of a
causal model) say nothing about a head and are left out. A head is classified by
:class:`Thresholds`: ``"global"`` if its queries attend on average to at least half of their
allowed positions, ``"local"`` if to at most two positions, ``"mixed"`` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from empirical import distributed
from empirical.errors import EmpiricalError
from empirical.measure.pipeline import batch_progress, corpus_record, prepare, texts_of
from empirical.measure.scaled import limit_model, scaled_forward
from empirical.models.corpus import Corpus
from empirical.models.provenance import model_record, versions
from empirical.outputs import Result, save_figure
from empirical.validation import check_measurable, check_real
from homogeneity.tracing import export_ready
from saturated.errors import SaturationError
from saturated.functional import default_rtol
from saturated.rounding import smallest_subnormal, unit_roundoff
from saturated.rules import Settings
from saturated.saturate import SaturatedOutput

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

    def __post_init__(self) -> None:
        check_real(self.global_fraction, "global_fraction", low=0, high=1, low_open=True)
        check_real(self.local_positions, "local_positions", low=1)

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
        head: the head's index, from 0 (in JSON too); tables and plots show index + 1.
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


@dataclass(frozen=True)
class _LayerSums:
    """One layer's sums over measured queries, one value per head (float64): the queries counted
    and left undetermined, n and n², split rows, fractions of allowed positions, attention mass,
    entropy, agreement of the top set with the limit, and the paper's n, n² and split rows."""

    count: Tensor
    undetermined: Tensor
    n: Tensor
    n2: Tensor
    split: Tensor
    fraction: Tensor
    mass: Tensor
    entropy: Tensor
    agree: Tensor
    paper_n: Tensor | None = None
    paper_n2: Tensor | None = None
    paper_split: Tensor | None = None

    def tensors(self) -> dict[str, Tensor]:
        """The sums by field name (the paper's left out when not measured)."""
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}

    def __add__(self, other: _LayerSums) -> _LayerSums:
        mine, theirs = self.tensors(), other.tensors()
        return _LayerSums(**{name: mine[name] + theirs[name] for name in mine})


@dataclass
class _Totals:
    """Running sums per (layer, head) over queries, and the rows that may set the head's scale."""

    sums: list[_LayerSums] = field(default_factory=list)  # per layer
    margins: list[list[Tensor]] = field(default_factory=list)  # per layer, (heads, rows) chunks
    candidates: list[list[_Candidates]] = field(default_factory=list)
    floor: list[Tensor] = field(default_factory=list)  # per layer and head, the largest lower bound on c*
    rtol: float = 0.0  # the tie tolerance of the attention's dtype
    unit: tuple[float, float] = (0.0, 0.0)  # its unit roundoff and smallest positive number


@dataclass(frozen=True)
class HeadAtlas(Result):
    """Every head of a model, measured and classified.

    Attributes:
        heads: one :class:`HeadStats` per (layer, head), layer-major.
        num_layers: the number of layers (``layers`` in JSON); ``n_heads`` the heads per layer.
        eps: the tolerance of the certified scales.
        thresholds: the classification thresholds.
        record: model, corpus, dtype, limit settings and versions, for the JSON file.
    """

    heads: tuple[HeadStats, ...]
    num_layers: int
    n_heads: int
    eps: float
    thresholds: Thresholds
    record: dict[str, Any] = field(default_factory=dict)

    def grid(self) -> list[list[str]]:
        """The classes as a layer × head grid."""
        return [[h.kind for h in self.heads[layer * self.n_heads:(layer + 1) * self.n_heads]]
                for layer in range(self.num_layers)]

    def counts(self) -> dict[str, int]:
        """How many heads of each class."""
        return {kind: sum(h.kind == kind for h in self.heads) for kind in CLASSES}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.heads/1``)."""
        return {
            "schema": SCHEMA, "eps": self.eps, "layers": self.num_layers, "n_heads": self.n_heads,
            "thresholds": {**asdict(self.thresholds),
                           "rule": "global if mean fraction of allowed positions attended >= "
                                   "global_fraction; else local if mean positions attended <= "
                                   "local_positions; else mixed"},
            "paper_approximation": {"scale": PAPER_SCALE, "threshold": PAPER_THRESHOLD},
            "counts": self.counts(),
            "heads": [h.to_dict() for h in self.heads],
            **self.record,
        }

    def table(self) -> str:
        """One line per head: class, the exact statistics, the paper's approximation, the scale
        (layers and heads from 1, as in the report and the plot: layer 1 is the first block)."""
        rows = [f"{'layer':>5} {'head':>4}  {'class':<6} {'#pos':>6} {'std(n)':>6} {'split':>5} "
                f"{'frac':>5} {'mass':>5} {'H':>5}  {'paper #pos/std/split':>20}  scale(eps={self.eps:g})"]
        for h in self.heads:
            paper = ("-" if h.paper_positions is None else
                     f"{h.paper_positions:.2f}/{h.paper_std:.2f}/{h.paper_split:.2f}")
            rows.append(f"{h.layer + 1:>5} {h.head + 1:>4}  {h.kind:<6} {h.positions:>6.2f} "
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
    """Whether queries attend only to earlier keys: a decoder configuration, a known causal type,
    or an attention module marked ``is_causal`` (as transformers marks every decoder family's:
    Qwen2, Gemma, Phi-3, GPT-NeoX, Mixtral, Qwen2-MoE, …)."""
    config = getattr(model, "config", None)
    return (bool(getattr(config, "is_decoder", False))
            or getattr(config, "model_type", "") in _CAUSAL_TYPES
            or any(getattr(module, "is_causal", False) is True for module in model.modules()))


def _rounding(dtype: torch.dtype) -> tuple[float, float]:
    """Unit roundoff and smallest positive (subnormal) number of the attention's dtype."""
    return unit_roundoff(dtype), smallest_subnormal(dtype)


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
    from saturated.bounds import scale_bounds_of_rows  # with mpmath and scipy: loaded on first use

    f32 = torch.float32
    counted = queries & (n_allowed >= 2)
    attended = limit > 0  # the limit gives masked positions no weight
    n = attended.sum(-1, dtype=f32).double()  # (batch, heads, queries)
    # Rows the limit leaves undetermined (a tie no tracked order breaks, ties="nan") are NaN.
    undetermined = torch.isnan(limit.sum(-1))
    mask = counted & ~undetermined  # (batch, heads, queries)
    weight = mask.double()

    def per_head(rows: Tensor) -> Tensor:  # a row left out may hold NaN or ±∞, and NaN·0 is NaN
        return (rows * weight).nan_to_num().sum((0, 2))

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
    second = plain.masked_fill(top_set, 0.0).amax(-1)
    margin = (top[..., 0].double().log() - second.double().log())  # ∞: all visible positions tie
    over = None if paper is None else (paper > PAPER_THRESHOLD).sum(-1, dtype=f32).double()
    sums = _LayerSums(
        count=weight.sum((0, 2)), undetermined=(counted & undetermined).double().sum((0, 2)),
        n=per_head(n), n2=per_head(n**2), split=per_head((n > 1).double()),
        fraction=per_head(n / n_allowed.clamp_min(1)), mass=per_head((plain * attended).sum(-1).double()),
        entropy=per_head(torch.special.entr(plain).sum(-1).double()),
        agree=per_head((top_set == attended).all(-1).double()),
        paper_n=None if over is None else per_head(over),
        paper_n2=None if over is None else per_head(over**2),
        paper_split=None if over is None else per_head((over > 1).double()))
    if len(totals.sums) <= layer:
        totals.sums.append(sums)
    else:
        totals.sums[layer] = totals.sums[layer] + sums
    heads = n.shape[1]
    if len(totals.margins) <= layer:
        totals.margins.append([])
        totals.candidates.append([])
        totals.floor.append(torch.zeros(heads, dtype=torch.float64))
    totals.margins[layer].append(margin.masked_fill(~mask, math.nan).transpose(0, 1).reshape(heads, -1))
    # The margin's rounding, with the loser's weight at least e^(−δ)/n (it is read from a
    # log-probability; see saturated.bounds.softmax_log_error).
    u, tiny = totals.unit
    n_keys = n_allowed.expand_as(margin)
    slack = 3 * (u * (margin + 8) + 2 * tiny * n_keys * torch.exp(margin.clamp_max(700))
                 + 1e-15 * (margin + n_keys.log() + 1))
    lower, upper = scale_bounds_of_rows(margin, top_set.sum(-1), n_keys, eps, slack)
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


def _reduce_layer_sums(sums: list[_LayerSums]) -> list[_LayerSums]:
    """Every rank's per-layer sums, added up."""
    reduced = distributed.reduce_sums({(layer, name): value for layer, record in enumerate(sums)
                                       for name, value in record.tensors().items()})
    return [_LayerSums(**{name: reduced[layer, name] for name in record.tensors()})
            for layer, record in enumerate(sums)]


def _across_ranks(totals: _Totals) -> _Totals:
    """What one process measuring every rank's batches would hold: the sums added up, the margins
    and candidate rows gathered, the floors' maximum (:mod:`empirical.distributed`; the totals
    themselves without a process group)."""
    if distributed.current().size == 1:
        return totals
    ranks = distributed.gather((totals.margins, totals.candidates, totals.floor))
    layers = range(len(totals.floor))
    return _Totals(
        sums=_reduce_layer_sums(totals.sums),
        margins=[[chunk for rank in ranks for chunk in rank[0][layer]] for layer in layers],
        candidates=[[chunk for rank in ranks for chunk in rank[1][layer]] for layer in layers],
        floor=[torch.stack([rank[2][layer] for rank in ranks]).amax(0) for layer in layers],
        rtol=totals.rtol, unit=totals.unit)


def _finish(totals: _Totals, layers: int, heads: int, eps: float, thresholds: Thresholds,
            with_paper: bool) -> tuple[HeadStats, ...]:
    from saturated.bounds import certified_row_scales  # with mpmath and scipy: loaded on first use

    out = []
    for layer in range(layers):
        sums = totals.sums[layer]
        count = sums.count.clamp_min(1)
        mean = sums.n / count
        std = (sums.n2 / count - mean**2).clamp_min(0).sqrt()
        paper = None
        if with_paper and sums.paper_n is not None and sums.paper_n2 is not None \
                and sums.paper_split is not None:
            pmean = sums.paper_n / count
            paper = (pmean, (sums.paper_n2 / count - pmean**2).clamp_min(0).sqrt(), sums.paper_split / count)
        margins = torch.cat(totals.margins[layer], dim=1).nanmedian(dim=1).values
        scales = [(0.0, 0.0)] * heads
        rows = _merge(totals.candidates[layer], totals.floor[layer])
        if rows is not None:
            lo, hi = certified_row_scales(rows.weights.double().numpy(), rows.winners.numpy(),
                                          rows.allowed.numpy(), eps, totals.unit)
            head_of = rows.head.numpy()
            scales = [(float(lo[head_of == h].max()), float(hi[head_of == h].max()))
                      if (head_of == h).any() else (0.0, 0.0) for h in range(heads)]
        for h in range(heads):
            fraction = float(sums.fraction[h] / count[h])
            out.append(HeadStats(
                layer=layer, head=h, kind=thresholds.classify(float(mean[h]), fraction),
                queries=int(sums.count[h]), positions=float(mean[h]), positions_std=float(std[h]),
                split=float(sums.split[h] / count[h]), fraction=fraction,
                mass=float(sums.mass[h] / count[h]), entropy=float(sums.entropy[h] / count[h]),
                margin=math.inf if math.isnan(float(margins[h])) else float(margins[h]),
                agreement=float(sums.agree[h] / count[h]), scale=scales[h],
                undetermined=int(sums.undetermined[h]),
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
    eps = check_real(eps, "eps (the certified scales' tolerance)", low=0, high=1, low_open=True,
                     high_open=True)
    check_measurable(model, "the head atlas (it runs the model)")
    thresholds = Thresholds() if thresholds is None else thresholds
    if not isinstance(thresholds, Thresholds):
        raise EmpiricalError(f"expected thresholds to be a Thresholds, got {type(thresholds).__name__}")
    settings = settings or Settings(ties="nan")
    # the attention weights alone: a hidden state the atlas does not read is not decided for it
    limit = limit or limit_model(model, settings, outputs={"attentions"})
    grown = scaled_forward(model, PAPER_SCALE) if paper else None
    totals = _Totals()
    layers = heads = 0
    options = {"output_attentions": True, "return_dict": True}
    for batch in batch_progress(list(batches), "head atlas", progress):
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
    >>> atlas.num_layers, atlas.n_heads, sorted(atlas.counts())
    (1, 12, ['global', 'local', 'mixed'])
    """
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        raise EmpiricalError("the head atlas reads one stack of self-attention; encoder–decoder "
                             "models are not supported")
    texts = texts_of(sentences)
    # Under torchrun each rank measures its share of the batches (empirical.distributed).
    prepared = prepare(model, tokenizer, texts, max_length=max_length, batch_size=batch_size, sharded=True)
    batches = [HeadBatch(b.inputs, b.stacks[0][1]) for b in prepared.batches]
    atlas = measure_heads(model, batches, causal=_is_causal(model), eps=eps, settings=settings,
                          paper=paper, thresholds=thresholds,
                          progress=progress and distributed.is_writer(), sharded=True)
    record = {**atlas.record, "corpus": corpus_record(sentences, texts), "batch_size": batch_size,
              "max_length": max_length, "distributed": distributed.provenance(prepared.n_tokens())}
    return HeadAtlas(atlas.heads, atlas.num_layers, atlas.n_heads, eps, atlas.thresholds, record)


_COLORS = {"local": "#1f77b4", "mixed": "#bbbbbb", "global": "#d62728"}
_STATISTICS = (
    # attribute, axis label, lowest possible value (a measured query attends to at least 1 position)
    ("positions", "# positions attended (n, mean over queries)", 1.0),
    ("positions_std", "std(n): spread of n over queries", 0.0),
    ("split", "split attention probability (share of n > 1)", 0.0),
)
"""The histograms of :func:`plot_atlas`: n is the number of positions a query attends to in the limit."""
_ANNOTATED_HEADS = 8
"""Grids of at most this many heads per layer carry each head's margin as a number in its cell
(wider grids have cells too narrow for one: colour only)."""


def plot_atlas(atlases: Mapping[str, HeadAtlas], path: str | Path, *, title: str = "") -> Path:
    """Per atlas a layer × head grid coloured by class (by the score margin when every head has one
    class, which a single colour would not show), and histograms over heads of the three
    statistics, one colour per atlas (e.g. pretrained beside random init). Layers and heads are
    numbered from 1, as in the report."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not atlases:
        raise EmpiricalError("expected at least one atlas to plot")
    fig = Figure(figsize=(4.0 * max(len(atlases), 3), 7.0), dpi=110)
    grid = fig.add_gridspec(2, max(len(atlases), 3))
    one_class = [atlas for atlas in atlases.values() if _one_class(atlas)]
    norm = _margin_norm(one_class)  # one colour scale, so that the atlases compare
    for column, (label, atlas) in enumerate(atlases.items()):
        ax = fig.add_subplot(grid[0, column])
        if not _one_class(atlas):
            _draw_classes(ax, label, atlas)
        elif norm is None:
            _say_one_class(ax, label, atlas)
        else:
            _draw_margins(fig, ax, label, atlas, norm)
    for column, (name, label, low) in enumerate(_STATISTICS):
        ax = fig.add_subplot(grid[1, column])
        series = {atlas_label: [float(getattr(h, name)) for h in atlas.heads]
                  for atlas_label, atlas in atlases.items()}
        # From the lowest possible value, over at least 1: a constant series stays at its value
        # instead of centring an axis on it, and a share keeps its whole range [0, 1].
        top = max((max(values) for values in series.values() if values), default=low)
        span = max(top - low, 1.0)
        edges = [low + span * i / 20 for i in range(21)]
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
    return save_figure(fig, path)


def _number_heads(ax: Any, atlas: HeadAtlas) -> None:
    """Heads and layers on a grid's axes, both from 1 (layer 1 is the first block), thinned to
    about 12 ticks."""
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    heads = range(0, atlas.n_heads, max(1, atlas.n_heads // 12))
    layers = range(0, atlas.num_layers, max(1, atlas.num_layers // 12))
    ax.set_xticks(list(heads), [str(index + 1) for index in heads])
    ax.set_yticks(list(layers), [str(index + 1) for index in layers])


def _draw_classes(ax: Any, label: str, atlas: HeadAtlas) -> None:
    """The layer × head grid coloured by class, with the counts in the title."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    codes = [[CLASSES.index(kind) for kind in row] for row in atlas.grid()]
    ax.imshow(codes, cmap=ListedColormap([_COLORS[k] for k in CLASSES]), vmin=0,
              vmax=len(CLASSES) - 1, aspect="auto")
    _number_heads(ax, atlas)
    counts = atlas.counts()
    ax.set_title(f"{label}: " + ", ".join(f"{counts[k]} {k}" for k in CLASSES), fontsize=9)
    ax.legend(handles=[Patch(color=_COLORS[k], label=k) for k in CLASSES], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _one_class(atlas: HeadAtlas) -> bool:
    return sum(count > 0 for count in atlas.counts().values()) < 2


def _margin_grid(atlas: HeadAtlas) -> list[list[float]]:
    return [[h.margin for h in atlas.heads[layer * atlas.n_heads:(layer + 1) * atlas.n_heads]]
            for layer in range(atlas.num_layers)]


def _margin_norm(atlases: Sequence[HeadAtlas]) -> Any:
    """One colour scale for the margins of ``atlases`` (logarithmic when they span more than a
    factor of 10); ``None`` when fewer than two distinct finite margins leave nothing to colour."""
    from matplotlib.colors import LogNorm, Normalize

    finite = {h.margin for atlas in atlases for h in atlas.heads if math.isfinite(h.margin)}
    if len(finite) < 2:
        return None
    low, high = min(finite), max(finite)
    return LogNorm(low, high) if low > 0 and high > 10 * low else Normalize(low, high)


def _say_one_class(ax: Any, label: str, atlas: HeadAtlas) -> None:
    """Every head has one class and the margins do not vary: a sentence, not a blank grid."""
    kind = atlas.heads[0].kind if atlas.heads else CLASSES[0]
    ax.set_axis_off()
    ax.set_title(f"{label}: all {len(atlas.heads)} heads {kind}", fontsize=9)
    ax.text(0.5, 0.5, f"every head {kind}:\na grid of one colour would show nothing", ha="center",
            va="center", transform=ax.transAxes, fontsize=9)


def _draw_margins(fig: Any, ax: Any, label: str, atlas: HeadAtlas, norm: Any) -> None:
    """Every head has one class: the grid coloured by each head's median score margin at θ (how
    far its queries are from a tie; grey where every position ties), on the shared scale ``norm``."""
    from matplotlib import colormaps

    from empirical.measure.plotting import text_color

    margins = _margin_grid(atlas)
    cmap = colormaps["viridis"].with_extremes(bad="0.85")
    shown = [[m if math.isfinite(m) else math.nan for m in row] for row in margins]
    image = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto")
    _number_heads(ax, atlas)
    ax.set_title(f"{label}: all {len(atlas.heads)} heads {atlas.heads[0].kind};\n"
                 "colour: median score margin at θ", fontsize=9)
    fig.colorbar(image, ax=ax, label="margin (nats; grey: all positions tie)", fraction=0.08,
                 pad=0.03)
    for i, row in enumerate(margins if atlas.n_heads <= _ANNOTATED_HEADS else []):
        for j, margin in enumerate(row):
            finite = math.isfinite(margin)
            ax.text(j, i, f"{margin:.2g}" if finite else "∞", ha="center", va="center",
                    fontsize=6, color=text_color(image.to_rgba(margin)) if finite else "black")
