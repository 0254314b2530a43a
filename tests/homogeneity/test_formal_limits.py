"""End-to-end sympy proofs past polynomials: degree, grade and saturated limit of small graphs,
checked against the saturated network computed independently in float64."""

from __future__ import annotations

from typing import Any

import pytest
import sympy
import torch
from torch import nn

from homogeneity import Degree, Grade
from homogeneity.rules import RULES
from homogeneity.verify import prove
from homogeneity.verify.asymptotic import C, Undecided, approximate

aten = torch.ops.aten
RULES_SAVED = dict(RULES)

X = torch.tensor([[1.0, 0.5], [-0.5, 1.0]])


class OneHead(nn.Module):
    """softmax(XW_q (XW_k)ᵀ)·XW_v after a bias-free linear map, so X is 1-homogeneous; with
    ``post_norm``, LayerNorm(X + attention) as in a post-LN transformer sublayer."""

    def __init__(self, width: int = 2, post_norm: bool = False) -> None:
        super().__init__()
        self.embed, self.q, self.k, self.v = (nn.Linear(2 if i == 0 else width, width, bias=False)
                                              for i in range(4))
        self.norm = nn.LayerNorm(width) if post_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        attended = torch.softmax(self.q(h) @ self.k(h).transpose(-1, -2), -1) @ self.v(h)
        return attended if self.norm is None else self.norm(h + attended)


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
    assert proof.quantifier == "every θ and x"


@pytest.mark.parametrize("norm", [nn.LayerNorm(2, eps=0.0), nn.RMSNorm(2, eps=0.0)])
def test_normalizations_without_eps_are_exact_for_every_theta(norm: nn.Module) -> None:
    model = nn.Sequential(nn.Linear(3, 2, bias=False), norm, nn.Linear(2, 1, bias=False))
    (proof,) = prove(model, torch.randn(1, 3))
    assert (proof.degree, proof.grade, proof.proved, proof.residual) == (2, Grade.EXACT, True, 0)
    assert proof.quantifier == "every θ and x"


@pytest.mark.parametrize("norm", [nn.LayerNorm(2), nn.RMSNorm(2)])
def test_eps_makes_a_normalization_block_asymptotic(norm: nn.Module) -> None:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(2, 2, bias=False), norm, nn.Linear(2, 1, bias=False))
    (proof,) = prove(model, X)
    assert (proof.degree, proof.grade, proof.proved) == (2, Grade.ASYMPTOTIC, True)
    assert proof.quantifier == "the model's θ and these inputs"
    with torch.no_grad():  # the limit: the same block without eps, in float64
        double = {name: p.double() for name, p in model.state_dict().items()}
        h = X.double() @ double["0.weight"].T
        if isinstance(norm, nn.LayerNorm):
            normed = nn.functional.layer_norm(h, (2,), double["1.weight"], double["1.bias"], eps=0.0)
        else:
            normed = nn.functional.rms_norm(h, (2,), double["1.weight"], eps=0.0)
        expected = normed @ double["2.weight"].T
    torch.testing.assert_close(_limit(proof), expected.flatten(), rtol=1e-12, atol=1e-12)


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


@pytest.mark.parametrize(("activation", "target", "wrong"), [
    (nn.Tanh(), aten.tanh.default, lambda x: x),                       # tanh claimed 1-homogeneous
    (nn.GELU(), aten.gelu.default, lambda x, **k: Degree.of(0, Grade.APPROXIMATE)),  # GELU saturating
])
def test_a_wrongly_registered_rule_is_refuted(activation: nn.Module, target: Any, wrong: Any,
                                              swapped_rule: Any) -> None:
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(2, 2, bias=False), activation, nn.Linear(2, 1, bias=False))
    swapped_rule(target, wrong)
    (proof,) = prove(model, X)
    assert proof.grade is None and not proof.proved
    assert "not degree" in proof.reason


