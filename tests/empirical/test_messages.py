"""Messages that say what actually happened: UTF-16 named as such, a file that is not a folder, a
norm that overflows although the weights are finite, silently wrong inputs refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import safetensors.torch
import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model, load_tokenizer
from empirical.training.checkpoints import scan_checkpoints
from homogeneity import analyze
from homogeneity.errors import HomogeneityError
from saturated import saturate
from saturated.errors import SaturationError

TEXT = "The norm grows.\nHard attention is uniform.\n"


@pytest.mark.parametrize(("encoding", "why"), [
    ("utf-16", "starts with a UTF-16 byte-order mark"),  # Python writes the BOM
    ("utf-16-le", "little-endian without a byte-order mark"),
    ("utf-16-be", "big-endian without a byte-order mark"),
])
def test_a_utf16_corpus_is_named_as_utf16(encoding: str, why: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(TEXT.encode(encoding))
    with pytest.raises(EmpiricalError, match=rf"is UTF-16 text \((it )?{why}"):
        load_corpus(corpus)


def test_binary_data_is_still_named_binary(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.bin"
    corpus.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(EmpiricalError, match="holds binary data"):
        load_corpus(corpus)


def test_a_line_separator_inside_a_sentence_keeps_it_whole(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("First half\u2028second half.\r\nNext\x85one.\nLast.\r", encoding="utf-8")
    assert load_corpus(corpus).sentences == ("First half\u2028second half.", "Next\x85one.", "Last.")


def test_an_empty_corpus_name_is_not_the_current_folder() -> None:
    with pytest.raises(EmpiricalError, match="expected path to be a file name, got ''"):
        load_corpus("")


def test_a_tokenizer_path_that_is_a_file_is_not_called_missing(tmp_path: Path) -> None:
    file = tmp_path / "vocab.txt"
    file.write_text("[PAD]\n")
    with pytest.raises(EmpiricalError, match=f"got {file}, which is a file, not a folder"):
        load_tokenizer(file)
    with pytest.raises(EmpiricalError, match="which does not exist"):
        load_tokenizer(tmp_path / "nothing")


def test_an_unknown_model_folder_is_named_as_the_user_gave_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EmpiricalError, match=r"no directory exists at \./my-model$"):
        load_model("./my-model")


def test_finite_weights_whose_norm_overflows_are_not_called_nan(tmp_path: Path) -> None:
    paths = []
    for step, value in ((1, 1.0), (2, 1e200)):  # (1e200)² overflows float64
        paths.append(tmp_path / f"step-{step}.safetensors")
        safetensors.torch.save_file({"w": torch.full((3,), value, dtype=torch.float64)}, paths[-1])
    with pytest.raises(EmpiricalError, match=r"are finite, but their norm overflows float64.*"
                                             r"largest \|θ\| = 1e\+200"):
        scan_checkpoints(paths)
    safetensors.torch.save_file({"w": torch.tensor([1.0, 2.0, float("nan")])}, paths[-1])
    with pytest.raises(EmpiricalError, match="found NaN entries in 'w'"):
        scan_checkpoints(paths)


def test_integer_inputs_to_a_float_layer_are_refused_as_eager_pytorch_does() -> None:
    layer = nn.Linear(3, 2)
    ids = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(RuntimeError):
        layer(ids)  # what eager PyTorch says
    with pytest.raises(HomogeneityError, match=r"got the input 'input' of dtype int64 at aten\.linear"):
        analyze(layer, ids)
    with pytest.raises(SaturationError, match="got the input 'input' of dtype int64"):
        saturate(layer, ids)
    assert analyze(layer, ids.float()).degree == 1  # the same input, cast by its owner


def test_token_ids_still_reach_an_embedding_table() -> None:
    embedding = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2, bias=False))
    assert analyze(embedding, torch.tensor([[1, 2, 3]])).degree == 2


def test_complex_parameters_and_inputs_are_refused() -> None:
    with pytest.warns(UserWarning, match="Complex modules"):
        layer = nn.Linear(3, 2).to(torch.complex64)
    with pytest.raises(HomogeneityError, match="the complex64 parameter 'weight' of Linear"):
        analyze(layer, torch.ones(1, 3, dtype=torch.complex64))
    with pytest.raises(HomogeneityError, match="the complex64 input 0 of Linear"):
        analyze(nn.Linear(3, 2), torch.ones(1, 3, dtype=torch.complex64))


def test_a_model_without_weights_is_refused_for_what_needs_them() -> None:
    with torch.device("meta"):
        layer = nn.Linear(3, 2)
    assert analyze(layer, torch.ones(1, 3, device="meta")).degree == 1  # a degree needs no weights
    with pytest.raises(SaturationError, match="Linear on the meta device"):
        saturate(layer, torch.ones(1, 3, device="meta"))
