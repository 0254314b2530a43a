"""Claims on models built to break them: one failing layer fails the claim, and each grade of
homogeneity holds exactly when the measured decay is at least as firm as the grade predicts.

The models are a few numbers wide; their degrees are derived by hand in each docstring.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from empirical import claims
from empirical.claims.api import _choose, model_batch
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


@pytest.mark.parametrize("layer", [3, -4, "layer 3", True])
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


class Grows(nn.Module):
    """Token ids (shifted by an integer buffer) → e = E[id + 1]·M, M a floating buffer (degree 1
    in c: buffers do not scale), and W·e + b, which is c²·W·e + c·b at c·θ, whose direction tends
    to W·e. float32, so that c² overflows unless the claim computes in float64."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.embed = nn.Embedding(8, 3)
        self.linear = nn.Linear(3, 3)
        self.register_buffer("mix", torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.5, 1.0]]))
        self.register_buffer("shift", torch.tensor(1))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = True, return_dict: bool = True) -> dict[str, Any]:
        e = self.embed(input_ids + self.shift) @ self.mix
        return {"hidden_states": (e, self.linear(e))}


def _gap_by_hand(model: Grows, rows: list[list[int]], c: float) -> float:
    """1 − cos(c·W·e + b, W·e), the last state's gap, averaged over every real token (float64)."""
    table = model.embed.weight.detach().double() @ model.mix.double()
    weight, bias = model.linear.weight.detach().double(), model.linear.bias.detach().double()
    limits = [table[i + 1] @ weight.T for row in rows for i in row]
    cosines = [nn.functional.cosine_similarity(c * limit + bias, limit, dim=0) for limit in limits]
    return 1 - float(torch.stack(cosines).mean())


ROWS_OF_IDS = [[1, 2, 3], [4]]  # the second row is padded (with id 0) to the first's length


def test_a_saturation_claim_measures_the_mean_gap_over_real_tokens() -> None:
    model = Grows().eval()
    gap = _gap_by_hand(model, ROWS_OF_IDS, 3.0)
    assert 1e-3 < gap < 0.5  # far from saturated at c = 3
    claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=gap * (1 + 1e-9))
    with pytest.raises(AssertionError) as err:
        claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=gap * (1 - 1e-6))
    assert re.fullmatch(rf"not saturated to eps={gap * (1 - 1e-6):g} at c=3: embeddings 1 − cos = \S+, "
                        rf"layer 1 1 − cos = {gap:.3e}", str(err.value)), str(err.value)
    # the embeddings, c·e against e, are saturated at every c: a claim about them alone holds
    claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=1e-12, layers=[0])
    claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=1e-12, layers=["embeddings"])
    with pytest.raises(AssertionError, match=r"at c=3: layer 1 1 − cos = \S+$"):
        claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=gap / 2, layers=["layer 1"])
    with pytest.raises(AssertionError, match=r"at c=1: embeddings"):
        claims.assert_saturated(model, [1, 2, 3], scale=1.0, eps=_gap_by_hand(model, [[1, 2, 3]], 1.0) / 2)
    claims.assert_saturated(model, [1, 2, 3], scale=1.0, eps=_gap_by_hand(model, [[1, 2, 3]], 1.0) * 1.01)


def test_each_model_and_each_state_of_a_model_has_its_own_limit() -> None:
    """W·e and −W·e point opposite ways: a limit kept from the other model (or from before the
    change) would put the last state's gap near 2."""
    model, flipped = Grows().eval(), Grows().eval()
    with torch.no_grad():
        flipped.linear.weight.neg_()
    for claimed in (model, flipped, model):
        claims.assert_saturated(claimed, ROWS_OF_IDS, scale=1e4, eps=1e-6)
    with torch.no_grad():
        model.linear.weight.neg_()  # in place: the same object, a new version of its weight
    claims.assert_saturated(model, ROWS_OF_IDS, scale=1e4, eps=1e-6)
    # the same tensors in another network that negates the last state
    claims.assert_saturated(Negated(model).eval(), ROWS_OF_IDS, scale=1e4, eps=1e-6)


