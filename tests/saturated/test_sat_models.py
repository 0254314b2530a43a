"""The exact limit of real transformers: pretrained MiniLM and random-init models of each family."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from empirical.cli import main
from empirical.measure.similarity import representation_similarity
from empirical.models.loading import load_model
from saturated.errors import SaturationError
from saturated.saturate import saturate

SENTENCES = ["The cat sat on the mat and the dog sat too.", "Hi there!"]


@pytest.fixture(scope="module")
def minilm64() -> tuple[nn.Module, Any]:
    """Pretrained MiniLM cut to two layers, in float64 (so c up to 10⁵ runs without overflow)."""
    return load_model("minilm", num_layers=2, dtype=torch.float64)


def inputs(tokenizer: Any, sentences: list[str], model: nn.Module) -> dict[str, Any]:
    enc = tokenizer(sentences, padding=True, return_tensors="pt")
    kw = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
          "output_hidden_states": True, "return_dict": True}
    if model.config.is_encoder_decoder:
        kw |= {"decoder_input_ids": enc["input_ids"], "decoder_attention_mask": enc["attention_mask"]}
    return kw


def layer_cosines(model: nn.Module, kw: dict[str, Any], limit: Any, c: float, key: str) -> list[float]:
    scaled = {name: c * p for name, p in model.named_parameters()}
    with torch.no_grad():
        big = torch.func.functional_call(model, scaled, args=(), kwargs=kw)
    mask = kw["attention_mask"].bool()
    return [float(torch.nn.functional.cosine_similarity(a[mask], b[mask], dim=-1).min())
            for a, b in zip(getattr(big, key), getattr(limit, key))]


def test_minilm_layers_converge_to_the_limit(minilm64: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm64
    kw = inputs(tokenizer, SENTENCES, model)
    out = saturate(model, **kw)(**kw)
    assert out.degrees.hidden_states == (1.0, 1.0, 1.0)
    worst = [min(layer_cosines(model, kw, out.value, c, "hidden_states")) for c in (10, 1e3, 1e5)]
    assert worst[0] < 0.9 and worst[2] > 1 - 1e-9  # far at c = 10, equal to rounding at c = 10⁵


def test_batched_limit_equals_one_sentence_at_a_time(minilm64: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm64
    batch = inputs(tokenizer, SENTENCES, model)
    together = saturate(model, **batch)(**batch).value.hidden_states
    for row, sentence in enumerate(SENTENCES):
        alone_kw = inputs(tokenizer, [sentence], model)
        alone = saturate(model, **alone_kw)(**alone_kw).value.hidden_states
        n = int(alone_kw["attention_mask"].sum())
        for a, b in zip(together, alone):
            assert torch.allclose(a[row, :n], b[0], atol=1e-9)


def test_empty_attention_mask_is_rejected(minilm64: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm64
    kw = inputs(tokenizer, SENTENCES, model)
    kw["attention_mask"] = torch.zeros_like(kw["attention_mask"])
    with pytest.raises(SaturationError, match="attention_mask masks every position"):
        saturate(model, **kw)


@pytest.mark.parametrize("family", ["bert", "roberta", "gpt2", "xlnet", "t5"])
def test_families_converge_to_the_limit(family: str) -> None:
    model, tokenizer = load_model(family, random_init=True, num_layers=1, dtype=torch.float64)
    kw = inputs(tokenizer, SENTENCES[:1], model)
    out = saturate(model, **kw)(**kw)
    key = "encoder_hidden_states" if model.config.is_encoder_decoder else "hidden_states"
    assert min(layer_cosines(model, kw, out.value, 1e5, key)) > 1 - 1e-6


def test_similarity_at_infinity_is_the_limit_of_large_c(minilm64: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm64
    exact = representation_similarity(model, tokenizer, SENTENCES, scale=float("inf"))
    large = representation_similarity(model, tokenizer, SENTENCES, scale=1e5)
    assert exact.scale == float("inf")
    assert all(abs(a - b) < 1e-6 for a, b in zip(exact.per_layer, large.per_layer))


def test_cli_accepts_scale_inf(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["similarity", "--scale", "inf", "--num-layers", "1", "--sentences", "2", "--quiet"])
    assert code == 0
    assert "cos(θ, c→∞ limit)" in capsys.readouterr().out
