"""End-to-end sympy proofs past polynomials: degree, grade and saturated limit of small graphs,
checked against the saturated network computed independently in float64."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import pytest
import sympy
import torch
from torch import nn

from homogeneity import Degree, Grade
from homogeneity.errors import HomogeneityError
from homogeneity.rules import RULES
from homogeneity.verify import FormalProof, prove
from homogeneity.verify.asymptotic import Approximation, C, Series, Undecided, approximate
from homogeneity.verify.formal import _limit_and_rest

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


# --- The dominant-term proof itself: exact main parts, truncation orders and rates --------------

T = sympy.Symbol("t", positive=True)
Q = sympy.Rational


def _terms(series: Series) -> dict[Fraction, sympy.Expr]:
    return dict(series.terms)


def _in_t(expr: Any, order: Fraction) -> dict[Fraction, sympy.Expr]:
    """sympy's own Puiseux expansion of expr(c = 1/t) at t → 0+, below t^order: exponent → coefficient."""
    expansion = sympy.expand(sympy.series(sympy.sympify(expr).subs(C, 1 / T), T, 0,
                                          math.ceil(order)).removeO())
    found: dict[Fraction, sympy.Expr] = {}
    for term in sympy.Add.make_args(expansion):
        coefficient, exponent = term.as_coeff_exponent(T)
        key = Fraction(int(exponent.p), int(exponent.q))
        found[key] = found.get(key, 0) + coefficient
    return {e: v for e, v in found.items() if v != 0 and e < order}


def _series(pairs: dict[Any, Any], order: Any = None) -> Series:
    """A series from exponent → coefficient, exact (sympy numbers)."""
    return Series.make(((Fraction(e), sympy.sympify(v)) for e, v in pairs.items()),
                       None if order is None else Fraction(order))


def test_a_series_sums_equal_powers_drops_zeros_and_everything_from_its_order_on() -> None:
    pairs = [(Fraction(0), Q(1)), (Fraction(1), Q(2)), (Fraction(0), Q(3)), (Fraction(1), Q(-2)),
             (Fraction(2), Q(5)), (Fraction(3), Q(7))]
    assert Series.make(pairs, Fraction(2)) == Series(((Fraction(0), 4),), Fraction(2))
    assert Series.make(pairs, None) == Series(((Fraction(0), 4), (Fraction(2), 5), (Fraction(3), 7)))
    # c² − 3c + 5 in t = 1/c: t⁻² − 3t⁻¹ + 5, exactly.
    assert Series.of(C**2 - 3 * C + 5) == _series({-2: 1, -1: -3, 0: 5})
    assert Series.of(Q(3, 2)) == _series({0: Q(3, 2)})


def test_sums_and_products_of_series_keep_the_order_the_truncations_allow() -> None:
    one = _series({0: 1}, 2)        # 1 + O(t²)
    tee = _series({1: 3}, 3)        # 3t + O(t³)
    exact = Series.of(C + 2)        # t⁻¹ + 2
    assert one + tee == tee + one == _series({0: 1, 1: 3}, 2)
    assert one + exact == exact + one == _series({-1: 1, 0: 3}, 2)
    assert exact + exact == Series.of(2 * C + 4)
    # (1 + O(t²))(3t + O(t³)) = 3t + O(t³): each order shifts by the other factor's first power.
    assert one * tee == tee * one == _series({1: 3}, 3)
    # (t⁻¹ + 2)(3t + O(t³)) = 3 + 6t + O(t²); exact times exact stays exact.
    assert exact * tee == tee * exact == _series({0: 3, 1: 6}, 2)
    assert exact * exact == Series.of((C + 2) ** 2)
    # 0 times anything is exactly 0, whatever the other factor's order.
    assert Series(()) * tee == tee * Series(()) == Series(())


def test_the_leading_term_is_the_first_and_a_vanished_part_has_none() -> None:
    assert Series.of(2 * C**3 - C).lead() == (2, 3)
    assert Series.of(5 - C).lead() == (-1, 1)
    assert _series({Fraction(1, 2): -4, 2: 1}, 3).lead() == (-4, Fraction(-1, 2))
    with pytest.raises(Undecided) as vanished:
        _series({}, 3).lead()
    assert str(vanished.value) == ("a main part vanishes to the expansion's precision: its leading "
                                   "term is out of reach")
    with pytest.raises(Undecided) as zero:
        Series(()).lead()
    assert str(zero.value) == "a main part is exactly 0 where its leading term is needed"


