"""Checkpoint keys as the model names them: per-expert keys fused, renamed keys of older versions mapped.

A checkpoint written by ``save_pretrained`` is not always in the layout of the model class that
loads it. Transformers 5 fuses a mixture of experts' per-expert matrices into stacked parameters
(``mlp.experts.gate_up_proj``), yet ``save_pretrained`` writes them back per expert
(``block_sparse_moe.experts.0.w1.weight``) for compatibility; checkpoints of older versions name
LayerNorm's parameters ``gamma`` and ``beta``. Transformers keeps these rules as a conversion
mapping per model type, applied by ``from_pretrained``; :func:`to_model_keys` applies the same
mapping to a state dict read by :mod:`empirical.models.formats`, so there is one source of truth.

>>> import torch, transformers
>>> model = transformers.BertModel(transformers.BertConfig(
...     vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4))
>>> sorted(to_model_keys(model, {"embeddings.LayerNorm.gamma": torch.ones(4)}))
['embeddings.LayerNorm.weight']
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["to_model_keys"]


def _conversions(model: nn.Module) -> list[Any]:
    """The model's conversion mapping (renamings and converters), or none where this transformers
    has no such mapping (before version 5) or the model is not a Hugging Face one."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
    except ImportError:
        return []
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        return []
    return list(get_model_conversion_mapping(model))


def to_model_keys(model: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with its keys renamed, and per-expert tensors stacked, as ``model`` names them.

    Keys already in the model's layout pass unchanged; keys no rule matches too (the caller then
    reports them as unused or missing).

    Raises:
        EmpiricalError: a group of per-expert tensors that does not stack (experts missing, or
            shapes that differ).
    """
    conversions = _conversions(model)
    if not conversions:
        return state
    from transformers.core_model_loading import (
        WeightConverter,
        WeightRenaming,
        apply_converters,
        apply_renamings,
        dot_natural_key,
    )

    renamings = [c for c in conversions if isinstance(c, WeightRenaming)]
    converters = [c for c in conversions if isinstance(c, WeightConverter)]
    by_pattern = {pattern: c for c in converters for pattern in c.source_patterns}
    converted: dict[str, torch.Tensor] = {}
    groups: dict[str, Any] = {}
    # Natural order (experts 0, 1, …, 10), so that stacked experts keep their indices.
    for key in sorted(state, key=dot_natural_key):
        renamed = apply_renamings(key, renamings)
        target, pattern = apply_converters(renamed, converters)
        if pattern is None:
            converted[renamed] = state[key]
            continue
        group = groups.setdefault(target, copy.deepcopy(by_pattern[pattern]))
        group.add_tensor(target, key, pattern, state[key])
    for target, group in groups.items():
        try:
            made = group.convert(target, model=model, config=model.config)
        except (RuntimeError, ValueError, IndexError) as err:
            raise EmpiricalError(f"cannot stack the checkpoint's per-expert tensors into {target}: {err}") \
                from err
        for name, value in made.items():
            converted[name] = value[0] if isinstance(value, list) else value
    return converted
