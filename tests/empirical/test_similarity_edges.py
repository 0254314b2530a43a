"""representation_similarity against an independent computation on tiny Hugging Face models.

Tiny BERT and T5 models (a few thousand weights) run in milliseconds, so every number can be
recomputed here by hand: token cosines over real tokens only, means weighted by token counts,
labels per stack, the record, and each error. ``test_similarity.py`` checks the same function on
the real pretrained and base-size models.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn
from transformers import BertConfig, BertModel, T5Config, T5Model

from empirical import distributed
from empirical.errors import EmpiricalError
from empirical.measure import pipeline
from empirical.measure.pipeline import layer_labels, prepare, read_fields, token_cosines
from empirical.measure.similarity import SimilarityResult, representation_similarity
from empirical.models.batching import TokenizedCorpus, check_token_ids, make_batches, tokenize
from empirical.models.corpus import Corpus
from empirical.models.provenance import model_record, versions

SENTENCES = ["a bb ccc", "dddd", "ee f gg hhh iiii", "jj k"]


class WordTokenizer:
    """One id per word (1000 + its length) between [CLS] = 101 and [SEP] = 102."""

    pad_token_id = 0

    def __call__(self, texts: list[str], **_options: Any) -> dict[str, Any]:
        return {"input_ids": [[101, *(1000 + len(w) for w in t.split()), 102] for t in texts]}


def _tiny_bert() -> nn.Module:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1100, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=32)
    return BertModel(config).eval()


def _tiny_t5() -> nn.Module:
    torch.manual_seed(0)
    config = T5Config(vocab_size=1100, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2)
    return T5Model(config).eval()


def _by_hand(model: nn.Module, sentences: list[str], c: float) -> list[float]:
    """Mean token cosine per hidden state, one sentence at a time, scaling by functional_call."""
    scaled = {n: p.detach() * c for n, p in model.named_parameters()}
    totals: list[float] = []
    count = 0
    for sentence in sentences:
        ids = torch.tensor(WordTokenizer()([sentence])["input_ids"])
        with torch.no_grad():
            a = model(input_ids=ids, output_hidden_states=True).hidden_states
            b = torch.func.functional_call(model, scaled, args=(), kwargs={
                "input_ids": ids, "output_hidden_states": True}).hidden_states
        cosines = [nn.functional.cosine_similarity(x[0].double(), y[0].double(), dim=-1).sum().item()
                   for x, y in zip(a, b)]
        totals = cosines if not totals else [t + s for t, s in zip(totals, cosines)]
        count += ids.shape[1]
    return [t / count for t in totals]


def test_layer_labels_per_stack() -> None:
    assert layer_labels("", 3) == ["embeddings", "layer 1", "layer 2"]
    assert layer_labels("decoder", 2) == ["decoder embeddings", "decoder layer 1"]


def test_token_cosines_use_real_tokens_only_and_survive_zero_vectors() -> None:
    a = torch.tensor([[[1.0, 0.0], [3.0, 4.0], [0.0, 0.0], [9.0, 9.0]]], dtype=torch.float32)
    b = torch.tensor([[[2.0, 0.0], [-3.0, -4.0], [1.0, 1.0], [1.0, -1.0]]], dtype=torch.float32)
    mask = torch.tensor([[True, True, True, False]])
    cosines = token_cosines(a, b, mask)
    assert cosines.dtype == torch.float64
    assert cosines.tolist() == [1.0, -1.0, 0.0]  # the zero vector's cosine is 0, not NaN


def test_token_cosines_of_huge_vectors_stay_within_one() -> None:
    a = torch.full((1, 2, 4), 3e30)
    assert token_cosines(a, a * 7, torch.ones(1, 2, dtype=torch.bool)).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("batch_size", [1, 3, 4])
def test_similarity_is_the_token_weighted_mean_of_cosines_whatever_the_batching(batch_size: int) -> None:
    model = _tiny_bert()
    result = representation_similarity(model, WordTokenizer(), SENTENCES, scale=30.0,
                                       batch_size=batch_size)
    assert result.per_layer == pytest.approx(_by_hand(model, SENTENCES, 30.0), abs=1e-6)
    assert result.layers == ("embeddings", "layer 1", "layer 2")
    assert result.stacks == ("", "", "")
    assert result.n_tokens == {"": 5 + 3 + 7 + 4} and result.n_sentences == 4
    assert (result.n_truncated, result.max_length, result.scale) == (0, 32, 30.0)
    assert result.record["batch_size"] == batch_size
    assert (result.record["dtype"], result.record["device"]) == ("torch.float32", "cpu")
    assert result.record["corpus"]["source"] == "in-memory list"
    assert result.record["corpus"]["n_sentences"] == 4


def test_scale_one_is_cosine_one_and_growth_moves_attention_layers() -> None:
    model = _tiny_bert()
    one = representation_similarity(model, WordTokenizer(), SENTENCES, scale=1)
    assert one.per_layer == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)
    grown = representation_similarity(model, WordTokenizer(), SENTENCES, scale=1e3)
    assert grown.per_layer[0] == pytest.approx(1.0, abs=1e-5)  # LayerNorm·γ + β: 1-homogeneous
    assert min(grown.per_layer[1:]) < 0.999


def test_default_scale_is_one_thousand() -> None:
    result = representation_similarity(_tiny_bert(), WordTokenizer(), SENTENCES[:1])
    assert result.scale == 1000.0
    assert list(result.per_layer) == pytest.approx(_by_hand(_tiny_bert(), SENTENCES[:1], 1000.0), abs=1e-6)


def test_encoder_decoder_reports_both_stacks_with_their_token_counts() -> None:
    model = _tiny_t5()
    result = representation_similarity(model, WordTokenizer(), SENTENCES, scale=10.0, batch_size=2)
    assert result.layers == ("encoder embeddings", "encoder layer 1", "decoder embeddings",
                             "decoder layer 1")
    assert result.stacks == ("encoder", "encoder", "decoder", "decoder")
    assert result.n_tokens == {"encoder": 19, "decoder": 19}
    assert result.by_stack() == {"encoder": list(result.per_layer[:2]),
                                 "decoder": list(result.per_layer[2:])}
    singles = [representation_similarity(model, WordTokenizer(), [s], scale=10.0) for s in SENTENCES]
    weights = [r.n_tokens["encoder"] for r in singles]
    for i in range(4):
        expected = sum(w * r.per_layer[i] for w, r in zip(weights, singles)) / sum(weights)
        assert result.per_layer[i] == pytest.approx(expected, abs=1e-6)


def test_result_json_table_and_round_trip(tmp_path: Any) -> None:
    result = SimilarityResult(layers=("embeddings", "layer 1"), per_layer=(1.0, 0.25), stacks=("", ""),
                              scale=math.inf, n_sentences=2, n_tokens={"": 9}, n_truncated=1,
                              max_length=16, record={"batch_size": 4})
    data = result.to_dict()
    assert data == {
        "schema": "normsat.similarity/1", "scale": None, "exact_limit": True,
        "layers": [{"name": "embeddings", "stack": "", "similarity": 1.0, "undetermined_sentences": [],
                    "undetermined_tokens": 0},
                   {"name": "layer 1", "stack": "", "similarity": 0.25, "undetermined_sentences": [],
                    "undetermined_tokens": 0}],
        "undetermined_reasons": {},
        "n_sentences": 2, "n_tokens": {"all": 9}, "n_truncated": 1, "max_length": 16, "batch_size": 4,
    }
    text = result.to_json(tmp_path / "r.json").read_text(encoding="utf-8")
    assert SimilarityResult.from_dict(json.loads(text)) == result
    assert result.table() == ("layer       cos(θ, c→∞ limit)\n"
                              "embeddings  1.0000\n"
                              "layer 1     0.2500")
    finite = SimilarityResult(("embeddings",), (0.5,), ("",), 1000.0, 1, {"": 1}, 0, 8)
    assert (finite.to_dict()["scale"], finite.to_dict()["exact_limit"]) == (1000.0, False)
    assert SimilarityResult.from_dict(finite.to_dict()) == finite
    two_stacks = SimilarityResult(("encoder embeddings", "decoder embeddings"), (0.5, 0.75),
                                  ("encoder", "decoder"), 10.0, 1, {"encoder": 3, "decoder": 3}, 0, 8)
    assert two_stacks.to_dict()["n_tokens"] == {"encoder": 3, "decoder": 3}
    assert SimilarityResult.from_dict(two_stacks.to_dict()) == two_stacks
    assert finite.table() == "layer       cos(θ, 1000·θ)\nembeddings  0.5000"
    with pytest.raises(ValueError):
        SimilarityResult(("embeddings",), (math.nan,), ("",), 2.0, 1, {"": 1}, 0, 8).to_json(
            tmp_path / "nan.json")


def test_from_dict_names_the_schema_it_expected() -> None:
    with pytest.raises(EmpiricalError) as err:
        SimilarityResult.from_dict({"schema": "normsat.other/1"})
    assert str(err.value) == "expected a normsat.similarity/1 record, got schema 'normsat.other/1'"


class Overflowing(nn.Module):
    """Embeddings, then e·w²: at c·θ the second state grows like c³ and overflows float32."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1100, 4)
        self.w = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                output_hidden_states: bool, return_dict: bool) -> Any:
        e = self.embed(input_ids)
        return SimpleNamespace(hidden_states=(e, e * self.w * self.w))


