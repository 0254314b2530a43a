"""Every public numeric argument is validated where it enters, with the package's own exception.

A table lists the public API's numeric parameters with the kind of number each takes; hypothesis
draws bad values of that kind (negative, NaN, ±inf, huge, fractional, wrong types) and each must be
refused by the right exception, naming the parameter. Good values of each kind pass the same check.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import saturated
from empirical import NormTracker, TrainConfig, load_corpus, load_model, representation_similarity
from empirical.claims import assert_saturated, scales, token_sequences
from empirical.errors import EmpiricalError
from empirical.measure.heads import Thresholds, head_atlas
from empirical.training.checkpoints import order_checkpoints
from homogeneity import GraphBuilder
from homogeneity.errors import HomogeneityError
from homogeneity.validation import check_integer, check_number
from saturated.errors import SaturationError

WRONG_TYPES = st.sampled_from(["1", "inf", b"2", [1.0], (2,), {"a": 1}, 1 + 0j, object(), True])
NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
FRACTIONS = st.floats(0.01, 1e6).filter(lambda x: not x.is_integer())
HUGE_INTEGERS = st.integers(2**63, 2**80)

# None is left out: it is the default "not given" of many of these parameters.
BAD = {
    # a tolerance: a finite real ≥ 0
    "tolerance": st.one_of(st.floats(max_value=-1e-300), NOT_FINITE, WRONG_TYPES),
    # a count: an int ≥ 1 (fractions refused, not truncated)
    "count": st.one_of(st.integers(max_value=0), FRACTIONS, st.just(2.0), NOT_FINITE, WRONG_TYPES),
    # a seed: an int in [0, 2⁶³ − 1]
    "seed": st.one_of(st.integers(max_value=-1), HUGE_INTEGERS, FRACTIONS, WRONG_TYPES),
    # a step: an int ≥ 0
    "step": st.one_of(st.integers(max_value=-1), FRACTIONS, NOT_FINITE, WRONG_TYPES),
    # a scale: a real c ≥ 1 or +∞
    "scale": st.one_of(st.floats(max_value=0.999), st.just(-math.inf), st.just(math.nan), WRONG_TYPES),
    # a positive finite real
    "positive": st.one_of(st.floats(max_value=0), NOT_FINITE, WRONG_TYPES),
    # a fraction in (0, 1)
    "open unit": st.one_of(st.floats(max_value=0), st.floats(min_value=1), NOT_FINITE, WRONG_TYPES),
}
GOOD = {"tolerance": [0, 1e-6, 0.5], "count": [1, 3], "seed": [0, 2**63 - 1], "step": [0, 7],
        "scale": [1, 1e3, math.inf], "positive": [1e-4, 3.0], "open unit": [1e-3, 0.5]}


def _tiny() -> tuple[nn.Module, Any]:
    return _TINY[0]


_TINY: list[tuple[nn.Module, Any]] = []


@pytest.fixture(scope="module", autouse=True)
def _load_tiny(tiny_bert_dir: Path) -> None:
    _TINY.append(load_model(tiny_bert_dir))


def _similarity(**kwargs: Any) -> Any:
    model, tokenizer = _tiny()
    return representation_similarity(model, tokenizer, ["A cat."], **kwargs)


def _checkpoint_steps(step: Any) -> Any:
    return order_checkpoints(["a.pt", "b.pt"], steps=[step, 10**9])


# (call with the value, parameter name in the message, kind, the exception it raises)
TABLE: list[tuple[str, Callable[[Any], Any], str, str, type[Exception]]] = [
    ("Settings.rtol", lambda v: saturated.Settings(rtol=v), "rtol", "tolerance", SaturationError),
    ("Settings.orders", lambda v: saturated.Settings(orders=v), "orders", "count", SaturationError),
    ("Settings.mask_threshold", lambda v: saturated.Settings(mask_threshold=v), "mask_threshold",
     "positive", SaturationError),
    ("hardmax.rtol", lambda v: saturated.hardmax(torch.tensor([1.0, 1.0, 0.0]), rtol=v), "rtol",
     "tolerance", SaturationError),
    ("hard_attention.rtol", lambda v: saturated.hard_attention(torch.ones(1, 2), torch.ones(3, 2),
                                                               torch.ones(3, 1), rtol=v),
     "rtol", "tolerance", SaturationError),
    ("GraphBuilder.seed", lambda v: GraphBuilder(seed=v), "seed", "seed", HomogeneityError),
    ("load_corpus.n", lambda v: load_corpus(n=v), "n (the number of sentences)", "count", EmpiricalError),
    ("load_model.seed", lambda v: load_model("bert", random_init=True, num_layers=0, seed=v), "seed",
     "seed", EmpiricalError),
    ("load_model.num_layers", lambda v: load_model("bert", random_init=True, num_layers=v),
     "num_layers", "count", EmpiricalError),
    ("representation_similarity.scale", lambda v: _similarity(scale=v), "the scale c", "scale",
     EmpiricalError),
    ("representation_similarity.batch_size", lambda v: _similarity(batch_size=v), "batch_size", "count",
     EmpiricalError),
    ("representation_similarity.max_length", lambda v: _similarity(max_length=v), "max_length", "count",
     EmpiricalError),
    ("head_atlas.eps", lambda v: head_atlas(*_tiny(), ["A cat."], eps=v), "eps", "open unit",
     EmpiricalError),
    ("Thresholds.global_fraction", lambda v: Thresholds(global_fraction=v), "global_fraction",
     "positive", EmpiricalError),
    ("TrainConfig.seed", lambda v: TrainConfig(seed=v), "seed", "seed", EmpiricalError),
    ("TrainConfig.lr", lambda v: TrainConfig(lr=v), "lr", "positive", EmpiricalError),
    ("NormTracker.record", lambda v: NormTracker(nn.Linear(2, 2)).record(v), "step", "step",
     EmpiricalError),
    ("order_checkpoints.steps", _checkpoint_steps, "steps[0]", "step", EmpiricalError),
    ("assert_saturated.eps", lambda v: assert_saturated(_tiny()[0], [101, 102], scale=10.0, eps=v),
     "eps", "tolerance", EmpiricalError),
    ("assert_saturated.scale", lambda v: assert_saturated(_tiny()[0], [101, 102], scale=v, eps=0.1),
     "the scale c", "scale", EmpiricalError),
    ("scales.low", lambda v: scales(low=v), "low", "scale", EmpiricalError),
    ("token_sequences.max_len", lambda v: token_sequences(_tiny()[1], max_len=v), "max_len", "count",
     EmpiricalError),
]


@pytest.mark.parametrize(("where", "call", "name", "kind", "error"), TABLE, ids=[row[0] for row in TABLE])
@given(data=st.data())
def test_bad_numbers_are_refused_where_they_enter(where: str, call: Callable[[Any], Any], name: str,
                                                  kind: str, error: type[Exception], data: Any) -> None:
    value = data.draw(BAD[kind], label=name)
    with pytest.raises(error) as refused:
        call(value)
    assert name in str(refused.value)


@pytest.mark.parametrize(("kind", "check"), [
    ("tolerance", lambda v: check_number(v, "x", low=0)),
    ("count", lambda v: check_integer(v, "x", low=1)),
    ("seed", lambda v: check_integer(v, "x", low=0, high=2**63 - 1)),
    ("step", lambda v: check_integer(v, "x", low=0)),
    ("scale", lambda v: check_number(v, "x", low=1, infinite=True)),
    ("positive", lambda v: check_number(v, "x", low=0, low_open=True)),
    ("open unit", lambda v: check_number(v, "x", low=0, high=1, low_open=True, high_open=True)),
])
def test_good_values_of_each_kind_pass_and_keep_their_value(kind: str, check: Callable[[Any], Any]) -> None:
    for value in GOOD[kind]:
        assert check(value) == value
    assert check(torch.tensor(GOOD[kind][-1])) == GOOD[kind][-1]  # a one-element tensor is its number


@given(value=st.one_of(st.floats(allow_nan=True), st.integers(-10, 10)))
def test_check_number_agrees_with_the_bounds(value: float) -> None:
    """A value passes exactly when it is a number in [0, 1]: the check and the bounds agree."""
    inside = not math.isnan(value) and 0 <= value <= 1
    try:
        assert check_number(value, "x", low=0, high=1) == value and inside
    except HomogeneityError:
        assert not inside


def test_saturate_with_a_negative_tolerance_is_refused_not_an_all_zero_limit() -> None:
    with pytest.raises(SaturationError, match="rtol"):
        saturated.saturate(nn.Linear(2, 2), torch.ones(1, 2), settings=saturated.Settings(rtol=-1))


def test_fractional_steps_are_refused_not_truncated_to_equal_ones() -> None:
    with pytest.raises(EmpiricalError, match=r"expected steps\[0\] to be an integer ≥ 0, got 1.5"):
        order_checkpoints(["a.pt", "b.pt"], steps=[1.5, 1.7])
