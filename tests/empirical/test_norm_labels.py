"""How the norm tracker names, orders and reports layers, on hand-made parameter names and
vectors whose norms and cosines are known."""

from __future__ import annotations

import math

import pytest
import torch

from empirical.errors import EmpiricalError
from empirical.training.norms import NormTracker, layer_labels, record_scalars


def test_blocks_are_ordered_by_index_within_their_stack() -> None:
    """Embeddings first, then each stack in order of appearance with block 2 before block 10,
    then everything else."""
    names = ["decoder.block.10.w", "encoder.block.2.w", "final.w", "decoder.block.2.w",
             "encoder.block.10.w", "embed_tokens.weight"]
    tracker = NormTracker({name: torch.ones(1) for name in names})
    assert tracker.layer_names == ["embeddings", "decoder.block.2", "decoder.block.10",
                                   "encoder.block.2", "encoder.block.10", "other"]
    assert layer_labels(tracker.layer_names) == {
        "embeddings": "embeddings", "decoder.block.2": "decoder layer 3",
        "decoder.block.10": "decoder layer 11", "encoder.block.2": "encoder layer 3",
        "encoder.block.10": "encoder layer 11", "other": "other"}


def test_one_stack_is_numbered_without_its_name() -> None:
    assert layer_labels(["model.layers.0", "model.layers.1"]) == {"model.layers.0": "layer 1",
                                                                  "model.layers.1": "layer 2"}


def test_norms_and_cosines_of_hand_made_states() -> None:
    """Layer h.0 goes from (3, 4) to (0, 0) and back to (4, 3): a zero vector has no cosine, and
    (3, 4)·(4, 3)/25 = 24/25 is not measured across the zero record (only between neighbours)."""
    shapes = {"h.0.w": torch.zeros(2), "h.1.w": torch.zeros(1)}
    tracker = NormTracker(shapes)
    tracker.record(0, {"h.0.w": torch.tensor([3.0, 4.0]), "h.1.w": torch.tensor([2.0])})
    zero = tracker.record(5, {"h.0.w": torch.zeros(2), "h.1.w": torch.tensor([-2.0])})
    assert zero["norm"] == 2.0 and zero["layers"] == {"h.0": 0.0, "h.1": 2.0}
    assert zero["layer_cosine_prev"] == {"h.0": None, "h.1": -1.0}
    assert zero["cosine_prev"] == pytest.approx(-4 / (2 * math.sqrt(29)))
    back = tracker.record(9, {"h.0.w": torch.tensor([4.0, 3.0]), "h.1.w": torch.tensor([-2.0])})
    assert back["layer_cosine_prev"] == {"h.0": None, "h.1": 1.0}
    assert back["cosine_prev"] == pytest.approx(4 / (2 * math.sqrt(29)))


def test_a_repeated_or_earlier_step_is_refused() -> None:
    tracker = NormTracker({"w": torch.ones(1)})
    tracker.record(3, {"w": torch.ones(1)})
    for step in (3, 2):
        with pytest.raises(EmpiricalError, match=f"steps to increase, got step {step} after step 3"):
            tracker.record(step, {"w": torch.ones(1)})
    tracker.record(4, {"w": torch.ones(1)})
    assert [r["step"] for r in tracker.records] == [3, 4]


def test_dashboard_scalars_leave_out_what_was_not_measured() -> None:
    record = {"step": 2, "norm": 3.0, "grad_norm": None, "loss": 0.5, "cosine_prev": 1.0,
              "layers": {"h.0": 1.0, "h.1": None}}
    assert record_scalars(record, prefix="p/") == {"p/norm": 3.0, "p/cosine_prev": 1.0, "p/loss": 0.5,
                                                  "p/layer/h.0": 1.0}