def test_overflow_names_the_layer_and_the_scale() -> None:
    with pytest.raises(EmpiricalError) as err:
        representation_similarity(Overflowing().eval(), WordTokenizer(), SENTENCES[:1], scale=1e15)
    assert str(err.value).startswith("hidden state 'layer 1' is not finite at c·θ with c=1e+15 in "
                                     "torch.float32 (overflow); use ")


@pytest.mark.parametrize(("dtype", "scale", "computed", "remedy"), [
    (torch.float16, 1e15, torch.float32, "a wider dtype (float64, CLI: --dtype) or a smaller scale"),
    (torch.bfloat16, 1e15, torch.float32, "a wider dtype (float64, CLI: --dtype) or a smaller scale"),
    (torch.float32, 1e15, torch.float32, "a wider dtype (float64, CLI: --dtype) or a smaller scale"),
    (torch.float64, 1e110, torch.float64, "a smaller scale"),
])
def test_overflow_suggests_the_wider_dtypes_of_the_computing_precision(
        dtype: torch.dtype, scale: float, computed: torch.dtype, remedy: str) -> None:
    # e·w² grows like c³: 1e15 overflows float32 (max ~3e38), 1e110 float64 (max ~1.8e308); float64
    # has no wider dtype to suggest. 16-bit models compute in float32 (c = 1e3 would overflow
    # float16's 65504 otherwise), so their overflow is float32's.
    with pytest.raises(EmpiricalError) as err:
        representation_similarity(Overflowing().to(dtype).eval(), WordTokenizer(), SENTENCES[:1],
                                  scale=scale)
    assert str(err.value).endswith(f"in {computed} (overflow); use {remedy}")


