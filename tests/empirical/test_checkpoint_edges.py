"""Checkpoint scans at their edges, on hand-made state dicts of a few numbers each.

Norms and cosines are computed here from their definitions in float64; order and refusals follow
the documented rules of :mod:`empirical.training.checkpoints`.
"""

from __future__ import annotations

import math

import pytest
import safetensors.torch
import torch

from empirical.errors import EmpiricalError
from empirical.training.checkpoints import order_checkpoints, scan_checkpoints


def save(path, **tensors: torch.Tensor):
    safetensors.torch.save_file({name: t.contiguous() for name, t in tensors.items()}, str(path))
    return path


@pytest.mark.parametrize("steps", [[5, 5], [1, 4, 4], [3, 2]])
def test_given_steps_must_strictly_increase(steps: list[int]) -> None:
    paths = [f"c{i}.pt" for i in range(len(steps))]
    with pytest.raises(EmpiricalError, match="increasing order without duplicates") as caught:
        order_checkpoints(paths, steps)
    bad = next(i for i in range(1, len(steps)) if steps[i] <= steps[i - 1])
    assert f"got {steps[bad]} after {steps[bad - 1]} (for c{bad}.pt)" in str(caught.value)


def test_given_steps_pair_with_the_paths_in_their_order() -> None:
    ordered = order_checkpoints(["z.pt", "a.pt", "m.pt"], [0, 7, 100])
    assert [(str(p), s) for p, s in ordered] == [("z.pt", 0), ("a.pt", 7), ("m.pt", 100)]
    assert all(type(s) is int for _, s in ordered)


def test_no_paths_and_mismatched_counts_are_refused() -> None:
    with pytest.raises(EmpiricalError, match="at least one checkpoint"):
        order_checkpoints([])
    with pytest.raises(EmpiricalError, match="got 3 steps for 2 checkpoints"):
        order_checkpoints(["a.pt", "b.pt"], [1, 2, 3])


def test_scan_records_norms_and_cosines_from_their_definitions(tmp_path) -> None:
    first = save(tmp_path / "step-10.safetensors", **{"h.0.w": torch.tensor([3.0, 0.0]),
                                                      "h.1.w": torch.tensor([0.0, 4.0])})
    second = save(tmp_path / "step-20.safetensors", **{"h.0.w": torch.tensor([0.0, 3.0]),
                                                       "h.1.w": torch.tensor([0.0, 8.0])})
    tracker, ordered = scan_checkpoints([second, first])
    assert [s for _, s in ordered] == [10, 20]
    before, after = tracker.records
    assert before["norm"] == 5.0 and before["cosine_prev"] is None
    assert after["norm"] == pytest.approx(math.sqrt(9 + 64))
    assert after["layers"] == pytest.approx({"h.0": 3.0, "h.1": 8.0})
    # θ₁·θ₂ = 0·3 + 4·8 = 32 over ‖θ₁‖‖θ₂‖ = 5·√73; layer h.0 turned by 90°, h.1 did not turn.
    assert after["cosine_prev"] == pytest.approx(32 / (5 * math.sqrt(73)))
    assert after["layer_cosine_prev"] == pytest.approx({"h.0": 0.0, "h.1": 1.0})


def test_buffers_are_left_out_and_same_named_parameters_kept(tmp_path) -> None:
    """Integer tensors and GPT-2's old mask buffers are not parameters; a 1-d ``attn.bias`` and a
    0-d float that is not ``masked_bias`` are."""
    state = {
        "h.0.attn.bias": torch.tensor([1.0, 2.0]),                # a real bias (1-d): kept
        "h.1.attn.bias": torch.ones(1, 1, 2, 2),                  # the causal mask (4-d): left out
        "h.1.attn.masked_bias": torch.tensor(-1e4),               # scalar mask value: left out
        "h.1.scale": torch.tensor(2.0),                           # a 0-d parameter: kept
        "position_ids": torch.arange(3),                          # integer: left out
    }
    path = tmp_path / "step-1.pt"
    torch.save(state, path)
    tracker, _ = scan_checkpoints([path])
    assert tracker.records[0]["norm"] == pytest.approx(math.sqrt(1 + 4 + 4))
    assert sorted(tracker.names) == ["h.0.attn.bias", "h.1.scale"]


