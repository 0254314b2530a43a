"""normsat grid: cells trained in spawned processes, summarized as strict JSON and a heatmap."""

from __future__ import annotations

import json

import pytest

from empirical.cli import main
from empirical.training import TrainConfig, train


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-strict JSON constant {name}")


def test_two_cells_in_two_processes_match_a_run_in_this_process(tmp_path, capsys):
    out = tmp_path / "grid"
    code = main(["grid", "--lr", "1e-3,1e-2", "--weight-decay", "0.1", "--steps", "4",
                 "--layers", "1", "--width", "16", "--batch-size", "4", "--context", "16",
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
                             weight_decay=0.1, evaluations=3, saturation=False))
    assert cell["final_norm"] == pytest.approx(here.evaluations[-1]["norm"], rel=1e-6)


@pytest.mark.parametrize(("argv", "message"), [
    (["--lr", "1e-3,fast"], "--lr expected numbers"),
    (["--lr", "1e-3", "--jobs", "0"], "jobs must be a positive integer"),
    (["--lr", "-1"], "lr must be a positive finite number"),
])
def test_bad_grids_fail_before_any_process_starts(argv, message, tmp_path, capsys):
    assert main(["grid", *argv, "--out", str(tmp_path / "g")]) == 2
    assert message in capsys.readouterr().err
