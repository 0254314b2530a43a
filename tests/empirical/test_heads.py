"""The head atlas on constructed heads of known behaviour, then on MiniLM."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from transformers.modeling_outputs import BaseModelOutput

from empirical.errors import EmpiricalError
from empirical.measure.heads import HeadBatch, Thresholds, head_atlas, measure_heads, plot_atlas
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.bounds import scale_to_saturate, scale_to_saturate_map
from saturated.functional import default_rtol, hardmax
from saturated.modules import HardAttention, majority_head, positional, previous_token_head

WORDS = ["aaabbbbbbbbb", "bababbbbbbbb", "abbabbbbbbba", "bbbaaabbbbbb"]


def ties_head() -> HardAttention:
    """Planted ties: every query scores 1 on each 'a' and 0 on each 'b' (features (a, b, 1, i, i²)),
    so it attends uniformly to the a's of its prefix, or to the whole prefix if there is none."""
    zeros3 = [0, 0, 0]
    query = [zeros3, zeros3, [1, 0, 0], zeros3, zeros3]
    key = [[1, 0, 0], zeros3, zeros3, zeros3, zeros3]
    return HardAttention(query, key, [[1, 0], [0, 1], [0, 0], [0, 0], [0, 0]], causal=True)


def _padded(weights: Tensor, columns: int) -> Tensor:
    """A head's weight matrix on the 5 features of ``positional`` rows: the majority head reads
    only the 2 symbol features, and narrower query/key spaces gain zero columns (same scores)."""
    out = torch.zeros(5, columns, dtype=torch.float64)
    out[: weights.shape[0], : weights.shape[1]] = weights
    return out


class Heads(nn.Module):
    """Reference heads as one layer of ordinary softmax attention with trainable weights, returning
    Hugging Face style outputs; its saturated limit is the reference hard-attention layer."""

    def __init__(self, heads: list[HardAttention]) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.stack([_padded(h.query, 3) for h in heads]))
        self.key = nn.Parameter(torch.stack([_padded(h.key, 3) for h in heads]))
        self.value = nn.Parameter(torch.stack([_padded(h.value, 2) for h in heads]))

    def forward(self, x: Tensor, attention_mask: Tensor, output_attentions: bool = False,
                return_dict: bool = True) -> BaseModelOutput:
        q = torch.einsum("btd,hde->bhte", x, self.query)
        k = torch.einsum("btd,hde->bhte", x, self.key)
        scores = q @ k.transpose(-1, -2)
        n = x.shape[1]
        allowed = torch.ones(n, n, dtype=torch.bool).tril() & attention_mask.bool()[:, None, None, :]
        weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), -1)
        out = (weights @ torch.einsum("btd,hde->bhte", x, self.value)).sum(1)
        return BaseModelOutput(last_hidden_state=out, attentions=(weights,))


def _batch(words: list[str]) -> HeadBatch:
    width = max(len(w) for w in words)
    x = torch.zeros(len(words), width, 5, dtype=torch.float64)
    real = torch.zeros(len(words), width, dtype=torch.bool)
    for row, word in enumerate(words):
        x[row, : len(word)] = torch.tensor([[float(v) for v in r] for r in positional(word)])
        real[row, : len(word)] = True
    return HeadBatch({"x": x, "attention_mask": real.long()}, real)


def _expected(head: HardAttention, word: str) -> list[int]:
    """Positions each query attends to, from the reference head's exact rational scores."""
    def dot(u: list[Fraction], v: Any) -> Fraction:
        return sum((a * b for a, b in zip(u, v)), Fraction(0))

    rows = [r[: len(head.rational[0])] for r in positional(word)]  # the features the head reads
    query = [[dot(r, col) for col in zip(*head.rational[0])] for r in rows]
    key = [[dot(r, col) for col in zip(*head.rational[1])] for r in rows]
    counts = []
    for i, q in enumerate(query):
        scores = [dot(q, key[j]) for j in range(i + 1)]
        counts.append(scores.count(max(scores)))
    return counts


@pytest.fixture(scope="module")
def reference_atlas() -> Any:
    heads = [majority_head(), previous_token_head(), ties_head()]
    model = Heads(heads).eval()
    return heads, measure_heads(model, [_batch(WORDS[:2]), _batch(WORDS[2:])], causal=True, eps=1e-3)


