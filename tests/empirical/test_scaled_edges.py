"""Scaling and batching at their edges: boundary scales, buffers, padding, truncation, two stacks.

The model-level tests (``test_similarity.py``) run whole transformers; these pin the helpers they
rest on with small modules whose every number is known, so a wrong comparison or a swapped
argument fails here directly.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.measure.scaled import call_scaled, check_scale, scaled_forward, scaled_parameters
from empirical.models.batching import (
    TokenizedCorpus,
    embedding_rows,
    hidden_states,
    make_batches,
    position_limit,
    tokenize,
)

# --- check_scale --------------------------------------------------------------------------------


@pytest.mark.parametrize(("scale", "expected"), [
    (1, 1.0), (1.0, 1.0), (1.5, 1.5), (1000, 1000.0), (float("inf"), math.inf),
    (torch.tensor(3.0), 3.0),
])
def test_check_scale_accepts_c_at_least_one_and_infinity(scale: Any, expected: float) -> None:
    value = check_scale(scale)
    assert value == expected and type(value) is float


@pytest.mark.parametrize("scale", [0.999999, 0.0, -1.0, -math.inf, math.nan])
def test_check_scale_rejects_below_one_minus_infinity_and_nan(scale: float) -> None:
    with pytest.raises(EmpiricalError) as err:
        check_scale(scale)
    assert str(err.value) == (
        f"expected the scale c (parameters are multiplied by c) to be a number ≥ 1 or inf, got "
        f"{scale!r}")


@pytest.mark.parametrize("scale", ["big", "2.5", None, [2.0], True])
def test_check_scale_rejects_what_is_not_a_number(scale: Any) -> None:
    with pytest.raises(EmpiricalError) as err:
        check_scale(scale)
    assert str(err.value) == ("expected the scale c (parameters are multiplied by c) to be a real "
                              f"number, got {scale!r} ({type(scale).__name__})")
    assert err.value.__cause__ is None  # the conversion error is noise for the reader


# --- scaled parameters, buffers and the forward pass -----------------------------------------------


class Normed(nn.Module):
    """Linear → BatchNorm (floating-point and integer buffers) → Linear, with fixed weights."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.last = nn.Linear(4, 2, bias=False)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator))
            self.norm.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
            self.norm.running_var.copy_(torch.tensor([1.5, 0.5, 2.0, 1.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(self.norm(self.first(x)))


X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.5]])


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


def _unchanged(model: nn.Module, before: dict[str, torch.Tensor]) -> bool:
    after = model.state_dict()
    return after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


def test_scaled_parameters_are_fresh_copies_times_c_and_leave_buffers_out() -> None:
    model = Normed()
    scaled = scaled_parameters(model, 7.0)
    assert list(scaled) == [name for name, _ in model.named_parameters()]
    for name, p in model.named_parameters():
        assert torch.equal(scaled[name], p.detach() * 7.0)
        assert scaled[name].data_ptr() != p.data_ptr() and not scaled[name].requires_grad
    assert not {"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"} & set(scaled)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_model_state_is_bit_identical_after_scaled_calls(training: bool) -> None:
    # BatchNorm in training mode updates its running statistics in place: the scaled pass must
    # update copies, never the model's buffers (nor its parameters).
    model = Normed().train(training)
    before = _state(model)
    for c in (1.0, 10.0, 1000.0):
        scaled_forward(model, c)(x=X)
    call_scaled(model, scaled_parameters(model, 3.0), x=X)
    assert _unchanged(model, before)


def test_model_state_is_bit_identical_after_a_scaled_call_raises() -> None:
    model = Normed().train()
    before = _state(model)
    with pytest.raises(RuntimeError):
        scaled_forward(model, 5.0)(x=X[:, :2])  # wrong width: the first layer raises
    assert _unchanged(model, before)


def test_scaled_forward_is_the_model_at_c_theta() -> None:
    # In eval mode BatchNorm is affine with fixed statistics, so every weight enters as c·w.
    model = Normed().eval()
    c = 4.0
    with torch.no_grad():
        first = nn.functional.linear(X, c * model.first.weight, c * model.first.bias)
        normed = nn.functional.batch_norm(first, model.norm.running_mean, model.norm.running_var,
                                          c * model.norm.weight, c * model.norm.bias, eps=model.norm.eps)
        expected = nn.functional.linear(normed, c * model.last.weight)
    assert torch.allclose(scaled_forward(model, c)(x=X), expected, rtol=1e-6, atol=0)
    assert torch.equal(scaled_forward(model, 1.0)(x=X), model(X))


