"""Formal proofs of a small graph's degree and grade by sympy, end to end.

The exported graph is evaluated with sympy (numpy object arrays carry the shapes), once at θ and
once at cθ with a positive symbol c. Exactness is tried first with a symbol for every parameter
entry and input entry: ReLU is written as (z + |z|)/2, sympy pulls positive factors out of |·|,
and f(x; cθ) − cᵏ f(x; θ) expanding to 0 proves the degree for every θ and x. LayerNorm and
RMSNorm without eps are evaluated that way too (√(c²·s) = c·√s once c is factored out).

Graphs with softmax, tanh, sigmoid, GELU, SiLU, or a normalization with eps (and polynomial
graphs that are not exact) are evaluated at the model's own parameters and the given inputs, as
exact rationals, with c symbolic. Each output entry f(x; cθ)/cᵏ is then split by
:mod:`homogeneity.verify.asymptotic` into an algebraic main part, a series in 1/c with exact
coefficients, and a rest below K·exp(−r·c) with an exact rate r. L = lim f(x; cθ)/cᵏ is the main
part's constant term (the saturated output); a first nonzero term c⁻ʲ after it proves the grade
asymptotic; without one, only the exponentially small rest is left: approximate. No sympy
``limit`` or ``simplify`` runs on exponentials. Such a proof holds for that θ and those inputs,
for every large c.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy
import torch
import torch.utils._pytree as pytree
from torch import nn

from homogeneity.analysis import analyze_program, output_names, select_parameters
from homogeneity.degree import Grade
from homogeneity.errors import HomogeneityError
from homogeneity.rules import target_name
from homogeneity.tracing import export_model, parameter_names
from homogeneity.verify.asymptotic import Approximation, C, Undecided, approximate

__all__ = ["SYMBOLIC_OPS", "FormalProof", "prove"]

aten = torch.ops.aten


def _relu(z: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda e: (e + sympy.Abs(sympy.factor_terms(e))) / 2, otypes=[object])(z)


def _each(fn: Callable[[Any], Any]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda z, *_, **__: np.vectorize(fn, otypes=[object])(z)


def _number(value: Any) -> sympy.Expr:
    """A literal as an exact rational (1e-05 as 1/100000, as the user wrote it)."""
    return sympy.Rational(repr(float(value)))


def _softmax(z: np.ndarray, dim: int, *_: Any) -> np.ndarray:
    """softmax(z)ᵢ written as 1/Σⱼ exp(zⱼ − zᵢ): the exponents that grow are the ones to drop."""
    rows = np.moveaxis(z, dim, -1)
    out = np.empty_like(rows)
    for index in np.ndindex(rows.shape[:-1]):
        row = rows[index]
        for i, zi in enumerate(row):
            out[(*index, i)] = 1 / sum(sympy.exp(sympy.expand(zj - zi)) for zj in row)
    return np.moveaxis(out, -1, dim)


def _normalize(x: np.ndarray, shape: Sequence[int], eps: sympy.Expr, centre: bool,
               w: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    """(x − mean)/√(spread + eps)·w + b over the last dimensions (no mean without ``centre``)."""
    if any(e.has(sympy.exp, sympy.tanh, sympy.erf) for e in np.ravel(x)):
        # Over exponentials, sympy's automatic evaluation asks costly questions (is it zero?
        # infinite?) that the dominant-term proof answers itself: build the terms as written.
        with sympy.evaluate(False):
            return _normalized(x, shape, eps, centre, w, b, lambda e: e)
    # Common factors out (c among them), so that √(c²·s) = c·√s for every θ and x.
    return _normalized(x, shape, eps, centre, w, b, sympy.factor_terms)


def _normalized(x: np.ndarray, shape: Sequence[int], eps: sympy.Expr, centre: bool,
                w: np.ndarray | None, b: np.ndarray | None,
                factor: Callable[[Any], Any]) -> np.ndarray:
    axes = tuple(range(-len(shape), 0))
    count = int(np.prod(shape))
    centred = x - x.sum(axis=axes, keepdims=True) / count if centre else x
    centred = _each(factor)(centred)
    spread = _each(factor)((centred**2).sum(axis=axes, keepdims=True) / count)
    out = centred / _each(sympy.sqrt)(spread + eps)
    out = out if w is None else out * w
    return out if b is None else out + b


def _layer_norm(x: np.ndarray, shape: Sequence[int], w: np.ndarray | None = None,
                b: np.ndarray | None = None, eps: float = 1e-5, *_: Any) -> np.ndarray:
    return _normalize(x, shape, _number(eps), True, w, b)


def _rms_norm(x: np.ndarray, shape: Sequence[int], w: np.ndarray | None = None,
              eps: float | None = None) -> np.ndarray:
    # eps=None (the input dtype's machine epsilon) is filled in by _evaluate; float32's here.
    eps_value = torch.finfo(torch.float32).eps if eps is None else eps
    return _normalize(x, shape, _number(eps_value), False, w, None)


def _gelu(z: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate != "none":
        raise HomogeneityError(f"formal proofs cover the exact GELU, not approximate={approximate!r}")
    return _each(lambda e: e * (1 + sympy.erf(e / sympy.sqrt(2))) / 2)(z)


def _times(factor: Any, value: Any) -> Any:
    """alpha·value or beta·value of add, sub and addmm, exact (the default 1 leaves it as it is)."""
    return value if factor == 1 else _number(factor) * value


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    out = x @ w.T
    return out if b is None else out + b


SYMBOLIC_OPS: dict[Any, Callable[..., Any]] = {
    aten.linear.default: _linear,
    aten.addmm.default: lambda b, x, w, beta=1, alpha=1: _times(beta, b) + _times(alpha, x @ w),
    aten.mm.default: lambda a, b: a @ b,
    aten.matmul.default: lambda a, b: a @ b,
    aten.t.default: lambda a: a.T,
    aten.transpose.int: lambda a, d0, d1: np.swapaxes(a, d0, d1),
    aten.view.default: lambda a, shape: a.reshape(shape),
    aten.reshape.default: lambda a, shape: a.reshape(shape),
    aten.add.Tensor: lambda a, b, alpha=1: a + _times(alpha, b),
    aten.sub.Tensor: lambda a, b, alpha=1: a - _times(alpha, b),
    aten.mul.Tensor: lambda a, b: a * b,
    aten.neg.default: lambda a: -a,
    aten.relu.default: _relu,
    # dtype= only says where a float sum rounds; the proof is over exact values.
    aten.sum.dim_IntList: lambda a, dims, keepdim=False, dtype=None: a.sum(axis=tuple(dims),
                                                                            keepdims=keepdim),
    aten.div.Tensor: lambda a, b: a / b,
    aten.softmax.int: _softmax,
    aten.tanh.default: _each(sympy.tanh),
    aten.sigmoid.default: _each(lambda e: 1 / (1 + sympy.exp(-e))),
    aten.silu.default: _each(lambda e: e / (1 + sympy.exp(-e))),
    aten.gelu.default: _gelu,
    aten.layer_norm.default: _layer_norm,
    aten.rms_norm.default: _rms_norm,
}
"""The ops a formal proof can evaluate: polynomials, ReLU, and the saturating nonlinearities and
normalizations of a transformer layer."""

_POLYNOMIAL = {aten.linear.default, aten.addmm.default, aten.mm.default, aten.matmul.default,
               aten.t.default, aten.transpose.int, aten.view.default, aten.reshape.default,
               aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.neg.default,
               aten.relu.default, aten.sum.dim_IntList}
"""Ops whose symbolic evaluation for every θ and x stays small enough to expand."""

_NORMS = {aten.layer_norm.default: 4, aten.rms_norm.default: 3}
"""Normalizations and the position of their eps: without eps, evaluated for every θ and x too."""


def _symbolic(program: torch.export.ExportedProgram) -> bool:
    """Whether the graph is polynomial but for ReLU and normalizations without eps."""
    for node in program.graph.nodes:
        if node.op != "call_function" or node.target in _POLYNOMIAL:
            continue
        at = _NORMS.get(node.target)
        if at is None or len(node.args) <= at or node.args[at] not in (0, 0.0):
            return False
    return True


@dataclass(frozen=True)
class FormalProof:
    """What sympy proved about one output.

    Attributes:
        output: the output's readable path.
        degree: the degree the analysis derived (the k of f(x; cθ)/cᵏ).
        residual: 0 when exact; for an asymptotic grade, the entry of f(x; cθ) − cᵏ f(x; θ) that
            is proved nonzero; otherwise the first entry not 0 as written (not simplified).
        grade: the grade proved (``None`` when sympy proved none).
        claimed: the grade the analysis derived.
        limit: for non-exact grades, lim f(x; cθ)/cᵏ entry by entry (the saturated output).
        quantifier: "every θ and x" (symbolic proof) or "the model's θ and these inputs".
        reason: why nothing was proved, when ``grade`` is ``None``.
    """

    output: str
    degree: sympy.Expr
    residual: sympy.Expr
    grade: Grade | None = Grade.EXACT
    claimed: Grade = Grade.EXACT
    limit: tuple[sympy.Expr, ...] = ()
    quantifier: str = "every θ and x"
    reason: str = ""

    @property
    def proved(self) -> bool:
        """Whether the claimed degree and grade hold: the proved grade is at least as strong."""
        return self.grade is not None and self.grade.rank <= self.claimed.rank


def prove(model: nn.Module, *args: torch.Tensor, params: str | Sequence[str] | None = None,
          **kwargs: torch.Tensor) -> list[FormalProof]:
    """Prove (or refute) the degree and grade of each output of a small model with sympy.

    Exactness is proved for every θ and x where the graph is polynomial (ReLU included, and
    normalizations without eps). Other graphs, and non-exact polynomial ones, are proved at the
    model's θ and the given inputs, for every large c: the limit of f(x; cθ)/cᵏ by its dominant
    terms, and whether the rest vanishes like a power of 1/c (asymptotic) or exponentially
    (approximate). A degree whose limit is infinite or zero is refuted; an expression the
    dominant-term argument does not cover is left unproved (``grade`` ``None``, with the reason).

    Raises:
        HomogeneityError: the graph uses an op outside :data:`SYMBOLIC_OPS`.

    >>> mlp = nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU(), nn.Linear(2, 1, bias=False))
    >>> [(p.degree, str(p.grade), p.proved) for p in prove(mlp, torch.randn(1, 2))]
    [(2, 'exact', True)]
    >>> biased = nn.Sequential(nn.Linear(1, 1, bias=False), nn.ReLU(), nn.Linear(1, 1))
    >>> for weight in biased.parameters():
    ...     _ = nn.init.constant_(weight, 0.5)
    >>> [(p.degree, str(p.grade), p.proved, p.limit) for p in prove(biased, torch.ones(1, 1))]
    [(2, 'asymptotic', True, (1/4,))]
    """
    program = export_model(model, args, kwargs)
    report = analyze_program(program, params=params)
    param_of = parameter_names(program)
    scaled = select_parameters(param_of.values(), params)
    targets = {n.target for n in program.graph.nodes if n.op == "call_function"}
    unknown = sorted(target_name(t) for t in targets - set(SYMBOLIC_OPS))
    if unknown:
        raise HomogeneityError(f"formal proofs cover {sorted(target_name(t) for t in SYMBOLIC_OPS)}; "
                               f"the graph uses {', '.join(unknown)}")
    polynomial = targets <= _POLYNOMIAL
    symbolic: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None
    if polynomial:
        symbolic = (_evaluate(program, param_of, scaled, 1), _evaluate(program, param_of, scaled, C))
    concrete: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None
    proofs = []
    for name, label in output_names(program).items():
        degree, claimed = report.outputs[name].value, report.outputs[name].grade
        if degree is sympy.nan:
            continue
        if symbolic is not None:
            residual = _first_nonzero(_residual(*symbolic, label, degree))
            if residual == 0:
                proofs.append(FormalProof(name, degree, residual, Grade.EXACT, claimed))
                continue
        if concrete is None:
            values = _concrete_values(program, param_of, args, kwargs)
            concrete = (_evaluate(program, param_of, scaled, 1, values),
                        _evaluate(program, param_of, scaled, C, values))
        proof = _grade_proof(name, degree, claimed, *concrete, label)
        if proof.grade is Grade.EXACT and not polynomial and _symbolic(program):
            # Exact at θ: normalizations without eps may be exact for every θ and x as well.
            symbolic = symbolic or (_evaluate(program, param_of, scaled, 1),
                                    _evaluate(program, param_of, scaled, C))
            if _first_nonzero(_residual(*symbolic, label, degree), simplify=False) == 0:
                proof = FormalProof(name, degree, sympy.Integer(0), Grade.EXACT, claimed)
        proofs.append(proof)
    return proofs


def _residual(plain: dict[str, np.ndarray], grown: dict[str, np.ndarray], label: str,
              degree: Any) -> np.ndarray:
    return np.vectorize(lambda a, b: sympy.expand(a - C**degree * b),
                        otypes=[object])(grown[label], plain[label])


def _first_nonzero(residual: np.ndarray, simplify: bool = True) -> sympy.Expr:
    """The first entry not proved 0 (by ``simplify``, or by expansion alone: cheaper on square
    roots, where a 0 that only ``simplify`` would find is left to the concrete proof)."""
    zero = sympy.simplify if simplify else sympy.expand
    return next((r for r in np.ravel(residual) if zero(r) != 0), sympy.Integer(0))


def _grade_proof(name: str, degree: Any, claimed: Grade, plain: dict[str, np.ndarray],
                 grown: dict[str, np.ndarray], label: str) -> FormalProof:
    """The grade of one output at concrete θ and x, by the dominant terms of f(x; cθ)/cᵏ in c.

    Each entry is split by :func:`~homogeneity.verify.asymptotic.approximate` into an algebraic
    main part (a series in 1/c with exact coefficients) and a rest below exp(−r·c). Its limit is
    the main part's constant term; a first nonzero term c⁻ʲ after it makes the output asymptotic
    (and not exact: f(x; cθ)/cᵏ is not constant); otherwise only the exponentially small rest is
    left, and the output is approximate (or exact, when f(x; cθ) − cᵏ f(x; θ) is 0 for every c).
    """
    here = "the model's θ and these inputs"
    entries, bases = np.ravel(grown[label]), np.ravel(plain[label])
    cache: dict[sympy.Expr, Approximation] = {}
    try:
        found = [approximate(e / C**degree, cache) for e in entries]
        ends = [_limit_and_rest(f) for f in found]
    except Undecided as err:
        return FormalProof(name, degree, _unsimplified(entries, bases, degree), None, claimed,
                           (), here, f"the dominant-term proof does not apply: {err}")
    limits = tuple(limit for limit, _ in ends)
    if not all(v.is_finite for v in limits) or all(v == 0 for v in limits):
        return FormalProof(name, degree, _unsimplified(entries, bases, degree), None, claimed,
                           limits, here, f"f(x; cθ)/c^{degree} tends to {list(limits)}: not "
                           f"degree {degree}")
    rests = [(power, i) for i, (_, power) in enumerate(ends) if power is not None]
    if rests:  # the entry with the slowest rest c⁻ʲ is not constant in c: not exact
        _, index = min(rests)
        residual = entries[index] - C**degree * bases[index]
        return FormalProof(name, degree, residual, Grade.ASYMPTOTIC, claimed, limits, here)
    if all(f.rate is None for f in found):  # f(x; cθ) = cᵏ·limit for every large c: exact?
        residual = _first_nonzero(_residual(plain, grown, label, degree))
        grade = Grade.EXACT if residual == 0 else Grade.APPROXIMATE
        return FormalProof(name, degree, residual, grade, claimed, limits, here)
    return FormalProof(name, degree, _unsimplified(entries, bases, degree), Grade.APPROXIMATE,
                       claimed, limits, here)


def _limit_and_rest(found: Approximation) -> tuple[sympy.Expr, Fraction | None]:
    """lim g(c) and the power j of the main part's first term after it (g − lim g ~ a·c⁻ʲ), or
    ``None`` when the main part is its limit exactly (only an exponentially small rest)."""
    terms, order = found.main.terms, found.main.order
    if terms and terms[0][0] < 0:
        return sympy.oo * sympy.sign(terms[0][1]), None
    if order is not None and order <= 0:
        raise Undecided("the main part's limit is beyond the expansion's precision")
    limit = next((v for e, v in terms if e == 0), sympy.Integer(0))
    after = next((e for e, _ in terms if e > 0), None)
    if after is None and order is not None:
        raise Undecided(f"the rest after the limit is below c^-{order}: beyond the expansion's "
                        "precision")
    return limit, after


def _unsimplified(entries: np.ndarray, bases: np.ndarray, degree: Any) -> sympy.Expr:
    """The first entry of f(x; cθ) − cᵏ f(x; θ) that is not 0 as written (not simplified)."""
    return next((r for r in (e - C**degree * b for e, b in zip(entries, bases)) if r != 0),
                sympy.Integer(0))


def _concrete_values(program: torch.export.ExportedProgram, param_of: dict[str, str],
                     args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each placeholder's value as exact rationals: parameters from the model, inputs as given."""
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    users = [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    if len(users) != len(inputs):
        raise HomogeneityError(f"expected {len(users)} tensor inputs for a concrete proof, got "
                               f"{len(inputs)}")
    tensors = {**{node: program.state_dict[name] for node, name in param_of.items()},
               **dict(zip(users, inputs))}
    return {node: _rationals(t) for node, t in tensors.items()}


def _rationals(tensor: torch.Tensor) -> np.ndarray:
    flat = [sympy.Rational(float(v)) for v in tensor.detach().double().flatten().tolist()]
    return np.array(flat, dtype=object).reshape(tuple(tensor.shape))


def _evaluate(program: torch.export.ExportedProgram, param_of: dict[str, str], scaled: set[str],
              scale: Any, values: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every node's value as an object array of sympy expressions (symbols unless ``values``)."""
    env: dict[str, Any] = {}
    for node in program.graph.nodes:
        if node.op == "placeholder":
            # Named by the placeholder, unique in the graph: parameters "a.b" and "a_b", or a
            # parameter and an input both called x, are different symbols (and only the
            # parameter is scaled).
            name = param_of.get(node.name)
            entries = values[node.name] if values is not None else _symbols(
                node.name, tuple(node.meta["val"].shape))
            env[node.name] = entries * scale if name in scaled else entries
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
            if node.target is aten.rms_norm.default and (args[3:4] or (None,))[0] is None:
                # eps=None is the input dtype's machine epsilon.
                args = (*args[:3], *[None] * (3 - len(args)),
                        torch.finfo(node.args[0].meta["val"].dtype).eps)
            env[node.name] = np.asarray(SYMBOLIC_OPS[node.target](*args, **kwargs), dtype=object)
    return env


def _symbols(prefix: str, shape: tuple[int, ...]) -> np.ndarray:
    flat = [sympy.Symbol(f"{prefix}_{i}", real=True) for i in range(int(np.prod(shape)))]
    return np.array(flat, dtype=object).reshape(shape)
