"""Positions the caller does not read: padding left undetermined sends no entry further."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import GemmaConfig, GemmaModel

from saturated.rules import Settings
from saturated.saturate import SaturatedModel, _padding

IDS = torch.tensor([[5, 7, 9, 11], [6, 8, 0, 0]])
MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])


@pytest.fixture(scope="module")
def gemma() -> GemmaModel:
    """A random-init Gemma: its padding row is zero, so a padded position is a zero vector (its
    norm is zero at one order: zero times a scale one order leaves undetermined) whose query ties
    every key it sees at two orders (four)."""
    torch.manual_seed(0)
    config = GemmaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, pad_token_id=0)
    return GemmaModel(config).eval()


def _limit(model: GemmaModel, read_padding: bool, levels: list[int]) -> tuple[torch.Tensor, ...]:
    module = sys.modules["saturated.saturate"]
    run = module.SaturatedModel._run

    def counted(self: SaturatedModel, args: tuple, kwargs: dict, settings: Settings, dtype: torch.dtype):
        levels.append(settings.orders)
        return run(self, args, kwargs, settings, dtype)

    limit = SaturatedModel(model, Settings(), {"hidden_states"}, "nan", read_padding=read_padding)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module.SaturatedModel, "_run", counted)
        out = limit(input_ids=IDS, attention_mask=MASK, output_hidden_states=True)
    return out.value.hidden_states


def test_unread_padding_stops_at_the_orders_the_real_tokens_need(gemma: GemmaModel) -> None:
    read_levels: list[int] = []
    unread_levels: list[int] = []
    read = _limit(gemma, True, read_levels)
    unread = _limit(gemma, False, unread_levels)
    assert max(read_levels) == 4 and max(unread_levels) == 1
    real = MASK.bool()
    for everything, tokens in zip(read, unread):
        assert not torch.isnan(tokens[real]).any()
        # one order in float32 decided the real tokens; reading padding took float64 for all
        torch.testing.assert_close(tokens[real], everything[real])
    assert torch.isnan(unread[-1][~real]).all()  # left as one order decided them


def test_padding_is_read_from_masks_of_the_output_positions_shape() -> None:
    encoder = torch.tensor([[1, 1, 0]])
    decoder = torch.tensor([[1, 0, 0]])
    found = _padding({"attention_mask": encoder, "decoder_attention_mask": decoder}, torch.Size([1, 3]))
    assert found is not None and found.tolist() == [[False, False, True]]  # padded in both
    longer = torch.ones(1, 5)
    only = _padding({"attention_mask": encoder, "decoder_attention_mask": longer}, torch.Size([1, 5]))
    assert only is not None and not only.any()
    assert _padding({"attention_mask": encoder}, torch.Size([1, 4])) is None
    assert _padding({"input_ids": encoder}, torch.Size([1, 3])) is None
