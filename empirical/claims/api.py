"""Claims about a real model, as checkers for hypothesis property tests.

Each checker measures one claim on one input and raises an ``AssertionError`` carrying the numbers
when it does not hold, so that under ``@given`` hypothesis reports the simplest falsifying input:

- :func:`assert_homogeneous`: f(x; c·θ) scales with the claimed degree and grade (float64);
- :func:`assert_saturated`: every hidden state at c·θ is within ``eps`` (1 − cos) of the exact limit;
- :func:`assert_matches`: a saturated reference network agrees with a model, layer by layer.

Bad input (a model in training mode, a scale below 1) raises :class:`~empirical.errors.EmpiricalError`.
The strategies and the hypothesis profile come from :mod:`empirical.claims.strategies`, re-exported here.

>>> from empirical.models.loading import load_model
>>> model, tokenizer = load_model("minilm", num_layers=1)
>>> ids = tokenizer("The cat sat.")["input_ids"]
>>> assert_saturated(model, ids, scale=1e5, eps=1e-3)
>>> assert_saturated(model, ids, scale=1.0, eps=1e-3)  # doctest: +ELLIPSIS
Traceback (most recent call last):
AssertionError: not saturated to eps=0.001 at c=1: embeddings 1 − cos = ...
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch import nn

from empirical.claims.strategies import (
    PROFILE,
    profile,
    register_profile,
    scales,
    sentences,
    special_tokens,
    token_sequences,
)
from empirical.errors import EmpiricalError
from empirical.measure.pipeline import forward, layer_labels, token_cosines
from empirical.measure.scaled import check_scale, limit_model
from empirical.models.batching import Batch, TokenizedCorpus, check_token_ids, hidden_states, make_batches
from empirical.validation import check_list, check_measurable, check_real, check_token_rows
from homogeneity import Degree, Grade, analyze
from homogeneity.errors import HomogeneityError
from homogeneity.report import HomogeneityReport
from homogeneity.validation import describe
from homogeneity.verify import check_scaling
from saturated import SaturatedModel, SaturationError, Settings, compare_layers

__all__ = [
    "PROFILE",
    "assert_homogeneous",
    "assert_matches",
    "assert_saturated",
    "model_batch",
    "profile",
    "register_profile",
    "scales",
    "sentences",
    "special_tokens",
    "token_sequences",
]

Inputs = Mapping[str, torch.Tensor] | Sequence[int] | Sequence[Sequence[int]]

# How firmly each measured decay holds (homogeneity.verify.classify_decay): a claim holds when the
# measurement is at least as firm as the claimed grade predicts (an exact output is also asymptotic).
_FIRMNESS = {"exact": 3, "exponential": 2, "polynomial": 1, "not homogeneous": 0}
_EXPECTED = {Grade.EXACT: "exact", Grade.APPROXIMATE: "exponential", Grade.ASYMPTOTIC: "polynomial"}

# A few recent models' exact limits and analyses, so that repeated claims on inputs of one shape
# export the model once, and the name of each model's main output, so that a claim that states its
# degree and grade needs no export at all. Entries hold their model, so an id is never reused while
# cached; keys carry the parameters' versions, so a model changed in place is analysed afresh.
_CACHE_SIZE = 4
_limits: OrderedDict[tuple[Any, ...], SaturatedModel] = OrderedDict()
_analyses: OrderedDict[tuple[Any, ...], HomogeneityReport] = OrderedDict()
_main_outputs: OrderedDict[tuple[Any, ...], str] = OrderedDict()


def _model_key(model: nn.Module) -> tuple[Any, ...]:
    """The model's identity and the version of each parameter and buffer (bumped by in-place edits)."""
    return (id(model), tuple((t.data_ptr(), t._version)
                             for t in [*model.parameters(), *model.buffers()]))


def _remember(cache: OrderedDict[Any, Any], key: Any, make: Any) -> Any:
    if key in cache:
        cache.move_to_end(key)
    else:
        cache[key] = make()
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return cache[key]


def _check_eval(model: nn.Module) -> None:
    check_measurable(model, "a claim (it runs the model)")
    if model.training:
        raise EmpiricalError(
            f"expected {type(model).__name__} in eval() mode; in training mode dropout makes every "
            "forward pass random, so no claim about it can be checked (call model.eval())"
        )


