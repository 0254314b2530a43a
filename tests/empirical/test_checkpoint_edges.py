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
