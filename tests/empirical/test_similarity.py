"""representation_similarity on real models: agreement with the paper's procedure, safety, errors."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import saturated.export_cache as export_cache
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.measure.reference import one_at_a_time_similarity
from empirical.measure.similarity import SimilarityResult, representation_similarity
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model, load_tokenizer, minilm_path

SENTENCES = list(load_corpus(n=12))


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _bit_identical(model: torch.nn.Module, snapshot: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(p, snapshot[name]) for name, p in model.named_parameters())


def test_minilm_matches_the_papers_one_at_a_time_procedure(minilm):
    model, tokenizer = minilm
    batched = representation_similarity(model, tokenizer, SENTENCES, scale=1000.0, batch_size=5)
    reference = one_at_a_time_similarity(model, tokenizer, SENTENCES, scale=1000.0)
    assert batched.layers == ("embeddings", *(f"layer {i}" for i in range(1, 7)))
    assert batched.per_layer == pytest.approx(reference, abs=1e-4)
    assert batched.n_sentences == 12 and batched.n_truncated == 0
    assert batched.n_tokens[""] == sum(len(tokenizer(s)["input_ids"]) for s in SENTENCES)


@pytest.mark.parametrize("family", ["bert", "roberta", "gpt2", "xlnet"])
def test_single_stack_families_match_the_reference(small_models, family):
    model, tokenizer = small_models[family]
    batched = representation_similarity(model, tokenizer, SENTENCES, batch_size=4)
    assert batched.per_layer == pytest.approx(
        one_at_a_time_similarity(model, tokenizer, SENTENCES), abs=1e-4)


def test_t5_reports_encoder_and_decoder_and_batching_does_not_change_it(small_models):
    model, tokenizer = small_models["t5"]
    batched = representation_similarity(model, tokenizer, SENTENCES, batch_size=5)
    assert batched.layers == ("encoder embeddings", "encoder layer 1", "encoder layer 2",
                              "decoder embeddings", "decoder layer 1", "decoder layer 2")
    assert batched.stacks == ("encoder",) * 3 + ("decoder",) * 3
    singles = [representation_similarity(model, tokenizer, [s]) for s in SENTENCES]
    for i, stack in enumerate(batched.stacks):
        weights = [r.n_tokens[stack] for r in singles]
        expected = sum(w * r.per_layer[i] for w, r in zip(weights, singles)) / sum(weights)
        assert batched.per_layer[i] == pytest.approx(expected, abs=1e-4)
    assert batched.n_tokens["encoder"] == batched.n_tokens["decoder"] == sum(weights)


def test_scale_one_gives_cosine_one_everywhere(small_models):
    model, tokenizer = small_models["bert"]
    result = representation_similarity(model, tokenizer, SENTENCES[:3], scale=1.0)
    assert result.per_layer == pytest.approx([1.0] * 3, abs=1e-6)


def test_embedding_output_is_one_homogeneous(minilm):
    # LayerNorm(c·e)·(c·γ) + c·β = c·(LayerNorm(e)·γ + β) up to eps: the embedding layer's cosine
    # is 1 at any c, while attention layers (softmax of degree-4 scores) move away from it.
    model, tokenizer = minilm
    result = representation_similarity(model, tokenizer, SENTENCES[:4], scale=50.0)
    assert result.per_layer[0] == pytest.approx(1.0, abs=1e-6)
    assert min(result.per_layer[1:]) < 0.9


def test_parameters_are_bit_identical_after_success_and_after_an_exception(minilm):
    model, tokenizer = minilm
    before = _snapshot(model)
    representation_similarity(model, tokenizer, SENTENCES[:3])
    assert _bit_identical(model, before)

    def explode_when_scaled(module, _inputs):
        # Inside functional_call the module sees the scaled weights (pretrained ones are < 100).
        if module.attention.self.query.weight.abs().max() > 100:
            raise RuntimeError("failure in the scaled pass")

    handle = model.encoder.layer[3].register_forward_pre_hook(explode_when_scaled)
    try:
        with pytest.raises(RuntimeError, match="scaled pass"):
            representation_similarity(model, tokenizer, SENTENCES[:3])
    finally:
        handle.remove()
    assert _bit_identical(model, before)


@pytest.mark.parametrize("scale", [0.5, 0.0, -3.0, math.nan, "big"])
def test_bad_scales_say_what_is_expected(small_models, scale):
    model, tokenizer = small_models["bert"]
    with pytest.raises(EmpiricalError, match=r"expected the scale c .* to be a (real number|number ≥ 1)"):
        representation_similarity(model, tokenizer, SENTENCES[:1], scale=scale)


def test_infinite_scale_is_the_limit_of_growing_scales(tmp_path):
    model, tokenizer = load_model("minilm", num_layers=2, dtype=torch.float64)
    limit = representation_similarity(model, tokenizer, SENTENCES[:3], scale=float("inf"))
    far = representation_similarity(model, tokenizer, SENTENCES[:3], scale=1e7)
    near = representation_similarity(model, tokenizer, SENTENCES[:3], scale=10.0)
    assert limit.per_layer == pytest.approx(far.per_layer, abs=1e-4)
    assert max(abs(a - b) for a, b in zip(limit.per_layer, near.per_layer)) > 1e-3  # c = 10 is not yet there
    data = json.loads(limit.to_json(tmp_path / "limit.json").read_text())
    assert data["scale"] is None and data["exact_limit"] is True
    assert SimilarityResult.from_dict(data).scale == math.inf
    assert "c→∞ limit" in limit.table()


def test_a_float16_model_computes_in_float32_where_float16_would_overflow():
    model, tokenizer = load_model("minilm", num_layers=2, dtype=torch.float16)
    result = representation_similarity(model, tokenizer, SENTENCES[:2], scale=1000.0)
    assert all(math.isfinite(value) for value in result.per_layer)
    assert result.record["dtype"] == "torch.float16" and result.record["compute_dtype"] == "torch.float32"


def test_long_sentences_are_truncated_and_counted(small_models):
    model, tokenizer = small_models["bert"]
    with pytest.warns(UserWarning, match=r"2 of 3 sentences .* truncated to 8"):
        result = representation_similarity(
            model, tokenizer, [SENTENCES[0], SENTENCES[1], "Short."], max_length=8)
    assert result.n_truncated == 2 and result.max_length == 8
    assert result.n_tokens[""] == 8 + 8 + len(tokenizer("Short.")["input_ids"])


def test_position_limit_caps_the_requested_length(small_models):
    model, tokenizer = small_models["bert"]
    result = representation_similarity(model, tokenizer, SENTENCES[:1], max_length=10_000)
    assert result.max_length == 512


def test_bad_inputs(small_models):
    model, tokenizer = small_models["bert"]
    with pytest.raises(EmpiricalError, match="at least one sentence"):
        representation_similarity(model, tokenizer, [])
    with pytest.raises(EmpiricalError, match="batch_size"):
        representation_similarity(model, tokenizer, SENTENCES[:1], batch_size=0)
    model.train()
    try:
        with pytest.raises(EmpiricalError, match="eval"):
            representation_similarity(model, tokenizer, SENTENCES[:1])
    finally:
        model.eval()


def test_model_without_hidden_states_is_a_clear_error(small_models):
    _, tokenizer = small_models["bert"]

    class Plain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(30522, 4)

        def forward(self, input_ids, attention_mask, **_ignored):
            return self.embed(input_ids)

    with pytest.raises(EmpiricalError, match=r"'hidden_states'.*Tensor without them"):
        representation_similarity(Plain().eval(), tokenizer, SENTENCES[:1])


def test_json_records_what_reproduces_the_number(small_models, tmp_path):
    model, tokenizer = small_models["gpt2"]
    result = representation_similarity(model, tokenizer, load_corpus(n=3), scale=10.0)
    data = json.loads(result.to_json(tmp_path / "r.json").read_text())
    assert data == json.loads((tmp_path / "r.json").read_text())
    assert data["schema"] == "normsat.similarity/1" and data["scale"] == 10.0
    assert [layer["name"] for layer in data["layers"]] == list(result.layers)
    assert [layer["similarity"] for layer in data["layers"]] == list(result.per_layer)
    assert data["corpus"]["source"] == "python-stdlib-docstrings" and len(data["corpus"]["sha256"]) == 64
    assert data["model"]["config"]["model_type"] == "gpt2"
    assert data["dtype"] == "torch.float32" and data["device"] == "cpu"
    assert {"python", "torch", "transformers", "normsat"} <= set(data["versions"])
    assert SimilarityResult.from_dict(data).to_dict() == data
    with pytest.raises(EmpiricalError, match=r"normsat\.similarity/1"):
        SimilarityResult.from_dict({**data, "schema": "other"})


class _Toy(torch.nn.Module):
    """A single-stack toy with hidden states (e, z + z²) for e = E[ids], z = e Wᵀ: at c·θ they are
    (c·e, c²·z + c⁴·z²), so the second one turns with c, slowly enough at c = 1000 that c = 1001
    tells from it in float64. No ``config``: plain modules are single-stack."""

    def __init__(self, vocab: int, *, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Parameter(torch.randn(vocab, 3, generator=gen, dtype=torch.float64))
        self.weight = torch.nn.Parameter(torch.randn(3, 3, generator=gen, dtype=torch.float64))

    def forward(self, input_ids, attention_mask, output_hidden_states=False):  # a mask is required
        assert bool(attention_mask.all())  # one sentence at a time: no padding
        e = self.embed[input_ids]
        z = e @ self.weight.T
        hidden = (e, z + z * z)
        return SimpleNamespace(last_hidden_state=hidden[-1],
                               hidden_states=hidden if output_hidden_states else None)


def _toy_cosines(model: _Toy, ids: list[list[int]], scale: float) -> list[float]:
    """Mean cosine per hidden state over every token, from the toy's formula in numpy."""
    embed, weight = model.embed.detach().numpy(), model.weight.detach().numpy()

    def states(c: float, token: int) -> list[np.ndarray]:
        e = c * embed[token]
        z = e @ (c * weight).T
        return [e, z + z * z]

    sums, count = np.zeros(2), 0
    for sentence in ids:
        for token in sentence:
            for layer, (a, b) in enumerate(zip(states(1.0, token), states(scale, token))):
                sums[layer] += a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
            count += 1
    return list(sums / count)


