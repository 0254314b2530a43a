"""From sentences to padded model inputs, and from model outputs back to per-layer hidden states.

Sentences are tokenized once, sorted by length and cut into batches, so padding is small; each
batch carries, for every stack of hidden states (the only one, or encoder and decoder), the mask of
its real tokens. Encoder–decoder models are fed the sentence itself as the decoder input, shifted
right by one position behind the decoder start token (teacher forcing on the input).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.validation import check_count
from homogeneity.tracing import configured_positions

__all__ = [
    "Batch",
    "TokenizedCorpus",
    "check_token_ids",
    "decoder_inputs",
    "embedding_rows",
    "hidden_state_field",
    "hidden_states",
    "make_batches",
    "position_limit",
    "tokenize",
]

# Models whose position ids start after the padding index use that many positions less.
_POSITION_OFFSETS = {"roberta": 2, "xlm-roberta": 2, "camembert": 2}


@dataclass(frozen=True)
class TokenizedCorpus:
    """Token ids per sentence (already truncated) and how many sentences were truncated."""

    ids: tuple[tuple[int, ...], ...]
    n_truncated: int
    max_length: int


@dataclass(frozen=True)
class Batch:
    """Model keyword inputs, and for each hidden-state stack its name and real-token mask."""

    inputs: dict[str, torch.Tensor]
    stacks: tuple[tuple[str, torch.Tensor], ...]
    indices: tuple[int, ...]


def position_limit(model: nn.Module) -> int | None:
    """How many tokens the model's position embeddings allow (None: relative positions, no limit)."""
    limit = configured_positions(model)
    if limit is None:
        return None
    return limit - _POSITION_OFFSETS.get(getattr(getattr(model, "config", None), "model_type", ""), 0)


def embedding_rows(model: nn.Module) -> int | None:
    """How many token ids the model can embed (None: it has no input embedding table)."""
    getter = getattr(model, "get_input_embeddings", None)
    try:
        table = getter() if callable(getter) else None
    except NotImplementedError:  # PreTrainedModel's default for models without one
        return None
    rows = getattr(table, "num_embeddings", None)
    return rows if isinstance(rows, int) else None


def check_token_ids(model: nn.Module, ids: Sequence[Sequence[int]] | torch.Tensor) -> None:
    """Refuse token ids the model cannot embed, before they reach its embedding table.

    Raises:
        EmpiricalError: an id is negative or at least the number of rows of the embedding table
            (which would end in an ``IndexError`` deep inside the model).
    """
    rows = embedding_rows(model)
    if rows is None:
        return
    if isinstance(ids, torch.Tensor):
        if ids.numel() == 0:
            return
        low, high = int(ids.min()), int(ids.max())
    else:
        flat = [int(i) for row in ids for i in row]
        if not flat:
            return
        low, high = min(flat), max(flat)
    if high >= rows or low < 0:
        bad = high if high >= rows else low
        raise EmpiricalError(
            f"expected token ids from 0 to {rows - 1} (the model's embedding table has {rows} rows), "
            f"got id {bad}; the tokenizer does not fit the model: use the model's own tokenizer "
            "(tokenizer=DIR, CLI: --tokenizer DIR)"
        )


def tokenize(
    tokenizer: Any, sentences: Sequence[str], *, max_length: int, model: nn.Module
) -> TokenizedCorpus:
    """Tokenize with the tokenizer's special tokens, truncating at ``max_length`` or the model's limit.

    Truncated sentences are counted and announced with a warning, never dropped silently.

    Raises:
        EmpiricalError: a bad ``max_length``, a tokenizer that does not truncate, or an empty
            sentence.
    """
    max_length = check_count(max_length, "max_length (tokens per sentence)")
    limit = position_limit(model)
    effective = min(max_length, limit) if limit is not None else max_length
    special = _special_tokens(tokenizer)
    if effective <= special:
        raise EmpiricalError(
            f"expected max_length of at least {special + 1} tokens: the tokenizer adds {special} "
            f"special tokens to every sentence, so max_length={effective} leaves no room for text"
        )
    full = tokenizer(list(sentences), add_special_tokens=True, verbose=False)["input_ids"]
    n_truncated = sum(len(ids) > effective for ids in full)
    if n_truncated:
        warnings.warn(
            f"{n_truncated} of {len(full)} sentences are longer than {effective} tokens and were "
            f"truncated to {effective}",
            stacklevel=3,
        )
        kept = tokenizer(
            list(sentences), add_special_tokens=True, truncation=True, max_length=effective,
            verbose=False,
        )["input_ids"]
    else:
        kept = full
    if any(len(ids) > effective for ids in kept):  # truncation must be real, not only recorded
        raise EmpiricalError(
            f"the tokenizer {type(tokenizer).__name__} did not truncate to {effective} tokens; "
            "expected a tokenizer that supports truncation=True"
        )
    if any(len(ids) == 0 for ids in kept):
        raise EmpiricalError("a sentence produced no tokens; expected non-empty text in every line")
    return TokenizedCorpus(tuple(tuple(ids) for ids in kept), n_truncated, effective)


