"""A mixture of experts gathers its chosen experts' weights for every token: what that costs, and the
one-line refusal of a corpus measurement it would not fit in memory."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.models import builtin, experts
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
                                             r"tokens needs 0.000147 GB, and 0.000123 GB") as refused:
        check_expert_memory(narrow, 2, 6)
    assert str(refused.value).startswith("this mixture of experts gathers its chosen experts' weights for "
                                         "every token (")
    assert str(refused.value).endswith("GB of memory is available; use a smaller --batch-size or "
                                       "--max-length, or a model with smaller experts")
    monkeypatch.setattr(experts, "available_memory", lambda: None)
    check_expert_memory(narrow, 1000, 1000)  # the system does not say: nothing to check


def test_cli_limit_of_a_router_too_large_for_memory_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The published Mixtral's experts at this machine's memory, scaled down: narrow experts, and
    # memory for fewer tokens than the corpus's first sentences hold.
    model_type, fields = builtin.FAMILIES["mixtral"]
    monkeypatch.setitem(builtin.FAMILIES, "mixtral", (model_type, {**fields, **NARROW}))
    monkeypatch.setattr(experts, "available_memory", lambda: 4 * 2 * 3 * 16 * 32 * 4)
    code = main(["similarity", "--model", "mixtral", "--random-init", "--num-layers", "1", "--scale", "inf",
                 "--sentences", "2", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("normsat similarity: error: this mixture of experts gathers its chosen experts' "
                          "weights for every token")


def module_with(config: object, parameters: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A module holding ``parameters`` under their dotted names, with ``config``."""
    root = torch.nn.Module()
    root.config = config
    for name, tensor in parameters.items():
        *path, leaf = name.split(".")
        module = root
        for part in path:
            if not hasattr(module, part):
                module.add_module(part, torch.nn.Module())
            module = getattr(module, part)
        module.register_parameter(leaf, torch.nn.Parameter(tensor))
    return root


# Four experts: per expert 3·5 + 5·2 = 25 float64 numbers (200 bytes) in the first expert layer.
# Neither a 2-D expert parameter, nor one stacked over another count than the experts, nor a
# shared expert counts; a second layer (other sizes, float32) is not added to the first.
STACKED = {
    "layers.0.mlp.gate.weight": torch.zeros(4, 3, dtype=torch.float64),
    "layers.0.mlp.experts.gate_up_proj": torch.zeros(4, 3, 5, dtype=torch.float64),
    "layers.0.mlp.experts.bias": torch.zeros(4, 5, dtype=torch.float64),
    "layers.0.mlp.experts.down_proj": torch.zeros(4, 5, 2, dtype=torch.float64),
    "layers.0.mlp.experts.tables": torch.zeros(3, 4, 4, dtype=torch.float64),
    "layers.0.mlp.shared_expert.weight": torch.zeros(4, 6, 6, dtype=torch.float64),
    "layers.1.mlp.experts.gate_up_proj": torch.zeros(4, 7, 7),
}


@pytest.mark.parametrize(("config", "expected"), [
    ({"num_experts_per_tok": 2, "num_local_experts": 4}, 2 * 25 * 8),  # Mixtral's names
    ({"num_experts_per_tok": 3, "num_experts": 4}, 3 * 25 * 8),  # Qwen2-MoE's
    ({"num_experts_per_tok": 3, "num_local_experts": 0, "num_experts": 4}, 3 * 25 * 8),
    ({"num_experts_per_tok": 3, "num_local_experts": None, "num_experts": 4}, 3 * 25 * 8),
    ({"num_experts_per_tok": 2, "num_local_experts": 5}, 0),  # no parameter stacked over 5 experts
    ({"num_experts_per_tok": 2}, 0),
    ({"num_local_experts": 4}, 0),
    ({"num_experts_per_tok": 0, "num_local_experts": 4}, 0),
])
def test_bytes_per_token_count_the_first_expert_layer_k_times(config: dict, expected: int) -> None:
    assert expert_bytes_per_token(module_with(SimpleNamespace(**config), STACKED)) == expected


def test_expert_layers_are_told_apart_by_the_last_experts_in_their_name() -> None:
    nested = module_with(SimpleNamespace(num_experts_per_tok=1, num_experts=2), {
        "blocks.experts.0.experts.w": torch.zeros(2, 3, 3, dtype=torch.float16),  # 9 · 2 bytes
        "blocks.experts.1.experts.w": torch.zeros(2, 5, 5, dtype=torch.float16),
    })
    assert expert_bytes_per_token(nested) == 9 * 2
    # One expert (a layer routed to itself): its one slice.
    single = module_with(SimpleNamespace(num_experts_per_tok=1, num_experts=1),
                         {"mlp.experts.w": torch.zeros(1, 3, 5, dtype=torch.float64)})
    assert expert_bytes_per_token(single) == 15 * 8


def test_available_memory_is_memavailable_in_bytes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000000 kB\n"
                       "MemAvailable:    8123456 kB\nBuffers:           12345 kB\n")
    monkeypatch.setattr(experts, "_MEMINFO", meminfo)
    assert experts.available_memory() == 8123456 * 1024
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000000 kB\n")  # an old kernel
    assert experts.available_memory() is None
    monkeypatch.setattr(experts, "_MEMINFO", tmp_path / "absent")  # not Linux
    assert experts.available_memory() is None


@pytest.mark.parametrize(("size", "text"), [(1.41e9, "1.41 GB"), (123456789.0, "0.123 GB"),
                                            (9.99e11, "999 GB"), (1e12, "1000 GB"), (1.894e12, "1894 GB"),
                                            (2.5e13, "25000 GB"),
                                            (1_235_000_001, "1.24 GB"),  # just past half: up
                                            (1_000_500_000_001, "1001 GB")])
def test_sizes_are_given_in_gb_of_a_billion_bytes_to_three_digits_or_whole(size: float, text: str) -> None:
    assert experts._gb(size) == text
