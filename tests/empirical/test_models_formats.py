"""load_model on every way to bring a model: folder formats, task checkpoints, the cache, factories."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from empirical.errors import EmpiricalError
from empirical.models.formats import (
    LoadedWeights,
    load_weights,
    read_state_dict,
    read_weights,
    weight_files,
)
from empirical.models.loading import load_model, minilm_path
from empirical.models.provenance import model_record

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64}


def tiny_bert(seed: int = 1, **overrides: int) -> transformers.BertModel:
    torch.manual_seed(seed)
    return transformers.BertModel(transformers.BertConfig(**{**TINY, **overrides})).eval()


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    theirs = dict(b.named_parameters())
    return all(torch.equal(p, theirs[name]) for name, p in a.named_parameters())


def hidden(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.tensor([[101, 7592, 2088, 102]])
    with torch.no_grad():
        return model(input_ids=ids).last_hidden_state


@pytest.mark.parametrize("shard", [None, "100KB"])
def test_safetensors_single_and_sharded(tmp_path: Path, shard: str | None) -> None:
    model = tiny_bert()
    model.save_pretrained(tmp_path, **({"max_shard_size": shard} if shard else {}))
    if shard:
        assert (tmp_path / "model.safetensors.index.json").is_file()
        assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    loaded, tokenizer = load_model(tmp_path)
    assert same_weights(model, loaded) and loaded.pooler is not None
    assert len(tokenizer) == 30522  # the packaged MiniLM tokenizer: the folder has none


def test_pytorch_bin_is_read_with_weights_only(tmp_path: Path) -> None:
    model = tiny_bert()
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    model.config.save_pretrained(tmp_path)
    loaded, _ = load_model(tmp_path)
    assert same_weights(model, loaded)


def test_pickle_that_needs_code_is_refused(tmp_path: Path) -> None:
    tiny_bert().config.save_pretrained(tmp_path)
    # A whole module is a pickle of code objects, not tensors: weights_only=True must refuse it.
    torch.save(torch.nn.Linear(2, 2), tmp_path / "pytorch_model.bin")
    with pytest.raises(EmpiricalError, match=r"pytorch_model\.bin is a pickle that .*refuses"):
        load_model(tmp_path)


def test_masked_lm_checkpoint_loads_into_the_bare_model(tmp_path: Path) -> None:
    torch.manual_seed(2)
    mlm = transformers.BertForMaskedLM(transformers.BertConfig(**TINY)).eval()
    mlm.save_pretrained(tmp_path)
    assert all(key.startswith(("bert.", "cls.")) for key in load_file(str(tmp_path / "model.safetensors")))
    loaded, _ = load_model(tmp_path)
    # Every weight of the encoder arrives (keys under 'bert.'); the masked-LM head is left out and
    # the pooler, which such checkpoints lack, is removed instead of kept random.
    assert same_weights(mlm.bert, loaded) and loaded.pooler is None
    assert torch.allclose(hidden(loaded), hidden(mlm.bert))
    record = model_record(loaded)["weights"]  # what JSON results record about the loading
    assert record["removed_pooler"] and record["n_unused_keys"] > 0
    assert all(key.startswith("cls.") for key in record["unused_keys"])


def test_checkpoint_missing_a_weight_is_refused(tmp_path: Path) -> None:
    tiny_bert().save_pretrained(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    del state["encoder.layer.1.attention.self.query.weight"]
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(EmpiricalError, match=r"no values for 1 parameters.*encoder\.layer\.1\.attention"
                                             r"\.self\.query\.weight.*random initialization"):
        load_model(tmp_path)


def test_weights_of_another_shape_are_refused(tmp_path: Path) -> None:
    tiny_bert().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": 48}))
    with pytest.raises(EmpiricalError, match=r"wrong shape.*intermediate\.dense\.weight \(64, 32\)"):
        load_model(tmp_path)


def test_folder_without_weights_names_the_formats(tmp_path: Path) -> None:
    tiny_bert().config.save_pretrained(tmp_path)
    with pytest.raises(EmpiricalError, match=r"model\.safetensors, model\.safetensors\.index\.json, "
                                             r"pytorch_model\.bin"):
        read_weights(tmp_path)
    model, _ = load_model(tmp_path, random_init=True)  # the architecture alone needs no weights
    assert model.config.hidden_size == 32


def test_tokenizer_from_elsewhere_and_vocabulary_check(tmp_path: Path) -> None:
    small = tiny_bert(vocab_size=100)
    small.save_pretrained(tmp_path)
    # The fallback tokenizer's 30,522 ids do not fit 100 embedding rows: refused, not an IndexError.
    with pytest.raises(EmpiricalError, match=r"30522 tokens.*embedding table has 100 rows.*--tokenizer"):
        load_model(tmp_path)
    wide = tmp_path / "wide"
    tiny_bert().save_pretrained(wide)
    _, tokenizer = load_model(wide, tokenizer=minilm_path())
    assert tokenizer("hello world")["input_ids"] == [101, 7592, 2088, 102]
    with pytest.raises(EmpiricalError, match="expected a tokenizer folder"):
        load_model(wide, tokenizer=tmp_path / "nothing")


def test_repo_id_from_a_local_cache_offline(tmp_path: Path) -> None:
    model = tiny_bert()
    snapshot = tmp_path / "models--org--tiny-bert" / "snapshots" / "0123abcd"
    model.save_pretrained(snapshot)
    (tmp_path / "models--org--tiny-bert" / "refs").mkdir()
    (tmp_path / "models--org--tiny-bert" / "refs" / "main").write_text("0123abcd")
    loaded, _ = load_model("org/tiny-bert", cache_dir=tmp_path)
    assert same_weights(model, loaded)
    with pytest.raises(EmpiricalError, match=r"no snapshot of org/other in the cache .*nothing is "):
        load_model("org/other", cache_dir=tmp_path)


def test_repo_id_from_the_cache_named_by_hf_hub_cache(tmp_path: Path) -> None:
    snapshot = tmp_path / "models--org--tiny-bert" / "snapshots" / "feed"
    tiny_bert().save_pretrained(snapshot)
    (tmp_path / "models--org--tiny-bert" / "refs").mkdir()
    (tmp_path / "models--org--tiny-bert" / "refs" / "main").write_text("feed")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "empirical.cli", "degree", "--model", "org/tiny-bert",
                           "--depth", "1"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "last_hidden_state" in done.stdout


def test_factory_gives_model_and_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tiny_factories.py").write_text(
        "import torch, transformers\n"
        "from empirical.models.loading import load_tokenizer, minilm_path\n"
        f"CONFIG = transformers.BertConfig(**{TINY!r})\n"
        "def with_tokenizer():\n"
        "    return transformers.BertModel(CONFIG), load_tokenizer(minilm_path())\n"
        "def bare():\n"
        "    return transformers.BertModel(CONFIG)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model, _ = load_model("tiny_factories:with_tokenizer", dtype="float64")
    assert not model.training and next(model.parameters()).dtype == torch.float64
    with pytest.raises(EmpiricalError, match="returned a model without one"):
        load_model("tiny_factories:bare")
    model, _ = load_model("tiny_factories:bare", tokenizer=minilm_path())
    with pytest.raises(EmpiricalError, match="random_init and num_layers apply to named models"):
        load_model("tiny_factories:bare", random_init=True)


def test_random_init_leaves_the_global_random_state_alone() -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    load_model("bert", random_init=True, num_layers=1, seed=123)
    assert torch.equal(torch.rand(3), expected)


def test_pretrained_depth_is_a_ceiling_random_init_is_seeded() -> None:
    with pytest.raises(EmpiricalError, match=r"num_layers=8 exceeds the 6 layers.*expected at most 6"):
        load_model("minilm", num_layers=8)
    deep, _ = load_model("minilm", random_init=True, num_layers=8, seed=5)
    again, _ = load_model("minilm", random_init=True, num_layers=8, seed=5)
    assert deep.config.num_hidden_layers == 8 and same_weights(deep, again)


# The readers and load_weights on tiny modules: every message, every format's choice, every key.

class _Base(torch.nn.Module):
    """A bare model in the Hugging Face layout: a base prefix, a pooler and a persistent buffer."""

    base_model_prefix = "base"

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(2, 3)
        self.pooler = torch.nn.Linear(3, 3)
        self.register_buffer("scale", torch.full((1,), 0.5))


class _Plain(torch.nn.Module):
    """A model that names no base prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(2, 3)


