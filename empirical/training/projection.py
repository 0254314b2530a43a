"""The gradient projection θᵀ∇L as the norm grows at fixed accuracy (paper Section 4.2, Figure 1).

For each transformer sublayer variant (:mod:`empirical.measure.components`) the loss is a random affine
layer (fixed, not part of θ) followed by softmax cross-entropy (mean over tokens). For each scale
c the paper's four steps are:

1. scale the sublayer's parameters, θ₀ ↦ cθ₀ (scaled copies, the module is never modified);
2. compute h = f(x; cθ₀) and its logits;
3. set labels: y = argmax of the logits on a fraction a of the tokens, another class on the rest;
4. record cθ₀ᵀ·∇L at cθ₀ by automatic differentiation.

The equilibrium norm ρ*(a) = c*(a)·‖θ₀‖, with c*(a) the first scale on the grid where the
projection is positive: the norm up to which gradient descent can grow the parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from empirical.errors import EmpiricalError
from empirical.measure.scaled import call_scaled, check_scale, parameter_norm, scaled_parameters
from empirical.models.provenance import model_record
from empirical.outputs import Result, save_figure

__all__ = [
    "Projection",
    "ProjectionCurves",
    "equilibrium_scale",
    "fixed_accuracy_labels",
    "gradient_projection",
    "gradient_projections",
    "projection_curves",
]

SCHEMA = "normsat.projection/1"


@dataclass(frozen=True)
class Projection:
    """The gradient of a loss at c·θ, seen along the parameters.

    Attributes:
        value: (cθ)ᵀ·∇L at cθ; negative where gradient descent lets the norm grow.
        gradient_norm: ‖∇L‖ at cθ.
        parameter_norm: ‖cθ‖.
    """

    value: float
    gradient_norm: float
    parameter_norm: float


def gradient_projection(model: nn.Module, scale: float, loss: Callable[[Any], torch.Tensor],
                        **inputs: Any) -> Projection:
    """(cθ)ᵀ·∇L at cθ for every parameter of ``model``, by automatic differentiation.

    Args:
        model: any module; it is called through scaled copies of its parameters, never modified.
        scale: the factor c > 0.
        loss: maps the model's output (one tensor) to a scalar loss; it may read labels off it.
        **inputs: the model's keyword inputs.

    >>> lin = nn.Linear(2, 1, bias=False)          # f = wᵀx is 1-homogeneous: θᵀ∇f = f
    >>> x = torch.tensor([[1.0, 2.0]])
    >>> p = gradient_projection(lin, 3.0, lambda out: out.sum(), input=x)
    >>> math.isclose(p.value, 3.0 * float(lin(x).detach()), rel_tol=1e-6)
    True
    """
    return gradient_projections(model, scale, [loss], **inputs)[0]


def gradient_projections(model: nn.Module, scale: float, losses: Sequence[Callable[[Any], torch.Tensor]],
                         **inputs: Any) -> list[Projection]:
    """:func:`gradient_projection` for several losses of the same output, with one forward pass.

    By the chain rule through the output h, ∇L = (∂h/∂θ)ᵀ·∂L/∂h: each loss needs only its
    cotangent ∂L/∂h and one backward pass through the model's graph, which is built once.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise EmpiricalError(f"expected a finite scale c > 0, got {scale!r}")
    params = scaled_parameters(model, scale)
    if not params:
        raise EmpiricalError(f"{type(model).__name__} has no parameters to project onto")
    for tensor in params.values():
        tensor.requires_grad_(True)
    output = call_scaled(model, params, **inputs)
    if not isinstance(output, torch.Tensor):
        raise EmpiricalError(f"expected the model to return one tensor, got {type(output).__name__}")
    found = []
    norm = parameter_norm(params.values())
    for loss in losses:
        leaf = output.detach().requires_grad_(True)
        value = loss(leaf)
        if value.dim() != 0:
            raise EmpiricalError(f"expected the loss to be a scalar, got shape {tuple(value.shape)}")
        # A loss that does not read the output (a constant has no graph at all): a zero gradient.
        (cotangent,) = (torch.autograd.grad(value, leaf, allow_unused=True) if value.requires_grad
                        else (None,))
        if cotangent is None:
            found.append(Projection(0.0, 0.0, norm))
            continue
        grads = torch.autograd.grad(output, list(params.values()), grad_outputs=cotangent,
                                    retain_graph=True, allow_unused=True)
        projection = squared = 0.0
        for p, g in zip(params.values(), grads):
            if g is not None:  # a parameter the output does not depend on has a zero gradient
                projection += float((p.detach().double() * g.double()).sum())
                squared += float(g.double().square().sum())
        found.append(Projection(projection, math.sqrt(squared), norm))
    return found


