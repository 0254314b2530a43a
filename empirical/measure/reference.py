"""The paper's procedure for representation similarity, kept deliberately plain.

One sentence at a time, on a private copy of the model whose parameters are multiplied by c in
place and restored after each sentence, two forward passes per sentence. It shares no code with
:func:`empirical.measure.similarity.representation_similarity` beyond the tokenizer, which makes it an
independent check of the batched implementation and the baseline of ``benchmarks/similarity.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["one_at_a_time_similarity"]


def one_at_a_time_similarity(
    model: nn.Module, tokenizer: Any, sentences: Sequence[str], *, scale: float = 1000.0,
    max_length: int = 512,
) -> list[float]:
    """Mean token cosine per hidden state between θ and c·θ, computed sentence by sentence.

    Only single-stack models (encoders, decoder-only, XLNet); the caller's model is not modified.

    >>> from empirical.models.loading import load_model
    >>> model, tokenizer = load_model("bert", random_init=True, num_layers=1)
    >>> [round(v, 6) for v in one_at_a_time_similarity(model, tokenizer, ["A short test."], scale=1.0)]
    [1.0, 1.0]
    """
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        raise EmpiricalError("the one-at-a-time reference handles single-stack models only")
    private = copy.deepcopy(model)
    parameters = list(private.parameters())
    sums: torch.Tensor | None = None
    tokens = 0
    with torch.inference_mode():
        for sentence in sentences:
            inputs = tokenizer(sentence, return_tensors="pt", truncation=True, max_length=max_length)
            inputs = {k: v.to(parameters[0].device) for k, v in inputs.items()
                      if k in ("input_ids", "attention_mask")}
            plain = private(**inputs, output_hidden_states=True).hidden_states
            saved = [p.detach().clone() for p in parameters]
            for p in parameters:
                p.mul_(scale)
            try:
                grown = private(**inputs, output_hidden_states=True).hidden_states
            finally:
                for p, original in zip(parameters, saved):
                    p.copy_(original)
            cosines = torch.stack([
                torch.nn.functional.cosine_similarity(a[0].double(), b[0].double(), dim=-1).sum()
                for a, b in zip(plain, grown)
            ])
            sums = cosines if sums is None else sums + cosines
            tokens += inputs["input_ids"].shape[1]
    if sums is None:
        raise EmpiricalError("expected at least one sentence, got none")
    return (sums / tokens).tolist()
