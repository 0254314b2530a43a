"""Entries recomputed apart are merged back along each output's own batch dimension, which the
exported graph names (dimension 1 of a time-major output, as XLNet's), never assumed to be 0."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
import transformers
from torch import nn

from empirical.models.corpus import load_corpus
from empirical.models.loading import family_config, load_tokenizer, minilm_path
from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model
from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import SaturatedModel
from tests.saturated.test_sat_undetermined import Cancelling


class TimeMajor(nn.Module):
    """:class:`Cancelling` on every token of a [batch, length, 2] input, its outputs returned
    [length, batch, ·]: an entry with a token x₁ = 0 is undetermined there and recomputed."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelling = Cancelling()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first, hidden = self.cancelling(x)
        return first.transpose(0, 1), hidden.transpose(0, 1)


class Pooled(TimeMajor):
    """A second output summed over the batch: no dimension of it indexes the entries."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        first, hidden = super().forward(x)
        return first, hidden.sum(1)


# Three entries of three tokens (the length equals the batch, so sizes alone cannot tell the
# batch dimension); only entry 1 (its token 0) is undetermined.
X = torch.tensor([[[3.0, 1.0], [1.0, 2.0], [2.0, 5.0]],
                  [[3.0, 0.0], [2.0, 1.0], [1.0, 1.0]],
                  [[2.0, 5.0], [4.0, 3.0], [1.0, 3.0]]])


def per_shape(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic: bool = False
              ) -> torch.export.ExportedProgram:
    """:func:`export_model` as for a model that cannot be exported with dynamic shapes."""
    if dynamic:
        raise HomogeneityError("no dynamic shapes here")
    return export_model(model, args, kwargs)


@pytest.fixture(params=["dynamic", "per-shape"])
def export(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Graphs exported with a dynamic batch (the batch dimension is a symbol), or for each input
    shape (its size, 3, is the length's too)."""
    if request.param == "per-shape":
        module = importlib.import_module("saturated.saturate")
        monkeypatch.setattr(module, "export_model", per_shape)
    return str(request.param)


def test_a_time_major_output_merges_each_entry_along_its_batch_dimension(export: str) -> None:
    limit = SaturatedModel(TimeMajor(), Settings(), undetermined="nan")
    out = limit(X)
    assert limit.exports_dynamic == (export == "dynamic")
    # Per shape, the batch's size is its outputs' length's too: no dimension says where the NaN
    # is, so the whole batch is recomputed rather than entries guessed.
    assert out.refined == ((1,) if export == "dynamic" else (0, 1, 2)) and out.degrees == (2.0, 1.0)
    for entry in range(len(X)):  # each entry computed alone, independently of the batch
        alone = SaturatedModel(TimeMajor(), Settings(), undetermined="nan")(X[entry:entry + 1])
        for merged, single in zip(out.value, alone.value):
            torch.testing.assert_close(merged[:, entry], single[:, 0], equal_nan=True, rtol=0, atol=0)
    first = out.value[0][..., 0]
    assert torch.isnan(first[0, 1]) and int(torch.isnan(first).sum()) == 1  # entry 1, token 0 only
    assert first[:, 0].tolist() == [-1.0, -2.0, -5.0]  # out = -x₁ by hand


def test_an_output_without_a_batch_dimension_is_not_merged() -> None:
    with pytest.raises(SaturationError, match=r"output 1 has no batch dimension to merge recomputed "
                                              r"entries along \(shape \(3, 2\) for 3 entries"):
        SaturatedModel(Pooled(), Settings(), undetermined="nan")(X)


def test_xlnet_memories_merge_along_their_batch_dimension() -> None:
    """XLNet returns its memories [length, batch, hidden]: the head atlas of eight corpus sentences
    on a narrowed two-layer XLNet recomputes some entries, which crashed their merge (or, with
    the length equal to the batch, would have written them into the wrong entries)."""
    config = family_config("xlnet", num_hidden_layers=2, d_model=64, n_head=4, d_inner=128)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    enc = load_tokenizer(minilm_path())(list(load_corpus(n=8)), padding=True, return_tensors="pt")
    options = {"output_attentions": True, "return_dict": True}
    limit = SaturatedModel(model, Settings(ties="nan"))
    out = limit(enc["input_ids"], attention_mask=enc["attention_mask"], **options)
    assert out.refined and out.value.mems[0].shape[1] == 8  # entries were recomputed and merged
    entry = out.refined[0]
    alone = limit(enc["input_ids"][entry:entry + 1], attention_mask=enc["attention_mask"][entry:entry + 1],
                  **options)
    for merged, single in zip(out.value.mems, alone.value.mems):
        torch.testing.assert_close(merged[:, entry], single[:, 0], equal_nan=True)
    for merged, single in zip(out.value.attentions, alone.value.attentions):
        torch.testing.assert_close(merged[entry], single[0], equal_nan=True)