def model_batch(model: nn.Module, inputs: Inputs) -> Batch:
    """Model keyword inputs and real-token masks for token ids (one sequence or several) or for a
    mapping of keyword tensors, on the model's device.

    Token ids go through :func:`empirical.models.batching.make_batches`, so encoder–decoder models get
    their decoder inputs the same way as in every corpus measurement.

    Raises:
        EmpiricalError: no tokens, a mapping without ``input_ids``, or token ids beyond the
            model's embedding table.
    """
    check_measurable(model, "a claim (it runs the model)")
    device = next(model.parameters(), torch.empty(0)).device
    if isinstance(inputs, Mapping):
        if "input_ids" not in inputs:
            raise EmpiricalError(f"expected input_ids among the model inputs, got {sorted(inputs)}")
        ids = inputs["input_ids"]
        check_token_ids(model, ids)
        mask = inputs.get("attention_mask", torch.ones_like(ids)).bool()
        decoder = inputs.get("decoder_input_ids")
        stacks: tuple[tuple[str, torch.Tensor], ...] = (("", mask),) if decoder is None else (
            ("encoder", mask),
            ("decoder", inputs.get("decoder_attention_mask", torch.ones_like(decoder)).bool()))
        return Batch({k: v.to(device) for k, v in inputs.items()},
                     tuple((name, m.to(device)) for name, m in stacks), tuple(range(len(ids))))
    rows = check_token_rows(inputs)
    if not rows or any(len(r) == 0 for r in rows):
        raise EmpiricalError(f"expected one or more non-empty token id sequences, got {inputs!r}")
    corpus = TokenizedCorpus(tuple(tuple(r) for r in rows), 0, max(map(len, rows)))
    return next(make_batches(model, None, corpus, batch_size=len(rows), device=device))


def _limit(model: nn.Module) -> SaturatedModel:
    return _remember(_limits, _model_key(model), lambda: limit_model(model, Settings()))


def _outputs_at(model: nn.Module, scale: float, *args: Any, **kwargs: Any) -> Any:
    """``model(*args, **kwargs)`` at c·θ in float64, without modifying it; for c = ∞, the exact
    limit's outputs (each normalized by its degree in c, which leaves every cosine unchanged).

    float64 because at c = 10⁶ a float32 LayerNorm overflows: its variance grows like c⁶.
    """
    if math.isinf(scale):
        try:
            return _limit(model)(*args, **kwargs).value
        except SaturationError as err:
            raise EmpiricalError(f"the exact limit (c = ∞) is not available: {err}") from err
    with torch.no_grad():
        state = {name: t.double() if t.is_floating_point() else t.clone()
                 for name, t in model.named_buffers()}
        state |= {name: p.detach().double() * scale for name, p in model.named_parameters()}
    wide = pytree.tree_map_only(torch.Tensor, lambda t: t.double() if t.is_floating_point() else t,
                                (args, kwargs))
    return torch.func.functional_call(model, state, wide[0], wide[1], strict=False)


def assert_saturated(model: nn.Module, inputs: Inputs, scale: float, eps: float,
                     layers: Sequence[int | str] | None = None) -> None:
    """Claim: at c·θ every hidden state is within ``eps`` of the exact limit's.

    Per hidden state h (embeddings first), the gap is 1 − cos(h(x; c·θ), s-h(x; θ)) averaged over
    the real tokens, the measure of :func:`empirical.measure.convergence.limit_convergence`; the limit is
    :func:`saturated.saturate`'s, exact.

    Args:
        model: a Hugging Face transformer in eval mode (never modified).
        inputs: token ids (one sequence or several) or the model's keyword tensors.
        scale: c ≥ 1.
        eps: the largest gap allowed.
        layers: the hidden states to check, by index or label (default: all).

    Raises:
        AssertionError: a checked layer's gap exceeds ``eps``; the message lists every gap.
        EmpiricalError: a model in training mode, c < 1, eps < 0, unknown layers, or a limit that
            is not determined on these inputs.
    """
    _check_eval(model)
    c = check_scale(scale)
    eps = check_real(eps, "eps (a bound on 1 − cos)", low=0)
    claimed = _claimed_layers(layers, "layer indices or labels")
    batch = model_batch(model, inputs)

    def run(at: float) -> Any:
        return lambda **kw: _outputs_at(model, at, **kw)

    with torch.inference_mode():
        target = forward(model, batch.inputs, run(math.inf))
        grown = forward(model, batch.inputs, run(c))
    gaps: dict[str, float] = {}
    for stack, mask in batch.stacks:
        ours, limit = hidden_states(grown, stack, model), hidden_states(target, stack, model)
        for label, a, b in zip(layer_labels(stack, len(ours)), ours, limit):
            gaps[label] = float(1 - token_cosines(a, b, mask).mean())
    chosen = _choose(list(gaps), claimed)
    if any(not gaps[label] <= eps for label in chosen):  # NaN fails too
        listed = ", ".join(f"{label} 1 − cos = {gaps[label]:.3e}" for label in chosen)
        raise AssertionError(f"not saturated to eps={eps:g} at c={c:g}: {listed}")