def fixed_accuracy_labels(logits: torch.Tensor, wrong: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Labels that make the logits' predictions right exactly where ``wrong`` is False (step 3).

    Args:
        logits: (samples, classes).
        wrong: (samples,) booleans, the samples to get a label other than the argmax.
        offsets: (samples,) integers in [1, classes): a wrong label is (argmax + offset) mod classes.

    >>> logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])
    >>> fixed_accuracy_labels(logits, torch.tensor([False, True]), torch.tensor([1, 2])).tolist()
    [1, 2]
    """
    predicted = logits.argmax(dim=-1)
    return torch.where(wrong, (predicted + offsets) % logits.shape[-1], predicted)


def equilibrium_scale(scales: Sequence[float], projections: Sequence[float]) -> float | None:
    """The first scale whose projection is positive (c*), or None if there is none on the grid.

    >>> equilibrium_scale([1.0, 2.0, 3.0], [-0.5, 0.1, 0.2])
    2.0
    """
    return next((c for c, value in zip(scales, projections) if value > 0), None)


@dataclass(frozen=True)
class ProjectionCurves(Result):
    """Figure 1: projections over a grid of scales and accuracies, for each variant.

    Attributes:
        scales: the factors c (increasing).
        accuracies: the fixed accuracies a.
        initial_norms: ρ₀ = ‖θ₀‖ of each variant.
        projections: per variant and accuracy, cθ₀ᵀ·∇L at cθ₀ for each scale.
        record: inputs, classes, seed, dtype and the components' records.
    """

    scales: tuple[float, ...]
    accuracies: tuple[float, ...]
    initial_norms: dict[str, float]
    projections: dict[str, dict[float, tuple[float, ...]]]
    record: dict[str, Any] = field(default_factory=dict)

    def equilibrium_norm(self, variant: str, accuracy: float) -> float | None:
        """ρ*(a) = c*(a)·ρ₀, or None where the projection stays ≤ 0 on the whole grid."""
        c = equilibrium_scale(self.scales, self.projections[variant][accuracy])
        return None if c is None else c * self.initial_norms[variant]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.projection/1``); ρ* is null where never reached."""
        return {
            "schema": SCHEMA,
            "scales": list(self.scales),
            "accuracies": list(self.accuracies),
            "variants": [
                {
                    "name": name,
                    "initial_norm": self.initial_norms[name],
                    "curves": [
                        {"accuracy": a, "projections": list(values),
                         "equilibrium_scale": equilibrium_scale(self.scales, values),
                         "equilibrium_norm": self.equilibrium_norm(name, a)}
                        for a, values in curves.items()
                    ],
                }
                for name, curves in self.projections.items()
            ],
            **self.record,
        }

    def table(self) -> str:
        """Plain text: ρ*(a) per variant (``>ρmax`` where the grid never turns positive)."""
        width = max(len("variant"), *(len(n) for n in self.projections))
        rows = [f"{'variant':<{width}}  {'ρ₀':>7}  " + "  ".join(f"{f'a={a:g}':>8}" for a in self.accuracies)]
        for name, rho0 in self.initial_norms.items():
            cells = []
            for a in self.accuracies:
                rho = self.equilibrium_norm(name, a)
                cells.append(f"{rho:8.2f}" if rho is not None else f"{f'>{self.scales[-1] * rho0:.0f}':>8}")
            rows.append(f"{name:<{width}}  {rho0:7.3f}  " + "  ".join(cells))
        return "\n".join(rows)

    def plot(self, path: str | Path, *, panels: tuple[float, float] = (1.0, 0.8)) -> Path:
        """The paper's layout: projection against c·ρ₀ at two accuracies, and ρ*(a) below."""
        from matplotlib.figure import Figure  # Agg through a bare Figure: no pyplot state

        missing = [a for a in panels if a not in self.accuracies]
        if missing:
            raise EmpiricalError(f"expected panel accuracies among {self.accuracies}, got {missing}")
        fig = Figure(figsize=(10.0, 7.5), dpi=120)
        grid = fig.add_gridspec(2, 2)
        tops = [fig.add_subplot(grid[0, i]) for i in range(2)]
        bottom = fig.add_subplot(grid[1, :])
        for index, (name, rho0) in enumerate(self.initial_norms.items()):
            color = f"C{index}"
            norms = [c * rho0 for c in self.scales]
            for ax, a in zip(tops, panels):
                ax.plot(norms, self.projections[name][a], color=color, label=name)
            reached = [(a, rho) for a in self.accuracies
                       if (rho := self.equilibrium_norm(name, a)) is not None]
            bottom.plot([a for a, _ in reached], [rho for _, rho in reached], marker="o", color=color,
                        label=name)
        for ax, a in zip(tops, panels):
            ax.axhline(0.0, color="0.6", linewidth=0.8)
            ax.set_xlabel("norm c·ρ₀")
            ax.set_ylabel("cθ₀ᵀ·∇L at cθ₀")
            ax.set_title(f"accuracy {100 * a:.0f}%", fontsize="medium")
            ax.grid(alpha=0.3)
        bottom.set_xlabel("accuracy a")
        bottom.set_ylabel("equilibrium norm ρ*(a)")
        bottom.set_yscale("log")
        bottom.set_title(f"first norm with a positive projection (none up to c = {self.scales[-1]:g}: "
                         "not drawn)", fontsize="medium")
        bottom.grid(alpha=0.3)
        bottom.legend(fontsize="small")
        fig.tight_layout()
        out = Path(path)
        save_figure(fig, out)
        return out


