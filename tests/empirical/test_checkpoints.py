"""Reading checkpoints in every supported format, and scanning a run's norms offline."""

from __future__ import annotations

import json
import weakref

import pytest
import safetensors.torch
import torch
import transformers

import empirical.training.checkpoints as checkpoints
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.models.formats import read_state_dict
from empirical.training.checkpoints import (
    order_checkpoints,
    scan_checkpoints,
    step_from_name,
)
from empirical.training.norms import NormTracker


def tiny_gpt2(width: int = 16, seed: int = 0) -> transformers.GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=width, n_layer=2,
                                     n_head=2, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def same(state: dict[str, torch.Tensor], model: torch.nn.Module) -> bool:
    expected = model.state_dict()
    return all(torch.equal(state[name], expected[name]) for name in state) and bool(state)


def test_safetensors_file_and_model_folders(tmp_path):
    model = tiny_gpt2()
    safetensors.torch.save_model(model, str(tmp_path / "step-1.safetensors"))
    model.save_pretrained(tmp_path / "single")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    for path in (tmp_path / "step-1.safetensors", tmp_path / "single", tmp_path / "sharded"):
        state = read_state_dict(path)
        assert same(state, model), path
        assert "transformer.h.1.mlp.c_proj.weight" in state


def test_pickled_state_dicts_single_sharded_and_wrapped(tmp_path):
    model = tiny_gpt2()
    state = model.state_dict()
    torch.save(state, tmp_path / "weights.pt")
    torch.save({"state_dict": state, "step": 3}, tmp_path / "wrapped.pt")
    folder = tmp_path / "bin"
    folder.mkdir()
    torch.save(state, folder / "pytorch_model.bin")
    sharded = tmp_path / "bin-sharded"
    sharded.mkdir()
    names = list(state)
    halves = {"pytorch_model-00001-of-00002.bin": names[: len(names) // 2],
              "pytorch_model-00002-of-00002.bin": names[len(names) // 2:]}
    for file, keys in halves.items():
        torch.save({k: state[k] for k in keys}, sharded / file)
    index = {"weight_map": {k: file for file, keys in halves.items() for k in keys}}
    (sharded / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    for path in (tmp_path / "weights.pt", tmp_path / "wrapped.pt", folder, sharded):
        loaded = read_state_dict(path)
        assert set(loaded) == set(state) and same(loaded, model), path


def test_pickles_with_code_are_refused_in_one_clean_line(tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "model.pt")  # a pickled module: code, not tensors
    with pytest.raises(EmpiricalError, match="normsat will not unpickle code") as caught:
        read_state_dict(tmp_path / "model.pt")
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message  # torch's own text has both
    assert str(tmp_path / "model.pt") in message and "torch.nn.modules.linear.Linear" in message


@pytest.mark.parametrize(("content", "message"), [
    ([1, 2, 3], "expected .* to hold a state dict .* got list"),
    ({"w": torch.ones(2), "note": "text"}, "note is not tensors"),
])
def test_non_state_dicts_are_refused(tmp_path, content, message):
    torch.save(content, tmp_path / "odd.pt")
    with pytest.raises(EmpiricalError, match=message):
        read_state_dict(tmp_path / "odd.pt")


def test_unreadable_and_missing_paths(tmp_path):
    (tmp_path / "broken.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(EmpiricalError, match="cannot be read"):
        read_state_dict(tmp_path / "broken.safetensors")
    with pytest.raises(EmpiricalError, match="does not exist"):
        read_state_dict(tmp_path / "nothing.safetensors")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmpiricalError, match="expected model weights in"):
        read_state_dict(tmp_path / "empty")


@pytest.mark.parametrize(("name", "step"), [
    ("step-00400.safetensors", 400), ("checkpoint-400", 400), ("run3/ckpt_12.pt", 12),
    ("checkpoint-300/model.safetensors", 300), ("final.pt", None), ("model-2-v7.bin", 7),
    # dots inside the name: only the weight suffix is stripped
    ("gpt2-lr0.001-step400.safetensors", 400), ("ckpt.step100.pt", 100), ("w.step7.pth", 7),
    # a file without a number does not take its folder's number ...
    ("run1/final.pt", None), ("run2/weights.safetensors", None),
    # ... except a Hugging Face weight file, whose shard numbers are not steps
    ("checkpoint-500/pytorch_model.bin", 500),
    ("checkpoint-600/model-00001-of-00002.safetensors", 600),
    ("checkpoint-700/pytorch_model-00002-of-00003.bin", 700),
    ("final/model.safetensors", None),
])
def test_step_from_name(name, step):
    assert step_from_name(name) == step


def test_order_checkpoints(tmp_path):
    glob_order = ["c/checkpoint-1000", "c/checkpoint-200", "c/checkpoint-30"]
    assert [s for _, s in order_checkpoints(glob_order)] == [30, 200, 1000]
    assert [s for _, s in order_checkpoints(["a.pt", "b.pt"], [5, 9])] == [5, 9]
    with pytest.raises(EmpiricalError, match=r"step number in the name of final\.pt.*--at-steps"):
        order_checkpoints(["step-1.pt", "final.pt"])
    with pytest.raises(EmpiricalError, match=r"step number in the name of run1/final\.pt"):
        order_checkpoints(["run1/step-5.pt", "run1/final.pt"])
    with pytest.raises(EmpiricalError, match=r"step number in the folder of last/model\.safetensors"):
        order_checkpoints(["checkpoint-5/model.safetensors", "last/model.safetensors"])
    with pytest.raises(EmpiricalError, match="step 4 twice"):
        order_checkpoints(["a/step-4.pt", "b/step-4.pt"])
    with pytest.raises(EmpiricalError, match="increasing order without duplicates, got 3 after 5"):
        order_checkpoints(["a.pt", "b.pt"], [5, 3])
    with pytest.raises(EmpiricalError, match="got 1 steps for 2 checkpoints"):
        order_checkpoints(["a.pt", "b.pt"], [5])


def _run(tmp_path, steps=(0, 2, 4, 6, 8)):
    """Train a tiny GPT-2, saving checkpoints, and track the same states live."""
    model = tiny_gpt2()
    live = NormTracker(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.randint(0, 40, (4, 10), generator=torch.Generator().manual_seed(0))
    paths = []
    for step in range(max(steps) + 1):
        if step in steps:
            live.record(step)
            path = tmp_path / f"step-{step:05d}.safetensors"
            safetensors.torch.save_model(model, str(path))
            paths.append(path)
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return live, paths


def test_scan_matches_live_tracking(tmp_path):
    live, paths = _run(tmp_path)
    scanned, ordered = scan_checkpoints(list(reversed(paths)))
    assert [s for _, s in ordered] == [0, 2, 4, 6, 8]
    for offline, online in zip(scanned.records, live.records):
        assert offline["norm"] == pytest.approx(online["norm"], rel=1e-12)
        assert offline["layers"] == pytest.approx(online["layers"], rel=1e-12)
        assert offline["groups"] == pytest.approx(online["groups"], rel=1e-12)
        if online["cosine_prev"] is None:
            assert offline["cosine_prev"] is None
        else:
            assert offline["cosine_prev"] == pytest.approx(online["cosine_prev"], abs=1e-12)
            assert offline["layer_cosine_prev"] == pytest.approx(online["layer_cosine_prev"],
                                                                 abs=1e-12)


def test_tied_weights_and_buffers_in_a_pickle_count_once(tmp_path):
    model = tiny_gpt2()
    state = model.state_dict()  # lm_head.weight and transformer.wte.weight share one storage
    assert state["lm_head.weight"].data_ptr() == state["transformer.wte.weight"].data_ptr()
    state["transformer.h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 16, 16))  # GPT-2's old mask
    state["transformer.position_ids"] = torch.arange(16)
    torch.save(state, tmp_path / "step-0.pt")
    tracker, _ = scan_checkpoints([tmp_path / "step-0.pt"])
    expected = torch.cat([p.detach().reshape(-1).double() for p in model.parameters()]).norm()
    assert tracker.records[0]["norm"] == pytest.approx(float(expected), rel=1e-12)


def test_at_most_two_checkpoints_are_alive(tmp_path, monkeypatch):
    _live, paths = _run(tmp_path)
    alive: list[weakref.ref] = []
    counts = []
    original = checkpoints.read_state_dict

    def counting(path):
        counts.append(sum(ref() is not None for ref in alive))
        state = original(path)
        alive.append(weakref.ref(state["transformer.h.0.mlp.c_fc.weight"]))
        return state

    monkeypatch.setattr(checkpoints, "read_state_dict", counting)
    scan_checkpoints(paths)
    assert counts == [0, 1, 1, 1, 1]  # while a checkpoint is read, only the previous one is held


def test_mismatched_architectures_name_the_tensor_and_both_shapes(tmp_path):
    safetensors.torch.save_model(tiny_gpt2(16), str(tmp_path / "step-1.safetensors"))
    safetensors.torch.save_model(tiny_gpt2(32), str(tmp_path / "step-2.safetensors"))
    with pytest.raises(EmpiricalError, match=r"tensor 'lm_head.weight' has shape \(40, 32\) in "
                                              r".*step-2.safetensors but \(40, 16\) in .*step-1"):
        scan_checkpoints([tmp_path / "step-1.safetensors", tmp_path / "step-2.safetensors"])


def test_cli_writes_records_fits_and_plot(tmp_path, capsys):
    _live, paths = _run(tmp_path)
    out = tmp_path / "out"
    code = main(["norms", *map(str, paths), "--json", str(out / "n.json"),
                 "--plot", str(out / "n.png"), "--quiet"])
    assert code == 0
    data = json.loads((out / "n.json").read_text())
    assert data["schema"] == "normsat.norms-checkpoints/1"
    assert [r["step"] for r in data["records"]] == [0, 2, 4, 6, 8]
    assert {f["law"] for f in data["fits"]} == {"linear", "sqrt", "quarter", "power", "equilibrium"}
    assert data["best"] in {"linear", "sqrt", "quarter", "power", "equilibrium"}
    assert [row["layer"] for row in data["layer_growth"]]  # ranked layers
    assert data["versions"]["torch"]
    assert (out / "n.png").read_bytes()[:4] == b"\x89PNG"
    assert "← best" in capsys.readouterr().out


def test_cli_with_few_checkpoints_fits_what_it_can_and_says_what_it_skipped(tmp_path, capsys):
    _live, paths = _run(tmp_path, steps=(0, 2, 4))
    out = tmp_path / "n.json"
    assert main(["norms", *map(str, paths), "--json", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert {f["law"] for f in data["fits"]} == {"linear", "sqrt", "quarter"}
    reason = "3 parameters need at least 4 points, got 3"
    assert data["skipped"] == [{"law": "power", "reason": reason},
                               {"law": "equilibrium", "reason": reason}]
    printed = capsys.readouterr().out
    assert f"power law not fitted: {reason}" in printed
    assert f"equilibrium law not fitted: {reason}" in printed


def test_cli_with_two_checkpoints_fits_nothing_and_says_so(tmp_path, capsys):
    _live, paths = _run(tmp_path, steps=(0, 2))
    out = tmp_path / "n.json"
    assert main(["norms", *map(str, paths), "--json", str(out), "--plot", str(tmp_path / "n.png"),
                 "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert data["fits"] == [] and data["best"] is None
    assert [row["law"] for row in data["skipped"]] == ["linear", "sqrt", "quarter", "power",
                                                      "equilibrium"]
    assert "linear law not fitted: 2 parameters need at least 3 points, got 2" in \
        capsys.readouterr().out


def test_cli_error_writes_nothing(tmp_path, capsys):
    safetensors.torch.save_model(tiny_gpt2(16), str(tmp_path / "step-1.safetensors"))
    safetensors.torch.save_model(tiny_gpt2(32), str(tmp_path / "step-2.safetensors"))
    out = tmp_path / "out"
    code = main(["norms", str(tmp_path / "step-1.safetensors"), str(tmp_path / "step-2.safetensors"),
                 "--json", str(out / "n.json"), "--plot", str(out / "n.png"), "--quiet"])
    assert code == 2
    assert "do not share one architecture" in capsys.readouterr().err
    assert not out.exists()