def test_non_finite_states_at_theta_are_reported_as_such() -> None:
    model = Overflowing().eval()
    with torch.no_grad():
        model.w.fill_(1e30)
    with pytest.raises(EmpiricalError, match=r"^hidden state 'layer 1' is not finite at θ in torch\.float32"):
        representation_similarity(model, WordTokenizer(), SENTENCES[:1], scale=1.0)


def test_a_model_that_rejects_hidden_state_options_is_explained() -> None:
    class NoOptions(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(1100, 4)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.embed(input_ids)

    with pytest.raises(EmpiricalError, match=r"^expected a Hugging Face model whose forward accepts "
                                             r"output_hidden_states=True .*NoOptions\.forward does not"):
        representation_similarity(NoOptions().eval(), WordTokenizer(), SENTENCES[:1])


def test_other_type_errors_in_the_forward_pass_are_not_disguised() -> None:
    class Broken(Overflowing):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError("unsupported operand")

    with pytest.raises(TypeError, match=r"^unsupported operand$"):
        representation_similarity(Broken().eval(), WordTokenizer(), SENTENCES[:1])


def test_inputs_are_checked_before_any_forward_pass() -> None:
    model = _tiny_bert()
    with pytest.raises(EmpiricalError, match=r"^expected at least one sentence, got an empty list$"):
        representation_similarity(model, WordTokenizer(), [])
    with pytest.raises(EmpiricalError, match=r"^expected a model in eval\(\) mode"):
        representation_similarity(model.train(), WordTokenizer(), SENTENCES)
    with pytest.raises(EmpiricalError, match=r"^expected a transformer \(an nn\.Module with "
                                             r"parameters\), got Identity$"):
        representation_similarity(nn.Identity(), WordTokenizer(), SENTENCES)
    broken = _tiny_bert()
    with torch.no_grad():
        broken.get_parameter("pooler.dense.bias")[0] = math.nan
    with pytest.raises(EmpiricalError, match=r"^parameter 'pooler\.dense\.bias' has non-finite entries "
                                             r"\(NaN or ±inf\); expected finite θ: the checkpoint or "
                                             r"the model is broken, not the precision$"):
        representation_similarity(broken, WordTokenizer(), SENTENCES)


@pytest.mark.parametrize("progress", [False, True])
def test_progress_bar_is_shown_only_when_asked(progress: bool, capsys: pytest.CaptureFixture[str]) -> None:
    representation_similarity(_tiny_bert(), WordTokenizer(), SENTENCES[:1], scale=2.0, progress=progress)
    assert ("similarity c=2" in capsys.readouterr().err) == progress


# --- The tokenization and batching every measurement starts from (empirical/models/batching.py). -------

class SpecialTokenizer:
    """One id per word (1000 + its length), framed by [CLS] = 101 and [SEP] = 102 only when asked
    (``add_special_tokens``), truncating like a Hugging Face tokenizer; it says it adds 2 to one
    sentence and 3 to a pair ([CLS] a [SEP] b [SEP]), as BERT's does."""

    pad_token_id = 0

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 3 if pair else 2

    def __call__(self, texts: list[str], add_special_tokens: bool = False, truncation: bool = False,
                 max_length: int | None = None, **_options: Any) -> dict[str, Any]:
        rows = []
        for text in texts:
            words = [1000 + len(w) for w in text.split()]
            if truncation and max_length is not None:
                words = words[:max_length - (2 if add_special_tokens else 0)]
            rows.append([101, *words, 102] if add_special_tokens else words)
        return {"input_ids": rows}


def test_tokenize_adds_the_special_tokens_and_leaves_room_for_them() -> None:
    with pytest.warns(UserWarning, match=r"^1 of 2 sentences are longer than 4 tokens and were truncated"):
        corpus = tokenize(SpecialTokenizer(), ["a bb", "ccc dddd eeeee"], max_length=4, model=_tiny_bert())
    assert corpus.ids == ((101, 1001, 1002, 102), (101, 1003, 1004, 102))
    assert corpus.n_truncated == 1 and corpus.max_length == 4
    with pytest.raises(EmpiricalError, match=r"^expected max_length of at least 3 tokens: the tokenizer "
                                             r"adds 2 special tokens to every sentence, so "
                                             r"max_length=2 leaves no room for text$"):
        tokenize(SpecialTokenizer(), ["a"], max_length=2, model=_tiny_bert())


@pytest.mark.parametrize(("ids", "bad"), [([[101, 1099], [5, 1100]], 1100), ([[101, -1]], -1)])
def test_token_ids_outside_the_embedding_table_are_refused_before_the_model_runs(
        ids: list[list[int]], bad: int) -> None:
    model = _tiny_bert()  # 1100 rows
    message = (r"^expected token ids from 0 to 1099 \(the model's embedding table has 1100 rows\), "
               rf"got id {bad}; the tokenizer does not fit the model: use the model's own tokenizer "
               r"\(tokenizer=DIR, CLI: --tokenizer DIR\)$")
    with pytest.raises(EmpiricalError, match=message):
        check_token_ids(model, ids)
    with pytest.raises(EmpiricalError, match=message):
        check_token_ids(model, torch.tensor(ids))
    corpus = TokenizedCorpus(tuple(tuple(row) for row in ids), 0, 8)
    with pytest.raises(EmpiricalError, match=message):
        list(make_batches(model, WordTokenizer(), corpus, batch_size=2, device="cpu"))
    check_token_ids(model, [[0, 1099], [101]])  # the whole table is allowed
    with pytest.raises(EmpiricalError, match=message):  # a single id is checked like many
        check_token_ids(model, torch.tensor([bad]))
    check_token_ids(model, torch.tensor([], dtype=torch.long))  # nothing to check
    check_token_ids(model, [])


# --- Cosines at the edge of rounding, saved results, inputs and defaults. -------------------------


def test_cosines_of_parallel_vectors_whose_norms_round_low_are_exactly_one_and_minus_one() -> None:
    # |(1, 1, 1)| = √3, and √3·√3 rounds to 2.9999999999999996 in float64: the unclamped quotient
    # 3 / 2.9999999999999996 is 1.0000000000000002, outside [−1, 1] on both sides.
    ones = torch.ones(1, 1, 3)
    mask = torch.ones(1, 1, dtype=torch.bool)
    assert math.sqrt(3) * math.sqrt(3) < 3
    assert token_cosines(ones, ones, mask).tolist() == [1.0]
    assert token_cosines(ones, -ones, mask).tolist() == [-1.0]


@pytest.mark.parametrize("scale", ["inf", None])
def test_older_files_without_the_exact_limit_flag_read_as_the_limit(scale: str | None) -> None:
    # Files written before the exact_limit field stored the limit as the scale "inf" or null.
    data = SimilarityResult(("embeddings",), (0.5,), ("",), math.inf, 1, {"": 1}, 0, 8).to_dict()
    del data["exact_limit"]
    data["scale"] = scale
    assert SimilarityResult.from_dict(data).scale == math.inf


def test_the_exact_limit_flag_alone_marks_the_limit() -> None:
    data = SimilarityResult(("embeddings",), (0.5,), ("",), math.inf, 1, {"": 1}, 0, 8).to_dict()
    data["scale"] = 1000.0  # the flag is the current marker; the scale field is only the fallback
    assert SimilarityResult.from_dict(data).scale == math.inf
    data["exact_limit"] = False
    assert SimilarityResult.from_dict(data).scale == 1000.0


def test_json_is_indented_by_two_and_writes_other_record_values_as_text(tmp_path: Any) -> None:
    result = SimilarityResult(("embeddings",), (0.5,), ("",), 2.0, 1, {"": 3}, 0, 8,
                              record={"checkpoint": tmp_path / "model.pt", "dtype": torch.float32})
    text = result.to_json(tmp_path / "r.json").read_text()
    assert text.splitlines()[:3] == ["{", '  "schema": "normsat.similarity/1",', '  "scale": 2.0,']
    data = json.loads(text)
    assert (data["checkpoint"], data["dtype"]) == (str(tmp_path / "model.pt"), "torch.float32")


def test_a_single_string_is_one_sentence() -> None:
    model = _tiny_bert()
    one = representation_similarity(model, WordTokenizer(), "a bb ccc", scale=30.0)
    assert (one.n_sentences, one.n_tokens) == (1, {"": 5})
    assert one.per_layer == pytest.approx(_by_hand(model, ["a bb ccc"], 30.0), abs=1e-6)


def test_items_that_are_not_strings_are_named_by_type() -> None:
    with pytest.raises(EmpiricalError) as err:
        representation_similarity(_tiny_bert(), WordTokenizer(), ["a bb", 3, None, 2.5, 4])  # type: ignore[list-item]
    assert str(err.value) == "expected sentences as strings, got items of type NoneType, float, int"


def test_defaults_are_32_sentences_a_batch_512_tokens_and_no_progress_bar(
        capsys: pytest.CaptureFixture[str]) -> None:
    # T5's positions are relative: no model limit caps max_length, so the default shows.
    result = representation_similarity(_tiny_t5(), WordTokenizer(), SENTENCES[:2], scale=2.0)
    assert (result.record["batch_size"], result.max_length) == (32, 512)
    assert capsys.readouterr().err == ""


def test_the_progress_bar_counts_batches(capsys: pytest.CaptureFixture[str]) -> None:
    representation_similarity(_tiny_bert(), WordTokenizer(), SENTENCES, scale=2.0, batch_size=2,
                              progress=True)
    err = capsys.readouterr().err
    assert "similarity c=2: 100%" in err and "2/2" in err
    assert re.search(r"(batch/s|s/batch)\]", err)


def test_a_single_process_records_one_rank_with_all_the_tokens() -> None:
    result = representation_similarity(_tiny_bert(), WordTokenizer(), SENTENCES, scale=2.0)
    assert result.record["distributed"] == {"world_size": 1, "backend": None,
                                            "tokens_per_rank": [5 + 3 + 7 + 4]}


def test_a_model_that_returns_no_hidden_states_is_named() -> None:
    class NoStates(Overflowing):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    output_hidden_states: bool, return_dict: bool) -> Any:
            return SimpleNamespace(last_hidden_state=self.embed(input_ids))

    with pytest.raises(EmpiricalError, match=r"^expected the output of NoStates to carry "
                                             r"'hidden_states'"):
        representation_similarity(NoStates().eval(), WordTokenizer(), SENTENCES[:1])