@pytest.mark.parametrize(("base", "n", "terms", "order"), [
    # (c + 1)² = c² + 2c + 1 and (c + 1)⁰ = 1, exactly.
    (Series.of(C + 1), Fraction(2), {-2: 1, -1: 2, 0: 1}, None),
    (Series.of(C + 1), Fraction(0), {0: 1}, None),
    # 1/(1 − c) = −t/(1 − t) = −t − t² − …: six powers of t past the first are kept.
    (Series.of(1 - C), Fraction(-1), {j: -1 for j in range(1, 7)}, Fraction(7)),
    # √(c² + 1) = c·(1 + t²)^½ = c + t/2 − t³/8 + O(t⁵); (c² + 1)^{3/2} = c³ + 3c/2 + 3t/8 + O(t³).
    (Series.of(C**2 + 1), Fraction(1, 2), {-1: 1, 1: Q(1, 2), 3: Q(-1, 8)}, Fraction(5)),
    (Series.of(C**2 + 1), Fraction(3, 2), {-3: 1, -1: Q(3, 2), 1: Q(3, 8)}, Fraction(3)),
    # 1/(c + t + O(t²)) = t·(1 + t² + O(t³))⁻¹ = t − t³ + O(t⁴): the base's own order caps it.
    (_series({-1: 1, 1: 1}, 2), Fraction(-1), {1: 1, 3: -1}, Fraction(4)),
    # 1/(c + O(t²)) = t·(1 + O(t³)) = t + O(t⁴): a rest with no term, only an order.
    (_series({-1: 1}, 2), Fraction(-1), {1: 1}, Fraction(4)),
    # (4c²)^{-1/2} = t/2 exactly: a single term has no rest to expand.
    (Series.of(4 * C**2), Fraction(-1, 2), {1: Q(1, 2)}, None),
])
def test_powers_of_series_by_hand(base: Series, n: Fraction, terms: dict[int, Any],
                                  order: Fraction | None) -> None:
    power = base.power(n)
    assert power == _series(terms, order)


def test_a_fractional_power_of_a_negative_leading_term_is_refused() -> None:
    with pytest.raises(Undecided, match="fractional power 1/2 of a part with negative leading "
                                        "coefficient"):
        Series.of(1 - C**2).power(Fraction(1, 2))
    with pytest.raises(Undecided, match="fractional power -1/3 of a part with negative"):
        approximate((1 - C**2) ** Q(-1, 3))


@pytest.mark.parametrize(("expr", "order"), [
    (sympy.sqrt(4 * C**2 + 8 * C + 1), 5),                # lead 2 ≠ 1, a rest of two terms
    ((C**2 - C + 1) ** Q(-1, 2), 7),                      # a negative first term in the rest
    ((C**3 + 2) ** Q(1, 3), 5),                           # a rest starting three powers down
    ((C**2 + 1) ** Q(3, 2), 3),
    (sympy.sqrt(C + sympy.sqrt(C)), Fraction(11, 2)),    # a rest in half powers: twelve terms
    (1 / (C + sympy.sqrt(C**2 + 1)), 7),                  # the power of a truncated series
    (sympy.Abs(sympy.sqrt(C**2 + 1) - 2 * C), 5),         # |u| = −u for u's lead −1
    (C / sympy.sqrt(C**2 + Q(1, 100)), 6),
])
def test_algebraic_main_parts_agree_with_sympys_expansion(expr: Any, order: Any) -> None:
    found = approximate(expr)
    assert found.rate is None and found.main.order == order
    assert _terms(found.main) == _in_t(expr, Fraction(order))


@pytest.mark.parametrize(("expr", "terms", "rate"), [
    (sympy.tanh(3 * C), {0: 1}, 3),                         # 1 − tanh(u) ≤ 2e^{−2u}, u = 3c
    (sympy.tanh(1 + sympy.tanh(C) - 3 * C), {0: -1}, 3),   # a falling argument: −1
    (sympy.erf(3 * C), {0: 1}, Q(9, 4)),                   # 1 − erf(u) ≤ e^{−u²}, u² ≥ 9c²/4 ≥ 9c/4
    (sympy.erf(3 * sympy.sqrt(C)), {0: 1}, Q(9, 4)),       # u² = 9c: erf saturates from c^½ on
    (sympy.erf(1 + sympy.tanh(C) - 3 * sympy.sqrt(C)), {0: -1}, Q(9, 4)),
    (sympy.tanh(1 + sympy.exp(-C)), {0: sympy.tanh(1)}, Q(1, 2)),  # a constant argument: tanh(1)
    (sympy.exp(2 + sympy.exp(-C)), {0: sympy.exp(2)}, Q(1, 2)),
    (sympy.exp(sympy.exp(-C)), {0: 1}, Q(1, 2)),            # an argument that is 0 to every order
    (sympy.erf(sympy.exp(-C)), {}, Q(1, 2)),
    (sympy.exp(-3 * C), {}, Q(3, 2)),
    (sympy.exp(-C) + sympy.exp(-3 * C), {}, Q(1, 2)),       # a sum keeps the slower rest
    (C + sympy.exp(-C), {-1: 1}, Q(1, 2)),
    (C * sympy.tanh(C), {-1: 1}, Q(1, 2)),                  # a product halves it: c·e^{−c} ≤ e^{−c/2}
    (C**2 * sympy.exp(-3 * C), {}, Q(3, 4)),
    ((C + sympy.exp(-C)) ** 2, {-2: 1}, Q(1, 4)),           # so does a power other than 0 and 1
    (sympy.sqrt(1 + sympy.exp(-C)), {0: 1}, Q(1, 4)),
    (sympy.Pow(C + sympy.exp(-C), 1, evaluate=False), {-1: 1}, Q(1, 2)),  # as normalizations
    (sympy.Pow(C + sympy.exp(-C), 0, evaluate=False), {0: 1}, Q(1, 2)),   # write them, unevaluated
    (sympy.Pow(sympy.tanh(C) - 1, 0, evaluate=False), {0: 1}, 1),
    (sympy.Pow(sympy.tanh(C) - 1, 1, evaluate=False), {}, 1),
    ((sympy.tanh(C) - 1) ** 2, {}, Q(1, 2)),                # 0 to every order, squared
    (1 / (1 + sympy.exp(C)), {}, Q(1, 2)),                  # a sigmoid of a growing argument
    (1 / (1 + 2 * sympy.exp(3 * C)), {}, Q(3, 2)),          # its exponential inside a product
    ((1 + sympy.exp(3 * C)) ** -2, {}, 3),                  # (…)⁻² ≤ e^{−2·3c/2}
    (1 / (1 + sympy.exp(-C)), {0: 1}, Q(1, 4)),            # a falling exponential is no bound
    (sympy.Abs(C - 2 * C**2), {-2: 2, -1: -1}, None),      # |u| = sign(lead)·u
    (sympy.Abs(C * sympy.tanh(C) - 2 * C + 3), {-1: 1, 0: -3}, Q(1, 2)),
    (sympy.Abs(sympy.tanh(C) - 1), {}, 1),                  # |0 + O(e^{−c})|
])
def test_saturations_give_their_sign_and_an_exact_rate(expr: Any, terms: dict[int, Any],
                                                       rate: Any) -> None:
    found = approximate(expr)
    assert _terms(found.main) == {Fraction(e): v for e, v in terms.items()}
    assert found.main.order is None
    assert found.rate == rate


