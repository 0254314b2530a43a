"""The one road every per-corpus measurement takes: prepare, forward, accumulate, reduce, record.

Similarity (:mod:`empirical.measure.similarity`), convergence to the limit
(:mod:`empirical.measure.convergence`) and the head atlas (:mod:`empirical.measure.heads`) compose
these pieces, so checking the model, tokenizing and batching, sharding over ranks, progress bars,
adding up across ranks and the provenance of a result are written once:

* :func:`prepare` checks the model and the text and returns a :class:`Prepared` corpus (tokens and
  this rank's length-sorted batches); :meth:`Prepared.iterate` walks them with a progress bar;
* :func:`forward` runs one batch through the model (or through ``run``, e.g. at c·θ or in the
  limit) asking for hidden states;
* :func:`token_cosines` compares two hidden states over the real tokens, :func:`layer_labels`
  names them;
* :class:`Sums` accumulates float64 sums and token counts, and adds them up across ranks;
* :func:`corpus_record` and :func:`run_record` say what was measured, for the JSON file.

>>> from empirical.models.loading import load_model
>>> model, tokenizer = load_model("minilm", num_layers=1)
>>> prepared = prepare(model, tokenizer, ["The cat sat.", "A dog ran far away."], batch_size=2, sharded=True)
>>> sums = Sums()
>>> for batch in prepared.iterate("cosines"):
...     output = forward(model, batch.inputs)
...     states = hidden_states(output, "", model)
...     mask = batch.stacks[0][1]
...     sums.add("self", torch.stack([token_cosines(h, h, mask).sum() for h in states]))
...     sums.count("self", int(mask.sum()))
>>> totals, tokens = sums.reduced()
>>> [round(float(v) / tokens["self"], 6) for v in totals["self"]], layer_labels("", 2)
([1.0, 1.0], ['embeddings', 'layer 1'])
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import nn
from tqdm.auto import tqdm

from empirical import distributed
from empirical.errors import EmpiricalError
from empirical.measure.scaled import compute_dtype
from empirical.models.batching import (
    Batch,
    TokenizedCorpus,
    hidden_state_field,
    hidden_states,
    make_batches,
    tokenize,
)
from empirical.models.corpus import Corpus
from empirical.models.experts import check_expert_memory
from empirical.models.offload import execution_device, placement_record
from empirical.models.provenance import model_record, versions
from empirical.validation import check_list, check_measurable
from homogeneity.tracing import export_progress
from saturated.interpreter import node_progress

__all__ = [
    "Prepared",
    "Sums",
    "batch_progress",
    "corpus_record",
    "forward",
    "hidden_states",
    "layer_labels",
    "prepare",
    "read_fields",
    "run_record",
    "texts_of",
    "token_cosines",
]


def texts_of(sentences: Sequence[str] | Corpus | str) -> list[str]:
    """The sentences as a list of strings (a single string is one sentence).

    Raises:
        EmpiricalError: items that are not strings.

    >>> texts_of("One sentence."), texts_of(["a", "b"])
    (['One sentence.'], ['a', 'b'])
    """
    texts = [sentences] if isinstance(sentences, str) else check_list(sentences, "sentences", "strings")
    if not all(isinstance(text, str) for text in texts):
        kinds = sorted({type(text).__name__ for text in texts if not isinstance(text, str)})
        raise EmpiricalError(f"expected sentences as strings, got items of type {', '.join(kinds)}")
    return texts


def read_fields(batches: Iterable[Batch]) -> set[str]:
    """The output fields a per-layer measurement reads: the hidden states of every stack (an exact
    limit computes only these)."""
    return {hidden_state_field(stack) for batch in batches for stack, _ in batch.stacks}


class Prepared(NamedTuple):
    """A corpus ready to measure: its tokens and the batches this rank measures.

    Attributes:
        tokens: the tokenized corpus (truncation counts, the length used).
        batches: length-sorted batches on the model's device (this rank's share when sharded).
    """

    tokens: TokenizedCorpus
    batches: list[Batch]

    def fields(self) -> set[str]:
        """The hidden-state fields of these batches (:func:`read_fields`)."""
        return read_fields(self.batches)

    def one_shape(self) -> bool:
        """Whether every batch's inputs have the same shapes: an exact limit then exports its graph
        for that shape alone (``one_shape`` of :class:`saturated.saturate.SaturatedModel`)."""
        return len({tuple((name, tuple(value.shape)) for name, value in batch.inputs.items())
                    for batch in self.batches}) == 1

    def n_tokens(self) -> int:
        """Real tokens in this rank's batches (every stack of a batch has the same real tokens)."""
        return sum(int(batch.stacks[0][1].sum()) for batch in self.batches)

    def iterate(self, desc: str, *, progress: bool = False) -> Iterator[Batch]:
        """The batches under ``torch.inference_mode``, with a progress bar on the writing rank (and
        under it, the exact limit's nodes: :func:`limit_progress`)."""
        with torch.inference_mode():
            yield from batch_progress(self.batches, desc, progress and distributed.is_writer())