class Negated(nn.Module):
    """Another network on the very same weights and buffers: ``inner``'s states, the last negated."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, **inputs: Any) -> dict[str, Any]:
        first, last = self.inner(**inputs)["hidden_states"]
        return {"hidden_states": (first, -last)}


def test_a_state_saturated_to_the_last_bit_holds_at_eps_zero() -> None:
    """With embeddings (2ᵏ, 0, 0) … and M = I, c·e and e have cosine exactly 1 at c = 3."""
    model = Grows().eval()
    with torch.no_grad():
        model.embed.weight.copy_(torch.diag(torch.tensor([1.0, 2.0, 4.0])).repeat(3, 1)[:8])
        model.mix.copy_(torch.eye(3))
    claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=0.0, layers=[0])
    with pytest.raises(AssertionError, match=r"eps=0 at c=3: layer 1 1 − cos = "):
        claims.assert_saturated(model, ROWS_OF_IDS, scale=3.0, eps=0.0, layers=[1])


def test_a_saturation_claim_computes_in_float64_and_leaves_the_model_as_it_was() -> None:
    """At c = 1e25, c²·W·e (about 1e50) overflows float32; in float64 the gap is about 1e-25."""
    model = Grows().eval()
    before = {name: t.clone() for name, t in model.state_dict().items()}
    claims.assert_saturated(model, ROWS_OF_IDS, scale=1e25, eps=1e-12)
    after = model.state_dict()
    assert all(t.dtype == before[n].dtype and torch.equal(t, before[n]) for n, t in after.items())
    assert model.embed.weight.dtype == torch.float32 and model.shift.dtype == torch.int64


def test_token_id_rows_are_batched_by_length_with_their_padding_masked() -> None:
    batch = model_batch(Tiny("linear").eval(), [[1, 2, 3], [4, 5]])
    assert batch.inputs["input_ids"].tolist() == [[4, 5, 0], [1, 2, 3]]
    assert batch.inputs["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    ((stack, mask),) = batch.stacks
    assert stack == "" and mask.tolist() == [[True, True, False], [True, True, True]]
    assert batch.indices == (1, 0)
    one = model_batch(Tiny("linear").eval(), [1, 2])
    assert one.inputs["input_ids"].tolist() == [[1, 2]] and one.indices == (0,)


def test_keyword_inputs_are_passed_as_given_with_a_mask_per_stack() -> None:
    ids, mask = torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]])
    batch = model_batch(Tiny("linear").eval(), {"input_ids": ids, "attention_mask": mask})
    assert set(batch.inputs) == {"input_ids", "attention_mask"}
    assert torch.equal(batch.inputs["input_ids"], ids)
    assert [(name, m.dtype, m.tolist()) for name, m in batch.stacks] == [
        ("", torch.bool, [[True, True, True], [True, True, False]])]
    assert batch.indices == (0, 1)
    unmasked = model_batch(Tiny("linear").eval(), {"input_ids": ids})
    assert unmasked.stacks[0][1].tolist() == [[True] * 3] * 2
    decoder = torch.tensor([[7, 8], [9, 0]])
    pair = model_batch(Tiny("linear").eval(), {"input_ids": ids, "attention_mask": mask,
                                               "decoder_input_ids": decoder})
    assert [(name, m.tolist()) for name, m in pair.stacks] == [
        ("encoder", [[True, True, True], [True, True, False]]), ("decoder", [[True, True], [True, True]])]
    masked = model_batch(Tiny("linear").eval(), {"input_ids": ids, "decoder_input_ids": decoder,
                                                 "decoder_attention_mask": torch.tensor([[1, 1], [1, 0]])})
    assert [(name, m.dtype, m.tolist()) for name, m in masked.stacks] == [
        ("encoder", torch.bool, [[True] * 3] * 2), ("decoder", torch.bool, [[True, True], [True, False]])]


class Doubles(nn.Module):
    """No parameters: its inputs twice (a claim needs no weights to read its device from)."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return input_ids * 2.0