def test_constructed_heads_are_measured_exactly(reference_atlas: Any) -> None:
    heads, atlas = reference_atlas
    for stats, head in zip(atlas.heads, heads):
        counts = [n for word in WORDS for n in _expected(head, word)[1:]]  # query 0: one allowed
        fractions = [n / (i + 1) for word in WORDS for i, n in enumerate(_expected(head, word)) if i]
        mean = sum(counts) / len(counts)
        assert stats.queries == len(counts)
        assert stats.positions == pytest.approx(mean)
        variance = sum((n - mean) ** 2 for n in counts) / len(counts)
        assert stats.positions_std == pytest.approx(math.sqrt(variance))
        assert stats.split == pytest.approx(sum(n > 1 for n in counts) / len(counts))
        assert stats.fraction == pytest.approx(sum(fractions) / len(fractions))
        assert stats.kind == Thresholds().classify(mean, sum(fractions) / len(fractions))
    assert [h.kind for h in atlas.heads] == ["global", "local", "mixed"]  # these words show all three


def test_uniform_and_previous_token_heads(reference_atlas: Any) -> None:
    _, atlas = reference_atlas
    uniform, previous, _ = atlas.heads
    assert uniform.fraction == 1.0 and uniform.split == 1.0 and uniform.mass == pytest.approx(1.0)
    assert previous.positions == 1.0 and previous.split == 0.0
    # At θ the previous-token head already puts most weight on the previous token (scores differ
    # by at least 1), and its top-score set is the limit's.
    assert previous.agreement == 1.0 and previous.mass > 0.5
    # The certified scale, read from log-probabilities at θ, matches the one computed from the
    # exact scores −(j − (i − 1))² of every query row.
    rows = [[-float((j - (i - 1)) ** 2) for j in range(i + 1)] for w in WORDS for i in range(1, len(w))]
    exact = max(scale_to_saturate(row, 1e-3)[1] for row in rows)
    assert previous.scale[0] <= exact * (1 + 1e-6) and exact <= previous.scale[1] * (1 + 1e-3)
    assert uniform.scale == (0.0, 0.0)  # every allowed position ties: already exactly hard
    assert uniform.entropy == pytest.approx(sum(math.log(i + 1) for w in WORDS for i in range(1, len(w)))
                                            / sum(len(w) - 1 for w in WORDS))


def test_paper_approximation_misleads_on_near_ties() -> None:
    """Two keys 1e-7 apart: the limit attends to one, while at 1000·θ (scores ×10⁶) both weights
    are far above 1e-5, so the paper's count calls every query split."""
    head = HardAttention([[0], [0], [1], [0], [0]], [[1], [Fraction(1) - Fraction(1, 10**7)], [0], [0], [0]],
                         [[1, 0], [0, 1], [0, 0], [0, 0], [0, 0]], causal=True)
    atlas = measure_heads(Heads([head]).eval(), [_batch(["ab", "ba"])], causal=True)
    stats = atlas.heads[0]
    assert stats.positions == 1.0 and stats.split == 0.0
    assert stats.paper_positions == 2.0 and stats.paper_split == 1.0


def test_classes_are_stable_across_corpora() -> None:
    """Pretrained MiniLM (its first two layers) on two disjoint corpora of six sentences."""
    model, tokenizer = load_model("minilm", num_layers=2)
    corpus = list(load_corpus(n=12))
    first = head_atlas(model, tokenizer, corpus[:6], paper=False)
    second = head_atlas(model, tokenizer, corpus[6:], paper=False)
    same = sum(a.kind == b.kind for a, b in zip(first.heads, second.heads))
    assert same == len(first.heads)
    assert all(abs(a.positions - b.positions) < 0.5 for a, b in zip(first.heads, second.heads))


def test_json_and_plot(reference_atlas: Any, tmp_path: Any) -> None:
    _, atlas = reference_atlas
    data = json.loads(atlas.to_json(tmp_path / "heads.json").read_text())
    assert data["schema"] == "normsat.heads/1"
    assert [(h["layer"], h["head"], h["class"]) for h in data["heads"]] == [
        (0, 0, "global"), (0, 1, "local"), (0, 2, "mixed")]
    assert data["thresholds"]["global_fraction"] == Thresholds().global_fraction
    path = plot_atlas({"reference": atlas, "again": atlas}, tmp_path / "atlas.png")
    assert path.stat().st_size > 1000


