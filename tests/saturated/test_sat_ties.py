"""Hard-attention ties: when they matter, and the float64 recomputation of float32 near-ties."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.errors import SaturationError
from saturated.rules import Settings
from saturated.saturate import saturate
from saturated.terms import NeedsOrders, Term
from saturated.ties import TiedWeights, _same_rows, contract

NEAR = 1 + 2.0**-23  # one float32 unit above 1: inside float32's rounding bound, far outside float64's


class TieHead(nn.Module):
    """One softmax head over 2-D tokens. Queries are the tokens' exact first coordinate; keys are
    that coordinate through two weight layers (degree 2), with a bias one degree below if
    ``bias``; values are the whole token. Tokens with equal first coordinates tie."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.key1 = nn.Linear(2, 1, bias=False)
        self.key2 = nn.Linear(1, 1, bias=bias)
        self.value = nn.Linear(2, 2, bias=False)
        with torch.no_grad():
            self.key1.weight.copy_(torch.tensor([[1.0, 0.0]]))
            self.key2.weight.fill_(1.0)
            if bias:
                self.key2.bias.fill_(0.5)
            self.value.weight.copy_(torch.eye(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = x[..., :1] @ self.key2(self.key1(x)).transpose(-2, -1)
        return torch.softmax(scores, dim=-1) @ self.value(x)


@pytest.fixture(scope="module")
def minilm_float64() -> tuple[nn.Module, Any]:
    """The whole pretrained MiniLM in float64."""
    return load_model("minilm", dtype=torch.float64)


def grown(net: nn.Module, c: float, x: torch.Tensor) -> torch.Tensor:
    return torch.func.functional_call(net, {n: c * p for n, p in net.named_parameters()}, (x,))


def test_tie_between_equal_tokens_is_decided_at_the_leading_order() -> None:
    # Tokens 0 and 2 are equal: every query with a positive coordinate ties them, yet any split
    # of its weight between them gives the same output.
    head = TieHead().double()
    x = torch.tensor([[[1.0, 0.0], [0.5, 0.0], [1.0, 0.0], [-1.0, 2.0]]], dtype=torch.float64)
    out = saturate(head, x)(x)
    assert out.orders == 1 and out.refined == () and out.degrees == 1.0
    expected = torch.tensor([[[1.0, 0.0]] * 3 + [[-1.0, 2.0]]], dtype=torch.float64)
    assert torch.equal(out.value, expected)  # query 3 (negative) picks the smallest key, its own
    assert (grown(head, 1e4, x) / 1e4 - expected).abs().max() < 1e-9


def test_tie_between_different_values_takes_more_orders() -> None:
    # Tokens 0 and 2 share their key but not their value; the keys' bias is the same for both,
    # so the tie holds at every order and the weight splits evenly (known once two orders are).
    head = TieHead().double()
    x = torch.tensor([[[1.0, 0.0], [0.5, 0.0], [1.0, 3.0], [-1.0, 2.0]]], dtype=torch.float64)
    out = saturate(head, x)(x)
    expected = torch.tensor([[[1.0, 1.5]] * 3 + [[-1.0, 2.0]]], dtype=torch.float64)
    assert out.orders == 2
    assert torch.allclose(out.value, expected, atol=1e-12)
    assert (grown(head, 1e4, x) / 1e4 - expected).abs().max() < 1e-9


def test_tie_that_matters_beyond_the_tracked_orders_is_an_error_naming_nodes_entry_and_query() -> None:
    # Entry 1 ties keys 0 and 1 (equal first coordinates) whose values differ; entry 0 does not.
    # Float32 marks entry 1, which float64 recomputes alone and still finds tied: the error names
    # the softmax and matmul nodes, and the entry as numbered in the caller's batch.
    x = torch.tensor([[[1.0, 0.0], [0.5, 3.0]], [[1.0, 0.0], [1.0, 3.0]]])
    with pytest.raises(SaturationError, match=r"tie.*node 'softmax'.*different values at batch "
                                              r"entry 1, query position 0.*node 'matmul"):
        saturate(TieHead(), x, settings=Settings(orders=1))


def test_nan_policy_marks_only_the_rows_a_tie_leaves_undetermined() -> None:
    head = TieHead().double()
    x = torch.tensor([[[1.0, 0.0], [0.5, 0.0], [1.0, 3.0], [-1.0, 2.0]]], dtype=torch.float64)
    value = saturate(head, x, settings=Settings(orders=1, ties="nan"))(x).value
    # The tied tokens agree in their first coordinate: that output is known, the second is not.
    assert torch.isnan(value[0, :3, 1]).all() and torch.equal(value[0, :3, 0], torch.ones(3).double())
    assert torch.equal(value[0, 3], torch.tensor([-1.0, 2.0], dtype=torch.float64))


@pytest.mark.parametrize("bias", [True, False], ids=["lower-order-unknown", "exact-scores"])
def test_float32_near_tie_is_recomputed_in_float64(bias: bool) -> None:
    # Entry 0: keys 1 and 1 + 2⁻²³ are within float32's rounding bound of each other, yet the
    # second is larger, so it alone is attended. Entry 1 has no tie and keeps its float32 result.
    head = TieHead(bias)
    x = torch.tensor([[[1.0, 0.0], [NEAR, 3.0]], [[1.0, 0.0], [0.5, 3.0]]])
    out = saturate(head, x)(x)
    assert out.refined == (0,) and out.orders == 1 and out.value.dtype == torch.float32
    assert torch.equal(out.value[0], torch.tensor([[NEAR, 3.0], [NEAR, 3.0]]))
    assert torch.equal(out.value[1], torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    # The same limit from float64 throughout, where no recomputation is needed.
    wide = saturate(head.double(), x.double())(x.double())
    assert wide.refined == () and torch.equal(wide.value.float(), out.value)


def test_contraction_check_agrees_between_matmul_and_einsum() -> None:
    # Rows 0 and 1 tie positions {0, 2}; the values agree there in column 0 only. Row 2 is decided.
    candidates = torch.tensor([[[True, False, True], [True, False, True], [False, True, False]]])
    count = candidates.sum(-1, keepdim=True)
    weights = TiedWeights(((candidates / count, 0.0),), candidates=candidates, count=count, dim=2,
                          reason="tie")
    values = Term(((torch.tensor([[[1.0, 5.0], [2.0, 6.0], [1.0, 7.0]]]), 2.0),), 1.0)
    by_matmul = contract(torch.matmul, weights, values, 1, None, mark=True)
    by_einsum = contract(lambda a, b: torch.einsum("bij,bjd->bid", a, b), weights, values, 1, None,
                         mark=True)
    expected = torch.tensor([[[1.0, math.nan], [1.0, math.nan], [2.0, 6.0]]])
    for out in (by_matmul, by_einsum):
        assert torch.equal(out.lead.isnan(), expected.isnan())
        assert torch.equal(out.lead.nan_to_num(-1), expected.nan_to_num(-1))
        assert out.floor == 1.0
    with pytest.raises(NeedsOrders, match="different values"):
        contract(torch.matmul, weights, values, 1, None, mark=False)


@pytest.mark.parametrize("size", [2, 5])
def test_contraction_checks_each_batch_entry_of_a_shared_tie_set(size: int) -> None:
    # Rows 0 and 1 of both batch entries tie the first ``size`` positions (as padded queries do,
    # with one tie set per sequence; large sets are compared once per set). The values agree
    # there in entry 0 and differ in column 1 of entry 1. Row 2 attends to the last position.
    tied = [True] * size + [False]
    rows = [tied, tied, [False] * size + [True]]
    candidates = torch.tensor([rows, rows])
    count = candidates.sum(-1, keepdim=True)
    weights = TiedWeights(((candidates / count, 0.0),), candidates=candidates, count=count, dim=2,
                          reason="tie")
    values = torch.tensor([[1.0, 5.0]] * size + [[3.0, 4.0]]).repeat(2, 1, 1)
    values[1, :size, 0] = 2.0
    values[1, size - 1, 1] = 6.0
    out = contract(torch.matmul, weights, Term(((values, 2.0),), 1.0), 1, None, mark=True)
    expected = torch.tensor([[[1.0, 5.0], [1.0, 5.0], [3.0, 4.0]],
                             [[2.0, math.nan], [2.0, math.nan], [3.0, 4.0]]])
    assert torch.equal(out.lead.nan_to_num(-1), expected.nan_to_num(-1))


def test_contraction_floor_rises_to_the_first_lower_part_that_differs() -> None:
    candidates = torch.tensor([[True, True]])
    weights = TiedWeights(((candidates / 2.0, 0.0),), candidates=candidates,
                          count=candidates.sum(-1, keepdim=True), dim=1, reason="tie")
    values = Term(((torch.tensor([[3.0], [3.0]]), 2.0), (torch.tensor([[1.0], [1.0]]), 1.0),
                   (torch.tensor([[0.0], [4.0]]), 0.0)), -1.0)
    out = contract(torch.matmul, weights, values, 3, None, mark=False)
    assert [d for _, d in out.parts] == [2.0, 1.0] and out.floor == 0.0
    assert out.lead.item() == 3.0


def test_pretrained_minilm_batch_matches_float64_one_sentence_at_a_time(
    minilm: tuple[nn.Module, Any], minilm_float64: tuple[nn.Module, Any]
) -> None:
    # The benchmark batch: float32 leaves a few near-ties that matter; those entries are
    # recomputed in float64. Every entry must agree with float64 throughout, sentence by sentence
    # without padding (float32 precision: measured 6e-6 relative).
    model, tokenizer = minilm
    model64, _ = minilm_float64
    enc = tokenizer(list(load_corpus(n=32)), padding=True, return_tensors="pt")
    kw = {"output_hidden_states": True, "return_dict": True}
    out = saturate(model, input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], **kw)(
        input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], **kw)
    assert out.refined, "the corpus batch is expected to hold float32 near-ties"
    limit64 = saturate(model64, input_ids=enc["input_ids"][:1], attention_mask=enc["attention_mask"][:1],
                       **kw)
    for entry in [*out.refined, 0, 1]:
        n = int(enc["attention_mask"][entry].sum())
        one = limit64(input_ids=enc["input_ids"][entry:entry + 1, :n],
                      attention_mask=enc["attention_mask"][entry:entry + 1, :n], **kw)
        assert one.refined == ()
        for batched, alone in zip(out.value.hidden_states, one.value.hidden_states):
            error = (batched[entry, :n].double() - alone[0]).abs().max() / alone[0].abs().max()
            assert error < 1e-4, f"entry {entry}: relative difference {float(error):.2e}"


def test_float64_recomputation_reads_the_current_parameters() -> None:
    head = TieHead()
    x = torch.tensor([[[1.0, 0.0], [NEAR, 3.0]], [[1.0, 0.0], [0.5, 3.0]]])
    limit = saturate(head, x)
    with torch.no_grad():
        head.value.weight.mul_(2.0)  # in place: the float64 copy must follow
    out = limit(x)
    assert out.refined == (0,)
    assert torch.equal(out.value[0], 2 * torch.tensor([[NEAR, 3.0], [NEAR, 3.0]]))


def test_bfloat16_model_gets_the_limit_of_its_own_parameters_in_float64() -> None:
    # bfloat16 calls nearly everything a tie (its tolerance is 0.5 of the row's largest score), so
    # every entry is recomputed in float64; the result is that limit, rounded to bfloat16.
    model, tokenizer = load_model("minilm", dtype=torch.bfloat16, num_layers=2)
    enc = tokenizer(list(load_corpus(n=3)), padding=True, return_tensors="pt")
    kw = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
          "output_hidden_states": True, "return_dict": True}
    out = saturate(model, **kw)(**kw)
    wide = saturate(copy.deepcopy(model).double(), **kw)(**kw)
    assert out.refined == (0, 1, 2) and wide.refined == ()
    for narrow, exact in [*zip(out.value.hidden_states, wide.value.hidden_states),
                          (out.value.pooler_output, wide.value.pooler_output)]:
        assert narrow.dtype == torch.bfloat16
        error = (narrow.double() - exact).abs().max() / exact.abs().max()
        assert error <= torch.finfo(torch.bfloat16).eps  # one unit of bfloat16 rounding


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), positions=st.sampled_from([1, 5, 61, 62, 63, 130]),
       heads=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_tied_rows_are_grouped_exactly_by_batch_entry_and_tie_set(rows, positions, heads, seed):
    """Two tied rows share a group exactly when their batch indices and tie sets are equal (a
    few sets, so that groups have several rows, differing in one position only, the last one
    among them, so that a difference past the first packed integer is seen), whatever the
    number of positions."""
    generator = torch.Generator().manual_seed(seed)
    sets = (torch.rand(1, positions, generator=generator) < 0.5).repeat(3, 1)
    sets[1, torch.randint(0, positions, (1,), generator=generator)] ^= True
    sets[2, -1] ^= True
    members = sets[torch.randint(0, 3, (rows,), generator=generator)]
    batch_rows = (torch.randint(0, 2, (rows,), generator=generator),
                  torch.randint(0, heads, (rows,), generator=generator))
    group, first = _same_rows(batch_rows, torch.Size([2, heads]), members)
    keys = torch.cat([batch_rows[0].unsqueeze(-1), batch_rows[1].unsqueeze(-1), members.long()], -1)
    expected = torch.unique(keys, dim=0, return_inverse=True)[1]
    same = group.unsqueeze(0) == group.unsqueeze(1)
    assert torch.equal(same, expected.unsqueeze(0) == expected.unsqueeze(1))
    assert sorted(set(group.tolist())) == list(range(int(group.max()) + 1))
    assert torch.equal(group[first], torch.arange(len(first)))  # each group's row is its own first
    assert all(int(first[g]) == group.tolist().index(g) for g in range(len(first)))
