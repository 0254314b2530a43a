"""Bad input gets a clear HomogeneityError: what was expected, what arrived, and where."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import homogeneity
from homogeneity import HomogeneityError


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inner(x)
        return h[h > 0]  # data-dependent shape: torch.export cannot trace it without hints


class Inner(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent control flow
            return x
        return -x


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class TupleWithInt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return self.linear(x), 3


def test_untraceable_model_names_the_failing_module() -> None:
    with pytest.raises(HomogeneityError, match=r"block \(Inner\)"):
        homogeneity.analyze(Outer(), torch.randn(2, 3))


def test_untraceable_hugging_face_model_suggests_eager_and_no_cache(
        small_models: dict[str, Any]) -> None:
    model, _tokenizer = small_models["bert"]
    with pytest.raises(HomogeneityError, match=r"attn_implementation='eager'.*use_cache=False"):
        homogeneity.analyze(model, input_ids=torch.zeros(1, 2, 3, 4, dtype=torch.long))


def test_wrong_input_shape_names_the_module_and_the_inputs() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    with pytest.raises(HomogeneityError, match=r"module 0 \(Linear\).*float32\[2, 5\]"):
        homogeneity.analyze(model, torch.randn(2, 5))


def test_non_tensor_outputs_are_refused() -> None:
    with pytest.raises(HomogeneityError, match="not tensors"):
        homogeneity.analyze(TupleWithInt(), torch.randn(2, 3))


def test_params_pattern_matching_nothing_lists_the_parameters() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    with pytest.raises(HomogeneityError, match=r"'encoder\.\*' match no parameter.*0\.weight"):
        homogeneity.analyze(model, torch.randn(2, 3), params=["0.bias", "encoder.*"])


def test_unknown_input_degree_name() -> None:
    g = homogeneity.GraphBuilder()
    g.output(g.relu(g.input("x", (2, 2))))
    with pytest.raises(HomogeneityError, match=r"'y'.*\['x'\]"):
        g.analyze(input_degrees={"y": 1})


def test_data_dependent_shapes_trace_as_indexing() -> None:
    # h[h > 0]: sign(c·h) = sign(h) for the exactly 1-homogeneous h = x·W + b (Affine 0 → 1), so
    # the mask is scale-free; the size assertions on the unbacked length are shape arithmetic.
    report = homogeneity.analyze(DataDependent(), torch.randn(4, 3))
    assert report.unsupported == []
    assert (report.degree, str(report.grade)) == (1, "exact")
