"""The measurement pipeline's pieces, the result protocol and save_figure."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from empirical.errors import EmpiricalError
from empirical.measure.components import ComponentSaturation
from empirical.measure.convergence import Convergence
from empirical.measure.heads import HeadAtlas, Thresholds
from empirical.measure.pipeline import Sums, corpus_record, prepare, texts_of, token_cosines
from empirical.measure.similarity import SimilarityResult
from empirical.outputs import Result, save_figure
from empirical.training.projection import ProjectionCurves
from empirical.training.runs import TrainResult


def test_sums_add_and_count_by_key() -> None:
    sums = Sums()
    sums.add(1.0, torch.tensor([1.0, 2.0]))
    sums.add(1.0, torch.tensor([0.5, 0.5]))
    sums.add("x", torch.tensor([3.0]))
    sums.count("encoder", 4)
    sums.count("encoder", 2)
    totals, counts = sums.reduced()
    assert totals[1.0].tolist() == [1.5, 2.5] and totals[1.0].dtype == torch.float64
    assert counts == {"encoder": 6}
    assert sums.provenance()["tokens_per_rank"] == [6]


def test_token_cosines_are_clamped_masked_and_float64() -> None:
    a = torch.tensor([[[1.0, 1e-3], [0.0, 0.0], [5.0, 5.0]]])
    mask = torch.tensor([[True, True, False]])
    cosines = token_cosines(a, a * 3, mask)
    assert cosines.dtype == torch.float64 and cosines.tolist() == [1.0, 0.0]
    assert token_cosines(a, -a).tolist() == pytest.approx([-1.0, 0.0, -1.0], abs=1e-15)
    assert token_cosines(a, -a).min() >= -1.0


def test_texts_and_corpus_record() -> None:
    assert texts_of("one") == ["one"]
    with pytest.raises(EmpiricalError, match=r"^expected sentences as strings, got items of type int$"):
        texts_of(["a", 3])  # type: ignore[list-item]
    for value in (5, None):
        with pytest.raises(EmpiricalError) as caught:
            texts_of(value)  # type: ignore[arg-type]
        assert str(caught.value) == (f"expected sentences to be a list of strings, got {value!r} "
                                     f"({type(value).__name__})")
    assert corpus_record(["a"], ["a"])["source"] == "in-memory list"


def test_prepare_refuses_a_model_without_weights_naming_the_measurement() -> None:
    with torch.device("meta"):
        model = torch.nn.Linear(2, 2)
    with pytest.raises(EmpiricalError) as caught:
        prepare(model, None, ["a sentence"])
    assert str(caught.value) == ("expected a model with weights for a measurement (it runs the model), "
                                 "got Linear on the meta device (no values: load it on cpu or cuda)")


def _results() -> list[Result]:
    convergence = Convergence(("embeddings", "layer 1"), (1.0, 10.0, 100.0),
                              {1.0: (0.5, 0.25), 10.0: (0.9, 0.75), 100.0: (0.99, 0.975)}, 7)
    return [
        SimilarityResult(("embeddings",), (0.5,), ("",), 2.0, 1, {"": 3}, 0, 8),
        convergence,
        HeadAtlas((), 0, 0, 1e-3, Thresholds()),
        ComponentSaturation((1.0,), 1000.0, {"v": (0.5,)}, {"v": (0.25,)}, {"v": 1.0}),
        ProjectionCurves((1.0,), (0.5,), {"v": 2.0}, {"v": {0.5: (-1.0,)}}),
        TrainResult(config=None, records=[], checkpoints=[],  # type: ignore[arg-type]
                    evaluations=[{"step": 1, "loss": 2.0, "accuracy": 0.5, "norm": 3.0}],
                    fits={}, model={}, corpus={}, vocabulary=[]),
    ]


@pytest.mark.parametrize("result", _results(), ids=lambda r: type(r).__name__)
def test_every_result_writes_its_dictionary_and_returns_the_path(result: Result, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if isinstance(result, TrainResult):  # a run's config is a dataclass; a stand-in is enough here
        monkeypatch.setattr("empirical.training.runs.asdict", lambda config: {})
    out = result.to_json(tmp_path / "sub" / "result.json")
    assert out == tmp_path / "sub" / "result.json"
    assert json.loads(out.read_text()) == json.loads(json.dumps(result.to_dict(), default=str))
    assert isinstance(result.table(), str)


def test_convergence_dictionary_and_table() -> None:
    convergence = _results()[1]
    data = convergence.to_dict()
    assert data["schema"] == "normsat.convergence/1" and data["n_tokens"] == 7
    assert data["layers"][0]["cosine_to_limit"] == [0.5, 0.9, 0.99]
    assert data["layers"][1]["rate"] == pytest.approx(1.0)
    assert convergence.table().splitlines()[0].startswith("layer")
    exact = Convergence(("embeddings",), (1.0, 10.0), {1.0: (1.0,), 10.0: (1.0,)}, 1)
    assert exact.to_dict()["layers"][0]["rate"] is None and math.isnan(exact.rate(0))


def test_convergence_dictionary_and_table_in_full() -> None:
    """Gaps 1 − cos of 0.5, 0.1, 0.01 and 0.75, 0.25, 0.025: both fall tenfold per tenfold c above
    c = 1 (the only scales fitted), a rate of 1."""
    convergence = _results()[1]
    assert convergence.to_dict() == {
        "schema": "normsat.convergence/1",
        "scales": [1.0, 10.0, 100.0],
        "layers": [
            {"name": "embeddings", "cosine_to_limit": [0.5, 0.9, 0.99], "rate": pytest.approx(1.0)},
            {"name": "layer 1", "cosine_to_limit": [0.25, 0.75, 0.975], "rate": pytest.approx(1.0)},
        ],
        "n_tokens": 7,
        "distributed": {},
    }
    assert convergence.table().splitlines() == [
        "layer             c=1       c=10      c=100      rate",
        "embeddings   0.500000   0.900000   0.990000     1.000",
        "layer 1      0.250000   0.750000   0.975000     1.000",
    ]
    # a label shorter than the header's, and one scale above 1: no rate to fit
    short = Convergence(("x",), (10.0,), {10.0: (0.5,)}, 1)
    assert short.table().splitlines() == ["layer       c=10      rate", "x       0.500000       nan"]


@pytest.mark.parametrize(("scales", "gaps", "rate"), [
    ([1, 10, 100], [0.5, 1e-2, 1e-4], 2.0),  # c = 1 is not fitted
    ([10, 100, 1000], [1e-2, 1e-4, 1e-12], 2.0),  # a gap at the floor is not fitted
    ([10, 100, 1000], [1e-2, 1e-4, 0.0], 2.0),
    ([2, 4], [1.0, 0.125], 3.0),  # two points are enough
    ([2, 4, 8], [1.0, 1.0, 1.0], 0.0),
])
def test_decay_rate_fits_the_scales_above_one_whose_gap_is_above_the_floor(scales, gaps, rate) -> None:
    from empirical.measure.convergence import decay_rate

    assert decay_rate(scales, gaps) == pytest.approx(rate, rel=1e-12, abs=1e-12)


def test_decay_rate_least_squares_and_floor() -> None:
    from empirical.measure.convergence import decay_rate

    # log gap = −(1, 3, 2)·log 2 against log c = (1, 2, 3)·log 2: least-squares slope −1/2.
    assert decay_rate([2, 4, 8], [0.5, 0.125, 0.25]) == pytest.approx(0.5, rel=1e-12)
    assert math.isnan(decay_rate([1, 10, 100], [0.5, 0.1, 1e-13]))  # one point left
    assert math.isnan(decay_rate([10, 100], [1e-6, 1e-8], floor=1e-7))
    with pytest.raises(ValueError):
        decay_rate([10, 100, 1000], [0.1, 0.01])


def test_save_figure_is_atomic(tmp_path: Path) -> None:
    class Broken:
        def savefig(self, path: Any, **options: Any) -> None:
            Path(path).write_bytes(b"half")
            raise RuntimeError("renderer failed")

    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        save_figure(Broken(), target)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


# Each format's file signature (PNG's 8-byte header, PDF's %PDF-, an SVG's XML declaration).
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_save_figure_writes_the_format_the_extension_names(tmp_path: Path, suffix: str) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1, 1))
    figure.add_subplot().plot([0, 1])
    written = save_figure(figure, tmp_path / f"plot{suffix}").read_bytes()
    assert written.startswith(MAGIC[suffix])
    assert suffix != ".svg" or b"<svg" in written
