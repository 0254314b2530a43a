"""Models larger than memory: a folder's weights placed by accelerate's big-model inference.

``device_map`` (``"auto"``, ``"balanced"``, ``"sequential"``, a device, or module → device),
``max_memory`` (bytes per device) and ``offload_folder`` are handed to ``from_pretrained``, which
hands them to accelerate: modules that do not fit stay on disk (in the checkpoint's own
safetensors where it can, in the offload folder otherwise) and are streamed in as each one runs.
The measurements never write into these weights: the scale c is applied as each module runs
(:mod:`empirical.measure.scaled`).

>>> parse_max_memory("1GiB"), parse_max_memory("cpu=512MiB")
({'cpu': 1073741824}, {'cpu': 536870912})
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["Placement", "check_device_map", "check_offload_folder", "dispatch", "execution_device",
           "is_dispatched", "load_dispatched", "parse_max_memory", "placement_record"]

_NEEDS_FOLDER = ("expected --offload-folder DIR: the model does not fit in --max-memory, and what does "
                 "not fit is streamed from there")
_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
_PLACES = ("cpu", "disk", "meta")


@dataclass(frozen=True)
class Placement:
    """Where accelerate may put a model: ``device_map``, ``max_memory`` and ``offload_folder`` as
    ``from_pretrained`` takes them (all None: the model is loaded whole, as usual)."""

    device_map: str | dict[str, Any] | None = None
    max_memory: dict[str | int, int] = field(default_factory=dict)
    offload_folder: Path | None = None

    @property
    def requested(self) -> bool:
        return self.device_map is not None or bool(self.max_memory) or self.offload_folder is not None

    @classmethod
    def of(cls, device_map: str | dict[str, Any] | None = None,
           max_memory: str | int | dict[str | int, int | str] | None = None,
           offload_folder: str | Path | None = None) -> Placement:
        """The checked placement of the arguments of :func:`empirical.models.loading.load_model`."""
        if device_map is None and max_memory is None and offload_folder is None:
            return cls()
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise EmpiricalError("device_map, max_memory and offload_folder need accelerate: "
                                 "pip install 'normsat[big]'") from None
        memory = parse_max_memory(max_memory)
        mapping = check_device_map(device_map if device_map is not None or not memory else "auto")
        folder = check_offload_folder(offload_folder) if offload_folder is not None else None
        return cls(mapping, memory, folder)


def _size(value: int | str, where: str) -> int:
    from accelerate.utils import convert_file_size_to_int

    try:
        size = convert_file_size_to_int(value)
    except ValueError:
        size = -1
    if size <= 0:
        raise EmpiricalError(f"expected a memory size such as 1GiB, 512MiB or a number of bytes for {where}, "
                             f"got {value!r}")
    return int(size)


def _device_key(name: str | int) -> str | int:
    """A max_memory key as accelerate names devices: ``cpu``, ``disk`` or a CUDA index."""
    text = str(name).strip()
    if text.isdigit():
        return int(text)
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    return text


def parse_max_memory(value: str | int | dict[str | int, int | str] | None) -> dict[str | int, int]:
    """``max_memory`` as accelerate takes it (device → bytes), from ``"1GiB"`` (the CPU),
    ``"cpu=1GiB,0=10GiB"`` or a dict.

    Raises:
        EmpiricalError: a size that does not parse, or a device that does not exist here.
    """
    if value is None:
        return {}
    if isinstance(value, int | float) or (isinstance(value, str) and "=" not in value):
        return {"cpu": _size(value if isinstance(value, str) else int(value), "--max-memory")}
    pairs = value.items() if isinstance(value, dict) else \
        [part.split("=", 1) for part in str(value).split(",") if part.strip()]
    memory: dict[str | int, int] = {}
    for device, size in pairs:
        key = _device_key(device)
        _check_place(key, "--max-memory")
        memory[key] = _size(size, f"--max-memory {device}")
    return memory


def _check_place(place: str | int, where: str) -> None:
    """Refuse a device that does not exist on this machine (``disk`` and ``meta`` always do)."""
    from empirical.models.loading import check_device

    if isinstance(place, int):
        place = f"cuda:{place}"
    if place in _PLACES:
        return
    try:
        check_device(place)
    except EmpiricalError as err:
        raise EmpiricalError(f"{where} names {place!r}: {err}") from None


def check_device_map(value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    """``device_map`` checked: a strategy (auto, balanced, balanced_low_0, sequential), one device
    for the whole model, module → device as a dict, JSON text or a JSON file.

    Raises:
        EmpiricalError: a device that does not exist here, or a map that does not parse.
    """
    if value is None or (isinstance(value, str) and value in _STRATEGIES):
        return value
    if isinstance(value, str):
        text = Path(value).read_text(encoding="utf-8") if value.endswith(".json") and Path(value).is_file() \
            else value
        if not text.lstrip().startswith("{"):
            _check_place(_device_key(text), "--device-map")
            return {"": _device_key(text)}
        try:
            value = json.loads(text)
        except ValueError as err:
            raise EmpiricalError(f"expected --device-map to be auto, balanced, sequential, a device or a "
                                 f"JSON object of module → device, got {text[:80]!r}: {err}") from err
    if not isinstance(value, dict):
        raise EmpiricalError(f"expected a device map of module → device, got {type(value).__name__}")
    mapped = {str(module): _device_key(place) for module, place in value.items()}
    for module, place in mapped.items():
        _check_place(place, f"--device-map (module {module or 'the whole model'!r})")
    return mapped


def check_offload_folder(path: str | Path) -> Path:
    """The offload folder, created if needed, after checking that files can be written in it.

    Raises:
        EmpiricalError: a path that is a file, or a folder that cannot be created or written.
    """
    folder = Path(path).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise EmpiricalError(f"expected a writable folder for --offload-folder, got {folder}: "
                             f"{err.strerror or err}") from None
    return folder


def is_dispatched(model: nn.Module) -> bool:
    """Whether accelerate placed ``model`` (its modules carry accelerate's hooks)."""
    return any(hasattr(module, "_hf_hook") for module in model.modules())


def execution_device(model: nn.Module) -> torch.device:
    """Where the model's inputs go: its parameters' device, or for a model placed by accelerate
    the first device of its map that computes (not disk)."""
    mapping = getattr(model, "hf_device_map", None)
    if is_dispatched(model) and isinstance(mapping, dict):
        computing = [place for place in mapping.values() if place not in ("disk", "meta")]
        first = computing[0] if computing else "cpu"
        return torch.device(f"cuda:{first}" if isinstance(first, int) else first)
    return next(model.parameters()).device


def placement_record(model: nn.Module) -> dict[str, Any]:
    """For a result's provenance: how many modules accelerate put on each device (none if it did
    not place the model)."""
    mapping = getattr(model, "hf_device_map", None)
    if not is_dispatched(model) or not isinstance(mapping, dict):
        return {}
    counts: dict[str, int] = {}
    for place in mapping.values():
        counts[str(place)] = counts.get(str(place), 0) + 1
    return {"placement": counts}


def _largest_block(model: nn.Module) -> int:
    """Bytes of the largest block accelerate moves as one piece (a no-split module or a leaf)."""
    from accelerate.utils import compute_module_sizes, get_max_layer_size

    sizes = compute_module_sizes(model)
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    return int(get_max_layer_size(list(model.named_children()), sizes, no_split)[0])


def _check_memory(model: nn.Module, placement: Placement) -> None:
    """Refuse a ``max_memory`` below one block (accelerate streams a block at a time and needs it
    whole on the device that runs it), and one the model exceeds with no offload folder to stream
    the rest from (``model`` may be on the meta device: only sizes are read)."""
    from accelerate.utils import compute_module_sizes

    memory = placement.max_memory
    if memory and "disk" not in memory and placement.offload_folder is None and \
            compute_module_sizes(model)[""] > sum(memory.values()):
        raise EmpiricalError(_NEEDS_FOLDER)
    block = _largest_block(model)
    for device, size in placement.max_memory.items():
        if device != "disk" and size < block:
            raise EmpiricalError(
                f"--max-memory {device}={size} bytes is below the largest block of this model "
                f"({block} bytes in {str(next(model.parameters()).dtype).removeprefix('torch.')}), "
                f"which must fit whole in memory as it runs; expected at least {block} bytes")


def load_dispatched(folder: Path, config: transformers.PretrainedConfig, placement: Placement,
                    dtype: torch.dtype, build: Any) -> nn.Module:
    """The folder's model placed by accelerate (``from_pretrained`` with the placement); every
    parameter must come from the checkpoint.

    ``build(config)`` builds the bare model (used on the meta device, to size its blocks).

    Raises:
        EmpiricalError: a max_memory below the largest block, or a checkpoint that leaves
            parameters at their initialization.
    """
    from accelerate import init_empty_weights

    with init_empty_weights():
        _check_memory(build(config).to(dtype), placement)
    experts = any(getattr(config, attr, None) for attr in ("num_local_experts", "num_experts"))
    memory = placement.max_memory or None
    try:
        model, info = transformers.AutoModel.from_pretrained(
            folder, config=config, dtype=dtype, device_map=placement.device_map, max_memory=memory,
            offload_folder=None if placement.offload_folder is None else str(placement.offload_folder),
            local_files_only=True, trust_remote_code=False, attn_implementation="eager",
            output_loading_info=True, **({"experts_implementation": "batched_mm"} if experts else {}))
    except (ValueError, OSError, RuntimeError) as err:
        raise EmpiricalError(f"accelerate could not place the model of {folder}: {err}") from err
    missing = [key for key in info.get("missing_keys", ()) if not key.startswith("pooler.")]
    if missing:
        raise EmpiricalError(
            f"the checkpoint {folder} has no values for {len(missing)} parameters of "
            f"{type(model).__name__} ({', '.join(sorted(missing)[:5])}), which would keep their "
            "random initialization")
    if info.get("missing_keys") and getattr(model, "pooler", None) is not None:
        model.pooler = None  # as for a model loaded whole: a random pooler is not measured
    return model.eval()


def dispatch(model: nn.Module, placement: Placement) -> nn.Module:
    """A model already in memory (random-init) placed by accelerate as ``placement`` says: what goes
    to disk is written to the offload folder and streamed back as each module runs."""
    from accelerate import dispatch_model, infer_auto_device_map

    _check_memory(model, placement)
    mapping = placement.device_map
    if not isinstance(mapping, dict):
        mapping = infer_auto_device_map(model, max_memory=placement.max_memory or None,
                                        no_split_module_classes=list(getattr(model, "_no_split_modules", None)
                                                                     or []))
    if "disk" in mapping.values() and placement.offload_folder is None:
        raise EmpiricalError(_NEEDS_FOLDER)
    return dispatch_model(model, device_map=mapping, offload_dir=placement.offload_folder)
