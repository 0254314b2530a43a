"""Saturated reference heads: exact on every word up to a length, and equal to their float runs."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from saturated.errors import SaturationError
from saturated.modules import majority_head, one_hot, positional, previous_token_head

MAX_LENGTH = 24
words = st.text(alphabet="ab", min_size=1, max_size=MAX_LENGTH)


@given(words)
def test_global_head_counts_exactly(word: str) -> None:
    out = majority_head().exact(one_hot(word))
    for i in range(len(word)):
        prefix = word[: i + 1]
        assert out[i] == [Fraction(prefix.count("a"), i + 1), Fraction(prefix.count("b"), i + 1)]
    a, b = out[-1]
    assert (a > b) == (word.count("a") > word.count("b"))  # Majority
    assert (a == b) == (word.count("a") == word.count("b"))  # balanced counts


@given(words)
def test_local_head_copies_the_previous_token(word: str) -> None:
    out = previous_token_head().exact(positional(word))
    assert out[0] == one_hot(word[0])[0]
    assert out[1:] == one_hot(word[:-1])


@given(words)
def test_float_run_agrees_with_the_exact_one(word: str) -> None:
    for head, rows in ((majority_head(), one_hot(word)), (previous_token_head(), positional(word))):
        x = torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)
        exact = torch.tensor([[float(v) for v in row] for row in head.exact(rows)], dtype=torch.float64)
        assert torch.allclose(head(x), exact, atol=1e-12)


def test_the_local_head_is_the_limit_of_softmax_attention() -> None:
    head = previous_token_head()
    x = torch.tensor([[float(v) for v in row] for row in positional("abbab")], dtype=torch.float64)
    assert torch.allclose(head.softmax_at(x, 50.0), head(x), atol=1e-12)  # margins are ≥ 1


def test_bad_words_and_empty_sequences_are_rejected() -> None:
    with pytest.raises(SaturationError, match="word over"):
        one_hot("abc")
    with pytest.raises(SaturationError, match="at least one position"):
        majority_head().exact([])
