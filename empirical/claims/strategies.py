"""Hypothesis strategies for a real model's inputs, and a profile that keeps claim tests fast.

Each strategy shrinks toward the simplest input of its kind: :func:`token_sequences` toward the
shortest sequence of the smallest ordinary token ids, :func:`sentences` toward the shortest
sentence of the corpus, :func:`scales` toward c = 1.

>>> from hypothesis import given
>>> from empirical.models.loading import load_model
>>> _, tokenizer = load_model("minilm", num_layers=1)
>>> @given(token_sequences(tokenizer, max_len=6), scales())
... def test(ids, c):
...     assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
...     assert 2 <= len(ids) <= 6 and 1 <= c <= 1e6
>>> test()
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from torch import nn

from empirical.errors import EmpiricalError
from empirical.models.batching import embedding_rows
from empirical.validation import check_count, check_list, check_real
from homogeneity.validation import describe

__all__ = ["PROFILE", "profile", "register_profile", "scales", "sentences", "special_tokens",
           "token_sequences"]

PROFILE = "normsat-claims"
"""The hypothesis profile for claims about real models (see :func:`register_profile`)."""


def register_profile(max_examples: int = 10) -> str:
    """Register :data:`PROFILE` and return its name, for ``settings.load_profile`` in a conftest.

    Every example runs a model several times, so the profile draws few examples, has no deadline
    (the first call of a model on a new input shape exports or compiles it), does not flag slow
    data generation and skips the explain phase. Shrinking stays on: a failing claim is reported
    with its simplest input.

    >>> from hypothesis import settings
    >>> settings.get_profile(register_profile()).max_examples
    10
    """
    settings.register_profile(
        PROFILE, max_examples=max_examples, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        # The explain phase reruns a failing claim many times to report the lines it reached.
        phases=[phase for phase in Phase if phase is not Phase.explain],
    )
    return PROFILE


def profile() -> settings:
    """The claims profile as a decorator, for a single test: ``@profile()`` above ``@given``."""
    return settings.get_profile(register_profile())


def special_tokens(tokenizer: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the tokenizer puts before and after a text's own tokens (e.g. ([CLS],), ([SEP],)).

    Read off a one-word text tokenized with and without special tokens, which works for every
    Hugging Face tokenizer, fast or slow.

    Raises:
        EmpiricalError: the plain tokens do not appear inside the tokens with special tokens.
    """
    plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    full = list(tokenizer("a")["input_ids"])
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return tuple(full[:start]), tuple(full[start + len(plain):])
    raise EmpiricalError(
        f"expected the tokens of 'a' ({plain}) inside its tokens with special tokens ({full}); "
        f"{type(tokenizer).__name__} adds special tokens in a way token_sequences cannot reproduce"
    )


def token_sequences(tokenizer: Any, min_len: int = 1, max_len: int = 32, *,
                    model: nn.Module | None = None,
                    vocab_size: int | None = None) -> st.SearchStrategy[tuple[int, ...]]:
    """Token id sequences from the tokenizer's vocabulary, wrapped in the special tokens it adds.

    Args:
        tokenizer: a Hugging Face tokenizer.
        min_len: the fewest ids in a sequence, special tokens included.
        max_len: the most ids in a sequence, special tokens included.
        model: draw only ids its input embedding table has rows for (a tokenizer larger than the
            model's vocabulary would otherwise draw ids the model cannot embed).
        vocab_size: the same bound given as a number: ids below it.

    Returns:
        A strategy of tuples of ids; the ids between the special tokens are the vocabulary's
        ordinary (non-special) tokens, and shrink toward the smallest of them.

    Raises:
        EmpiricalError: ``max_len`` leaves no room for the special tokens, ``min_len > max_len``,
            or the bound excludes the special tokens or every ordinary token.

    >>> from empirical.models.loading import load_model
    >>> _, tokenizer = load_model("minilm", num_layers=1)
    >>> token_sequences(tokenizer, vocab_size=50)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    empirical.errors.EmpiricalError: expected the special tokens [101, 102] to be ids the model ...
    """
    min_len, max_len = check_count(min_len, "min_len", low=0), check_count(max_len, "max_len")
    before, after = special_tokens(tokenizer)
    fixed = len(before) + len(after)
    if max_len < max(fixed, 1) or min_len > max_len:
        raise EmpiricalError(
            f"expected 1 ≤ min_len ≤ max_len with room for the {fixed} special tokens "
            f"{[*before, *after]}, got min_len={min_len}, max_len={max_len}"
        )
    bounds = [len(tokenizer)]
    if vocab_size is not None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise EmpiricalError(f"expected vocab_size to be a positive integer, got {vocab_size!r}")
        bounds.append(vocab_size)
    rows = embedding_rows(model) if model is not None else None
    if rows is not None:
        bounds.append(rows)
    bound = min(bounds)
    if any(i >= bound for i in (*before, *after)):
        raise EmpiricalError(
            f"expected the special tokens {[*before, *after]} to be ids the model embeds, got a "
            f"vocabulary of {bound} ids (0 to {bound - 1}): the tokenizer does not fit the model"
        )
    special = set(getattr(tokenizer, "all_special_ids", ())) | set(before) | set(after)
    ordinary = [i for i in range(bound) if i not in special]
    if not ordinary:
        raise EmpiricalError(f"expected ordinary (non-special) token ids below {bound}, got none")
    content = st.lists(st.sampled_from(ordinary), min_size=max(min_len - fixed, 0 if fixed else 1),
                       max_size=max_len - fixed)
    return content.map(lambda ids: (*before, *ids, *after))


def sentences(corpus: Iterable[str]) -> st.SearchStrategy[str]:
    """Sentences drawn from ``corpus`` (a list or an :class:`~empirical.models.corpus.Corpus`),
    shrinking toward the shortest.

    Raises:
        EmpiricalError: an empty corpus.
    """
    given = check_list(corpus, "corpus", "sentences")
    wrong = [text for text in given if not isinstance(text, str)]
    if wrong:
        raise EmpiricalError(f"expected the corpus to hold strings, got {describe(wrong[0])}")
    texts = sorted(set(given), key=lambda s: (len(s), s))
    if not texts:
        raise EmpiricalError("expected a corpus with at least one sentence, got none")
    return st.sampled_from(texts)


def scales(low: float = 1.0, high: float = 1e6) -> st.SearchStrategy[float]:
    """Scales c, log-uniform between ``low`` ≥ 1 and ``high``, shrinking toward ``low``.

    Raises:
        EmpiricalError: ``low < 1`` (parameters shrink instead of growing) or ``high < low``.
    """
    low = check_real(low, "low", low=1)
    high = check_real(high, "high", low=1)
    if not low <= high:
        raise EmpiricalError(f"expected finite scales 1 ≤ low ≤ high, got low={low}, high={high}")
    lo, hi = math.log10(low), math.log10(high)
    return st.floats(0.0, 1.0).map(lambda t: min(high, max(low, 10.0 ** (lo + t * (hi - lo)))))