def _special_tokens(tokenizer: Any) -> int:
    """How many special tokens the tokenizer adds to one sentence (0 if it cannot say)."""
    count = getattr(tokenizer, "num_special_tokens_to_add", None)
    return int(count(pair=False)) if callable(count) else 0


def _pad_id(model: nn.Module, tokenizer: Any) -> int:
    for candidate in (getattr(getattr(model, "config", None), "pad_token_id", None),
                      getattr(tokenizer, "pad_token_id", None)):
        if isinstance(candidate, int):
            return candidate
    return 0


def _decoder_start_id(model: nn.Module, pad_id: int) -> int:
    start = getattr(getattr(model, "config", None), "decoder_start_token_id", None)
    return start if isinstance(start, int) else pad_id


def decoder_inputs(model: nn.Module, tokenizer: Any, ids: torch.Tensor,
                   mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """An encoder–decoder model's decoder inputs for right-padded ``ids``: the sentence shifted
    right behind the decoder start token, with the encoder's mask (``[start, t0, …, t(n−2)]`` has
    as many real tokens as the sentence); empty for other models."""
    if not getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return {}
    start_column = torch.full_like(ids[:, :1], _decoder_start_id(model, _pad_id(model, tokenizer)))
    return {"decoder_input_ids": torch.cat([start_column, ids[:, :-1]], dim=1),
            "decoder_attention_mask": mask}


def make_batches(
    model: nn.Module,
    tokenizer: Any,
    corpus: TokenizedCorpus,
    *,
    batch_size: int,
    device: torch.device | str,
) -> Iterator[Batch]:
    """Length-sorted, right-padded batches of at most ``batch_size`` sentences.

    Raises:
        EmpiricalError: ``batch_size < 1``, or token ids beyond the model's embedding table
            (checked for the whole corpus before the first batch).
    """
    batch_size = check_count(batch_size, "batch_size")
    check_token_ids(model, corpus.ids)
    pad = _pad_id(model, tokenizer)
    order = sorted(range(len(corpus.ids)), key=lambda i: len(corpus.ids[i]))
    encoder_decoder = bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        width = max(len(corpus.ids[i]) for i in chosen)
        ids = torch.full((len(chosen), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chosen), width), dtype=torch.long)
        for row, i in enumerate(chosen):
            ids[row, : len(corpus.ids[i])] = torch.tensor(corpus.ids[i])
            mask[row, : len(corpus.ids[i])] = 1
        ids, mask = ids.to(device), mask.to(device)
        inputs = {"input_ids": ids, "attention_mask": mask, **decoder_inputs(model, tokenizer, ids, mask)}
        if encoder_decoder:
            stacks: tuple[tuple[str, torch.Tensor], ...] = (
                ("encoder", mask.bool()), ("decoder", mask.bool()))
        else:
            stacks = (("", mask.bool()),)
        yield Batch(inputs, stacks, tuple(chosen))


def hidden_state_field(stack: str) -> str:
    """The output field holding the hidden states of one stack ('' for single-stack models).

    >>> hidden_state_field(""), hidden_state_field("encoder")
    ('hidden_states', 'encoder_hidden_states')
    """
    return f"{stack}_hidden_states" if stack else "hidden_states"


def hidden_states(output: Any, stack: str, model: nn.Module) -> tuple[torch.Tensor, ...]:
    """The hidden states of one stack ('' for single-stack models), embeddings first."""
    field = hidden_state_field(stack)
    states = getattr(output, field, None)
    if states is None and isinstance(output, dict):
        states = output.get(field)
    if not states:
        raise EmpiricalError(
            f"expected the output of {type(model).__name__} to carry '{field}' (a Hugging Face model "
            f"called with output_hidden_states=True), but it returned {type(output).__name__} "
            "without them"
        )
    return tuple(states)
