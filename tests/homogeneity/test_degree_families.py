"""Today's families (Llama, Mistral, Qwen2, Gemma, Phi-3, GPT-NeoX, Mixtral, Qwen2-MoE): two-layer
random-init models from each family's smallest published configuration, with the widths and the
vocabulary shrunk (``SMALL``) so that a test takes seconds; depth-independent choices (norms,
activations, rotary embeddings, grouped-query attention, biases, routers) are the published ones.

Expected degrees, derived by hand. Pre-norm decoders: the embeddings are exact 1; attention is
RMSNorm(h)·W_q → 2, q·kᵀ → 4, softmax → 0 (approximate), ·(RMSNorm(h)·W_v) → 2, ·W_o → 3; the MLP
is SiLU(n·W_g) ⊙ (n·W_u) → 4 (GeGLU alike), ·W_d → 5; the residual stream after the block is 5,
asymptotic (the degree-1 embeddings and the degree-3 attention output are lower order), and the
final norm brings it back to 1 (asymptotic: eps). GPT-NeoX's parallel residual adds attention (3)
and a plain GELU MLP (LN(h)·W_in → 2, ·W_out → 3) to h: 3. Mixture of experts: the router's
softmax weights are approximately 0-homogeneous, each expert is a SwiGLU MLP of degree 5, so the
block is 5 as in the dense decoders (Qwen2-MoE's shared expert behind a sigmoid gate alike). The
router's top-k positions are degree 0 with the softmax's grade: integers that converge are constant
from some c on, so the experts' weights they select keep their degree.
"""

from __future__ import annotations

from typing import Any

import pytest
import sympy
import torch
import transformers
from torch import nn

import homogeneity
from empirical.models.loading import family_config
from homogeneity import Grade
from homogeneity.verify import check_scaling, classify_decay
from homogeneity.verify.scaling import DEFAULT_SCALES

ASYM, EXACT = Grade.ASYMPTOTIC, Grade.EXACT

SMALL: dict[str, Any] = {"hidden_size": 64, "intermediate_size": 128, "vocab_size": 256,
                         "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": None}
"""Shrunk widths (the published ones take a minute per export); depth 2."""

FAMILY_SMALL: dict[str, dict[str, Any]] = {
    "llama": {"num_key_value_heads": 2, "head_dim": 16},
    "mistral": {"num_key_value_heads": 2, "head_dim": 16, "sliding_window": 3},
    "qwen2": {"num_key_value_heads": 2},
    "gemma": {"num_key_value_heads": 1, "head_dim": 16},
    "phi3": {"num_key_value_heads": 4},
    "gpt-neox": {},
    "mixtral": {"num_key_value_heads": 2, "head_dim": 16},
    "qwen2-moe": {"num_key_value_heads": 4, "num_experts": 8, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 32},
}

EXPECTED: dict[str, dict[str, tuple[int, Grade]]] = {
    family: {"last_hidden_state": (1, ASYM), "hidden_states.0": (1, EXACT),
             "hidden_states.1": (5, ASYM), "hidden_states.2": (1, ASYM)}
    for family in FAMILY_SMALL
}
EXPECTED["gpt-neox"]["hidden_states.1"] = (3, ASYM)

MOE = ("mixtral", "qwen2-moe")


def small_model(family: str) -> nn.Module:
    """A seeded two-layer float64 model of ``family`` with the shrunk widths."""
    config = family_config(family, **SMALL, **FAMILY_SMALL[family])
    torch.manual_seed(0)
    extra = {"experts_implementation": "batched_mm"} if family in ("mixtral", "qwen2-moe") else {}
    model = transformers.AutoModel.from_config(config, attn_implementation="eager", **extra)
    if family == "gemma":
        # Gemma's norms scale by (1 + γ) and initialize γ = 0, where (1 + cγ) = 1 is 0-homogeneous
        # rather than 1-homogeneous: the degree the rules give holds for γ ≠ 0, as after training.
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith("norm.weight"):
                    param.normal_(0.0, 0.5)
    return model.to(torch.float64).eval()


IDS = torch.tensor([[3, 17, 42, 9, 100, 7]])


@pytest.mark.parametrize("family", sorted(FAMILY_SMALL))
def test_family_degree_matches_hand_derivation_and_scaling(family: str) -> None:
    model = small_model(family)
    report = homogeneity.analyze(model, input_ids=IDS, output_hidden_states=True)
    assert report.unsupported == []
    found = {name: (d.value, d.grade) for name, d in report.outputs.items()
             if name in EXPECTED[family]}
    assert found == {name: (sympy.Integer(k), g) for name, (k, g) in EXPECTED[family].items()}
    # A random-init router changes its top-k choice up to c ≈ 2⁵ here (a jump in f(cθ)/cᵏ, then
    # the steady power law): its scales start past that.
    scales = [2.0**i for i in range(5, 13)] if family in MOE else DEFAULT_SCALES
    checks = check_scaling(model, input_ids=IDS, output_hidden_states=True, report=report,
                           scales=scales)
    assert {c.output for c in checks} >= set(EXPECTED[family])
    # Measured over the given scales only (c ≤ 2¹²): Hugging Face's RMSNorm squares its input and
    # eager attention takes its softmax in float32 whatever the model's dtype, so the degree-5
    # residual stream overflows float32 beyond c ≈ 2¹² in the second layer, and the scales
    # check_scaling widens to would measure that.
    measured = {c.output: classify_decay(c.changes[:len(scales) - 1]) for c in checks}
    assert measured == {c.output: c.expected for c in checks}
