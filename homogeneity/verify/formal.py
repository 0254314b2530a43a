"""Formal proofs for small polynomial/ReLU graphs: f(x; cθ) − cᵏ f(x; θ) simplifies to 0.

The exported graph is evaluated with sympy symbols for every parameter entry and input entry
(numpy object arrays carry the shapes), once at θ and once at cθ with c > 0. ReLU is written as
(z + |z|)/2, and sympy pulls positive factors out of |·|, so exact homogeneity shows up as a
residual that expands to 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy
import torch
from torch import nn

from homogeneity.analysis import analyze_program, output_names, select_parameters
from homogeneity.errors import HomogeneityError
from homogeneity.rules import target_name
from homogeneity.tracing import export_model, parameter_names

__all__ = ["SYMBOLIC_OPS", "FormalProof", "prove"]

C = sympy.Symbol("c", positive=True)

aten = torch.ops.aten


def _relu(z: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda e: (e + sympy.Abs(sympy.factor_terms(e))) / 2, otypes=[object])(z)


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    out = x @ w.T
    return out if b is None else out + b


SYMBOLIC_OPS: dict[Any, Callable[..., Any]] = {
    aten.linear.default: _linear,
    aten.addmm.default: lambda b, x, w: b + x @ w,
    aten.mm.default: lambda a, b: a @ b,
    aten.matmul.default: lambda a, b: a @ b,
    aten.t.default: lambda a: a.T,
    aten.transpose.int: lambda a, d0, d1: np.swapaxes(a, d0, d1),
    aten.view.default: lambda a, shape: a.reshape(shape),
    aten.reshape.default: lambda a, shape: a.reshape(shape),
    aten.add.Tensor: lambda a, b: a + b,
    aten.sub.Tensor: lambda a, b: a - b,
    aten.mul.Tensor: lambda a, b: a * b,
    aten.neg.default: lambda a: -a,
    aten.relu.default: _relu,
    aten.sum.dim_IntList: lambda a, dims, keepdim=False: a.sum(axis=tuple(dims), keepdims=keepdim),
}
"""The ops a formal proof can evaluate symbolically (polynomials and ReLU)."""


@dataclass(frozen=True)
class FormalProof:
    """The residual f(x; cθ) − cᵏ f(x; θ) of one output, expanded; ``proved`` when it is 0."""

    output: str
    degree: sympy.Expr
    residual: sympy.Expr

    @property
    def proved(self) -> bool:
        return self.residual == 0


def prove(model: nn.Module, *args: torch.Tensor, params: str | Sequence[str] | None = None,
          **kwargs: torch.Tensor) -> list[FormalProof]:
    """Prove (or refute) exact homogeneity of each output of a small polynomial/ReLU model.

    The example inputs fix only the shapes: inputs become symbols too, so the proof holds for
    every input and every θ.

    Raises:
        HomogeneityError: the graph uses an op outside :data:`SYMBOLIC_OPS`.

    >>> mlp = nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU(), nn.Linear(2, 1, bias=False))
    >>> [(p.degree, p.proved) for p in prove(mlp, torch.randn(1, 2))]
    [(2, True)]
    >>> biased = nn.Sequential(nn.Linear(1, 1, bias=False), nn.ReLU(), nn.Linear(1, 1))
    >>> [(p.degree, p.proved) for p in prove(biased, torch.randn(1, 1))]
    [(2, False)]
    """
    program = export_model(model, args, kwargs)
    report = analyze_program(program, params=params)
    param_of = parameter_names(program)
    scaled = select_parameters(param_of.values(), params)
    plain, grown = (_evaluate(program, param_of, scaled, scale) for scale in (1, C))
    proofs = []
    for name, label in output_names(program).items():
        degree = report.outputs[name].value
        if degree is sympy.nan:
            continue
        residual = np.vectorize(lambda a, b, k=degree: sympy.expand(a - C**k * b),
                                otypes=[object])(grown[label], plain[label])
        nonzero = [r for r in np.ravel(residual) if r != 0]
        proofs.append(FormalProof(name, degree, nonzero[0] if nonzero else sympy.Integer(0)))
    return proofs


def _evaluate(program: torch.export.ExportedProgram, param_of: dict[str, str], scaled: set[str],
              scale: Any) -> dict[str, np.ndarray]:
    """Every node's value as an object array of sympy expressions."""
    env: dict[str, Any] = {}
    for node in program.graph.nodes:
        if node.op == "placeholder":
            shape = tuple(node.meta["val"].shape)
            name = param_of.get(node.name, node.name)
            values = _symbols(name.replace(".", "_"), shape)
            env[node.name] = values * scale if name in scaled else values
        elif node.op == "call_function":
            fn = SYMBOLIC_OPS.get(node.target)
            if fn is None:
                raise HomogeneityError(
                    f"formal proofs cover {sorted(target_name(t) for t in SYMBOLIC_OPS)}; node "
                    f"{node.name} uses {target_name(node.target)}"
                )
            args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
            env[node.name] = np.asarray(fn(*args), dtype=object)
    return env


def _symbols(prefix: str, shape: tuple[int, ...]) -> np.ndarray:
    flat = [sympy.Symbol(f"{prefix}_{i}", real=True) for i in range(int(np.prod(shape)))]
    return np.array(flat, dtype=object).reshape(shape)