class NaNPadding(Overflowing):
    """Like :class:`Overflowing`, but the embeddings are NaN at padding positions (as a fully
    masked attention row can make them): only real tokens may be blamed."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                output_hidden_states: bool, return_dict: bool) -> Any:
        e = self.embed(input_ids)
        padded = e.masked_fill(attention_mask[..., None] == 0, math.nan)
        return SimpleNamespace(hidden_states=(padded, e * self.w * self.w))


def test_non_finite_states_at_padding_positions_are_neither_measured_nor_blamed() -> None:
    model = NaNPadding().eval()
    # "a bb ccc" (5 tokens) and "dddd" (3) share a batch: the shorter one has 2 padding positions.
    fine = representation_similarity(model, WordTokenizer(), SENTENCES[:2], scale=1.0)
    assert fine.per_layer == pytest.approx([1.0, 1.0], abs=1e-12)
    with pytest.raises(EmpiricalError) as err:  # layer 1 overflows at real tokens at c·θ
        representation_similarity(model, WordTokenizer(), SENTENCES[:2], scale=1e15)
    assert str(err.value).startswith("hidden state 'layer 1' is not finite at c·θ with c=1e+15")


class WithLogits(nn.Module):
    """Hidden states with a limit (e and ReLU(e·W), 1- and 2-homogeneous), beside logits exp(…)
    that have none."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(1100, 4)
        self.linear = nn.Linear(4, 4, bias=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                output_hidden_states: bool, return_dict: bool) -> Any:
        e = self.embed(input_ids)
        h = torch.relu(self.linear(e))
        return {"hidden_states": (e, h), "logits": torch.exp(h)}