def test_bad_input() -> None:
    model = Heads([previous_token_head()]).eval()
    with pytest.raises(EmpiricalError, match="to be a number > 0 and < 1"):
        measure_heads(model, [_batch(["ab"])], causal=True, eps=1.5)

    class Silent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(1))

        def forward(self, x: Tensor, attention_mask: Tensor, **_: Any) -> BaseModelOutput:
            return BaseModelOutput(last_hidden_state=x * self.w, attentions=None)

    with pytest.raises(EmpiricalError, match="attn_implementation='eager'"):
        measure_heads(Silent().eval(), [_batch(["ab"])], causal=True)


class FixedScores(nn.Module):
    """One layer of attention over fixed float32 scores (batch, heads, queries, keys), softmaxed in
    float32 like a model's; its limit is hardmax of the same scores."""

    def __init__(self, scores: Tensor) -> None:
        super().__init__()
        self.scores = nn.Parameter(scores.float())

    def forward(self, x: Tensor, attention_mask: Tensor, output_attentions: bool = False,
                return_dict: bool = True) -> BaseModelOutput:
        return BaseModelOutput(last_hidden_state=x, attentions=(torch.softmax(self.scores, -1),))

    def limit(self, **_: Any) -> Any:
        return SimpleNamespace(value=BaseModelOutput(attentions=(hardmax(self.scores.detach().double(),
                                                                          rtol=0),)))


def _fixed_atlas(rows: list[list[float]], eps: float = 1e-3) -> tuple[FixedScores, Any]:
    width = len(rows[0])  # self-attention: as many queries as keys, the last row repeated
    scores = torch.tensor((rows + [rows[-1]] * width)[:width], dtype=torch.float32)[None, None]
    model = FixedScores(scores).eval()
    batch = HeadBatch({"x": torch.zeros(1, width), "attention_mask": torch.ones(1, width)},
                      torch.ones(1, width, dtype=torch.bool))
    return model, measure_heads(model, [batch], causal=False, eps=eps, paper=False, limit=model.limit)


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def test_scale_judges_ties_once_whatever_other_rows_are_present() -> None:
    """Row A's two best log-probabilities are 2e-4 apart: tied by float32's tolerance (its row
    reaches log p ≈ −30), so its scale is small; row B's gap 0.01 sets c ≈ 690. The head's scale
    must follow one tie rule with and without B (it used float32's to prune and float64's to
    certify, so A alone came out at ≈ 34 500)."""
    a, b = [0.0, -2e-4, -30.0], [0.0, -0.01, -30.0]
    rtol = default_rtol(torch.float32)
    for rows in ([a], [b], [a, b]):
        model, atlas = _fixed_atlas(rows)
        logs = torch.softmax(model.scores.detach()[0, 0], -1).double().log()
        expected = scale_to_saturate_map(logs, 1e-3, rtol=rtol).maximum
        scale = atlas.heads[0].scale
        assert _overlap(scale, expected), (rows, scale, expected)
        assert scale[1] <= scale[0] * 1.01  # not trivially wide
    assert _fixed_atlas([a])[1].heads[0].scale[1] < 1.0
    assert _fixed_atlas([a, b])[1].heads[0].scale == pytest.approx(_fixed_atlas([b])[1].heads[0].scale)


@pytest.mark.parametrize(("gap", "n"), [(2e-5, 2), (3e-5, 2), (3e-5, 8)])
def test_scale_contains_the_scale_of_the_scores_actually_softmaxed(gap: float, n: int) -> None:
    """At margins of 1e-5 the float32 rounding of the weights moves the log-probability gap by
    ~1 %, ten times the certificate's width: the atlas must still contain c* of the model's own
    float32 scores (exact in float64), not only of their rounded log-probabilities."""
    row = [0.3, 0.3 - gap] + [-0.7] * (n - 2)
    model, atlas = _fixed_atlas([row])
    true = scale_to_saturate(model.scores.detach()[0, 0, 0].double(), 1e-3, rtol=0)
    assert atlas.heads[0].queries == n
    scale = atlas.heads[0].scale
    assert scale[0] <= true[0] and true[1] <= scale[1]
    assert scale[1] <= scale[0] * 1.2  # the rounding bound, ~24 units of float32 over a 1e-5 gap


def test_non_finite_attention_is_refused() -> None:
    scores = torch.zeros(1, 3, 4, 4)
    scores[0, 1, 1, 2] = math.nan
    model = FixedScores(scores).eval()
    batch = HeadBatch({"x": torch.zeros(1, 4), "attention_mask": torch.ones(1, 4)},
                      torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(EmpiricalError, match=r"4 NaN and 0 infinite ones in layer 0, head\(s\) \[1\]"):
        measure_heads(model, [batch], causal=False, paper=False, limit=model.limit)
