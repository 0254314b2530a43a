"""A pass that is going to fail stops early: its measured loss of precision, extrapolated to the
end of the graph, against what the pass has; and a wrong guess costs at most one level."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

from saturated import Settings
from saturated.precision import next_precision, rules, run_balls
from saturated.precision.loss import MEANINGFUL_SHARE, Loss, bits_lost
from saturated.saturate import SaturatedModel
from tests.saturated.test_sat_precision import _deep_relu


def _split(rows: np.ndarray, relative: float) -> np.ndarray:
    """One float64 term per element and a radius of ``relative`` times each row's largest."""
    return np.stack([rows, np.abs(rows).max(axis=-1, keepdims=True) * relative * np.ones(rows.shape)])


def test_bits_lost_judges_each_row_against_its_own_size():
    rows = np.array([[1.0, -2.0, 1e-30], [1e-8, 3e-9, 0.0]])
    values = np.stack([rows, np.array([[2.0 ** -100, 0.0, 2.0 ** -101], [2.0 ** -120, 0.0, 0.0]])])
    # row 0: 2^-100 against 2 (the near-zero element does not count); row 1: 2^-120 against 1e-8
    assert bits_lost(values, 128) == pytest.approx(max(28 - 1, 8 + math.log2(1 / 1e-8)))
    assert bits_lost(np.stack([rows, np.zeros(rows.shape)]), 128) == -math.inf  # exact
    assert bits_lost(np.stack([rows, np.full(rows.shape, math.nan)]), 128) == -math.inf  # undetermined


@pytest.mark.parametrize("bits, hopeless", [(128, False), (104, True)])
def test_a_loss_growing_linearly_is_extrapolated_without_its_first_jump(bits, hopeless):
    """The first products lose 10 bits at once (from exact operands), then 100 bits over the
    graph: at 30% of the way the end is about 110 bits away, not 10/0.3 + … ."""
    rng = np.random.default_rng(0)
    loss = Loss(bits)
    for share in np.linspace(0.0, 0.3, 13):
        loss.observe(_split(rng.standard_normal((4, 8)), 2.0 ** (10 + 100 * share - bits)), float(share))
    assert loss.projected() == pytest.approx(110, abs=1)
    assert loss.hopeless() is hopeless


def test_nothing_is_given_up_before_a_meaningful_share_of_the_graph():
    loss = Loss(128)
    loss.observe(_split(np.ones((1, 4)), 2.0 ** -10), 0.0)
    loss.observe(_split(np.ones((1, 4)), 2.0 ** -8), MEANINGFUL_SHARE / 2)  # 120 bits lost already
    assert loss.projected() > 128 and not loss.hopeless()
    loss.observe(_split(np.ones((1, 4)), 2.0 ** -4), MEANINGFUL_SHARE)
    assert loss.hopeless()


def test_the_level_after_an_early_stop_is_its_extrapolation_and_a_margin():
    assert next_precision(128, 1024, 0.25, 150.0) == 192
    assert next_precision(128, 1024, 0.25, 100.0) == 160  # never the same level again
    assert next_precision(128, 160, 0.25, 300.0) == 160


def _pass(model: nn.Module, x: torch.Tensor, bits: int, early: bool):
    limit = SaturatedModel(model, Settings(max_precision=0), undetermined="nan")
    program = limit.program(x)
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    inputs = [leaf for leaf in pytree.tree_leaves(((x,), {})) if isinstance(leaf, torch.Tensor)]
    return run_balls(program, tensors, inputs, mask_threshold=1e9, bits=bits, entries=x.shape[0],
                     escalate=True, early=early)


def test_a_pass_too_narrow_for_the_depth_stops_a_quarter_of_the_way_and_names_what_it_needs():
    """100 ReLU layers of width 128 lose some 2 bits each: 128 bits end short of the last layer.
    Without the extrapolation the pass runs until its outputs are not proved nonzero; with it, it
    stops about a quarter of the way in, and the precision it asks for decides every output."""
    model = _deep_relu(100, 128, seed=0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    late, early = _pass(model, x, 128, early=False), _pass(model, x, 128, early=True)
    assert late.escalated and late.needed is None and late.reached > 0.9
    assert early.escalated and early.reached < 0.4 and early.needed is not None
    bits = next_precision(128, 1024, early.reached, early.needed)
    assert bits is not None and bits > 128
    decided = _pass(model, x, bits, early=True)
    assert not decided.escalated and decided.reasons == []
    value = decided.outputs[0][0]
    assert torch.allclose(value, model(x), rtol=1e-12, atol=0)


def test_a_wrong_early_stop_costs_one_level_and_the_next_runs_to_its_end(monkeypatch):
    """Were the extrapolation always to say "hopeless", the first level would be given up, and the
    one after it, which no longer stops early, would decide: one level more, not a chain."""
    model = _deep_relu(40, 128, seed=0)  # float64 cannot decide it, 128 bits do
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    honest = SaturatedModel(model, Settings(), undetermined="nan")(x)
    # the class the passes use (a doctest run may have imported the loss module once more)
    monkeypatch.setattr(rules.Loss, "hopeless", lambda self: bool(self.history))
    wrong = SaturatedModel(model, Settings(), undetermined="nan")(x)
    assert len(wrong.precisions) == len(honest.precisions) + 1
    assert wrong.reasons == honest.reasons == {}
    assert torch.allclose(wrong.value, honest.value, rtol=1e-12, atol=0)
