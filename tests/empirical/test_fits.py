"""Growth-law fits on synthetic norm trajectories whose law is known."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from empirical.errors import EmpiricalError
from empirical.training.fits import (
    LAWS,
    extrapolation_scores,
    fit_growth,
    fit_law,
    fit_norm_growth,
    growth_curve,
    layer_growth,
    parameter_intervals,
    skipped_lines,
)

STEPS = 400
EVERY = 10
DIM = 500


def _record(thetas: list[np.ndarray]) -> tuple[list[int], list[float]]:
    steps = list(range(0, STEPS + 1, EVERY))
    return steps, [float(np.linalg.norm(thetas[t])) for t in steps]


def random_walk(seed: int) -> tuple[list[int], list[float]]:
    """θ_{t+1} = θ_t + σξ from θ_0 = 0: ‖θ_t‖ ≈ σ√(d·t)."""
    rng = np.random.default_rng(seed)
    steps = 0.1 * rng.standard_normal((STEPS, DIM))
    thetas = np.concatenate([np.zeros((1, DIM)), np.cumsum(steps, axis=0)])
    return _record(list(thetas))


def constant_direction(seed: int) -> tuple[list[int], list[float]]:
    """Steps ηu along one direction u (from θ_0 = 0.5u) plus small isotropic noise: ‖θ_t‖ ≈ 0.5 + ηt."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(DIM)
    u /= np.linalg.norm(u)
    steps = 0.05 * u + 0.002 * rng.standard_normal((STEPS, DIM))
    thetas = np.concatenate([0.5 * u[None], 0.5 * u + np.cumsum(steps, axis=0)])
    return _record(list(thetas))


def weight_decay(seed: int) -> tuple[list[int], list[float]]:
    """θ_{t+1} = (1 − λ)θ_t + σξ: the norm settles at the equilibrium σ√(d/(2λ − λ²))."""
    rng = np.random.default_rng(seed)
    theta = 0.05 * rng.standard_normal(DIM)
    thetas = [theta]
    for _ in range(STEPS):
        theta = 0.99 * theta + 0.1 * rng.standard_normal(DIM)
        thetas.append(theta)
    return _record(thetas)


@pytest.mark.parametrize(("generate", "law"), [
    (random_walk, "sqrt"), (constant_direction, "linear"), (weight_decay, "equilibrium"),
])
@pytest.mark.parametrize("seed", range(4))
def test_the_generating_law_is_chosen(generate, law, seed):
    steps, norms = generate(seed)
    result = fit_growth(steps, norms)
    assert result["best"] == law, {f["law"]: round(f["aic"], 1) for f in result["fits"]}
    assert {f["law"] for f in result["fits"]} == set(LAWS)
    json.dumps(result, allow_nan=False)  # strict JSON


def test_random_walk_rate_matches_theory():
    # E‖θ_t‖ ≈ σ√(d t) = 0.1·√500·√t ≈ 2.236·√t.
    steps, norms = random_walk(0)
    fit = fit_law(steps, norms, "sqrt")
    assert fit.params["a"] == pytest.approx(0.1 * math.sqrt(DIM), rel=0.03)
    assert fit.r2 is not None and fit.r2 > 0.99


def test_weight_decay_equilibrium_matches_theory():
    # ‖θ‖² → σ²d/(1 − (1 − λ)²) at equilibrium.
    steps, norms = weight_decay(1)
    fit = fit_law(steps, norms, "equilibrium")
    expected = 0.1 * math.sqrt(DIM / (1 - 0.99**2))
    assert fit.params["rho_inf"] == pytest.approx(expected, rel=0.05)


def test_exact_data_gives_exact_parameters():
    t = np.arange(0.0, 101.0, 5.0)
    fit = fit_law(t, 3.0 * t**0.7 + 2.0, "power")
    assert fit.params == pytest.approx({"a": 3.0, "p": 0.7, "b": 2.0}, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)


def test_a_clear_power_law_is_reported_as_power():
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 401.0, 10.0)
    result = fit_growth(t, 2.0 + 0.3 * t**0.7 + 0.05 * rng.standard_normal(t.size))
    assert result["best"] == "power"


def test_power_winning_aic_by_chance_yields_to_the_nested_named_law():
    # Independent noise on an exact √t law: find seeds where the free power law wins on AIC.
    t = np.arange(1.0, 201.0, 5.0)
    switched = 0
    for seed in range(30):
        noise = 0.2 * np.random.default_rng(seed).standard_normal(t.size)
        result = fit_growth(t, 1.0 + 2.0 * np.sqrt(t) + noise, laws=("sqrt", "quarter", "power"))
        assert result["best"] == "sqrt"
        switched += result["best_by_aic"] == "power"
    assert switched >= 1  # AIC alone picks the nesting law sometimes; the rule undoes it


