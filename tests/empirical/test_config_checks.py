"""A model's config.json is input from outside: its size, nesting and numbers are bounded before
parsing, and every size field is checked (type and range) before a model is built from it, the
message naming the file, the field and what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from hypothesis import given
from hypothesis import strategies as st

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.models.builtin import FAMILIES
from empirical.models.config_checks import (
    CONFIG_MAX_BYTES,
    MAX_LAYERS,
    check_config_document,
    check_fits_memory,
)
from empirical.models.loading import family_config, load_model, minilm_path

TINY = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,
        "vocab_size": 50}


def _config_folder(folder: Path, **fields: object) -> Path:
    data = transformers.BertConfig(**TINY).to_dict() | fields
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("num_hidden_layers", -1, "got -1"),
    ("num_hidden_layers", 1_000_000_000, "got 1000000000"),
    ("num_hidden_layers", "twelve", "got 'twelve' (str)"),
    ("num_hidden_layers", 2.0, "got 2.0"),
    ("vocab_size", 0, "got 0"),
    ("num_attention_heads", 0, "got 0"),
    ("num_attention_heads", True, "got True (bool)"),
])
def test_a_config_only_folder_with_a_bad_size_is_refused_naming_file_and_field(
        tmp_path, capsys, field, value, expected):
    folder = _config_folder(tmp_path / "model", **{field: value})
    assert main(["degree", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"expected {field} in {folder / 'config.json'} to be an integer ≥ 1 and ≤" in err
    assert expected in err and err.count("\n") == 1


@pytest.mark.parametrize(("text", "expected"), [
    ('{"num_hidden_layers": 1e999999999}', "1e999999999 is not a finite number; expected finite numbers"),
    ('{"vocab_size": ' + "9" * 5000 + "}", "expected numbers of at most 40 characters"),
    ("[" * 50_000 + "]" * 50_000, "its arrays and objects nest deeper than 32 levels"),
    ('{"model_type": "bert", "model_type": "gpt2"}', "the key 'model_type' appears twice in one object"),
    ('{"a": NaN}', "NaN is not a JSON number; expected strict JSON"),
])
def test_a_config_json_is_parsed_with_bounds(tmp_path, text, expected):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(EmpiricalError, match=r"config\.json") as caught:
        load_model(tmp_path, device="meta")
    assert expected in str(caught.value)


def test_a_config_json_that_is_not_utf8_or_too_long_is_refused(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"model_type": "b\xffert"}')
    with pytest.raises(EmpiricalError,
                       match=r"byte 17 \(0xff\) is not UTF-8; expected a configuration in UTF-8 text"):
        load_model(tmp_path, device="meta")
    (tmp_path / "config.json").write_bytes(b" " * (CONFIG_MAX_BYTES + 1))
    with pytest.raises(EmpiricalError,
                       match=f"expected a configuration of at most {CONFIG_MAX_BYTES:,} bytes"):
        load_model(tmp_path, device="meta")


@given(field=st.sampled_from(["num_hidden_layers", "num_attention_heads", "vocab_size", "hidden_size",
                              "n_layer", "num_key_value_heads", "max_position_embeddings"]),
       value=st.integers(max_value=0) | st.integers(min_value=2**27 + 1)
       | st.text(max_size=8) | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2))
def test_any_size_out_of_range_or_of_another_type_is_refused(field, value):
    with pytest.raises(EmpiricalError, match=f"expected {field} in m/config.json to be an integer"):
        check_config_document({field: value}, Path("m/config.json"))


@given(layers=st.integers(1, MAX_LAYERS), heads=st.integers(1, 4096), vocabulary=st.integers(1, 2**24))
def test_sizes_in_range_are_accepted(layers, heads, vocabulary):
    data = {"num_hidden_layers": layers, "num_attention_heads": heads, "vocab_size": vocabulary,
            "num_key_value_heads": None, "text_config": {"num_hidden_layers": layers}}
    assert check_config_document(data, Path("config.json")) == data


def test_a_nested_configuration_is_checked_too():
    with pytest.raises(EmpiricalError, match=r"expected text_config\.vocab_size in c.json"):
        check_config_document({"text_config": {"vocab_size": 0}}, Path("c.json"))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_built_in_family_and_the_packaged_model_pass(family):
    data = json.loads(family_config(family).to_json_string())
    check_config_document(data, Path("config.json"))
    check_config_document(json.loads((minilm_path() / "config.json").read_text()), Path("config.json"))


def test_a_model_too_large_for_memory_is_refused_before_building_and_the_meta_device_builds_it(
        tmp_path):
    folder = _config_folder(tmp_path / "huge", hidden_size=2**16, num_attention_heads=64,
                            intermediate_size=2**18, num_hidden_layers=64)
    with pytest.raises(EmpiricalError, match=r"GiB in float32, and this machine has .*--device meta"):
        load_model(folder, random_init=True)
    check_fits_memory(transformers.BertConfig(**TINY), torch.device("cpu"), "tiny")  # fits


def test_num_layers_beyond_the_limit_is_refused():
    with pytest.raises(EmpiricalError, match=f"num_layers to be an integer ≥ 1 and ≤ {MAX_LAYERS}"):
        load_model("bert", random_init=True, num_layers=10**9, device="meta")
