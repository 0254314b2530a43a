"""The head atlas on constructed heads of known behaviour, then on MiniLM."""

from __future__ import annotations

import json
import math
import re
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
from saturated.rounding import smallest_subnormal, unit_roundoff

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


def test_classes_are_stable_across_corpora(capsys: pytest.CaptureFixture[str]) -> None:
    """Pretrained MiniLM (its first two layers) on two disjoint corpora of six sentences; the first
    measured with thresholds, limit settings and eps of its own, a progress bar, a shorter truncation
    and batches of 3, the second with the defaults."""
    from dataclasses import asdict

    from empirical.models.corpus import Corpus
    from saturated.rules import Settings

    model, tokenizer = load_model("minilm", num_layers=2)
    corpus = list(load_corpus(n=12))
    strict = Thresholds(global_fraction=0.9, local_positions=1.5)
    uniform = Settings(ties="uniform")
    with pytest.warns(UserWarning, match="1 of 6 sentences are longer than 40 tokens"):  # 45 tokens
        first = head_atlas(model, tokenizer, load_corpus(n=6), paper=False, thresholds=strict, progress=True,
                           max_length=40, batch_size=3, settings=uniform, eps=0.99)
    assert first.record["limit_settings"] == asdict(uniform)
    assert first.record["corpus"] == load_corpus(n=6).to_dict() and list(load_corpus(n=6)) == corpus[:6]
    # Within eps = 0.99 every row of at most 100 keys is hard already at c = 0 (a winner's error is
    # at most 1 - 1/n, a loser's weight at most 1/2); within the default 1e-3 some head needs c > 0.
    assert first.eps == 0.99 and all(h.scale[0] == 0.0 for h in first.heads)
    assert "head atlas: 100%" in (err := capsys.readouterr().err) and "2/2" in err  # two batches of 3
    ids = tokenizer(corpus[:6])["input_ids"]
    assert max(map(len, ids)) > 40 and (first.record["max_length"], first.record["batch_size"]) == (40, 3)
    assert first.record["distributed"]["tokens_per_rank"] == [sum(min(len(i), 40) for i in ids)]
    second = head_atlas(model, tokenizer, corpus[6:])
    assert capsys.readouterr().err == ""
    assert any(h.scale[0] > 0.0 for h in second.heads)
    assert first.thresholds == strict and second.thresholds == Thresholds()
    assert [a.kind for a in first.heads] == [strict.classify(a.positions, a.fraction) for a in first.heads]
    pairs = list(zip(first.heads, second.heads))
    assert all(Thresholds().classify(a.positions, a.fraction) == b.kind for a, b in pairs)
    assert all(abs(a.positions - b.positions) < 0.5 for a, b in pairs)
    assert all(a.paper_positions is None and b.paper_positions is not None for a, b in pairs)
    # The record: the corpus, the defaults, one process holding every token.
    tokens = sum(len(ids) for ids in tokenizer(corpus[6:])["input_ids"])
    keys = ("corpus", "batch_size", "max_length", "distributed", "causal")
    sha256 = Corpus(tuple(corpus[6:]), "").sha256
    assert {key: second.record[key] for key in keys} == {
        "corpus": {"source": "in-memory list", "n_sentences": 6, "sha256": sha256},
        "batch_size": 16, "max_length": 512, "causal": False,
        "distributed": {"world_size": 1, "backend": None, "tokens_per_rank": [tokens]}}
    assert second.eps == 1e-3 and (second.num_layers, second.n_heads) == (2, 12)
    assert second.record["model"]["class"] == f"{type(model).__module__}.{type(model).__qualname__}"


def test_head_atlas_refuses_encoder_decoder_models_and_empty_corpora() -> None:
    with pytest.raises(EmpiricalError, match="the head atlas reads one stack of self-attention; "
                                             "encoder–decoder models are not supported"):
        head_atlas(Configured(SimpleNamespace(is_encoder_decoder=True)), None, ["A sentence."])
    # A model without a configuration is no encoder–decoder: the empty corpus is what is refused.
    with pytest.raises(EmpiricalError, match="expected at least one sentence, got an empty list"):
        head_atlas(Configured(None).eval(), None, [])


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


# A hand-made attention map: 5 positions, bidirectional. Head 0 ties 5, 1, 2, 3 and 4 positions
# (a global head); head 1 peaks on the diagonal (local); head 2 has a near-tie 1e-8 apart that
# float32 weights cannot tell apart while the limit keeps one position, and that the paper's
# count at 1000·θ (gap 1e-5) still calls a tie.
HAND_SCORES = [
    [[0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, -1, -1, -1], [2, 0, 2, 2, 0], [0, 0, 0, 0, -3]],
    [[-abs(j - i) for j in range(5)] for i in range(5)],
    [[0, -1e-8, -5, -5, -5]] * 5,
]


def _hand_atlas(undetermined: tuple[int, int] | None = None) -> tuple[Tensor, Tensor, Any]:
    """The atlas of HAND_SCORES with their exact hardmax as the limit; ``undetermined`` (head,
    query) makes that limit row NaN, as the limit leaves a tie no order breaks."""
    scores = torch.tensor(HAND_SCORES, dtype=torch.float32)[None]
    model = FixedScores(scores).eval()
    limit = hardmax(scores.double(), rtol=0)
    if undetermined is not None:
        limit[0, undetermined[0], undetermined[1]] = math.nan
    batch = HeadBatch({"x": torch.zeros(1, 5), "attention_mask": torch.ones(1, 5)},
                      torch.ones(1, 5, dtype=torch.bool))
    atlas = measure_heads(model, [batch], causal=False, eps=1e-3,
                          limit=lambda **_: SimpleNamespace(value=BaseModelOutput(attentions=(limit,))))
    return torch.softmax(scores[0], -1).double(), limit[0], atlas


def test_head_statistics_follow_their_definitions_on_a_hand_made_map() -> None:
    weights, limit, atlas = _hand_atlas()
    expected_counts = [[5, 1, 2, 3, 4], [1] * 5, [1] * 5]
    for head, stats in enumerate(atlas.heads):
        counts = expected_counts[head]
        assert [int((limit[head, q] > 0).sum()) for q in range(5)] == counts
        mean = sum(counts) / 5
        second_moment = sum(n * n for n in counts) / 5
        p = weights[head]
        attended = limit[head] > 0
        assert stats.queries == 5 and stats.undetermined == 0
        assert stats.positions == pytest.approx(mean)
        assert stats.positions_std == pytest.approx(math.sqrt(second_moment - mean**2))
        assert stats.split == pytest.approx(sum(n > 1 for n in counts) / 5)
        assert stats.fraction == pytest.approx(mean / 5)
        assert stats.mass == pytest.approx(float((p * attended).sum()) / 5, rel=1e-6)
        entropy = -sum(float(w) * math.log(float(w)) for row in p for w in row if w > 0) / 5
        assert stats.entropy == pytest.approx(entropy, rel=1e-6)
    global_head, local_head, near_tie = atlas.heads
    assert (global_head.positions, global_head.positions_std) == pytest.approx((3.0, math.sqrt(2.0)))
    assert [h.kind for h in atlas.heads] == ["global", "local", "local"]
    # Margins, log p_top − log p_second outside the top set: head 0 rows ∞, 1, 2, 2, 3 (median 2);
    # head 1 every row 1; head 2 every row 5 (the near-tie is inside the float32 top set).
    assert global_head.margin == pytest.approx(2.0, rel=1e-6)
    assert local_head.margin == pytest.approx(1.0, rel=1e-6)
    assert near_tie.margin == pytest.approx(5.0, rel=1e-6)
    # The top set at θ is the limit's set except where float32 ties what the limit does not.
    assert (global_head.agreement, local_head.agreement, near_tie.agreement) == (1.0, 1.0, 0.0)