def test_the_exact_limit_computes_only_the_hidden_states_it_compares() -> None:
    # Both states are positively homogeneous, so each normalized limit is the state at θ.
    result = representation_similarity(WithLogits().eval(), WordTokenizer(), SENTENCES,
                                       scale=math.inf)
    assert result.per_layer == pytest.approx([1.0, 1.0], abs=1e-6)
    assert result.scale == math.inf


def test_the_fields_read_are_the_hidden_states_of_every_stack() -> None:
    corpus = TokenizedCorpus(((101, 1001, 102),), 0, 8)
    (single,) = make_batches(_tiny_bert(), WordTokenizer(), corpus, batch_size=1, device="cpu")
    (pair,) = make_batches(_tiny_t5(), WordTokenizer(), corpus, batch_size=1, device="cpu")
    assert read_fields([single]) == {"hidden_states"}
    assert read_fields([pair]) == {"encoder_hidden_states", "decoder_hidden_states"}


# --- Preparing the batches: pad id, device, and the rank's share under torchrun. ------------------


def test_batches_are_padded_with_the_tokenizers_pad_id_when_the_model_has_none() -> None:
    model = _tiny_bert()
    model.config.pad_token_id = None
    tokenizer = WordTokenizer()
    tokenizer.pad_token_id = 7
    tokens, batches = prepare(model, tokenizer, SENTENCES, max_length=32, batch_size=4)
    assert tokens.ids[1] == (101, 1004, 102)
    ((ids, mask),) = [(b.inputs["input_ids"], b.inputs["attention_mask"]) for b in batches]
    assert ids[0].tolist() == [101, 1004, 102, 7, 7, 7, 7]  # "dddd", the shortest, comes first
    assert mask[0].tolist() == [1, 1, 1, 0, 0, 0, 0]