@pytest.fixture(scope="module")
def toy():
    tokenizer = load_tokenizer(minilm_path())
    return _Toy(tokenizer.vocab_size), tokenizer


TOY_SENTENCES = ["Norms grow.", "Attention saturates as the norm of its weights grows without bound.", "Hi"]


@pytest.mark.parametrize("scale", [None, 3.0, 1000.0])
def test_one_at_a_time_similarity_is_the_mean_cosine_over_every_token(toy, scale):
    model, tokenizer = toy
    ids = [tokenizer(s)["input_ids"] for s in TOY_SENTENCES]
    assert len({len(i) for i in ids}) == 3  # sentences of different lengths weigh by their tokens
    got = (one_at_a_time_similarity(model, tokenizer, TOY_SENTENCES) if scale is None
           else one_at_a_time_similarity(model, tokenizer, TOY_SENTENCES, scale=scale))
    expected = _toy_cosines(model, ids, 1000.0 if scale is None else scale)  # c = 1000 by default
    assert got == pytest.approx(expected, rel=1e-12, abs=0)
    assert expected[1] < 1 - 1e-6  # the second hidden state does move with c


@pytest.mark.parametrize("max_length, expected_tokens", [(8, 8), (None, 512)])  # 512: the default
def test_one_at_a_time_similarity_truncates_each_sentence(toy, max_length, expected_tokens):
    model, tokenizer = toy
    sentences = [" ".join(f"word{i}" for i in range(400)), "Short."]
    ids = [tokenizer(s, truncation=True, max_length=expected_tokens)["input_ids"] for s in sentences]
    assert len(ids[0]) == expected_tokens < len(tokenizer(sentences[0])["input_ids"])
    kwargs = {} if max_length is None else {"max_length": max_length}
    got = one_at_a_time_similarity(model, tokenizer, sentences, scale=10.0, **kwargs)
    assert got == pytest.approx(_toy_cosines(model, ids, 10.0), rel=1e-12, abs=0)