def test_distinct_views_of_one_storage_both_count(tmp_path) -> None:
    """Two halves of one storage are two parameters (only the same view twice is a tied weight)."""
    storage = torch.tensor([1.0, 2.0, 3.0, 4.0])
    path = tmp_path / "step-1.pt"
    torch.save({"a.weight": storage[:2], "c.weight": storage[:2], "b.weight": storage[2:]}, path)
    tracker, _ = scan_checkpoints([path])
    assert tracker.names == ["a.weight", "b.weight"]
    assert tracker.records[0]["norm"] == pytest.approx(math.sqrt(1 + 4 + 9 + 16))


def test_a_tensor_missing_or_extra_in_a_later_checkpoint_is_named(tmp_path) -> None:
    first = save(tmp_path / "step-1.safetensors", a=torch.ones(2), b=torch.ones(3))
    missing = save(tmp_path / "step-2.safetensors", a=torch.ones(2))
    extra = save(tmp_path / "step-3.safetensors", a=torch.ones(2), b=torch.ones(3), c=torch.ones(1))
    with pytest.raises(EmpiricalError, match=r"tensor 'b' \(shape \(3,\) in .*step-1.safetensors\) "
                                             r"is missing from .*step-2.safetensors"):
        scan_checkpoints([first, missing])
    with pytest.raises(EmpiricalError, match=r"tensor 'c' \(shape \(1,\)\) is in .*step-3.safetensors "
                                             r"but not in .*step-1.safetensors"):
        scan_checkpoints([first, extra])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_parameters_are_refused_naming_the_file(tmp_path, bad: float) -> None:
    good = save(tmp_path / "step-1.safetensors", a=torch.ones(2))
    broken = save(tmp_path / "step-2.safetensors", a=torch.tensor([1.0, bad]))
    with pytest.raises(EmpiricalError, match=r"finite parameters in .*step-2.safetensors"):
        scan_checkpoints([good, broken])


def test_a_checkpoint_without_floating_point_parameters_is_refused(tmp_path) -> None:
    path = save(tmp_path / "step-1.safetensors", ids=torch.arange(4))
    with pytest.raises(EmpiricalError, match=r"floating-point parameters in .*step-1.safetensors"):
        scan_checkpoints([path])


def test_a_tensor_of_another_shape_is_named_with_both_shapes(tmp_path) -> None:
    first = save(tmp_path / "step-1.safetensors", a=torch.ones(2))
    wider = save(tmp_path / "step-2.safetensors", a=torch.ones(3))
    with pytest.raises(EmpiricalError, match=r"tensor 'a' has shape \(3,\) in .*step-2.safetensors but "
                                             r"\(2,\) in .*step-1.safetensors"):
        scan_checkpoints([first, wider])


def test_given_steps_replace_the_names(tmp_path) -> None:
    late = save(tmp_path / "final.safetensors", a=torch.tensor([3.0, 4.0]))
    early = save(tmp_path / "first.safetensors", a=torch.tensor([0.0, 1.0]))
    tracker, ordered = scan_checkpoints([early, late], [100, 250])
    assert [(p.name, s) for p, s in ordered] == [("first.safetensors", 100), ("final.safetensors", 250)]
    assert [(r["step"], r["norm"]) for r in tracker.records] == [(100, 1.0), (250, 5.0)]


def test_the_progress_bar_is_shown_only_when_asked(tmp_path, capsys) -> None:
    path = save(tmp_path / "step-1.safetensors", a=torch.ones(2))
    scan_checkpoints([path])
    assert capsys.readouterr().err == ""
    scan_checkpoints([path], progress=True)
    shown = capsys.readouterr().err
    assert "checkpoints: 100%" in shown and "ckpt/s" in shown