class _Wide(torch.nn.Sequential):
    """Eight parameters named 0.weight, 0.bias, …, 3.bias."""

    def __init__(self) -> None:
        super().__init__(*(torch.nn.Linear(2, 2) for _ in range(4)))


def _values(model: torch.nn.Module, shift: float) -> dict[str, torch.Tensor]:
    """Tensors of the model's parameter shapes, each different from its initial value."""
    return {name: torch.full_like(p, shift) + torch.arange(p.numel()).reshape(p.shape)
            for name, p in model.named_parameters()}


def test_a_task_checkpoint_loads_under_the_base_prefix_and_leaves_its_head_out() -> None:
    model = _Base()
    base = _values(model, 1.0)
    # A head of the base's own shape, under a name as long as the prefix: left out, never loaded.
    head = {"head.proj.weight": torch.full((3, 2), -7.0), "head.proj.bias": torch.full((3,), -7.0)}
    state = {**{f"base.{name}": t for name, t in base.items()}, **head}
    done = load_weights(model, state, "ckpt", (Path("a.safetensors"),))
    assert all(torch.equal(p, base[name]) for name, p in model.named_parameters())
    assert torch.equal(model.scale, torch.full((1,), 0.5))  # a buffer the checkpoint lacks stays
    assert done == LoadedWeights((Path("a.safetensors"),), ("head.proj.weight", "head.proj.bias"), False)
    assert done.removed_pooler is False and model.pooler is not None


