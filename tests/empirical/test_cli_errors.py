"""The CLI's error path: a user's mistake is one line on stderr and exit code 2, never "internal error"."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import torch

from empirical.cli import main
from empirical.cli.commands import grid


def _module(folder: Path, name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> str:
    (folder / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    return f"{name}:make"


def _one_error_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"normsat {command}: error: "), err
    assert "internal error" not in err
    return lines[0]


@pytest.mark.parametrize(("source", "raised"), [
    ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
    ("def make(:\n", "SyntaxError"),
])
def test_a_factory_module_that_fails_at_import_is_exit_2(source: str, raised: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    name = "broken_at_import_" + str(abs(hash(source)))
    spec = _module(tmp_path, name, source, monkeypatch)
    assert main(["similarity", "--model", spec, "--sentences", "1"]) == 2
    line = _one_error_line(capsys.readouterr().err, "similarity")
    assert f"importing {name} raised {raised}" in line


@pytest.mark.parametrize("argv", [
    ["similarity", "--seed", str(2**63), "--random-init"],
    ["train", "--seed", "-1"],
    ["projection", "--max-scale", "inf"],
    ["projection", "--max-scale", "1e400"],
    ["similarity", "--scale", "1e400"],
    ["similarity", "--scale", "nan"],
    ["train", "--lr", "1e400"],
    ["norms", "a.pt", "--at-steps", "1.5"],
    ["grid", "--lr", "1e-3", "--jobs", "0"],
])
def test_bad_numbers_are_usage_errors_on_one_line(argv: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    line = _one_error_line(capsys.readouterr().err, argv[0])
    assert line.endswith(f"(see normsat {argv[0]} --help)")


def test_infinity_is_the_exact_limit_only_when_written_as_inf() -> None:
    from empirical.cli.app import build_parser

    parser = build_parser()
    assert parser.parse_args(["similarity", "--scale", "inf"]).scale == float("inf")
    assert parser.parse_args(["similarity", "--scale", "1e300"]).scale == 1e300


def test_an_unbounded_scale_grid_is_refused_before_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["projection", "--scale-step", "1e-9", "--no-saturation", "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err, "projection")
    assert "expected at most 10000 scales in Figure 1, got 4.9e+10" in line


@pytest.mark.parametrize("command", ["similarity", "degree", "heads"])
def test_an_empty_model_name_is_refused(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--model", ""]) == 2
    assert "an empty name (an unset shell variable?)" in _one_error_line(capsys.readouterr().err, command)


@pytest.mark.parametrize("option", [["--num-layers", "2"], ["--random-init"]])
@pytest.mark.parametrize("command", ["similarity", "degree"])
def test_factory_options_follow_one_rule_in_every_command(command: str, option: list[str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The module need not exist: the options are refused before it is imported.
    assert main([command, "--model", "no_such_module_anywhere:make", *option]) == 2
    line = _one_error_line(capsys.readouterr().err, command)
    assert "random_init and num_layers apply to named models and folders only" in line


@pytest.mark.parametrize("option", [["--model", "minilm"], ["--num-layers", "1"],
                                    ["--tokenizer", "tok"]])
def test_heads_run_refuses_model_options(option: list[str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["heads", "--run", str(tmp_path), *option]) == 2
    line = _one_error_line(capsys.readouterr().err, "heads")
    assert f"expected --run without {option[0]}" in line


def test_torch_export_logging_is_silenced_and_debug_shows_it(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    spec = _module(tmp_path, "wrong_shape_factory",
                   "import torch\nfrom torch import nn\n"
                   "def make():\n    return nn.Linear(3, 2), (torch.ones(1, 4),)\n", monkeypatch)
    handler_filters = {id(h): list(h.filters) for h in logging.getLogger("torch").handlers}
    assert main(["degree", "--model", spec, "--quiet"]) == 2
    err = capfd.readouterr().err
    line = _one_error_line(err, "degree")
    assert "torch.export could not trace Linear" in line
    # The filters are removed again: torch logs as before once the command is over.
    assert {id(h): list(h.filters) for h in logging.getLogger("torch").handlers} == handler_filters
    assert main(["degree", "--model", spec, "--quiet", "--debug"]) == 2
    assert "Traceback (most recent call last)" in capfd.readouterr().err


def test_grid_workers_show_warnings_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    saved = warnings.showwarning
    try:
        grid._one_line_warnings_here()  # the pool's initializer, as a worker runs it
        warnings.warn_explicit("a sentence was truncated", UserWarning, "somefile.py", 7)
    finally:
        warnings.showwarning = saved
    assert capsys.readouterr().err == "normsat: warning: a sentence was truncated\n"


def test_norms_names_an_unmatched_glob_and_a_folder_of_checkpoints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["norms", str(tmp_path / "step-*.safetensors")]) == 2
    assert "matched no file (the shell passed it on unexpanded)" in \
        _one_error_line(capsys.readouterr().err, "norms")
    run = tmp_path / "checkpoints"
    run.mkdir()
    for step in (0, 10):
        torch.save({"w": torch.ones(2)}, run / f"step-{step}.pt")
    assert main(["norms", str(run)]) == 2
    line = _one_error_line(capsys.readouterr().err, "norms")
    assert f"got the folder {run}, which holds 2 checkpoints (step-0.pt, step-10.pt); pass the " \
           f"files themselves, e.g. {run}/*" in line
