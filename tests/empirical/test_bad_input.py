"""Every bad input is a clear error: exit code 2 and one line from the CLI, EmpiricalError from Python.

Each case asserts that the message names what was expected and what arrived.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch import nn

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.measure.similarity import representation_similarity
from empirical.models.loading import load_model


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def fast(tiny_bert_dir: Path, *more: str) -> list[str]:
    return ["similarity", "--model", str(tiny_bert_dir), "--sentences", "2", "--quiet", *more]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["similarity", "--num-layers", "8"], r"num_layers=8 exceeds the 6 layers.*expected at most 6"),
        (["similarity", "--device", "cuda"], r"expected a device that exists here, got 'cuda'"),
        (["similarity", "--device", "gpu7"], r"expected a torch device such as cpu or cuda:0, got 'gpu7'"),
        (["similarity", "--model", "org/none", "--cache-dir", "/nonexistent"],
         r"unknown model 'org/none'.*no snapshot of org/none"),
        (["report", "--model", "nope:factory"], r"cannot load the model factory 'nope:factory'"),
        (["degree", "--device", "gpu7"], r"expected a torch device such as cpu or cuda:0, got 'gpu7'"),
        (["projection", "--device", "gpu7"], r"expected a torch device such as cpu or cuda:0, got 'gpu7'"),
        (["train", "--device", "gpu7"], r"expected a torch device such as cpu or cuda:0, got 'gpu7'"),
    ],
)
def test_cli_refuses_before_any_measurement(argv: list[str], expected: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"normsat {argv[0]}: error: ")
    assert re.search(expected, err), err


def test_max_length_below_the_special_tokens(tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(fast(tiny_bert_dir, "--max-length", "2"), capsys)
    assert code == 2 and "expected max_length of at least 3 tokens" in err and "max_length=2" in err


def test_truncation_is_real_and_recorded(tiny_bert_dir: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(fast(tiny_bert_dir, "--max-length", "4", "--json", str(out))) == 0
    err = capsys.readouterr().err
    assert "normsat: warning: 2 of 2 sentences are longer than 4 tokens" in err
    assert "warnings.warn" not in err  # no source line of the library
    run = json.loads(out.read_text())["runs"][0]
    assert run["max_length"] == 4 and run["n_truncated"] == 2 and run["n_tokens"] == {"all": 8}


@pytest.mark.parametrize(
    ("option", "name", "expected"),
    [
        ("--json", "folder", "expected a file name for --json, got the existing folder"),
        ("--json", "run.txt", "expected --json to end in one of .json, got"),
        ("--json", "afile/run.json", "is a file, not a folder"),
        ("--plot", "plot.xyz", "expected --plot to end in one of .eps, .jpeg"),
    ],
)
def test_output_paths_are_checked_before_the_computation(
        tiny_bert_dir: Path, tmp_path: Path, option: str, name: str, expected: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("")

    def no_measurement(*_: Any, **__: Any) -> None:
        raise AssertionError("the model was loaded before the output path was checked")

    monkeypatch.setattr("empirical.cli.commands.common.load_model", no_measurement)
    code, err = run_cli(fast(tiny_bert_dir, option, str(tmp_path / name)), capsys)
    assert code == 2 and expected in err, err


def test_report_onto_a_file_and_no_empty_folder_after_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "report.md"
    existing.write_text("keep me")
    code, err = run_cli(["report", "--out", str(existing)], capsys)
    assert code == 2 and f"expected a folder for --out, but {existing} is an existing file" in err
    assert existing.read_text() == "keep me"
    fresh = tmp_path / "new-report"
    code, err = run_cli(["report", "--out", str(fresh), "--corpus", str(tmp_path / "none.txt"),
                         "--num-layers", "1", "--quiet"], capsys)
    assert code == 2 and "does not exist" in err and not fresh.exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Caf\xe9 au lait.\n".encode("latin-1"), "has byte 0xe9 at offset 3 that is not UTF-8"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "holds binary data (a NUL byte at offset 8)"),
        (b"# only a comment\n\n", "expected at least one sentence"),
    ],
)
def test_corpus_that_is_not_utf8_text(tiny_bert_dir: Path, tmp_path: Path, content: bytes, expected: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    code, err = run_cli(fast(tiny_bert_dir, "--corpus", str(corpus)), capsys)
    assert code == 2 and "expected" in err and expected in err, err
    code, err = run_cli(fast(tiny_bert_dir, "--corpus", str(tmp_path)), capsys)
    assert code == 2 and f"expected a text file of sentences, but {tmp_path} is a folder" in err


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("{not json", r"the configuration .*config\.json: not JSON \("),
        ("[1, 2]", r"expected .*config\.json to hold a JSON object, got list"),
        ('{"model_type": "no-such-model"}',
         r"configuration transformers .* knows \(model_type 'no-such-model'\)"),
    ],
)
def test_malformed_or_unknown_config(tmp_path: Path, config: str, expected: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(config)
    with pytest.raises(EmpiricalError, match=expected):
        load_model(tmp_path)
    code, err = run_cli(["degree", "--model", str(tmp_path)], capsys)
    # One line, even where transformers' own multi-line advice is part of the message.
    assert code == 2 and "config.json" in err and err.count("\n") == 1
    assert err.startswith("normsat degree: error: ")


def test_errors_are_one_clean_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A dependency's message with terminal colours and several lines, as torch.load's are.
    (tmp_path / "noisy_factories.py").write_text(
        "def noisy():\n    raise RuntimeError('\\x1b[1mWeights only load failed.\\x1b[0m\\n\\n"
        "  Check the file.\\n')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, err = run_cli(["degree", "--model", "noisy_factories:noisy"], capsys)
    assert code == 2 and err.count("\n") == 1 and "\x1b" not in err
    assert "raised RuntimeError: Weights only load failed. Check the file.; expected" in err


def test_tokenizer_that_does_not_fit_the_embeddings(tiny_bert_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = transformers.BertConfig.from_pretrained(tiny_bert_dir, vocab_size=50)
    transformers.BertModel(config).save_pretrained(tmp_path)
    code, err = run_cli(["similarity", "--model", str(tmp_path), "--sentences", "1"], capsys)
    assert code == 2 and "30522 tokens, but the model's embedding table has 50 rows" in err


def test_python_api_bare_string_is_one_sentence(minilm: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm
    result = representation_similarity(model, tokenizer, "One sentence.", scale=10.0)
    assert result.n_sentences == 1
    assert result.n_tokens[""] == len(tokenizer("One sentence.")["input_ids"])
    with pytest.raises(EmpiricalError, match="expected sentences as strings, got items of type int"):
        representation_similarity(model, tokenizer, ["fine", 3])  # type: ignore[list-item]


def test_python_api_model_without_hidden_states(minilm: tuple[nn.Module, Any]) -> None:
    _, tokenizer = minilm
    with pytest.raises(EmpiricalError, match=r"expected a Hugging Face model .* Embedding"):
        representation_similarity(nn.Embedding(30522, 4).eval(), tokenizer, ["A sentence."])
    with pytest.raises(EmpiricalError, match=r"expected a transformer .* got str"):
        representation_similarity("minilm", tokenizer, ["A sentence."])  # type: ignore[arg-type]


def test_python_api_non_finite_weights_name_the_parameter(tiny_bert_dir: Path) -> None:
    model, tokenizer = load_model(tiny_bert_dir)
    with torch.no_grad():
        model.encoder.layer[0].output.dense.weight[0, 0] = float("nan")
    with pytest.raises(EmpiricalError, match=r"parameter 'encoder\.layer\.0\.output\.dense\.weight' has "
                                             r"non-finite entries"):
        representation_similarity(model, tokenizer, ["A sentence."])


def test_python_api_dtype_and_device(tiny_bert_dir: Path) -> None:
    model, _ = load_model(tiny_bert_dir, dtype="float64")
    assert next(model.parameters()).dtype == torch.float64
    with pytest.raises(EmpiricalError, match=r"expected a floating dtype among .*float32.*, got 'float8'"):
        load_model(tiny_bert_dir, dtype="float8")
    with pytest.raises(EmpiricalError, match=r"expected a floating dtype .* got torch\.int64"):
        load_model(tiny_bert_dir, dtype=torch.int64)
    with pytest.raises(EmpiricalError, match="0 CUDA devices"):
        load_model(tiny_bert_dir, device="cuda:1")


@pytest.fixture(scope="module")
def small_vocabulary_bert(tiny_bert_dir: Path) -> nn.Module:
    """TINY_BERT with a 1000-row embedding table: MiniLM's tokenizer (30522 ids) does not fit it."""
    config = transformers.BertConfig.from_pretrained(tiny_bert_dir, vocab_size=1000)
    torch.manual_seed(0)
    return transformers.BertModel(config, add_pooling_layer=False).eval()


