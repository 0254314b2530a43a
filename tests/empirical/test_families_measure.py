"""Similarity, the head atlas and a claim on every built-in family.

One-layer random-init models, narrow (hidden size 32), with the vocabulary of the packaged MiniLM
tokenizer (30,522 ids) so that one tokenizer serves every family; the depth-independent choices
(norms, activations, rotary embeddings, grouped-query attention, routers) are the published ones.
Each model is built once for the module and measured on two sentences of different lengths (a
padded batch). The expected values come from hand derivations or from independent computations:

- similarity at c = 1 is 1 everywhere; at c = 1000 it is the mean over real tokens of the cosines
  of the model's own hidden states at θ and at 1000·θ, computed here directly; the embeddings
  are 1-homogeneous (exactly, or up to LayerNorm's eps), so their cosine is 1 at any c;
- at c = ∞, the embeddings again give 1, and every other layer agrees with the cosine against the
  model run at 10⁴·θ in float64, where every random-init attention row has saturated;
- the atlas's heads are classified from the attention weights at 10⁴·θ in float64 (a position is
  attended when its weight exceeds 10⁻³) with the allowed positions counted here (causal models:
  the real keys up to the query);
- the output's degree: 1, asymptotic (the final norm's eps), for every family but Gemma, whose
  (1 + γ) norm scale is 1 at initialization (γ = 0) and does not grow with c: degree 0 there.
  The same claim made exact fails.

The mixture-of-experts families (``mixtral``, ``qwen2-moe``) have no exact limit yet: ``saturate``
stops at the router's ``aten.topk``. Their c = ∞ cases are written against the limit and marked
as expected to fail with that error (strict), so that they test the limit once its rule exists.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import transformers
from torch import nn

from empirical import head_atlas, representation_similarity
from empirical.claims import assert_homogeneous
from empirical.measure.heads import Thresholds
from empirical.models.loading import family_config, load_tokenizer, minilm_path

NARROW = {"hidden_size": 32, "num_attention_heads": 4, "vocab_size": 30522}
"""Shared by every family: widths in units of the configuration's own names."""

FAMILIES: dict[str, dict[str, Any]] = {
    "bert": {"intermediate_size": 64, "num_hidden_layers": 1},
    "gpt2": {"n_layer": 1},
    "llama": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 2,
              "head_dim": 8},
    "mistral": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 2,
                "head_dim": 8},
    "qwen2": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 2},
    "gemma": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 1,
              "head_dim": 8, "pad_token_id": None},
    "phi3": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 4,
             "pad_token_id": None},
    "gpt-neox": {"intermediate_size": 64, "num_hidden_layers": 1},
    "mixtral": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 2,
                "head_dim": 8},
    "qwen2-moe": {"intermediate_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 4,
                  "num_experts": 4, "moe_intermediate_size": 16,
                  "shared_expert_intermediate_size": 16},
}

MOE = ("mixtral", "qwen2-moe")
SENTENCES = ["The cat sat on the mat.", "A dog ran far away from home today."]
SATURATED = 1e4
"""A scale at which every attention row of these random-init models has saturated in float64."""


PAPER = ("bert", "gpt2")
"""Their similarity, at c = 1000 and in the limit, is tested with the paper's other families
(``test_similarity.py``, ``tests/saturated/test_sat_models.py``); their atlas and claims here."""


def cases(*, paper: bool = True) -> list[str]:
    """The families to test (with ``paper``, BERT and GPT-2 too)."""
    return [f for f in FAMILIES if paper or f not in PAPER]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer(minilm_path())


@pytest.fixture(scope="module")
def models() -> dict[str, nn.Module]:
    """The family's one-layer narrow model, built on first use and kept for the module."""
    return _Built()


class _Built(dict[str, nn.Module]):
    def __missing__(self, family: str) -> nn.Module:
        config = family_config(family, **NARROW, **FAMILIES[family])
        torch.manual_seed(0)
        extra = {"experts_implementation": "batched_mm"} if family in MOE else {}
        model = transformers.AutoModel.from_config(config, attn_implementation="eager", **extra)
        self[family] = model.eval()
        return self[family]


def batch(tokenizer: Any) -> dict[str, torch.Tensor]:
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}


def run_at(model: nn.Module, scale: float, dtype: torch.dtype, inputs: dict[str, torch.Tensor],
           **options: Any) -> Any:
    """The model at scale·θ in ``dtype``, through ``functional_call`` (the model is left as it is)."""
    state = {name: p.detach().to(dtype) * scale for name, p in model.named_parameters()}
    state |= {name: b.to(dtype) if b.is_floating_point() else b for name, b in model.named_buffers()}
    with torch.no_grad():
        return torch.func.functional_call(model, state, (), {**inputs, **options})