@pytest.mark.parametrize("prefix", [".", "model.", "None.", "XXXX."])
def test_a_model_without_a_base_prefix_strips_no_prefix(prefix: str) -> None:
    model = _Plain()
    own = _values(model, 1.0)
    state = {**own, f"{prefix}proj.weight": torch.full((3, 2), -7.0)}
    done = load_weights(model, state, "ckpt")
    assert torch.equal(model.proj.weight, own["proj.weight"])
    assert done.unused == (f"{prefix}proj.weight",) and done.files == ()


def test_a_checkpoint_without_the_pooler_removes_it_instead_of_keeping_it_random() -> None:
    model = _Base()
    state = {name: t for name, t in _values(model, 1.0).items() if not name.startswith("pooler.")}
    done = load_weights(model, state, "ckpt")
    assert model.pooler is None and done.removed_pooler is True and done.unused == ()
    assert torch.equal(model.proj.bias, state["proj.bias"])


def test_a_pooler_is_kept_when_the_checkpoint_has_it_or_lacks_more_than_it() -> None:
    model = _Base()
    state = _values(model, 1.0)
    assert load_weights(model, state, "ckpt").removed_pooler is False
    assert torch.equal(model.pooler.weight, state["pooler.weight"])
    del state["pooler.bias"], state["proj.bias"]
    fresh = _Base()
    with pytest.raises(EmpiricalError, match=r"no values for 2 parameters of _Base \(proj\.bias, "
                                             r"pooler\.bias\)"):
        load_weights(fresh, state, "ckpt")
    assert isinstance(fresh.pooler, torch.nn.Linear)


@pytest.mark.parametrize(("kept", "listed"), [
    (3, "0.weight, 0.bias, 1.weight, 1.bias, 2.weight"),                   # five: all named
    (1, "0.weight, 0.bias, 1.weight, 1.bias, 2.weight and 2 more"),        # seven: five and a count
])
def test_missing_parameters_are_counted_and_named_with_the_checkpoints_keys(kept: int, listed: str) -> None:
    model = _Wide()
    names = [name for name, _ in model.named_parameters()]
    state = {"z.extra": torch.zeros(1), **{name: t for name, t in _values(model, 1.0).items()
                                           if name in names[-kept:]}}
    keys = ", ".join(sorted(state))
    with pytest.raises(EmpiricalError) as caught:
        load_weights(model, state, "/run/ckpt")
    assert str(caught.value) == (
        f"the checkpoint /run/ckpt has no values for {8 - kept} parameters of _Wide ({listed}), which "
        f"would keep their random initialization; its keys look like {keys}. Expected a checkpoint "
        "of this architecture (with or without a task head)")


