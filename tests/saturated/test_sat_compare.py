"""Comparing a saturated reference network with an ordinary one, layer by layer."""

from __future__ import annotations

import math

import pytest
import torch

from empirical.models.loading import load_model
from saturated.compare import compare_layers
from saturated.errors import SaturationError
from saturated.modules import positional, previous_token_head
from saturated.saturate import saturate


def test_pretrained_minilm_against_its_saturated_version() -> None:
    model, tokenizer = load_model("minilm", num_layers=2, dtype=torch.float64)
    batch = dict(tokenizer(["Norms grow during training.", "Hi"], padding=True, return_tensors="pt"))
    limit = saturate(model, **batch, output_hidden_states=True)(**batch, output_hidden_states=True)
    scaled = {k: 1e5 * p for k, p in model.named_parameters()}
    with torch.no_grad():
        near = torch.func.functional_call(model, scaled, args=(),
                                          kwargs={**batch, "output_hidden_states": True})
        plain = model(**batch, output_hidden_states=True)
    mask = batch["attention_mask"].bool()
    far = compare_layers(limit.value.hidden_states, plain.hidden_states, mask)
    close = compare_layers(limit.value.hidden_states, near.hidden_states, mask,
                           logits=(limit.value.last_hidden_state, near.last_hidden_state))
    assert far.positions == int(mask.sum()) and min(far.cosines[1:]) < 0.9
    assert min(close.cosines) > 1 - 1e-9 and close.argmax_agreement == 1.0


def test_hard_reference_head_against_softmax_heads_of_growing_scale() -> None:
    head = previous_token_head()
    x = torch.tensor([[float(v) for v in row] for row in positional("abbaab")], dtype=torch.float64)
    cosines = []
    for c in (0.1, 1.0, 10.0):
        soft = head.softmax_at(x, c)
        cosines.append(compare_layers([head(x)], [soft], logits=(head(x), soft)).cosines[0])
    assert cosines[0] < cosines[1] < cosines[2] and cosines[2] > 1 - 1e-6


def test_mismatched_layers_are_rejected() -> None:
    with pytest.raises(SaturationError, match="as many layers"):
        compare_layers([torch.ones(2, 3)], [])
    with pytest.raises(SaturationError, match="no position"):
        compare_layers([torch.ones(2, 3)], [torch.ones(2, 3)], mask=torch.zeros(2, dtype=torch.bool))


def _cosine(u: list[float], v: list[float]) -> float:
    """The cosine of two vectors from its definition, in Python floats."""
    dot = sum(a * b for a, b in zip(u, v))
    return dot / math.sqrt(sum(a * a for a in u) * sum(b * b for b in v))


def _positions(t: torch.Tensor) -> list[list[float]]:
    """The vectors of a (..., d) tensor, one per position, in row-major order."""
    return t.reshape(-1, t.shape[-1]).tolist()


def _argmax(row: list[float]) -> int:
    return max(range(len(row)), key=row.__getitem__)


@pytest.mark.parametrize("positions_shape, mask", [
    ((), None),  # a single vector per layer: one position
    ((5,), None),
    ((2, 3), None),
    ((2, 3), [[True, False, True], [False, True, True]]),
    ((2, 3), [[False, False, False], [False, True, False]]),  # exactly one position counts
])
def test_cosines_and_argmax_agreement_follow_their_definitions(positions_shape, mask) -> None:
    gen = torch.Generator().manual_seed(len(positions_shape) + (mask is not None))
    widths = (4, 3)  # layers may differ in width
    reference = [torch.randn(*positions_shape, d, generator=gen) for d in widths]
    other = [torch.randn(*positions_shape, d, generator=gen) for d in widths]
    logits = tuple(torch.randn(*positions_shape, 3, generator=gen) for _ in range(2))
    kept = [True] * math.prod(positions_shape) if mask is None else [m for row in mask for m in row]
    mask_tensor = None if mask is None else torch.tensor(mask)
    result = compare_layers(reference, other, mask_tensor, logits=logits)
    counted = sum(kept)
    expected = [sum(_cosine(u, v) for u, v, k in zip(_positions(a), _positions(b), kept) if k) / counted
                for a, b in zip(reference, other)]
    agree = sum(_argmax(u) == _argmax(v) for u, v, k in zip(*map(_positions, logits), kept) if k)
    assert result.positions == counted
    assert result.cosines == pytest.approx(expected, rel=1e-12, abs=0)
    assert result.argmax_agreement == pytest.approx(agree / counted, rel=1e-12, abs=0)
    plain = compare_layers(reference, other, mask_tensor)
    assert plain.cosines == result.cosines and plain.argmax_agreement is None


