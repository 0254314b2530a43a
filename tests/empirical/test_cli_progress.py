"""grid, projection and degree show progress on stderr when it is a terminal or --progress asks,
and --quiet silences it; a pipe (pytest's captured stderr is one) gets no bar by default."""

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
    err = _stderr([*argv, "--progress"], capsys)
    assert "degree" in err and "stage" in err
    assert _stderr([*argv, "--quiet"], capsys) == ""


def test_projection_shows_progress_unless_quiet(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["projection", "--variants", "feed-forward (no biases)", "--hidden", "4", "--sequences", "2",
            "--length", "3", "--max-scale", "2", "--scale-step", "0.5", "--accuracies", "1.0", "0.8"]
    err = _stderr([*argv, "--progress"], capsys)
    assert "gradient projection" in err and "Figure 5" in err
    assert _stderr([*argv, "--quiet"], capsys) == ""


def test_grid_counts_finished_cells_unless_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["grid", "--lr", "1e-3", "--steps", "4", "--layers", "1", "--width", "8", "--heads", "1",
            "--jobs", "1"]
    assert "grid" in _stderr([*argv, "--out", str(tmp_path / "a"), "--progress"], capsys)
    assert _stderr([*argv, "--out", str(tmp_path / "b"), "--quiet"], capsys) == ""


def test_no_bar_on_a_pipe_unless_asked(tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """stderr that is not a terminal gets no bar: a run prints nothing there, and a command refused
    inside its stages prints its one-line error alone."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["degree", "--model", str(tiny_bert_dir), "--depth", "1"]
    assert _stderr(argv, capsys) == ""
    assert main([*argv, "--params", "no_such_parameter"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normsat degree: error: ") and err.count("\n") == 1, err



def test_quiet_wins_over_progress(tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    argv = ["degree", "--model", str(tiny_bert_dir), "--depth", "1", "--quiet", "--progress"]
    assert _stderr(argv, capsys) == ""


def test_a_corpus_bar_has_the_exact_limits_nodes_under_it(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One batch's limit takes minutes: the second bar counts its graph nodes as they run."""
    import torch
    from torch import nn

    from empirical.measure.pipeline import batch_progress
    from saturated.rules import Settings
    from saturated.saturate import SaturatedModel

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    limit = SaturatedModel(net, Settings())
    batches = [torch.ones(1, 3, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64)]
    capsys.readouterr()
    assert [b.sum().item() for b in batch_progress(batches, "test", True) if limit(b)] == [3.0, 0.0]
    err = capsys.readouterr().err
    assert "test: 100%" in err and "2/2" in err and "test: exact limit" in err and "node" in err
    # before the first node, the same bar counted the modules the export traced (a model without
    # a configuration is exported each time, never read from the cache)
    assert "test: exact limit, export:   0%|          | 0/4 [" in err and "module/s" in err
    assert [b.sum().item() for b in batch_progress(batches, "test", False) if limit(b)] == [3.0, 0.0]
    assert capsys.readouterr().err == ""