def test_exponent_within_margin_counts_as_the_named_law():
    t = np.arange(0.0, 401.0, 10.0)
    result = fit_growth(t, 1.0 + 2.0 * t**0.53)  # exact, so p is known to many digits
    assert result["best_by_aic"] == "power"
    assert result["best"] == "sqrt"


def test_too_few_points_is_an_error():
    with pytest.raises(EmpiricalError, match=r"power law .* 3 parameters and needs at least 4 points"):
        fit_growth([0, 1, 2], [1.0, 2.0, 3.0])
    with pytest.raises(EmpiricalError, match="needs at least 3 points"):
        fit_law([0, 1], [1.0, 2.0], "linear")


@pytest.mark.parametrize(("steps", "values", "message"), [
    ([0, 2, 1, 3, 4], [1.0] * 5, "strictly increasing"),
    ([0, 1, 1, 3, 4], [1.0] * 5, "strictly increasing"),
    ([0, 1, 2, 3], [1.0, 2.0, math.nan, 3.0], "finite"),
    ([0, 1, 2, 3], [1.0, 2.0, 3.0], "as many steps as values"),
])
def test_bad_data_is_an_error(steps, values, message):
    with pytest.raises(EmpiricalError, match=message):
        fit_law(steps, values, "linear")


def test_unknown_law_is_an_error():
    with pytest.raises(EmpiricalError, match="expected a law among"):
        fit_law([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0], "cubic")


def test_layer_growth_ranks_layers_by_relative_growth():
    t = np.arange(0.0, 101.0, 10.0)
    layers = {"slow": 10.0 + 0.1 * np.sqrt(t), "fast": 2.0 + 0.5 * np.sqrt(t), "flat": 3.0 + 0 * t}
    rows = layer_growth(t, layers, "sqrt")
    assert [row["layer"] for row in rows] == ["fast", "slow", "flat"]
    assert rows[0]["relative_growth"] == pytest.approx(0.5 * 10.0 / 2.0)
    assert rows[2]["r2"] is None  # constant data: R² undefined, not NaN


def test_fit_norm_growth_lists_the_laws_it_cannot_fit():
    t = [0.0, 10.0, 20.0, 30.0]
    norms = [5.0 + 0.3 * math.sqrt(x) + 0.01 * (-1) ** i for i, x in enumerate(t)]
    growth = fit_norm_growth(t, norms, {"a": norms, "b": [2.0 * n for n in norms]})
    # Four points: every two-parameter law and the three-parameter ones; none is skipped.
    assert {f["law"] for f in growth["fits"]} == set(LAWS) and growth["skipped"] == []
    assert {row["layer"] for row in growth["layer_growth"]} == {"a", "b"}
    growth = fit_norm_growth(t[:3], norms[:3])
    assert [f["law"] for f in growth["fits"]] == ["linear", "sqrt", "quarter"]
    assert growth["skipped"] == [
        {"law": "power", "reason": "3 parameters need at least 4 points, got 3"},
        {"law": "equilibrium", "reason": "3 parameters need at least 4 points, got 3"}]
    assert growth["layer_growth"] == []  # no layer norms given
    growth = fit_norm_growth(t[:2], norms[:2], {"a": norms[:2]})
    assert growth["fits"] == [] and growth["best"] is None and growth["layer_growth"] == []
    assert [row["law"] for row in growth["skipped"]] == list(LAWS)
    assert growth_curve(growth, 0.0, 10.0) is None


def test_growth_curve_draws_the_best_law_between_the_given_steps():
    t = np.arange(0.0, 201.0, 10.0)
    growth = fit_norm_growth(t, 5.0 + 0.3 * np.sqrt(t) + 0.01 * np.cos(t))
    curve = growth_curve(growth, 0.0, 200.0, points=11)
    assert curve is not None
    label, steps, norms = curve
    best = next(f for f in growth["fits"] if f["law"] == growth["best"])
    assert label.startswith(f"{growth['best']} fit, ") and "\nto all 21 records, steps 0–200 (R² " in label
    assert steps == pytest.approx(np.linspace(0, 200, 11))
    assert norms == pytest.approx(LAWS[growth["best"]].fn(np.asarray(steps), *best["params"].values()))


