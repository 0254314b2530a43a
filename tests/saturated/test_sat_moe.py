"""The exact limit of mixture-of-experts transformers: one-layer random-init Mixtral and Qwen2-MoE
(the published routers: softmax, top-2 of 8 renormalized, and top-4 of 8 beside a shared expert
behind a sigmoid gate; widths shrunk) against the ordinary model at growing c in float64.

Hugging Face's RMSNorm squares its input in float32 whatever the model's dtype, so the degree-5
residual stream overflows beyond c ≈ 10⁴ (c⁵ squared passes 3.4·10³⁸): the scales stop there.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from torch import nn

from empirical.models.loading import family_config
from saturated import saturate

SHRUNK = {
    "mixtral": {"num_key_value_heads": 2, "head_dim": 16},
    "qwen2-moe": {"num_key_value_heads": 4, "num_experts": 8, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 32},
}
IDS = torch.tensor([[3, 17, 42, 9, 100, 7], [5, 6, 250, 8, 9, 1]])


def moe_model(family: str) -> nn.Module:
    """A seeded one-layer float64 model of ``family``, exported with batched expert products."""
    config = family_config(family, hidden_size=64, intermediate_size=128, vocab_size=256,
                           num_attention_heads=4, num_hidden_layers=1, pad_token_id=None,
                           **SHRUNK[family])
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager",
                                               experts_implementation="batched_mm")
    return model.to(torch.float64).eval()


@pytest.mark.parametrize("family", sorted(SHRUNK))
def test_moe_limit_agrees_with_float64_scaling(family: str) -> None:
    model = moe_model(family)
    out = saturate(model, input_ids=IDS, output_hidden_states=True)(input_ids=IDS, output_hidden_states=True)
    assert out.degrees.hidden_states == (1.0, 1.0)  # embeddings; the final RMSNorm's output
    errors = []
    for c in (1e1, 1e2, 1e3, 1e4):
        scaled = {name: c * p for name, p in model.named_parameters()}
        with torch.no_grad():
            ordinary = torch.func.functional_call(model, scaled, (), {"input_ids": IDS,
                                                                      "output_hidden_states": True})
        limit = out.value.hidden_states[-1]
        errors.append(float((ordinary.hidden_states[-1] / c - limit).abs().max() / limit.abs().max()))
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-5, errors


@pytest.mark.parametrize("y_shape", [(5, 3, 1), (2, 5, 3, 2)])
def test_expert_products_are_not_gathered_per_token_and_equal_the_gathered_ones(
        y_shape: tuple[int, ...]) -> None:
    """The batched expert products take each token's expert matrices by index, one copy per token;
    the limit multiplies per expert instead (the index is left to its bmm), with the same values
    and the same rounding bounds as the gathered product: for a column per token (the experts'
    batched products) and for several columns under a leading dimension."""
    from saturated.interpreter import _gathered_for_products
    from saturated.rounding import Rounding
    from saturated.rules import RULES, Settings
    from saturated.rules.products import GatheredRows
    from saturated.terms import Term

    model = moe_model("mixtral")
    limit = saturate(model, input_ids=IDS)
    graph = limit.program(input_ids=IDS).graph
    gathered = _gathered_for_products(graph)
    experts = [node for node in graph.nodes if node.target == torch.ops.aten.index.Tensor
               and "experts" in str(node.args[0])]
    assert experts and set(experts) <= gathered

    generator = torch.Generator().manual_seed(1)

    def exact(shape: tuple[int, ...], degrees: tuple[float, ...]) -> Term:
        parts = [(torch.randn(shape, generator=generator, dtype=torch.float64), d) for d in degrees]
        return Term(tuple(parts), roundings=tuple(Rounding.of_exact(a, d) for a, d in parts))

    weight = exact((4, 5, 3), (1.0,))
    index = torch.tensor([2, 0, 2, 3, 2])  # expert 1 unused, expert 2 thrice
    y = exact(y_shape, (2.0, 1.0))
    bmm = RULES[torch.ops.aten.bmm.default]
    settings = Settings(orders=2)
    per_expert = bmm(settings, GatheredRows(weight, index), y)
    copied = bmm(settings, weight.map(lambda w: w[index]), y)
    assert [d for _, d in per_expert.parts] == [d for _, d in copied.parts] == [3.0, 2.0]
    for (a, degree), (b, _) in zip(per_expert.parts, copied.parts):
        ours, theirs = per_expert.rounding(degree), copied.rounding(degree)
        assert ours.length == theirs.length
        # two summation orders of the same products: each within γₙ·Σ|x||y| of the exact sum
        magnitude = theirs.magnitude()
        torch.testing.assert_close(ours.magnitude(), magnitude, rtol=1e-15, atol=0)
        n = ours.length
        gamma = n * 2.0**-53 / (1 - n * 2.0**-53)
        assert bool(((a - b).abs() <= 2 * gamma * magnitude).all())


@pytest.mark.parametrize("family", sorted(SHRUNK))
def test_the_ball_pass_routes_tokens_as_the_fast_path_does(family: str, ball_pass,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The refinement runs the routers too (a model too deep for float64 reaches them there):
    at 128 bits every token is decided, and the hidden states agree with the fast path's, up to
    the float32 that Hugging Face's RMSNorm computes in (which the fast path follows and the balls
    do not). Its expert products are taken per expert, never gathered per token."""
    from saturated.interpreter import _gathered_for_products
    from saturated.precision import rules
    from saturated.rules import Settings
    from saturated.saturate import SaturatedModel

    per_expert = rules._per_expert
    products: list[int] = []
    monkeypatch.setattr(rules, "_per_expert", lambda *args: (products.append(1), per_expert(*args))[1])
    batch = {"input_ids": IDS, "output_hidden_states": True}
    limit = SaturatedModel(moe_model(family), Settings(max_precision=0), {"hidden_states"}, "nan")
    fast = limit(**batch).value.hidden_states
    balls = ball_pass(limit, batch, entries=2)
    gathered = _gathered_for_products(limit.program(**batch).graph)
    assert gathered and len(products) == sum(len(node.users) for node in gathered)
    assert balls.reasons == []
    found = [out[0] for out in balls.outputs if out is not None]
    assert len(found) == len(fast) == 2
    for ours, theirs in zip(found, fast):
        assert not torch.isnan(ours).any() and not torch.isnan(theirs).any()
        scale = float(theirs.abs().max())
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6 * scale)