def mean_cosines(ours: tuple[torch.Tensor, ...], theirs: tuple[torch.Tensor, ...],
                 mask: torch.Tensor) -> list[float]:
    """Per hidden state, the mean over real tokens of the token cosines."""
    real = mask.bool()
    return [float(torch.nn.functional.cosine_similarity(a[real].double(), b[real].double(), dim=-1).mean())
            for a, b in zip(ours, theirs)]


@pytest.mark.parametrize("family", cases(paper=False))
def test_similarity_at_one_and_at_a_thousand(family: str, models: dict[str, nn.Module],
                                             tokenizer: Any) -> None:
    model = models[family]
    assert representation_similarity(model, tokenizer, SENTENCES, scale=1.0).per_layer == \
        pytest.approx([1.0, 1.0], abs=1e-6)
    result = representation_similarity(model, tokenizer, SENTENCES, scale=1000.0)
    inputs = batch(tokenizer)
    plain = run_at(model, 1.0, torch.float32, inputs, output_hidden_states=True)
    grown = run_at(model, 1000.0, torch.float32, inputs, output_hidden_states=True)
    direct = mean_cosines(plain.hidden_states, grown.hidden_states, inputs["attention_mask"])
    assert result.layers == ("embeddings", "layer 1")
    assert result.per_layer == pytest.approx(direct, abs=1e-5)
    assert result.per_layer[0] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("family", cases(paper=False))
def test_similarity_at_the_limit(family: str, models: dict[str, nn.Module], tokenizer: Any) -> None:
    model = models[family]
    result = representation_similarity(model, tokenizer, SENTENCES, scale=math.inf)
    assert result.determined
    inputs = batch(tokenizer)
    plain = run_at(model, 1.0, torch.float64, inputs, output_hidden_states=True)
    grown = run_at(model, SATURATED, torch.float64, inputs, output_hidden_states=True)
    direct = mean_cosines(plain.hidden_states, grown.hidden_states, inputs["attention_mask"])
    assert result.per_layer[0] == pytest.approx(1.0, abs=1e-6)
    assert result.per_layer == pytest.approx(direct, abs=1e-3)


def independent_classes(model: nn.Module, inputs: dict[str, torch.Tensor], causal: bool
                        ) -> tuple[list[str], list[float]]:
    """Per head (layer-major): the class and the mean number of positions attended, read from the
    attention weights at 10⁴·θ in float64."""
    attentions = run_at(model, SATURATED, torch.float64, inputs, output_attentions=True).attentions
    real = inputs["attention_mask"].bool()
    allowed = real.cumsum(-1) if causal else real.sum(-1, keepdim=True).expand_as(real)
    counted = real & (allowed >= 2)  # a query with one allowed position says nothing
    kinds, positions = [], []
    for weights in attentions:
        attended = (weights > 1e-3).sum(-1).double()  # (batch, heads, queries)
        for head in range(weights.shape[1]):
            n = attended[:, head][counted]
            fraction = (n / allowed[counted]).mean()
            kinds.append(Thresholds().classify(float(n.mean()), float(fraction)))
            positions.append(float(n.mean()))
    return kinds, positions


@pytest.mark.parametrize("family", cases())
def test_head_atlas_agrees_with_the_saturated_attention(family: str, models: dict[str, nn.Module],
                                                        tokenizer: Any) -> None:
    model = models[family]
    atlas = head_atlas(model, tokenizer, SENTENCES, paper=False)
    causal = family != "bert"
    assert atlas.record["causal"] is causal
    kinds, positions = independent_classes(model, batch(tokenizer), causal)
    assert [h.kind for h in atlas.heads] == kinds
    assert [h.positions for h in atlas.heads] == pytest.approx(positions, abs=1e-9)
    assert all(h.undetermined == 0 for h in atlas.heads)


@pytest.mark.parametrize("family", cases())
def test_the_output_degree_claim_holds_and_exactness_fails(family: str, models: dict[str, nn.Module],
                                                           tokenizer: Any) -> None:
    model = models[family]
    inputs = batch(tokenizer)
    degree = 0 if family == "gemma" else 1
    assert_homogeneous(model, inputs, degree, "asymptotic", output="last_hidden_state")
    with pytest.raises(AssertionError, match=rf"claimed degree {degree} \(exact"):
        assert_homogeneous(model, inputs, degree, "exact", output="last_hidden_state")