def test_one_at_a_time_similarity_never_scales_the_callers_model(toy):
    model, tokenizer = toy
    before = _snapshot(model)
    largest = float(model.embed.detach().abs().max())
    seen = []  # the caller's largest embedding entry at every forward pass, on whichever copy

    def record(_module, _inputs):
        seen.append(float(model.embed.detach().abs().max()))

    handle = model.register_forward_pre_hook(record)
    try:
        one_at_a_time_similarity(model, tokenizer, TOY_SENTENCES, scale=10.0)
    finally:
        handle.remove()
    assert seen == [largest] * 2 * len(TOY_SENTENCES) and _bit_identical(model, before)


def test_one_at_a_time_similarity_errors_say_what_is_expected(toy):
    model, tokenizer = toy
    with pytest.raises(EmpiricalError) as err:
        one_at_a_time_similarity(model, tokenizer, [])
    assert str(err.value) == "expected at least one sentence, got none"
    model.config = SimpleNamespace(is_encoder_decoder=True)
    try:
        with pytest.raises(EmpiricalError) as err:
            one_at_a_time_similarity(model, tokenizer, TOY_SENTENCES[:1])
        assert str(err.value) == "the one-at-a-time reference handles single-stack models only"
    finally:
        del model.config


def test_a_second_similarity_at_the_limit_reads_its_graph_instead_of_exporting(tmp_path, monkeypatch):
    monkeypatch.setenv("NORMSAT_CACHE_DIR", str(tmp_path / "exports"))
    made = []
    export = export_cache.export_model

    def counted(*args, dynamic=False):
        made.append(dynamic)
        return export(*args, dynamic=dynamic)

    monkeypatch.setattr(export_cache, "export_model", counted)
    runs = []
    for run in range(2):  # each loads the model afresh, as a new process does
        path = tmp_path / f"limit{run}.json"
        assert main(["similarity", "--model", "minilm", "--num-layers", "2", "--sentences", "5",
                     "--scale", "inf", "--quiet", "--json", str(path)]) == 0
        runs.append(json.loads(path.read_text())["runs"][0]["layers"])
        assert made == [False]  # exported by the first run only, for its one batch's shape
    assert runs[0] == runs[1]
