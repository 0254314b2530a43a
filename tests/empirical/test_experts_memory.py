"""A mixture of experts gathers its chosen experts' weights for every token: what that costs, and the
one-line refusal of a corpus measurement it would not fit in memory."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.models import experts, loading
from empirical.models.experts import check_expert_memory, expert_bytes_per_token
from empirical.models.loading import family_config, load_model

NARROW = {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 8, "num_hidden_layers": 1, "vocab_size": 30522, "num_local_experts": 4}


def narrow_mixtral() -> transformers.PretrainedConfig:
    return family_config("mixtral", **NARROW)


def test_bytes_per_token_by_hand() -> None:
    model, _ = load_model("mixtral", random_init=True, device="meta", num_layers=1)
    # Mixtral-8x7B: 2 chosen experts of 3 · 4096 · 14336 parameters, 4 bytes each.
    assert expert_bytes_per_token(model) == 2 * 3 * 4096 * 14336 * 4
    narrow = transformers.AutoModel.from_config(narrow_mixtral(), experts_implementation="batched_mm")
    assert expert_bytes_per_token(narrow.double()) == 2 * 3 * 16 * 32 * 8
    assert expert_bytes_per_token(torch.nn.Linear(2, 2)) == 0  # no configuration, no experts


def test_a_batch_that_does_not_fit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = transformers.AutoModel.from_config(narrow_mixtral(), experts_implementation="batched_mm")
    per_token = 2 * 3 * 16 * 32 * 4
    monkeypatch.setattr(experts, "available_memory", lambda: 10 * per_token)
    check_expert_memory(narrow, 2, 5)  # exactly what is available
    with pytest.raises(EmpiricalError, match=r"\(1.23e-05 GB per token\): a batch of 2 sentences of 6 "
                                             r"tokens needs 0.000147 GB, and 0.000123 GB"):
        check_expert_memory(narrow, 2, 6)
    monkeypatch.setattr(experts, "available_memory", lambda: None)
    check_expert_memory(narrow, 1000, 1000)  # the system does not say: nothing to check


def test_cli_limit_of_a_router_too_large_for_memory_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The published Mixtral's experts at this machine's memory, scaled down: narrow experts, and
    # memory for fewer tokens than the corpus's first sentences hold.
    narrow = narrow_mixtral()
    monkeypatch.setitem(loading._FAMILY_CONFIGS, "mixtral", lambda: copy.deepcopy(narrow))
    monkeypatch.setattr(experts, "available_memory", lambda: 4 * 2 * 3 * 16 * 32 * 4)
    code = main(["similarity", "--model", "mixtral", "--random-init", "--num-layers", "1", "--scale", "inf",
                 "--sentences", "2", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("normsat similarity: error: this mixture of experts gathers its chosen experts' "
                          "weights for every token")