def test_paper_statistics_count_weights_at_1000_theta() -> None:
    """At 1000·θ every score gap of head 0 and 1 is ≥ 1000, so the paper's count is the exact
    one (with its standard deviation from the same two moments); head 2's gap 1e-8 becomes 1e-5,
    two weights near 1/2: the paper counts 2 positions for every query."""
    _, _, atlas = _hand_atlas()
    for stats in atlas.heads[:2]:
        assert (stats.paper_positions, stats.paper_std, stats.paper_split) == pytest.approx(
            (stats.positions, stats.positions_std, stats.split))
    assert atlas.heads[0].paper_std == pytest.approx(math.sqrt(2.0))
    near_tie = atlas.heads[2]
    assert (near_tie.paper_positions, near_tie.paper_std, near_tie.paper_split) == (2.0, 0.0, 1.0)


def test_an_undetermined_row_is_counted_apart_and_left_out() -> None:
    """Head 0's query 0 (5 positions) undetermined: the statistics are those of the other four."""
    _, _, atlas = _hand_atlas(undetermined=(0, 0))
    stats = atlas.heads[0]
    assert (stats.queries, stats.undetermined) == (4, 1)
    counts = [1, 2, 3, 4]
    mean = sum(counts) / 4
    assert stats.positions == pytest.approx(mean)
    assert stats.positions_std == pytest.approx(math.sqrt(sum(n * n for n in counts) / 4 - mean**2))
    assert stats.split == pytest.approx(3 / 4)
    assert stats.paper_positions == pytest.approx(mean)
    assert (atlas.heads[1].queries, atlas.heads[1].undetermined) == (5, 0)


@pytest.mark.parametrize(("positions", "fraction", "kind"), [
    (9.0, 0.5, "global"),      # a fraction of exactly global_fraction is global
    (1.0, 0.5, "global"),      # the fraction decides first
    (2.0, 0.49, "local"),      # exactly local_positions is local
    (2.01, 0.49, "mixed"),
    (3.0, 0.4, "mixed"),
])
def test_classification_thresholds_include_their_boundaries(positions, fraction, kind) -> None:
    assert Thresholds().classify(positions, fraction) == kind


def test_custom_thresholds_move_the_boundaries() -> None:
    strict = Thresholds(global_fraction=0.9, local_positions=1.0)
    assert strict.classify(4.0, 0.8) == "mixed"
    assert strict.classify(1.0, 0.2) == "local"
    assert strict.classify(1.5, 0.2) == "mixed"
    assert strict.classify(4.0, 0.9) == "global"


# Attention maps given as inputs: a model whose attention weights are softmax(w·s) of the scores
# it is fed (w = 1 at θ, 1000 at 1000·θ), masked to the real keys (and to j ≤ i when causal),
# and whose limit is the exact hardmax of the same scores. Batches of different widths, padding
# and several layers and heads are then all hand-made, and every statistic can be recomputed by a
# plain loop over the definitions.


class ScoresIn(nn.Module):
    """Attention weights softmax(w·scores) per layer; ``scores`` is (batch, layers, heads, n, n)."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))
        self.causal = causal

    def allowed(self, attention_mask: Tensor) -> Tensor:
        n = attention_mask.shape[-1]
        allowed = attention_mask.bool()[:, None, None, :].expand(-1, 1, n, n)
        return allowed & torch.ones(n, n, dtype=torch.bool).tril() if self.causal else allowed

    def forward(self, scores: Tensor, attention_mask: Tensor, output_attentions: bool = False,
                return_dict: bool = True) -> SimpleNamespace:
        allowed = self.allowed(attention_mask)
        weights = torch.softmax((self.w * scores).masked_fill(~allowed[:, None], -math.inf), -1)
        return self.output(weights, output_attentions, return_dict)

    @staticmethod
    def output(weights: Tensor, output_attentions: bool, return_dict: bool) -> Any:
        """As Hugging Face models answer: attention weights only when asked for, a tuple without
        ``return_dict``."""
        attentions = tuple(weights.unbind(1)) if output_attentions else None
        return SimpleNamespace(attentions=attentions) if return_dict else (weights.sum(1),)  # not a Mapping

    def limit(self, scores: Tensor, attention_mask: Tensor, output_attentions: bool = False,
              return_dict: bool = True) -> SimpleNamespace:
        masked = scores.double().masked_fill(~self.allowed(attention_mask)[:, None], -math.inf)
        top = masked == masked.amax(-1, keepdim=True)
        out = self.output(top / top.sum(-1, keepdim=True), output_attentions, return_dict)
        return SimpleNamespace(value=vars(out) if return_dict else out)  # a plain dict


def _scores_batch(scores: list[Any], lengths: list[int]) -> HeadBatch:
    """A batch of hand-made scores (batch, layers, heads, n, n); sentence b has lengths[b] real
    positions (the rest is padding)."""
    grid = torch.tensor(scores, dtype=torch.float32)
    real = torch.arange(grid.shape[-1])[None, :] < torch.tensor(lengths)[:, None]
    return HeadBatch({"scores": grid, "attention_mask": real.long()}, real)


def _integer_scores(seed: int, batch: int, n: int) -> list[Any]:
    """Scores in {0, 1, 2} (ties of every size, gaps of 1) for 3 layers of 2 heads; head 0 of
    layer 1 and both heads of layer 2 are uniform (every score 0: every row already hard)."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 3, (batch, 3, 2, n, n), generator=generator).float()
    scores[:, 1, 0] = 0.0
    scores[:, 2] = 0.0
    return scores.tolist()


def _planted_batches() -> list[HeadBatch]:
    """Two batches of widths 5 and 3 with padding; layer 0 head 0 of the second batch has a row
    whose two best scores are 0.01 apart (one position in the limit, both above 1e-5 at 1000·θ)."""
    second = _integer_scores(2, 2, 3)
    second[0][0][0][2] = [1.0, 1.99, 2.0]
    return [_scores_batch(_integer_scores(1, 2, 5), [5, 3]), _scores_batch(second, [3, 2])]