@pytest.mark.parametrize(("expr", "message"), [
    (sympy.exp(-sympy.sqrt(C)), "exp of an argument growing like c^1/2: its rest vanishes like "
                                "exp(-c^1/2)"),
    (sympy.erf(C ** Q(1, 3)), "erf of an argument growing like c^1/3"),
    (sympy.tanh(sympy.sqrt(C)), "tanh of an argument growing like c^1/2"),
    (sympy.exp(1 / C), "exp of an argument that stays bounded but is not constant: its limit is "
                       "not a saturation"),
    (sympy.erf(1 / C), "erf of an argument that stays bounded"),
    (sympy.tanh(2 + 1 / C), "tanh of an argument that stays bounded"),
    ((sympy.sin(1)**2 + sympy.cos(1)**2 - 1) * C, "cannot decide whether the coefficient "
                                                   "-1 + cos(1)**2 + sin(1)**2 is 0"),
    (sympy.tanh(C * sympy.exp(sympy.I)), "cannot decide the sign of exp(I)"),
    # the normalizing-sum bound needs positive terms, exponents growing like c, a negative power
    (1 / (sympy.exp(C) - 1), "exp of a growing argument"),
    (1 / (1 + sympy.exp(sympy.sqrt(C))), "exp of a growing argument"),
    (sympy.sqrt(1 + sympy.exp(C)), "exp of a growing argument"),
    ((1 + sympy.exp(C)) ** 2, "exp of a growing argument"),
    (sympy.Pow(1 + sympy.exp(C), 0, evaluate=False), "exp of a growing argument"),
    (1 / sympy.tanh(sympy.exp(C)), "exp of a growing argument"),
    (sympy.sqrt(sympy.tanh(C) - 1), "a negative or fractional power of a part that is 0 to "
                                    "every order"),
    (1 / (sympy.tanh(C) - 1), "0 to every order"),
    (sympy.tanh(C) ** sympy.pi, "a power with exponent pi"),
])
def test_what_the_dominant_term_proof_refuses_and_why(expr: Any, message: str) -> None:
    with pytest.raises(Undecided, match=re.escape(message)):
        approximate(expr)


def test_approximations_are_cached_and_read_back_from_the_cache() -> None:
    cache: dict[sympy.Expr, Approximation] = {}
    found = approximate(C * sympy.tanh(C), cache)
    assert cache[C * sympy.tanh(C)] is found and _terms(cache[sympy.tanh(C)].main) == {0: 1}
    # A cached part is used as given: tanh(c) read as 5 + O(e^{−2c}) makes c·tanh(c) ≈ 5c.
    planted = {sympy.tanh(C): Approximation(Series.of(5), Q(2))}
    found = approximate(C * sympy.tanh(C), planted)
    assert _terms(found.main) == {-1: 5} and found.rate == 1


# --- prove() on models small enough to derive by hand -------------------------------------------

HERE = "the model's θ and these inputs"


def _set(layer: nn.Module, weight: list[list[float]], bias: list[float] | None = None) -> None:
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        if bias is not None:
            layer.bias.copy_(torch.tensor(bias))


def _residual_at(proof: Any, model: nn.Module, x: torch.Tensor, c: float = 2.0) -> None:
    """The proof's residual, a nonzero entry of f(x; cθ) − cᵏ f(x; θ), against float64 at c = 2."""
    model = model.double()
    with torch.no_grad():
        plain = model(x.double()).flatten()
        for p in model.parameters():
            p.mul_(c)
        grown = model(x.double()).flatten()
        for p in model.parameters():
            p.div_(c)
    entries = grown - c ** int(proof.degree) * plain
    value = float(proof.residual.subs(C, c))
    assert value != 0 and min(abs(e - value) for e in entries.tolist()) < 1e-12