def test_an_asymptotic_output_claimed_approximate_is_not_proved(swapped_rule: Any) -> None:
    model = nn.Sequential(nn.Linear(1, 1, bias=False), nn.ReLU(), nn.Linear(1, 1))
    for weight in model.parameters():
        nn.init.constant_(weight, 0.5)  # (c/2)·relu(c/2) + c/2 = c²/4 + c/2: a c⁻¹ rest
    swapped_rule(aten.linear.default, lambda x, w, b=None: Degree.of(2, Grade.APPROXIMATE)
                 if b is not None else RULES_SAVED[aten.linear.default](x, w, b))
    (proof,) = prove(model, torch.ones(1, 1))
    assert (proof.grade, proof.claimed, proof.proved) == (Grade.ASYMPTOTIC, Grade.APPROXIMATE, False)


def test_scores_that_stay_bounded_are_left_unproved_with_the_reason() -> None:
    # Softmax of LayerNorm outputs without scaled weights: the scores tend to a limit and do not
    # saturate; the dominant-term proof does not cover them, and says so.
    model = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3, elementwise_affine=False), nn.Softmax(-1))
    (proof,) = prove(model, X)
    assert proof.grade is None and not proof.proved
    assert "does not apply" in proof.reason and "bounded" in proof.reason


@pytest.mark.parametrize(("expr", "message"), [
    (sympy.tanh(sympy.sqrt(C)), "not exponentially in c"),
    (sympy.exp(C) / (1 + C), "exp of a growing argument"),
    (sympy.tanh(1 / C), "stays bounded but is not constant"),
    (sympy.sin(C), "no dominant-term rule for sin"),
])
def test_the_dominant_term_proof_refuses_what_it_cannot_bound(expr: Any, message: str) -> None:
    with pytest.raises(Undecided, match=message):
        approximate(expr)


def test_dominant_terms_of_softmax_and_layer_norm_by_hand() -> None:
    # 1/(1 + e^{c − 3c}) + 1/(1 + e^{3c − c}) = 1 + O(e^{−c/2}): the main part 1; rates are lower bounds
    # (1/(1 + u) halves the rate 1 of u = e^{−2c}/2).
    z1, z2 = C, 3 * C
    found = approximate(1 / (1 + sympy.exp(z1 - z2)) + 1 / (1 + sympy.exp(z2 - z1)))
    assert [(e, v) for e, v in found.main.terms] == [(0, 1)] and found.rate == sympy.Rational(1, 2)
    # c/√(c² + 1/100) = 1 − 1/(200c²) + …: the rest of LayerNorm's eps, like c⁻².
    found = approximate(C / sympy.sqrt(C**2 + sympy.Rational(1, 100)))
    assert found.rate is None and [(e, v) for e, v in found.main.terms][:2] == [
        (0, 1), (2, sympy.Rational(-1, 200))]


def test_a_post_norm_attention_block_is_asymptotic_with_its_saturated_limit() -> None:
    torch.manual_seed(6)
    model = OneHead(width=3, post_norm=True).double()
    (proof,) = prove(model, X.double())
    # h has degree 1 and attention degree 2: the sum leads with attention, LayerNorm (scaled γ
    # and β) makes it 1, and the residual and eps leave powers of 1/c: asymptotic.
    assert (proof.degree, proof.grade, proof.claimed, proof.proved) == (1, Grade.ASYMPTOTIC,
                                                                         Grade.ASYMPTOTIC, True)
    with torch.no_grad():  # the limit: LayerNorm (no eps) of hard attention's values, times γ, plus β
        h = model.embed(X.double())
        scores = model.q(h) @ model.k(h).T
        assert (scores.sort(-1).values.diff(dim=-1) > 1e-6).all()  # no tie at θ
        hard = torch.nn.functional.one_hot(scores.argmax(-1), 2).double() @ model.v(h)
        norm = model.norm
        assert norm is not None
        expected = nn.functional.layer_norm(hard, (3,), norm.weight, norm.bias, eps=0.0)
    torch.testing.assert_close(_limit(proof), expected.flatten(), rtol=1e-12, atol=1e-12)
