"""A curve's shape in words: its turns, not only its endpoints."""

from __future__ import annotations

import pytest

from empirical.errors import EmpiricalError
from empirical.training.shape import describe_shape, turning_points

STEPS = [0, 4, 17, 73, 300]


def test_a_rise_and_fall_names_the_peak_that_the_endpoints_hide() -> None:
    said = describe_shape(STEPS, [0.011, 0.84, 0.835, 0.2, -0.153], tolerance=0.01)
    assert said == ("rose from 0.011 at step 0 to a peak of 0.840 at steps 4–17 (held within 0.01), "
                    "then fell to -0.153 at step 300")


def test_a_fall_and_rise_names_the_trough() -> None:
    said = describe_shape(STEPS, [0.9, 0.5, 0.1, 0.3, 0.6], tolerance=0.01)
    assert said == "fell from 0.900 at step 0 to a trough of 0.100 at step 17, then rose to 0.600 at step 300"


@pytest.mark.parametrize(("values", "said"), [
    ([0.1, 0.2, 0.3, 0.4, 0.5], "rose from 0.100 at step 0 to 0.500 at step 300"),
    ([0.5, 0.4, 0.3, 0.2, 0.1], "fell from 0.500 at step 0 to 0.100 at step 300"),
    ([0.5, 0.504, 0.497, 0.503, 0.5], "stayed at 0.500 (within 0.01) from step 0 to step 300"),
])
def test_monotone_and_level_curves(values: list[float], said: str) -> None:
    assert describe_shape(STEPS, values, tolerance=0.01) == said


def test_wiggles_within_the_tolerance_are_not_turns() -> None:
    values = [0.1, 0.9, 0.88, 0.89, 0.2]
    assert turning_points(values, 0.05) == [0, 1, 4]
    assert turning_points(values, 0.005) == [0, 1, 2, 3, 4]
    assert describe_shape(STEPS, values, tolerance=0.05).count("then") == 1


def test_a_level_start_and_a_level_end_are_given_as_ranges() -> None:
    said = describe_shape(STEPS, [0.2, 0.205, 0.8, 0.81, 0.805], tolerance=0.02)
    assert said == ("rose from 0.200 at steps 0–4 (held within 0.02) to 0.810 at steps 17–300 "
                    "(held within 0.02)")


def test_a_curve_with_many_turns_is_summarised_by_its_range() -> None:
    said = describe_shape(list(range(7)), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5], tolerance=0.1)
    assert said == ("went up and down (5 turns) between 0.000 at step 0 and 1.000 at step 1, "
                    "from 0.000 at step 0 to 0.500 at step 6")


def test_bad_input_is_refused() -> None:
    with pytest.raises(EmpiricalError, match=r"expected as many steps as values, at least one, got "
                                             r"2 steps and 3 values"):
        describe_shape([0, 1], [0.0, 1.0, 2.0], tolerance=0.1)
    with pytest.raises(EmpiricalError, match=r"expected a finite tolerance >= 0, got -0.1"):
        turning_points([0.0, 1.0], -0.1)
