"""Claims as property tests: true claims hold, planted false claims fail with a shrunk example."""

from __future__ import annotations

import pytest
import torch
import transformers
from hypothesis import find, given, settings
from hypothesis import strategies as st
from torch import nn

from empirical import claims
from empirical.errors import EmpiricalError
from empirical.models.loading import load_model
from saturated import HardAttention, previous_token_head
from saturated.modules import positional

FEW = settings(claims.profile(), max_examples=4, database=None)


@pytest.fixture(scope="module")
def minilm1() -> tuple[nn.Module, object]:
    return load_model("minilm", num_layers=1)


@pytest.fixture(scope="module")
def tiny(minilm1) -> tuple[nn.Module, object]:
    """A two-layer random-init BERT, 32 wide, on MiniLM's vocabulary: cheap to run and to export."""
    _, tokenizer = minilm1
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64)
    return transformers.BertModel(config, add_pooling_layer=False).eval(), tokenizer


def _failing_example(err: BaseException) -> str:
    return "\n".join(getattr(err, "__notes__", []))


def test_token_sequences_carry_the_special_tokens_and_stay_in_bounds(minilm1):
    _, tokenizer = minilm1
    special = set(tokenizer.all_special_ids)

    @FEW
    @given(claims.token_sequences(tokenizer, min_len=3, max_len=7))
    def check(ids):
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert 3 <= len(ids) <= 7 and not special & set(ids[1:-1])
        assert all(0 <= i < len(tokenizer) for i in ids)

    check()
    with pytest.raises(EmpiricalError, match="room for the 2 special tokens"):
        claims.token_sequences(tokenizer, max_len=1)


def test_strategies_shrink_to_the_simplest_input(minilm1):
    _, tokenizer = minilm1
    simplest = st.tuples(claims.token_sequences(tokenizer), claims.scales(),
                         claims.sentences(["A longer sentence here.", "Short one."]))

    @settings(database=None)
    @given(simplest)
    def anything_fails(drawn):
        raise AssertionError(drawn)

    with pytest.raises(AssertionError) as caught:
        anything_fails()
    # The shortest sequence ([CLS] [SEP]), c = 1 and the shortest sentence.
    assert "(101, 102), 1.0, 'Short one.'" in _failing_example(caught.value)


def test_saturated_claim_holds_at_a_large_scale(tiny):
    model, tokenizer = tiny

    @FEW
    @given(claims.token_sequences(tokenizer, max_len=8))
    def claim(ids):
        claims.assert_saturated(model, ids, scale=1e6, eps=1e-6)

    claim()


def test_saturated_claim_at_too_small_a_scale_fails_at_c_1(tiny):
    model, tokenizer = tiny
    ids = tokenizer("The norm grows during training.")["input_ids"]

    @FEW
    @given(claims.scales())
    def claim(c):
        claims.assert_saturated(model, ids, scale=c, eps=1e-6)

    with pytest.raises(AssertionError, match=r"not saturated to eps=1e-06 at c=1: embeddings") as caught:
        claim()
    assert "c=1.0" in _failing_example(caught.value)


def test_saturated_claim_on_pretrained_minilm_checks_chosen_layers(minilm1):
    model, tokenizer = minilm1
    ids = tokenizer("Saturated attention is hard attention.")["input_ids"]
    claims.assert_saturated(model, ids, scale=1e5, eps=1e-4)
    claims.assert_saturated(model, ids, scale=10.0, eps=0.5, layers=["embeddings"])
    with pytest.raises(AssertionError, match="layer 1 1 − cos"):
        claims.assert_saturated(model, ids, scale=10.0, eps=1e-4, layers=[-1])
    with pytest.raises(EmpiricalError, match="expected layers among"):
        claims.assert_saturated(model, ids, scale=10.0, eps=1e-4, layers=["layer 7"])


def test_homogeneity_claim_with_the_derived_degree_holds(tiny):
    model, tokenizer = tiny

    @settings(FEW, max_examples=2)
    @given(claims.token_sequences(tokenizer, max_len=6))
    def claim(ids):
        claims.assert_homogeneous(model, ids)  # derived: degree 1, asymptotic

    claim()


def test_wrong_degree_fails_with_the_shortest_sequence(tiny):
    model, tokenizer = tiny

    @settings(FEW, max_examples=2)
    @given(claims.token_sequences(tokenizer, max_len=4))
    def claim(ids):
        # An exact claim is measured at c = 1 … 1024 only; approximate and asymptotic claims that
        # fail are measured again up to c = 2⁴⁰, too slow for a property test of the test suite.
        claims.assert_homogeneous(model, ids, degree=2, grade="exact")

    steady = r"claimed degree 2 .* measured not homogeneous.* 1\.00e\+00 \("  # c^-1 per doubling
    with pytest.raises(AssertionError, match=steady) as caught:
        claim()
    assert "ids=(101, 102)" in _failing_example(caught.value)


def test_exact_grade_is_refuted_and_pretrained_minilm_is_asymptotically_1_homogeneous(minilm1):
    model, tokenizer = minilm1
    ids = tokenizer("Parameters grow like the square root of time.")["input_ids"]
    claims.assert_homogeneous(model, ids, degree=1, grade="asymptotic")
    with pytest.raises(AssertionError, match=r"claimed degree 1 \(exact: exact decay"):
        claims.assert_homogeneous(model, ids, degree=1, grade="exact")
    # A wrong degree under the derived (asymptotic) grade: f(cθ)/c² halves at every doubling, which
    # is named as soon as it has held out to c = 2²⁰, not left undecided after widening to 2⁴⁰.
    with pytest.raises(AssertionError, match=r"measured not homogeneous of the claimed degree "
                                             r"\(measured degree ≈ 1\); .* from 1 to 1\.04858e\+06:"):
        claims.assert_homogeneous(model, ids, degree=2)
    # The pooler's tanh saturates: degree 0, approximately (exponentially fast).
    claims.assert_homogeneous(model, ids, output="pooler_output")


