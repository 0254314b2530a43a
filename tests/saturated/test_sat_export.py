"""One export per model: dynamic batch and sequence dimensions, refreshed when the model changes."""

from __future__ import annotations

import torch
from torch import nn

from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, saturate


def test_one_export_serves_every_batch_size_and_length() -> None:
    model, tokenizer = load_model("minilm", num_layers=1)
    limit = SaturatedModel(model, Settings())
    sentences = list(load_corpus(n=4))
    kw = {"output_hidden_states": True, "return_dict": True}
    programs, outputs = [], []
    for chosen in (sentences[:3], sentences[3:], sentences[:2]):  # batch 3, 1, 2; lengths differ
        enc = tokenizer(chosen, padding=True, return_tensors="pt")
        batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], **kw}
        programs.append(limit.program(**batch))
        outputs.append((enc["attention_mask"], limit(**batch)))
    assert all(program is programs[0] for program in programs)
    # Batched and padded results agree with each sentence alone.
    mask, batched = outputs[0]
    for entry in range(3):
        n = int(mask[entry].sum())
        enc = tokenizer(sentences[entry:entry + 1], return_tensors="pt")
        alone = limit(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], **kw)
        for a, b in zip(batched.value.hidden_states, alone.value.hidden_states):
            assert (a[entry, :n] - b[0]).abs().max() <= 1e-5 * b[0].abs().max()


class Scaled(nn.Module):
    """softmax(x Wₖ xᵀ) x Wᵥ: one head, values through ``value``."""

    def __init__(self) -> None:
        super().__init__()
        self.key = nn.Linear(2, 2, bias=False)
        self.value = nn.Linear(2, 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ self.key(x).mT, dim=-1) @ self.value(x)


def test_changed_model_is_exported_again_and_read_afresh() -> None:
    torch.manual_seed(0)
    net = Scaled().double()
    x = torch.randn(2, 3, 2, dtype=torch.float64)
    limit = saturate(net, x)
    first = limit.program(x)
    with torch.no_grad():  # in place: same graph, new values
        net.value.weight.mul_(-2.0)
    assert limit.program(x) is first
    assert torch.equal(limit(x).value, saturate(net, x)(x).value)
    net.value = nn.Linear(2, 2, bias=True).double()  # a new parameter: a new graph
    assert limit.program(x) is not first
    fresh = saturate(net, x)(x)
    changed = limit(x)
    assert changed.degrees == fresh.degrees and torch.equal(changed.value, fresh.value)


def test_every_saturated_model_of_one_model_shares_its_export() -> None:
    model, tokenizer = load_model("minilm", num_layers=1)
    enc = tokenizer(list(load_corpus(n=2)), padding=True, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_hidden_states": True, "return_dict": True}
    first = SaturatedModel(model, Settings()).program(**batch)
    assert SaturatedModel(model, Settings(ties="nan"), outputs={"hidden_states"}).program(**batch) is first
    other, _ = load_model("minilm", num_layers=1)  # an equal model is another model
    assert SaturatedModel(other, Settings()).program(**batch) is not first
