"""Computing only the outputs a caller reads, and float64 runs that never copy an embedding table."""

from __future__ import annotations

import collections
import copy
import sys
from dataclasses import replace

import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.errors import SaturationError
from saturated.interpreter import _looked_up
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, _kept_leaves


class TwoHeads(nn.Module):
    """A linear map read two ways: as it is, and through tanh (whose limit is a sign)."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(2, 3, bias=False)
        self.flag = nn.Linear(2, 1, bias=False)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"hidden": self.hidden(x), "flag": torch.tanh(self.flag(x))}


def _cancelling() -> tuple[TwoHeads, torch.Tensor]:
    """Entry 0's flag input is 10000.0009765625 − 10000 (exact in float32), far inside the rounding
    bound γ₂·Σ|wᵢxᵢ| ≈ 2.4e-3 of its dot product: float32 cannot certify its sign. Entry 1's is
    10000.0009765625, certified at once."""
    torch.manual_seed(0)
    net = TwoHeads()
    with torch.no_grad():
        net.flag.weight.copy_(torch.tensor([[10000.0009765625, -10000.0]]))
    return net, torch.tensor([[1.0, 1.0], [1.0, 0.0]])


def test_an_unread_output_is_neither_computed_nor_recomputed() -> None:
    net, x = _cancelling()
    every = SaturatedModel(net, Settings())(x)
    assert every.refined == (0,)  # the flag's sign needed float64
    assert every.value["flag"].tolist() == [[1.0], [1.0]]  # the exact sign of 0.0009765625
    hidden_only = SaturatedModel(net, Settings(), outputs={"hidden"})(x)
    assert hidden_only.refined == ()
    assert hidden_only.value["flag"] is None and hidden_only.degrees["flag"] is None
    assert torch.equal(hidden_only.value["hidden"], every.value["hidden"])
    assert hidden_only.degrees["hidden"] == 1.0


def test_output_names_are_checked() -> None:
    net, x = _cancelling()
    expected = r"no field \['logits'\]; expected some of \['hidden', 'flag'\]"
    with pytest.raises(SaturationError, match=expected):
        SaturatedModel(net, Settings(), outputs={"logits"})(x)
    plain = nn.Linear(2, 2)
    with pytest.raises(SaturationError, match="without named fields"):
        SaturatedModel(plain, Settings(), outputs={"hidden"})(x)


def test_hidden_states_alone_match_the_full_limit_on_minilm() -> None:
    model, tokenizer = load_model("minilm", num_layers=2)
    enc = tokenizer(list(load_corpus(n=8)), padding=True, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_hidden_states": True, "return_dict": True}
    every = SaturatedModel(model, Settings())(**batch)
    hidden = SaturatedModel(model, Settings(), outputs={"hidden_states"})(**batch)
    assert hidden.value.pooler_output is None and hidden.value.last_hidden_state is None
    assert set(hidden.refined) <= set(every.refined)
    for ours, theirs in zip(hidden.value.hidden_states, every.value.hidden_states, strict=True):
        # Entries recomputed in float64 for the full output only differ by float32 rounding.
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_embedding_tables_are_cast_after_the_lookup() -> None:
    model, tokenizer = load_model("minilm", num_layers=1)
    enc = tokenizer(list(load_corpus(n=3)), padding=True, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_hidden_states": True, "return_dict": True}
    limit = SaturatedModel(model, Settings())
    program = limit.program(**batch)
    tables = {program.graph_signature.inputs_to_parameters.get(name) for name in _looked_up(program.graph)}
    assert {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight"} <= tables
    assert not any("dense" in str(name) or "query" in str(name) for name in tables)
    settings = replace(limit.settings, orders=1, ties="nan")
    cast_late = limit._run((), batch, settings, torch.float64)
    cast_first = SaturatedModel(copy.deepcopy(model).double(), Settings())._run((), batch, settings,
                                                                                  torch.float64)
    for ours, theirs in zip(cast_late, cast_first, strict=True):
        if isinstance(ours, torch.Tensor) or ours is None:
            continue
        assert ours.lead.dtype == torch.float64
        assert torch.equal(ours.lead, theirs.lead)  # the same values: a lookup commutes with a cast


@pytest.mark.parametrize(("output", "names", "kept"), [
    ({"hidden": 1, "flag": 2}, {"flag"}, [False, True]),
    ({"a": (1, 2), "b": 3, "c": [4, (5, 6)]}, {"a", "c"}, [True, True, False, True, True, True]),
    ({"a": (1, 2), "b": 3}, {"b"}, [False, False, True]),
])
def test_kept_leaves_are_the_flattened_outputs_under_the_named_fields(
        output: dict[str, object], names: set[str], kept: list[bool]) -> None:
    _, spec = pytree.tree_flatten(output)
    assert _kept_leaves(spec, frozenset(names)) == kept


Pair = collections.namedtuple("Pair", "a b")  # its fields are not a mapping's keys


@pytest.mark.parametrize(("output", "message"), [
    ((1, 2), "outputs ['a', 'b'] were asked for, but the model returns tuple without named fields"),
    (torch.ones(1), "outputs ['a', 'b'] were asked for, but the model returns a value without named fields"),
    (Pair(1, 2), "outputs ['a', 'b'] were asked for, but the model returns namedtuple without named fields"),
    ({"a": 1, "c": 2, "d": 3}, "the model's output has no field ['b']; expected some of ['a', 'c', 'd']"),
    ({"c": 1}, "the model's output has no field ['a', 'b']; expected some of ['c']"),
])
def test_kept_leaves_name_what_was_asked_for_and_what_there_is(output: object, message: str) -> None:
    _, spec = pytree.tree_flatten(output)
    with pytest.raises(SaturationError) as caught:
        _kept_leaves(spec, frozenset({"b", "a"}))
    assert str(caught.value) == message


def test_a_first_level_that_failed_a_whole_batch_is_skipped_for_that_graph(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every entry's flag cancels within float32's bound: once a batch of four failed wholesale in
    float32, the next call on the same graph starts in float64, with the same limit."""
    net, _ = _cancelling()
    x = torch.tensor([[1.0, 1.0]] * 4)
    first = SaturatedModel(net, Settings())(x)
    assert first.refined == (0, 1, 2, 3) and first.value["flag"].tolist() == [[1.0]] * 4
    runs: list[torch.dtype] = []
    run = SaturatedModel._run
    monkeypatch.setattr(SaturatedModel, "_run", lambda self, *a: runs.append(a[-1]) or run(self, *a))
    again = SaturatedModel(net, Settings())(x)
    assert runs == [torch.float32, torch.float64]  # the first level refused at once
    assert again.refined == first.refined and torch.equal(again.value["flag"], first.value["flag"])
    SaturatedModel(net, Settings(), outputs={"hidden"})(x)  # other outputs: their own record
    assert runs[2:] == [torch.float32]
    net2, _ = _cancelling()
    runs.clear()
    alone = SaturatedModel(net2, Settings())(x[:2])  # a smaller batch failing says too little
    assert runs == [torch.float32, torch.float64] and alone.refined == (0, 1)
    assert not SaturatedModel(net2, Settings())._graphs.whole_failures


