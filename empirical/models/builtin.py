"""The built-in models and parameter dtypes as plain data, importing nothing heavy.

The command line lists these names in its options and help without loading torch or transformers;
:mod:`empirical.models.loading` builds the models from the same table.

>>> MODEL_NAMES[:3], FAMILIES["t5"][0]
(('minilm', 'bert', 'roberta'), 't5')
"""

from __future__ import annotations

from typing import Any

__all__ = ["DTYPE_NAMES", "FAMILIES", "MINILM", "MODEL_NAMES"]

MINILM = "minilm"
"""The one built-in model with pretrained weights (sentence-transformers all-MiniLM-L6-v2)."""

# Base-size configurations of the paper's model families (and GPT-2), then the smallest published
# configuration of today's families. No weights exist offline for them, so they are random-init only.
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "bert": ("bert", {}),
    "roberta": ("roberta", {
        "vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1,
        "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
    }),
    "t5": ("t5", {"d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_heads": 12}),
    "xlnet": ("xlnet", {"d_model": 768, "n_layer": 12, "n_head": 12, "d_inner": 3072}),
    "gpt2": ("gpt2", {}),
    # meta-llama/Llama-3.2-1B: the smallest published Llama.
    "llama": ("llama", {
        "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": 128001,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192},
    }),
    # mistralai/Mistral-7B-v0.1: the smallest published Mistral (sliding-window attention).
    "mistral": ("mistral", {
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
        "sliding_window": 4096, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }),
    # Qwen/Qwen2-0.5B: the smallest published Qwen2 (biases on q, k, v).
    "qwen2": ("qwen2", {
        "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 24,
        "bos_token_id": 151643, "eos_token_id": 151643,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    }),
    # google/gemma-2b: the smallest published Gemma (multi-query attention, GeGLU, (1 + γ) RMSNorm).
    "gemma": ("gemma", {
        "vocab_size": 256000, "hidden_size": 2048, "intermediate_size": 16384,
        "num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1,
        "head_dim": 256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-6,
        "hidden_act": "gelu_pytorch_tanh", "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }),
    # microsoft/Phi-3-mini-4k-instruct: the smallest published Phi-3.
    "phi3": ("phi3", {
        "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5, "sliding_window": 2047, "bos_token_id": 1, "eos_token_id": 32000,
        "pad_token_id": 32000, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }),
    # EleutherAI/pythia-14m: the smallest published GPT-NeoX (parallel residual, rotary on 1/4).
    "gpt-neox": ("gpt_neox", {
        "vocab_size": 50304, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 6,
        "num_attention_heads": 4, "max_position_embeddings": 2048, "layer_norm_eps": 1e-5,
        "use_parallel_residual": True, "bos_token_id": 0, "eos_token_id": 0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "partial_rotary_factor": 0.25},
    }),
    # mistralai/Mixtral-8x7B-v0.1: the smallest published Mixtral (8 experts, top-2 routing).
    "mixtral": ("mixtral", {
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "num_local_experts": 8,
        "num_experts_per_tok": 2, "sliding_window": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    }),
    # Qwen/Qwen1.5-MoE-A2.7B: the smallest published Qwen2-MoE (60 experts, top-4, a shared
    # expert behind a sigmoid gate).
    "qwen2-moe": ("qwen2_moe", {
        "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
        "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
        "norm_topk_prob": False, "decoder_sparse_step": 1, "bos_token_id": 151643,
        "eos_token_id": 151643, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    }),
}
"""Each built-in family's Hugging Face ``model_type`` and the configuration fields set on it."""

MODEL_NAMES: tuple[str, ...] = (MINILM, *FAMILIES)
"""The built-in model names; any local Hugging Face model directory is accepted as well."""

DTYPE_NAMES: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16")
"""The parameter dtypes by name (the CLI's ``--dtype`` choices)."""