def test_the_given_groups_are_the_trackers(tmp_path) -> None:
    path = save(tmp_path / "step-1.safetensors",
                **{"h.0.w": torch.tensor([3.0]), "h.0.b": torch.tensor([4.0])})
    tracker, _ = scan_checkpoints([path], groups={"weights": ["*.w"]})
    assert tracker.records[0]["groups"] == {"weights": 3.0, "other": 4.0}


@pytest.mark.parametrize(("args", "message"), [
    (("a.pt",), "expected paths to be a list of checkpoint files or folders, got the bare string "
                "'a.pt' (wrap it in a list: ['a.pt'])"),
    ((["a.pt"], 3), "expected steps to be a list of integers, got 3 (int)"),
    ((["a.pt", "b.pt"], [0, 1.5]), "expected steps[1] to be an integer ≥ 0, got 1.5"),  # not truncated
    ((["a.pt"], [-1]), "expected steps[0] to be an integer ≥ 0, got -1"),
    (([],), "expected at least one checkpoint, got none"),
    ((["a.pt", "b.pt"], [1, 2, 3]), "expected one step per checkpoint, got 3 steps for 2 checkpoints"),
    ((["a/step-4.pt", "b/step-4.pt"],),
     "expected one checkpoint per step, got step 4 twice: a/step-4.pt and b/step-4.pt"),
    ((["step-1.pt", "run/final.pt"],),
     "expected a step number in the name of run/final.pt (e.g. step-00400.safetensors or "
     "checkpoint-400/), found none; pass the steps with --at-steps (Python: steps=[...])"),
    ((["checkpoint-1/model.safetensors", "last/model.safetensors"],),
     "expected a step number in the folder of last/model.safetensors (e.g. step-00400.safetensors "
     "or checkpoint-400/), found none; pass the steps with --at-steps (Python: steps=[...])"),
])
def test_bad_paths_and_steps_are_refused_saying_what_was_expected(args, message) -> None:
    with pytest.raises(EmpiricalError) as caught:
        order_checkpoints(*args)
    assert str(caught.value) == message


def test_a_path_that_is_no_checkpoint_is_named_before_anything_is_read(tmp_path) -> None:
    missing = tmp_path / "runX" / "step-1.pt"   # an X is not a pattern character
    with pytest.raises(EmpiricalError) as caught:
        scan_checkpoints([missing])
    assert str(caught.value) == (f"expected a checkpoint file or a model folder, got {missing}, "
                                 "which does not exist")
    for pattern in ("step-*.pt", "step-?.pt", "step-[12].pt"):
        with pytest.raises(EmpiricalError) as caught:
            scan_checkpoints([tmp_path / pattern], [1])
        assert str(caught.value) == (f"the pattern {tmp_path / pattern} matched no file (the shell "
                                     "passed it on unexpanded); expected checkpoint files")
    with pytest.raises(EmpiricalError) as caught:
        scan_checkpoints([3])
    assert str(caught.value) == "expected checkpoint paths, got 3 (int)"
    with pytest.raises(EmpiricalError) as caught:
        scan_checkpoints(str(missing))  # a bare string would be read character by character
    assert str(caught.value) == (f"expected paths to be a list of checkpoint files or folders, got the "
                                 f"bare string {str(missing)!r} (wrap it in a list: [{str(missing)!r}])")


@pytest.mark.parametrize(("files", "folders", "shown"), [
    (["step-1.pt", "step-2.bin", "step-3.pth"], [], "3 checkpoints (step-1.pt, step-2.bin, step-3.pth)"),
    (["step-1.pt", "step-2.bin", "step-3.pth", "step-4.safetensors"], [],
     "4 checkpoints (step-1.pt, step-2.bin, step-3.pth, …)"),
    ([], ["checkpoint-200", "checkpoint-100"], "2 checkpoints (checkpoint-100, checkpoint-200)"),
])
def test_a_folder_of_checkpoints_is_refused_with_what_it_holds(tmp_path, files, folders, shown) -> None:
    """Weight files and numbered folders count; notes, numbered or not, and plain folders do not."""
    run = tmp_path / "run"
    run.mkdir()
    for name in files:
        (run / name).write_bytes(b"")
    for name in (*folders, "logs"):
        (run / name).mkdir()
    (run / "notes2.txt").write_text("")
    with pytest.raises(EmpiricalError) as caught:
        scan_checkpoints([run])
    assert str(caught.value) == (f"expected checkpoint files, got the folder {run}, which holds "
                                 f"{shown}; pass the files themselves, e.g. {run}/*")