def test_batches_are_built_on_the_device_of_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    devices: list[Any] = []

    def recording(*args: Any, device: Any, **kwargs: Any) -> Any:
        devices.append(device)
        return make_batches(*args, device=device, **kwargs)

    monkeypatch.setattr(pipeline, "make_batches", recording)
    model = _tiny_bert()
    prepare(model, WordTokenizer(), SENTENCES, max_length=32, batch_size=4)
    assert devices == [next(model.parameters()).device] == [torch.device("cpu")]


@pytest.fixture
def rank_one_of_two(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """This process as rank 1 of 2, whose rank 0 read SENTENCES and measured nothing; returns what
    rank 1 sent to the corpus check."""
    sent: list[Any] = []

    def gather(value: Any) -> list[Any]:
        if isinstance(value, str) or value is None:  # the corpus fingerprint
            sent.append(value)
            return [Corpus(tuple(SENTENCES), "rank 0").sha256, value]
        return [value, value]

    monkeypatch.setattr(distributed, "current", lambda: distributed.World(1, 2, "gloo"))
    monkeypatch.setattr(distributed, "gather", gather)
    monkeypatch.setattr(distributed, "reduce_sums", lambda sums: {k: v.double() for k, v in sums.items()})
    monkeypatch.setattr(distributed, "reduce_counts", dict)
    return sent


def test_a_sharded_preparation_checks_the_corpus_and_keeps_every_second_batch(
        rank_one_of_two: list[Any]) -> None:
    # Length-sorted: "dddd" (3 tokens), "jj k" (4), "a bb ccc" (5), "ee f gg hhh iiii" (7).
    _, mine = prepare(_tiny_bert(), WordTokenizer(), SENTENCES, max_length=32, batch_size=1,
                       sharded=True)
    assert [b.indices for b in mine] == [(3,), (2,)]
    assert rank_one_of_two == [Corpus(tuple(SENTENCES), "").sha256]
    _, every = prepare(_tiny_bert(), WordTokenizer(), SENTENCES, max_length=32, batch_size=1)
    assert [b.indices for b in every] == [(1,), (3,), (0,), (2,)]
    with pytest.raises(EmpiricalError, match=r"^the ranks disagree on the corpus"):
        prepare(_tiny_bert(), WordTokenizer(), SENTENCES[::-1], max_length=32, batch_size=1,
                 sharded=True)


def test_each_rank_measures_only_its_share_of_the_batches(rank_one_of_two: list[Any]) -> None:
    model = _tiny_bert()
    mine = representation_similarity(model, WordTokenizer(), SENTENCES, scale=30.0, batch_size=1)
    # Rank 0 adds nothing here (reduce_sums is this rank's sums), so the result is rank 1's share.
    assert mine.n_tokens == {"": 4 + 7}
    assert mine.per_layer == pytest.approx(_by_hand(model, [SENTENCES[3], SENTENCES[2]], 30.0), abs=1e-6)


def test_the_record_names_model_corpus_and_versions() -> None:
    model = _tiny_bert()
    listed = representation_similarity(model, WordTokenizer(), SENTENCES, scale=2.0).record
    assert listed["model"] == model_record(model)
    assert listed["model"]["num_parameters"] == sum(p.numel() for p in model.parameters())
    assert listed["versions"] == versions() and listed["versions"]["torch"] == torch.__version__
    assert listed["corpus"] == {"source": "in-memory list", "n_sentences": 4,
                                "sha256": hashlib.sha256("\n".join(SENTENCES).encode()).hexdigest()}
    corpus = Corpus(tuple(SENTENCES), "sentences.txt")
    named = representation_similarity(model, WordTokenizer(), corpus, scale=2.0).record
    assert named["corpus"] == {"source": "sentences.txt", "n_sentences": 4,
                               "sha256": listed["corpus"]["sha256"]}


class CancellingStates(nn.Module):
    """Embeddings e, then h = W₁e, then W₂h = (e₀ − (e₀ + e₁), same): a word whose embedding has
    e₁ = 0 gives a last state computed as an exact 0 from rounded operands, whose limit no
    precision decides (issue 24: "within rounding of zero at its leading degree")."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1100, 2)
        self.first = nn.Linear(2, 2, bias=False)
        self.second = nn.Linear(2, 2, bias=False)
        with torch.no_grad():
            self.embed.weight.copy_(torch.arange(2200.0).reshape(1100, 2) % 7 + 1)
            self.embed.weight[1003, 1] = 0.0  # three-letter words
            self.first.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
            self.second.weight.copy_(torch.tensor([[1.0, -1.0], [1.0, -1.0]]))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = True, return_dict: bool = True) -> Any:
        from transformers.modeling_outputs import BaseModelOutput
        e = self.embed(input_ids)
        h = self.first(e)
        out = self.second(h)
        return BaseModelOutput(last_hidden_state=out, hidden_states=(e, h, out))


def test_undetermined_tokens_of_the_exact_limit_are_left_out_and_named(tmp_path: Any) -> None:
    """Sentences 0 and 2 hold a three-letter word, whose last state has no determined limit: it
    is left out of that layer's mean (the others' cosines are exactly known), named in the
    result, its JSON and its table; the other layers are whole."""
    sentences = ["a bb ccc", "dddd", "ee f ggg", "jj k"]
    result = representation_similarity(CancellingStates().eval(), WordTokenizer(), sentences,
                                       scale=math.inf)
    assert result.undetermined == ((), (), (0, 2))
    assert result.n_undetermined == (0, 0, 2) and not result.determined
    assert result.per_layer[:2] == pytest.approx((1.0, 1.0))
    # every determined token's last state at θ is its limit direction: cosine 1
    assert result.per_layer[2] == pytest.approx(1.0)
    data = json.loads(result.to_json(tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [layer["undetermined_sentences"] for layer in data["layers"]] == [[], [], [0, 2]]
    assert [layer["undetermined_tokens"] for layer in data["layers"]] == [0, 0, 2]
    assert SimilarityResult.from_dict(data).undetermined == result.undetermined
    assert "layer 2     1.0000 *" in result.table()
    assert "layer 2: 2 of 17 tokens (sentences 0, 2)\n" in result.table()
    # why: each such state is exactly zero at its degree (only lower orders could give it a
    # direction), so no precision above the first is tried; the reason names the decision, the
    # output and the precision
    assert sorted(result.reasons) == [0, 2] and sorted(data["undetermined_reasons"]) == ["0", "2"]
    assert "not proved nonzero at 128 bits" in data["undetermined_reasons"]["0"][0]
    assert result.table().splitlines()[-2].startswith("  sentence 0: a vector whose leading coefficients")
    assert SimilarityResult.from_dict(data).reasons == result.reasons
    nothing = SimilarityResult(("embeddings", "layer 1"), (1.0, math.nan), ("", ""), math.inf, 1,
                               {"": 3}, 0, 8, undetermined=((), (0,)), n_undetermined=(0, 3))
    written = nothing.to_json(tmp_path / "nothing.json").read_text(encoding="utf-8")
    assert json.loads(written)["layers"][1]["similarity"] is None
    assert "layer 1     undetermined *" in nothing.table()
    assert SimilarityResult.from_dict(nothing.to_dict()).n_undetermined == (0, 3)


class BiasedMap(nn.Module):
    """Embeddings e (degree 1 in c) and W·e + b: at c·θ it is c²·W·e + c·b, whose direction tends
    to W·e, so cos(h(x; c·θ), s-h(x; θ)) = cos(c·W·e + b, W·e) exactly; beside them logits exp(…)
    that have no limit (a measurement of the hidden states must not ask for it)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.embed = nn.Embedding(1100, 3, dtype=torch.float64)
        self.linear = nn.Linear(3, 3, dtype=torch.float64)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                output_hidden_states: bool, return_dict: bool) -> Any:
        e = self.embed(input_ids)
        h = self.linear(e)
        return {"hidden_states": (e, h), "logits": torch.exp(h)}


