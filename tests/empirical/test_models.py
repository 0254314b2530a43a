"""load_model: offline real weights, random-init families, local directories, clear errors."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from empirical.errors import EmpiricalError
from empirical.models.loading import MODEL_NAMES, load_model, minilm_path


def test_minilm_has_the_packaged_pretrained_weights(minilm):
    model, tokenizer = minilm
    assert type(model).__name__ == "BertModel" and not model.training
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    on_disk = load_file(str(minilm_path() / "model.safetensors"))
    key = next(k for k in on_disk if k.endswith("embeddings.word_embeddings.weight"))
    assert torch.equal(model.embeddings.word_embeddings.weight, on_disk[key])
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(22.7e6, rel=0.01)
    assert tokenizer("hello world")["input_ids"] == [101, 7592, 2088, 102]


def test_random_init_twin_has_same_architecture_and_fresh_seeded_weights(minilm):
    model, _ = minilm
    twin, _ = load_model("minilm", random_init=True, seed=3)
    again, _ = load_model("minilm", random_init=True, seed=3)
    other, _ = load_model("minilm", random_init=True, seed=4)
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in model.named_parameters()]
    weight = "encoder.layer.0.attention.self.query.weight"
    state, twin_state = model.state_dict(), twin.state_dict()
    assert not torch.equal(state[weight], twin_state[weight])
    assert torch.equal(twin_state[weight], again.state_dict()[weight])
    assert not torch.equal(twin_state[weight], other.state_dict()[weight])


@pytest.mark.parametrize(
    ("family", "cls", "width"),
    [("bert", "BertModel", 768), ("roberta", "RobertaModel", 768), ("gpt2", "GPT2Model", 768),
     ("xlnet", "XLNetModel", 768), ("t5", "T5Model", 768)],
)
def test_families_are_base_size(small_models, family, cls, width):
    model, _ = small_models[family]
    assert type(model).__name__ == cls and not model.training
    assert model.config.hidden_size == width
    assert model.config._attn_implementation == "eager"


def test_family_without_random_init_says_what_exists():
    with pytest.raises(EmpiricalError, match=r"no pretrained weights for 'roberta'.*minilm.*random_init"):
        load_model("roberta")


def test_unknown_name_lists_the_choices(tmp_path):
    with pytest.raises(EmpiricalError, match=r"unknown model 'bort'.*minilm, bert"):
        load_model("bort")
    with pytest.raises(EmpiricalError, match="no directory exists"):
        load_model(str(tmp_path / "missing"))
    with pytest.raises(EmpiricalError, match=r"config\.json"):
        load_model(str(tmp_path))


def test_local_directory_pretrained_and_random_init(tmp_path, small_models):
    model, tokenizer = small_models["bert"]
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load_model(str(tmp_path))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    assert loaded_tokenizer("hello")["input_ids"] == tokenizer("hello")["input_ids"]
    fresh, _ = load_model(str(tmp_path), random_init=True, seed=1)
    assert not torch.equal(fresh.pooler.dense.weight, model.pooler.dense.weight)


def test_dtype_and_layers():
    model, _ = load_model("gpt2", random_init=True, num_layers=1, dtype=torch.float64)
    assert len(model.h) == 1 and next(model.parameters()).dtype == torch.float64
    with pytest.raises(EmpiricalError, match="num_layers to be an integer ≥ 1"):
        load_model("gpt2", random_init=True, num_layers=0)


def test_builtin_names_are_documented():
    assert MODEL_NAMES == ("minilm", "bert", "roberta", "t5", "xlnet", "gpt2", "llama", "mistral",
                           "qwen2", "gemma", "phi3", "gpt-neox", "mixtral", "qwen2-moe")