def _claimed_layers(layers: Any, what: str) -> list[Any] | None:
    """``layers`` as a non-empty list, or None (every layer): a claim about no layer would hold
    whatever the model computes, and a bare string would be read letter by letter."""
    if layers is None:
        return None
    chosen = check_list(layers, "layers", what)
    if not chosen:
        raise EmpiricalError(f"expected at least one layer to check, got layers={layers!r} "
                             "(None checks them all)")
    return chosen


def _choose(labels: list[str], layers: Sequence[int | str] | None) -> list[str]:
    if layers is None:
        return labels
    chosen = []
    for layer in layers:
        if isinstance(layer, int) and not isinstance(layer, bool) and -len(labels) <= layer < len(labels):
            chosen.append(labels[layer])
        elif layer in labels:
            chosen.append(str(layer))
        else:
            raise EmpiricalError(f"expected layers among {labels} (or their indices), got {layer!r}")
    return chosen


def _signature(inputs: Mapping[str, torch.Tensor]) -> tuple[Any, ...]:
    return tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(inputs.items()))


def assert_homogeneous(model: nn.Module, inputs: Inputs, degree: int | sympy.Expr | None = None,
                       grade: Grade | str | None = None, params: str | Sequence[str] | None = None,
                       *, output: str | None = None) -> None:
    """Claim: the output scales like f(x; c·θ) ≈ cᵏ f(x; θ) with the claimed degree k and grade.

    f(x; c·θ)/cᵏ is measured in float64 at c = 1, 2, 4, …, 1024
    (:func:`homogeneity.verify.check_scaling`) and its relative change per doubling classified: an
    ``exact`` claim needs no change beyond rounding at any scale; ``approximate`` needs the change
    to vanish exponentially and ``asymptotic`` at least polynomially as c grows. An approximate or
    asymptotic claim that has not settled by c = 1024 (an input near a tie) is measured again at
    larger c, up to 2⁴⁰. A firmer measurement than claimed holds (an exact output is also
    asymptotic); a wrong degree k' makes f(cθ)/cᵏ grow or shrink by a steady 2^(k' − k) per
    doubling, which fails under any grade and is named in the message (measured degree ≈ k'),
    for approximate and asymptotic claims once it has held out to c = 2²⁰.

    Args:
        model: any model :func:`homogeneity.analyze` traces, in eval mode (never modified).
        inputs: token ids (one sequence or several) or the model's keyword tensors.
        degree: the claimed k (default: the one :func:`homogeneity.analyze` derives).
        grade: the claimed grade (default: the derived one).
        params: the parameters that scale (names or glob patterns; default all).
        output: the output the claim is about (default: ``last_hidden_state`` or the first).

    Raises:
        AssertionError: the measured decay is weaker than the claim; the message has the changes.
        EmpiricalError: a model in training mode, an unknown output, or an output without a degree.
    """
    _check_eval(model)
    if output is not None and not isinstance(output, str):
        raise EmpiricalError(f"expected output to be the name of an output, got {describe(output)}")
    batch = model_batch(model, inputs)
    try:
        derived = None
        model_key = (*_model_key(model), repr(params))
        if output is None and degree is not None and grade is not None:
            output = _main_outputs.get(model_key)  # known from an earlier analysis: no export
        if degree is None or grade is None or output is None:
            key = (*model_key, _signature(batch.inputs))
            derived = _remember(_analyses, key, lambda: analyze(model, params=params, **batch.inputs))
            _remember(_main_outputs, model_key, lambda: derived.main_output)
        name = output or derived.main_output  # type: ignore[union-attr]
        if derived is not None and name not in derived.outputs:
            raise EmpiricalError(f"expected output among {sorted(derived.outputs)}, got {name!r}")
        found = derived.outputs[name] if derived is not None else None
        try:
            k = sympy.sympify(degree) if degree is not None else found.value  # type: ignore[union-attr]
            g = Grade(grade) if grade is not None else found.grade  # type: ignore[union-attr]
        except (sympy.SympifyError, TypeError, ValueError) as err:
            raise EmpiricalError(f"expected degree as a number or an expression in k and grade as one "
                                 f"of {[g.value for g in Grade]}, got {degree!r:.40} and {grade!r:.40}"
                                 ) from err
        if g is Grade.NONE or not isinstance(k, sympy.Expr) or not k.is_number or k is sympy.nan:
            why = f" ({found.cases[0].reason})" if found is not None and found.cases else ""
            raise EmpiricalError(f"output {name!r} has no degree to check: {k}, grade {g}{why}")
        claimed = HomogeneityReport(outputs={name: Degree.of(k, g)}, nodes=[], modules=[])
        checks = check_scaling(model, params=params, report=claimed, **dict[str, Any](batch.inputs))
    except HomogeneityError as err:
        raise EmpiricalError(f"cannot check homogeneity: {err}") from err
    if not checks:
        raise EmpiricalError(f"the model returned no floating-point output {name!r}")
    check = checks[0]
    # Anything else check_scaling may report (an undecided measurement) does not confirm a claim.
    if _FIRMNESS.get(check.measured, 0) < _FIRMNESS[_EXPECTED[g]]:
        changes = ", ".join(f"{ch:.2e}" for ch in check.changes)
        raise AssertionError(
            f"{name}: claimed degree {k} ({g}: {_EXPECTED[g]} decay of f(cθ)/c^{k}), measured "
            f"{check.measured}; relative change per doubling of c from 1 to {check.scales[-1]:g}: "
            f"{changes} (a steady change near |1 − 2^−Δk| means the degree is off by Δk)"
        )