def test_a_tensor_of_the_wrong_shape_names_both_shapes_and_the_model() -> None:
    model = _Plain()
    state = {"proj.weight": torch.zeros(2, 2), "proj.bias": torch.zeros(3)}
    with pytest.raises(EmpiricalError) as caught:
        load_weights(model, state, "ckpt")
    assert str(caught.value) == ("the checkpoint ckpt does not fit _Plain: tensors of the wrong shape "
                                 "for proj.weight (2, 2) (model: (3, 2)); does config.json belong to "
                                 "these weights?")


def test_the_loading_record_caps_the_unused_keys_at_twenty_and_counts_them() -> None:
    unused = tuple(f"cls.{i:02d}" for i in range(25))
    record = LoadedWeights((Path("m/a.safetensors"), Path("m/b.safetensors")), unused, False).to_dict()
    assert record == {"files": ["m/a.safetensors", "m/b.safetensors"], "n_unused_keys": 25,
                      "unused_keys": list(unused[:20]), "removed_pooler": False}


def _save_as(folder: Path, name: str, state: dict[str, torch.Tensor]) -> None:
    """Write ``state`` as the folder's weight file ``name`` (an index gets two shards)."""
    shards = {"model.safetensors.index.json": "model-0000{}.safetensors",
              "pytorch_model.bin.index.json": "pytorch_model-0000{}.bin"}
    if name in shards:
        halves = {shards[name].format(1): dict(list(state.items())[:1]),
                  shards[name].format(2): dict(list(state.items())[1:])}
        for file, part in halves.items():
            _save_as(folder, file, part)
        weight_map = {key: file for file, part in halves.items() for key in part}
        (folder / name).write_text(json.dumps({"weight_map": weight_map}))
    elif name.endswith(".safetensors"):
        save_file(state, str(folder / name))
    else:
        torch.save(state, folder / name)


def test_the_preferred_format_is_read_and_the_next_one_when_it_is_missing(tmp_path: Path) -> None:
    formats = ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
               "pytorch_model.bin.index.json"]
    for value, name in enumerate(formats):  # each format holds other values
        _save_as(tmp_path, name, {"a": torch.full((2,), float(value)), "b": torch.full((1,), float(value))})
    for value, name in enumerate(formats):
        shards = sorted(p for p in tmp_path.iterdir() if p.name.startswith(name.split(".")[0] + "-"))
        expected = tuple(shards) if name.endswith(".json") else (tmp_path / name,)
        state, files = read_weights(tmp_path)
        assert files == expected and len(files) == (2 if name.endswith(".json") else 1)
        assert state.keys() == {"a", "b"}
        assert all(torch.equal(t, torch.full_like(t, value)) for t in state.values())
        (tmp_path / name).unlink()
    with pytest.raises(EmpiricalError) as caught:
        read_weights(tmp_path)
    assert str(caught.value) == (
        f"expected model weights in {tmp_path} (one of model.safetensors, model.safetensors.index.json, "
        "pytorch_model.bin, pytorch_model.bin.index.json), found none; pass random_init=True "
        "(CLI: --random-init) to measure the architecture with fresh weights")


