"""normsat grid: cells trained in spawned processes, summarized as strict JSON and a heatmap."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import empirical.cli.commands.grid as grid
import empirical.training.fits as fits
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.training.plots import plot_grid
from empirical.training.runs import TrainConfig, train


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-strict JSON constant {name}")


def test_two_cells_in_two_processes_match_a_run_in_this_process(tmp_path, capsys):
    out = tmp_path / "grid"
    code = main(["grid", "--lr", "1e-3,1e-2", "--weight-decay", "0.1", "--steps", "4",
                 "--layers", "1", "--width", "16", "--blocks-per-step", "4", "--context", "16",
                 "--jobs", "2", "--out", str(out)])
    assert code == 0 and "final norm" in capsys.readouterr().out
    data = json.loads((out / "grid.json").read_text(), parse_constant=_reject_constant)
    assert data["schema"] == "normsat.grid/1"
    assert [(c["lr"], c["weight_decay"]) for c in data["cells"]] == [(1e-3, 0.1), (1e-2, 0.1)]
    assert (out / "grid.png").stat().st_size > 0
    # A worker process computes what this process computes: same seed, same data, same norm.
    cell = data["cells"][1]
    assert not cell["diverged"] and cell["best"] in {"linear", "sqrt", "quarter", "power", "equilibrium"}
    here = train(TrainConfig(layers=1, width=16, batch_size=4, context=16, steps=4, lr=1e-2,
                             weight_decay=0.1, evaluations=3, limit_similarity=False))
    assert cell["final_norm"] == pytest.approx(here.evaluations[-1]["norm"], rel=1e-6)


@pytest.mark.parametrize(("argv", "message"), [
    (["--lr", "1e-3,fast"], "--lr expected numbers separated by commas, got 'fast' (item 2)"),
    (["--lr", "1e-3,,"], "--lr expected numbers separated by commas, got an empty item (item 2)"),
    (["--lr", "1e-3", "--weight-decay", "0,0.1,0.10"],
     "--weight-decay expected distinct numbers, got '0.10' twice (item 3)"),
    (["--lr", ""], "--lr expected at least one number"),
    (["--lr", "-1"], "expected lr to be a number > 0, got -1.0"),
    (["--lr", "1e-3,1e400"], "--lr expected finite numbers, got '1e400' (item 2)"),
])
def test_bad_grids_fail_before_any_process_starts(argv, message, tmp_path, capsys):
    assert main(["grid", *argv, "--out", str(tmp_path / "g")]) == 2
    assert message in capsys.readouterr().err


def test_a_device_that_does_not_exist_is_refused_before_any_process_starts(tmp_path, capsys):
    assert main(["grid", "--lr", "1e-3", "--device", "cuda:7", "--out", str(tmp_path / "g")]) == 2
    assert "cuda:7" in capsys.readouterr().err and not (tmp_path / "g").exists()


@pytest.fixture
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # run_cell sets one thread for its worker process


def test_a_cell_whose_fit_fails_is_marked_and_the_grid_goes_on(tmp_path, capsys, monkeypatch,
                                                               keep_threads):
    real_fit = fits.fit_law
    failing: list[float] = []

    def fit_law(steps, values, law):
        if failing:
            raise EmpiricalError(f"the {law} law did not converge on these {len(steps)} points")
        return real_fit(steps, values, law)

    def in_process(base, lrs, decays, *, jobs, progress, device):  # patches do not reach spawned workers
        assert device == "cpu"
        cells = []
        for wd in decays:
            for lr in lrs:
                failing[:] = [lr] if lr == 1e-2 else []
                cells.append(grid.run_cell(replace(base, lr=lr, weight_decay=wd, limit_similarity=False)))
        return cells

    monkeypatch.setattr(fits, "fit_law", fit_law)
    monkeypatch.setattr(grid, "run_grid", in_process)
    out = tmp_path / "grid"
    assert main(["grid", "--lr", "1e-3,1e-2", "--steps", "3", "--layers", "1", "--width", "16",
                 "--blocks-per-step", "4", "--context", "16", "--out", str(out), "--device", "cpu",
                 "--json", str(tmp_path / "copy.json")]) == 0
    assert "failed: the linear law did not converge" in capsys.readouterr().out
    data = json.loads((out / "grid.json").read_text(), parse_constant=_reject_constant)
    assert json.loads((tmp_path / "copy.json").read_text()) == data
    ok, failed = data["cells"]
    assert not ok["failed"] and ok["best"] in fits.LAWS
    assert failed["failed"] and not failed["diverged"] and "did not converge" in failed["error"]
    assert (out / "grid.png").read_bytes()[:4] == b"\x89PNG"


def test_cells_without_a_value_are_hatched_in_the_heatmap(tmp_path, monkeypatch):
    import matplotlib.figure

    drawn: list[tuple[str, tuple[float, float]]] = []
    real_savefig = matplotlib.figure.Figure.savefig

    def savefig(fig, *args, **kwargs):
        drawn.extend((patch.get_hatch(), patch.get_xy()) for ax in fig.axes for patch in ax.patches)
        return real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    cells = [{"lr": 1e-3, "weight_decay": 0.0, "diverged": False, "failed": False,
              "final_norm": 3.0, "best": "sqrt"},
             {"lr": 1e-2, "weight_decay": 0.0, "diverged": False, "failed": True, "error": "x"},
             {"lr": 1e-1, "weight_decay": 0.0, "diverged": True, "failed": False, "error": "y"}]
    plot_grid(cells, tmp_path / "g.png")
    assert sorted(drawn) == [("//", (0.5, -0.5)), ("//", (1.5, -0.5))]  # columns 1 and 2 only
