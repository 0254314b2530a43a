"""Entries recomputed apart are merged back along each output's own batch dimension, which the
exported graph names (dimension 1 of a time-major output, as XLNet's), never assumed to be 0."""

from __future__ import annotations

import importlib
import math
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
from saturated.saturate import (
    SaturatedModel,
    _batch_axis,
    _batch_shape,
    _batch_size,
    _batched,
    _cast_inputs,
    _keep_determined,
    _merge,
    _placement,
    _put,
    _select,
    _undetermined_entries,
)
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
        module = importlib.import_module("saturated.export_cache")  # where the exports are made
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


# The helpers that find the batch dimension and write recomputed entries back, on hand-made shapes.


@pytest.mark.parametrize(("candidates", "shape", "count", "total", "expected"), [
    ((0,), (3, 2), 3, 3, 0),            # the whole batch: its only candidate
    ((0, 1), (3, 3, 2), 3, 3, None),    # the whole batch, length = batch: not told apart
    ((), (3, 2), 3, 3, None),           # no candidate
    ((0, 1), (3, 1, 2), 1, 3, 1),       # time-major, one entry: the dimension of size 1
    ((0, 1), (1, 3, 2), 1, 3, 0),
    ((0, 1), (1, 1, 2), 1, 3, None),    # both have the sub-batch's size
    ((0, 2), (2, 5), 2, 4, 0),          # a candidate past the output's dimensions is dropped
    ((0, 1), (2, 5), 2, 4, 0),          # a candidate of another size is dropped
])
def test_the_batch_axis_is_the_one_candidate_sized_by_the_entries(
        candidates: tuple[int, ...], shape: tuple[int, ...], count: int, total: int,
        expected: int | None) -> None:
    assert _batch_axis(candidates, torch.Size(shape), count, total) == expected


@pytest.mark.parametrize(("shape", "candidates", "total", "expected"), [
    ((5, 1, 4), (1,), 3, [5, 3, 4]),
    ((1, 4), (0,), 2, [2, 4]),
    ((5, 1, 4), (0, 1), 3, [5, 3, 4]),  # only dimension 1 has one entry's size
    ((2, 1, 4), (1,), 1, [2, 1, 4]),    # one entry: as it is
    ((7,), (), 1, [7]),
])
def test_the_batch_shape_puts_the_entry_count_on_the_batch_axis(
        shape: tuple[int, ...], candidates: tuple[int, ...], total: int, expected: list[int]) -> None:
    assert _batch_shape(0, torch.Size(shape), candidates, total) == expected


def test_a_batch_shape_without_a_batch_axis_names_the_output_and_its_shape() -> None:
    message = ("output 4 has no batch dimension to merge recomputed entries along (shape (2, 2) "
               "for 1 of 3); expected one dimension the exported graph sizes by the batch")
    with pytest.raises(SaturationError) as caught:
        _batch_shape(4, torch.Size((2, 2)), (0, 1), 3)
    assert str(caught.value) == message


def test_a_part_of_every_entry_with_the_whole_shape_replaces_it() -> None:
    assert _placement(0, torch.Size((3, 2)), torch.Size((3, 2)), (0,), 3, 3) is None


@pytest.mark.parametrize(("whole", "part", "candidates", "count", "total", "expected"), [
    ((3, 3, 2), (3, 1, 2), (0, 1), 1, 3, 1),   # time-major: the entries go along dimension 1
    ((4, 2, 5), (2, 2, 5), (0,), 2, 4, 0),
    ((2, 4, 5), (2, 3, 5), (1,), 3, 4, 1),
])
def test_a_part_goes_along_its_batch_axis(whole: tuple[int, ...], part: tuple[int, ...],
                                          candidates: tuple[int, ...], count: int, total: int,
                                          expected: int) -> None:
    assert _placement(0, torch.Size(whole), torch.Size(part), candidates, count, total) == expected


@pytest.mark.parametrize(("whole", "part", "candidates", "count", "total"), [
    ((3, 4), (3, 5), (0,), 3, 3),      # every entry, but another size elsewhere
    ((3, 2), (1, 2), (), 1, 3),        # no candidate
    ((2, 2), (1, 2), (0,), 1, 3),      # the whole's axis is not the batch's size
    ((3, 4), (1, 5), (0,), 1, 3),      # another size elsewhere
    ((3, 3, 2), (1, 1, 2), (0, 1), 1, 3),  # both candidates have the part's size
])
def test_a_part_that_does_not_fit_the_whole_is_refused_with_both_shapes(
        whole: tuple[int, ...], part: tuple[int, ...], candidates: tuple[int, ...], count: int,
        total: int) -> None:
    message = (f"output 2 has no batch dimension to merge recomputed entries along (shape {whole} "
               f"for {total} entries, shape {part} for {count} of {total}); expected one dimension "
               "the exported graph sizes by the batch")
    with pytest.raises(SaturationError) as caught:
        _placement(2, torch.Size(whole), torch.Size(part), candidates, count, total)
    assert str(caught.value) == message