class SoftmaxHead(nn.Module):
    """The ordinary head whose c → ∞ limit a :class:`HardAttention` is: softmax(q kᵀ) v, causal."""

    def __init__(self, hard: HardAttention) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Parameter(hard.get_buffer(n).clone())
                                            for n in ("query", "key", "value"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = (x @ self.query) @ (x @ self.key).mT
        n = x.shape[-2]
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ (x @ self.value)


def _first_token_head() -> HardAttention:
    """A local head on positional rows (a, b, 1, i, i²) whose score −j² peaks at the first position."""
    query = [[0], [0], [-1], [0], [0]]
    key = [[0], [0], [0], [0], [1]]
    value = [[1, 0], [0, 1], [0, 0], [0, 0], [0, 0]]
    return HardAttention(query, key, value, causal=True)


WORDS = st.text(alphabet="ab", min_size=1, max_size=8)


def _rows(word: str) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in positional(word)], dtype=torch.float64)


def test_reference_head_matches_the_softmax_head_at_large_c():
    model = SoftmaxHead(previous_token_head()).eval()

    @FEW
    @given(WORDS)
    def claim(word):
        claims.assert_matches(previous_token_head(), model, _rows(word), eps=1e-9, scale=1e3)

    claim()


def test_reference_head_matches_the_softmax_heads_exact_limit():
    model = SoftmaxHead(previous_token_head()).eval()

    @settings(FEW, max_examples=20)
    @given(WORDS)
    def claim(word):
        claims.assert_matches(previous_token_head(), model, _rows(word), eps=1e-12)

    claim()


def test_a_reference_head_that_differs_fails_on_a_shortest_word():
    model = SoftmaxHead(previous_token_head()).eval()

    @settings(FEW, max_examples=30)
    @given(WORDS)
    def claim(word):
        claims.assert_matches(_first_token_head(), model, _rows(word), eps=1e-6, scale=1e3)

    with pytest.raises(AssertionError, match="the reference differs from the model") as caught:
        claim()
    # Three letters are the fewest where the first and the previous token can differ.
    assert "word='aba'" in _failing_example(caught.value)


def test_claims_reject_training_mode_and_scales_below_one(tiny):
    model, tokenizer = tiny
    ids = tokenizer("A sentence.")["input_ids"]
    with pytest.raises(EmpiricalError, match=r"scale c .* ≥ 1"):
        claims.assert_saturated(model, ids, scale=0.5, eps=1e-3)
    with pytest.raises(EmpiricalError, match=r"eps .* ≥ 0"):
        claims.assert_saturated(model, ids, scale=10.0, eps=-1.0)
    with pytest.raises(EmpiricalError, match="expected low to be a number ≥ 1"):
        claims.scales(low=0.1)
    head = SoftmaxHead(previous_token_head())
    with pytest.raises(EmpiricalError, match=r"scale c .* ≥ 1"):
        claims.assert_matches(previous_token_head(), head.eval(), _rows("ab"), scale=0.0)
    model.train()
    try:
        for check in (lambda: claims.assert_saturated(model, ids, scale=10.0, eps=1e-3),
                      lambda: claims.assert_homogeneous(model, ids),
                      lambda: claims.assert_matches(previous_token_head(), head.train(), _rows("ab"))):
            with pytest.raises(EmpiricalError, match=r"eval\(\) mode"):
                check()
    finally:
        model.eval()


def test_claims_leave_the_model_bit_identical(tiny):
    model, tokenizer = tiny
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ids = tokenizer("Nothing changes here.")["input_ids"]
    claims.assert_saturated(model, ids, scale=1e3, eps=1.0)
    claims.assert_homogeneous(model, ids)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())


def test_the_documented_example_suite_is_the_one_that_runs():
    from pathlib import Path

    docs = Path(__file__).parents[2] / "docs"
    example = (docs / "examples" / "test_claims_example.py").read_text(encoding="utf-8")
    assert f"```python\n{example}```" in (docs / "claims.md").read_text(encoding="utf-8")


def test_token_sequences_draw_only_ids_the_model_embeds(minilm1):
    _, tokenizer = minilm1
    torch.manual_seed(0)
    small = transformers.BertModel(transformers.BertConfig(
        vocab_size=1000, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16), add_pooling_layer=False).eval()

    @FEW
    @given(claims.token_sequences(tokenizer, max_len=12, model=small),
           claims.token_sequences(tokenizer, max_len=12, vocab_size=500))
    def check(by_model, by_bound):
        assert max(by_model) < 1000 and max(by_bound) < 500

    check()
    # Without a bound the same tokenizer draws ids beyond the model's table.
    beyond = find(claims.token_sequences(tokenizer, max_len=12), lambda ids: max(ids) >= 1000,
                  settings=settings(database=None))
    assert max(beyond) >= 1000
    with pytest.raises(EmpiricalError, match=r"special tokens \[101, 102\].*vocabulary of 100 ids"):
        claims.token_sequences(tokenizer, vocab_size=100)