def test_a_linear_layer_is_exact_and_scaling_only_its_weight_leaves_the_bias_behind() -> None:
    layer = nn.Linear(1, 1)
    _set(layer, [[2.0]], [3.0])
    assert prove(layer, torch.ones(1, 1)) == [FormalProof("output", 1, 0, Grade.EXACT, Grade.EXACT)]
    # 2c·1 + 3 − c·(2 + 3) = 3 − 3c; (2c + 3)/c → 2.
    (proof,) = prove(layer, torch.ones(1, 1), params="weight")
    assert proof == FormalProof("output", 1, 3 - 3 * C, Grade.ASYMPTOTIC, Grade.ASYMPTOTIC, (2,), HERE)


@pytest.mark.parametrize(("scores", "dim", "limit"), [
    ([[1.0, 3.0], [2.0, 4.0]], -1, (0, 1, 0, 1)),      # each row's largest score
    ([[1.0, 3.0], [2.0, 4.0]], 1, (0, 0, 1, 1)),       # each column's
    ([[3.0, 3.0], [1.0, 2.0]], 2, (Q(1, 2), Q(1, 2), 0, 1)),  # a tie shares the row evenly
    ([[3.0, 1.0], [3.0, 2.0]], -2, (Q(1, 2), 0, Q(1, 2), 1)),
])
def test_softmax_of_scaled_scores_tends_to_its_argmax_and_shares_ties(
        scores: list[list[float]], dim: int, limit: tuple[Any, ...]) -> None:
    # softmax(c·s) for s = X·Wᵀ with X = I (a batch of one): the scores are Wᵀ, degree 0, only
    # e^{−c·gap} left.
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Softmax(dim))
    _set(model[0], torch.tensor(scores).T.tolist())
    x = torch.eye(2).unsqueeze(0)
    (proof,) = prove(model, x)
    assert (proof.output, proof.degree, proof.grade, proof.claimed, proof.quantifier, proof.reason) == (
        "output", 0, Grade.APPROXIMATE, Grade.APPROXIMATE, HERE, "")
    assert proof.limit == limit
    _residual_at(proof, model, x)


def test_the_residual_is_the_first_entry_that_moves() -> None:
    # tanh(c·(0, 1)): the first entry stays 0, the second is tanh(c) − tanh(1).
    model = nn.Sequential(nn.Linear(1, 2, bias=False), nn.Tanh())
    _set(model[0], [[0.0], [1.0]])
    assert prove(model, torch.ones(1, 1)) == [FormalProof(
        "output", 0, sympy.tanh(C) - sympy.tanh(1), Grade.APPROXIMATE, Grade.APPROXIMATE, (0, 1),
        HERE)]


def test_an_output_that_is_zero_proves_no_degree_and_moves_nowhere() -> None:
    # tanh(relu(−c)) = 0 for every c: its limit 0 refutes degree 0, and no entry moves.
    model = nn.Sequential(nn.Linear(1, 1, bias=False), nn.ReLU(), nn.Tanh())
    _set(model[0], [[-1.0]])
    assert prove(model, torch.ones(1, 1)) == [FormalProof(
        "output", 0, 0, None, Grade.APPROXIMATE, (0,), HERE, "f(x; cθ)/c^0 tends to [0]: not degree 0")]