def test_call_scaled_replaces_only_the_parameters_it_is_given() -> None:
    # The last layer is linear without bias: doubling its weight alone doubles the output.
    model = Normed().eval()
    only_last = {"last.weight": model.last.weight.detach() * 2.0}
    with torch.no_grad():
        assert torch.equal(call_scaled(model, only_last, x=X), 2.0 * model(X))


def test_scaled_forward_at_infinity_is_the_saturated_limit() -> None:
    # Two bias-free linear maps with a ReLU: 2-homogeneous, so the limit normalized by c² is f(θ).
    model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False)).eval()
    limit = scaled_forward(model, math.inf)(input=X)
    assert torch.allclose(limit, model(X), rtol=1e-5, atol=1e-6)


def test_scaled_forward_at_infinity_explains_a_missing_limit() -> None:
    class Exp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.exp(self.linear(x))

    with pytest.raises(EmpiricalError, match=r"^the exact limit \(c = ∞\) is not available: .*aten\.exp"):
        scaled_forward(Exp().eval(), math.inf)(x=X)


# --- position limits and tokenization --------------------------------------------------------------


def _with_config(**config: Any) -> nn.Module:
    model = nn.Linear(1, 1)
    model.config = SimpleNamespace(**config)  # type: ignore[assignment]
    return model


@pytest.mark.parametrize(("config", "expected"), [
    ({"max_position_embeddings": 512, "model_type": "bert"}, 512),
    ({"max_position_embeddings": 514, "model_type": "roberta"}, 512),
    ({"max_position_embeddings": 514, "model_type": "xlm-roberta"}, 512),
    ({"max_position_embeddings": 514, "model_type": "camembert"}, 512),
    ({"n_positions": 1024, "model_type": "gpt2"}, 1024),
    ({"max_position_embeddings": None, "n_positions": 64}, 64),
    ({"max_position_embeddings": 0}, None),
    ({"max_position_embeddings": -1}, None),
    ({"max_position_embeddings": 512.0}, None),
    ({"model_type": "t5"}, None),
])
def test_position_limit(config: dict[str, Any], expected: int | None) -> None:
    assert position_limit(_with_config(**config)) == expected


def test_position_limit_of_a_model_without_config() -> None:
    assert position_limit(nn.Linear(1, 1)) is None


class WordTokenizer:
    """One id per word, between [CLS] = 101 and [SEP] = 102, truncating like Hugging Face's."""

    pad_token_id = 0

    def __init__(self, special: bool = True) -> None:
        self.special = special
        self.calls: list[dict[str, Any]] = []

    def __call__(self, texts: list[str], *, add_special_tokens: bool, verbose: bool,
                 truncation: bool = False, max_length: int | None = None) -> dict[str, Any]:
        self.calls.append({"truncation": truncation, "max_length": max_length, "verbose": verbose})
        rows = []
        for text in texts:
            ids = [1000 + len(word) for word in text.split()]
            ids = [101, *ids, 102] if self.special else ids
            if truncation and max_length is not None and len(ids) > max_length:
                ids = [*ids[: max_length - 1], 102] if self.special else ids[:max_length]
            rows.append(ids)
        return {"input_ids": rows}


def test_tokenize_keeps_sentences_at_the_limit_and_truncates_longer_ones() -> None:
    tokenizer = WordTokenizer()
    model = _with_config(max_position_embeddings=5)
    sentences = ["one two three", "one two three four", "one"]  # 5, 6 and 3 tokens
    with pytest.warns(UserWarning) as caught:
        corpus = tokenize(tokenizer, sentences, max_length=100, model=model)
    assert str(caught[0].message) == ("1 of 3 sentences are longer than 5 tokens and were "
                                      "truncated to 5")
    assert corpus == TokenizedCorpus(((101, 1003, 1003, 1005, 102),
                                      (101, 1003, 1003, 1005, 102), (101, 1003, 102)), 1, 5)
    # Both calls keep the tokenizer quiet: its own over-length message would repeat ours.
    assert tokenizer.calls == [{"truncation": False, "max_length": None, "verbose": False},
                               {"truncation": True, "max_length": 5, "verbose": False}]


def test_tokenize_uses_the_smaller_of_the_request_and_the_model_limit() -> None:
    model = _with_config(max_position_embeddings=512)
    corpus = tokenize(WordTokenizer(), ["a b c"], max_length=5, model=model)
    assert (corpus.max_length, corpus.n_truncated) == (5, 0)
    unlimited = tokenize(WordTokenizer(), ["a b c"], max_length=7, model=nn.Linear(1, 1))
    assert unlimited.max_length == 7