def projection_curves(components: Mapping[str, nn.Module], inputs: torch.Tensor, *,
                      scales: Sequence[float], accuracies: Sequence[float], classes: int = 10,
                      seed: int = 0, progress: bool = False) -> ProjectionCurves:
    """Measure Figure 1 for ``components`` on ``inputs`` (every token is one sample).

    Args:
        components: modules taking one tensor ``hidden_states`` of shape (..., hidden) and returning
            one of the same shape (e.g. :func:`empirical.measure.components.build_components`).
        inputs: their input; every position of every sequence is a sample.
        scales: increasing factors c ≥ 1.
        accuracies: fractions a in [0, 1] of samples labelled with their prediction.
        classes: outputs of the random affine layer.
        seed: seeds the affine layer, which samples are wrong, and their wrong labels.
        progress: a tqdm bar over the components.

    >>> from empirical.measure.components import build_components, random_inputs
    >>> parts = build_components(["feed-forward (no biases)"])
    >>> curves = projection_curves(parts, random_inputs(4, 5), scales=[1, 2, 4], accuracies=[1.0, 0.6])
    >>> all(v < 0 for v in curves.projections["feed-forward (no biases)"][1.0])
    True
    """
    cs = tuple(check_scale(c) for c in scales)
    if list(cs) != sorted(cs) or len(set(cs)) != len(cs):
        raise EmpiricalError(f"expected strictly increasing scales, got {list(scales)}")
    accs = tuple(float(a) for a in accuracies)
    if not accs or any(not 0.0 <= a <= 1.0 for a in accs):
        raise EmpiricalError(f"expected accuracies in [0, 1], got {list(accuracies)}")
    if classes < 2:
        raise EmpiricalError(f"expected at least 2 classes, got {classes}")
    hidden = inputs.shape[-1]
    # Drawn on the CPU, so that a seed gives the same readout and labels on every device.
    generator = torch.Generator().manual_seed(seed)
    device = inputs.device
    readout_weight = (torch.randn(classes, hidden, generator=generator, dtype=inputs.dtype)
                      / math.sqrt(hidden)).to(device)
    readout_bias = torch.randn(classes, generator=generator, dtype=inputs.dtype).to(device)
    samples = inputs[..., 0].numel()
    order = torch.randperm(samples, generator=generator)  # the first round((1 − a)·n) are wrong
    offsets = torch.randint(1, classes, (samples,), generator=generator).to(device)

    def loss_at(accuracy: float) -> Callable[[torch.Tensor], torch.Tensor]:
        wrong = torch.zeros(samples, dtype=torch.bool, device=device)
        wrong[order[: round((1.0 - accuracy) * samples)]] = True

        def loss(output: torch.Tensor) -> torch.Tensor:
            logits = output.reshape(samples, hidden) @ readout_weight.T + readout_bias
            labels = fixed_accuracy_labels(logits.detach(), wrong, offsets)
            return torch.nn.functional.cross_entropy(logits, labels)

        return loss

    losses = {a: loss_at(a) for a in accs}
    norms: dict[str, float] = {}
    projections: dict[str, dict[float, tuple[float, ...]]] = {}
    for name, module in tqdm(components.items(), desc="gradient projection", unit="variant",
                             disable=not progress):
        curves: dict[float, list[float]] = {a: [] for a in accs}
        for c in cs:
            found = gradient_projections(module, c, list(losses.values()), hidden_states=inputs)
            for a, projection in zip(losses, found):
                if not math.isfinite(projection.value):
                    raise EmpiricalError(f"the projection of '{name}' at c = {c:g}, a = {a:g} is not "
                                         f"finite in {inputs.dtype}; use float64 or smaller scales")
                curves[a].append(projection.value)
        norms[name] = parameter_norm(module.parameters())
        projections[name] = {a: tuple(values) for a, values in curves.items()}
    record = {
        "inputs": {"shape": list(inputs.shape), "dtype": str(inputs.dtype), "samples": samples},
        "loss": {"readout": f"random affine layer {hidden} → {classes} (fixed, not scaled)",
                 "criterion": "softmax cross-entropy, mean over samples", "seed": seed},
        "components": {name: model_record(module) for name, module in components.items()},
    }
    return ProjectionCurves(cs, accs, norms, projections, record)