@pytest.mark.parametrize(("inputs", "message"), [
    ({"ids": torch.tensor([[1]])}, "expected input_ids among the model inputs, got ['ids']"),
    ([], "expected one or more non-empty token id sequences, got []"),
    ([[1], []], "expected one or more non-empty token id sequences, got [[1], []]"),
])
def test_inputs_without_token_ids_are_refused(inputs: Any, message: str) -> None:
    with pytest.raises(EmpiricalError) as err:
        model_batch(Tiny("linear").eval(), inputs)
    assert str(err.value) == message
    assert model_batch(Doubles(), [[5, 6]]).inputs["input_ids"].tolist() == [[5, 6]]
    assert model_batch(Tiny("linear").eval(), [[5]]).inputs["input_ids"].tolist() == [[5]]


def test_a_model_in_training_mode_is_refused_with_the_remedy() -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_matches(reference, SecondLayerFlips(), ROWS)
    assert str(err.value) == ("expected SecondLayerFlips in eval() mode; in training mode dropout makes "
                              "every forward pass random, so no claim about it can be checked "
                              "(call model.eval())")
    for claim in (lambda: model_batch(reference, [[1]]), lambda: claims.assert_homogeneous(reference, IDS)):
        with pytest.raises(EmpiricalError) as err:
            claim()  # type: ignore[arg-type]
        assert str(err.value).startswith(
            "expected an nn.Module for a claim (it runs the model), got <function")


@pytest.mark.parametrize(("layers", "message"), [
    ([], "expected at least one layer to check, got layers=[] (None checks them all)"),
    ((), "expected at least one layer to check, got layers=() (None checks them all)"),
    ("0", "expected layers to be a list of layer indices, got the bare string '0'"),
    ([True], "expected layer indices (integers), got True in layers=[True]"),
    ([0, 1.0], "expected layer indices (integers), got 1.0 in layers=[0, 1.0]"),
])
def test_a_claim_about_no_layer_or_a_string_of_layers_is_refused(layers: Any, message: str) -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_matches(reference, SecondLayerFlips().eval(), ROWS, layers=layers)
    assert str(err.value).startswith(message)


def _rotated(angle: float) -> Any:
    """A reference whose layer 1 is the rows turned by ``angle``: 1 − cos = 1 − cos(angle) at each."""
    turn = torch.tensor([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]],
                        dtype=torch.float64)
    return lambda x: (x, x @ turn)


class Same(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * self.w, x * self.w)


def test_references_are_compared_to_one_millionth_by_default() -> None:
    """1 − cos(1e-3) = 5e-7 holds; 1 − cos(2e-3) = 2e-6 does not (the default eps is 1e-6)."""
    claims.assert_matches(_rotated(1e-3), Same().eval(), ROWS, scale=2.0)
    with pytest.raises(AssertionError, match=r"at c=2 by more than eps=1e-06 \(1 − cos\): "
                                             r"layer 0 cos = 1\.000000, layer 1 cos = 0\.999998$"):
        claims.assert_matches(_rotated(2e-3), Same().eval(), ROWS, scale=2.0)
    claims.assert_matches(_rotated(2e-3), Same().eval(), ROWS, scale=2.0, eps=2.1e-6)


