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