def test_a_router_top_k_in_balls_takes_the_experts_with_weight_first() -> None:
    """Hard softmax weights: the experts with weight first, then experts of weight zero at every
    order (any of them: they add nothing); more experts with weight than k is a tie no precision
    splits (final), and a row the softmax left undecided stays so without a second reason."""
    import math

    import numpy as np

    from saturated.precision.lead import Lead
    from saturated.precision.rules import BALL_RULES, Context

    weights = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0], [math.nan] * 4],
                           dtype=torch.float64)
    zeros = np.array([[True, False, True, True], [False, True, False, True], [False] * 4])
    topk = BALL_RULES[torch.ops.aten.topk.default]

    def run(k: int) -> tuple[torch.Tensor, torch.Tensor, Context]:
        context = Context(mask_threshold=1e9, bits=128, entries=3)
        values, indices = topk(context, Lead(0.0, exact=weights, zeros=zeros), k, -1)
        midpoints = torch.tensor([[float(ball.mid()) if ball.is_finite() else math.nan for ball in row]
                                  for row in values.balls])
        return midpoints, indices, context

    values, indices, context = run(2)
    assert indices[:2].tolist() == [[1, 0], [0, 2]]
    assert values[:2].tolist() == [[1.0, 0.0], [0.5, 0.5]]
    assert torch.isnan(values[2]).all() and context.reasons == []
    values, indices, context = run(1)
    assert indices[:2].tolist() == [[1], [0]] and values[0].tolist() == [1.0]
    assert torch.isnan(values[1:]).all()
    [(entries, why, rising)] = context.reasons
    assert entries == frozenset({1}) and rising == frozenset() and "router tie at the k-th place" in why


def test_expert_products_in_balls_are_taken_per_expert_and_contain_the_gathered_ones() -> None:
    """The refinement's expert products, like the fast path's, multiply each expert's matrix by
    the tokens routed to it: the gathered product's balls and theirs overlap everywhere, with
    radii of the same size, and equal tokens routed to one expert get one class (a later tie
    between them stays provable), while tokens of different experts do not."""
    import flint
    import numpy as np

    from saturated.precision.balls import working_precision
    from saturated.precision.lead import Lead
    from saturated.precision.rules import BALL_RULES, Context
    from saturated.rules.products import GatheredRows

    generator = torch.Generator().manual_seed(2)
    weight = torch.randn(4, 5, 3, generator=generator, dtype=torch.float64)
    index = torch.tensor([2, 0, 2, 3, 2])  # expert 1 unused, expert 2 thrice
    columns = torch.randn(5, 3, 2, generator=generator, dtype=torch.float64)
    columns[2] = columns[0]  # tokens 0 and 2: one expert, equal inputs
    columns[1] = columns[0]  # token 1: the same inputs, another expert
    bmm = BALL_RULES[torch.ops.aten.bmm.default]
    with working_precision(128):
        third = np.vectorize(lambda v: flint.arb(v) / 3, otypes=[object])(columns.numpy())

        def run(x: object) -> Lead:
            tokens = np.array([0, 0, 0, 3, 4])[:, None, None]  # 1 and 2 share token 0's values
            y = Lead(1.0, array=third, ids=tokens * 6 + np.arange(6).reshape(3, 2))
            return bmm(Context(mask_threshold=1e9, bits=128, entries=1), x, y)

        per_expert = run(GatheredRows(Lead(1.0, exact=weight), index))
        copied = run(Lead(1.0, exact=weight[index]))
        ours, theirs = per_expert.balls, copied.balls
    assert per_expert.degree == copied.degree == 2.0 and ours.shape == theirs.shape == (5, 5, 2)
    for a, b in zip(ours.flat, theirs.flat):
        slack = 2.0**-120 * max(1.0, abs(float(b.mid())))
        assert a.overlaps(b) and float(a.rad()) <= 4 * float(b.rad()) + slack
    classes = per_expert.classes
    assert classes is not None
    assert (classes[0] == classes[2]).all() and not (classes[0] == classes[1]).any()