def test_tokenize_without_truncation_asks_once_and_warns_not(recwarn: pytest.WarningsRecorder) -> None:
    tokenizer = WordTokenizer()
    corpus = tokenize(tokenizer, ["a b", "c"], max_length=4, model=nn.Linear(1, 1))
    assert corpus.ids == ((101, 1001, 1001, 102), (101, 1001, 102)) and corpus.n_truncated == 0
    assert len(tokenizer.calls) == 1 and not recwarn.list


@pytest.mark.parametrize("max_length", [0, -5, True, 8.0, "8"])
def test_tokenize_rejects_a_length_that_is_not_a_positive_integer(max_length: Any) -> None:
    shown = re.escape(repr(max_length) if type(max_length) in (int, float)
                      else f"{max_length!r} ({type(max_length).__name__})")
    with pytest.raises(EmpiricalError, match=rf"max_length \(tokens per sentence\) to be an integer ≥ 1, "
                       rf"got {shown}$"):
        tokenize(WordTokenizer(), ["a"], max_length=max_length, model=nn.Linear(1, 1))


def test_tokenize_accepts_a_length_of_one() -> None:
    corpus = tokenize(WordTokenizer(special=False), ["a"], max_length=1, model=nn.Linear(1, 1))
    assert corpus.ids == ((1001,),)


def test_tokenize_refuses_a_tokenizer_that_ignores_truncation() -> None:
    class Untruncating(WordTokenizer):
        def __call__(self, texts: list[str], **options: Any) -> dict[str, Any]:
            return super().__call__(texts, **{**options, "truncation": False})

    with pytest.warns(UserWarning), pytest.raises(EmpiricalError) as err:
        tokenize(Untruncating(), ["a b c d"], max_length=4, model=nn.Linear(1, 1))
    assert str(err.value) == ("the tokenizer Untruncating did not truncate to 4 tokens; expected a "
                              "tokenizer that supports truncation=True")


def test_tokenize_rejects_a_sentence_without_tokens() -> None:
    with pytest.raises(EmpiricalError, match=r"^a sentence produced no tokens; expected non-empty "
                                             r"text in every line$"):
        tokenize(WordTokenizer(special=False), ["a", ""], max_length=8, model=nn.Linear(1, 1))


class _Table(nn.Module):
    """A model whose input embedding table is ``table`` (or that raises like PreTrainedModel's
    default when ``table`` is NotImplementedError)."""

    def __init__(self, table: Any) -> None:
        super().__init__()
        self.table = table

    def get_input_embeddings(self) -> Any:
        if self.table is NotImplementedError:
            raise NotImplementedError
        return self.table


@pytest.mark.parametrize(("model", "expected"), [
    (_Table(nn.Embedding(10, 2)), 10),
    (nn.Linear(1, 1), None),                                  # no get_input_embeddings at all
    (_Table(NotImplementedError), None),                      # a model without an input table
    (_Table(nn.Linear(2, 2)), None),                          # a table that is not an embedding
    (_Table(SimpleNamespace(num_embeddings=10.0)), None),     # a row count that is not an integer
    (_Table(SimpleNamespace(num_embeddings="10")), None),
])
def test_embedding_rows_are_the_integer_row_count_of_the_input_table(model: nn.Module,
                                                                     expected: int | None) -> None:
    assert embedding_rows(model) == expected


# --- batches ---------------------------------------------------------------------------------------


CORPUS = TokenizedCorpus(((5, 6, 7), (8,), (9, 10), (11, 12, 13, 14), (15,)), 0, 8)