def _convergence_by_hand(model: BiasedMap, sentences: list[str], c: float) -> list[float]:
    """Mean over every real token of the cosine with the limit, per state, one sentence at a time."""
    weight, bias = model.linear.weight.detach(), model.linear.bias.detach()
    totals, count = [0.0, 0.0], 0
    for sentence in sentences:
        e = model.embed.weight.detach()[WordTokenizer()([sentence])["input_ids"][0]]
        limit = e @ weight.T
        for i, (ours, direction) in enumerate([(c * e, e), (c * limit + bias, limit)]):
            totals[i] += float(nn.functional.cosine_similarity(ours, direction, dim=-1).sum())
        count += len(e)
    return [t / count for t in totals]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_convergence_is_the_token_mean_of_cosines_with_the_limit(batch_size: int) -> None:
    from empirical.measure.convergence import limit_convergence

    model = BiasedMap().eval()
    scales = (1.0, 10.0, 100.0)
    result = limit_convergence(model, WordTokenizer(), SENTENCES, scales=scales, batch_size=batch_size)
    assert result.layers == ("embeddings", "layer 1") and result.scales == scales
    assert result.n_tokens == 5 + 3 + 7 + 4
    for c in scales:
        assert result.to_limit[c] == pytest.approx(_convergence_by_hand(model, SENTENCES, c), abs=1e-12)
    gaps = [1 - _convergence_by_hand(model, SENTENCES, c)[1] for c in scales]
    assert 0 < gaps[2] < gaps[1] < gaps[0]  # the bias's share shrinks like 1/c
    # the rate over c > 1: two points, so the slope through them
    assert result.rate(1) == pytest.approx(-math.log(gaps[2] / gaps[1]) / math.log(100 / 10), rel=1e-9)
    assert result.distributed["tokens_per_rank"] == [5 + 3 + 7 + 4]


