"""Saturated reference heads: exact on every word up to a length, and equal to their float runs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from saturated.errors import SaturationError
from saturated.modules import HardAttention, majority_head, one_hot, positional, previous_token_head

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


# A head without a causal mask whose scores are 2^47 + t_j: float64 holds them exactly, one unit
# apart, closer than the default tie tolerance of hardmax (64 ulps) would tell from a tie.
BIG = 2**47
WIDE = HardAttention(query=[[1], [0], [0]], key=[[BIG], [1], [0]], value=[[0], [0], [1]])


@pytest.mark.parametrize("rows, expected", [
    ([[1, 0, 4], [1, 1, 6], [1, 0, 9]], [[6], [6], [6]]),  # one maximal key: every query copies it
    ([[1, 1, 2], [1, 0, 7], [1, 1, 5]], [[Fraction(7, 2)]] * 3),  # two: their values' mean
])
def test_a_head_without_a_causal_mask_attends_to_every_position(rows, expected) -> None:
    assert WIDE.exact(rows) == expected
    x = torch.tensor(rows, dtype=torch.float64)
    floats = [[float(v) for v in row] for row in expected]
    assert torch.equal(WIDE(x), torch.tensor(floats, dtype=torch.float64))


def _softmax_attention(head: HardAttention, x: torch.Tensor, scale: float, causal: bool) -> np.ndarray:
    """softmax(c·q kᵀ) v from its definition, one query at a time, in numpy."""
    xs = x.numpy()
    q, k, v = (xs @ w.numpy() for w in (head.query, head.key, head.value))
    out = np.zeros((*xs.shape[:-1], v.shape[-1]))
    for b in np.ndindex(xs.shape[:-2]):
        n = xs.shape[-2]
        for i in range(n):
            allowed = range(i + 1) if causal else range(n)
            scores = np.array([scale * q[b][i] @ k[b][j] for j in allowed])
            weights = np.exp(scores - scores.max())
            out[b][i] = sum(w * v[b][j] for w, j in zip(weights / weights.sum(), allowed))
    return out


@pytest.mark.parametrize("make, encode, causal, words", [
    (previous_token_head, positional, True, ("abba", "bbab")),
    (lambda: HardAttention([[1, 0], [0, 1]], [[0, 1], [1, 0]], [[1, 0], [0, 1]]), one_hot, False,
     ("abbab", "aabab")),
])
@pytest.mark.parametrize("scale", [0.3, 2.0])
def test_softmax_at_is_softmax_attention_at_scale_c_also_on_a_batch(make, encode, causal, words,
                                                                      scale) -> None:
    head = make()
    x = torch.tensor([[[float(v) for v in row] for row in encode(w)] for w in words], dtype=torch.float64)
    expected = _softmax_attention(head, x, scale, causal)
    assert np.allclose(head.softmax_at(x, scale).numpy(), expected, rtol=1e-12, atol=1e-15)
    assert torch.equal(head(x), torch.stack([head(row) for row in x]))
    # Integer features are exact in float32 too: a float32 input is run in float64 all the same.
    assert torch.equal(head.softmax_at(x.float(), scale), head.softmax_at(x, scale))
    assert torch.equal(head(x.float()), head(x))


@pytest.mark.parametrize("word", ["a", "abbab", "bbbbbbbbba"])
def test_the_local_heads_scores_are_minus_the_squared_distance_to_the_previous_position(word) -> None:
    # The docstring's construction: q_i·k_j = −(j − (i − 1))², in exact arithmetic and in float64.
    head = previous_token_head()
    x = positional(word)
    query, key = (head.rational[0], head.rational[1])
    q = [[sum((a * w[c] for a, w in zip(row, query)), Fraction(0)) for c in range(3)] for row in x]
    k = [[sum((a * w[c] for a, w in zip(row, key)), Fraction(0)) for c in range(3)] for row in x]
    n = len(word)
    expected = [[-((j - (i - 1)) ** 2) for j in range(n)] for i in range(n)]
    assert [[sum(a * b for a, b in zip(q[i], k[j])) for j in range(n)] for i in range(n)] == expected
    xs = torch.tensor([[float(v) for v in row] for row in x], dtype=torch.float64)
    assert ((xs @ head.query) @ (xs @ head.key).T).tolist() == expected


def test_positional_rows_hold_the_symbol_one_the_position_and_its_square() -> None:
    assert positional("ab") == [[1, 0, 1, 0, 0], [0, 1, 1, 1, 1]]
    assert positional("bba")[2] == [1, 0, 1, 2, 4]
    assert one_hot("ba") == [[0, 1], [1, 0]]


@pytest.mark.parametrize("weights, message", [
    ([[1, 2], [3]], "expected a matrix with rows of one length, got rows of lengths [1, 2]"),
    ([[1.0, float("nan")]], "expected a matrix of integers or fractions, got [[1.0, nan]]: "
                            "cannot convert NaN to integer ratio"),
    ([[1, None]], "expected a matrix of integers or fractions, got [[1, None]]: "
                  "argument should be a string or a Rational instance"),
])
def test_weights_that_are_not_a_rational_matrix_are_rejected(weights, message) -> None:
    with pytest.raises(SaturationError) as err:
        HardAttention(weights, [[1]], [[1]])
    assert str(err.value) == message
    with pytest.raises(SaturationError) as err:
        majority_head().exact(weights)
    assert str(err.value) == message


def test_error_messages_say_what_was_expected() -> None:
    with pytest.raises(SaturationError) as err:
        one_hot("abc")
    assert str(err.value) == "expected a word over {a, b}, got 'abc'"
    with pytest.raises(SaturationError) as err:
        previous_token_head().exact([])
    assert str(err.value) == "expected a sequence of at least one position, got none"


@pytest.mark.parametrize("make, rows", [
    (previous_token_head, one_hot("abb")),  # 2 features for weights of 5 rows
    (majority_head, positional("ab")),  # 5 features for weights of 2 rows
])
def test_exact_refuses_positions_of_another_width_than_the_weights(make, rows) -> None:
    # The float run refuses them too (a matmul of mismatched shapes).
    head = make()
    with pytest.raises(SaturationError) as err:
        head.exact(rows)
    assert str(err.value) == (f"expected rows of {head.query.shape[0]} entries (the weights' rows), "
                              f"got rows of {len(rows[0])}")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        head(torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64))
