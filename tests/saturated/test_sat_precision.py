"""The refinement in ball arithmetic: decisions float64 cannot settle, against exact arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import flint
import numpy as np
import pytest
import torch
from torch import nn

from saturated import SaturationError, Settings, saturate
from saturated.precision import precisions
from saturated.precision.balls import balls_of, matmul, working_precision
from saturated.saturate import SaturatedModel


class Chain(nn.Module):
    """x ↦ w₂ᵀ(W₁x): two linear maps whose product cancels (degree 2, no nonlinearity)."""

    def __init__(self, big: float, small: float) -> None:
        super().__init__()
        self.first = nn.Linear(2, 2, bias=False).double()
        self.second = nn.Linear(2, 1, bias=False).double()
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([[big, 0.0], [big, small]], dtype=torch.float64))
            self.second.weight.copy_(torch.tensor([[1.0, -1.0]], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def _exact_chain(big: float, small: float, x: list[float]) -> Fraction:
    """w₂ᵀ(W₁x) in exact rationals (every float is one)."""
    first = Fraction(big) * Fraction(x[0])
    return first - (first + Fraction(small) * Fraction(x[1]))


def test_precisions_double_up_to_the_cap_and_none_below_128_bits():
    assert precisions(1024) == [128, 256, 512, 1024]
    assert precisions(300) == [128, 256, 300]
    assert precisions(127) == []


def test_ball_matrix_products_enclose_the_exact_products():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2, 3, 5, dtype=torch.float64, generator=generator)
    b = torch.randn(5, 4, dtype=torch.float64, generator=generator)
    with working_precision(128):
        product = matmul(balls_of(a), b.numpy())
        for index in np.ndindex(*product.shape):
            exact = sum(Fraction(float(a[index[0], index[1], k])) * Fraction(float(b[k, index[2]]))
                        for k in range(5))
            assert product[index].contains(flint.fmpq(exact.numerator, exact.denominator))
            assert abs(float(product[index].mid()) - float(exact)) <= math.ulp(float(exact))


def test_a_cancelling_chain_float64_cannot_settle_is_decided_and_exact():
    """(2³⁰ + 2⁻³⁰) rounds to 2³⁰ in float64: the computed output is 0, the exact one −2⁻³⁰; the
    zero test carries the rounding of W₁x, so float64 leaves it undetermined, and 128 bits decide."""
    big, small = 2.0**30, 2.0**-30
    model = Chain(big, small)
    x = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    with torch.no_grad():
        assert float(model(x)) == 0.0  # what float64 computes
    off = SaturatedModel(model, Settings(max_precision=0), undetermined="nan")(x)
    assert torch.isnan(off.value).all() and "refinement is off" in off.reasons[0][0]
    out = saturate(model, x)(x)
    assert out.degrees == 2.0
    assert float(out.value) == float(_exact_chain(big, small, [1.0, 1.0])) == -small
    assert [bits for bits, _, _ in out.precisions] == [128] and out.reasons == {}


def test_precision_rises_until_the_decision_is_made_and_the_cap_is_named_when_it_is_not():
    """2¹⁰⁰ + 2⁻¹⁰⁰ needs 201 bits: 128 leave the output's ball around 0 at the graph's last op,
    so the next level is half as many bits again, 192, whose four float64 terms hold 212 bits
    and decide it."""
    big, small = 2.0**100, 2.0**-100
    model = Chain(big, small)
    x = torch.tensor([[1.0, 1.0], [2.0, 1.0]], dtype=torch.float64)
    out = SaturatedModel(model, Settings(), undetermined="nan")(x)
    assert [bits for bits, _, _ in out.precisions] == [128, 192]
    expected = [float(_exact_chain(big, small, row)) for row in x.tolist()]
    assert out.value.flatten().tolist() == expected
    capped = SaturatedModel(model, Settings(max_precision=128), undetermined="nan")(x)
    assert torch.isnan(capped.value).all()
    assert set(capped.reasons) == {0, 1}
    assert "not proved nonzero" in capped.reasons[0][0] and "at 128 bits" in capped.reasons[0][0]
    with pytest.raises(SaturationError, match=r"and for batch entry 0: .*at 128 bits"):
        saturate(model, x, settings=Settings(max_precision=128))


def test_an_exact_zero_is_reported_undetermined_with_its_reason():
    """W₁x = (2³⁰, 2³⁰) exactly: the output is exactly 0 at degree 2, and only lower orders (which
    the balls do not track) could say more."""
    model = Chain(2.0**30, 2.0**-30)
    x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    out = SaturatedModel(model, Settings(), undetermined="nan")(x)
    assert torch.isnan(out.value).all()
    assert "not proved nonzero" in out.reasons[0][0]


def _deep_relu(depth: int, width: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    layers: list[nn.Module] = [nn.Linear(4, width, bias=False)]
    for _ in range(depth - 2):
        layers += [nn.ReLU(), nn.Linear(width, width, bias=False)]
    layers += [nn.ReLU(), nn.Linear(width, 3, bias=False)]
    return nn.Sequential(*layers).double()


def test_a_deep_network_whose_float64_bounds_outgrow_its_values_is_decided():
    """A 40-layer ReLU network without biases is exactly 40-homogeneous: its limit direction is
    f(x; θ) itself. The worst-case float64 bound, carried as ℓ2 radii, grows by ‖W‖₂ over the
    values' gain per layer (about 2√2 for a random ReLU layer: ReLU halves the energy) and
    swamps the outputs; the refinement decides every one, equal to the direct computation."""
    model = _deep_relu(40, 128, seed=0)
    x = torch.randn(3, 4, dtype=torch.float64)
    off = SaturatedModel(model, Settings(max_precision=0), undetermined="nan")(x)
    assert torch.isnan(off.value).all()  # float64 alone cannot tell these outputs from zero
    out = SaturatedModel(model, Settings(), undetermined="nan")(x)
    assert out.degrees == 40.0 and out.reasons == {}
    direct = model(x)
    assert torch.allclose(out.value, direct, rtol=1e-12, atol=0)


@pytest.mark.parametrize("family", ["t5", "llama", "gemma"])
def test_the_ball_pass_agrees_with_float64_on_tied_tokens(family, ball_pass):
    """Repeated tokens tie exactly at the leading order (T5's keys carry no position there; its
    position bias, one order below, splits them): the classes of identical sub-computations and
    the part below the lead decide what balls alone cannot, and the values agree with the fast
    path's wherever both decide. Gemma scales its norms by 1 + γ with γ initialized to 0: c·γ is
    0 for every c, so the scale is 1 (as a growing lead of 0 no precision would decide anything)."""
    import transformers
    from torch.utils import _pytree as pytree

    torch.manual_seed(0)
    if family == "t5":
        config = transformers.T5Config(d_model=32, d_ff=64, num_heads=2, d_kv=16, num_layers=2,
                                       num_decoder_layers=2, vocab_size=50)
        model = transformers.T5Model._from_config(config, attn_implementation="eager").eval()
    elif family == "llama":
        config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                          num_key_value_heads=1, num_hidden_layers=2, vocab_size=50)
        model = transformers.LlamaModel._from_config(config, attn_implementation="eager").eval()
    else:  # no padding row: a zero embedding row is a vector no precision gives a direction
        config = transformers.GemmaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                          num_key_value_heads=1, head_dim=16, num_hidden_layers=2,
                                          vocab_size=50, pad_token_id=None)
        model = transformers.GemmaModel._from_config(config, attn_implementation="eager").eval()
        assert not any(bool(p.any()) for name, p in model.named_parameters() if "norm" in name)
    ids = torch.tensor([[5, 9, 5, 17, 9, 5, 30], [7, 7, 7, 8, 9, 0, 0]])
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    batch = {"input_ids": ids, "attention_mask": mask, "output_hidden_states": True}
    if family == "t5":
        batch.update(decoder_input_ids=ids, decoder_attention_mask=mask)
    fields = {"encoder_hidden_states", "last_hidden_state"} if family == "t5" else {"hidden_states"}
    limit = SaturatedModel(model, Settings(max_precision=0), fields, "nan")
    fast = [v for v in pytree.tree_leaves(limit(**batch).value)
            if isinstance(v, torch.Tensor) and v.dim() == 3]
    balls = ball_pass(limit, batch, entries=2)
    assert balls.reasons == []
    found = [out[0] for out in balls.outputs if out is not None and isinstance(out[0], torch.Tensor)
             and out[0].dim() == 3]
    assert len(found) == len(fast) > 0
    real = mask.bool()
    for ours, theirs in zip(found, fast):
        assert not torch.isnan(ours[real]).any() and not torch.isnan(theirs[real]).any()
        # float32 outputs of the fast path against float64 midpoints of the balls
        scale = float(theirs.abs().max())
        assert torch.allclose(ours[real].float(), theirs[real], rtol=1e-5, atol=1e-6 * scale)


def test_a_pass_below_the_cap_is_given_up_once_every_entry_needs_more_precision():
    from saturated.precision.rules import Context, Escalate

    context = Context(mask_threshold=1e9, bits=128, entries=2, escalate=True)
    context.undecided(np.array([[True], [False]]), "a sign")
    context.undecided(np.array([[False], [True]]), "an exact zero", final=True)  # no precision helps
    with pytest.raises(Escalate, match="a sign at 128 bits"):
        context.undecided(np.array([[False], [True]]), "a sign")
    at_cap = Context(mask_threshold=1e9, bits=128, entries=2)
    at_cap.undecided(np.array([[True], [True]]), "a sign")
    assert at_cap.rising == {0, 1}


def test_tied_attention_weights_read_as_an_output_are_undetermined_not_an_even_split(ball_pass):
    """A hard-attention row tied at the leading order, in a way no order the balls track decides,
    holds an even split that only a product with values equal at the tied positions may read.
    As an output (the attention weights themselves) it is undetermined: on pretrained MiniLM's
    fourth layer, float64's more orders decide such rows one-hot, and the balls must not say
    otherwise."""
    from empirical.models.loading import load_model

    model, tokenizer = load_model("minilm", num_layers=4)
    enc = tokenizer(["Get useful information from live Python objects."], return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_attentions": True, "return_dict": True}
    limit = SaturatedModel(model, Settings(ties="nan", max_precision=0), {"attentions"}, "nan")
    fast = limit(**batch).value.attentions
    balls = ball_pass(limit, batch, entries=1)
    found = [out[0] for out in balls.outputs if out is not None and isinstance(out[0], torch.Tensor)]
    assert len(found) == len(fast) == 4
    undetermined = 0
    for ours, theirs in zip(found, fast):
        assert not torch.isnan(theirs).any()  # float64 decides every row here
        open_rows = torch.isnan(ours).any(-1)
        undetermined += int(open_rows.sum())
        assert torch.allclose(ours[~open_rows].float(), theirs[~open_rows], rtol=0, atol=1e-6)
    assert undetermined > 0
    reason = "untracked orders split, read other than as a product's weights"
    assert all(reason in why and open_ == frozenset() for _, why, open_ in balls.reasons)


def test_tied_weights_keep_their_marks_as_they_move_and_lose_their_split_elsewhere():
    """Moves carry a tied row's marks with its elements (a row moved whole is still tied where it
    was); any op that does not read tied weights as a product's weights sees them undetermined,
    each such element a final decision."""
    from saturated.precision.lead import Lead
    from saturated.precision.rules import BALL_RULES, Context, untied

    aten = torch.ops.aten
    weights = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    ties = np.array([[True, True, False], [False, False, False]])
    tied = Lead(0.0, exact=weights, ties=ties, zeros=weights.numpy() == 0)
    context = Context(mask_threshold=1e9, bits=128, entries=2)
    with working_precision(128):
        moved = BALL_RULES[aten.unsqueeze.default](context, tied, 0)
        assert moved.ties is not None and (moved.ties == ties[None]).all()
        assert moved.zeros is not None and (moved.zeros == (weights.numpy() == 0)[None]).all()
        plain = untied(context, tied)
        values = plain.operand(128)
    assert plain.ties is None
    assert np.isnan(values[-1][0, :2]).all() and not np.isnan(values[-1][0, 2])
    assert not np.isnan(values[-1][1]).any()
    assert [(scope, open_) for scope, _, open_ in context.reasons] == [(frozenset({0}), frozenset())]


def test_a_move_that_breaks_the_rows_of_tied_weights_leaves_them_undetermined():
    """A tie is a statement about a whole row of weights: moves that keep rows whole keep the
    marks (a reshape of the leading dimensions), and one that breaks them (a transpose, a slice
    along the row) makes the tied elements undetermined."""
    from saturated.precision.lead import Lead
    from saturated.precision.rules import BALL_RULES, Context

    aten = torch.ops.aten
    weights = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]]], dtype=torch.float64)
    ties = np.array([[[True, True, False], [False, False, False]]])
    context = Context(mask_threshold=1e9, bits=128, entries=1)
    with working_precision(128):
        kept = BALL_RULES[aten.view.default](context, Lead(0.0, exact=weights, ties=ties), [2, 3])
        assert kept.ties is not None and (kept.ties == ties.reshape(2, 3)).all() and not context.reasons
        broken = BALL_RULES[aten.transpose.int](context, Lead(0.0, exact=weights, ties=ties), 1, 2)
        assert broken.ties is None
        values = broken.operand(128)[-1]
        assert np.isnan(values[0, :2, 0]).all() and not np.isnan(values[0, 2]).any()
        assert len(context.reasons) == 1