def test_layer_rows_are_measured_growth_and_the_fit_of_each_layer():
    """Relative growth from the first and last measured norms; a layer starting at 0 has none and
    ranks last, below a shrinking one; each row carries that layer's own fit under the given law."""
    t = np.arange(0.0, 101.0, 10.0)
    layers = {"zero": 0.3 * np.sqrt(t), "shrink": 4.0 - 0.1 * np.sqrt(t),
              "half": 0.5 + 0.25 * np.sqrt(t) + 0.01 * np.cos(t)}
    rows = layer_growth(t, layers, "sqrt")
    assert [row["layer"] for row in rows] == ["half", "shrink", "zero"]
    for row in rows:
        norms = layers[row["layer"]]
        fit = fit_law(t, norms, "sqrt")
        assert row == {"layer": row["layer"], "start": norms[0], "end": norms[-1],
                       "relative_growth": row["relative_growth"], "law": "sqrt",
                       "params": fit.params, "stderr": fit.stderr, "r2": fit.r2}
    half, shrink, zero = rows
    assert half["relative_growth"] == pytest.approx(layers["half"][-1] / layers["half"][0] - 1)
    assert shrink["relative_growth"] == pytest.approx((4.0 - 1.0) / 4.0 - 1)
    assert zero["relative_growth"] is None


def test_the_growth_document_gathers_each_laws_fit_score_and_interval():
    t = np.arange(0.0, 401.0, 10.0)
    y = 1.0 + 2.0 * t**0.53 + 0.05 * np.cos(t)
    laws = ("linear", "sqrt", "power")
    result = fit_growth(t, y, laws)
    scores = extrapolation_scores(t, y, laws)
    fits = {law: fit_law(t, y, law) for law in laws}
    for document, law in zip(result["fits"], laws, strict=True):
        intervals = parameter_intervals(fits[law], t, y)
        assert document == fits[law].to_dict() | {
            "extrapolation": scores[law],
            "interval": {name: list(interval) for name, interval in intervals.items()}}
    assert result["best_by_aic"] == min(laws, key=lambda law: fits[law].aic) == "power"
    assert result["best_by_information"] == result["best"] == "sqrt"  # p within the margin of ½
    assert result["best_by_extrapolation"] in laws and result["n"] == t.size


def test_fitting_no_law_is_an_error():
    with pytest.raises(EmpiricalError) as caught:
        fit_growth([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0], laws=())
    assert str(caught.value) == "fit_growth expected at least one law, got none"


def test_a_document_without_fits_still_counts_its_points():
    growth = fit_norm_growth([0.0, 1.0], [1.0, 2.0])
    assert (growth["fits"], growth["best"], growth["best_by_aic"], growth["n"]) == ([], None, None, 2)
    assert skipped_lines(growth)[0] == "linear law not fitted: 2 parameters need at least 3 points, got 2"
    assert len(skipped_lines(growth)) == len(LAWS)
    assert skipped_lines({"fits": [], "best": None}) == []  # a document from fit_growth skips none


@pytest.mark.parametrize(("r2", "n", "label"), [
    (0.987654, 7, "sqrt fit, a·√t + b\nto all 7 records, steps 0–100 (R² 0.9877)"),
    (None, None, "sqrt fit, a·√t + b\nto the records, steps 0–100")])
def test_the_curve_of_a_growth_document_is_its_best_law_over_the_fitted_steps(r2, n, label):
    growth = {"best": "sqrt", **({} if n is None else {"n": n}), "fits": [
        {"law": "linear", "formula": "a·t + b", "params": {"a": 1.0, "b": 0.0}, "r2": 0.5},
        {"law": "sqrt", "formula": "a·√t + b", "params": {"a": 2.0, "b": 1.0}, "r2": r2}]}
    curve = growth_curve(growth, 0.0, 100.0)
    assert curve is not None
    drawn, steps, norms = curve
    assert drawn == label
    assert steps == pytest.approx(np.linspace(0.0, 100.0, 200))  # 200 points unless told
    assert norms == pytest.approx(2.0 * np.sqrt(steps) + 1.0)


def test_only_the_laws_asked_for_are_scored_and_chosen():
    """√t data fitted with the line alone: the square root, though it would extrapolate best, was
    not asked for and is neither scored nor chosen."""
    t = np.arange(0.0, 401.0, 10.0)
    result = fit_growth(t, 1.0 + 2.0 * np.sqrt(t), laws=("linear",))
    assert [f["law"] for f in result["fits"]] == ["linear"]
    assert result["best"] == result["best_by_extrapolation"] == result["best_by_aic"] == "linear"
