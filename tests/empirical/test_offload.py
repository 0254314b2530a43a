"""Models larger than memory (accelerate's device maps and offload) and 16-bit models computing in float32.

A narrow three-layer Llama is written as sharded safetensors; loaded with a ``max_memory`` that
holds only its embedding and first layer, the rest stays on disk and is streamed in as each
layer runs. Its similarity at c = 1000 equals the in-memory model's to float32 rounding (the
same float32 products, in another order of calls), and neither the checkpoint's files, the
offload folder's files nor the weights in memory change.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from empirical import representation_similarity
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.models.loading import _build, family_config, load_model

SENTENCES = ["The cat sat on the mat.", "A dog ran far away from home today."]
LLAMA = {"hidden_size": 32, "num_attention_heads": 4, "vocab_size": 30522, "num_hidden_layers": 3,
         "intermediate_size": 64, "num_key_value_heads": 2, "head_dim": 8}
FITS_TWO_BLOCKS = "4MB"
"""The embedding (30522 × 32 float32: 3.9 MB) and one layer: the other layers go to disk."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("llama")
    _build(family_config("llama", **LLAMA), seed=5).eval().save_pretrained(where, max_shard_size="100KB")
    return where


def digests(where: Path) -> dict[str, str]:
    return {str(path.relative_to(where)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(where.rglob("*")) if path.is_file()}


def in_memory_values(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in model.state_dict().items() if t.device.type != "meta"}


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_offloaded_similarity_equals_in_memory_and_writes_nothing(folder: Path, tmp_path: Path,
                                                                  scale: float) -> None:
    whole, tokenizer = load_model(folder)
    offload = tmp_path / "offload"
    placed, _ = load_model(folder, max_memory=FITS_TWO_BLOCKS, offload_folder=offload)
    assert "disk" in placed.hf_device_map.values() and "cpu" in placed.hf_device_map.values()
    files, kept = digests(folder), digests(offload)
    before = in_memory_values(placed)
    ours = representation_similarity(whole, tokenizer, SENTENCES, scale=scale)
    theirs = representation_similarity(placed, tokenizer, SENTENCES, scale=scale)
    assert theirs.per_layer == pytest.approx(ours.per_layer, rel=1e-6, abs=1e-6)
    assert theirs.record["placement"]["disk"] >= 2 and theirs.record["compute_dtype"] == "torch.float32"
    after = in_memory_values(placed)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert digests(folder) == files and digests(offload) == kept


def test_a_random_init_model_dispatched_to_disk_measures_as_in_memory(folder: Path, tmp_path: Path) -> None:
    whole, tokenizer = load_model(folder, random_init=True, seed=2)
    mapping = {"embed_tokens": "cpu", "layers.0": "cpu", "layers.1": "disk", "layers.2": "disk",
               "norm": "cpu", "rotary_emb": "cpu"}
    placed, _ = load_model(folder, random_init=True, seed=2, device_map=mapping, offload_folder=tmp_path)
    assert placed.hf_device_map == mapping
    reference = representation_similarity(whole, tokenizer, SENTENCES)
    result = representation_similarity(placed, tokenizer, SENTENCES)
    assert result.per_layer == pytest.approx(reference.per_layer, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_model_computes_in_float32_at_c_1000(dtype: torch.dtype) -> None:
    """The 16-bit model gives what a float32 model holding the same (rounded) weights gives, where
    computing in its own dtype overflows (float16) or loses the leading order (bfloat16)."""
    narrow, tokenizer = load_model("bert", random_init=True, num_layers=2, dtype=dtype)
    wide, _ = load_model("bert", random_init=True, num_layers=2)
    wide.load_state_dict({name: t.float() for name, t in narrow.state_dict().items()})
    result = representation_similarity(narrow, tokenizer, SENTENCES, scale=1000.0)
    expected = representation_similarity(wide, tokenizer, SENTENCES, scale=1000.0)
    assert result.record["dtype"] == str(dtype) and result.record["compute_dtype"] == "torch.float32"
    assert result.per_layer == pytest.approx(expected.per_layer, rel=1e-6, abs=1e-6)
    assert all(p.dtype == dtype for p in narrow.parameters())


def _error(capsys: pytest.CaptureFixture[str], command: str, *options: str) -> str:
    corpus = [] if command == "degree" else ["--sentences", "1"]
    assert main([command, *options, *corpus, "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("command", ["similarity", "heads", "degree"])
def test_placement_errors_are_one_line_and_exit_2(command: str, folder: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model = ["--model", str(folder)]
    if command != "degree":  # the degree is derived on the meta device: it holds no weights
        assert "below the largest block" in _error(capsys, command, *model, "--max-memory", "100KB",
                                                   "--offload-folder", str(tmp_path / "off"))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert "expected a writable folder for --offload-folder" in _error(
        capsys, command, *model, "--max-memory", "1GiB", "--offload-folder", str(blocked / "off"))
    assert "--device-map names 'cuda:7'" in _error(capsys, command, *model, "--device-map", "cuda:7")
    assert "--device-map (module 'layers.0') names 'cuda:1'" in _error(
        capsys, command, *model, "--device-map", json.dumps({"embed_tokens": "cpu", "layers.0": 1}))


def test_max_memory_without_an_offload_folder_says_what_to_add(folder: Path) -> None:
    with pytest.raises(EmpiricalError, match="expected --offload-folder DIR"):
        load_model(folder, max_memory=FITS_TWO_BLOCKS)


def test_the_cli_measures_an_offloaded_model(folder: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["similarity", "--model", str(folder), "--sentences", "2", "--quiet", "--max-memory",
                 FITS_TWO_BLOCKS, "--offload-folder", str(tmp_path / "off"), "--json", str(out)]) == 0
    run = json.loads(out.read_text())["runs"][0]
    assert run["compute_dtype"] == "torch.float32" and run["placement"]["disk"] >= 2
    assert main(["degree", "--model", str(folder), "--quiet", "--max-memory", FITS_TWO_BLOCKS,
                 "--offload-folder", str(tmp_path / "off")]) == 0
    assert "last_hidden_state" in capsys.readouterr().out


def test_the_exact_limit_of_a_placed_model_is_refused_by_name(folder: Path, tmp_path: Path) -> None:
    placed, tokenizer = load_model(folder, max_memory=FITS_TWO_BLOCKS, offload_folder=tmp_path)
    with pytest.raises(EmpiricalError, match=r"the exact limit \(c = ∞\) traces the model with its "
                                             r"weights in memory; load it without --device-map"):
        representation_similarity(placed, tokenizer, SENTENCES, scale=float("inf"))
