"""Fuzz of the public Python API: every function and class in the three packages' ``__all__``.

Each is called with arguments drawn from a mix of sensible values and junk (negative, NaN, ±inf,
huge, complex, wrong types, bare strings, ragged lists, tensors of odd shapes and dtypes, a model
on the meta device). The call must return, or raise its package's own exception: a TypeError,
ValueError, IndexError or RuntimeError escaping from deep inside torch is a bug, because the
caller cannot tell it from one. Claims may also raise AssertionError, which is their answer.

What each call returned is checked where a documented invariant exists (hardmax rows sum to 1 or
are all zero, a similarity is a cosine in [-1, 1]).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import empirical
import empirical.claims
import homogeneity
import saturated
from empirical.errors import EmpiricalError
from empirical.models.loading import load_model
from homogeneity.errors import HomogeneityError
from saturated.errors import SaturationError

ERRORS = {"homogeneity": HomogeneityError, "saturated": SaturationError, "empirical": EmpiricalError}

# Never called with junk: they change global state (the rule tables, hypothesis' profiles), build
# base-size models or train, or are types and constants rather than functions.
SKIPPED = {
    "homogeneity": {"RULES", "K", "Grade", "HomogeneityError", "register_rule"},
    "saturated": {"RULES", "SaturationError", "register_rule", "SaturatedOutput"},
    "empirical": {"MODEL_NAMES", "EmpiricalError", "train", "SimilarityResult", "HeadAtlas"},
    "empirical.claims": {"PROFILE", "register_profile", "profile"},
}


_TINY: list[tuple[nn.Module, Any]] = []


@pytest.fixture(scope="module", autouse=True)
def _load_tiny(tiny_bert_dir: Path) -> None:
    """The conftest's two-layer BERT of width 16, with the packaged MiniLM tokenizer."""
    _TINY.append(load_model(tiny_bert_dir))


def tiny() -> tuple[nn.Module, Any]:
    return _TINY[0]


@cache
def meta_linear() -> nn.Module:
    with torch.device("meta"):
        return nn.Linear(3, 2)


NUMBERS = st.one_of(
    st.integers(-3, 5), st.sampled_from([0.0, 0.5, 1.0, 2.0, 1000.0, -1.0, 1.5, 2**63, 2**64, 1e300]),
    st.floats(allow_nan=True, allow_infinity=True), st.just(True),
    st.complex_numbers(max_magnitude=10, allow_nan=False),
)
STRINGS = st.sampled_from(["", "x", "1e3", "nan", "inf", "embeddings", "layer 1", "raise", "minilm/"])
TENSORS = st.builds(
    lambda shape, dtype: torch.ones(shape).to(dtype),
    st.lists(st.integers(0, 3), max_size=3).map(tuple),
    st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64]),
)
MODELS = st.sampled_from(["tiny", "linear", "meta"]).map(
    lambda kind: tiny()[0] if kind == "tiny" else nn.Linear(3, 2).eval() if kind == "linear"
    else meta_linear())
JUNK = st.one_of(
    st.none(), NUMBERS, STRINGS, TENSORS, MODELS,
    st.lists(st.one_of(st.integers(-2, 40000), st.floats(-2, 2)), max_size=4),
    st.lists(st.lists(st.integers(0, 2000), max_size=3), max_size=3),  # ragged token ids
    st.lists(STRINGS, max_size=3),
    st.just({"input_ids": torch.ones(1, 3, dtype=torch.long)}),
    st.sampled_from([object(), (1, 2), {"a": 1}]),
)


def public(module: Any, package: str) -> list[tuple[str, Callable[..., Any]]]:
    skipped = SKIPPED.get(module.__name__, set())
    return [(f"{module.__name__}.{name}", getattr(module, name)) for name in module.__all__
            if name not in skipped and callable(getattr(module, name))
            and not (inspect.isclass(getattr(module, name))
                     and issubclass(getattr(module, name), BaseException))]


