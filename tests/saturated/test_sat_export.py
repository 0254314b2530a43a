"""One export per model: dynamic batch and sequence dimensions, refreshed when the model changes."""

from __future__ import annotations

import copy
import importlib
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

from empirical.measure.pipeline import prepare
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model
from saturated.rules import Settings
from saturated.saturate import (
    SaturatedModel,
    _batch_axes,
    _fits,
    _module_fingerprint,
    _output_values,
    _signature,
    _user_inputs,
    saturate,
)
from tests.saturated.test_sat_failed_levels import TwoHeads


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


# What the exported graph says about the inputs and outputs, read from tiny programs.


class Tagged(nn.Module):
    """A [batch, length, 2] input and a scalar scale; outputs time-major, pooled over the batch,
    and two that are not tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor, scale: torch.Tensor, n: int = 2) -> tuple[Any, ...]:
        h = self.lin(x) * scale
        return h.transpose(0, 1), h.sum(0), n, None


@pytest.mark.parametrize(("dynamic", "shape", "axes"), [
    (True, (3, 4, 2), [(1,), (), (), ()]),    # the batch is a symbol of its own
    (False, (3, 4, 2), [(1,), (), (), ()]),
    (False, (3, 3, 2), [(0, 1), (0,), (), ()]),  # per shape, a length equal to the batch is a candidate
])
def test_batch_axes_are_the_output_dimensions_sized_by_the_batch(
        dynamic: bool, shape: tuple[int, ...], axes: list[tuple[int, ...]]) -> None:
    program = export_model(Tagged(), (torch.ones(shape), torch.tensor(2.0)), {"n": 3}, dynamic=dynamic)
    x, scale = _user_inputs(program)  # the tensor inputs, not the parameters nor n
    assert x.dim() == 3 and scale.dim() == 0 and x.shape[2] == 2
    assert isinstance(x.shape[0], torch.SymInt) == dynamic
    assert [None if fake is None else fake.dim() for fake in _output_values(program)] == [3, 2, None, None]
    assert _batch_axes(program) == axes


class TwoBatches(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 2 * x, 3 * y


def test_inputs_without_a_common_batch_size_give_no_batch_axes() -> None:
    program = export_model(TwoBatches(), (torch.ones(3, 2), torch.ones(4, 2)), {})
    assert _batch_axes(program) == [(), ()]


class Summed(nn.Module):
    """x + y: the export ties the two inputs' sizes to the same symbols."""

    def forward(self, x: torch.Tensor, y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return (x + y) * scale


class Positioned(nn.Module):
    """A learned position table of 5 rows: the length's symbol ranges over 0…5."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.ones(5, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pos[: x.shape[1]]


@pytest.mark.parametrize(("shapes", "fits"), [
    ([(3, 4, 2), (3, 4, 2), ()], True),
    ([(5, 6, 2), (5, 6, 2), ()], True),
    ([(1, 1, 2), (1, 1, 2), ()], True),     # the symbols' lower bound, 1
    ([(0, 4, 2), (0, 4, 2), ()], False),    # below it
    ([(3, 4, 2), (4, 4, 2), ()], False),    # one symbol, two sizes
    ([(3, 4, 3), (3, 4, 3), ()], False),    # a fixed size differs
    ([(3, 4), (3, 4), ()], False),          # another number of dimensions
    ([(3, 4, 2), (3, 4, 2)], False),        # another number of inputs
    ([(3, 4, 2), (3, 4, 2), (1,)], False),
])
def test_a_dynamic_program_fits_inputs_within_its_symbols(shapes: list[tuple[int, ...]], fits: bool) -> None:
    program = export_model(Summed(), (torch.ones(3, 4, 2), torch.ones(3, 4, 2), torch.tensor(2.0)), {},
                           dynamic=True)
    assert _fits(program, [torch.ones(shape) for shape in shapes]) is fits
    if fits:
        assert not _fits(program, [torch.ones(shape, dtype=torch.float64) for shape in shapes])


def test_a_bounded_symbol_fits_up_to_its_bound() -> None:
    program = export_model(Positioned(), (torch.ones(3, 4, 2),), {}, dynamic=True)
    assert _fits(program, [torch.ones(3, 5, 2)]) and not _fits(program, [torch.ones(3, 6, 2)])
    limit = SaturatedModel(Positioned(), Settings())
    for length in (4, 5):  # one graph up to the table's length
        limit(torch.ones(2, length, 2))
    assert limit.exports == 1 and limit.exports_dynamic


def test_a_static_program_fits_its_own_shapes_only() -> None:
    program = export_model(Summed(), (torch.ones(3, 4, 2), torch.ones(3, 4, 2), torch.tensor(2.0)), {})
    assert _fits(program, [torch.ones(3, 4, 2), torch.ones(3, 4, 2), torch.tensor(1.0)])
    assert not _fits(program, [torch.ones(3, 5, 2), torch.ones(3, 5, 2), torch.tensor(1.0)])


def test_the_signature_holds_shapes_dtypes_devices_and_other_values() -> None:
    leaves, spec = pytree.tree_flatten(((torch.ones(2, 3), 4), {"flag": True}))
    assert _signature(spec, leaves) == (str(spec), (((2, 3), torch.float32, "cpu"), "4", "True"))


class Attributed(nn.Module):
    """Plain attributes of every kind the fingerprint reads or skips."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0
        self.flags = (1, "a", None)
        self.nested = (1, [2])  # not plain: skipped
        self.const = torch.ones(2)
        self._private = 5
        self.inner = nn.Linear(2, 3)


def test_the_module_fingerprint_lists_classes_plain_attributes_and_tensor_versions() -> None:
    model = Attributed()
    expected = (
        ("", Attributed, (("scale", 2.0), ("flags", (1, "a", None)), ("const", id(model.const), 0))),
        ("inner", nn.Linear, (("in_features", 2), ("out_features", 3))),
    )
    assert _module_fingerprint(model) == expected
    model.const.mul_(2.0)  # a new version of a tensor the graph may have lifted
    assert _module_fingerprint(model)[0][2][2] == ("const", id(model.const), 1)


class Keyworded(nn.Module):
    """y = W x · n: the integer n is baked into the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.lin.weight.copy_(torch.tensor([[1.0, -2.0]]))

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, n: int = 1) -> torch.Tensor:
        out = self.lin(x) * n
        return out if y is None else out + self.lin(y)


def test_one_graph_per_input_structure_whatever_the_values_and_batch() -> None:
    limit = SaturatedModel(Keyworded(), Settings())
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    first = limit.program(x)
    assert limit(x).value[:, 0].tolist() == [1.0, -2.0]
    assert limit(3 * x).value[:, 0].tolist() == [3.0, -6.0] and limit(x[:1]).value.tolist() == [[1.0]]
    assert limit.program(x) is first and limit.program(torch.ones(3, 2)) is first
    assert limit.exports == 1 and limit.exports_dynamic
    # Another value of a non-tensor argument, another structure: each its own graph.
    assert limit(x, n=3).value[:, 0].tolist() == [3.0, -6.0]
    assert limit(x, n=2).value[:, 0].tolist() == [2.0, -4.0]
    assert limit(x, x).value[:, 0].tolist() == [2.0, -4.0]
    assert limit(x, y=x).value[:, 0].tolist() == [2.0, -4.0]
    assert limit.exports == 5 and limit.program(x) is first


def test_per_shape_graphs_are_kept_by_structure_and_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("saturated.export_cache")  # where SaturatedModel exports

    def per_shape(model: nn.Module, args: Any, kwargs: Any, dynamic: bool = False) -> Any:
        if dynamic:
            raise HomogeneityError("no dynamic shapes here")
        return export_model(model, args, kwargs)

    monkeypatch.setattr(module, "export_model", per_shape)
    limit = SaturatedModel(Keyworded(), Settings())
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    first = limit.program(x)
    assert limit(x).value[:, 0].tolist() == [1.0, -2.0] and limit.program(x) is first
    assert not limit.exports_dynamic and limit.exports == 1
    assert limit(x[:1]).value.tolist() == [[1.0]] and limit.exports == 2
    assert limit(x, x).value[:, 0].tolist() == [2.0, -4.0]
    assert limit(x, y=x).value[:, 0].tolist() == [2.0, -4.0]
    assert limit.exports == 4 and limit.program(x) is first


def test_an_unchanged_model_keeps_its_graph_and_a_cast_one_is_exported_again() -> None:
    net = Keyworded()
    limit = SaturatedModel(net, Settings())
    x = torch.ones(2, 2)
    first = limit.program(x)
    limit(x)
    assert limit.program(x) is first
    net.double()
    assert limit(x.double()).value.dtype == torch.float64 and limit.program(x.double()) is not first


def test_a_caller_of_one_shape_exports_per_shape_until_a_second_shape_arrives() -> None:
    # Entry 0's flag is undetermined in float32 and recomputed alone: a sub-batch of another shape.
    net, x = TwoHeads(), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    limit = SaturatedModel(net, Settings(), one_shape=True)
    first = limit(x)
    assert first.refined == (0,)
    assert limit.exports == 2 and not limit.exports_dynamic  # the batch's shape and the sub-batch's
    assert limit.program(x) is limit.program(x) and torch.equal(limit(x).value["flag"], first.value["flag"])
    assert limit.exports == 2
    many = SaturatedModel(copy.deepcopy(net), Settings())  # the default: the dynamic graph at once
    assert torch.equal(many(x).value["flag"], first.value["flag"])
    assert many.exports == 1 and many.exports_dynamic
    again = limit(torch.cat([x, x]))  # a second shape from the caller: the dynamic graph serves it
    assert limit.exports_dynamic and limit.exports == 3
    assert torch.equal(again.value["flag"], torch.cat([first.value["flag"]] * 2))
    limit(x[:1])
    assert limit.exports == 3  # and every shape after it


def test_the_pipeline_says_whether_its_batches_share_one_shape() -> None:
    model, tokenizer = load_model("minilm", num_layers=1)
    sentences = list(load_corpus(n=3))
    assert prepare(model, tokenizer, sentences, batch_size=3).one_shape()
    assert not prepare(model, tokenizer, sentences, batch_size=2).one_shape()