def test_python_api_tokenizer_that_does_not_fit_the_embeddings(
        small_vocabulary_bert: nn.Module, minilm: tuple[nn.Module, Any]) -> None:
    from empirical import claims

    _, tokenizer = minilm
    model = small_vocabulary_bert
    ids = tokenizer("zebra xylophone quantum")["input_ids"]
    assert max(ids) >= 1000  # the words' ids lie beyond the model's table
    expected = rf"embedding table has 1000 rows\), got id {max(ids)}"
    with pytest.raises(EmpiricalError, match=expected):
        representation_similarity(model, tokenizer, ["zebra xylophone quantum"], progress=False)
    with pytest.raises(EmpiricalError, match=expected):
        claims.assert_saturated(model, ids, 1e3, 1e-3)
    with pytest.raises(EmpiricalError, match=expected):
        claims.assert_homogeneous(model, ids)
    with pytest.raises(EmpiricalError, match=expected):
        claims.assert_saturated(model, {"input_ids": torch.tensor([ids])}, 1e3, 1e-3)
    # Ids the model embeds pass the check.
    claims.assert_saturated(model, [101, 999, 102], 1e5, 1.0)


def test_a_factory_that_raises_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from empirical.models.factories import make

    (tmp_path / "raising_factories.py").write_text(
        "def boom():\n    raise ValueError('user code failed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    expected = "the model factory raising_factories:boom raised ValueError: user code failed"
    with pytest.raises(EmpiricalError, match=expected):
        make("raising_factories:boom")
    code, err = run_cli(["degree", "--model", "raising_factories:boom"], capsys)
    assert code == 2 and err == f"normsat degree: error: {expected}; expected it to build and " \
                                "return a model\n"