def test_an_index_names_each_shard_once_in_order(tmp_path: Path) -> None:
    for shard in ("b.safetensors", "a.safetensors"):
        save_file({shard[0]: torch.ones(1)}, str(tmp_path / shard))
    weight_map = {"x": "b.safetensors", "y": "a.safetensors", "z": "b.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert weight_files(tmp_path) == (tmp_path / "a.safetensors", tmp_path / "b.safetensors")


def test_an_index_is_read_as_utf8_whatever_the_locale(tmp_path: Path, ascii_locale: None) -> None:
    save_file({"w": torch.ones(1)}, str(tmp_path / "modèle-1.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_bytes(
        json.dumps({"weight_map": {"w": "modèle-1.safetensors"}}, ensure_ascii=False).encode())
    assert weight_files(tmp_path) == (tmp_path / "modèle-1.safetensors",)


@pytest.mark.parametrize(("text", "error"), [
    ("[]", "got [] (list)"),                                      # not an object
    ("{}", "got {} (dict)"),                                      # no weight_map
    ('{"weight_map": ["a.bin"]}', "got {'weight_map': ['a.bin']} (dict)"),
    ('{"weight_map": {"w": "../../elsewhere.bin"}}', "elsewhere"),  # not a file of the folder
    ('{"weight_map": {"w": 3}}', "{'w': 3}"),
])
def test_an_unreadable_index_says_what_it_should_hold(tmp_path: Path, text: str, error: str) -> None:
    index = tmp_path / "pytorch_model.bin.index.json"
    index.write_text(text)
    with pytest.raises(EmpiricalError) as caught:
        weight_files(tmp_path)
    assert str(caught.value).startswith(f"expected {index} to be a shard index (JSON with a 'weight_map' "
                                        f"of key → file name in {tmp_path}), got ")
    assert error in str(caught.value)


@pytest.mark.parametrize(("text", "error"), [
    ("{'weight_map': {}}", "not JSON (Expecting property name"),
    ('{"weight_map": {"w": "a.bin"}, "weight_map": {}}', "the key 'weight_map' appears twice in one object"),
    ("[" * 10_000 + "]" * 10_000, "nest deeper than 32 levels"),
])
def test_an_index_that_is_not_bounded_json_is_refused_naming_it(tmp_path: Path, text: str,
                                                                 error: str) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(text)
    with pytest.raises(EmpiricalError) as caught:
        weight_files(tmp_path)
    assert f"the shard index {index}" in str(caught.value) and error in str(caught.value)


@pytest.mark.parametrize(("absent", "listed"), [
    (1, "s1.bin"),
    (5, "s1.bin, s2.bin, s3.bin, s4.bin, s5.bin"),
    (7, "s1.bin, s2.bin, s3.bin, s4.bin, s5.bin and 2 more"),
])
def test_an_index_naming_absent_shards_lists_them(tmp_path: Path, absent: int, listed: str) -> None:
    torch.save({"w": torch.ones(1)}, tmp_path / "s8.bin")  # the one shard present
    index = tmp_path / "pytorch_model.bin.index.json"
    index.write_text(json.dumps({"weight_map": {f"w{i}": f"s{i}.bin" for i in (*range(1, absent + 1), 8)}}))
    with pytest.raises(EmpiricalError) as caught:
        weight_files(tmp_path)
    assert str(caught.value) == f"the shard index {index} names files that do not exist: {listed}"


def test_a_path_that_does_not_exist_is_named(tmp_path: Path) -> None:
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / "nothing.pt")
    assert str(caught.value) == ("expected a checkpoint file or a model folder, got "
                                 f"{tmp_path / 'nothing.pt'}, which does not exist")


@pytest.mark.parametrize(("content", "message"), [
    ([1, 2], "got list"),
    ({"w": torch.ones(1), "step": 3}, "but step is not tensors"),
    ({"w": torch.ones(1), **{f"n{i}": i for i in range(6)}}, "but n0, n1, n2, n3, n4 are not tensors"),
])
def test_a_file_holding_other_than_tensors_names_them(tmp_path: Path, content: object, message: str) -> None:
    torch.save(content, tmp_path / "odd.pt")
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / "odd.pt")
    expected = f"expected {tmp_path / 'odd.pt'} to hold a state dict (name → tensor), {message}"
    assert str(caught.value) == expected


def test_weights_wrapped_under_model_are_unwrapped(tmp_path: Path) -> None:
    torch.save({"model": {"w": torch.arange(3.0)}, "state_dict": "not weights"}, tmp_path / "run.pt")
    assert read_state_dict(tmp_path / "run.pt").keys() == {"w"}
    assert torch.equal(read_state_dict(tmp_path / "run.pt")["w"], torch.arange(3.0))