def batch_progress(batches: Sequence[Any], desc: str, enabled: bool) -> Iterator[Any]:
    """``batches`` with a progress bar (when ``enabled``) and, under it, a second bar counting
    the exact limit's graph nodes as it runs them (:func:`saturated.interpreter.node_progress`):
    one batch's limit takes minutes on two cores, a node well under a second, so the second bar
    moves where the first would sit still. Before the first node, the model's export (seconds to
    tens of seconds, once per input structure) counts on the same bar the modules it has traced
    (:func:`homogeneity.tracing.export_progress`)."""
    if not enabled:
        yield from batches
        return
    shown = tqdm(batches, desc=desc, unit="batch")
    bar = tqdm(desc=f"{desc}: exact limit", unit="node", leave=False)  # nested under the first

    counted: list[str | None] = [None]  # what the bar counts now: it starts over when that changes

    def counting(stage: str, unit: str) -> Callable[[int, int], None]:
        def started(done: int, total: int) -> None:
            if stage != counted[0] or done <= bar.n:  # another stage, a new export or limit call
                counted[0] = stage
                bar.set_description(f"{desc}: exact limit{stage}", refresh=False)
                bar.unit = unit
                bar.reset(total=total)
            bar.update(done - bar.n)
        return started

    try:
        with node_progress(counting("", "node")), export_progress(counting(", export", "module")):
            yield from shown
    finally:
        bar.close()
        shown.close()


def prepare(
    model: nn.Module, tokenizer: Any, texts: Sequence[str], *, max_length: int = 512,
    batch_size: int = 32, sharded: bool = False,
) -> Prepared:
    """Checks shared by every per-layer measurement, then tokens and length-sorted batches.

    Args:
        model: a transformer in eval mode with finite parameters.
        tokenizer: its tokenizer.
        texts: the sentences.
        max_length: truncation length in tokens (capped by the model's position limit).
        batch_size: sentences per batch.
        sharded: under ``torchrun``, check that every rank has the same text and keep this rank's
            share of the batches (:mod:`empirical.distributed`); add up with :class:`Sums`.

    Raises:
        EmpiricalError: no text, no parameters, a model in training mode, non-finite parameters,
            or a mixture of experts whose gathered expert weights would not fit in memory.
    """
    if not texts:
        raise EmpiricalError("expected at least one sentence, got an empty list")
    if not isinstance(model, nn.Module) or next(model.parameters(), None) is None:
        raise EmpiricalError(
            f"expected a transformer (an nn.Module with parameters), got {type(model).__name__}"
        )
    check_measurable(model, "a measurement (it runs the model)")
    if model.training:
        raise EmpiricalError("expected a model in eval() mode (dropout would make the measure random)")
    for name, parameter in model.named_parameters():
        if parameter.device.type != "meta" and not torch.isfinite(parameter).all():  # meta: on disk
            raise EmpiricalError(
                f"parameter '{name}' has non-finite entries (NaN or ±inf); expected finite θ: the "
                "checkpoint or the model is broken, not the precision"
            )
    device = execution_device(model)
    tokens = tokenize(tokenizer, texts, max_length=max_length, model=model)
    batches = list(make_batches(model, tokenizer, tokens, batch_size=batch_size, device=device))
    largest = max((batch.stacks[0][1].shape for batch in batches), key=lambda shape: shape.numel())
    check_expert_memory(model, *largest)
    if sharded:
        distributed.check_same_corpus(Corpus(tuple(texts), "").sha256)
        batches = distributed.shard(batches)
    return Prepared(tokens, batches)