TARGETS = [(name, fn, ERRORS[package]) for module, package in
           ((homogeneity, "homogeneity"), (saturated, "saturated"), (empirical, "empirical"),
            (empirical.claims, "empirical")) for name, fn in public(module, package)]


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        return [p for p in inspect.signature(fn).parameters.values()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _check_result(name: str, result: Any) -> None:
    """Documented invariants of what some calls return."""
    if name == "saturated.hardmax" and result.numel():
        sums = result.sum(-1)
        assert bool(((sums - 1).abs() < 1e-5).logical_or(sums == 0).all()), result
        assert bool((result >= 0).all())
    if name == "empirical.representation_similarity":
        assert all(-1 - 1e-9 <= value <= 1 + 1e-9 for value in result.per_layer)


# Functions that trace or run the model on every valid call (about a second each): fewer examples.
TRACING = {"homogeneity.analyze", "homogeneity.block_degree_map", "homogeneity.certify",
           "homogeneity.check_certificate", "homogeneity.export_model", "saturated.saturate",
           "saturated.SaturatedModel", "empirical.head_atlas", "empirical.representation_similarity",
           "empirical.claims.assert_homogeneous", "empirical.claims.assert_saturated",
           "empirical.claims.assert_matches"}
FEW = max(4, settings.default.max_examples // 5)


def _call_with_drawn_arguments(name: str, fn: Callable[..., Any], error: type[Exception],
                               data: Any) -> None:
    params = _parameters(fn)
    # A tokenizer is the caller's own code: it is always the tiny model's, everything else is drawn.
    args, kwargs = [], {}
    for param in params:
        # Optional parameters are left at their defaults half the time, so valid calls happen too.
        if param.default is not param.empty and data.draw(st.booleans(), label=f"skip {param.name}"):
            continue
        value = tiny()[1] if param.name == "tokenizer" else data.draw(JUNK, label=param.name)
        if param.kind == param.KEYWORD_ONLY or param.default is not param.empty:
            kwargs[param.name] = value
        else:
            args.append(value)
    allowed: tuple[type[BaseException], ...] = (error,)
    if name.startswith("empirical.claims.assert_"):
        allowed += (AssertionError,)
    try:
        result = fn(*args, **kwargs)
    except allowed:
        return
    _check_result(name, result)


QUICK = [target for target in TARGETS if target[0] not in TRACING]
SLOW = [target for target in TARGETS if target[0] in TRACING]


@pytest.mark.parametrize(("name", "fn", "error"), QUICK, ids=[t[0] for t in QUICK])
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_public_call_returns_or_raises_its_package_error(name: str, fn: Callable[..., Any],
                                                          error: type[Exception], data: Any) -> None:
    _call_with_drawn_arguments(name, fn, error, data)


@pytest.mark.parametrize(("name", "fn", "error"), SLOW, ids=[t[0] for t in SLOW])
@settings(max_examples=FEW, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_tracing_call_returns_or_raises_its_package_error(name: str, fn: Callable[..., Any],
                                                           error: type[Exception], data: Any) -> None:
    _call_with_drawn_arguments(name, fn, error, data)


@given(scores=st.lists(st.sampled_from([-math.inf, -1.0, 0.0, 2.0, math.inf]), min_size=1, max_size=5),
       rtol=st.one_of(st.none(), st.floats(0, 1)))
def test_hardmax_weights_only_maximal_unmasked_positions(scores: list[float], rtol: float | None) -> None:
    """Weights are uniform over the positions with the maximal score, nowhere else; a row whose
    scores are all −∞ (masked by its scores) is all zeros."""
    row = torch.tensor(scores, dtype=torch.float64)
    weights = saturated.hardmax(row, rtol=rtol)
    top = max(scores)
    if top == -math.inf:
        assert weights.tolist() == [0.0] * len(scores)
        return
    tied = [s == top or (rtol is not None and math.isfinite(top) and s >= top - rtol * max(
        abs(v) for v in scores if math.isfinite(v))) for s in scores]
    expected = [1 / sum(tied) if t else 0.0 for t in tied]
    assert weights.tolist() == pytest.approx(expected)
