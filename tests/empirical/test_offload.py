"""Models larger than memory (accelerate's device maps and offload) and 16-bit models computing in float32.

A narrow three-layer Llama is written as sharded safetensors; loaded with a ``max_memory`` that
holds only its embedding and first layer, the rest stays on disk and is streamed in as each
layer runs. Its similarity at c = 1000 equals the in-memory model's to float32 rounding (the
same float32 products, in another order of calls), and neither the checkpoint's files, the
offload folder's files nor the weights in memory change. Its exact limit (c = ∞) reads the
offloaded weights one tensor at a time and equals the in-memory model's: the same entries
determined, the same values to float32 rounding.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from empirical import representation_similarity
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.measure.scaled import limit_model
from empirical.models import placed_weights
from empirical.models.loading import _build, family_config, load_model
from saturated import SaturationError, Settings

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


def _limit_inputs(tokenizer: Any) -> dict[str, torch.Tensor]:
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}


def test_the_exact_limit_of_an_offloaded_model_equals_the_in_memory_one(
        folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The placed model is exported first (from fake tensors standing for its offloaded weights),
    then serves the in-memory model from the export cache: one graph, two weight sources."""
    monkeypatch.setenv("NORMSAT_CACHE_DIR", str(tmp_path / "exports"))
    whole, tokenizer = load_model(folder)
    offload = tmp_path / "offload"
    placed, _ = load_model(folder, max_memory=FITS_TWO_BLOCKS, offload_folder=offload)
    offloaded = {name for name, p in placed.named_parameters() if p.is_meta}
    assert len(offloaded) >= 10
    files, kept, before = digests(folder), digests(offload), in_memory_values(placed)
    inputs = _limit_inputs(tokenizer)
    theirs = limit_model(placed, Settings(), undetermined="nan")(**inputs, output_hidden_states=True)
    ours = limit_model(whole, Settings(), undetermined="nan")(**inputs, output_hidden_states=True)
    assert theirs.degrees.hidden_states == ours.degrees.hidden_states
    for mine, reference in zip(theirs.value.hidden_states, ours.value.hidden_states, strict=True):
        assert torch.equal(mine.isnan(), reference.isnan())  # the same entries determined
        assert torch.allclose(mine.nan_to_num(), reference.nan_to_num(), rtol=1e-6, atol=1e-6)
    result = representation_similarity(placed, tokenizer, SENTENCES, scale=float("inf"))
    expected = representation_similarity(whole, tokenizer, SENTENCES, scale=float("inf"))
    assert result.per_layer == pytest.approx(expected.per_layer, rel=1e-6, abs=1e-6)
    after = in_memory_values(placed)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert {name for name, p in placed.named_parameters() if p.is_meta} == offloaded
    assert digests(folder) == files and digests(offload) == kept


def test_the_limit_reads_offloaded_weights_as_the_graph_needs_them(
        folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each offloaded tensor is read when a node first needs it and dropped after its last use:
    far fewer of them are alive at once than the model holds."""
    placed, tokenizer = load_model(folder, max_memory=FITS_TWO_BLOCKS, offload_folder=tmp_path)
    alive: list[weakref.ref[torch.Tensor]] = []
    most = 0
    read = placed_weights._Offloaded.read

    def counted(self: Any) -> torch.Tensor:
        nonlocal most
        value = read(self)
        alive[:] = [ref for ref in alive if ref() is not None] + [weakref.ref(value)]
        most = max(most, len(alive))
        return value

    monkeypatch.setattr(placed_weights._Offloaded, "read", counted)
    limit_model(placed, Settings(), undetermined="nan")(**_limit_inputs(tokenizer))
    total = sum(p.is_meta for p in placed.parameters())
    assert 0 < most <= total // 2, (most, total)


def test_a_non_finite_offloaded_weight_is_named(folder: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    model, tokenizer = load_model(folder)
    with torch.no_grad():
        model.layers[2].mlp.up_proj.weight[0, 0] = float("inf")
    model.save_pretrained(broken)
    placed, _ = load_model(broken, max_memory=FITS_TWO_BLOCKS, offload_folder=tmp_path / "off")
    with pytest.raises(SaturationError, match=r"parameter 'layers.2.mlp.up_proj.weight' has non-finite"):
        limit_model(placed, Settings())(**_limit_inputs(tokenizer))


def test_heads_and_the_exact_similarity_accept_max_memory(folder: Path, tmp_path: Path) -> None:
    runs = {}
    for label, placement in (("placed", ["--max-memory", FITS_TWO_BLOCKS, "--offload-folder",
                                         str(tmp_path / "off")]), ("whole", [])):
        for command in ("heads", "similarity"):
            out = tmp_path / f"{command}-{label}.json"
            extra = ["--scale", "inf"] if command == "similarity" else []
            assert main([command, "--model", str(folder), "--sentences", "2", "--quiet", *extra,
                         *placement, "--json", str(out)]) == 0
            runs[command, label] = json.loads(out.read_text())["runs"][0]
    assert runs["similarity", "placed"]["placement"]["disk"] >= 2
    layers = {label: runs["similarity", label]["layers"] for label in ("placed", "whole")}
    assert [(layer["name"], layer["undetermined_tokens"]) for layer in layers["placed"]] == \
        [(layer["name"], layer["undetermined_tokens"]) for layer in layers["whole"]]
    assert [layer["similarity"] for layer in layers["placed"]] == \
        pytest.approx([layer["similarity"] for layer in layers["whole"]], rel=1e-6, abs=1e-6)
    placed, whole = runs["heads", "placed"]["heads"], runs["heads", "whole"]["heads"]
    exact = ("layer", "head", "queries", "undetermined", "class")  # what the limit decides
    assert [{k: h[k] for k in exact} for h in placed] == [{k: h[k] for k in exact} for h in whole]
    assert [h["positions"] for h in placed] == pytest.approx([h["positions"] for h in whole], rel=1e-6)
