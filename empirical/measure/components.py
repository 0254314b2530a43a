"""Transformer sublayers in isolation (paper Section 4.2, Appendix B) and how fast they saturate.

The paper tests five variants of the two sublayers, each of hidden size 10: self-attention with and
without biases, and the feed-forward sublayer standard, without biases, and without biases and
residual connection. Post-norm as in BERT; ReLU as in Definition 7; one attention head.

:func:`component_saturation` is the paper's Figure 5: the cosine of a component's output at c·θ
with its output at c = 1000 (the paper's measure), and with the exact c → ∞ limit from
:func:`saturated.saturate` (the measure the paper approximated by c = 1000).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.measure.pipeline import token_cosines
from empirical.measure.scaled import call_scaled, check_scale, scaled_parameters
from empirical.measure.variants import SUBLAYER_VARIANTS
from empirical.models.provenance import model_record
from empirical.outputs import Result, save_figure
from saturated.errors import SaturationError
from saturated.saturate import saturate

__all__ = [
    "VARIANTS",
    "ComponentSaturation",
    "FeedForwardSublayer",
    "SelfAttentionSublayer",
    "build_components",
    "component_saturation",
    "random_inputs",
]

SCHEMA = "normsat.component-saturation/1"


class SelfAttentionSublayer(nn.Module):
    """LN(X + W·softmax(QKᵀ/√d)V + b): BERT's self-attention sublayer with one head.

    Without biases, Q, K, V and the output map have none; the residual and the LayerNorm's affine
    parameters stay (the paper's "without biases" variant).
    """

    def __init__(self, hidden: int = 10, *, bias: bool = True) -> None:
        super().__init__()
        self.query = nn.Linear(hidden, hidden, bias=bias)
        self.key = nn.Linear(hidden, hidden, bias=bias)
        self.value = nn.Linear(hidden, hidden, bias=bias)
        self.output = nn.Linear(hidden, hidden, bias=bias)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.query(hidden_states), self.key(hidden_states), self.value(hidden_states)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        heads = torch.softmax(scores, dim=-1) @ v
        return self.norm(hidden_states + self.output(heads))


class FeedForwardSublayer(nn.Module):
    """LN(X + W₂·ReLU(W₁X + b₁) + b₂): the feed-forward sublayer (Definition 7 with its extras).

    ``bias=False`` drops b₁ and b₂; ``residual=False`` drops X (Definition 7 exactly, with the
    LayerNorm's affine parameters).
    """

    def __init__(self, hidden: int = 10, intermediate: int = 10, *, bias: bool = True,
                 residual: bool = True) -> None:
        super().__init__()
        self.residual = residual
        self.inner = nn.Linear(hidden, intermediate, bias=bias)
        self.outer = nn.Linear(intermediate, hidden, bias=bias)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out = self.outer(torch.relu(self.inner(hidden_states)))
        return self.norm(hidden_states + out if self.residual else out)


def _sublayer(name: str, hidden: int) -> nn.Module:
    """The variant ``name`` of :data:`~empirical.measure.variants.SUBLAYER_VARIANTS` (the
    intermediate size of feed-forward = hidden)."""
    sublayer, options = SUBLAYER_VARIANTS[name]
    if sublayer == "attention":
        return SelfAttentionSublayer(hidden, **options)
    return FeedForwardSublayer(hidden, hidden, **options)


VARIANTS: dict[str, Callable[[int], nn.Module]] = {
    name: functools.partial(_sublayer, name) for name in SUBLAYER_VARIANTS}
"""The paper's five sublayer variants by name: each builds its sublayer for a hidden size."""


def build_components(names: Sequence[str] | None = None, *, hidden: int = 10, seed: int = 0,
                     dtype: torch.dtype = torch.float64) -> dict[str, nn.Module]:
    """Randomly initialized variants (PyTorch's default init, seeded) in eval mode.

    >>> sorted(build_components(["attention"])["attention"].state_dict())[:2]
    ['key.bias', 'key.weight']
    """
    chosen = list(VARIANTS) if names is None else list(names)
    unknown = [name for name in chosen if name not in VARIANTS]
    if unknown:
        raise EmpiricalError(f"expected variants among {sorted(VARIANTS)}, got {unknown}")
    built = {}
    for name in chosen:
        # Each variant from ``seed`` alone (the same model whatever else is built), and the global
        # generator left as it was.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            built[name] = VARIANTS[name](hidden).to(dtype).eval()
    return built


def random_inputs(sequences: int, length: int, hidden: int = 10, *, seed: int = 0,
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard-normal inputs of shape (sequences, length, hidden) from their own generator."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(sequences, length, hidden, generator=generator, dtype=dtype)


@dataclass(frozen=True)
class ComponentSaturation(Result):
    """Figure 5: mean token cosine of each variant's output at c·θ with two references.

    Attributes:
        scales: the factors c.
        reference: the finite reference scale (the paper's 1000).
        to_reference: per variant, cos(f(x; cθ), f(x; reference·θ)) for each c.
        to_limit: per variant, cos(f(x; cθ), s-f(x; θ)) with the exact limit, for each c.
        limit_degrees: per variant, the degree d of the output in c (lim f(x; cθ)/cᵈ is the limit).
        record: inputs, seed, dtype and the components' records.
    """

    scales: tuple[float, ...]
    reference: float
    to_reference: dict[str, tuple[float, ...]]
    to_limit: dict[str, tuple[float, ...]]
    limit_degrees: dict[str, float]
    record: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.component-saturation/1``)."""
        return {
            "schema": SCHEMA,
            "scales": list(self.scales),
            "reference_scale": self.reference,
            "variants": [
                {"name": name, "limit_degree": self.limit_degrees[name],
                 "cosine_to_reference": list(self.to_reference[name]),
                 "cosine_to_limit": list(self.to_limit[name])}
                for name in self.to_reference
            ],
            **self.record,
        }

    def at(self, scale: float) -> dict[str, tuple[float, float]]:
        """(cosine to the reference, cosine to the limit) of every variant at one measured c."""
        if scale not in self.scales:
            raise EmpiricalError(f"expected one of the measured scales {self.scales}, got {scale}")
        i = self.scales.index(scale)
        return {name: (self.to_reference[name][i], self.to_limit[name][i]) for name in self.to_reference}

    def table(self, scales: Sequence[float] | None = None) -> str:
        """Plain text: one row per variant, cos to the reference / to the limit at some c."""
        shown = [c for c in (scales or self.scales) if c in self.scales]
        width = max(len("variant"), *(len(n) for n in self.to_reference))
        head = f"{'variant':<{width}}  " + "  ".join(f"{f'c={c:g}':>15}" for c in shown)
        rows = [head, f"{'':<{width}}  " + "  ".join(f"{f'{self.reference:g}θ / limit':>15}" for _ in shown)]
        for name in self.to_reference:
            cells = [f"{ref:7.4f} / {lim:.4f}" for ref, lim in (self.at(c)[name] for c in shown)]
            rows.append(f"{name:<{width}}  " + "  ".join(f"{cell:>15}" for cell in cells))
        return "\n".join(rows)

    def plot(self, path: str | Path) -> Path:
        """Two panels, one line per variant, c on a log axis: the cosine to the reference (the
        paper's Figure 5) and, on its own scale, how much the cosine to the exact limit differs
        from it (where the two agree closely, two panels of cosines would look the same)."""
        from matplotlib.figure import Figure  # Agg through a bare Figure: no pyplot state

        fig = Figure(figsize=(10.0, 4.0), dpi=120)
        left, right = fig.subplots(1, 2)
        differences = {name: [lim - ref for lim, ref in zip(self.to_limit[name], values)]
                       for name, values in self.to_reference.items()}
        largest = max((abs(d) for values in differences.values() for d in values), default=0.0)
        for ax, series, title in (
                (left, self.to_reference, f"cos(f(x; cθ), f(x; {self.reference:g}θ))"),
                (right, differences, f"cos to the exact limit s-f(x; θ) minus cos to {self.reference:g}θ\n"
                                     f"(largest difference {largest:.2g})")):
            for index, (name, values) in enumerate(series.items()):
                ax.plot(self.scales, values, color=f"C{index}", label=name)
            ax.set_xscale("log")
            ax.set_xlabel("scale c")
            ax.set_title(title, fontsize="medium")
            ax.grid(alpha=0.3)
        left.set_ylabel("mean token cosine")
        right.set_ylabel("difference in mean token cosine")
        right.axhline(0.0, color="0.6", linewidth=0.8)
        left.legend(fontsize="small", loc="lower right")
        fig.tight_layout()
        return save_figure(fig, path)


def component_saturation(components: Mapping[str, nn.Module], inputs: torch.Tensor,
                         scales: Sequence[float], *, reference: float = 1000.0) -> ComponentSaturation:
    """Measure Figure 5 for ``components`` on ``inputs`` (none of the components is modified).

    Args:
        components: modules taking one tensor ``hidden_states`` (e.g. from :func:`build_components`).
        inputs: their input, (sequences, length, hidden).
        scales: the factors c ≥ 1.
        reference: the finite reference scale of the paper's measure.

    Raises:
        EmpiricalError: a scale below 1, an output that is not finite, or a component whose exact
            limit :func:`saturated.saturate` cannot determine.

    >>> parts = build_components(["feed-forward (no biases or residual)"])
    >>> result = component_saturation(parts, random_inputs(2, 3), [1.0, 1000.0])
    >>> result.to_reference["feed-forward (no biases or residual)"][1]
    1.0
    """
    cs = tuple(check_scale(c) for c in scales)
    ref = check_scale(reference)
    to_reference: dict[str, tuple[float, ...]] = {}
    to_limit: dict[str, tuple[float, ...]] = {}
    degrees: dict[str, float] = {}
    for name, module in components.items():
        try:
            exact = saturate(module, hidden_states=inputs)(hidden_states=inputs)
        except SaturationError as err:
            raise EmpiricalError(f"the exact limit of component '{name}' is not available: {err}") from err
        limit, degrees[name] = exact.value, float(exact.degrees)
        with torch.no_grad():
            far = _scaled_output(module, ref, inputs, name)
            outputs = [_scaled_output(module, c, inputs, name) for c in cs]
        to_reference[name] = tuple(float(token_cosines(out, far).mean()) for out in outputs)
        to_limit[name] = tuple(float(token_cosines(out, limit).mean()) for out in outputs)
    record = {
        "inputs": {"shape": list(inputs.shape), "dtype": str(inputs.dtype)},
        "components": {name: model_record(module) for name, module in components.items()},
    }
    return ComponentSaturation(cs, ref, to_reference, to_limit, degrees, record)


def _scaled_output(module: nn.Module, scale: float, inputs: torch.Tensor, name: str) -> torch.Tensor:
    out = call_scaled(module, scaled_parameters(module, scale), hidden_states=inputs)
    if not torch.isfinite(out).all():
        raise EmpiricalError(f"component '{name}' overflows at c = {scale:g} in {out.dtype}; "
                             "use float64 or smaller scales")
    return out