def test_an_output_without_a_degree_is_skipped() -> None:
    class Shrinking(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(1, 1, bias=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.linear(x)
            return torch.tanh(x / h), h           # tanh of a degree −1 input has no degree

    model = Shrinking()
    _set(model.linear, [[3.0]])
    assert prove(model, torch.ones(1, 1)) == [FormalProof("1", 1, 0, Grade.EXACT, Grade.EXACT,
                                                          (3,), HERE)]


def test_a_two_feature_layer_norm_without_eps_is_left_unproved() -> None:
    # Over two features LayerNorm without eps is a sign, (c − 3)/|c − 3|·(1, −1) here: exactly its
    # limit once c > 3, but the truncated expansion of 1/|c − 3| cannot show that rest to be 0.
    model = nn.Sequential(nn.Linear(1, 2, bias=False), nn.Linear(2, 2),
                          nn.LayerNorm(2, eps=0.0, elementwise_affine=False))
    _set(model[0], [[1.0], [0.0]])
    _set(model[1], [[1.0, 0.0], [0.0, 1.0]], [0.0, 3.0])
    (proof,) = prove(model, torch.ones(1, 1))
    assert (proof.output, proof.degree, proof.grade, proof.claimed, proof.limit, proof.quantifier,
            proof.reason) == ("output", 0, None, Grade.ASYMPTOTIC, (), HERE,
                              "the dominant-term proof does not apply: the rest after the limit is "
                              "below c^-6: beyond the expansion's precision")
    _residual_at(proof, model, torch.ones(1, 1), c=10.0)


def test_relus_whose_biases_fall_behind_are_approximate_with_no_rest_at_all() -> None:
    # f = c·(relu(2c² − 5c) − relu(c² − 5c)): 0 at c = 1, c³·1 once c ≥ 5; f/c³ has no rest left.
    model = nn.Sequential(nn.Linear(1, 1, bias=False), nn.Linear(1, 2), nn.ReLU(),
                          nn.Linear(2, 1, bias=False))
    _set(model[0], [[1.0]])
    _set(model[1], [[2.0], [1.0]], [-5.0, -5.0])
    _set(model[3], [[1.0, -1.0]])
    (proof,) = prove(model, torch.ones(1, 1))
    assert (proof.degree, proof.grade, proof.claimed, proof.proved, proof.limit, proof.quantifier) == (
        3, Grade.APPROXIMATE, Grade.ASYMPTOTIC, True, (1,), HERE)
    _residual_at(proof, model, torch.ones(1, 1), c=10.0)


def test_an_output_exact_at_theta_in_a_saturating_graph_is_exact_for_that_theta_only() -> None:
    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(1, 1, bias=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.linear(x)
            return h, torch.tanh(h)

    model = Both()
    _set(model.linear, [[-2.0]])
    assert prove(model, torch.ones(1, 1)) == [
        FormalProof("0", 1, 0, Grade.EXACT, Grade.EXACT, (-2,), HERE),
        FormalProof("1", 0, sympy.tanh(2) - sympy.tanh(2 * C), Grade.APPROXIMATE,
                    Grade.APPROXIMATE, (-1,), HERE)]


def test_inputs_given_by_keyword_are_evaluated_too() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.a(x) + self.b(y))

    model = TwoInputs()
    _set(model.a, [[1.0]])
    _set(model.b, [[-3.0]])
    # tanh(c·(1·1 − 3·1)) → −1
    (proof,) = prove(model, torch.ones(1, 1), y=torch.ones(1, 1))
    assert proof == FormalProof("output", 0, sympy.tanh(2) - sympy.tanh(2 * C), Grade.APPROXIMATE,
                                Grade.APPROXIMATE, (-1,), HERE)


EPS32 = sympy.Rational(repr(torch.finfo(torch.float32).eps))   # 2⁻²³, as torch writes it
EPS64 = sympy.Rational(repr(torch.finfo(torch.float64).eps))


@pytest.mark.parametrize(("norm", "dtype", "eps"), [
    (nn.LayerNorm(2, eps=0.25, elementwise_affine=False), torch.float32, Q(1, 4)),
    (nn.LayerNorm(2, elementwise_affine=False), torch.float32, Q(1, 100000)),   # eps=1e-5 exactly
    (nn.RMSNorm(2, eps=0.25, elementwise_affine=False), torch.float32, Q(1, 4)),
    (nn.RMSNorm(2, elementwise_affine=False), torch.float32, EPS32),  # eps=None: the dtype's
    (nn.RMSNorm(2, elementwise_affine=False), torch.float64, EPS64),
])
def test_a_normalization_uses_its_own_eps(norm: nn.Module, dtype: torch.dtype, eps: Any) -> None:
    # h = c·(1, −1): mean 0, mean square c², so out₀ = c/√(c² + eps) → 1, its rest ≈ −eps/(2c²).
    model = nn.Sequential(nn.Linear(1, 2, bias=False), norm).to(dtype)
    _set(model[0], [[1.0], [-1.0]])
    (proof,) = prove(model, torch.ones(1, 1, dtype=dtype))
    assert (proof.degree, proof.grade, proof.limit) == (0, Grade.ASYMPTOTIC, (1, -1))
    expected = C / sympy.sqrt(C**2 + eps) - 1 / sympy.sqrt(1 + eps)
    assert sympy.simplify(proof.residual - expected) == 0


def test_a_degree_claimed_too_low_tends_to_signed_infinity(swapped_rule: Any) -> None:
    model = nn.Linear(1, 2, bias=False)
    _set(model, [[-3.0], [2.0]])
    swapped_rule(aten.linear.default, lambda x, w, b=None: Degree.of(0, Grade.EXACT))
    # f(x; cθ)/c⁰ = (−3c, 2c) → (−∞, ∞); the first entry moves by −3c − (−3).
    assert prove(model, torch.ones(1, 1)) == [FormalProof(
        "output", 0, 3 - 3 * C, None, Grade.EXACT, (-sympy.oo, sympy.oo), HERE,
        "f(x; cθ)/c^0 tends to [-oo, oo]: not degree 0")]


@pytest.mark.parametrize(("series", "limit", "after"), [
    (_series({0: 3, 2: 5}), 3, 2),            # 3 + 5c⁻²: the rest goes like c⁻²
    (_series({1: 4}, 3), 0, 1),
    (_series({0: Q(1, 2)}), Q(1, 2), None),   # the main part is its limit
    (Series(()), 0, None),
    (_series({-1: -2, 0: 1}), -sympy.oo, None),
    (_series({Fraction(-1, 2): 3}, 1), sympy.oo, None),
])
def test_the_limit_and_the_first_power_after_it(series: Series, limit: Any, after: Any) -> None:
    assert _limit_and_rest(Approximation(series, None)) == (limit, after)


@pytest.mark.parametrize(("series", "message"), [
    (_series({}, 0), "the main part's limit is beyond the expansion's precision"),
    (_series({1: 2}, 0), "the main part's limit is beyond the expansion's precision"),
    (_series({0: 2}, 1), "the rest after the limit is below c^-1: beyond the expansion's precision"),
    (_series({0: 2}, 3), "the rest after the limit is below c^-3: beyond the expansion's precision"),
])
def test_a_limit_or_rest_past_the_expansion_is_refused(series: Series, message: str) -> None:
    with pytest.raises(Undecided) as refused:
        _limit_and_rest(Approximation(series, None))
    assert str(refused.value) == message


def test_ops_outside_the_symbolic_table_are_named() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ELU(), nn.Hardtanh())
    with pytest.raises(HomogeneityError, match=re.escape(
            "'aten.tanh.default', 'aten.transpose.int', 'aten.view.default']; the graph uses "
            "aten.elu.default, aten.hardtanh.default")):
        prove(model, torch.ones(1, 2))
    with pytest.raises(HomogeneityError, match="formal proofs cover the exact GELU, not "
                                               "approximate='tanh'"):
        prove(nn.Sequential(nn.Linear(2, 2), nn.GELU(approximate="tanh")), torch.ones(1, 2))


@pytest.mark.parametrize("norm", [nn.LayerNorm(2, eps=1.0, elementwise_affine=False),
                                  nn.RMSNorm(2, elementwise_affine=False), nn.RMSNorm(2)])
def test_exactness_beside_a_normalization_with_eps_holds_at_theta_only(norm: nn.Module) -> None:
    # (h, norm(h)) for h = c·(1, −1): h is exact, but the graph is not symbolic all through (eps 1,
    # or None: machine eps, with or without a weight γ = 1), so its proof speaks of this θ;
    # norm(h) = (1, −1)·c/√(c² + eps), times cγ with the weight.
    class Beside(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear, self.norm = nn.Linear(1, 2, bias=False), norm

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.linear(x)
            return h, self.norm(h)

    model = Beside()
    _set(model.linear, [[1.0], [-1.0]])
    exact, normed = prove(model, torch.ones(1, 1))
    assert exact == FormalProof("0", 1, 0, Grade.EXACT, Grade.EXACT, (1, -1), HERE)
    assert (normed.output, normed.grade, normed.limit, normed.quantifier) == (
        "1", Grade.ASYMPTOTIC, (1, -1), HERE)


def test_a_concrete_proof_needs_every_input_to_be_a_tensor() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(1, 1, bias=False)

        def forward(self, x: torch.Tensor, k: float) -> torch.Tensor:
            return torch.tanh(self.linear(x) * k)

    with pytest.raises(HomogeneityError, match="expected 2 tensor inputs for a concrete proof, got 1"):
        prove(Scaled(), torch.ones(1, 1), 2.0)  # type: ignore[arg-type]


def test_every_parameter_and_input_entry_is_its_own_symbol() -> None:
    # f = (XWᵀ − WXᵀ) + XWᵀWᵀ: a degree-1 part that vanishes only if X and W were the same
    # matrix, and a degree-2 part. Asymptotic: (XWᵀ − WXᵀ)/c is the rest.
    class Skew(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x) - self.linear.weight @ x.t() + self.linear(self.linear(x))

    model = Skew()
    _set(model.linear, [[1.0, 2.0], [3.0, 4.0]])
    # X = I: the skew part Wᵀ − W = [[0, 1], [−1, 0]], the limit (Wᵀ)² = [[7, 15], [10, 22]];
    # entry 1 is c·1 + 15c², against c²·16 at θ.
    assert prove(model, torch.eye(2)) == [FormalProof(
        "output", 2, C - C**2, Grade.ASYMPTOTIC, Grade.ASYMPTOTIC, (7, 15, 10, 22), HERE)]


class EveryPolynomialOp(nn.Module):
    """Every op of the polynomial table once, bias-free and ReLU: (h, g) of degrees 1 and 6, exact
    for every θ and x. Its ops are the whole table, not a proper subset of it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1, bias=False)
        self.w = nn.Parameter(torch.tensor([[2.0]]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.linear(x))                                       # linear, relu
        g = torch.addmm(torch.mm(h, self.w.t()), h, self.w)                  # addmm, mm, t
        g = torch.matmul(g, self.w.transpose(0, 1)).view(1).reshape(1, 1)    # matmul, transpose, ...
        return h, (g * g - (-g) * g + g * g).sum(dim=-1)                     # mul, neg, sub, add, sum


def test_a_polynomial_graph_is_exact_for_every_theta_where_its_output_is_zero() -> None:
    # At x = 0 both outputs are 0: at that θ and x alone their limit 0 would refute every degree,
    # but the symbolic proof holds for every θ and x, output after output.
    model = EveryPolynomialOp()
    assert prove(model, torch.zeros(1, 1)) == [FormalProof("0", 1, 0, Grade.EXACT, Grade.EXACT),
                                               FormalProof("1", 6, 0, Grade.EXACT, Grade.EXACT)]


class SignedHalves(nn.Module):
    """relu(h)·relu(−h) + b(a(x)) for h = a(x) + x: the product is 0 for every real h (one factor is),
    so f = b·a·x is exact of degree 2, although h mixes degrees 1 and 0."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
        _set(self.a, [[-3.0]])
        _set(self.b, [[2.0]])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x) + x
        return torch.relu(h) * torch.relu(-h) + self.b(self.a(x))


class ProductOfMagnitudes(nn.Module):
    """relu(hx) + relu(−hx) − (relu(h) + relu(−h))·(relu(x) + relu(−x)) + b(a(x)) for h = a(x) + x:
    |hx| − |h|·|x| is 0 for real h and x (sympy's expansion alone does not see it), so f = b·a·x."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
        _set(self.a, [[3.0]])
        _set(self.b, [[2.0]])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x) + x
        magnitudes = (torch.relu(h) + torch.relu(-h)) * (torch.relu(x) + torch.relu(-x))
        return torch.relu(h * x) + torch.relu(-(h * x)) - magnitudes + self.b(self.a(x))


class NormOfACancellation(nn.Module):
    """LayerNorm without eps of a(x) + x − x: the analysis sees degrees 1 and 0 mixed; sympy sees
    a(x), whose normalization is exact for every θ and x."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.norm = nn.Linear(1, 2, bias=False), nn.LayerNorm(2, eps=0.0)
        _set(self.a, [[1.0], [-2.0]])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.a(x) + x - x)