@pytest.mark.parametrize("wrap", [
    lambda states: states,
    lambda states: list(states),
    lambda states: {"hidden_states": states, "logits": None},
    lambda states: SimpleNamespace(hidden_states=states, last_hidden_state=states[-1]),
], ids=["tuple", "list", "mapping", "attribute"])
def test_per_layer_outputs_are_hidden_states_or_a_sequence_of_tensors(wrap: Any) -> None:
    model = SecondLayerFlips().eval()
    claims.assert_matches(lambda x: wrap((x, x)), model, ROWS, layers=[0], eps=0.0, scale=2.0)
    with pytest.raises(AssertionError, match=r"layer 0 cos = 1\.000000, layer 1 cos = 0\.000000"):
        claims.assert_matches(lambda x: wrap((x, x)), model, ROWS, scale=2.0)


def test_a_single_tensor_is_one_layer_and_layer_counts_must_agree() -> None:
    """The reference's layers are compared (the model's first ones): one more than the model has is
    bad input."""
    claims.assert_matches(lambda x: x, Same().eval(), ROWS, eps=0.0)
    with pytest.raises(EmpiricalError) as err:
        claims.assert_matches(lambda x: (x, x, x), Same().eval(), ROWS, scale=2.0)
    assert str(err.value).startswith("cannot compare the reference (3 layers) with the model (2 layers) "
                                     "at layers [0, 1, 2]: ")
    with pytest.raises(EmpiricalError, match=r"^expected a tensor, a sequence of per-layer tensors or an "
                                             r"output with hidden_states, got int$"):
        claims.assert_matches(lambda x: 3, Same().eval(), ROWS)
    with pytest.raises(EmpiricalError, match=r"got tuple$"):
        claims.assert_matches(lambda x: (), Same().eval(), ROWS)
    with pytest.raises(EmpiricalError, match=r"got dict$"):
        claims.assert_matches(lambda x: {"hidden_states": ()}, Same().eval(), ROWS)


def test_positional_and_keyword_inputs_reach_both_networks() -> None:
    claims.assert_matches(reference, SecondLayerFlips().eval(), (ROWS,), layers=[0], eps=0.0)
    claims.assert_matches(reference, SecondLayerFlips().eval(), {"x": ROWS}, layers=[0], eps=0.0)
    # float32 inputs are widened like the model: both are compared in float64
    claims.assert_matches(lambda x: (x.double(), x.double()), SecondLayerFlips().eval(), ROWS.float(),
                          layers=[0], eps=0.0, scale=1e30)


def _raises(error: Exception) -> Any:
    def network(*args: Any, **kwargs: Any) -> Any:
        raise error
    return network


@pytest.mark.parametrize(("error", "message"), [
    (ValueError("rows must be 2 wide\nsecond line"), "the reference raised ValueError on the inputs given: "
                                                     "rows must be 2 wide"),
    (KeyError(), "the reference raised KeyError on the inputs given: "),
    (EmpiricalError("passed on as it is"), "passed on as it is"),
])
def test_a_reference_that_refuses_the_inputs_is_bad_input(error: Exception, message: str) -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_matches(_raises(error), Same().eval(), ROWS)
    assert str(err.value) == message


class Refuses(Same):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        raise ValueError(f"expected rows 3 wide, got {x.shape[-1]}")


def test_a_model_that_refuses_the_inputs_is_bad_input() -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_matches(reference, Refuses().eval(), ROWS, scale=2.0)
    assert str(err.value) == "the model raised ValueError on the inputs given: expected rows 3 wide, got 2"


def test_a_reference_that_is_not_callable_is_named() -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_matches(3, Same().eval(), ROWS)  # type: ignore[arg-type]
    assert str(err.value) == "expected the reference to be callable (a network), got 3 (int)"


class Exp(Tiny):
    """exp(W·e): a transcendental function of a degree-2 input, of no degree."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.exp(self.linear(self.embed(input_ids)))


class Argmax(Tiny):
    """argmax(W·e): an integer output, nothing to scale."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.linear(self.embed(input_ids)).argmax(-1)


UNREAD = ("expected degree as a number or an expression in k and grade as one of "
          "['exact', 'approximate', 'asymptotic', 'none'], got ")