def forward(model: nn.Module, inputs: dict[str, torch.Tensor], run: Callable[..., Any] | None = None) -> Any:
    """One forward pass asking for hidden states: the model's own, or ``run`` (e.g. at c·θ).

    Raises:
        EmpiricalError: a model whose forward does not take ``output_hidden_states``.
    """
    options = {**inputs, "output_hidden_states": True, "return_dict": True}
    try:
        return (run or model)(**options)
    except TypeError as err:
        if "argument" not in str(err):  # a bug inside forward, not a signature that does not fit
            raise
        raise EmpiricalError(
            f"expected a Hugging Face model whose forward accepts output_hidden_states=True and "
            f"returns hidden states; {type(model).__name__}.forward does not ({err})"
        ) from err


def layer_labels(stack: str, count: int) -> list[str]:
    """Names of a stack's ``count`` hidden states, embeddings first.

    >>> layer_labels("encoder", 3)
    ['encoder embeddings', 'encoder layer 1', 'encoder layer 2']
    """
    prefix = f"{stack} " if stack else ""
    return [f"{prefix}embeddings", *(f"{prefix}layer {i}" for i in range(1, count))]


def token_cosines(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Cosines of the vectors along the last dimension (of the real tokens when ``mask`` is given),
    in float64, within [−1, 1].

    float64, because hidden states at c·θ can be ~c³ in size and because float32 rounding lets a
    cosine of 1 come out as 1 + 1e-7, outside [−1, 1]; a zero vector has cosine 0.

    >>> token_cosines(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[2.0, 0.0], [1.0, 1.0]]))
    tensor([1., 0.], dtype=torch.float64)
    """
    if mask is not None:
        a, b = a[mask], b[mask]
    a, b = a.reshape(-1, a.shape[-1]).double(), b.reshape(-1, b.shape[-1]).double()
    norms = (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(torch.finfo(a.dtype).tiny)
    return ((a * b).sum(-1) / norms).clamp(-1.0, 1.0)  # rounding can put a parallel pair at 1 + ε


@dataclass
class Sums:
    """Running float64 sums keyed by anything hashable, and token counts keyed the same way.

    :meth:`reduced` adds every rank's sums and counts up (:mod:`empirical.distributed`); without a
    process group it returns them as they are.

    >>> sums = Sums()
    >>> sums.add("a", torch.ones(2))
    >>> sums.add("a", torch.ones(2))
    >>> sums.count("", 3)
    >>> sums.reduced()
    ({'a': tensor([2., 2.], dtype=torch.float64)}, {'': 3})
    """

    sums: dict[Any, torch.Tensor] = field(default_factory=dict)
    counts: dict[Any, int] = field(default_factory=dict)

    def add(self, key: Hashable, value: torch.Tensor) -> None:
        """Add ``value`` to the sum at ``key``."""
        self.sums[key] = self.sums[key] + value if key in self.sums else value

    def count(self, key: Hashable, tokens: int) -> None:
        """Add ``tokens`` to the count at ``key``."""
        self.counts[key] = self.counts.get(key, 0) + tokens

    def reduced(self) -> tuple[dict[Any, torch.Tensor], dict[Any, int]]:
        """Every rank's sums and counts, added up (the same on every rank)."""
        return distributed.reduce_sums(self.sums), distributed.reduce_counts(self.counts)

    def provenance(self) -> dict[str, Any]:
        """The ranks and the tokens each measured (the first count), for a result's record; call it
        before :meth:`reduced`, on every rank."""
        return distributed.provenance(next(iter(self.counts.values()), 0))


def corpus_record(sentences: Sequence[str] | Corpus, texts: Sequence[str]) -> dict[str, Any]:
    """What a result records about its text: a :class:`Corpus`'s own record, or an in-memory list's
    size and SHA-256.

    >>> corpus_record(["a", "b"], ["a", "b"])["n_sentences"]
    2
    """
    if isinstance(sentences, Corpus):
        return sentences.to_dict()
    return {"source": "in-memory list", "n_sentences": len(texts), "sha256": Corpus(tuple(texts), "").sha256}


def run_record(model: nn.Module, scale: float = 1.0) -> dict[str, Any]:
    """What a result records about the run: the model, its dtype, the dtype it computed in, its
    device (and accelerate's placement), library versions; ``scale``: the c measured at."""
    first = next(model.parameters())
    return {"model": model_record(model), "dtype": str(first.dtype),
            "compute_dtype": str(compute_dtype(model, scale)), "device": str(execution_device(model)),
            **placement_record(model), "versions": versions()}