class ConstantRows(nn.Module):
    """LayerNorm(W·x + y) with W·x = (1, 1), a constant row at the leading order: the fixed part y
    (one order below) decides the direction."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(3, 2, bias=False, dtype=torch.float64)
        self.norm = nn.LayerNorm(2, dtype=torch.float64)
        with torch.no_grad():
            self.mix.weight.copy_(torch.tensor([[1.0, 1.0, -1.0], [0.0, 1.0, 0.0]]))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.norm(self.mix(x) + y)


def test_a_float64_level_that_failed_a_whole_batch_is_skipped_for_that_graph(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A float64 model's first level tracks one order, which no entry's constant row lets lead:
    once it failed a batch of four wholesale, the next call runs the graph with two orders only,
    with the same limit."""
    net = ConstantRows()
    x = torch.ones(4, 3, dtype=torch.float64)
    y = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, -1.0], [-2.0, 5.0]], dtype=torch.float64)
    runs: list[int] = []
    module = sys.modules[SaturatedModel.__module__]
    run_terms = module.run_terms
    monkeypatch.setattr(module, "run_terms", lambda *a, **k: runs.append(a[3].orders) or run_terms(*a, **k))
    first = SaturatedModel(net, Settings())(x, y)
    assert runs == [1, 2] and first.orders == 2
    assert torch.allclose(first.value, nn.functional.layer_norm(y, (2,)), rtol=1e-12, atol=0)
    runs.clear()
    again = SaturatedModel(net, Settings())(x, y)
    assert runs == [2] and again.orders == 2 and torch.equal(again.value, first.value)