@pytest.mark.parametrize(("model", "claim", "message"), [
    (Tiny, {"output": 3}, "expected output to be the name of an output, got 3 (int)"),
    (Tiny, {"output": "nope"}, "expected output among ['output'], got 'nope'"),
    (Tiny, {"degree": "k+", "grade": "exact"},
     f"{UNREAD}'k+' and 'exact'"),
    (Tiny, {"degree": 1, "grade": "sometimes"},
     f"{UNREAD}1 and 'sometimes'"),
    (Tiny, {"degree": "k", "grade": "exact"},  # a symbol, with the analysis's reason for the output
     "output 'output' has no degree to check: k, grade exact (linear map: degrees add (1 + 1))"),
    (Exp, {}, "output 'output' has no degree to check: nan, grade none (a transcendental function of an "
              "input of degree 2 is not homogeneous)"),
    (Argmax, {"degree": 1, "grade": "exact", "output": "output"},
     "the model returned no floating-point output 'output'"),
])
def test_a_homogeneity_claim_that_cannot_be_checked_says_why(model: type, claim: dict[str, Any],
                                                             message: str) -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_homogeneous(model("linear").eval(), IDS, **claim)
    assert str(err.value) == message


def test_a_failed_homogeneity_claim_reports_every_change_per_doubling() -> None:
    """f = W·E[x] is 2-homogeneous: f(cθ)/c¹ doubles with c, a relative change of 1 − 2⁻¹ at each
    of the ten doublings from 1 to 1024."""
    with pytest.raises(AssertionError) as err:
        claims.assert_homogeneous(Tiny("linear").eval(), IDS, 1, "exact")
    assert str(err.value) == (
        "output: claimed degree 1 (exact: exact decay of f(cθ)/c^1), measured not homogeneous of the "
        "claimed degree (measured degree ≈ 2); relative change per doubling of c from 1 to 1024: "
        + ", ".join(["5.00e-01"] * 10)
        + " (a steady change near |1 − 2^−Δk| means the degree is off by Δk)")


def test_analyses_are_reused_per_model_state_input_shape_and_parameters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from empirical.claims import api

    calls: list[tuple[int, ...]] = []
    real = api.analyze

    def counted(model: nn.Module, **kwargs: Any) -> Any:
        calls.append(tuple(kwargs["input_ids"].shape))
        return real(model, **kwargs)

    monkeypatch.setattr(api, "analyze", counted)
    model = Tiny("bias").eval()
    other = {"input_ids": torch.tensor([[1, 2]])}  # another shape
    claims.assert_homogeneous(model, IDS, 2, "asymptotic", output="output")  # all stated: no analysis
    assert calls == []
    claims.assert_homogeneous(model, IDS)
    claims.assert_homogeneous(model, IDS)  # the same analysis
    # the output stated, the degree or the grade derived: from the same analysis
    claims.assert_homogeneous(model, IDS, degree=2, output="output")
    claims.assert_homogeneous(model, IDS, grade="asymptotic", output="output")
    assert calls == [(1, 3)]
    claims.assert_homogeneous(model, other, 2, "asymptotic")  # its output known: no analysis at all
    assert calls == [(1, 3)]
    claims.assert_homogeneous(model, other)
    assert calls == [(1, 3), (1, 2)]
    claims.assert_homogeneous(model, IDS, params="linear.weight")  # other parameters scale
    assert len(calls) == 3
    with torch.no_grad():
        model.linear.weight.mul_(2.0)  # changed in place: analysed afresh
    claims.assert_homogeneous(model, IDS)
    assert len(calls) == 4


def test_the_caches_keep_the_most_recently_used_entries() -> None:
    from collections import OrderedDict

    from empirical.claims.api import _CACHE_SIZE, _remember

    assert _CACHE_SIZE == 4
    cache: OrderedDict[int, int] = OrderedDict()
    for key in range(4):
        assert _remember(cache, key, lambda key=key: 10 * key) == 10 * key
    assert _remember(cache, 0, lambda: pytest.fail("recomputed")) == 0  # now the most recent
    assert _remember(cache, 4, lambda: 40) == 40
    assert list(cache) == [2, 3, 0, 4]  # 1, the least recently used, left


