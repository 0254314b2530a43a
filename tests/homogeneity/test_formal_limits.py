"""End-to-end sympy proofs past polynomials: degree, grade and saturated limit of small graphs,
checked against the saturated network computed independently in float64."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from homogeneity import Grade
from homogeneity.verify import prove

X = torch.tensor([[1.0, 0.5], [-0.5, 1.0]])


class OneHead(nn.Module):
    """softmax(XW_q (XW_k)ᵀ)·XW_v after a bias-free linear map, so X is 1-homogeneous."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.q, self.k, self.v = (nn.Linear(2, 2, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return torch.softmax(self.q(h) @ self.k(h).transpose(-1, -2), -1) @ self.v(h)


def _limit(proof: object) -> torch.Tensor:
    return torch.tensor([float(v) for v in proof.limit], dtype=torch.float64)  # type: ignore[attr-defined]


def test_attention_on_a_homogeneous_input_is_two_homogeneous_approximately() -> None:
    torch.manual_seed(1)
    model = OneHead().double()
    (proof,) = prove(model, X.double())
    assert (proof.degree, proof.grade, proof.claimed, proof.proved) == (2, Grade.APPROXIMATE,
                                                                         Grade.APPROXIMATE, True)
    # Theorem 6 (as corrected): the limit is hard attention over the scores at θ, times V at θ.
    with torch.no_grad():
        h = model.embed(X.double())
        scores = model.q(h) @ model.k(h).T
        hard = torch.nn.functional.one_hot(scores.argmax(-1), 2).double()
        assert (scores.sort(-1).values.diff(dim=-1) > 1e-6).all()  # no tie at θ
        expected = (hard @ model.v(h)).flatten()
    torch.testing.assert_close(_limit(proof), expected, rtol=1e-12, atol=1e-12)


def test_a_bias_before_layer_norm_is_asymptotic_not_exact() -> None:
    torch.manual_seed(2)
    # Three features: over two, LayerNorm without eps is a sign, constant once c is large.
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 3),
                          nn.LayerNorm(3, eps=0.0, elementwise_affine=False))
    (proof,) = prove(model, X)
    assert proof.grade is Grade.ASYMPTOTIC and proof.proved and proof.residual != 0
    with torch.no_grad():  # the limit drops the bias: LN of the degree-2 term alone
        grown = X.double() @ model[0].weight.double().T @ model[1].weight.double().T
        expected = nn.functional.layer_norm(grown, (3,), eps=0.0)
    torch.testing.assert_close(_limit(proof), expected.flatten(), rtol=1e-12, atol=1e-12)


def test_layer_norm_without_eps_or_biases_is_exact_for_every_theta() -> None:
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.LayerNorm(2, eps=0.0, bias=False),
                          nn.Linear(2, 1, bias=False))
    (proof,) = prove(model, X)
    assert (proof.degree, proof.grade, proof.proved) == (2, Grade.EXACT, True)


@pytest.mark.parametrize("norm", [nn.LayerNorm(2), nn.RMSNorm(2)])
def test_eps_makes_a_normalization_block_asymptotic(norm: nn.Module) -> None:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(2, 2, bias=False), norm, nn.Linear(2, 1, bias=False))
    (proof,) = prove(model, X)
    assert (proof.degree, proof.grade, proof.proved) == (2, Grade.ASYMPTOTIC, True)
    assert proof.quantifier == "the model's θ and these inputs"


@pytest.mark.parametrize(("activation", "saturated", "degree"), [
    (nn.Tanh(), torch.sign, 1),
    (nn.GELU(), torch.relu, 2),
    (nn.SiLU(), torch.relu, 2),
    (nn.Sigmoid(), lambda z: (z > 0).double(), 1),
])
def test_saturating_mlps_are_approximate_with_their_saturated_limit(
        activation: nn.Module, saturated: object, degree: int) -> None:
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(2, 2, bias=False), activation, nn.Linear(2, 1, bias=False))
    (proof,) = prove(model, X)
    assert (proof.degree, proof.grade, proof.proved) == (degree, Grade.APPROXIMATE, True)
    with torch.no_grad():
        expected = saturated(X.double() @ model[0].weight.double().T) @ model[2].weight.double().T  # type: ignore[operator]
    torch.testing.assert_close(_limit(proof), expected.flatten(), rtol=1e-12, atol=1e-12)


def test_a_zero_leading_coefficient_proves_nothing() -> None:
    model = nn.Sequential(nn.Linear(1, 1, bias=False), nn.ReLU(), nn.Linear(1, 1))
    with torch.no_grad():
        model[0].weight.fill_(-1.0)  # ReLU(−x) = 0 at x = 1: only the bias term is left
    (proof,) = prove(model, torch.ones(1, 1))
    assert proof.grade is None and not proof.proved
    assert "not degree 2" in proof.reason
