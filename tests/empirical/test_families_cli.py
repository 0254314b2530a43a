"""Today's families on the command line: built-in names, a degree from a configuration alone (no
weights: the model is built on the meta device), and the bad inputs around them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import transformers

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.models.loading import MODEL_NAMES, config_only, family_config, load_model

TINY_LLAMA = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 2}


@pytest.fixture(scope="module")
def llama_config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with only the config.json of a two-layer, narrow Llama (Llama-3.2-1B's vocabulary)."""
    folder = tmp_path_factory.mktemp("llama-config")
    family_config("llama", **TINY_LLAMA).save_pretrained(folder)
    return folder


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_the_families_are_built_in_names() -> None:
    for name in ("llama", "mistral", "qwen2", "gemma", "phi3", "gpt-neox", "mixtral", "qwen2-moe"):
        assert name in MODEL_NAMES
    model, _ = load_model("gpt-neox", random_init=True, num_layers=1)
    assert type(model).__name__ == "GPTNeoXModel" and model.config.hidden_size == 128


def test_unknown_family_lists_the_known_ones() -> None:
    with pytest.raises(EmpiricalError, match=r"unknown model family 'llama9'.*llama, mistral"):
        family_config("llama9")


def test_degree_from_a_configuration_alone(llama_config_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert config_only(llama_config_dir)
    out_json = tmp_path / "degree.json"
    code, _, err = run_cli(["degree", str(llama_config_dir), "--json", str(out_json)], capsys)
    assert code == 0, err
    report = json.loads(out_json.read_text())["report"]
    assert (report["degree"], report["grade"]) == (1, "asymptotic")
    assert report["outputs"]["hidden_states.1"]["degree"] == 5


def test_measurements_that_run_the_model_name_the_missing_weights(
        llama_config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["similarity", "--model", str(llama_config_dir), "--sentences", "2",
                            "--quiet"], capsys)
    assert code == 2
    assert re.search(r"expected model weights in .*model\.safetensors.*found none", err), err


def test_more_layers_than_the_configuration_has(llama_config_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["degree", str(llama_config_dir), "--num-layers", "3"], capsys)
    assert code == 2 and "num_layers=3 exceeds the 2 layers" in err, err


def test_a_model_type_transformers_does_not_know(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    transformers.LlamaConfig(**TINY_LLAMA).save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["model_type"] = "llama9000"
    (tmp_path / "config.json").write_text(json.dumps(data))
    code, _, err = run_cli(["degree", str(tmp_path)], capsys)
    assert code == 2 and "model_type 'llama9000'" in err, err


@pytest.mark.parametrize("case", ["unknown family", "unknown model_type", "too many layers"])
def test_bad_family_input_is_one_line_and_exit_two(case: str, llama_config_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if case == "unknown family":
        argv = ["degree", "--model", "llama9", "--random-init", "--quiet"]
    elif case == "unknown model_type":
        data = json.loads((llama_config_dir / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps({**data, "model_type": "llama9000"}))
        argv = ["degree", str(tmp_path), "--quiet"]
    else:
        argv = ["degree", str(llama_config_dir), "--num-layers", "3", "--quiet"]
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    if case == "unknown family":  # the message lists every built-in name
        assert all(name in lines[0] for name in MODEL_NAMES), lines[0]