def test_argmax_agreement_counts_only_the_masked_positions() -> None:
    # Four positions of two classes: the logits agree at 0, 1 and 3 and disagree at 2.
    ours = torch.tensor([[2.0, 1.0], [0.0, 5.0], [3.0, -1.0], [1.0, 4.0]])
    theirs = torch.tensor([[9.0, 1.0], [1.0, 2.0], [0.0, 1.0], [-2.0, 0.5]])
    layer = [torch.ones(4, 2)]
    assert compare_layers(layer, layer, logits=[ours, theirs]).argmax_agreement == 3 / 4
    masked = compare_layers(layer, layer, torch.tensor([False, True, True, False]), logits=(ours, theirs))
    assert masked.argmax_agreement == 1 / 2 and masked.positions == 2
    assert masked.cosines == pytest.approx((1.0,), abs=1e-15)


BARE = torch.ones(3)
GOOD = [torch.ones(2, 3, 4)]  # positions (2, 3)


@pytest.mark.parametrize("reference, other, message", [
    (BARE, GOOD, "expected reference to be a list of per-layer tensors, got tensor([1., 1., 1.]) (Tensor)"),
    (GOOD, BARE, "expected other to be a list of per-layer tensors, got tensor([1., 1., 1.]) (Tensor)"),
    ([torch.ones(2), [[1.0, 2.0]]], GOOD * 2,
     "expected reference to hold real tensors, got [[1.0, 2.0]] (list)"),
    (GOOD, [torch.ones(2, dtype=torch.complex64)],
     "expected other to hold real tensors, got tensor([1.+0.j, 1.+0.j]) (Tensor)"),
    (GOOD * 2, GOOD, "expected as many layers on both sides, got 2 and 1"),
    ([], [], "expected at least one layer to compare"),
    (GOOD * 2, [torch.ones(2, 3, 4), torch.ones(2, 4, 3)], "layer 1 has shape (2, 3, 4) against (2, 4, 3)"),
])
def test_bad_layers_are_rejected_with_what_was_expected(reference, other, message) -> None:
    with pytest.raises(SaturationError) as err:
        compare_layers(reference, other)
    assert str(err.value) == message


@pytest.mark.parametrize("mask, got", [
    (torch.ones(3, 2, dtype=torch.bool), "shape (3, 2)"),
    ([[True, True, True], [True, True, True]], "[[True, True, True], [True, True, True]] (list)"),
])
def test_a_mask_of_another_shape_is_rejected(mask, got) -> None:
    with pytest.raises(SaturationError) as err:
        compare_layers(GOOD, GOOD, mask)
    assert str(err.value) == ("expected a mask of shape (2, 3) (the layers' shape without the last "
                              f"dimension), got {got}")


def test_a_mask_without_a_position_is_rejected() -> None:
    with pytest.raises(SaturationError) as err:
        compare_layers(GOOD, GOOD, torch.zeros(2, 3, dtype=torch.bool))
    assert str(err.value) == "the mask selects no position to compare"


LOGITS = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("logits, kind", [
    ((LOGITS,), "tuple"),
    ((LOGITS, LOGITS, LOGITS), "tuple"),
    (torch.stack([LOGITS, LOGITS]), "Tensor"),  # a stacked pair is not a pair
    ((LOGITS, LOGITS[:, :2]), "tuple"),
    ([LOGITS, LOGITS.tolist()], "list"),
])
def test_logits_that_are_not_a_pair_over_the_positions_are_rejected(logits, kind) -> None:
    with pytest.raises(SaturationError, match=(
            r"(?s)^expected logits as \(reference, other\), each of shape \(2, 3\) \+ \(classes,\), "
            rf"got .*\({kind}\)$")):
        compare_layers(GOOD, GOOD, logits=logits)