@pytest.mark.parametrize(("model", "degree"), [(SignedHalves(), 2), (ProductOfMagnitudes(), 2),
                                              (NormOfACancellation(), 1)])
def test_an_exact_output_claimed_asymptotic_is_proved_exact_for_every_theta(model: nn.Module,
                                                                           degree: int) -> None:
    # θ and x are real symbols: relu(h)·relu(−h) = (|h|² − h²)/4 is 0 only for a real h;
    # |hx| = |h|·|x| is proved by simplification, not by expansion alone; a(x) + x − x cancels
    # as it is built, before LayerNorm.
    assert prove(model, torch.ones(1, 1)) == [FormalProof("output", degree, 0, Grade.EXACT,
                                                          Grade.ASYMPTOTIC)]


class EmptyMemory(nn.Module):
    """a(x) + Σₘ act(m(memory)) over a memory of no rows: the sum is 0."""

    def __init__(self, activation: nn.Module) -> None:
        super().__init__()
        self.a, self.m, self.activation = (nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False),
                                           activation)
        _set(self.a, [[3.0]])

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.a(x) + self.activation(self.m(memory)).sum(dim=0, keepdim=True)


@pytest.mark.parametrize(("activation", "expected"), [
    # polynomial: exact for every θ and x
    (nn.ReLU(), FormalProof("output", 1, 0, Grade.EXACT, Grade.EXACT)),
    # tanh's degree 0 beside a(x)'s 1 is claimed asymptotic; at θ, f = 3c exactly
    (nn.Tanh(), FormalProof("output", 1, 0, Grade.EXACT, Grade.ASYMPTOTIC, (3,), HERE)),
    # GELU's degree 1 is approximate, and so is the claim for the sum
    (nn.GELU(), FormalProof("output", 1, 0, Grade.EXACT, Grade.APPROXIMATE, (3,), HERE)),
])
def test_an_empty_memory_adds_nothing(activation: nn.Module, expected: FormalProof) -> None:
    assert prove(EmptyMemory(activation), torch.ones(1, 1), torch.ones(0, 1)) == [expected]


