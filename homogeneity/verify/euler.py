"""Euler's identity for homogeneous functions: θᵀ∇_θ f = k·f (the paper's Lemma 9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch import nn

from homogeneity.analysis import analyze, select_parameters
from homogeneity.degree import Grade
from homogeneity.report import HomogeneityReport
from homogeneity.verify.scaling import scaled_outputs

__all__ = ["EulerCheck", "check_euler"]


@dataclass(frozen=True)
class EulerCheck:
    """θᵀ∇_θ f against k·f for one output; ``error`` is ‖θᵀ∇f − k f‖ / ‖f‖."""

    output: str
    degree: sympy.Expr
    grade: Grade
    error: float

    def holds(self, tol: float = 1e-9) -> bool:
        return self.error <= tol


def check_euler(model: nn.Module, *args: Any, params: str | Sequence[str] | None = None,
                report: HomogeneityReport | None = None, **kwargs: Any) -> list[EulerCheck]:
    """θᵀ∇_θ f for each output with an integer degree, by forward-mode autograd in float64.

    θᵀ∇_θ f is d/dc f(cθ) at c = 1 (only the ``params`` scale), computed as one Jacobian-vector
    product; for an exact grade it equals k·f.

    >>> mlp = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False))
    >>> [(c.degree, c.holds()) for c in check_euler(mlp, torch.randn(5, 3))]
    [(2, True)]
    """
    if report is None:
        report = analyze(model, *args, params=params, **kwargs)
    scaled = select_parameters((n for n, _ in model.named_parameters()), params)
    names = list(scaled_outputs(model, args, kwargs, scaled, 1.0))

    def outputs(c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        run = scaled_outputs(model, args, kwargs, scaled, c)
        return tuple(run[name] for name in names)

    one = torch.tensor(1.0, dtype=torch.float64)
    with torch.enable_grad():
        values, tangents = torch.func.jvp(outputs, (one,), (torch.ones_like(one),))[:2]
    checks = []
    for name, value, tangent in zip(names, values, tangents):
        degree = report.outputs.get(name)
        if degree is None or not degree.single or not degree.value.is_number \
                or degree.value is sympy.nan:
            continue
        k = float(degree.value)
        error = float((tangent - k * value).norm() / value.norm().clamp_min(1e-300))
        checks.append(EulerCheck(name, degree.value, degree.grade, error))
    return checks
