"""Comparing a saturated reference network with an ordinary one, layer by layer."""

from __future__ import annotations

import pytest
import torch

from empirical.models.loading import load_model
from saturated.compare import compare_layers
from saturated.errors import SaturationError
from saturated.modules import positional, previous_token_head
from saturated.saturate import saturate


def test_pretrained_minilm_against_its_saturated_version() -> None:
    model, tokenizer = load_model("minilm", num_layers=2, dtype=torch.float64)
    batch = dict(tokenizer(["Norms grow during training.", "Hi"], padding=True, return_tensors="pt"))
    limit = saturate(model, **batch, output_hidden_states=True)(**batch, output_hidden_states=True)
    scaled = {k: 1e5 * p for k, p in model.named_parameters()}
    with torch.no_grad():
        near = torch.func.functional_call(model, scaled, args=(),
                                          kwargs={**batch, "output_hidden_states": True})
        plain = model(**batch, output_hidden_states=True)
    mask = batch["attention_mask"].bool()
    far = compare_layers(limit.value.hidden_states, plain.hidden_states, mask)
    close = compare_layers(limit.value.hidden_states, near.hidden_states, mask,
                           logits=(limit.value.last_hidden_state, near.last_hidden_state))
    assert far.positions == int(mask.sum()) and min(far.cosines[1:]) < 0.9
    assert min(close.cosines) > 1 - 1e-9 and close.argmax_agreement == 1.0


def test_hard_reference_head_against_softmax_heads_of_growing_scale() -> None:
    head = previous_token_head()
    x = torch.tensor([[float(v) for v in row] for row in positional("abbaab")], dtype=torch.float64)
    cosines = []
    for c in (0.1, 1.0, 10.0):
        soft = head.softmax_at(x, c)
        cosines.append(compare_layers([head(x)], [soft], logits=(head(x), soft)).cosines[0])
    assert cosines[0] < cosines[1] < cosines[2] and cosines[2] > 1 - 1e-6


def test_mismatched_layers_are_rejected() -> None:
    with pytest.raises(SaturationError, match="as many layers"):
        compare_layers([torch.ones(2, 3)], [])
    with pytest.raises(SaturationError, match="no position"):
        compare_layers([torch.ones(2, 3)], [torch.ones(2, 3)], mask=torch.zeros(2, dtype=torch.bool))