def test_an_empty_batch_is_exact_for_every_theta() -> None:
    # no entry, so f(x; cθ) = c·f(x; θ) holds for each one
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU())
    assert prove(model, torch.ones(0, 2)) == [FormalProof("output", 1, 0, Grade.EXACT, Grade.EXACT)]


class DottedAndUnderscored(nn.Module):
    """Parameters named ``a.weight`` and ``a_weight``: f = (w₁ − w₂)·x + w₁·w₁."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(1, 1, bias=False)
        self.a_weight = nn.Parameter(torch.tensor([[2.0]]))
        _set(self.a, [[1.0]])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.a.weight - self.a_weight) * x + self.a.weight * self.a.weight


class NamedLikeItsInput(nn.Module):
    """A parameter named ``x`` beside the input ``x``: f = (p − x)·x + p·p."""

    def __init__(self) -> None:
        super().__init__()
        self.x = nn.Parameter(torch.tensor([[2.0]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.x - x) * x + self.x * self.x


@pytest.mark.parametrize(("model", "residual", "limit"), [
    # w₁ = 1, w₂ = 2: (c − 2c)·1 + c² against c²·(−1 + 1) = 0; f/c² = 1 − 1/c.
    (DottedAndUnderscored(), C**2 - C, 1),
    # p = 2, x = 1: (2c − 1)·1 + 4c² against c²·5; f/c² = 4 + 2/c − 1/c².
    (NamedLikeItsInput(), -C**2 + 2 * C - 1, 4),
])
def test_placeholders_whose_names_coincide_are_different_symbols(model: nn.Module, residual: Any,
                                                                 limit: int) -> None:
    # Were both placeholders one symbol s, f would be s·s, exact of degree 2 for every θ and x;
    # the degree-1 part makes f asymptotic.
    assert prove(model, torch.ones(1, 1)) == [FormalProof(
        "output", 2, residual, Grade.ASYMPTOTIC, Grade.ASYMPTOTIC, (limit,), HERE)]


@pytest.mark.parametrize(("activation", "limit"), [
    (nn.GELU(), (3, 0)),                   # x·Φ(x), Φ by erf(x/√2): relu in the limit
    (nn.SiLU(), (3, 0)),                   # x·σ(x)
    (nn.Sigmoid(), (1, 0)),
])
def test_saturating_activations_move_by_their_exact_formula(activation: nn.Module,
                                                            limit: tuple[int, ...]) -> None:
    model = nn.Sequential(nn.Linear(1, 2, bias=False), activation)
    _set(model[0], [[3.0], [-2.0]])
    (proof,) = prove(model, torch.ones(1, 1))
    assert (proof.grade, proof.limit) == (Grade.APPROXIMATE, limit)
    _residual_at(proof, model, torch.ones(1, 1))


@pytest.mark.parametrize(("norm", "limit"), [
    (nn.LayerNorm(2), (7, -10)),           # γ·(1, −1) + β
    (nn.RMSNorm(2), (2, -3)),              # γ·(1, −1)
])
def test_the_affine_part_of_a_normalization_scales_and_shifts_its_limit(
        norm: nn.Module, limit: tuple[int, ...]) -> None:
    # h = c·(1, −1) normalizes to (1, −1)·c/√(c² + eps); cγ and cβ make the output degree 1.
    model = nn.Sequential(nn.Linear(1, 2, bias=False), norm)
    _set(model[0], [[1.0], [-1.0]])
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([2.0, 3.0]))
        if getattr(norm, "bias", None) is not None:
            norm.bias.copy_(torch.tensor([5.0, -7.0]))
    (proof,) = prove(model, torch.ones(1, 1))
    assert (proof.degree, proof.grade, proof.limit) == (1, Grade.ASYMPTOTIC, limit)


def test_a_layer_norm_after_tanh_keeps_its_affine_part() -> None:
    # tanh(c·(1, −1)) = t·(1, −1) normalizes to (1, −1)·t/√(t² + eps), t → 1; cγ and cβ make the
    # output degree 1, with limit γ·(1, −1)/√(1 + eps) + β.
    model = nn.Sequential(nn.Linear(1, 2, bias=False), nn.Tanh(), nn.LayerNorm(2))
    _set(model[0], [[1.0], [-1.0]])
    with torch.no_grad():
        model[2].weight.copy_(torch.tensor([2.0, 3.0]))
        model[2].bias.copy_(torch.tensor([5.0, -7.0]))
    (proof,) = prove(model, torch.ones(1, 1))
    unit = 1 / sympy.sqrt(1 + Q(1, 100000))
    assert (proof.degree, proof.grade, proof.claimed) == (1, Grade.APPROXIMATE, Grade.APPROXIMATE)
    assert [sympy.simplify(v - e) for v, e in zip(proof.limit, (2 * unit + 5, -3 * unit - 7),
                                                   strict=True)] == [0, 0]


class ScaledSums(nn.Module):
    """add, sub and addmm with their alpha and beta factors, and a sum given a dtype."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op
        self.w = nn.Parameter(torch.tensor([0.5, -1.0]))
        self.b = nn.Parameter(torch.tensor([0.25, 0.75]))
        self.m = nn.Parameter(torch.tensor([[1.0, -2.0], [0.5, 3.0]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.op == "add":
            return torch.add(self.b, self.w * x, alpha=2)
        if self.op == "sub":
            return torch.sub(self.b, self.w * x, alpha=0.5)
        if self.op == "addmm":
            return torch.addmm(self.b, x, self.m, beta=3, alpha=2)
        return torch.sum(self.w * x, dim=-1, dtype=torch.float64)


@pytest.mark.parametrize(("op", "params", "limit"), [
    # Only the scaled parameters grow: b + 2c·w⊙x tends to 2·w⊙x, b − c·w⊙x/2 to −w⊙x/2.
    ("add", "w", lambda m, x: 2 * m.w * x),
    ("sub", "w", lambda m, x: -0.5 * m.w * x),
    # 3·b + 2·x·M with b scaled tends to 3·b, with M scaled to 2·x·M.
    ("addmm", "b", lambda m, x: 3 * m.b.expand_as(x)),
    ("addmm", "m", lambda m, x: 2 * x @ m.m),
])
def test_the_factors_of_add_sub_and_addmm_enter_the_limit(op: str, params: str, limit: Any) -> None:
    model = ScaledSums(op).double()
    x = torch.tensor([[3.0, 1.0]], dtype=torch.float64)
    (proof,) = prove(model, x, params=params)
    assert proof.degree == 1 and proof.grade is Grade.ASYMPTOTIC and proof.proved
    with torch.no_grad():
        torch.testing.assert_close(_limit(proof), limit(model, x).flatten(), rtol=1e-15, atol=0)


def test_a_sum_given_a_dtype_is_proved_exact_for_every_theta() -> None:
    (proof,) = prove(ScaledSums("sum"), torch.tensor([[3.0, 1.0]]))
    assert (proof.degree, proof.grade, proof.proved) == (1, Grade.EXACT, True)
    assert proof.quantifier == "every θ and x"