def _per_layer(output: Any) -> tuple[torch.Tensor, ...]:
    """A network's per-layer outputs: its hidden states, its tensor output, or its tuple of tensors."""
    states = getattr(output, "hidden_states", None)
    if states is None and isinstance(output, Mapping):
        states = output.get("hidden_states")
    if states:
        return tuple(states)
    if isinstance(output, torch.Tensor):
        return (output,)
    if isinstance(output, Sequence) and output and all(isinstance(t, torch.Tensor) for t in output):
        return tuple(output)
    raise EmpiricalError(
        f"expected a tensor, a sequence of per-layer tensors or an output with hidden_states, got "
        f"{type(output).__name__}"
    )


def _call(what: str, network: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``network(*args, **kwargs)``; a network that refuses these inputs is bad input to the claim."""
    try:
        return network(*args, **kwargs)
    except (EmpiricalError, SaturationError):
        raise
    except Exception as err:
        raise EmpiricalError(f"{what} raised {type(err).__name__} on the inputs given: "
                             f"{str(err).splitlines()[0] if str(err) else ''}") from err


def assert_matches(reference: nn.Module, model: nn.Module, inputs: Any,
                   layers: Sequence[int] | None = None, eps: float = 1e-6,
                   scale: float = math.inf) -> None:
    """Claim: a saturated reference network computes what ``model`` computes at c·θ (default: its
    exact c → ∞ limit), layer by layer.

    Both networks are called on ``inputs``; their per-layer outputs (hidden states, or the output
    itself) are compared by :func:`saturated.compare_layers`, the mean cosine over positions (the
    real tokens when the inputs have an ``attention_mask``).

    Args:
        reference: the saturated reference (e.g. from :mod:`saturated.modules`), a callable.
        model: the ordinary network, in eval mode (never modified).
        inputs: a tensor, a tuple of positional tensors, or a mapping of keyword tensors.
        layers: the per-layer outputs to compare, by index (default: all).
        eps: the largest 1 − cos allowed per layer.
        scale: the model's c ≥ 1, or ∞ for its exact limit.

    Raises:
        AssertionError: a layer differs by more than ``eps``; the message lists every cosine.
        EmpiricalError: a model in training mode, c < 1, different layer counts or shapes.
    """
    _check_eval(model)
    c = check_scale(scale)
    eps = check_real(eps, "eps (a bound on 1 − cos)", low=0)
    layers = _claimed_layers(layers, "layer indices")
    for index in layers or ():
        if isinstance(index, bool) or not isinstance(index, int):  # True would silently be layer 1
            raise EmpiricalError(f"expected layer indices (integers), got {index!r} in layers={layers!r}")
    args, kwargs = ((), dict(inputs)) if isinstance(inputs, Mapping) else (
        (tuple(inputs) if isinstance(inputs, tuple) else (inputs,)), {})
    if isinstance(kwargs.get("input_ids"), torch.Tensor):
        check_token_ids(model, kwargs["input_ids"])
    if not callable(reference):
        raise EmpiricalError(f"expected the reference to be callable (a network), got {describe(reference)}")
    with torch.inference_mode():
        ours = _per_layer(_call("the reference", reference, args, kwargs))
        theirs = _per_layer(_call("the model", lambda *a, **k: _outputs_at(model, c, *a, **k), args, kwargs))
    mask = kwargs.get("attention_mask")
    indices = list(range(len(ours))) if layers is None else list(layers)
    try:
        found = compare_layers([ours[i] for i in indices], [theirs[i] for i in indices],
                               None if mask is None else mask.bool())
    except (IndexError, TypeError, SaturationError) as err:
        raise EmpiricalError(f"cannot compare the reference ({len(ours)} layers) with the model "
                             f"({len(theirs)} layers) at layers {indices}: {err}") from err
    if any(not 1 - cos <= eps for cos in found.cosines):
        listed = ", ".join(f"layer {i} cos = {cos:.6f}" for i, cos in zip(indices, found.cosines))
        raise AssertionError(f"the reference differs from the model at c={c:g} by more than "
                             f"eps={eps:g} (1 − cos): {listed}")
