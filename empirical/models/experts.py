"""What the batched expert products of a mixture of experts hold in memory.

Built with ``experts_implementation="batched_mm"`` (so that an export sees every expert product),
a mixture-of-experts layer gathers, for each token, the weight matrices of the k experts its
router chose: k copies of one expert's parameters per token. At published sizes that dwarfs the
model (Mixtral-8x7B: two experts of 176M parameters, 1.4 GB per token in float32), so a corpus
measurement checks it against the memory available before it starts.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["check_expert_memory", "expert_bytes_per_token"]

_MEMINFO = Path("/proc/meminfo")


def expert_bytes_per_token(model: nn.Module) -> int:
    """Bytes of expert weights the batched expert products gather per token (0 for a model without
    experts): k times one expert's parameters (the stacked parameters of the first expert layer,
    one slice per expert), in their dtype.
    """
    config = getattr(model, "config", None)
    chosen = getattr(config, "num_experts_per_tok", None)
    experts = getattr(config, "num_local_experts", None) or getattr(config, "num_experts", None)
    if not chosen or not experts:
        return 0
    layers: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if ".experts." in name and parameter.dim() == 3 and parameter.shape[0] == experts:
            layer = name.rsplit(".experts.", 1)[0]
            layers[layer] = layers.get(layer, 0) + parameter[0].numel() * parameter.element_size()
    return int(chosen) * next(iter(layers.values()), 0)


def available_memory() -> int | None:
    """The memory available to a new allocation now, in bytes (Linux's MemAvailable; None where the
    system does not say)."""
    try:
        lines = _MEMINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def _gb(size: float) -> str:
    """Bytes in GB, three significant digits (whole GB from 1000 on, not a power of ten).

    >>> _gb(1.41e9), _gb(1.894e12)
    ('1.41 GB', '1894 GB')
    """
    return f"{size / 1e9:.3g} GB" if size < 1e12 else f"{size / 1e9:.0f} GB"


def check_expert_memory(model: nn.Module, sentences: int, length: int) -> None:
    """Refuse a batch of ``sentences`` × ``length`` tokens whose gathered expert weights alone
    would not fit in the memory available.

    Raises:
        EmpiricalError: what the batch needs, what is available, and what to change.
    """
    per_token = expert_bytes_per_token(model)
    available = available_memory() if per_token else None
    if available is None or per_token * sentences * length <= available:
        return
    raise EmpiricalError(
        f"this mixture of experts gathers its chosen experts' weights for every token "
        f"({_gb(per_token)} per token): a batch of {sentences} sentences of {length} tokens needs "
        f"{_gb(per_token * sentences * length)}, and {_gb(available)} of memory is available; use "
        f"a smaller --batch-size or --max-length, or a model with smaller experts")