def test_put_writes_rows_along_the_axis_into_a_copy() -> None:
    value = torch.zeros(2, 3)
    update = torch.tensor([[1.0], [2.0]])
    put = _put(value, update, 1, torch.tensor([2]))
    assert put.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]] and value.abs().sum() == 0
    whole = torch.ones(2, 3)
    replaced = _put(value, whole, None, torch.tensor([0, 1]))
    assert replaced.tolist() == whole.tolist() and replaced is not whole


@pytest.mark.parametrize(("value", "degree", "expected"), [
    (torch.tensor([1.0, 2.0]), 1.0, True),
    (torch.tensor([[1.0]]), 0.0, True),
    (torch.tensor([1.0, 2.0]), None, False),   # no degree: not a limit
    (torch.tensor(3.0), 1.0, False),           # no dimension to hold entries
    (torch.tensor([1, 2]), 0.0, False),        # integer: not a limit
    ("text", None, False),
])
def test_only_floating_outputs_with_a_degree_and_a_dimension_are_batched(
        value: Any, degree: float | None, expected: bool) -> None:
    assert _batched(value, degree) is expected


def test_select_takes_the_rows_of_every_tensor_and_keeps_the_rest() -> None:
    x = torch.arange(6.0).reshape(3, 2)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    args, kwargs = _select(((x,), {"attention_mask": mask, "flag": True}), [2, 0])
    assert args[0].tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert kwargs["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]] and kwargs["flag"] is True


def test_cast_inputs_casts_floating_tensors_only() -> None:
    x, ids = torch.ones(2, 2), torch.tensor([[1, 2]])
    (cast,), kwargs = _cast_inputs(((x,), {"input_ids": ids, "n": 3}), torch.float64)
    assert cast.dtype == torch.float64 and cast.tolist() == x.tolist()
    assert kwargs["input_ids"].dtype == torch.int64 and kwargs["n"] == 3


@pytest.mark.parametrize(("leaves", "expected"), [
    ([torch.zeros(3, 2), torch.zeros(3, 5, dtype=torch.long), 7, "s"], 3),
    ([torch.zeros(2, 4), torch.zeros(2)], 2),
    ([torch.zeros(1, 2)], None),                    # one entry: no batch to split
    ([torch.zeros(3, 2), torch.zeros(4, 2)], None),  # no common size
    ([torch.zeros(3, 2), torch.tensor(2.0)], None),  # a scalar input has no batch dimension
    ([torch.tensor(2.0)], None),
    ([4], None),
])
def test_the_batch_size_is_the_common_dimension_0_above_1(leaves: list[Any], expected: int | None) -> None:
    assert _batch_size(leaves) == expected


def _with_nan(shape: tuple[int, ...], *where: tuple[int, ...]) -> torch.Tensor:
    value = torch.ones(shape)
    for index in where:
        value[index] = math.nan
    return value


def test_undetermined_entries_are_those_holding_nan_along_their_batch_axis() -> None:
    batch_first = _with_nan((3, 2), (2, 1))
    time_major = _with_nan((2, 3, 2), (1, 0, 0), (0, 2, 1))  # entries 0 and 2, dimension 1
    assert _undetermined_entries([(batch_first, (0,))], 3, 3) == [2]
    assert _undetermined_entries([(time_major, (1,))], 3, 3) == [0, 2]
    entry_first = _with_nan((3, 2, 2), (1, 1, 0))
    assert _undetermined_entries([(entry_first, (0,)), (_with_nan((3, 2), (0, 0)), (0,))], 3, 3) == [0, 1]
    # two of three entries: the dimension of size 2, numbered within the sub-batch
    assert _undetermined_entries([(_with_nan((3, 2, 2), (0, 1, 1)), (0, 1))], 2, 3) == [1]
    assert _undetermined_entries([(torch.ones(3, 2), (0,))], 3, 3) == []


def test_undetermined_entries_without_a_batch_axis_are_not_told() -> None:
    nan = _with_nan((1, 2), (0, 0))
    assert _undetermined_entries([(nan, (0,))], 1, None) is None  # no batch
    assert _undetermined_entries([(_with_nan((3, 2), (1, 0)), ())], 3, 3) is None
    assert _undetermined_entries([(_with_nan((3, 2), (1, 0)), (0,)), (nan, ())], 3, 3) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_merge_writes_each_entry_at_the_higher_degree(dtype: torch.dtype) -> None:
    """Entries 2 and 0 of four, recomputed in float64, merged into the batch's outputs: at the same
    degree their rows are written as they are; at a higher one the batch's other rows become zero
    (their part at that degree), undetermined rows stay NaN, and the merged output takes it; at a
    lower one the entries' rows are zero; a degree NaN marks the entries undetermined; an output
    with no row determined yet takes the entries' degree. Outputs without a degree (non-tensors)
    are left alone."""
    nan = math.nan

    def batch(*rows: list[float]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.float64).to(dtype)

    part = torch.tensor([[7.1, 8.0], [9.0, 10.3]], dtype=torch.float64)  # entries 2, 0
    pairs = [
        ("label", None),
        (batch([1, 2], [3, 4], [5, 6], [0.5, 1]), 1.0),      # the entries undetermined
        (batch([1, 2], [3, 4], [5, 6], [0.5, 1]), 1.0),      # the same degree
        (batch([1, 2], [nan, nan], [5, 6], [0.5, 1]), 1.0),  # a higher degree
        (batch([1, 2], [3, 4], [5, 6], [0.5, 1]), 1.0),      # a lower degree
        (batch([nan, nan], [nan, nan], [nan, nan], [nan, nan]), nan),  # nothing determined yet
    ]
    found = [("other", None), (part, nan), (part, 1.0), (part, 2.0), (part, 0.5), (part, 1.5)]
    _merge(pairs, found, [2, 0], [(), (0,), (0,), (0,), (0,), (0,)], 4)
    expected = [
        ([[nan, nan], [3, 4], [nan, nan], [0.5, 1]], 1.0),
        ([[9, 10.3], [3, 4], [7.1, 8], [0.5, 1]], 1.0),
        ([[9, 10.3], [nan, nan], [7.1, 8], [0, 0]], 2.0),
        ([[0, 0], [3, 4], [0, 0], [0.5, 1]], 1.0),
        ([[9, 10.3], [nan, nan], [7.1, 8], [nan, nan]], 1.5),
    ]
    assert pairs[0] == ("label", None)
    for (value, degree), (rows, want) in zip(pairs[1:], expected):
        assert value.dtype == dtype and degree == want
        torch.testing.assert_close(value, batch(*rows), equal_nan=True, rtol=0, atol=0)


def test_merge_goes_along_a_time_major_batch_axis() -> None:
    value = torch.zeros(2, 3, 1)
    pairs = [(value, 1.0)]
    _merge(pairs, [(torch.tensor([[[4.0]], [[5.0]]]), 1.0)], [1], [(0, 1)], 3)
    assert pairs[0][0][..., 0].tolist() == [[0.0, 4.0, 0.0], [0.0, 5.0, 0.0]] and pairs[0][1] == 1.0
    whole = [(torch.zeros(3, 2), 1.0)]  # every entry with the same shape: replaced
    _merge(whole, [(torch.ones(3, 2), 1.0)], [0, 1, 2], [(0, 1)], 3)
    assert whole[0][0].tolist() == [[1.0, 1.0]] * 3


def test_merge_refuses_an_output_without_a_batch_axis_by_its_index() -> None:
    pairs = [(torch.zeros(3, 2), 1.0), (torch.zeros(2, 2), 1.0)]
    with pytest.raises(SaturationError) as caught:
        _merge(pairs, [(torch.ones(1, 2), 1.0), (torch.ones(1, 2), 1.0)], [1], [(0,), ()], 3)
    assert str(caught.value).startswith("output 1 has no batch dimension to merge recomputed entries "
                                        "along (shape (2, 2) for 3 entries, shape (1, 2) for 1 of 3)")
    assert pairs[0][0][1].tolist() == [1.0, 1.0]  # output 0 was merged before


def test_an_entry_left_undetermined_keeps_what_either_precision_determined() -> None:
    """Batch of 3, tokens of 2 values; the ball level ran on entries 0 and 2 (``left``) and stops
    with entry 2 (its index 1) undetermined. Output 0 (degrees agree): entry 2 keeps float64's
    determined tokens and takes the level's where float64 had a NaN. Output 1 (degrees differ):
    the side with fewer NaN in the entry is kept whole, the level's; output 2 likewise, float64's."""
    nan = math.nan
    whole = torch.tensor([[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]],
                          [[4.0, 4.0], [5.0, 5.0], [6.0, 6.0]],
                          [[nan, nan], [nan, 7.0], [8.0, 8.0]]])  # entry 2: tokens 0, 1 undetermined
    level = torch.tensor([[[1.5, 1.5], [2.5, 2.5], [3.5, 3.5]],
                          [[9.0, 9.0], [nan, nan], [nan, 8.5]]])  # entry 2: only token 0 decided
    fewer = level.clone()
    fewer[1, 1:] = 9.5  # entry 2: every token decided
    pairs = [(whole.clone(), 1.0), (whole.clone(), 1.0), (whole.clone(), 1.0), ("label", None)]
    found = [(level, 1.0), (fewer, 2.0), (level, 2.0), ("other", None)]
    _keep_determined(pairs, found, [1], [0, 2], [(0,), (0,), (0,), ()], 3)
    expected_joined = whole.clone()
    expected_joined[2, 0] = 9.0  # the level's; token 1 undetermined in both; token 2 float64's
    torch.testing.assert_close(pairs[0][0], expected_joined, equal_nan=True, rtol=0, atol=0)
    assert pairs[0][1] == 1.0
    merged, degree = pairs[1]
    assert degree == 2.0 and merged[2].tolist() == fewer[1].tolist()  # the level's entry, whole
    torch.testing.assert_close(merged[:2], torch.zeros(2, 3, 2), rtol=0, atol=0)  # lower degree there: 0
    torch.testing.assert_close(pairs[2][0], whole, equal_nan=True, rtol=0, atol=0)  # more NaN: float64's
    assert pairs[2][1] == 1.0 and pairs[3] == ("label", None)
