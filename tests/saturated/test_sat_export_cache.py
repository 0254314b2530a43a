"""Exported graphs kept on disk: found again by a new process (here: a new model object of the same
configuration), without their weights, and made again from a file that cannot be read."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest
import torch
import transformers
from torch._export.serde import schema, serialize

import saturated.export_cache as export_cache
from empirical.models.loading import family_config
from homogeneity.errors import HomogeneityError
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, _user_inputs

IDS = torch.tensor([[3, 17, 42, 9], [5, 6, 25, 8]])


def _llama(seed: int, layers: int = 1) -> torch.nn.Module:
    config = family_config("llama", hidden_size=32, intermediate_size=64, vocab_size=64,
                           num_attention_heads=4, num_hidden_layers=layers, num_key_value_heads=2,
                           head_dim=8, pad_token_id=None)
    torch.manual_seed(seed)
    return transformers.AutoModel.from_config(config, attn_implementation="eager").eval()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[bool]]:
    """A fresh cache directory, and a record of every export actually made (its ``dynamic``)."""
    monkeypatch.setenv("NORMSAT_CACHE_DIR", str(tmp_path))
    made: list[bool] = []
    export = export_cache.export_model

    def counted(*args: object, dynamic: bool = False) -> torch.export.ExportedProgram:
        made.append(dynamic)
        return export(*args, dynamic=dynamic)  # type: ignore[arg-type]

    monkeypatch.setattr(export_cache, "export_model", counted)
    return tmp_path, made


def _limit(model: torch.nn.Module) -> torch.Tensor:
    out = SaturatedModel(model, Settings(), {"last_hidden_state"})(input_ids=IDS)
    return out.value.last_hidden_state


def test_a_second_model_of_the_same_configuration_reads_the_graph_and_its_own_weights(
        cache: tuple[Path, list[bool]]) -> None:
    root, made = cache
    first = _limit(_llama(0))
    assert made == [True] and len(list(root.glob("*.pt2"))) == 1
    other = _llama(1)  # other weights, same configuration: the graph is read, not made
    again = _limit(other)
    assert made == [True]
    _limit(_llama(0, layers=2))  # another configuration: another graph
    assert made == [True, True] and len(list(root.glob("*.pt2"))) == 2
    assert torch.equal(again, _uncached(other)) and not torch.equal(again, first)


def _uncached(model: torch.nn.Module) -> torch.Tensor:
    """The limit from a graph exported afresh (a copy of the model shares no graph with it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NORMSAT_CACHE_DIR", "")
        return _limit(copy.deepcopy(model))


def test_a_file_that_cannot_be_read_is_exported_again_and_replaced(cache: tuple[Path, list[bool]]) -> None:
    root, made = cache
    _limit(_llama(0))
    (path,) = root.glob("*.pt2")
    path.write_bytes(path.read_bytes()[:100])  # a partly written file
    model = _llama(0)
    found = _limit(model)
    assert made == [True, True] and path.stat().st_size > 100
    assert torch.equal(found, _uncached(model))
    assert not list(root.glob("*.part"))  # written under a temporary name, then renamed


def test_modules_without_a_configuration_and_an_empty_setting_are_not_cached(
        cache: tuple[Path, list[bool]], monkeypatch: pytest.MonkeyPatch) -> None:
    root, made = cache
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    SaturatedModel(net, Settings())(torch.randn(3, 2))
    assert made == [True] and not list(root.iterdir())
    monkeypatch.setenv("NORMSAT_CACHE_DIR", "")
    assert export_cache.cache_dir() is None
    _limit(_llama(0))
    assert made == [True, True] and not list(root.iterdir())


def test_a_refused_dynamic_export_is_remembered(cache: tuple[Path, list[bool]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root, made = cache
    model = _llama(0)

    def refuse(*args: object, dynamic: bool = False) -> torch.export.ExportedProgram:
        made.append(dynamic)
        raise HomogeneityError("no dynamic shapes here")

    monkeypatch.setattr(export_cache, "export_model", refuse)
    for _ in range(2):
        with pytest.raises(HomogeneityError, match="no dynamic shapes here"):
            export_cache.cached_export(model, (), {"input_ids": IDS}, dynamic=True)
    assert made == [True] and len(list(root.glob("*.refused"))) == 1


def _symbolic(value: object) -> bool:
    return isinstance(value, torch.Tensor) and any(isinstance(size, torch.SymInt) for size in value.shape)


def test_a_dynamic_graph_is_stored_with_symbolic_inputs_and_outputs_only(
        cache: tuple[Path, list[bool]]) -> None:
    model = _llama(0)
    made = export_cache.cached_export(model, (), {"input_ids": IDS}, dynamic=True)
    # the graph in memory keeps its symbols after it was saved
    assert any(node.op == "call_function" and _symbolic(node.meta.get("val")) for node in made.graph.nodes)
    read = export_cache.cached_export(_llama(1), (), {"input_ids": IDS}, dynamic=True)
    assert read is not made and cache[1] == [True]
    output = list(read.graph.nodes)[-1]
    outputs = {arg for arg in torch.utils._pytree.tree_leaves(output.args) if isinstance(arg, torch.fx.Node)}
    assert all(_symbolic(value) for value in _user_inputs(read))
    assert outputs and all(_symbolic(node.meta["val"]) for node in outputs)
    assert not [node for node in read.graph.nodes  # inner nodes hold the example's sizes
                if node not in outputs and node.op == "call_function" and _symbolic(node.meta.get("val"))]
    longer = torch.tensor([[3, 17, 42, 9, 1, 2]] * 3)
    found = SaturatedModel(_llama(1), Settings(), {"last_hidden_state"})(input_ids=longer)
    assert cache[1] == [True]  # the graph read serves other batch sizes and lengths
    assert torch.equal(found.value.last_hidden_state, _uncached_on(_llama(1), longer))


def _uncached_on(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NORMSAT_CACHE_DIR", "")
        return SaturatedModel(model, Settings(), {"last_hidden_state"})(input_ids=ids).value.last_hidden_state


def test_a_graph_exported_from_one_sentence_is_not_read_for_a_batch(cache: tuple[Path, list[bool]]) -> None:
    root, made = cache
    export_cache.cached_export(_llama(0), (), {"input_ids": IDS[:1]}, dynamic=True)  # batch fixed at 1
    batch = export_cache.cached_export(_llama(0), (), {"input_ids": IDS}, dynamic=True)
    assert made == [True, True] and len(list(root.glob("*.pt2"))) == 2
    assert all(isinstance(value.shape[0], torch.SymInt) for value in _user_inputs(batch))
    export_cache.cached_export(_llama(1), (), {"input_ids": torch.ones(3, 5, dtype=torch.long)}, dynamic=True)
    assert made == [True, True]  # another batch and length: the batch's graph is read


def test_the_schema_reader_builds_what_torchs_own_conversion_builds() -> None:
    program = export_cache.export_model(_llama(0), (), {"input_ids": IDS}, dynamic=True)
    stored = json.loads(serialize.serialize(program).exported_program)
    ours = export_cache._SchemaReader()(schema.ExportedProgram, stored)
    assert ours == serialize._dict_to_dataclass(schema.ExportedProgram, stored)
    assert len(ours.graph_module.graph.nodes) == len(stored["graph_module"]["graph"]["nodes"]) > 10


def test_a_read_graph_has_the_example_values_torchs_reader_builds(tmp_path: Path) -> None:
    """The inner nodes' example values are built without the fake mode's dispatch: the same fake
    tensors (type, shape, stride, dtype, device) as torch's own reader builds from the same file,
    and the symbolic inputs' sizes as torch reads them."""
    program = export_cache.export_model(_llama(0), (), {"input_ids": IDS}, dynamic=True)
    path = tmp_path / "graph.pt2"
    with export_cache._concrete_inner_values(program):
        torch.export.save(program, path)
    ours, torchs = export_cache._load(path), torch.export.load(path)
    pairs = list(zip(ours.graph.nodes, torchs.graph.nodes, strict=True))
    inner = 0
    for mine, theirs in pairs:
        value, expected = mine.meta.get("val"), theirs.meta.get("val")
        assert type(value) is type(expected), mine.name
        if isinstance(expected, torch.Tensor):
            assert (str(value.shape), str(value.stride()), value.dtype, value.device) == \
                (str(expected.shape), str(expected.stride()), expected.dtype, expected.device), mine.name
            inner += all(isinstance(size, int) for size in expected.shape)
    assert inner > 10
    assert all(isinstance(value.shape[0], torch.SymInt) for value in _user_inputs(ours))



def test_a_graph_is_saved_as_torch_saves_it_without_its_canonical_form(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes of ``torch.export.save``, with the canonical form torch computes and drops left
    out; torch's function is back in place afterwards."""
    program = export_cache._without_weights(
        export_cache.export_model(_llama(0, layers=2), (), {"input_ids": IDS}, dynamic=True))
    canonical = serialize.canonicalize
    formed: list[object] = []

    def counted(*args: object) -> object:
        formed.append(args)
        return canonical(*args)

    monkeypatch.setattr(serialize, "canonicalize", counted)
    theirs, ours = io.BytesIO(), io.BytesIO()
    torch.export.save(program, theirs)
    assert len(formed) == 1
    export_cache._save(program, ours)
    assert len(formed) == 1 and ours.getvalue() == theirs.getvalue()
    assert serialize.canonicalize is counted
