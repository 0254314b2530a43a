"""Duplicates that had drifted apart, one helper each now: the embedding table's size, seeding a
training model, the rate fit, decoder inputs, the best fit of a growth document."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from empirical.cli import main
from empirical.models.loading import load_model
from empirical.training.runs import TrainConfig, build_model

_NO_TABLE = '''
from torch import nn
from empirical.models.loading import load_tokenizer, minilm_path

class NoTable(nn.Module):
    """A model that embeds token ids itself: no input embedding table (as PreTrainedModel says)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def get_input_embeddings(self):
        raise NotImplementedError

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return self.linear(input_ids.unsqueeze(-1).float().expand(*input_ids.shape, 4))

def make():
    return NoTable(), load_tokenizer(minilm_path())
'''


@pytest.fixture
def no_table_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "no_table_factory.py").write_text(_NO_TABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "no_table_factory:make"


def test_a_factory_model_without_input_embeddings_loads(no_table_factory: str) -> None:
    model, tokenizer = load_model(no_table_factory)
    assert type(model).__name__ == "NoTable" and len(tokenizer) > 0


def test_a_model_without_input_embeddings_is_bad_input_not_a_bug(
        no_table_factory: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["similarity", "--model", no_table_factory, "--sentences", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normsat similarity: error: expected the output of NoTable to carry "
                          "'hidden_states'") and "internal error" not in err


@pytest.mark.parametrize("arch", ["pre", "post", "scale-invariant"])
def test_building_a_training_model_leaves_the_global_random_state_alone(arch: str) -> None:
    config = TrainConfig(layers=1, width=16, heads=2, context=16, arch=arch, seed=3)
    torch.manual_seed(12345)
    before = torch.random.get_rng_state()
    first = build_model(config, vocab_size=40, pad_id=0)
    assert torch.equal(torch.random.get_rng_state(), before)
    second = build_model(config, vocab_size=40, pad_id=0)  # still seeded: the same weights
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(),
                                                  second.state_dict().values(), strict=True))


def test_the_decay_rate_is_linregress_and_recovers_a_known_law() -> None:
    import math

    import numpy as np

    from empirical.measure.convergence import Convergence, decay_rate

    scales = (1.0, 10.0, 100.0, 1000.0, 10000.0)
    gaps = [0.7] + [3.0 * c ** -1.5 * (1 + 0.01 * (-1) ** i) for i, c in enumerate(scales[1:])]
    rate = decay_rate(scales, gaps)
    assert rate == pytest.approx(1.5, abs=5e-3)
    slope, _ = np.polyfit(np.log(scales[1:]), np.log(gaps[1:]), 1)  # least squares, independently
    assert rate == pytest.approx(-slope, rel=1e-9)
    result = Convergence(("0",), scales, {c: (1 - g,) for c, g in zip(scales, gaps, strict=True)}, 0)
    assert result.rate(0) == pytest.approx(rate, rel=1e-9)  # 1 − (1 − gap) rounds the gaps
    assert math.isnan(decay_rate(scales, [0.5, 0.0, 0.0, 0.0, 0.0]))


def test_best_fit_is_the_best_law_of_a_growth_document() -> None:
    from empirical.training.fits import best_fit, fit_growth

    steps = [float(t) for t in range(1, 60)]
    growth = fit_growth(steps, [2.0 * t ** 0.5 + 1.0 for t in steps])
    best = best_fit(growth)
    assert best is not None and best["law"] == growth["best"] == "sqrt"
    assert best_fit({"best": None, "fits": growth["fits"]}) is None


def test_degree_traces_t5_on_the_decoder_inputs_of_every_corpus_measurement() -> None:
    from empirical.cli.commands.degree import SENTENCES, model_inputs
    from empirical.models.batching import make_batches, tokenize

    model, tokenizer = load_model("t5", random_init=True, num_layers=1)
    traced = model_inputs(model, tokenizer)
    corpus = tokenize(tokenizer, list(SENTENCES), max_length=64, model=model)
    (batch,) = make_batches(model, tokenizer, corpus, batch_size=len(SENTENCES), device="cpu")
    order = list(batch.indices)
    for key in ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"):
        assert torch.equal(traced[key][order], batch.inputs[key]), key
    assert torch.equal(traced["decoder_input_ids"][:, 1:], traced["input_ids"][:, :-1])  # shifted right
