"""Claims on models built to break them: one failing layer fails the claim, and each grade of
homogeneity holds exactly when the measured decay is at least as firm as the grade predicts.

The models are a few numbers wide; their degrees are derived by hand in each docstring.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from empirical import claims
from empirical.claims.api import _choose
from empirical.errors import EmpiricalError

# Unit rows with power-of-two entries: every cosine below is exactly 1, 0 or −1 in float64.
ROWS = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)


def reference(x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    return (x, x)


class SecondLayerFlips(nn.Module):
    """Layer 0 is c·x (the reference's direction); layer 1 flips position 1 (cosine −1 there)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1, dtype=torch.float64))

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, ...]:
        flipped = torch.cat([x[:1], -x[1:]]) * self.w
        return (x * self.w, flipped)


def test_one_differing_layer_fails_the_claim_while_the_others_hold() -> None:
    model = SecondLayerFlips().eval()
    with pytest.raises(AssertionError, match=r"layer 0 cos = 1\.000000, layer 1 cos = 0\.000000"):
        claims.assert_matches(reference, model, ROWS, scale=2.0)
    with pytest.raises(AssertionError, match=r"layer 1 cos = 0\.000000"):
        claims.assert_matches(reference, model, ROWS, layers=[1], scale=2.0)


def test_a_layer_exactly_equal_in_direction_holds_at_eps_zero() -> None:
    claims.assert_matches(reference, SecondLayerFlips().eval(), ROWS, layers=[0], eps=0.0, scale=3.0)


def test_the_attention_mask_chooses_the_compared_positions() -> None:
    """Position 1, where layer 1 differs, is masked out: the claim holds on position 0."""
    model = SecondLayerFlips().eval()
    inputs = {"x": ROWS, "attention_mask": torch.tensor([1, 0])}
    claims.assert_matches(reference, model, inputs, eps=0.0, scale=2.0)
    with pytest.raises(AssertionError):
        claims.assert_matches(reference, model, {"x": ROWS}, eps=0.0, scale=2.0)


@pytest.mark.parametrize(("layers", "chosen"), [
    (None, ["embeddings", "layer 1", "layer 2"]),
    ([0, -1], ["embeddings", "layer 2"]),
    ([-3, 2], ["embeddings", "layer 2"]),
    (["layer 1"], ["layer 1"]),
])
def test_layers_are_chosen_by_index_or_label(layers, chosen) -> None:
    assert _choose(["embeddings", "layer 1", "layer 2"], layers) == chosen


@pytest.mark.parametrize("layer", [3, -4, "layer 3"])
def test_layers_outside_the_network_are_refused(layer) -> None:
    with pytest.raises(EmpiricalError, match="expected layers among"):
        _choose(["embeddings", "layer 1", "layer 2"], [layer])


class Tiny(nn.Module):
    """Token ids → embedding (degree 1) → linear map (degree 2), then:
    ``"linear"``: nothing, exactly 2-homogeneous; ``"bias"``: the linear map's bias (degree 1) is
    added to its degree-2 term, asymptotically 2-homogeneous; ``"sigmoid"``: a sigmoid,
    approximately 0-homogeneous."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.kind = kind
        self.embed = nn.Embedding(6, 4)
        self.linear = nn.Linear(4, 4, bias=kind == "bias")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.linear(self.embed(input_ids))
        return torch.sigmoid(h) if self.kind == "sigmoid" else h


IDS = {"input_ids": torch.tensor([[1, 2, 3]])}


@pytest.mark.parametrize(("kind", "degree", "grade", "holds"), [
    # an exact output is also approximate and asymptotic, but of its own degree only
    ("linear", 2, "exact", True),
    ("linear", 2, "approximate", True),
    ("linear", 2, "asymptotic", True),
    ("linear", 1, "exact", False),
    ("linear", 1, "asymptotic", False),
    ("linear", 3, "approximate", False),
    # an exponentially vanishing error is approximate (and so asymptotic), never exact
    ("sigmoid", 0, "approximate", True),
    ("sigmoid", 0, "asymptotic", True),
    ("sigmoid", 0, "exact", False),
    # a polynomially vanishing error is asymptotic only
    ("bias", 2, "asymptotic", True),
    ("bias", 2, "approximate", False),
    ("bias", 2, "exact", False),
])
def test_a_claim_holds_exactly_when_the_measurement_is_as_firm_as_its_grade(
        kind: str, degree: int, grade: str, holds: bool) -> None:
    model = Tiny(kind).eval()
    if holds:
        claims.assert_homogeneous(model, IDS, degree, grade)
    else:
        with pytest.raises(AssertionError, match=f"claimed degree {degree} \\({grade}"):
            claims.assert_homogeneous(model, IDS, degree, grade)


def test_the_derived_degree_and_grade_are_the_claim_by_default() -> None:
    """Without a stated degree the analysis's is claimed (2, asymptotic for the biased map): it
    holds, while a stated exact grade on the same model fails."""
    model = Tiny("bias").eval()
    claims.assert_homogeneous(model, IDS)
    claims.assert_homogeneous(model, IDS, degree=2)
    with pytest.raises(AssertionError, match="measured polynomial"):
        claims.assert_homogeneous(model, IDS, grade="exact")
