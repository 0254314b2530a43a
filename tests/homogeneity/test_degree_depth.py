"""Depth in closed form, checked against analysing the unrolled stack."""

from __future__ import annotations

import sympy
import torch
from torch import nn

import homogeneity
from homogeneity import Grade, K, block_degree_map, stack_degree
from homogeneity.depth import L


def _stack(block: type[nn.Module], depth: int, **kwargs: object) -> nn.Module:
    return nn.Sequential(*(block(**kwargs) for _ in range(depth)))


class ReluLayer(nn.Module):
    def __init__(self, bias: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def test_bias_free_mlp_is_k_plus_l() -> None:
    degree = stack_degree(block_degree_map(ReluLayer(), torch.randn(2, 4)), start=K)
    assert (degree.value, degree.grade) == (K + L, Grade.EXACT)


def test_biased_mlp_from_data_is_exact_for_one_layer_then_asymptotic() -> None:
    degree = stack_degree(block_degree_map(ReluLayer(bias=True), torch.randn(2, 4)), start=0)
    assert degree.subs({L: 1}).cases[0].grade is Grade.EXACT
    for depth in (1, 2, 5):
        unrolled = homogeneity.analyze(_stack(ReluLayer, depth, bias=True), torch.randn(2, 4))
        closed = degree.subs({L: depth})
        assert (closed.value, closed.grade) == (unrolled.degree, unrolled.grade)
    assert degree.subs({L: 7}).value == 7


def test_bert_layer_stack_stays_1_homogeneous(small_models: dict[str, object]) -> None:
    model, _tokenizer = small_models["bert"]
    layer = model.encoder.layer[0]  # type: ignore[attr-defined]
    degree_map = block_degree_map(layer, torch.randn(1, 4, model.config.hidden_size))  # type: ignore[attr-defined]
    degree = stack_degree(degree_map, start=1)
    assert (degree.value, degree.grade) == (1, Grade.ASYMPTOTIC)
    assert str(degree_map.by_grade[Grade.EXACT]) == "1 (asymptotic)"


def test_squaring_blocks_give_a_power_of_two() -> None:
    class Square(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(3, 3, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.linear(x)
            return h * h

    degree = stack_degree(block_degree_map(Square(), torch.randn(2, 3)), start=0)
    assert sympy.simplify(degree.value - (2 ** (L + 1) - 2)) == 0
    unrolled = homogeneity.analyze(_stack(Square, 3), torch.randn(2, 3))
    assert degree.subs({L: 3}).value == unrolled.degree == 14