def test_a_model_folder_is_one_checkpoint(tmp_path) -> None:
    folder = tmp_path / "checkpoint-300"
    folder.mkdir()
    save(folder / "model.safetensors", w=torch.tensor([3.0, 4.0]))
    (folder / "checkpoint-1").mkdir()  # a numbered folder inside a model folder is not a run
    tracker, ordered = scan_checkpoints([folder])
    assert [(p, s) for p, s in ordered] == [(folder, 300)]
    assert tracker.records[0]["norm"] == 5.0


@pytest.mark.parametrize(("bad", "kind"),
                         [(math.nan, "NaN"), (math.inf, "infinite"), (-math.inf, "infinite")])
@pytest.mark.parametrize("position", [0, 1])
def test_non_finite_parameters_are_named_by_kind_and_tensor(tmp_path, bad, kind, position) -> None:
    good = save(tmp_path / "step-1.safetensors", a=torch.ones(2), b=torch.ones(2))
    broken = save(tmp_path / "step-2.safetensors", a=torch.ones(2), b=torch.tensor([1.0, bad]))
    paths = [broken, good] if position == 0 else [good, broken]  # the first checkpoint, or a later one
    with pytest.raises(EmpiricalError) as caught:
        scan_checkpoints(paths, [1, 2])
    assert str(caught.value) == f"expected finite parameters in {broken}, found {kind} entries in 'b'"


def test_finite_parameters_whose_norm_overflows_are_told_apart(tmp_path) -> None:
    """(10²⁰⁰)² overflows float64, in which the norm is summed; the largest |θ| is named (an empty
    tensor has none)."""
    path = save(tmp_path / "step-1.safetensors", empty=torch.zeros(0, dtype=torch.float64),
                big=torch.tensor([1e200, -3e200], dtype=torch.float64), small=torch.ones(2))
    with pytest.raises(EmpiricalError) as caught:
        scan_checkpoints([path])
    assert str(caught.value) == (f"the parameters of {path} are finite, but their norm overflows "
                                 "float64, in which it is summed (largest |θ| = 3e+200; squares "
                                 "above about 1.8e308 overflow)")


def test_only_gpt2_mask_buffers_and_non_floats_are_left_out(tmp_path) -> None:
    """A 4-d weight that is not ``attn.bias`` and a 1-d ``masked_bias`` are parameters; booleans are
    not."""
    state = {
        "conv.weight": torch.full((1, 1, 2, 2), 0.5),             # 4-d, not the mask: kept
        "h.0.attn.masked_bias": torch.tensor([3.0]),              # 1-d, not the scalar: kept
        "h.0.attn.bias": torch.ones(1, 1, 2, 2),                  # the causal mask: left out
        "mask": torch.tensor([True, False]),                      # boolean: left out
    }
    path = tmp_path / "step-1.pt"
    torch.save(state, path)
    tracker, _ = scan_checkpoints([path])
    assert sorted(tracker.names) == ["conv.weight", "h.0.attn.masked_bias"]
    assert tracker.records[0]["norm"] == pytest.approx(math.sqrt(4 * 0.25 + 9))


def test_a_transposed_view_of_one_storage_is_a_second_parameter(tmp_path) -> None:
    """Same storage, offset and shape, another stride: Wᵀ is not W (tied weights share all four)."""
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    path = tmp_path / "step-1.pt"
    torch.save({"a.weight": w, "b.weight": w.t(), "c.weight": w}, path)
    tracker, _ = scan_checkpoints([path])
    assert tracker.names == ["a.weight", "b.weight"]
    assert tracker.records[0]["norm"] == pytest.approx(math.sqrt(2 * 30))