def test_batches_are_length_sorted_right_padded_and_masked() -> None:
    model = _with_config(pad_token_id=3)
    batches = list(make_batches(model, WordTokenizer(), CORPUS, batch_size=2, device="cpu"))
    assert [b.indices for b in batches] == [(1, 4), (2, 0), (3,)]
    assert batches[1].inputs["input_ids"].tolist() == [[9, 10, 3], [5, 6, 7]]
    assert batches[1].inputs["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batches[0].inputs["input_ids"].tolist() == [[8], [15]]
    assert batches[2].inputs["input_ids"].tolist() == [[11, 12, 13, 14]]
    for batch in batches:
        assert set(batch.inputs) == {"input_ids", "attention_mask"}
        assert batch.inputs["input_ids"].dtype == batch.inputs["attention_mask"].dtype == torch.long
        ((name, mask),) = batch.stacks
        assert name == "" and mask.dtype == torch.bool
        assert torch.equal(mask, batch.inputs["attention_mask"].bool())


def test_one_sentence_per_batch() -> None:
    batches = list(make_batches(_with_config(), WordTokenizer(), CORPUS, batch_size=1, device="cpu"))
    assert [b.indices for b in batches] == [(1,), (4,), (2,), (0,), (3,)]
    assert [b.inputs["input_ids"].shape[1] for b in batches] == [1, 1, 2, 3, 4]


def test_batches_are_placed_on_the_device_asked_for() -> None:
    # The "meta" device stands for an accelerator on a CPU-only machine: tensors without storage.
    model = _with_config(is_encoder_decoder=True)
    for batch in make_batches(model, WordTokenizer(), CORPUS, batch_size=2, device="meta"):
        assert {t.device.type for t in batch.inputs.values()} == {"meta"}
        assert {mask.device.type for _, mask in batch.stacks} == {"meta"}


def test_batch_size_below_one_is_an_error() -> None:
    with pytest.raises(EmpiricalError, match="expected batch_size to be an integer ≥ 1, got 0"):
        next(make_batches(_with_config(), WordTokenizer(), CORPUS, batch_size=0, device="cpu"))


@pytest.mark.parametrize(("config", "tokenizer_pad", "expected"), [
    ({"pad_token_id": 3}, 7, 3),    # the model's own pad id first
    ({"pad_token_id": None}, 7, 7),  # then the tokenizer's
    ({}, None, 0),                   # else 0
    ({"pad_token_id": 0}, 7, 0),     # 0 is a pad id, not a missing one
])
def test_pad_id_choice(config: dict[str, Any], tokenizer_pad: int | None, expected: int) -> None:
    tokenizer = WordTokenizer()
    tokenizer.pad_token_id = tokenizer_pad  # type: ignore[assignment]
    (batch, *_) = make_batches(_with_config(**config), tokenizer, CORPUS, batch_size=5, device="cpu")
    assert batch.inputs["input_ids"][0, 1:].tolist() == [expected] * 3


def test_a_tokenizer_without_a_pad_id_pads_with_zero() -> None:
    class Bare:  # a tokenizer object with no pad_token_id attribute at all
        pass

    (batch, *_) = make_batches(_with_config(), Bare(), CORPUS, batch_size=5, device="cpu")
    assert batch.inputs["input_ids"][0].tolist() == [8, 0, 0, 0]


@pytest.mark.parametrize(("start", "expected_start"), [(0, 0), (21, 21), (None, 3)])
def test_encoder_decoder_batches_shift_the_sentence_behind_the_start_token(
        start: int | None, expected_start: int) -> None:
    model = _with_config(is_encoder_decoder=True, pad_token_id=3, decoder_start_token_id=start)
    (_, second, third) = make_batches(model, WordTokenizer(), CORPUS, batch_size=2, device="cpu")
    assert set(second.inputs) == {"input_ids", "attention_mask", "decoder_input_ids",
                                  "decoder_attention_mask"}
    assert second.inputs["decoder_input_ids"].tolist() == [[expected_start, 9, 10],
                                                           [expected_start, 5, 6]]
    assert torch.equal(second.inputs["decoder_attention_mask"], second.inputs["attention_mask"])
    assert [name for name, _ in second.stacks] == ["encoder", "decoder"]
    for _, mask in second.stacks:
        assert mask.tolist() == [[True, True, False], [True, True, True]]
    assert third.inputs["decoder_input_ids"].tolist() == [[expected_start, 11, 12, 13]]


# --- hidden states ---------------------------------------------------------------------------------


def test_hidden_states_by_stack_from_attributes_and_dicts() -> None:
    a, b = torch.zeros(1), torch.ones(1)
    assert hidden_states(SimpleNamespace(hidden_states=[a, b]), "", nn.Linear(1, 1)) == (a, b)
    out = SimpleNamespace(encoder_hidden_states=(a,), decoder_hidden_states=(b,))
    assert hidden_states(out, "encoder", nn.Linear(1, 1)) == (a,)
    assert hidden_states(out, "decoder", nn.Linear(1, 1)) == (b,)
    assert hidden_states({"decoder_hidden_states": [b]}, "decoder", nn.Linear(1, 1)) == (b,)


@pytest.mark.parametrize("output", [SimpleNamespace(hidden_states=()), {"hidden_states": None}, {}])
def test_missing_hidden_states_name_the_field_and_the_model(output: Any) -> None:
    with pytest.raises(EmpiricalError) as err:
        hidden_states(output, "", nn.Linear(1, 1))
    assert str(err.value).startswith(
        "expected the output of Linear to carry 'hidden_states' (a Hugging Face model called "
        "with output_hidden_states=True), but it returned ")
    assert str(err.value).endswith(f"{type(output).__name__} without them")
