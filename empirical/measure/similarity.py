"""Representation similarity (paper Figure 4): how close f(x; θ) is to f(x; c·θ), layer by layer.

For every hidden state h_l (embeddings first) the measure is the mean, over all real
(non-padding) tokens of the corpus, of cos(h_l(x; θ), h_l(x; c·θ)), with every parameter scaled
by c. Near 1: the layer already computes (up to scale) what its saturated version computes.

Against the exact limit (c = ∞) a token's limit direction may be *undetermined*: the exact
computation could not decide it in float64 with the most orders it tracks (its leading
coefficients are within their rounding bound of zero, or a hard-attention tie that matters is
left unbroken; see ``docs/saturated.md``). Such a token has no cosine: it is left out of its
layer's mean, and the result names, per layer, the sentences holding one and how many tokens
were left out. A layer with no determined token has no value (NaN; null in JSON).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from empirical import distributed
from empirical.errors import EmpiricalError
from empirical.measure.pipeline import (
    Sums,
    corpus_record,
    forward,
    hidden_states,
    layer_labels,
    prepare,
    run_record,
    texts_of,
    token_cosines,
)
from empirical.measure.scaled import check_scale, plain_forward, scaled_forward
from empirical.models.corpus import Corpus
from empirical.outputs import Result

__all__ = ["SimilarityResult", "representation_similarity"]

SCHEMA = "normsat.similarity/1"
_SINGLE_STACK = "all"  # the JSON label of the token count of a single-stack model (key '' here)


@dataclass(frozen=True)
class SimilarityResult(Result):
    """Per-layer similarity of a model's representations at θ and at c·θ.

    Attributes:
        layers: a label per hidden state, embeddings first ("encoder layer 3" for two stacks).
        per_layer: the mean token cosine of each hidden state, in the order of ``layers``.
        stacks: the stack each hidden state belongs to ('' for single-stack models).
        scale: the factor c.
        n_sentences: sentences measured.
        n_tokens: real tokens per stack ('' for single-stack models, ``"all"`` in JSON), the
            denominators of the means.
        n_truncated: sentences cut to ``max_length`` tokens.
        max_length: the truncation length used (the smaller of the request and the model's limit).
        record: model, corpus, dtype, device and library versions, for the JSON file.
        undetermined: per layer, the sentences (indices in the corpus) with a token whose limit
            is undetermined (c = ∞ only; empty otherwise).
        n_undetermined: per layer, the tokens left out of its mean as undetermined.
        reasons: per sentence with an undetermined token, why its limit is undetermined (the
            decisions left undecided, with their nodes and the precision last tried).
    """

    layers: tuple[str, ...]
    per_layer: tuple[float, ...]
    stacks: tuple[str, ...]
    scale: float
    n_sentences: int
    n_tokens: dict[str, int]
    n_truncated: int
    max_length: int
    record: dict[str, Any] = field(default_factory=dict)
    undetermined: tuple[tuple[int, ...], ...] = ()
    n_undetermined: tuple[int, ...] = ()
    reasons: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.undetermined:
            object.__setattr__(self, "undetermined", tuple(() for _ in self.layers))
        if not self.n_undetermined:
            object.__setattr__(self, "n_undetermined", tuple(0 for _ in self.layers))

    @property
    def determined(self) -> bool:
        """Whether every token of every layer has a determined limit (always true for finite c)."""
        return not any(self.n_undetermined)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.similarity/1``)."""
        return {
            "schema": SCHEMA,
            # Strict JSON has no infinity: the exact limit is a null scale with its own flag.
            "scale": self.scale if math.isfinite(self.scale) else None,
            "exact_limit": math.isinf(self.scale),
            "layers": [
                # null only for a layer left without a determined token (NaN otherwise is a bug:
                # strict JSON refuses it)
                {"name": n, "stack": k, "similarity": None if math.isnan(s) and t else s,
                 "undetermined_sentences": list(u), "undetermined_tokens": t}
                for n, k, s, u, t in zip(self.layers, self.stacks, self.per_layer, self.undetermined,
                                         self.n_undetermined)
            ],
            "undetermined_reasons": {str(sentence): list(why)
                                     for sentence, why in sorted(self.reasons.items())},
            "n_sentences": self.n_sentences,
            "n_tokens": {stack or _SINGLE_STACK: n for stack, n in self.n_tokens.items()},
            "n_truncated": self.n_truncated,
            "max_length": self.max_length,
            **self.record,
        }

    def by_stack(self) -> dict[str, list[float]]:
        """Per-layer values grouped by stack, embeddings first in each ('' for single-stack models)."""
        grouped: dict[str, list[float]] = {}
        for stack, value in zip(self.stacks, self.per_layer):
            grouped.setdefault(stack, []).append(value)
        return grouped

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimilarityResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. to replot a saved JSON file)."""
        if data.get("schema") != SCHEMA:
            raise EmpiricalError(f"expected a {SCHEMA} record, got schema {data.get('schema')!r}")
        layers = data["layers"]
        known = {"schema", "scale", "exact_limit", "layers", "n_sentences", "n_tokens", "n_truncated",
                 "max_length", "undetermined_reasons"}
        limit = data.get("exact_limit") or data["scale"] in (None, "inf")  # "inf": older files
        return cls(
            layers=tuple(layer["name"] for layer in layers),
            per_layer=tuple(math.nan if layer["similarity"] is None else layer["similarity"]
                            for layer in layers),
            stacks=tuple(layer["stack"] for layer in layers),
            scale=math.inf if limit else float(data["scale"]), n_sentences=data["n_sentences"],
            n_tokens={"" if k == _SINGLE_STACK else k: n for k, n in data["n_tokens"].items()},
            n_truncated=data["n_truncated"], max_length=data["max_length"],
            record={k: v for k, v in data.items() if k not in known},
            undetermined=tuple(tuple(layer.get("undetermined_sentences", ())) for layer in layers),
            n_undetermined=tuple(layer.get("undetermined_tokens", 0) for layer in layers),
            reasons={int(k): tuple(v) for k, v in data.get("undetermined_reasons", {}).items()},
        )

    def table(self) -> str:
        """A plain-text table, one row per layer; a layer with undetermined tokens is marked and
        listed below the table.

        >>> result = SimilarityResult(("embeddings", "layer 1"), (1.0, math.nan), ("", ""), math.inf,
        ...                           2, {"": 9}, 0, 512, undetermined=((), (0, 1)),
        ...                           n_undetermined=(0, 9))
        >>> print(result.table())
        layer       cos(θ, c→∞ limit)
        embeddings  1.0000
        layer 1     undetermined *
        * undetermined limit, left out of the mean: layer 1: 9 of 9 tokens (sentences 0, 1)
        """
        width = max(len("layer"), *(len(n) for n in self.layers))
        against = f"{self.scale:g}·θ" if math.isfinite(self.scale) else "c→∞ limit"
        rows = [f"{'layer':<{width}}  cos(θ, {against})"]
        notes = []
        for name, stack, value, sentences, left in zip(self.layers, self.stacks, self.per_layer,
                                                       self.undetermined, self.n_undetermined):
            shown = f"{value:.4f}" if math.isfinite(value) else "undetermined"
            rows.append(f"{name:<{width}}  {shown}{' *' if left else ''}")
            if left:
                listed = ", ".join(str(i) for i in sentences)
                notes.append(f"{name}: {left} of {self.n_tokens[stack]} tokens (sentences {listed})")
        if notes:
            rows.append("* undetermined limit, left out of the mean: " + "; ".join(notes))
        for sentence, why in sorted(self.reasons.items()):
            more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
            rows.append(f"  sentence {sentence}: {why[0]}{more}")
        return "\n".join(rows)


def _raise_non_finite(states: Sequence[torch.Tensor], labels: Sequence[str], mask: torch.Tensor,
                      where: str, undetermined: bool = False) -> None:
    """Raise on a hidden state that overflowed; with ``undetermined`` (the exact limit), NaN marks
    an undetermined limit, not an overflow."""
    for label, state in zip(labels, states):
        values = state[mask]
        if undetermined:
            values = values.nan_to_num(0.0, math.inf, -math.inf)
        if not torch.isfinite(values).all():
            wider = {torch.float16: "float32 or float64", torch.bfloat16: "float32 or float64",
                     torch.float32: "float64"}.get(state.dtype)
            remedy = f"a wider dtype ({wider}, CLI: --dtype) or a smaller scale" if wider else \
                "a smaller scale"
            raise EmpiricalError(
                f"hidden state '{label}' is not finite {where} in {state.dtype} (overflow); use "
                f"{remedy}"
            )


def representation_similarity(
    model: nn.Module,
    tokenizer: Any,
    sentences: Sequence[str] | Corpus,
    *,
    scale: float = 1000.0,
    batch_size: int = 32,
    max_length: int = 512,
    progress: bool = False,
    max_precision: int = 1024,
) -> SimilarityResult:
    """Mean token cosine between the model's hidden states at θ and at c·θ, per layer.

    Args:
        model: a Hugging Face transformer (encoder, decoder-only, XLNet or encoder–decoder) in
            eval mode; it is never modified.
        tokenizer: its tokenizer.
        sentences: the input texts (a list or a :class:`~empirical.models.corpus.Corpus`); a single
            string is one sentence.
        scale: the factor c ≥ 1 applied to every parameter; ``float("inf")`` compares each layer
            with the exact saturated network (:func:`saturated.saturate`).
        batch_size: sentences per forward pass (sentences are length-sorted before batching).
        max_length: truncation length in tokens (capped by the model's position limit).
        progress: show a progress bar.
        max_precision: (c = ∞) the highest precision, in bits, at which tokens float64 leaves
            undetermined are decided in ball arithmetic (:mod:`saturated.precision`; below 128,
            off).

    Returns:
        A :class:`SimilarityResult` with one value per hidden state, embeddings first.

    Raises:
        EmpiricalError: empty input, a scale that is not a c ≥ 1 or ∞, a model without hidden
            states, hidden states that overflow, or (c = ∞) a limit that cannot be computed
            (an op without a rule). Tokens whose limit is undetermined do not raise: they are
            left out and listed (see :class:`SimilarityResult`).

    >>> from empirical.models.loading import load_model
    >>> model, tokenizer = load_model("minilm", num_layers=2)
    >>> result = representation_similarity(model, tokenizer, ["The cat sat on the mat."])
    >>> result.layers
    ('embeddings', 'layer 1', 'layer 2')
    >>> all(-1.0 <= s <= 1.0 for s in result.per_layer)
    True
    """
    c = check_scale(scale)
    texts = texts_of(sentences)
    prepared = prepare(model, tokenizer, texts, max_length=max_length, batch_size=batch_size,
                       sharded=True)
    grow = scaled_forward(model, c, prepared.fields(), undetermined="nan", max_precision=max_precision,
                          read_padding=False,  # the cosines read real tokens only
                          one_shape=prepared.one_shape())
    at_theta = plain_forward(model, c)  # a 16-bit or streamed model computes in its compute dtype

    sums = Sums()
    labels: dict[str, list[str]] = {}
    unknown: dict[str, torch.Tensor] = {}  # per stack, (layer, sentence): undetermined tokens
    reasons: dict[int, tuple[str, ...]] = {}
    for batch in prepared.iterate(f"similarity c={c:g}", progress=progress):
        plain = forward(model, batch.inputs, at_theta)
        grown = forward(model, batch.inputs, grow)
        for row, why in getattr(grow, "reasons", {}).items():
            reasons[batch.indices[row]] = why
        for stack, mask in batch.stacks:
            ours, theirs = hidden_states(plain, stack, model), hidden_states(grown, stack, model)
            names = labels.setdefault(stack, layer_labels(stack, len(ours)))
            per_token = [token_cosines(a, b, mask) for a, b in zip(ours, theirs)]
            cosines = torch.stack([values.nansum() for values in per_token])
            if not torch.isfinite(torch.stack([values.sum() for values in per_token])).all():
                # a non-finite vector makes its cosine NaN; in the exact limit, NaN is a token
                # whose limit is undetermined
                _raise_non_finite(ours, names, mask, "at θ")
                _raise_non_finite(theirs, names, mask, f"at c·θ with c={c:g}", math.isinf(c))
                table = unknown.setdefault(
                    stack, torch.zeros(len(per_token), len(texts), dtype=torch.float64))
                owner = torch.tensor(batch.indices).unsqueeze(1).expand(mask.shape)[mask]
                for layer, values in enumerate(per_token):
                    table[layer].index_add_(0, owner, torch.isnan(values).double())
            sums.add(stack, cosines)
            sums.count(stack, int(mask.sum()))
    ranks = sums.provenance()  # every stack has the same tokens
    totals, counts = sums.reduced()
    if math.isinf(c):  # every rank takes part in the reduction, with or without undetermined tokens
        unknown = distributed.reduce_sums(
            {stack: unknown.get(stack, torch.zeros(len(labels[stack]), len(texts), dtype=torch.float64))
             for stack in totals})
    left = {stack: unknown[stack].sum(1) if stack in unknown else torch.zeros(len(labels[stack]))
            for stack in totals}
    layers = [name for stack in totals for name in labels[stack]]
    stacks = [stack for stack in totals for _ in labels[stack]]
    means = [float(v) if n < counts[stack] else math.nan
             for stack in totals for v, n in zip(totals[stack] / (counts[stack] - left[stack]), left[stack])]
    undetermined = tuple(tuple(torch.nonzero(row).flatten().tolist()) if stack in unknown else ()
                         for stack in totals
                         for row in unknown.get(stack, torch.zeros(len(labels[stack]), 0)))
    n_undetermined = tuple(int(n) for stack in totals for n in left[stack])
    run = run_record(model, c)
    record = {
        **{key: value for key, value in run.items() if key != "versions"}, "batch_size": batch_size,
        "corpus": corpus_record(sentences, texts), "versions": run["versions"], "distributed": ranks,
    }
    return SimilarityResult(
        layers=tuple(layers), per_layer=tuple(means), stacks=tuple(stacks), scale=c, n_sentences=len(texts),
        n_tokens=dict(counts), n_truncated=prepared.tokens.n_truncated, max_length=prepared.tokens.max_length,
        record=record, undetermined=undetermined, n_undetermined=n_undetermined, reasons=reasons,
    )
