"""grid, projection and degree show progress on stderr, and --quiet silences it."""

from __future__ import annotations

from pathlib import Path

import pytest

from empirical.cli import main


def _stderr(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().err


def test_degree_shows_its_stages_unless_quiet(tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["degree", "--model", str(tiny_bert_dir), "--depth", "1"]
    err = _stderr(argv, capsys)
    assert "degree" in err and "stage" in err
    assert _stderr([*argv, "--quiet"], capsys) == ""


def test_projection_shows_progress_unless_quiet(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["projection", "--variants", "feed-forward (no biases)", "--hidden", "4", "--sequences", "2",
            "--length", "3", "--max-scale", "2", "--scale-step", "0.5", "--accuracies", "1.0", "0.8"]
    err = _stderr(argv, capsys)
    assert "gradient projection" in err and "Figure 5" in err
    assert _stderr([*argv, "--quiet"], capsys) == ""


def test_grid_counts_finished_cells_unless_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["grid", "--lr", "1e-3", "--steps", "4", "--layers", "1", "--width", "8", "--heads", "1",
            "--jobs", "1"]
    assert "grid" in _stderr([*argv, "--out", str(tmp_path / "a")], capsys)
    assert _stderr([*argv, "--out", str(tmp_path / "b"), "--quiet"], capsys) == ""