class Embeds(Tiny):
    """Tiny with its embedding table exposed, as Hugging Face models expose theirs."""

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed


def test_claims_name_the_bad_bound_layers_or_token_id() -> None:
    model = Grows().eval()
    for claim in (lambda eps: claims.assert_saturated(model, [[1]], scale=2.0, eps=eps),
                  lambda eps: claims.assert_matches(reference, SecondLayerFlips().eval(), ROWS, eps=eps)):
        with pytest.raises(EmpiricalError) as err:
            claim(-0.5)
        assert str(err.value).startswith("expected eps (a bound on 1 − cos) to be ")
    with pytest.raises(EmpiricalError) as err:
        claims.assert_saturated(model, [[1]], scale=2.0, eps=0.1, layers="layer 1")
    assert str(err.value).startswith("expected layers to be a list of layer indices or labels, got the bare "
                                     "string 'layer 1'")
    with pytest.raises(EmpiricalError) as err:  # the ids are checked before either network runs
        claims.assert_matches(_raises(ValueError("never called")), Embeds("linear").eval(),
                              {"input_ids": torch.tensor([[1, 6]])})
    assert str(err.value).startswith("expected token ids from 0 to 5 (the model's embedding table has 6 "
                                     "rows), got id 6")


class NoStates(Grows):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = True, return_dict: bool = True) -> dict[str, Any]:
        return {"last_hidden_state": self.linear(self.embed(input_ids + self.shift) @ self.mix)}


def test_a_saturation_claim_on_a_model_without_hidden_states_names_it() -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_saturated(NoStates().eval(), [[1, 2]], scale=2.0, eps=0.1)
    assert str(err.value).startswith("expected the output of NoStates to carry 'hidden_states'")


class Sine(Grows):
    """sin(e): no limit rule exists for the sine."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = True, return_dict: bool = True) -> dict[str, Any]:
        e = self.embed(input_ids)
        return {"hidden_states": (e, torch.sin(e))}


def test_a_saturation_claim_without_an_exact_limit_is_bad_input() -> None:
    with pytest.raises(EmpiricalError) as err:
        claims.assert_saturated(Sine().eval(), [[1, 2]], scale=2.0, eps=0.1)
    assert str(err.value).startswith("the exact limit (c = ∞) is not available: no limit rule for op "
                                     "aten.sin.default")


class Pair(nn.Module):
    """An encoder–decoder's batching needs: its pad id 5 and decoder start id 7 in its config."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        self.config = SimpleNamespace(pad_token_id=5, is_encoder_decoder=True, decoder_start_token_id=7)


def test_token_id_rows_for_an_encoder_decoder_get_its_padding_and_decoder_inputs() -> None:
    batch = model_batch(Pair(), [[1, 2, 3], [4]])
    assert batch.inputs["input_ids"].tolist() == [[4, 5, 5], [1, 2, 3]]
    assert batch.inputs["decoder_input_ids"].tolist() == [[7, 4, 5], [7, 1, 2]]
    assert [(name, m.tolist()) for name, m in batch.stacks] == [
        ("encoder", [[True, False, False], [True, True, True]]),
        ("decoder", [[True, False, False], [True, True, True]])]


class Turns(nn.Module):
    """x·T with a float64 parameter T: a float32 x must be widened before the product."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = nn.Parameter(torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x @ self.turn,)


def test_floating_inputs_are_widened_to_float64_for_the_model() -> None:
    turn = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    claims.assert_matches(lambda x: (x.double() @ turn,), Turns().eval(), ROWS.float(), eps=0.0, scale=2.0)
