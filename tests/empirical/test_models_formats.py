"""load_model on every way to bring a model: folder formats, task checkpoints, the cache, factories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from empirical.errors import EmpiricalError
from empirical.models.formats import read_weights
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
