"""Claims about a model, as property tests in a user's own suite (shown in docs/claims.md).

Each test states one claim; hypothesis draws inputs, and a claim that does not hold fails with the
simplest input that breaks it. To use the claims profile for a whole suite instead of per test,
put ``settings.load_profile(claims.register_profile())`` in its ``conftest.py``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from empirical import claims
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated import previous_token_head
from saturated.modules import positional


@pytest.fixture(scope="module")
def minilm():
    """The model the claims are about: here the pretrained MiniLM, cut to its first layer."""
    return load_model("minilm", num_layers=1)


@claims.profile()
@given(data=st.data())
def test_minilm_is_saturated_at_large_scales(minilm, data):
    model, tokenizer = minilm
    ids = data.draw(claims.token_sequences(tokenizer, max_len=8), label="ids")
    scale = data.draw(claims.scales(low=1e5), label="scale")
    claims.assert_saturated(model, ids, scale=scale, eps=1e-4)


@claims.profile()
@given(data=st.data())
def test_minilm_is_asymptotically_1_homogeneous(minilm, data):
    model, tokenizer = minilm
    sentence = data.draw(claims.sentences(load_corpus(n=20)), label="sentence")
    claims.assert_homogeneous(model, tokenizer(sentence)["input_ids"], degree=1, grade="asymptotic")


class SoftmaxHead(nn.Module):
    """An ordinary causal softmax head with the weights of a saturated reference head."""

    def __init__(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Parameter(w.clone()) for w in (query, key, value))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = (x @ self.query) @ (x @ self.key).mT
        n = x.shape[-2]
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ (x @ self.value)


@claims.profile()
@given(word=st.text(alphabet="ab", min_size=1, max_size=8))
def test_softmax_head_computes_the_previous_token_head_at_large_scale(word):
    reference = previous_token_head()
    head = SoftmaxHead(reference.query, reference.key, reference.value).eval()
    rows = torch.tensor(positional(word), dtype=torch.float64)
    claims.assert_matches(reference, head, rows, eps=1e-9, scale=1e3)
