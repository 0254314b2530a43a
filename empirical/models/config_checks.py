"""Checks of a model's ``config.json`` before anything is built from it.

A configuration is input from outside: a hand-written ``num_hidden_layers: -1`` builds a 0-layer
model whose degree table looks like an answer, ``1000000000`` builds layers until memory runs out,
and ``vocab_size: 0`` or a layer count written as a word fail deep inside transformers. Every size
field transformers' model families use is checked here for its type and range, naming the file,
the field and what was expected; :func:`check_fits_memory` refuses a build whose weights would not
fit in this machine's memory (the meta device needs none).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from empirical.errors import EmpiricalError
from empirical.validation import read_json_document
from homogeneity.validation import check_integer

__all__ = ["CONFIG_MAX_BYTES", "MAX_LAYERS", "check_config_document", "check_fits_memory",
           "read_config_document"]

CONFIG_MAX_BYTES = 4 * 2**20
"""The longest config.json read: published ones are a few kB (a long id-to-label table included)."""
MAX_LAYERS = 1024
"""The most layers a configuration may ask for: published transformers have at most about 130, and
each layer is a module to build and trace, even on the meta device where it takes no memory."""
_MAX_WIDTH = 2**20
_MAX_VOCABULARY = 2**24
_MAX_POSITIONS = 2**27

_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers", "encoder_layers",
           "decoder_layers")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "num_key_value_heads",
          "encoder_attention_heads", "decoder_attention_heads")
_WIDTHS = ("hidden_size", "n_embd", "d_model", "intermediate_size", "d_ff", "d_inner", "n_inner",
           "d_kv", "head_dim", "moe_intermediate_size", "shared_expert_intermediate_size")
_EXPERTS = ("num_local_experts", "num_experts", "num_experts_per_tok")
_BOUNDS: dict[str, tuple[int, str]] = {
    **{name: (MAX_LAYERS, "layers") for name in _LAYERS},
    **{name: (_MAX_WIDTH, "heads") for name in _HEADS},
    **{name: (_MAX_WIDTH, "a width") for name in _WIDTHS},
    **{name: (_MAX_WIDTH, "experts") for name in _EXPERTS},
    "vocab_size": (_MAX_VOCABULARY, "a vocabulary"),
    **{name: (_MAX_POSITIONS, "positions") for name in ("max_position_embeddings", "n_positions",
                                                         "n_ctx")},
}
"""Each size field, the largest value accepted and what it counts."""
_REQUIRED = frozenset({"num_hidden_layers", "n_layer", "num_layers", "num_attention_heads",
                       "n_head", "num_heads", "vocab_size", "hidden_size", "n_embd", "d_model"})
"""Fields that may not be null when present (the others mean "derive it" when null)."""


def check_config_document(data: Any, path: Path) -> dict[str, Any]:
    """``data`` (the parsed ``config.json`` at ``path``) if it is an object whose size fields are
    integers in range: counts of layers, heads, experts, widths and the vocabulary ≥ 1, each below
    a limit far above any published model's. Nested configurations (``text_config``, …) too.

    >>> check_config_document({"model_type": "bert", "num_hidden_layers": 2}, Path("m/config.json"))
    {'model_type': 'bert', 'num_hidden_layers': 2}
    >>> check_config_document({"num_hidden_layers": -1}, Path("m/config.json"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    empirical.errors.EmpiricalError: expected num_hidden_layers in m/config.json to be ... ≤ 1024, got -1
    """
    if not isinstance(data, Mapping):
        raise EmpiricalError(f"expected {path} to hold a JSON object, got {type(data).__name__}")
    pending: list[tuple[str, Mapping[str, Any]]] = [("", data)]
    while pending:
        prefix, fields = pending.pop()
        for name, value in fields.items():
            if name.endswith("_config") and isinstance(value, Mapping):
                pending.append((f"{prefix}{name}.", value))
            elif name in _BOUNDS and not (value is None and name not in _REQUIRED):
                check_integer(value, f"{prefix}{name} in {path}", low=1, high=_BOUNDS[name][0],
                              error=EmpiricalError)
    return dict(data)


def read_config_document(path: Path) -> dict[str, Any]:
    """The checked ``config.json`` at ``path`` (:func:`check_config_document`), read with bounds."""
    data = read_json_document(path, "configuration", max_bytes=CONFIG_MAX_BYTES)
    return check_config_document(data, path)


def _first(config: Any, names: tuple[str, ...]) -> int:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def estimated_parameters(config: Any) -> int:
    """A lower estimate of a transformer's parameter count from its configuration: the embedding
    table and, per layer, attention's four square projections and the feed-forward's two
    (times the experts). 0 where the sizes are not named the usual way.

    >>> import transformers
    >>> estimated_parameters(transformers.BertConfig()) / 1e6  # BERT-base has 110M
    108.375552
    """
    width = _first(config, ("hidden_size", "n_embd", "d_model"))
    inner = _first(config, ("intermediate_size", "d_ff", "d_inner", "n_inner")) or 4 * width
    experts = max(_first(config, ("num_local_experts", "num_experts")), 1)
    layers = _first(config, ("num_hidden_layers", "n_layer", "num_layers"))
    vocabulary = _first(config, ("vocab_size",))
    return vocabulary * width + layers * (4 * width * width + 2 * width * inner * experts)


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: nothing to compare with
        return None


def check_fits_memory(config: Any, device: torch.device, source: str, dtype: torch.dtype = torch.float32
                      ) -> None:
    """Refuse to build ``config`` on a real device when its weights alone, in ``dtype`` (float32 for
    a random-init build, the requested one for a checkpoint, which loads in its own dtype), would
    exceed this machine's memory (the build would run until the system kills it); the meta device
    builds any size without memory, enough for a degree."""
    memory = _memory()
    if device.type == "meta" or memory is None:
        return
    needed = dtype.itemsize * estimated_parameters(config)
    if needed > memory:
        raise EmpiricalError(
            f"the configuration of {source} has at least {estimated_parameters(config):,} parameters, "
            f"{needed / 2**30:.1f} GiB in {str(dtype).removeprefix('torch.')}, and this machine has "
            f"{memory / 2**30:.1f} GiB; "
            "expected a model that fits (a degree needs no weights: use --device meta, Python: "
            "device='meta')")