def _direct_statistics(model: ScoresIn, batches: list[HeadBatch]) -> dict[tuple[int, int], dict[str, Any]]:
    """Every head's statistics by a plain loop over the queries and keys of every batch."""
    rows: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for batch in batches:
        scores = batch.inputs["scores"].double()
        with torch.no_grad():
            weights = torch.stack(model(**batch.inputs, output_attentions=True).attentions, 1).double()
        for b, length in enumerate(batch.real.sum(-1).tolist()):
            for layer in range(scores.shape[1]):
                for head in range(scores.shape[2]):
                    for i in range(length):
                        keys = list(range(i + 1 if model.causal else length))
                        if len(keys) < 2:
                            continue
                        s = [float(scores[b, layer, head, i, j]) for j in keys]
                        p = [float(weights[b, layer, head, i, j]) for j in keys]
                        attended = [j for j, v in zip(keys, s) if v == max(s)]
                        top = [j for j, v in zip(keys, p) if v == max(p)]
                        losers = [v for j, v in zip(keys, p) if j not in top and v > 0]
                        grown = [math.exp(1000 * (v - max(s))) for v in s]
                        rows.setdefault((layer, head), []).append({
                            "n": len(attended), "fraction": len(attended) / len(keys),
                            "mass": sum(p[keys.index(j)] for j in attended),
                            "entropy": -sum(v * math.log(v) for v in p if v > 0),
                            "margin": math.log(max(p)) - math.log(max(losers)) if losers else math.inf,
                            "agree": top == attended, "scores": s,
                            "paper": sum(v / sum(grown) > 1e-5 for v in grown)})
    out = {}
    for key, measured in rows.items():
        count = len(measured)

        def mean(values: list[float], count: int = count) -> float:
            return sum(values) / count

        n, paper = [r["n"] for r in measured], [r["paper"] for r in measured]
        margins = sorted(r["margin"] for r in measured)
        out[key] = {
            "queries": count, "positions": mean(n),
            "positions_std": math.sqrt(mean([(v - mean(n)) ** 2 for v in n])),
            "split": mean([v > 1 for v in n]), "fraction": mean([r["fraction"] for r in measured]),
            "mass": mean([r["mass"] for r in measured]), "entropy": mean([r["entropy"] for r in measured]),
            "margin": margins[(count - 1) // 2],  # torch's median: the lower of the middle two
            "agreement": mean([r["agree"] for r in measured]), "undetermined": 0,
            "paper_positions": mean(paper),
            "paper_std": math.sqrt(mean([(v - mean(paper)) ** 2 for v in paper])),
            "paper_split": mean([v > 1 for v in paper]),
            "rows": [r["scores"] for r in measured if r["margin"] < math.inf]}
    return out


def _check_against_direct(atlas: Any, direct: dict[tuple[int, int], dict[str, Any]],
                          eps: float = 1e-3) -> None:
    assert (atlas.num_layers, atlas.n_heads) == (3, 2)
    assert [(h.layer, h.head) for h in atlas.heads] == sorted(direct)
    for stats in atlas.heads:
        expected = direct[stats.layer, stats.head]
        for name in ("queries", "undetermined"):
            assert getattr(stats, name) == expected[name], (stats.layer, stats.head, name)
        for name in ("positions", "positions_std", "split", "fraction", "margin", "agreement",
                     "paper_positions", "paper_std", "paper_split"):
            assert getattr(stats, name) == pytest.approx(expected[name], rel=1e-9, abs=1e-12), \
                (stats.layer, stats.head, name)
        for name in ("mass", "entropy"):  # summed over a row in the attention's float32
            assert getattr(stats, name) == pytest.approx(expected[name], rel=1e-6), \
                (stats.layer, stats.head, name)
        assert stats.kind == Thresholds().classify(expected["positions"], expected["fraction"])
        if not expected["rows"]:  # every row already hard
            assert stats.scale == (0.0, 0.0)
            continue
        width = max(len(row) for row in expected["rows"])
        padded = [row + [-math.inf] * (width - len(row)) for row in expected["rows"]]
        true = scale_to_saturate_map(padded, eps, rtol=0).maximum
        assert stats.scale[0] <= true[0] and true[1] <= stats.scale[1], (stats.layer, stats.head)
        assert stats.scale[1] <= stats.scale[0] * 1.01


@pytest.fixture(scope="module", params=[True, False], ids=["causal", "bidirectional"])
def scores_atlas(request: Any) -> tuple[ScoresIn, list[HeadBatch], Any]:
    model = ScoresIn(causal=request.param).eval()
    batches = _planted_batches()
    atlas = measure_heads(model, batches, causal=model.causal, limit=model.limit)
    return model, batches, atlas


def test_statistics_of_padded_batches_of_several_widths_follow_a_direct_loop(scores_atlas: Any) -> None:
    model, batches, atlas = scores_atlas
    direct = _direct_statistics(model, batches)
    _check_against_direct(atlas, direct)
    # The planted near-tie: one position in the limit, two at 1000·θ.
    assert direct[0, 0]["paper_positions"] > direct[0, 0]["positions"]
    assert atlas.record["causal"] is model.causal


def test_ranks_measuring_shares_of_the_batches_give_the_single_process_atlas(
        scores_atlas: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under torchrun each rank measures its share and the totals are combined: here one process
    plays rank 1 (the second batch; what it sends is kept) and then rank 0 (the first batch),
    and the combined atlas must be the one a single process measures over both batches."""
    from empirical import distributed

    model, batches, single = scores_atlas
    sent: dict[str, Any] = {}
    monkeypatch.setattr(distributed, "current", lambda: distributed.World(1, 2, "gloo"))
    monkeypatch.setattr(distributed, "gather",
                        lambda value: sent.setdefault("gathered", value) and [value, value])
    monkeypatch.setattr(distributed, "reduce_sums", lambda sums: sent.setdefault("sums", dict(sums)))
    measure_heads(model, batches[1:], causal=model.causal, limit=model.limit, sharded=True)
    assert set(sent) == {"gathered", "sums"}

    monkeypatch.setattr(distributed, "current", lambda: distributed.World(0, 2, "gloo"))
    monkeypatch.setattr(distributed, "gather", lambda value: [value, sent["gathered"]])
    monkeypatch.setattr(distributed, "reduce_sums",
                        lambda sums: {key: value + sent["sums"][key] for key, value in sums.items()})
    merged = measure_heads(model, batches[:1], causal=model.causal, limit=model.limit, sharded=True)
    assert merged.heads == single.heads
    # Without the other rank's share the statistics differ: the test can tell.
    alone = measure_heads(model, batches[:1], causal=model.causal, limit=model.limit)
    assert [h.queries for h in alone.heads] != [h.queries for h in single.heads]


@pytest.mark.parametrize(("options", "message"), [
    ({"global_fraction": 0.0}, "expected global_fraction to be a number > 0 and ≤ 1, got 0.0"),
    ({"global_fraction": 1.5}, "expected global_fraction to be a number > 0 and ≤ 1, got 1.5"),
    ({"global_fraction": -0.5}, "expected global_fraction to be a number > 0 and ≤ 1, got -0.5"),
    ({"local_positions": 0.5}, "expected local_positions to be a number ≥ 1, got 0.5"),
    ({"local_positions": -1.0}, "expected local_positions to be a number ≥ 1, got -1.0"),
])
def test_thresholds_outside_their_range_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(EmpiricalError, match=re.escape(message)):
        Thresholds(**options)


def test_thresholds_at_the_ends_of_their_range_are_accepted() -> None:
    edge = Thresholds(global_fraction=1.0, local_positions=1.0)
    assert (edge.global_fraction, edge.local_positions) == (1.0, 1.0)
    assert edge.classify(1.0, 0.99) == "local" and edge.classify(5.0, 1.0) == "global"


class NoAttentions(nn.Module):
    """A model whose output carries no usable attention weights, as with a fused attention kernel."""

    def __init__(self, output: Any, implementation: str | None) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))
        self.output = output
        if implementation is not None:
            self.config = SimpleNamespace(_attn_implementation=implementation)

    def forward(self, **_: Any) -> Any:
        return self.output


@pytest.mark.parametrize(("output", "implementation"), [
    (SimpleNamespace(attentions=None), "sdpa"),
    ({"last_hidden_state": torch.zeros(1)}, None),
    (BaseModelOutput(attentions=()), "flash_attention_2"),
    (SimpleNamespace(attentions=(torch.ones(1, 1, 2, 2) / 2, None)), None),
], ids=["none", "mapping-without", "empty", "one-layer-missing"])
def test_missing_attention_weights_are_refused_with_the_kernel_named(output: Any,
                                                                     implementation: Any) -> None:
    model = NoAttentions(output, implementation).eval()
    expected = (f"expected attention weights from NoAttentions called with output_attentions=True (at θ), "
                f"got none; a fused attention kernel ({implementation or 'unknown'}) does not expose them: "
                "load the model with attn_implementation='eager'")
    with pytest.raises(EmpiricalError, match=re.escape(expected)):
        measure_heads(model, [_batch(["ab"])], causal=True, paper=False, limit=lambda **_: None)


class Unscalable(ScoresIn):
    """Attention weights only at θ: at any other scale of its weight the output has none."""

    def forward(self, scores: Tensor, attention_mask: Tensor, output_attentions: bool = False,
                return_dict: bool = True) -> SimpleNamespace:
        out = super().forward(scores, attention_mask, output_attentions, return_dict)
        return out if bool(self.w == 1) else SimpleNamespace(attentions=None)


def test_missing_attention_at_1000_theta_or_in_the_limit_says_where() -> None:
    batch = _planted_batches()[1]
    model = Unscalable(causal=True).eval()
    with pytest.raises(EmpiricalError, match=re.escape("from Unscalable called with output_attentions=True "
                                                       "(at 1000·θ), got none")):
        measure_heads(model, [batch], causal=True, limit=model.limit)
    # Without the paper's approximation there is no call at 1000·θ.
    plain = measure_heads(model, [batch], causal=True, limit=model.limit, paper=False)
    assert plain.heads[0].paper_positions is None
    with pytest.raises(EmpiricalError, match=re.escape("from Unscalable called with output_attentions=True "
                                                       "(in the limit), got none")):
        measure_heads(model, [batch], causal=True, paper=False,
                      limit=lambda **_: SimpleNamespace(value={"attentions": None}))


def test_a_limit_that_cannot_be_computed_is_reported_as_such() -> None:
    from saturated.errors import SaturationError

    def fails(**_: Any) -> Any:
        raise SaturationError("a tie no order breaks at node softmax")

    model = ScoresIn(causal=True).eval()
    with pytest.raises(EmpiricalError, match=re.escape("the exact limit is not available: a tie no order "
                                                       "breaks at node softmax")):
        measure_heads(model, [_planted_batches()[1]], causal=True, paper=False, limit=fails)


class Configured(nn.Module):
    """A model with a given configuration and, optionally, a submodule marked ``is_causal``."""

    def __init__(self, config: Any, marked: Any = None) -> None:
        super().__init__()
        if config is not None:
            self.config = config
        self.inner = nn.Linear(1, 1)
        if marked is not None:
            self.inner.is_causal = marked


@pytest.mark.parametrize(("config", "marked", "causal"), [
    (None, None, False),
    (SimpleNamespace(), None, False),
    (SimpleNamespace(is_decoder=True, model_type="bert"), None, True),
    (SimpleNamespace(is_decoder=False, model_type="gpt2"), None, True),
    (SimpleNamespace(model_type="llama"), None, True),
    (SimpleNamespace(is_decoder=False, model_type="bert"), None, False),
    (SimpleNamespace(is_decoder=False, model_type="qwen2"), True, True),
    (None, True, True),
    (SimpleNamespace(model_type="bert"), "yes", False),  # only True itself marks a causal module
    (SimpleNamespace(model_type="bert"), False, False),
])
def test_causal_models_are_recognised_by_configuration_type_or_a_marked_module(config: Any, marked: Any,
                                                                               causal: bool) -> None:
    from empirical.measure.heads import _is_causal

    assert _is_causal(Configured(config, marked)) is causal


def test_the_rounding_of_the_attention_dtype() -> None:
    from empirical.measure.heads import _rounding

    assert _rounding(torch.float32) == (2.0**-24, 2.0**-149)
    assert _rounding(torch.float64) == (2.0**-53, 2.0**-1074)
    assert _rounding(torch.bfloat16) == (2.0**-8, 2.0**-133)


class GivenWeights(ScoresIn):
    """Attention weights fed in as they are, (batch, layers, heads, n, n), NaN and ∞ included."""

    def forward(self, scores: Tensor, attention_mask: Tensor, output_attentions: bool = False,
                return_dict: bool = True) -> SimpleNamespace:
        return self.output(self.w * scores, output_attentions, return_dict)

    def limit(self, scores: Tensor, attention_mask: Tensor, output_attentions: bool = False,
              return_dict: bool = True) -> SimpleNamespace:
        finite = scores.nan_to_num(0.0, posinf=1.0)
        return super().limit(finite, attention_mask, output_attentions, return_dict)


def _weights_batch(bad: dict[tuple[int, int, int, int], float], layers: int = 2) -> HeadBatch:
    """Two sentences of 3 positions, causal weights that are one-hot on the previous key (2 layers,
    3 heads), with the entries of ``bad`` (sentence, layer, head, query) set in key 0."""
    weights = torch.zeros(2, layers, 3, 3, 3)
    for i in range(3):
        weights[..., i, max(i - 1, 0)] = 1.0
    for (b, layer, head, i), value in bad.items():
        weights[b, layer, head, i, 0] = value
    real = torch.ones(2, 3, dtype=torch.bool)
    return HeadBatch({"scores": weights, "attention_mask": real.long()}, real)


def test_non_finite_weights_are_counted_and_located_in_the_message() -> None:
    model = GivenWeights(causal=True).eval()
    bad = {(0, 1, 0, 1): math.nan, (1, 1, 2, 2): math.inf, (0, 1, 2, 1): math.nan, (1, 1, 2, 1): math.nan}
    expected = ("expected finite attention weights at θ, got 3 NaN and 1 infinite ones in layer 1, "
                "head(s) [0, 2] (4 query rows)")
    with pytest.raises(EmpiricalError, match=re.escape(expected)):
        measure_heads(model, [_weights_batch(bad)], causal=True, paper=False, limit=model.limit)
    # Query 1 of a causal model has exactly two allowed keys: it is measured, so NaN there is refused.
    with pytest.raises(EmpiricalError,
                       match=r"1 NaN and 0 infinite ones in layer 0, head\(s\) \[1\] \(1 query rows\)"):
        measure_heads(model, [_weights_batch({(0, 0, 1, 1): math.nan})], causal=True, paper=False,
                      limit=model.limit)


def test_non_finite_weights_in_rows_that_are_not_measured_are_ignored() -> None:
    """The first query of a causal model has one allowed key and measures nothing; a padded query
    measures nothing either: NaN there changes no statistic."""
    model = GivenWeights(causal=True).eval()
    clean = measure_heads(model, [_weights_batch({})], causal=True, paper=False, limit=model.limit)
    batch = _weights_batch({(0, 0, 1, 0): math.nan, (1, 1, 0, 0): math.inf})
    assert measure_heads(model, [batch], causal=True, paper=False, limit=model.limit).heads == clean.heads
    padded = _weights_batch({(1, 0, 2, 2): math.nan})
    real = padded.real.clone()
    real[1, 2] = False
    padded = HeadBatch({**padded.inputs, "attention_mask": real.long()}, real)
    atlas = measure_heads(model, [padded], causal=True, paper=False, limit=model.limit)
    assert [h.queries for h in atlas.heads] == [3] * 6  # queries 1 and 2, and 1: the padded one left out
    clean_padded = HeadBatch({**padded.inputs, "scores": _weights_batch({}).inputs["scores"]}, real)
    assert atlas.heads == measure_heads(model, [clean_padded], causal=True, paper=False,
                                        limit=model.limit).heads


def _stats(layer: int, head: int, kind: str, **values: Any) -> Any:
    from empirical.measure.heads import HeadStats

    base = {"queries": 8, "positions": 1.25, "positions_std": 0.5, "split": 0.25, "fraction": 0.2,
            "mass": 0.9, "entropy": 0.3, "margin": 2.5, "agreement": 0.75, "scale": (3.0, 3.5)}
    return HeadStats(layer=layer, head=head, kind=kind, **{**base, **values})


@pytest.fixture(scope="module")
def hand_atlas() -> Any:
    """Two layers of two heads, written out by hand."""
    from empirical.measure.heads import HeadAtlas

    heads = (
        _stats(0, 0, "local", paper_positions=1.5, paper_std=0.7, paper_split=0.4),
        _stats(0, 1, "global", positions=6.0, fraction=0.8, margin=math.inf, scale=(0.0, math.inf),
               undetermined=2),
        _stats(1, 0, "mixed", positions=3.0, positions_std=1.0, split=0.5, scale=(0.0, 0.0)),
        _stats(1, 1, "local", positions=1.0, positions_std=0.0, split=0.0, scale=(12.0, 12.3456)),
    )
    return HeadAtlas(heads, 2, 2, 1e-3, Thresholds(), {"model": {"class": "M"}})


def test_atlas_grid_counts_and_table(hand_atlas: Any) -> None:
    assert hand_atlas.grid() == [["local", "global"], ["mixed", "local"]]
    assert hand_atlas.counts() == {"local": 2, "mixed": 1, "global": 1}
    assert hand_atlas.table().split("\n") == [
        "layer head  class    #pos std(n) split  frac  mass     H  paper #pos/std/split  scale(eps=0.001)",
        "    1    1  local    1.25   0.50  0.25  0.20  0.90  0.30        1.50/0.70/0.40  3.5",
        "    1    2  global   6.00   0.50  0.25  0.80  0.90  0.30                     -  inf",
        "    2    1  mixed    3.00   1.00  0.50  0.20  0.90  0.30                     -  0",
        "    2    2  local    1.00   0.00  0.00  0.20  0.90  0.30                     -  12.35",
    ]


def test_atlas_dictionary_is_strict_json(hand_atlas: Any, tmp_path: Any) -> None:
    data = json.loads(hand_atlas.to_json(tmp_path / "atlas.json").read_text())
    assert data == json.loads(json.dumps(hand_atlas.to_dict()))
    assert {key: data[key] for key in ("schema", "eps", "layers", "n_heads", "counts", "paper_approximation",
                                       "model")} == {
        "schema": "normsat.heads/1", "eps": 1e-3, "layers": 2, "n_heads": 2,
        "counts": {"local": 2, "mixed": 1, "global": 1},
        "paper_approximation": {"scale": 1000.0, "threshold": 1e-5}, "model": {"class": "M"}}
    assert data["thresholds"] == {
        "global_fraction": 0.5, "local_positions": 2.0,
        "rule": "global if mean fraction of allowed positions attended >= global_fraction; else local if "
                "mean positions attended <= local_positions; else mixed"}
    assert data["heads"][0] == {
        "layer": 0, "head": 0, "class": "local", "queries": 8, "positions": 1.25, "positions_std": 0.5,
        "split": 0.25, "fraction": 0.2, "mass": 0.9, "entropy": 0.3, "margin": 2.5, "agreement": 0.75,
        "scale": [3.0, 3.5], "undetermined": 0, "paper_positions": 1.5, "paper_std": 0.7, "paper_split": 0.4}
    infinite = data["heads"][1]
    assert (infinite["margin"], infinite["scale"], infinite["undetermined"]) == (None, [0.0, None], 2)
    assert (infinite["paper_positions"], infinite["paper_std"], infinite["paper_split"]) == (None, None, None)
    assert "kind" not in infinite and infinite["class"] == "global"


def test_candidate_rows_at_the_floor_are_kept() -> None:
    """A row whose upper bound equals the head's floor may still set the head's scale."""
    from empirical.measure.heads import _Candidates

    rows = _Candidates(torch.tensor([0, 1, 1, 0]), torch.tensor([2.0, 3.0, 1.0, 1.5]),
                       torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.7, 0.3], [0.6, 0.4]]),
                       torch.tensor([[True, True], [True, False], [True, False], [False, True]]),
                       torch.tensor([[True, True], [True, True], [True, False], [True, True]]))
    kept = rows.above(torch.tensor([2.0, 1.0]))
    index = torch.tensor([0, 1, 2])
    assert torch.equal(kept.head, rows.head[index]) and torch.equal(kept.upper, rows.upper[index])
    assert torch.equal(kept.weights, rows.weights[index]) and torch.equal(kept.winners, rows.winners[index])
    assert torch.equal(kept.allowed, rows.allowed[index])


def test_candidate_chunks_of_different_widths_are_padded_with_masked_keys() -> None:
    from empirical.measure.heads import _Candidates, _merge

    narrow = _Candidates(torch.tensor([1]), torch.tensor([5.0]), torch.tensor([[0.75, 0.25]]),
                         torch.tensor([[True, False]]), torch.tensor([[True, True]]))
    wide = _Candidates(torch.tensor([0, 1]), torch.tensor([4.0, 0.5]),
                       torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.5, 0.0]]),
                       torch.tensor([[True, False, False], [True, True, False]]),
                       torch.tensor([[True, True, True], [True, True, False]]))
    merged = _merge([narrow, wide], torch.tensor([1.0, 1.0]))  # head 1's second row is pruned
    assert merged.head.tolist() == [1, 0] and merged.upper.tolist() == [5.0, 4.0]
    assert merged.weights.tolist() == [[0.75, 0.25, 0.0], [0.5, 0.25, 0.25]]
    assert merged.winners.tolist() == [[True, False, False], [True, False, False]]
    assert merged.allowed.tolist() == [[True, True, False], [True, True, True]]
    assert _merge([narrow, wide], torch.tensor([9.0, 9.0])) is None  # every row pruned


def test_layer_sums_add_field_by_field() -> None:
    from empirical.measure.heads import _LayerSums

    names = ("count", "undetermined", "n", "n2", "split", "fraction", "mass", "entropy", "agree")
    first = _LayerSums(**{name: torch.tensor([float(i), 1.0]) for i, name in enumerate(names)})
    second = _LayerSums(**{name: torch.tensor([10.0, float(i)]) for i, name in enumerate(names)})
    assert list(first.tensors()) == list(names)  # the paper's sums left out: not measured
    total = (first + second).tensors()
    assert {name: value.tolist() for name, value in total.items()} == {
        name: [i + 10.0, 1.0 + i] for i, name in enumerate(names)}
    paper = _LayerSums(**first.tensors(), paper_n=torch.ones(2), paper_n2=torch.ones(2),
                       paper_split=torch.zeros(2))
    assert list(paper.tensors()) == [*names, "paper_n", "paper_n2", "paper_split"]


@pytest.mark.parametrize("eps", [0.0, 1.0, -0.5, 1.5])
def test_eps_outside_the_open_unit_interval_is_refused(eps: float) -> None:
    model = ScoresIn(causal=True).eval()
    with pytest.raises(EmpiricalError, match=re.escape(
            f"expected eps (the certified scales' tolerance) to be a number > 0 and < 1, got {eps}")):
        measure_heads(model, _planted_batches(), causal=True, eps=eps, limit=model.limit)


def test_arguments_that_are_not_a_model_thresholds_or_batches_are_refused() -> None:
    model = ScoresIn(causal=True).eval()
    with pytest.raises(EmpiricalError,
                       match=re.escape("expected an nn.Module for the head atlas (it runs the model), got")):
        measure_heads(model.forward, _planted_batches(), causal=True, limit=model.limit)
    with pytest.raises(EmpiricalError, match="expected thresholds to be a Thresholds, got dict"):
        measure_heads(model, _planted_batches(), causal=True, limit=model.limit,
                      thresholds={"global_fraction": 0.5})
    with pytest.raises(EmpiricalError, match=r"^expected at least one batch of inputs, got none$"):
        measure_heads(model, iter([]), causal=True, limit=model.limit)


def test_given_thresholds_classify_the_heads(scores_atlas: Any) -> None:
    model, batches, default = scores_atlas
    strict = Thresholds(global_fraction=0.95, local_positions=1.0)
    atlas = measure_heads(model, batches, causal=model.causal, limit=model.limit, paper=False,
                          thresholds=strict, eps=0.01)
    assert atlas.thresholds == strict and atlas.eps == 0.01
    assert [h.kind for h in atlas.heads] == [strict.classify(h.positions, h.fraction) for h in default.heads]
    assert [h.kind for h in atlas.heads] != [h.kind for h in default.heads]
    assert all((h.paper_positions, h.paper_std, h.paper_split) == (None, None, None) for h in atlas.heads)
    # A larger eps needs a smaller scale.
    assert all(a.scale[1] < d.scale[0] for a, d in zip(atlas.heads, default.heads) if d.scale[0] > 0)


def test_record_names_model_limit_settings_and_versions(reference_atlas: Any, scores_atlas: Any) -> None:
    from dataclasses import asdict

    from empirical.models.provenance import model_record, versions
    from saturated.rules import Settings

    _, atlas = reference_atlas  # measured with the default limit
    assert atlas.record["limit_settings"] == asdict(Settings(ties="nan"))
    assert atlas.record["model"]["class"] == f"{Heads.__module__}.Heads"
    assert atlas.record["causal"] is True and atlas.record["versions"] == versions()
    model, batches, given = scores_atlas  # a limit without settings: those given, or the default
    assert given.record["model"] == model_record(model)
    assert given.record["limit_settings"] == asdict(Settings(ties="nan"))
    uniform = measure_heads(model, batches[1:], causal=model.causal, limit=model.limit, paper=False,
                            settings=Settings(ties="uniform"))
    assert uniform.record["limit_settings"] == asdict(Settings(ties="uniform"))

    def with_settings(**inputs: Any) -> Any:  # a limit that has settings: those are recorded
        return model.limit(**inputs)

    with_settings.settings = Settings(ties="uniform", orders=3)  # type: ignore[attr-defined]
    own = measure_heads(model, batches[1:], causal=model.causal, limit=with_settings, paper=False)
    assert own.record["limit_settings"] == asdict(Settings(ties="uniform", orders=3))


def test_progress_bar_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScoresIn(causal=True).eval()
    measure_heads(model, _planted_batches(), causal=True, limit=model.limit, paper=False)
    assert capsys.readouterr().err == ""
    measure_heads(model, _planted_batches(), causal=True, limit=model.limit, paper=False, progress=True)
    err = capsys.readouterr().err
    assert "head atlas: 100%" in err and "2/2" in err
    assert re.search(r"[\d?]batch/s\]|s/batch\]", err)  # the rate counts batches


def _plotted(atlases: dict[str, Any], monkeypatch: pytest.MonkeyPatch, **options: Any) -> Any:
    """The figure plot_atlas draws (its saving replaced by keeping it)."""
    from pathlib import Path

    import empirical.measure.heads as heads_module

    kept: dict[str, Any] = {}

    def keep(figure: Any, path: Any) -> Path:
        kept["figure"], kept["path"] = figure, path
        return Path("kept.png")

    monkeypatch.setattr(heads_module, "save_figure", keep)
    assert plot_atlas(atlases, "atlas.png", **options) == Path("kept.png")
    assert kept["path"] == "atlas.png"
    return kept["figure"]


def test_plot_panels_show_the_grid_of_classes_and_histograms_of_the_statistics(
        hand_atlas: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    import numpy as np
    from matplotlib.colors import to_hex, to_rgba
    from matplotlib.figure import Figure

    other = replace(hand_atlas, heads=tuple(
        replace(h, kind="global", positions_std=1.5 if h.head else 0.25) for h in hand_atlas.heads))
    mixed = replace(other, heads=(replace(other.heads[0], kind="mixed"), *other.heads[1:]))
    atlases = {"trained": hand_atlas, "random": mixed}
    figure = _plotted(atlases, monkeypatch, title="MiniLM")
    assert isinstance(figure, Figure) and figure.get_suptitle() == "MiniLM"
    assert tuple(figure.get_size_inches()) == (12.0, 7.0) and figure.dpi == 110
    axes = figure.axes
    assert len(axes) == 5
    assert [(ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start) for ax in axes] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    assert all(ax.get_subplotspec().get_gridspec().get_geometry() == (2, 3) for ax in axes)
    colours = ["#1f77b4", "#bbbbbb", "#d62728"]  # local, mixed, global
    for ax, (label, atlas) in zip(axes[:2], atlases.items()):
        image = ax.images[0]
        codes = [[["local", "mixed", "global"].index(kind) for kind in row] for row in atlas.grid()]
        assert image.get_array().tolist() == codes
        assert [to_hex(c) for c in image.get_cmap()(np.arange(3))] == colours
        assert (image.norm.vmin, image.norm.vmax) == (0, 2) and ax.get_aspect() == "auto"
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("head", "layer")
        assert list(ax.get_xticks()) == [0, 1] and list(ax.get_yticks()) == [0, 1]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"]  # layer 1 is the first block
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]  # and head 1 the first head
        counts = atlas.counts()
        assert ax.get_title() == (f"{label}: {counts['local']} local, {counts['mixed']} mixed, "
                                  f"{counts['global']} global")
        assert ax.title.get_fontsize() == 9
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == ["local", "mixed", "global"]
        assert [to_hex(p.get_facecolor()) for p in legend.get_patches()] == colours
        assert legend.get_texts()[0].get_fontsize() == 7 and not legend.get_frame_on()
        assert legend._loc == 2 and tuple(legend.get_bbox_to_anchor().bounds[:2]) == tuple(  # upper left
            ax.transAxes.transform((1.0, 1.0)))
    statistics = [("positions", "# positions attended (n, mean over queries)", 1.0),
                  ("positions_std", "std(n): spread of n over queries", 0.0),
                  ("split", "split attention probability (share of n > 1)", 0.0)]
    for ax, (name, label, low) in zip(axes[2:], statistics):
        assert (ax.get_xlabel(), ax.get_ylabel()) == (label, "heads")
        series = [[getattr(h, name) for h in atlas.heads] for atlas in atlases.values()]
        # from the lowest possible value (a query attends to at least 1 position), over at least 1
        top = low + max(1.0, max(max(values) for values in series) - low)
        edges = np.linspace(low, top, 21)
        assert ax.get_xlim() == pytest.approx((low, top))
        for index, values in enumerate(series):
            bars = ax.patches[20 * index:20 * (index + 1)]
            assert [b.get_x() for b in bars] == pytest.approx(edges[:-1])
            assert [b.get_height() for b in bars] == np.histogram(values, bins=edges)[0].tolist()
            assert all(b.get_facecolor() == pytest.approx(to_rgba(f"C{index}", 0.55)) for b in bars)
        assert len(ax.patches) == 40
        assert all(float(t).is_integer() for t in ax.get_yticks())  # counts of heads
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == list(atlases)
        assert legend.get_texts()[0].get_fontsize() == 8


def test_plot_ticks_thin_out_beyond_twelve_layers_or_heads(hand_atlas: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from empirical.measure.heads import HeadAtlas

    many = HeadAtlas(tuple(replace(hand_atlas.heads[0], layer=layer, head=head)
                           for layer in range(24) for head in range(25)), 24, 25, 1e-3, Thresholds())
    many = replace(many, heads=(replace(many.heads[0], kind="global"), *many.heads[1:]))
    figure = _plotted({"wide": many}, monkeypatch)
    assert figure.get_suptitle() == "" and tuple(figure.get_size_inches()) == (12.0, 7.0)
    grid = figure.axes[0]
    assert list(grid.get_xticks()) == list(range(0, 25, 2))
    assert [t.get_text() for t in grid.get_xticklabels()] == [str(i + 1) for i in range(0, 25, 2)]
    # Two classes present of three: the colours stay those of the classes (no rescaling).
    assert (grid.images[0].norm.vmin, grid.images[0].norm.vmax) == (0, 2)
    assert list(grid.get_yticks()) == list(range(0, 24, 2))
    assert [t.get_text() for t in grid.get_yticklabels()] == [str(i + 1) for i in range(0, 24, 2)]
    four = _plotted(dict.fromkeys("abcd", hand_atlas), monkeypatch)
    assert tuple(four.get_size_inches()) == (16.0, 7.0) and len(four.axes) == 7
    assert four.axes[0].get_subplotspec().get_gridspec().get_geometry() == (2, 4)
    with pytest.raises(EmpiricalError, match=r"^expected at least one atlas to plot$"):
        plot_atlas({}, "atlas.png")


def test_a_head_measured_on_one_query_reports_that_query() -> None:
    """One sentence of two tokens, causal: every head has a single measured query (the second),
    and its statistics are that row's."""
    model = ScoresIn(causal=True).eval()
    batches = [_scores_batch(_integer_scores(3, 1, 2), [2])]
    atlas = measure_heads(model, batches, causal=True, limit=model.limit)
    direct = _direct_statistics(model, batches)
    assert all(d["queries"] == 1 for d in direct.values())
    _check_against_direct(atlas, direct)


def test_scale_is_the_largest_rows_when_more_rows_may_set_it_than_are_kept() -> None:
    """70 sentences of 60 positions (4200 query rows, more than the 4096 kept before pruning
    against the head's floor): every row has a margin of 1 but one, of 0.01, which alone sets the
    head's scale (c* ≈ 700, against ≈ 11 for the others)."""
    scores = torch.full((70, 1, 1, 60, 60), -5.0)
    scores[..., 0] = 0.0
    scores[..., 1] = -1.0
    scores[3, 0, 0, 7, 1] = -0.01
    real = torch.ones(70, 60, dtype=torch.bool)
    model = ScoresIn(causal=False).eval()
    batch = HeadBatch({"scores": scores, "attention_mask": real.long()}, real)
    stats = measure_heads(model, [batch], causal=False, paper=False, limit=model.limit).heads[0]
    true = scale_to_saturate(scores[3, 0, 0, 7].double(), 1e-3, rtol=0)
    assert true[0] > 600 and stats.scale[0] <= true[0] and true[1] <= stats.scale[1] <= stats.scale[0] * 1.01
    assert stats.queries == 4200 and stats.positions == 1.0


def test_a_causal_rows_later_keys_are_masked_not_underflowed_in_its_scale() -> None:
    """Causal, 12 real positions: query 1 sees keys 0 and 1, 80 apart (c* ≈ log(1/eps)/80 ≈ 0.086);
    the ten keys after it are masked, not weights that underflowed (each of which could add
    e^(−c·103) to the error, so the scale's upper end would grow by 10%). Queries 2–11 see equal
    scores: already hard, no scale."""
    scores = torch.zeros(1, 1, 1, 12, 12)
    scores[0, 0, 0, 1, 1] = -80.0
    real = torch.ones(1, 12, dtype=torch.bool)
    model = ScoresIn(causal=True).eval()
    batch = HeadBatch({"scores": scores, "attention_mask": real.long()}, real)
    stats = measure_heads(model, [batch], causal=True, paper=False, limit=model.limit).heads[0]
    true = scale_to_saturate(scores[0, 0, 0, 1, :2].double(), 1e-3, rtol=0)
    assert true[0] > 0.08 and stats.scale[0] <= true[0] and true[1] <= stats.scale[1] <= stats.scale[0] * 1.01


def test_a_head_whose_every_row_is_undetermined_has_no_margin_and_no_scale() -> None:
    """The limit leaves every row of head 1 undetermined (NaN): all its measured queries are
    counted as undetermined, none is measured, and neither a margin (∞, null in JSON) nor a scale
    is reported; head 0 keeps the statistics of a direct loop."""
    model = ScoresIn(causal=False).eval()
    batches = _planted_batches()[1:]

    def limit(**inputs: Any) -> SimpleNamespace:
        attentions = [a.clone() for a in model.limit(**inputs).value["attentions"]]
        for a in attentions:
            a[:, 1] = math.nan
        return SimpleNamespace(value={"attentions": tuple(attentions)})

    atlas = measure_heads(model, batches, causal=False, limit=limit)
    direct = _direct_statistics(model, batches)
    for stats in atlas.heads:
        expected = direct[stats.layer, stats.head]
        if stats.head == 1:
            assert (stats.queries, stats.undetermined) == (0, expected["queries"])
            assert stats.margin == math.inf and stats.scale == (0.0, 0.0)
            assert stats.to_dict()["margin"] is None
        else:
            assert (stats.queries, stats.undetermined) == (expected["queries"], 0)
            assert stats.positions == pytest.approx(expected["positions"])
            assert stats.margin == pytest.approx(expected["margin"])


# _measure_layer on one layer of hand-made weight rows: which rows stay candidates for a head's
# scale (those whose upper bound on c* reaches the head's floor, the largest lower bound so far).


def _layer_totals(plain: Tensor, *, eps: float = 1e-3, floor: float | None = None,
                  queries: Tensor | None = None, paper: Tensor | None = None, totals: Any = None) -> Any:
    """The running totals after measuring ``plain`` (batch, heads, queries, keys), every key allowed,
    its hardmax as the limit; ``floor`` presets the head's floor as an earlier batch would."""
    from empirical.measure.heads import _measure_layer, _rounding, _Totals

    batch, heads, rows, keys = plain.shape
    if totals is None:
        totals = _Totals(rtol=default_rtol(plain.dtype), unit=_rounding(plain.dtype))
    if floor is not None:
        totals.margins, totals.candidates = [[]], [[]]
        totals.floor = [torch.full((heads,), floor, dtype=torch.float64)]
    allowed = torch.ones(batch, 1, 1, keys, dtype=torch.bool)
    n_allowed = torch.full((batch, 1, rows), float(keys), dtype=torch.float64)
    queries = torch.ones(batch, 1, rows, dtype=torch.bool) if queries is None else queries
    _measure_layer(totals, 0, plain, hardmax(plain.double(), rtol=0), allowed, n_allowed, queries, paper, eps)
    return totals


def _kept(totals: Any) -> int:
    return sum(len(chunk.head) for chunk in totals.candidates[0])


def _margin_slack(margin: float, keys: int, dtype: torch.dtype) -> float:
    """The rounding bound of a row's margin δ = log p_top − log p_second, read from weights of
    ``dtype`` (unit roundoff u, smallest subnormal τ) over n keys: 3·(u·(δ + 8) + 2τ·n·e^δ +
    1e-15·(δ + log n + 1)), the loser's weight being at least e^(−δ)/n."""
    u, tiny = unit_roundoff(dtype), smallest_subnormal(dtype)
    return 3 * (u * (margin + 8) + 2 * tiny * keys * math.exp(min(margin, 700.0))
                + 1e-15 * (margin + math.log(keys) + 1))


@pytest.mark.parametrize(("dtype", "gap"), [
    (torch.float32, 2.0),    # the unit roundoff's term leads
    (torch.float64, 0.25),   # the 1e-15 term leads
    (torch.float32, 100.0),  # a subnormal loser: the smallest number's term leads
], ids=["float32", "float64", "subnormal"])
@pytest.mark.parametrize("side", [-1, 1], ids=["inside", "outside"])
def test_a_row_stays_a_candidate_exactly_while_its_slack_reaches_the_floor(dtype: torch.dtype, gap: float,
                                                                          side: int) -> None:
    """A row with one winner over two keys has c* ≤ log(K/eps)/(δ − slack), K = 1: it stays a
    candidate while that reaches the floor F, i.e. while δ − slack ≤ log(1/eps)/F. With F set
    where δ − (1 ∓ 5%)·slack would meet it, the row is kept (inside the slack) or dropped
    (outside it). Two equal query rows, each with its own single winner."""
    eps = 1e-3
    plain = torch.softmax(torch.tensor([[gap, 0.0]] * 2, dtype=dtype), -1)[None, None]
    margin = math.log(float(plain[0, 0, 0, 0])) - math.log(float(plain[0, 0, 0, 1]))
    slack = _margin_slack(margin, 2, dtype)
    assert 0 < slack < margin / 2
    floor = math.log(1 / eps) / (margin - (1 + side * 0.05) * slack)
    totals = _layer_totals(plain, eps=eps, floor=floor)
    assert totals.floor[0].tolist() == [floor]  # the rows' own lower bounds are below it
    assert _kept(totals) == (2 if side < 0 else 0)


def test_rows_left_out_do_not_raise_the_floor() -> None:
    """Row 0 (gap 10) is measured, row 1 is not a query: the floor is row 0's lower bound on c*,
    log((1 − eps)/eps)/(δ + slack) ≈ 0.69, whatever row 1 holds."""
    plain = torch.softmax(torch.tensor([[10.0, 0.0], [3.0, 0.0]]), -1)[None, None]
    measured = torch.tensor([[[True, False]]])
    floor = float(_layer_totals(plain, queries=measured).floor[0][0])
    margin = math.log(float(plain[0, 0, 0, 0])) - math.log(float(plain[0, 0, 0, 1]))
    expected = math.log((1 - 1e-3) / 1e-3) / (margin + _margin_slack(margin, 2, torch.float32))
    assert floor == pytest.approx(expected, rel=1e-12) and floor < 1


def test_a_row_whose_upper_bound_equals_the_floor_stays_a_candidate() -> None:
    """Two tied winners over three keys with eps = 0.6 ≥ K = max(1/2, 1/4): every scale meets eps,
    so the row's upper bound on c* is 0, and so is the floor; the row is kept."""
    plain = torch.tensor([[[[0.45, 0.45, 0.1]]]])
    totals = _layer_totals(plain, eps=0.6)
    assert totals.floor[0].tolist() == [0.0]
    assert [chunk.upper.tolist() for chunk in totals.candidates[0]] == [[0.0]]


def test_ties_are_judged_against_each_rows_own_smallest_weight() -> None:
    """Row 0's smallest weight is e^(−70); row 1's best two are 1e-4 apart in log, beyond the
    float32 tolerance rtol·|log p_min| ≈ 7.6e-6·0.69 of its own row (but within rtol·70): row 1
    has one winner, and its margin 1e-4 sets the floor, above row 0's upper bound."""
    plain = torch.softmax(torch.tensor([[70.0, 0.0], [1e-4, 0.0]]), -1)[None, None]
    totals = _layer_totals(plain)
    (chunk,) = totals.candidates[0]
    assert chunk.winners.tolist() == [[True, False]] and chunk.weights.tolist() == [plain[0, 0, 1].tolist()]


def test_candidates_beyond_4096_rows_are_pruned_against_the_risen_floor() -> None:
    """4000 rows of gap 5 (c* ≈ 1.4) are candidates until 100 rows of gap 0.5 (c* ≈ 14) raise the
    floor; with more than 4096 rows held, the first ones are dropped."""
    first = torch.softmax(torch.tensor([[5.0, 0.0]] * 4000), -1)[None, None]
    totals = _layer_totals(first)
    assert _kept(totals) == 4000
    second = torch.softmax(torch.tensor([[0.5, 0.0]] * 100), -1)[None, None]
    totals = _layer_totals(second, totals=totals)
    assert _kept(totals) == 100
    assert all(bool((chunk.upper >= totals.floor[0][0]).all()) for chunk in totals.candidates[0])


def test_the_papers_count_takes_weights_above_its_threshold_only() -> None:
    """At 1000·θ a weight of exactly 1e-5 is not counted: rows with 1, 2 and 3 weights above."""
    from empirical.measure.heads import PAPER_THRESHOLD

    plain = torch.softmax(torch.tensor([[2.0, 1.0, 0.0]] * 3), -1)[None, None]
    at = PAPER_THRESHOLD
    paper = torch.tensor([[1 - 2 * at, at, at], [0.5, 0.5 - at, at], [0.4, 0.3, 0.3]],
                         dtype=torch.float64)[None, None]
    sums = _layer_totals(plain, paper=paper).sums[0]
    assert sums.paper_n.tolist() == [6.0] and sums.paper_n2.tolist() == [14.0]
    assert sums.paper_split.tolist() == [2.0]