@pytest.mark.parametrize(("cut", "reason"), [(0, "it is empty"), (200, "it cannot be read: ")])
def test_a_corrupt_pickle_says_what_was_expected(tmp_path: Path, cut: int, reason: str) -> None:
    saved = io.BytesIO()
    torch.save({"w": torch.ones(3)}, saved)
    (tmp_path / "bad.pt").write_bytes(saved.getvalue()[:cut])  # empty, or cut short
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / "bad.pt")
    assert str(caught.value).startswith(f"expected {tmp_path / 'bad.pt'} to be a checkpoint saved with "
                                        f"torch.save or safetensors, but {reason}")


_LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 4096\n"


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.safetensors"])
def test_a_git_lfs_pointer_is_named_as_one(tmp_path: Path, name: str) -> None:
    """A clone made without git lfs holds pointers where the weights should be."""
    (tmp_path / name).write_bytes(_LFS)
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / name)
    assert str(caught.value) == (f"{tmp_path / name} is a Git LFS pointer, not the weights: fetch them "
                                 "first (git lfs pull in the model's folder)")


@pytest.mark.parametrize(("content", "start"), [
    (b"hello world\n", "b'hello wo'"),  # torch's legacy reader raised a bare KeyError here
    (bytes(range(200, 216)), "b'\\xc8\\xc9\\xca\\xcb\\xcc\\xcd\\xce\\xcf'"),
])
def test_a_file_neither_zip_nor_pickle_is_refused_by_its_first_bytes(
        tmp_path: Path, content: bytes, start: str) -> None:
    (tmp_path / "text.pt").write_bytes(content)
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / "text.pt")
    assert str(caught.value) == (f"expected {tmp_path / 'text.pt'} to be a checkpoint saved with "
                                 f"torch.save or safetensors, but it is neither a zip archive nor a "
                                 f"pickle (it starts with {start})")


def test_an_empty_safetensors_file_is_named_empty(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / "model.safetensors")
    assert str(caught.value) == (f"expected {tmp_path / 'model.safetensors'} to be a safetensors file, "
                                 "but it is empty")


def test_a_plain_pickle_is_refused_without_naming_a_class(tmp_path: Path) -> None:
    # Protocol 4 frames, which torch's weights-only reader does not take: refused, no global named.
    (tmp_path / "plain.pkl").write_bytes(pickle.dumps({"w": 1}, protocol=4))
    with pytest.raises(EmpiricalError) as caught:
        read_state_dict(tmp_path / "plain.pkl")
    assert str(caught.value) == (
        f"normsat will not unpickle code: {tmp_path / 'plain.pkl'} is a pickle that needs code to load, "
        "which torch.load(weights_only=True) refuses; save a state dict "
        "(torch.save(model.state_dict(), ...)) or safetensors instead")


def test_code_stays_refused_when_the_environment_turns_weights_only_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch honours this variable only where weights_only is left unset.
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    with pytest.raises(EmpiricalError, match=r"(it refers to torch\.nn\.modules\.linear\.Linear)"):
        read_state_dict(tmp_path / "module.pt")


def test_a_checkpoint_saved_on_a_gpu_is_read_on_the_cpu(tmp_path: Path) -> None:
    # torch.save records each storage's device in data.pkl; a GPU's reads 'cuda:0' where a CPU's
    # reads 'cpu' (pickle protocol 2: a 4-byte length, then the text).
    saved = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, saved)
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(tmp_path / "gpu.pt", "w") as target:
        for entry in source.infolist():
            data = source.read(entry.filename)
            if entry.filename.endswith("/data.pkl"):
                assert data.count(b"X\x03\x00\x00\x00cpu") == 1
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            target.writestr(entry.filename, data)
    state = read_state_dict(tmp_path / "gpu.pt")
    assert torch.equal(state["w"], torch.arange(3.0)) and state["w"].device.type == "cpu"