def test_convergence_defaults(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from empirical.measure import convergence

    prepared: list[dict[str, Any]] = []
    real = convergence.prepare
    monkeypatch.setattr(convergence, "prepare", lambda *a, **k: prepared.append(k) or real(*a, **k))
    model = BiasedMap().eval()
    result = convergence.limit_convergence(model, WordTokenizer(), "a bb ccc")
    assert result.scales == (1.0, 10.0, 100.0, 1000.0, 10000.0) and result.n_tokens == 5
    assert result.to_limit[1e4] == pytest.approx(_convergence_by_hand(model, ["a bb ccc"], 1e4), abs=1e-12)
    assert (prepared[0]["batch_size"], prepared[0]["max_length"]) == (32, 512)
    assert capsys.readouterr().err == ""


def test_convergence_progress_bar_counts_batches(capsys: pytest.CaptureFixture[str]) -> None:
    from empirical.measure.convergence import limit_convergence

    limit_convergence(BiasedMap().eval(), WordTokenizer(), SENTENCES, scales=(2.0,), batch_size=2,
                      progress=True)
    err = capsys.readouterr().err
    assert "convergence to the limit: 100%" in err and "2/2" in err


@pytest.mark.parametrize(("scales", "message"), [
    ((1.0, math.inf), "scales are compared with the limit; pass finite values c ≥ 1"),
    ((0.5,), "expected the scale c"),
])
def test_convergence_refuses_infinite_and_small_scales(scales: tuple[float, ...], message: str) -> None:
    from empirical.measure.convergence import limit_convergence

    with pytest.raises(EmpiricalError) as err:
        limit_convergence(BiasedMap().eval(), WordTokenizer(), SENTENCES, scales=scales)
    assert str(err.value).startswith(message)


def test_each_rank_measures_only_its_share_of_the_convergence(rank_one_of_two: list[Any]) -> None:
    from empirical.measure.convergence import limit_convergence

    model = BiasedMap().eval()
    mine = limit_convergence(model, WordTokenizer(), SENTENCES, scales=(1.0, 2.0), batch_size=1)
    assert mine.n_tokens == 4 + 7  # rank 0 adds nothing here: rank 1's batches, "jj k" and the longest
    for c in (1.0, 2.0):
        assert mine.to_limit[c] == pytest.approx(
            _convergence_by_hand(model, [SENTENCES[3], SENTENCES[2]], c), abs=1e-12)


class TwoStacks(BiasedMap):
    """An encoder–decoder in miniature: the encoder's one state e, the decoder's d and W·d + b for
    the embeddings d of the decoder inputs (start token 0, then the sentence shifted right)."""

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(is_encoder_decoder=True, decoder_start_token_id=0)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                decoder_input_ids: torch.Tensor, decoder_attention_mask: torch.Tensor,
                output_hidden_states: bool, return_dict: bool) -> Any:
        d = self.embed(decoder_input_ids)
        return {"encoder_hidden_states": (self.embed(input_ids),),
                "decoder_hidden_states": (d, self.linear(d))}


def test_convergence_of_an_encoder_decoder_labels_both_stacks() -> None:
    from empirical.measure.convergence import limit_convergence

    model = TwoStacks().eval()
    result = limit_convergence(model, WordTokenizer(), SENTENCES[:2], scales=(1.0, 10.0))
    assert result.layers == ("encoder embeddings", "decoder embeddings", "decoder layer 1")
    assert result.n_tokens == 5 + 3  # the encoder's real tokens, the decoder having as many
    weight, bias = model.linear.weight.detach(), model.linear.bias.detach()
    for c in (1.0, 10.0):
        total = 0.0
        for sentence in SENTENCES[:2]:
            ids = WordTokenizer()([sentence])["input_ids"][0]
            limit = model.embed.weight.detach()[[0, *ids[:-1]]] @ weight.T
            total += float(nn.functional.cosine_similarity(c * limit + bias, limit, dim=-1).sum())
        assert result.to_limit[c] == pytest.approx((1.0, 1.0, total / 8), abs=1e-12)
