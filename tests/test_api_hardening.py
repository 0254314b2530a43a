"""The Python API checks tensors and values the way the command line checks options: a wrong
dtype, device, shape or type is refused with the package's own error naming the argument, and
the validation helpers' own edges (open bounds, dimensions, mappings) behave as documented."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from empirical.errors import EmpiricalError
from empirical.outputs import write_json
from empirical.training.fits import extrapolation_scores, fit_growth, fit_law
from empirical.training.norms import NormTracker
from homogeneity.errors import HomogeneityError
from homogeneity.validation import check_integer, check_number, check_sequence
from saturated.bounds import scale_to_saturate, scale_to_saturate_map
from saturated.errors import SaturationError
from saturated.functional import hard_attention, hardmax
from saturated.validation import check_dim

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.uint8]


@given(dtypes=st.tuples(*[st.sampled_from(DTYPES)] * 3), seed=st.integers(0, 2**16))
def test_hard_attention_refuses_integer_or_mixed_operands_by_name(dtypes, seed):
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randint(-3, 4, shape, generator=generator).to(dtype)
               for shape, dtype in zip([(2, 3), (4, 3), (4, 2)], dtypes))
    floating = [dtype.is_floating_point for dtype in dtypes]
    if all(floating) and len(set(dtypes)) == 1:
        out = hard_attention(q, k, v)
        assert out.dtype == dtypes[0] and out.shape == (2, 2)
        return
    with pytest.raises(SaturationError) as caught:
        hard_attention(q, k, v)
    message = str(caught.value)
    if not all(floating):
        first = "qkv"[floating.index(False)]
        assert message.startswith(f"expected a floating {first}, got dtype ")
    else:
        assert message.startswith("expected q, k and v of one dtype, got ")


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_hard_attention_and_hardmax_refuse_meta_tensors_naming_them(which):
    operands = {"q": torch.ones(2, 3), "k": torch.ones(4, 3), "v": torch.ones(4, 2)}
    operands[which] = operands[which].to("meta")
    with pytest.raises(SaturationError, match=f"expected {which} with values, got a tensor on the meta"):
        hard_attention(**operands)
    with pytest.raises(SaturationError, match="expected scores with values, got a tensor on the meta"):
        hardmax(torch.empty(3, device="meta"))
    with pytest.raises(SaturationError, match="expected the mask on the scores' device cpu, got meta"):
        hardmax(torch.ones(3), mask=torch.ones(3, dtype=torch.bool, device="meta"))
    with pytest.raises(SaturationError, match=r"expected a boolean mask .*got \[True, False\] \(list\)"):
        hardmax(torch.ones(2), mask=[True, False])


@given(exponent=st.floats(-300, 149))
def test_a_growth_fit_scales_with_its_values_down_to_1e_300(exponent):
    t = np.arange(0, 60, 3.0)
    y = 1.0 + 0.3 * np.sqrt(t) + 0.01 * np.cos(t)
    scale = 10.0**exponent
    reference, scaled = fit_law(t, y, "sqrt"), fit_law(t, scale * y, "sqrt")
    for name, value in reference.params.items():
        assert math.isclose(scaled.params[name], scale * value, rel_tol=1e-6), name
    assert math.isclose(scaled.r2, reference.r2, rel_tol=1e-9)
    assert fit_growth(t, scale * y)["best"] == fit_growth(t, y)["best"]


def test_values_whose_squares_overflow_are_refused():
    with pytest.raises(EmpiricalError, match=r"expected values of at most 1e\+150 in magnitude"):
        fit_law([0, 1, 2, 3], [1e300, 2e300, 3e300, 4e300], "linear")


@pytest.mark.parametrize("call", [fit_growth, extrapolation_scores])
def test_laws_as_a_bare_string_are_refused_not_read_letter_by_letter(call):
    with pytest.raises(EmpiricalError, match=r"got the bare string 'linear' \(wrap it in a list"):
        call(list(range(20)), [1.0 + s for s in range(20)], laws="linear")


@pytest.mark.parametrize(("loss", "shown"), [
    ("0.5", "'0.5' (str)"), (True, "True (bool)"), (1 + 2j, "(1+2j) (complex)"),
    (torch.tensor(3), "a torch.int64 tensor"), (torch.tensor(1 + 1j), "a torch.complex64 tensor"),
])
def test_norm_tracker_refuses_a_loss_that_is_not_a_real_number(loss, shown):
    model = nn.Linear(2, 2)
    tracker = NormTracker(model)
    model(torch.ones(2)).sum().backward()
    with pytest.raises(EmpiricalError, match=re.escape("expected the loss as a real number or a floating "
                                                       f"scalar tensor, got {shown}")):
        tracker.after_backward(1, loss)
    tracker.after_backward(1, np.float32(0.5))
    assert tracker.records[-1]["loss"] == 0.5


def test_to_json_onto_a_folder_is_refused_before_anything_is_written(tmp_path):
    tracker = NormTracker(nn.Linear(2, 2))
    tracker.record(0)
    (tmp_path / "kept.txt").write_text("mine")
    for write in (tracker.to_json, lambda path: write_json({"a": 1}, path)):
        with pytest.raises(EmpiricalError, match=f"got the existing folder {tmp_path}$"):
            write(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt"]


REAL_ROWS = st.lists(st.floats(-50, 50), min_size=1, max_size=5)


@given(row=REAL_ROWS, imaginary=st.floats(-1, 1), as_tensor=st.booleans())
def test_scale_to_saturate_refuses_complex_scores(row, imaginary, as_tensor):
    scores = [complex(x, imaginary) for x in row]
    given_scores = torch.tensor(scores) if as_tensor else scores
    with pytest.raises(SaturationError, match="complex"):
        scale_to_saturate(given_scores)


@given(rows=st.lists(REAL_ROWS, min_size=2, max_size=4).filter(lambda r: len({len(x) for x in r}) > 1))
def test_scale_to_saturate_map_refuses_ragged_rows(rows):
    with pytest.raises(SaturationError, match="rows of different lengths"):
        scale_to_saturate_map(rows)


@pytest.mark.parametrize(("scores", "message"), [
    ("12", "got the string '12'"), (["a", "b"], "got strings"), ([True, False], "got booleans"),
    ([1.0, None], "got object values"), (torch.tensor([True]), "a torch.bool tensor"),
])
def test_scale_to_saturate_refuses_what_is_not_real_numbers(scores, message):
    with pytest.raises(SaturationError, match=message):
        scale_to_saturate(scores)


def test_real_scores_in_any_container_give_one_answer():
    row = [2.0, 0.0, -math.inf]
    expected = scale_to_saturate(row, eps=1e-6)
    assert scale_to_saturate(np.array(row), eps=1e-6) == expected
    assert scale_to_saturate(torch.tensor(row, dtype=torch.float32), eps=1e-6) == expected
    assert scale_to_saturate([2, 0], eps=1e-6) == scale_to_saturate([2.0, 0.0], eps=1e-6)


# -- the validation helpers' own edges ----------------------------------------------------------


def test_an_open_upper_bound_excludes_the_bound_and_keeps_what_is_below():
    assert check_number(math.nextafter(1.0, 0.0), "p", low=0, high=1, high_open=True) < 1.0
    with pytest.raises(HomogeneityError, match=r"^expected p to be a number ≥ 0 and < 1, got 1\.0$"):
        check_number(1.0, "p", low=0, high=1, high_open=True)
    with pytest.raises(HomogeneityError, match=r"^expected p to be a number > 0 and < 1, got 0$"):
        check_number(0, "p", low=0, high=1, low_open=True, high_open=True)
    with pytest.raises(HomogeneityError, match=r"got inf$"):
        check_number(math.inf, "p", low=0)  # +∞ only where it has a meaning of its own
    assert check_number(math.inf, "scale", low=1, infinite=True) == math.inf
    with pytest.raises(HomogeneityError, match=r"^expected n to be an integer ≥ 1 and ≤ 3, got 4$"):
        check_integer(4, "n", low=1, high=3)


@given(dims=st.integers(0, 4), dim=st.integers(-8, 8))
def test_a_dimension_out_of_range_is_refused_naming_the_range(dims, dim):
    tensor = torch.zeros((1,) * dims)
    if -dims <= dim < dims:
        assert check_dim(dim, tensor) == dim
    else:
        with pytest.raises(SaturationError, match=rf"^expected dim to be an integer in \[{-dims}, "
                                                  rf"{dims - 1}\] for a tensor of shape"):
            check_dim(dim, tensor)


@pytest.mark.parametrize("value", [{"a": 1}, torch.ones(2), 3])
def test_a_mapping_tensor_or_number_where_a_sequence_is_expected_is_refused(value):
    with pytest.raises(HomogeneityError, match=r"^expected layers to be a list of names, got "):
        check_sequence(value, "layers", what="names")
    assert check_sequence(("a", "b"), "layers") == ["a", "b"]
    assert check_sequence(iter(["c"]), "layers") == ["c"]


def test_check_dim_refuses_a_bool_or_a_float_dimension():
    for dim in (True, 1.0, "1"):
        with pytest.raises(SaturationError, match="expected dim to be an integer in"):
            check_dim(dim, torch.zeros(2, 2))
