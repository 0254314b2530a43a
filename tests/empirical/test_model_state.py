"""No analysis changes the model: parameters, floating-point and integer buffers, and the mode.

The model has a BatchNorm, whose running statistics (float buffers) and batch counter (an integer
buffer) a forward pass in training mode updates in place; every analysis must leave them, the
parameters and ``training`` exactly as they were, also when it raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import homogeneity
from empirical.measure.scaled import call_scaled, scaled_forward, scaled_parameters
from homogeneity.verify import check_euler, check_scaling
from saturated.errors import SaturationError
from saturated.saturate import saturate

X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.5], [0.3, 0.3, -0.1]],
                 dtype=torch.float64)


def _model(training: bool) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4), nn.ReLU(),
                          nn.Linear(4, 2, bias=False)).double()
    with torch.no_grad():
        model[1].running_mean.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
        model[1].running_var.copy_(torch.tensor([1.5, 0.5, 2.0, 1.0]))
        model[1].num_batches_tracked.fill_(7)
    return model.train(training)


ANALYSES: dict[str, Callable[[nn.Module], Any]] = {
    "analyze": lambda m: homogeneity.analyze(m, X),
    "check_scaling": lambda m: check_scaling(m, X),
    "check_euler": lambda m: check_euler(m, X),
    "scaled_forward": lambda m: scaled_forward(m, 100.0)(input=X),
    "call_scaled": lambda m: call_scaled(m, scaled_parameters(m, 3.0), input=X),
}


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("name", list(ANALYSES))
def test_analysis_leaves_parameters_buffers_and_mode_unchanged(name: str, training: bool) -> None:
    model = _model(training)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ANALYSES[name](model)
    after = model.state_dict()
    assert after.keys() == before.keys()
    changed = [k for k in before if not torch.equal(after[k], before[k])]
    assert not changed, f"{name} changed {changed}"
    assert all(m.training is training for m in model.modules())


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_a_failing_limit_leaves_the_model_unchanged(training: bool) -> None:
    # BatchNorm has no limit rule: the exact limit raises, after tracing the model.
    model = _model(training)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(SaturationError, match="batch_norm"):
        saturate(model, X)
    with pytest.raises(Exception, match="batch_norm"):
        scaled_forward(model, math.inf)(input=X)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert model.training is training
